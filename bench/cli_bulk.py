"""python -m bench cli, part 2: bulk `put --jsonl` and `get --all -o jsonl`, against a
library-only child doing the same work; and the children it runs (`python -m bench.cli_bulk
_child lib-put STORE QUEUE FILE | lib-get STORE QUEUE`)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from .cli_common import (
    REPO, QUEUE, BODY, MB, BenchError, CliSizes, _child_env, _depth, _new_store, _stats, _sync, _target_result, mqcli_path, run_child,
)

# --------------------------------------------------------------------------------------
# 2. bulk put --jsonl / get --all -o jsonl
# --------------------------------------------------------------------------------------

def _child_lib_put(store_path: str, queue: str, path: str) -> dict:
    """The same work as `mqcli put q --jsonl FILE`, without the command line."""
    t0 = time.perf_counter()
    from store import Message, Store

    t_import = time.perf_counter() - t0
    parse = store_s = 0.0
    n = 0
    loads, from_dict = json.loads, Message.from_dict
    with Store.open(store_path) as st, open(path, "rb") as f:
        batch: list = []
        a = time.perf_counter()
        for line in f:
            if not line.strip():
                continue
            batch.append(from_dict(loads(line)))
            if len(batch) == 1000:
                b = time.perf_counter()
                parse += b - a
                n += len(st.import_messages(queue, batch))
                batch = []
                a = time.perf_counter()
                store_s += a - b
        b = time.perf_counter()
        parse += b - a
        if batch:
            n += len(st.import_messages(queue, batch))
        store_s += time.perf_counter() - b
    return {"messages": n, "import_s": t_import, "parse_s": parse, "store_s": store_s,
            "in_process_s": time.perf_counter() - t0}


def _child_lib_get(store_path: str, queue: str) -> dict:
    """The same work as `mqcli get q --all -o jsonl > /dev/null`, without the command line."""
    t0 = time.perf_counter()
    from store import Store, errors

    t_import = time.perf_counter() - t0
    encode = 0.0
    n = 0
    dumps = json.dumps
    with Store.open(store_path) as st, open(os.devnull, "wb") as out:
        def deliver(msgs) -> None:
            nonlocal encode
            a = time.perf_counter()
            out.write(b"".join(dumps(m.to_dict(), ensure_ascii=False, separators=(", ", ": "))
                               .encode("utf-8") + b"\n" for m in msgs))
            out.flush()
            encode += time.perf_counter() - a

        a = time.perf_counter()
        try:
            n = st.get_batches(queue, deliver, batch=1000)  # as `mqcli get --all`
        except errors.Timeout:
            pass
        loop = time.perf_counter() - a
    return {"messages": n, "import_s": t_import, "encode_s": encode, "store_s": loop - encode,
            "in_process_s": time.perf_counter() - t0}


def bulk_commands(py: str, mq: str, store_path: str, jsonl: str) -> dict:
    lib = [py, "-m", "bench.cli_bulk", "_child"]
    return {
        "mqcli": {
            "put": ([mq, "put", QUEUE, "--jsonl", jsonl], "mqcli put q --jsonl FILE > /dev/null"),
            "get": ([mq, "get", QUEUE, "--all", "-o", "jsonl"], "mqcli get q --all -o jsonl > /dev/null"),
        },
        "library": {
            "put": (lib + ["lib-put", store_path, QUEUE, jsonl],
                    "json.loads + Message.from_dict + st.import_messages per 1,000"),
            "get": (lib + ["lib-get", store_path, QUEUE],
                    "st.get_batches(q, deliver, batch=1000) + to_dict + json.dumps > /dev/null"),
        },
    }


def _profile(py: str, argv_tail: list[str], env: dict, work: str, top: int = 15) -> dict:
    import pstats

    prof = os.path.join(work, "profile.out")
    run_child([py, "-m", "cProfile", "-o", prof, "-m", "mqcli"] + argv_tail, env, work)
    st = pstats.Stats(prof)
    rows = []
    for (fname, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        short = fname.replace(REPO + os.sep, "").replace(sys.prefix, "<venv>")
        rows.append({"function": f"{short}:{line}({func})", "ncalls": nc, "tottime_s": tt,
                     "cumtime_s": ct})
    total = st.total_tt  # type: ignore[attr-defined]
    os.unlink(prof)
    return {"command": "python -m cProfile -m mqcli " + " ".join(argv_tail),
            "total_s": total,
            "top_tottime": sorted(rows, key=lambda r: -r["tottime_s"])[:top],
            "top_cumtime": sorted(rows, key=lambda r: -r["cumtime_s"])[:top],
            "note": "cProfile slows pure-Python code several-fold; read shares, not seconds"}


def run_bulk(sizes: CliSizes, tmp_root: str, log, profile: bool = False) -> dict:
    from store import NewMessage, Store

    py, mq = sys.executable, mqcli_path()
    n = sizes.bulk
    work = tempfile.mkdtemp(prefix="bulk-", dir=tmp_root)
    src = os.path.join(work, "src-store")
    jsonl = os.path.join(work, "messages.jsonl")
    log(f"bulk: preparing {n:,} messages (store library put_many, then mqcli get src --all "
        "-o jsonl > FILE; untimed)")
    with Store.open(src, create=True, name="bench") as st:
        st.create_queue("src")
        left = n
        while left:
            k = min(1000, left)
            st.put_many("src", [NewMessage(BODY) for _ in range(k)])
            left -= k
    with open(jsonl, "wb") as f:
        prep = run_child([mq, "get", "src", "--all", "-o", "jsonl"], _child_env(src), work,
                         stdout=f)
    with open(jsonl, "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    if lines != n:
        raise BenchError(f"JSONL file has {lines} lines, expected {n}")
    shutil.rmtree(src, ignore_errors=True)
    file_bytes = os.path.getsize(jsonl)

    contenders = ["mqcli", "library"]
    res: dict = {c: {op: {"seconds": [], "max_rss_kb": [], "rss_anon_peak_kb": [],
                          "rss_file_peak_kb": [], "phases": []} for op in ("put", "get")}
                 for c in contenders}
    for r in range(sizes.bulk_rounds):
        k = r % len(contenders)
        for c in contenders[k:] + contenders[:k]:
            store_path = os.path.join(work, f"store-{r}-{c}")
            _new_store(store_path)
            env = _child_env(store_path)
            cmds = bulk_commands(py, mq, store_path, jsonl)[c]
            for op, want_after in (("put", n), ("get", 0)):
                _sync()
                run = run_child(cmds[op][0], env, work, capture=(c == "library"),
                                cwd=REPO if c == "library" else None, rss=True)
                got = _depth(store_path, QUEUE)
                if got != want_after:
                    raise BenchError(f"{c} {op}: queue depth {got} after, expected {want_after}")
                rec = res[c][op]
                rec["seconds"].append(run.seconds)
                rec["max_rss_kb"].append(run.max_rss_kb)
                rec["rss_anon_peak_kb"].append(run.rss_anon_peak_kb)
                rec["rss_file_peak_kb"].append(run.rss_file_peak_kb)
                if c == "library":
                    phases = json.loads(run.stdout)
                    if phases["messages"] != n:
                        raise BenchError(f"library {op}: {phases['messages']} messages, expected {n}")
                    rec["phases"].append(phases)
                log(f"  round {r + 1}/{sizes.bulk_rounds}  {c:<8} {op}  {n / run.seconds:>10,.0f} msg/s"
                    f"  max RSS {run.max_rss_kb * 1024 / MB:6.1f} MB")
            shutil.rmtree(store_path, ignore_errors=True)

    out: dict = {"messages": n, "rounds": sizes.bulk_rounds, "body_bytes": len(BODY),
                 "jsonl_bytes": file_bytes,
                 "prepare": {"how": "store library put_many x1000 into queue src, then mqcli get "
                                    "src --all -o jsonl > FILE (untimed)",
                             "get_seconds": prep.seconds},
                 "results": {}}
    for c in contenders:
        cmds = bulk_commands(py, mq, "STORE", "FILE")[c]
        out["results"][c] = {}
        for op in ("put", "get"):
            rec = res[c][op]
            rates = [n / s for s in rec["seconds"]]
            st = _stats(rates)
            entry = {
                "role": "target" if c == "mqcli" else "context",
                "operation": cmds[op][1],
                "msgs_per_s": st["median"], "msgs_per_s_rounds": rates,
                "msgs_per_s_min": st["min"], "msgs_per_s_max": st["max"], "spread": st["spread"],
                "seconds_rounds": rec["seconds"],
                "max_rss_mb": max(rec["max_rss_kb"]) * 1024 / MB,
                "max_rss_kb_rounds": rec["max_rss_kb"],
                "rss_anon_peak_mb": _mb_max(rec["rss_anon_peak_kb"]),
                "rss_file_peak_mb": _mb_max(rec["rss_file_peak_kb"]),
            }
            if rec["phases"]:
                entry["phases_median_s"] = {
                    key: statistics.median(p[key] for p in rec["phases"])
                    for key in rec["phases"][0] if key.endswith("_s")}
            out["results"][c][op] = entry
    out["targets"] = {
        "bulk_put_rate": _target_result("bulk_put_rate", out["results"]["mqcli"]["put"]["msgs_per_s"]),
        "bulk_get_rate": _target_result("bulk_get_rate", out["results"]["mqcli"]["get"]["msgs_per_s"]),
        "bulk_put_max_rss": _target_result("bulk_put_max_rss", out["results"]["mqcli"]["put"]["max_rss_mb"]),
        "bulk_get_max_rss": _target_result("bulk_get_max_rss", out["results"]["mqcli"]["get"]["max_rss_mb"]),
    }
    out["memory_note"] = ("max RSS counts LMDB's file-backed map pages the process touched "
                          "(rss_file_peak_mb, shared with the page cache) besides its own heap "
                          "(rss_anon_peak_mb); both peaks are sampled every 20 ms, so they are "
                          "approximate and need not add up to max RSS")
    if profile:
        log("  profiling mqcli put --jsonl and get --all under cProfile (untimed)")
        store_path = os.path.join(work, "store-profile")
        _new_store(store_path)
        env = _child_env(store_path)
        out["profile"] = {
            "put": _profile(py, ["put", QUEUE, "--jsonl", jsonl], env, work),
            "get": _profile(py, ["get", QUEUE, "--all", "-o", "jsonl"], env, work),
        }
    shutil.rmtree(work, ignore_errors=True)
    return out


def _mb_max(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) * 1024 / MB if vals else None


# --------------------------------------------------------------------------------------
# children: python -m bench.cli_bulk _child lib-put STORE QUEUE FILE | lib-get STORE QUEUE
# --------------------------------------------------------------------------------------

def _child_main(argv: list[str]) -> int:
    if argv[:1] == ["lib-put"] and len(argv) == 4:
        doc = _child_lib_put(*argv[1:])
    elif argv[:1] == ["lib-get"] and len(argv) == 3:
        doc = _child_lib_get(*argv[1:])
    else:
        sys.stderr.write(f"usage: python -m bench.cli_bulk _child lib-put STORE QUEUE FILE | "
                         f"lib-get STORE QUEUE (got {argv})\n")
        return 2
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_child"]:
        sys.exit(_child_main(sys.argv[2:]))
    sys.exit("run the CLI suite with `python -m bench cli`")
