"""Machine description, the plain-text table and the JSON document."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sqlite3
import subprocess
import sys
from importlib import metadata

from .runner import BODY, Sizes, WorkloadResult
from .workloads import STORE


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total() -> str | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return line.split(":", 1)[1].strip()
    return None


def filesystem_of(path: str) -> dict:
    """Mount point, type, device and options of the filesystem holding ``path`` (Linux)."""
    real = os.path.realpath(path)
    best = None
    for line in _read("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        dev, mnt, fstype, opts = parts[:4]
        mnt = mnt.replace("\\040", " ")
        if real == mnt or real.startswith(mnt.rstrip("/") + "/"):
            if best is None or len(mnt) >= len(best["mount"]):
                best = {"mount": mnt, "type": fstype, "device": dev, "options": opts}
    return {"path": real, **(best or {"mount": None, "type": "unknown", "device": None,
                                      "options": None})}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit(repo: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def git_dirty(repo: str) -> list[str] | None:
    """`git status --porcelain` of the code a benchmark measures (mqcli/, store/, bench/): a
    result is of git_commit only when this is empty."""
    try:  # read-only: --no-optional-locks keeps git status from refreshing the index
        p = subprocess.run(["git", "--no-optional-locks", "-C", repo, "status", "--porcelain",
                            "--", "mqcli", "store", "bench"], capture_output=True, text=True,
                           timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.splitlines() if p.returncode == 0 else None


DIRTY_NOTE = "the working tree differs from git_commit in mqcli/, store/ or bench/ (machine.git_dirty)"


def dirty_notes(info: dict) -> list[str]:
    """The note a suite's results carry when machine_info found the measured code changed."""
    return [DIRTY_NOTE] if info.get("git_dirty") else []


def finished(info: dict) -> dict:
    """machine_info's `info` with the load average at the end of the run (loadavg_end)."""
    return {**info, "loadavg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def busy_notes(info: dict, consequence: str) -> list[str]:
    """The note a suite's results carry when the machine was busy: a 1-minute load average
    above half the usable CPUs at the start or the end of the run (`info` from finished()).
    `consequence` says what that did to this suite's figures."""
    cpus = info.get("cpus_usable") or info.get("cpu_count") or 1
    loads = {when: la[0] for when, la in (("start", info.get("loadavg_start")), ("end", info.get("loadavg_end")))
             if la}
    if not loads or max(loads.values()) <= 0.5 * cpus:
        return []
    measured = ", ".join(f"{load:.1f} at the {when}" for when, load in loads.items())
    return [f"the machine was busy (1-minute load average {measured}, on {cpus} CPUs): {consequence}"]


def memory_fs_notes(info: dict, what: str, consequence: str) -> list[str]:
    """The note a suite's results carry when its temp dirs (`what`) were on a filesystem whose
    fsync is not a real disk's."""
    fs = info["tmp_filesystem"]["type"]
    if fs not in ("tmpfs", "ramfs", "overlay", "unknown"):
        return []
    return [f"{what} are on {fs}: fsync there is not a real disk's{consequence}"]


def machine_info(tmp_root: str, repo: str) -> dict:
    import lmdb

    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory": _mem_total(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_executable": sys.executable,
        "py_lmdb": lmdb.__version__,
        "lmdb": ".".join(map(str, lmdb.version())),
        "sqlite": sqlite3.sqlite_version,
        "persist_queue": _version("persist-queue"),
        "litequeue": _version("litequeue"),
        "mqcli": _version("mqcli"),
        "git_commit": _git_commit(repo),
        "git_dirty": git_dirty(repo),
        "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "tmp_filesystem": filesystem_of(tmp_root),
    }


# --------------------------------------------------------------------------------------


def _fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def _spread(values: list[float], median: float) -> str:
    if len(values) < 2 or median <= 0:
        return "-"
    return f"{(max(values) - min(values)) / median * 100:.0f}%"


