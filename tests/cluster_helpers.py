"""A real Spark standalone cluster for tests: a Master and Workers, each its own JVM started from
the pyspark package's `bin/spark-class`, on 127.0.0.1, one core and 1 GiB per Worker.

The Workers start executors that run Python workers on this interpreter, with this checkout
first on their path (PYSPARK_PYTHON, PYTHONPATH), as a cluster whose hosts share the
filesystem would. Each Worker has a $TMPDIR of its own (where its executors keep their local
copies of snapshots), as a Worker on another host would.

`hide=DIR` (with `plant={NAME: STORE}`) starts every Worker in a mount namespace of its own
(`unshare -m`, as root) with a tmpfs over DIR holding only copies of the planted stores under
their given names: its executors see DIR as an executor on another host would, where the
stores are missing or another store sits at the same path. Every Worker, not one of them, so
that a read of DIR fails whichever executor runs a task. `unshare_allowed()` says whether this
machine lets a test do that; without it the cluster starts with Workers that see everything.

Each daemon is the leader of a process group of its own; `stop()` ends those groups (the
executors a Worker started are in its group) and nothing else. Each is also sent SIGTERM when
the test process that started it dies (`_die_with_parent`), so a test run killed before its
fixtures stop the cluster leaves no JVM behind.

`ClusterApp` is one Spark application on such a cluster (tests/cluster_driver.py) that runs many
`mqcli analyze ... --master URL` commands: each application start costs a driver JVM, an
executor JVM per Worker and their Python workers (tens of seconds on a busy machine), so the
tests start one where they would start one per command. It holds every Worker core while it
runs: `stop()` it before another application needs executors. With a `local[N]` master it is one
local application serving many commands (tests/test_channel_three_qm.py).
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cli_helpers import Result, checked

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 120.0


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


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the process that started it ends (Linux
    prctl PR_SET_PDEATHSIG, kept across exec), or at once if it ended already."""
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for `proc` to end, else end its process group (it leads one) with SIGKILL."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class StandaloneCluster:
    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 hide: Path | None = None, plant: dict[str, Path] | None = None) -> None:
        import pyspark

        self.root = root
        self.home = Path(pyspark.__file__).resolve().parent
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.hide = hide
        self.plant = plant or {}
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def _env(self) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable,
                "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""),
                "SPARK_LOG_DIR": str(self.root / "logs"), "SPARK_WORKER_DIR": str(self.root / "work")}

    def _daemon(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**self._env(), **(env or {})}, cwd=self.root, start_new_session=True,
                preexec_fn=_die_with_parent))
        self.logs.append(log)
        return log

    def _class(self, *args: str) -> list[str]:
        return [str(self.home / "bin" / "spark-class"), *args]

    def _hidden(self, command: list[str]) -> list[str]:
        """`command` in a mount namespace of its own with a tmpfs over `hide` holding only
        copies of the planted stores."""
        assert self.hide is not None
        steps = [f"mount -t tmpfs -o mode=0700 tmpfs {shlex.quote(str(self.hide))}"]
        for name, store in self.plant.items():
            steps.append(f"cp -a {shlex.quote(str(store))} {shlex.quote(str(self.hide / name))}")
        # sh -c SCRIPT NAME ARGS...: the Worker's command comes in as "$@", word for word
        return ["unshare", "-m", "sh", "-c", " && ".join(steps) + ' && exec "$@"', "worker", *command]

    def _wait(self, log: Path, pattern: str, count: int = 1) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            if len(re.findall(pattern, text)) >= count:
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the standalone cluster did not start ({pattern!r} not in {log}):\n"
                           + (log.read_text(errors="replace")[-3000:] if log.exists() else ""))

    def start(self) -> StandaloneCluster:
        (self.root / "work").mkdir(parents=True, exist_ok=True)
        master = self._daemon("master", self._class(
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(_free_port())))
        self._wait(master, r"I have been elected leader")
        for i in range(self.workers):
            tmp = self.root / f"worker{i}-tmp"
            tmp.mkdir(mode=0o700)
            command = self._class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                  "--webui-port", str(_free_port()), "--cores", str(self.cores),
                                  "--memory", self.memory, "--work-dir", str(self.root / "work"), self.url)
            self._daemon(f"worker{i}", self._hidden(command) if self.hide is not None else command,
                         {"TMPDIR": str(tmp)})
        self._wait(master, r"Registering worker", self.workers)
        return self

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for p in reversed(self.procs):
            _wait_or_kill(p, 20)
        self.procs.clear()


class ClusterApp:
    """One application on the cluster at `url`, running each command as `mqcli ARGS --master
    URL` would (tests/cluster_driver.py); started by `start` or the first `run` after a `stop`."""

    def __init__(self, url: str, root: Path, env: dict[str, str] | None = None) -> None:
        self.url = url
        self.root = root
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "cluster-app.log"
        self._buffer = b""

    def run(self, args: list[Any], timeout: float = 600) -> Result:
        """`mqcli ARGS --master URL` in this application (tests/cli_helpers.py `Result`)."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        argv = [*map(str, args), "--master", self.url]
        self.proc.stdin.write(json.dumps(argv).encode() + b"\n")
        self.proc.stdin.flush()
        doc = json.loads(self._line(timeout))
        return checked(Result(doc["code"], doc["stdout"].encode("utf-8"), doc["stderr"], argv))

    def start(self) -> ClusterApp:
        """Start the application's driver (its JVM and executors come up while the caller goes on)."""
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), **self.env}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "cluster_driver.py"), self.url],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                         cwd=self.root, start_new_session=True, preexec_fn=_die_with_parent)
        return self

    def _line(self, timeout: float) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
                self.stop()
                raise RuntimeError(f"the cluster application gave no answer ({'timed out' if not ready else 'ended'}):\n"
                                   + tail)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def stop(self) -> None:
        """End the application (its driver stops the session at end of input); idempotent."""
        proc, self.proc, self._buffer = self.proc, None, b""
        if proc is None:
            return
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        _wait_or_kill(proc, 60)
        proc.stdout.close()
