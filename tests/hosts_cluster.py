"""A Spark standalone cluster whose Worker can run in a mount namespace of its own (`unshare -m`
the pyspark package (`bin/spark-class`), separate JVMs on 127.0.0.1, 1 core and 1 GiB each,
stopped by the caller (`Cluster.stop`).

`Cluster.worker(hide=DIR, plant={NAME: STORE})` starts a Worker in its own mount namespace
(`unshare -m`, as root) with a tmpfs over DIR: the Worker and its executors see DIR empty (or
holding only the planted copies), as an executor on another host would. `unshare_allowed()`
says whether this machine lets the test do that.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unshare_allowed() -> str | None:
    """None when `unshare -m` with a tmpfs mount works here, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare -m with a tmpfs mount is not allowed here: {probe.stderr.strip()[:200]}"
    return None


class Cluster:
    """A Master on 127.0.0.1 and the Workers started with `worker()`."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOG_DIR": str(work / "logs"), "SPARK_WORKER_DIR": str(work / "worker"),
                    "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        (work / "logs").mkdir(parents=True, exist_ok=True)
        self._start("master", self._class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                          "--port", str(self.port), "--webui-port", str(self.ui)))
        self._wait(lambda state: True, "the Master")

    @staticmethod
    def _class(*args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), *args]

    def _start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.work / "logs" / f"{name}.out", "wb")
        with log:
            self.procs.append(subprocess.Popen(command, env={**self.env, **(env or {})}, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))

    def state(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            return None

    def _wait(self, ready, what: str, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if state is not None and ready(state):
                return
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"{what} exited; see {self.work / 'logs'}")
            time.sleep(1)
        raise RuntimeError(f"{what} did not start in {timeout:.0f}s; see {self.work / 'logs'}")

    def worker(self, hide: Path | None = None, plant: dict[str, Path] | None = None) -> None:
        """Start a Worker (1 core, 1 GiB); with `hide`, in its own mount namespace with a tmpfs
        over `hide` holding only copies of the `plant` stores (under their given names), and a
        $TMPDIR of its own (where executors keep their local copies of snapshots)."""
        n = len(self.procs)
        command = self._class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                              "--memory", "1g", "--webui-port", str(_free_port()),
                              "--work-dir", str(self.work / f"worker{n}"), self.url)
        if hide is not None:
            steps = [f"mount -t tmpfs -o mode=0700 tmpfs {shlex.quote(str(hide))}"]
            for name, store in (plant or {}).items():
                steps.append(f"cp -a {shlex.quote(str(store))} {shlex.quote(str(hide / name))}")
            # sh -c SCRIPT NAME ARGS...: the Worker's command comes in as "$@", word for word
            command = ["unshare", "-m", "sh", "-c", " && ".join(steps) + ' && exec "$@"', "worker", *command]
        tmp = self.work / f"worker{n}-tmp"
        tmp.mkdir(mode=0o700)
        self._start(f"worker{n}", command, {"TMPDIR": str(tmp)})
        want = len(self.procs) - 1  # every process but the Master is a Worker
        self._wait(lambda s: len([w for w in s.get("workers", []) if w.get("state") == "ALIVE"]) >= want,
                   "a Worker")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