def render_table(results: list[WorkloadResult], info: dict, sizes: Sizes, notes: list[str]) -> str:
    fs = info["tmp_filesystem"]
    lines = [
        "mqcli store benchmark  (python -m bench)",
        f"{info['date']}  {info['platform']}  {info['python']}",
        f"{info['cpu_model']}, {info['cpu_count']} CPUs; py-lmdb {info['py_lmdb']} "
        f"(LMDB {info['lmdb']}), SQLite {info['sqlite']}, persist-queue {info['persist_queue']}, "
        f"litequeue {info['litequeue']}",
        f"temp dirs on {fs['path']} ({fs['type']} {fs['device']}); 256-byte bodies; "
        f"median of {sizes.rounds} interleaved rounds; ratio = store / peer",
        "",
    ]
    header = f"{'workload':<42} {'contender':<21} {'msgs':>8} {'msgs/s':>11} {'spread':>7} " \
             f"{'ratio':>8} {'target':>7}  met"
    lines += [header, "-" * len(header)]
    for wr in results:
        wl = wr.workload
        first = True
        order = [STORE] + [n for n in wr.contenders if n != STORE]
        for name in order:
            c = wr.contenders[name]
            title = wl.title.format(batch=wr.batch) if first else ""
            first = False
            if name == STORE:
                ratio = target = met = ""
                if wl.target and wl.target.min_rate is not None:
                    target = f">={_fmt_rate(wl.target.min_rate)}/s"
                    met = "yes" if c.median >= wl.target.min_rate else "NO"
            else:
                ratio = f"{wr.ratio(name):.2f}x"
                if wl.target and wl.target.peer == name:
                    target = f">={wl.target.min_ratio:g}x"
                    met = "yes" if wr.ratio(name) >= wl.target.min_ratio else "NO"
                else:
                    target, met = "context", ""
            lines.append(f"{title:<42} {name:<21} {c.messages:>8,} {_fmt_rate(c.median):>11} "
                         f"{_spread(c.rounds, c.median):>7} {ratio:>8} {target:>7}  {met}")
        for floor in filter(None, (wl.floor, wl.design_floor)):
            bound = wr.bound(floor)
            if bound is not None:
                lines.append(f"{'':<42} ceiling: a store costing exactly the {floor!r} row would be "
                             f"{bound:.2f}x {wl.target.peer} (target >={wl.target.min_ratio:g}x)")
        lines.append("")
    lines.append("spread = (max - min) / median over the rounds.")
    for n in notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def build_json(results: list[WorkloadResult], info: dict, sizes: Sizes, args,
               durability: dict, notes: list[str], elapsed: float) -> dict:
    workloads = {}
    all_met = True
    for wr in results:
        wl = wr.workload
        contenders = {
            name: {
                "operation": c.op,
                "messages": c.messages,
                "msgs_per_s": c.median,
                "msgs_per_s_rounds": c.rounds,
                "msgs_per_s_min": min(c.rounds),
                "msgs_per_s_max": max(c.rounds),
            }
            for name, c in wr.contenders.items()
        }
        ratios = {name: wr.ratio(name) for name in wr.contenders if name != STORE}
        target = None
        if wl.target and wl.target.min_rate is not None:
            rate = wr.contenders[STORE].median
            met = rate >= wl.target.min_rate
            all_met &= met
            target = {"min_rate": wl.target.min_rate, "rate": rate, "met": met}
        elif wl.target:
            r = ratios[wl.target.peer]
            met = r >= wl.target.min_ratio
            all_met &= met
            target = {"peer": wl.target.peer, "min_ratio": wl.target.min_ratio,
                      "ratio": r, "met": met}
            if wl.floor is not None:
                target["bound"] = {"floor": wl.floor, "ratio": wr.bound()}
            if wl.design_floor is not None:
                target["design_bound"] = {"floor": wl.design_floor, "ratio": wr.bound(wl.design_floor)}
        workloads[wl.key] = {
            "title": wl.title.format(batch=wr.batch),
            "messages_per_commit": 1 if wl.size == "single" else wr.batch,
            "messages": wr.messages,
            "results": contenders,
            "ratios": ratios,
            "target": target,
        }
    info = finished(info)
    return {
        "schema": 1,
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "machine": info,
        "parameters": {
            "quick": bool(args.quick),
            "body_bytes": len(BODY),
            "messages_single": sizes.single,
            "messages_batched": sizes.batched,
            "batch": sizes.batch,
            "rounds": sizes.rounds,
            "statistic": "median over rounds; contender order rotated every round; each "
                         "measurement in a fresh temp dir after gc.collect() and os.sync(); "
                         "untimed warm-up pass plus untimed warm-up ops per measurement; "
                         "time.perf_counter",
            "elapsed_s": round(elapsed, 1),
        },
        "durability": durability,
        "workloads": workloads,
        "targets_met": all_met,
        "notes": notes,
    }


def run_suite(args, name: str, run, render, default_out: str, repo: str, log) -> dict:
    """One suite that builds its own document: `run(args, tmp_root, info, log)` in a fresh
    temporary directory (removed after), its table printed by `render`, its JSON saved."""
    import shutil
    import tempfile

    base = args.tmpdir or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    tmp_root = tempfile.mkdtemp(prefix=f"mqcli-bench-{name}-", dir=base)
    try:
        doc = run(args, tmp_root, machine_info(tmp_root, repo), log)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    print()
    print(render(doc))
    save(doc, args.out, default_out, doc["parameters"]["elapsed_s"])
    return doc


def save(doc: dict, out: str | None, default: str, elapsed_s: float) -> str:
    """Write a suite's JSON to `out` (--out) or its default path, say where; return the path."""
    path = os.path.abspath(out or default)
    write_json(doc, path)
    print(f"\nwrote {path}  ({elapsed_s:.0f} s)")
    return path


def write_json(doc: dict, path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
