"""python -m bench analytics: `analyze routes` on Spark against the same work in one Python process.

The data: three stores (queue managers A, B, C), each with a queue `reports` holding the trace
reports of the events that happened there (made with store/trace.py's encoders and put with
`Store.import_messages`, express, 10,000 a commit, so each keeps its event time as its put
time). Traced messages take these routes (seeded, so every build is the same):

- 80% A → B → C, delivered (5 reports: enqueued and sent at A, received and sent at B,
  received at C);
- 10% A → B, still on the way (3 reports: not complete);
- 5% A → B → A → C, a loop (7 reports);
- 5% local at A (1 report).

Link latencies are drawn per link from log-normal distributions with different medians. The
stores are built once per (reports, seed) and kept under `<tmpdir>/mqcli-bench-analytics/`
(`--rebuild` makes them again); before each pass the store files are read once so that both
passes find them in the page cache.

Two passes over the same stores, in one run:

- spark: `store.analytics.routes` over the `mqstore` source (the columns, the property and
  class=report asked for, labels and bodies decoded by the source as it reads, as `mqcli
  analyze routes` does) in the embedded session (`local[*]`, or `--master`); timed from the
  read to the collected links and summary (one job, `Routes.totals`). After the rounds, the
  read alone (the same read and decoding, then a count) is timed once: the floor of any Spark
  job over that read. Starting the session (the JVM, the
  first Python workers are started by the query) is measured apart.
- python: one process reads every record (`store.records.decode`), decodes each report's label
  and body with the decoders the Spark source uses for the part after a fixed-width head
  (store/analytics/report_fields.py: store/trace.py's decoders, every documented form, once
  per distinct text after that head), rebuilds routes and links the same way and computes
  exact nearest-rank percentiles. It stays pure Python, a script's way: the source decodes a
  batch of records at once with numpy (store/analytics/record_arrays.py), which is part of
  what Spark brings.

Both must agree (routes, complete, loops, per-link counts; percentiles within the approximate
percentile's error), else the run fails. Rate = reports / seconds. Target: spark ≥ 2× python.

The synthetic stores are only as true as their model of a transfer, so each run also moves a
sample of traced messages A → B → C through three real stores with the code a real transfer
uses (`Store.outgoing_take`, `receive` at the next hop, `outgoing_done`; the reports travel
back to A the same way) and checks that the reports come in the model's order (enqueued and
sent at A, received and sent at B, received at C) and that no step goes back in time (`sent`
is stamped at the take, before the next hop's `received`). A sample that does not is a
problem of the run, like a disagreement of the passes.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import datetime, timezone

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join("bench", "results", "analytics.json")
DEFAULT_REPORTS = 2_000_000
QUICK_REPORTS = 20_000
TARGET_RATIO = 2.0  # issue 20: routes at least twice the one-process pass on 2 cores
QUEUE = "reports"
CACHE_DIR = "mqcli-bench-analytics"
FORMAT = 1  # bump when the data layout changes: cached stores of another format are rebuilt
BATCH = 10_000
START_US = 1_700_000_000_000_000
LINK_MEDIAN_US = {("A", "B"): 2_000, ("B", "C"): 5_000, ("B", "A"): 3_000, ("A", "C"): 8_000}
QMS = ("A", "B", "C")


# --------------------------------------------------------------------------------------
# the stores
# --------------------------------------------------------------------------------------

def _routes_for(rng: random.Random) -> list[str]:
    x = rng.random()
    if x < 0.80:
        return ["A", "B", "C"]
    if x < 0.90:
        return ["A", "B"]  # still on its way: not delivered
    if x < 0.95:
        return ["A", "B", "A", "C"]
    return ["A"]


def build_stores(root: str, reports: int, seed: int, log) -> dict:
    """Make (or find) the stores; return their description (paths, counts)."""
    from store import Store
    from store.records import Message, guid_bytes
    from store.trace import encode_body, encode_label

    key = f"v{FORMAT}-{reports}-{seed}"
    folder = os.path.join(root, key)
    marker = os.path.join(folder, "complete.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            desc = json.load(f)
        log(f"stores: cached in {folder}")
        desc["built_s"] = None
        return desc
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    t0 = time.perf_counter()
    rng = random.Random(seed)
    guids = {qm: str(uuid.UUID(int=rng.getrandbits(128), version=4)) for qm in QMS}
    stores = {qm: Store.open(os.path.join(folder, f"qm{qm}"), create=True, name=f"qm{qm}") for qm in QMS}
    pending: dict[str, list] = {qm: [] for qm in QMS}
    counters = {qm: 0 for qm in QMS}
    made = routes = complete = loops = 0
    origin = guids["A"]
    qm_id = origin[:4].upper()
    target = "DIRECT=OS:qmC\\orders"
    try:
        for st in stores.values():
            st.create_queue(QUEUE)
        t = START_US
        msg_n = 0
        while made < reports:
            path = _routes_for(rng)
            events = _events(path, t, rng)
            if made + len(events) > reports:
                path, events = ["A"], _events(["A"], t, rng)
            msg_n += 1
            t += 50
            routes += 1
            complete += path[-1] in ("C",) or path == ["A"]
            loops += path == ["A", "B", "A", "C"]
            message_id = msg_n & 0xFFFFFFFF
            body = encode_body(message_id, target).encode("utf-8")
            correl = f"{origin}\\{msg_n}"
            for hops, qm, event, when, delivered in events:
                counters[qm] += 1
                stamp = datetime.fromtimestamp(when / 1e6, tz=timezone.utc)
                pending[qm].append(Message(
                    body=body, origin=guid_bytes(guids[qm]), msg_n=counters[qm], put_time=when,
                    correl_id=correl, label=encode_label(qm_id, message_id, hops, guids[qm], stamp),
                    props={"mqcli.event": event, "mqcli.delivered": "true" if delivered else "false"},
                    report=True, express=True, dead_letter=False))
                if len(pending[qm]) >= BATCH:
                    stores[qm].import_messages(QUEUE, pending[qm])
                    pending[qm] = []
            made += len(events)
            if routes % 50_000 == 0:
                log(f"  built {made:,} of {reports:,} reports")
        for qm in QMS:
            if pending[qm]:
                stores[qm].import_messages(QUEUE, pending[qm])
    finally:
        for st in stores.values():
            st.close()
    desc = {"paths": [os.path.join(folder, f"qm{qm}") for qm in QMS], "guids": guids,
            "reports": made, "routes": routes, "complete": complete, "loops": loops,
            "per_store": {qm: counters[qm] for qm in QMS}, "seed": seed}
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(desc, f)
    desc["built_s"] = round(time.perf_counter() - t0, 1)
    log(f"stores: built {made:,} reports in {desc['built_s']} s in {folder}")
    return desc


def _events(path: list[str], start: int, rng: random.Random) -> list[tuple[int, str, str, int, bool]]:
    """(hops, queue manager, event, time µs, delivered) of one traced message's reports."""
    delivered_at_end = path[-1] == "C" or path == ["A"]
    out = [(0, path[0], "enqueued", start, path == ["A"])]
    t = start
    for hop in range(1, len(path)):
        t += rng.randint(20, 200)
        out.append((hop - 1, path[hop - 1], "sent", t, False))
        median = LINK_MEDIAN_US[(path[hop - 1], path[hop])]
        t += max(1, int(rng.lognormvariate(math.log(median), 0.5)))
        last = hop == len(path) - 1
        out.append((hop, path[hop], "received", t, last and delivered_at_end))
    return out


SAMPLE_MESSAGES = 50
_NEXT_HOP = {"A": {"qmB": "B", "qmC": "B"}, "B": {"qmC": "C", "qmA": "A"}, "C": {"qmA": "B"}}


def real_sample(root: str, messages: int = SAMPLE_MESSAGES) -> dict:
    """Traced messages A → B → C through real stores and the transfer's own calls (see the
    docstring); their routes' event order and the least step and link latency in µs."""
    from store import NewMessage, Store
    from store.links import generate_key_file
    from store.reports import describe, route

    folder = tempfile.mkdtemp(prefix="sample-", dir=root)
    try:
        key = str(generate_key_file(os.path.join(folder, "k.key")))
        stores = {qm: Store.open(os.path.join(folder, f"qm{qm}"), create=True, name=f"qm{qm}") for qm in QMS}
        try:
            stores["A"].create_queue(QUEUE)
            stores["C"].create_queue("orders")
            for qm, hops in _NEXT_HOP.items():
                for name in hops:
                    stores[qm].add_link(name, "127.0.0.1:9", key)
            sent = stores["A"].put_many("DIRECT=OS:qmC\\orders", [
                NewMessage(b"sample %d" % i, trace=True, report_queue=QUEUE) for i in range(messages)])
            moved = True
            while moved:  # until every message and report is where it goes
                moved = False
                for qm, st in stores.items():
                    for out in st.outgoing_list():
                        taken = st.outgoing_take(out.name, 16)
                        while taken is not None:
                            peer = stores[_NEXT_HOP[qm][out.destination_qm]]
                            peer.receive(st.info().guid, taken.items, taken.incarnation, taken.sent_at)
                            st.outgoing_done(out.name, taken.token)
                            moved = True
                            taken = st.outgoing_take(out.name, 16)
            guids = {qm: st.info().guid for qm, st in stores.items()}
            rows = [describe(m) for m in stores["A"].browse(QUEUE)]
        finally:
            for st in stores.values():
                st.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_msg: dict[str, list] = defaultdict(list)
    for r in rows:
        by_msg[r["msg_id"]].append(r)
    model = [(hops, guids[qm], event) for hops, qm, event, _, _ in _events(["A", "B", "C"], 0, random.Random(0))]
    in_order = 0
    steps_min: int | None = None
    link_min: dict[str, int] = {}
    for m in sent:
        steps = route(by_msg.get(m.msg_id, []))
        in_order += [(r["hops"], r["computer"], r["event"]) for r in steps] == model
        gaps = [r["since_previous_us"] for r in steps[1:]]
        if gaps:
            steps_min = min(gaps) if steps_min is None else min(steps_min, *gaps)
        at = {(r["hops"], r["event"]): r["time"] for r in steps}
        for k, (a, b) in enumerate((("A", "B"), ("B", "C"))):
            if (k, "sent") in at and (k + 1, "received") in at:
                link = f"qm{a}>qm{b}"
                latency = at[(k + 1, "received")] - at[(k, "sent")]
                link_min[link] = min(link_min.get(link, latency), latency)
    return {"messages": messages, "routes_in_model_order": in_order, "least_step_us": steps_min,
            "least_link_latency_us": link_min}


def sample_problems(sample: dict) -> list[str]:
    problems = []
    if sample["routes_in_model_order"] != sample["messages"]:
        problems.append(f"real sample: {sample['messages'] - sample['routes_in_model_order']} of "
                        f"{sample['messages']} routes differ from the synthetic model's events")
    if (sample["least_step_us"] is None or sample["least_step_us"] < 0
            or any(v < 0 for v in sample["least_link_latency_us"].values())):
        problems.append(f"real sample: a route goes back in time ({sample})")
    return problems


def tree_cpu_seconds() -> float | None:
    """CPU seconds (user + system) of this process and every descendant, live ones and those
    already waited for (/proc; None elsewhere): Spark's JVM and its Python workers are this
    process's descendants, so the difference over a pass is what the pass cost in CPU, which a
    busy machine inflates far less than wall time."""
    if not os.path.isdir("/proc/self"):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = defaultdict(list)
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        children[int(fields[1])].append(int(entry))
        times[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += children.get(pid, [])
    return total / tick


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process alone."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def warm(paths: list[str]) -> None:
    """Read the store files once so both passes start from the page cache."""
    for p in paths:
        with open(os.path.join(p, "data.mdb"), "rb") as f:
            while f.read(1 << 22):
                pass


# --------------------------------------------------------------------------------------
# the passes
# --------------------------------------------------------------------------------------

def nearest_rank(values: list[int], p: float) -> int:
    return values[max(0, math.ceil(p * len(values)) - 1)]


def python_pass(paths: list[str]) -> dict:
    """The routes of every trace report in the stores, in this process (see the docstring)."""
    from store.analytics.report_fields import body_queue, label_fields
    from store.analytics.scan import open_readonly
    from store.records import decode

    reports = invalid = 0
    # route → (hops, computer) → [first_t, last_t, sent_t, delivered_t]
    routes: dict[object, dict[tuple[int, str], list]] = defaultdict(dict)
    for path in paths:
        with open_readonly(path) as (env, dbs):
            for table in ("pos", "msg"):
                with env.begin() as lt:
                    for raw in lt.cursor(db=dbs[table]).iternext(keys=False):
                        m = decode(raw)
                        if not m.report:
                            continue
                        reports += 1
                        # the label and body decoded as the Spark pass's source decodes them
                        route, hops, computer, label_event = label_fields(m.label)
                        if route is None:
                            invalid += label_event != "conflict"
                            continue
                        body_queue(m.body)  # a step's target queue (Spark groups by it)
                        key = m.correl_id or route
                        t = m.put_time
                        event = m.props.get("mqcli.event")
                        delivered = m.props.get("mqcli.delivered") == "true"
                        step = routes[key].get((hops, computer))
                        if step is None:
                            routes[key][(hops, computer)] = [
                                t, t, t if event == "sent" else None, t if delivered else None]
                            continue
                        if t < step[0]:
                            step[0] = t
                        if t > step[1]:
                            step[1] = t
                        if event == "sent" and (step[2] is None or t > step[2]):
                            step[2] = t
                        if delivered and (step[3] is None or t < step[3]):
                            step[3] = t
    complete = loops = 0
    latencies: dict[tuple[str, str], list[int]] = defaultdict(list)
    for steps in routes.values():
        ordered = sorted(((hops, s[0], computer, s) for (hops, computer), s in steps.items()))
        path = [computer for _, _, computer, _ in ordered]
        complete += any(s[3] is not None for *_, s in ordered)
        loops += len(set(path)) < len(path)
        for (h1, _, c1, s1), (h2, _, c2, s2) in zip(ordered, ordered[1:]):
            if h2 - h1 == 1:
                latencies[(c1, c2)].append(s2[0] - (s1[2] if s1[2] is not None else s1[1]))
    links = {}
    for (a, b), values in latencies.items():
        values.sort()
        links[f"{a}>{b}"] = {"count": len(values), "p50_ms": nearest_rank(values, 0.5) / 1000,
                             "p95_ms": nearest_rank(values, 0.95) / 1000,
                             "p99_ms": nearest_rank(values, 0.99) / 1000}
    return {"reports": reports, "invalid_reports": invalid, "routes": len(routes),
            "complete": complete, "loops": loops, "links": links}


def _reports(spark, paths: list[str]):
    """The reports as `analyze routes` reads them from stores: the columns it uses, its
    property, class=report, labels and bodies decoded by the source."""
    from store.analytics.routes import PROPERTIES_USED, SOURCE_COLUMNS_USED

    return (spark.read.format("mqstore").option("class", "report")
            .option("columns", ",".join(SOURCE_COLUMNS_USED))
            .option("properties", ",".join(PROPERTIES_USED)).load(paths))


def spark_read_floor(spark, paths: list[str]) -> int:
    """The read alone: every report read and decoded by the source as spark_pass reads them,
    then only counted (no shuffle). What any Spark job over these reports costs at least."""
    from pyspark.sql import functions as F

    row = _reports(spark, paths).agg(F.count("trace_route").alias("n"), F.max("trace_hops")).first()
    return int(row["n"])


def spark_pass(spark, paths: list[str]) -> dict:
    from store.analytics.routes import routes

    # links and summary, as the Python pass computes them: one job, nothing kept for listing
    # routes (`analyze routes` keeps the steps in memory for its listings of routes)
    result = routes(_reports(spark, paths), cache=False)
    try:
        rows, summary = result.totals()
        links = {f"{r['from_qm']}>{r['to_qm']}": {"count": r["count"], "p50_ms": r["p50_ms"],
                                                  "p95_ms": r["p95_ms"], "p99_ms": r["p99_ms"]}
                 for r in rows}
    finally:
        result.unpersist()
    return {"reports": summary["reports"], "invalid_reports": summary["invalid_reports"],
            "routes": summary["routes"], "complete": summary["complete"],
            "loops": summary["loops"], "links": links}


PUSHDOWN_QUEUES = 20
PUSHDOWN_QUEUE = "orders"


def build_pushdown_store(root: str, reports: int, log) -> dict:
    """A store of PUSHDOWN_QUEUES queues (`orders` one of them), reports // 100 messages each,
    one a second of put time: what the pushdown query reads (cached like the route stores)."""
    from store import Store
    from store.records import Message

    per_queue = max(1_000, reports // 100)
    folder = os.path.join(root, f"pushdown-v{FORMAT}-{per_queue}")
    marker = os.path.join(folder, "complete.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            return json.load(f)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    path = os.path.join(folder, "qm")
    names = [f"q{i:02d}" for i in range(PUSHDOWN_QUEUES - 1)] + [PUSHDOWN_QUEUE]
    t0 = time.perf_counter()
    with Store.open(path, create=True, name="qmP") as st:
        n = 0
        for name in names:
            st.create_queue(name)
            for lo in range(0, per_queue, BATCH):
                batch = []
                for i in range(lo, min(per_queue, lo + BATCH)):
                    n += 1
                    batch.append(Message(body=b"x" * 64, origin=b"\x01" * 16, msg_n=n,
                                         put_time=START_US + i * 1_000_000, express=True))
                st.import_messages(name, batch)
    desc = {"path": path, "queues": PUSHDOWN_QUEUES, "per_queue": per_queue,
            "after_us": START_US + (per_queue // 2) * 1_000_000}
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(desc, f)
    log(f"pushdown store: {PUSHDOWN_QUEUES} x {per_queue:,} messages in {time.perf_counter() - t0:.1f} s")
    return desc


def pushdown_pass(spark, desc: dict) -> dict:
    """`.where("queue = 'orders' AND put_time > T")` counted, with the source taking the filters
    and without (Spark filtering every row of every queue), in the same session."""
    after = datetime.fromtimestamp(desc["after_us"] / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    where = f"queue = '{PUSHDOWN_QUEUE}' AND put_time > TIMESTAMP '{after}'"
    parallelism = str(spark.sparkContext.defaultParallelism)
    out = {"query": f".where(\"{where}\").count()", "messages": desc["queues"] * desc["per_queue"]}
    # two rounds, alternating, best of each: the first query on a new store starts Python
    # workers (seconds on a busy machine), whichever way it reads
    times: dict[str, list[float]] = {"with_pushdown": [], "without_pushdown": []}
    for label, flag in (("with_pushdown", "true"), ("without_pushdown", "false")) * 2:
        warm([desc["path"]])
        t = time.perf_counter()
        n = (spark.read.format("mqstore").option("pushdown", flag).option("partitions", parallelism)
             .option("columns", "queue,put_time,seq").load(desc["path"]).where(where).count())
        times[label].append(time.perf_counter() - t)
        out[label + "_rows"] = n
    for label, seconds in times.items():
        out[label + "_s"] = round(min(seconds), 2)
        out[label + "_rounds_s"] = [round(x, 2) for x in seconds]
    out["speedup"] = round(out["without_pushdown_s"] / out["with_pushdown_s"], 2)
    return out


def compare(spark: dict, python: dict) -> list[str]:
    """How the two passes disagree (nothing when they agree)."""
    problems = [f"{k}: spark {spark[k]} != python {python[k]}"
                for k in ("reports", "invalid_reports", "routes", "complete", "loops") if spark[k] != python[k]]
    if set(spark["links"]) != set(python["links"]):
        problems.append(f"links: spark {sorted(spark['links'])} != python {sorted(python['links'])}")
        return problems
    for link, s in spark["links"].items():
        p = python["links"][link]
        if s["count"] != p["count"]:
            problems.append(f"{link} count: spark {s['count']} != python {p['count']}")
        for q in ("p50_ms", "p95_ms", "p99_ms"):
            # percentile_approx(accuracy 10,000) may be off by 0.01% of the rank
            if abs(s[q] - p[q]) > max(0.02 * abs(p[q]), 0.01):
                problems.append(f"{link} {q}: spark {s[q]} vs python {p[q]}")
    return problems


# --------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------

def run(args, info: dict, log) -> dict:
    from store.analytics import require
    from store.analytics.session import new_session

    require()
    reports = args.reports or (QUICK_REPORTS if args.quick else DEFAULT_REPORTS)
    rounds = args.rounds or 1
    root = os.path.join(args.tmpdir or tempfile.gettempdir(), CACHE_DIR)
    os.makedirs(root, exist_ok=True)
    if args.rebuild:
        shutil.rmtree(os.path.join(root, f"v{FORMAT}-{reports}-{args.seed}"), ignore_errors=True)
    desc = build_stores(root, reports, args.seed, log)
    paths = desc["paths"]
    sample = real_sample(root)
    log(f"real sample: {sample['routes_in_model_order']} of {sample['messages']} routes in the model's order, "
        f"least step {sample['least_step_us']} µs")
    names = {g: f"qm{qm}" for qm, g in desc["guids"].items()}

    t0 = time.perf_counter()
    setup = new_session(args.master, "mqcli bench analytics")
    session_s = time.perf_counter() - t0
    log(f"spark session: {session_s:.1f} s ({setup.master}, log {setup.log_file})")
    spark_s, python_s = [], []
    spark_cpu: list[float] = []
    python_cpu: list[float] = []
    spark_res = python_res = None
    pushdown = None
    floor_s, floor_cpu = None, None
    warmup: dict[str, float] = {}  # the untimed round of each pass: seconds, and CPU seconds
    try:
        # round 0 is the warm-up of each pass, as in every suite here (the store suite's
        # untimed warm-up pass): for Spark the cold round (the JVM compiles the query's code, the
        # Python workers start), kept apart as first_round_s and in the one-off ratio
        for i in range(rounds + 1):
            for name in (("spark", "python") if i % 2 == 0 else ("python", "spark")):
                warm(paths)
                # the Python pass runs in this process alone: its own CPU time. Counting the
                # tree would add what Spark's idle Python workers did and lose what those that
                # exit meanwhile had done (measured: negative seconds)
                cpu = tree_cpu_seconds() if name == "spark" else own_cpu_seconds()
                t = time.perf_counter()
                if name == "spark":
                    spark_res = spark_pass(setup.spark, paths)
                else:
                    python_res = python_pass(paths)
                took = time.perf_counter() - t
                after = tree_cpu_seconds() if name == "spark" else own_cpu_seconds()
                used = None if cpu is None or after is None else after - cpu
                if i == 0:
                    warmup[f"{name}_s"] = took
                    if used is not None:
                        warmup[f"{name}_cpu_s"] = used
                    log(f"warm-up: {name} {took:.1f} s")
                    continue
                (spark_s if name == "spark" else python_s).append(took)
                if used is not None:
                    (spark_cpu if name == "spark" else python_cpu).append(used)
                log(f"round {i}: {name} {took:.1f} s")
        # the floor: the same read and decoding with nothing after it, in this session
        warm(paths)
        cpu = tree_cpu_seconds()
        t = time.perf_counter()
        spark_read_floor(setup.spark, paths)
        floor_s = time.perf_counter() - t
        after = tree_cpu_seconds()
        floor_cpu = None if cpu is None or after is None else after - cpu
        log(f"read floor: {floor_s:.1f} s")
        if not args.no_pushdown:
            pushdown = pushdown_pass(setup.spark, build_pushdown_store(root, reports, log))
            log(f"pushdown: {pushdown['with_pushdown_s']} s with, {pushdown['without_pushdown_s']} s without")
    finally:
        if setup.owned:
            setup.spark.stop()
    cluster = None
    if args.cluster:
        # one SparkContext per process: the local session is stopped first
        t0 = time.perf_counter()
        on_cluster = new_session(args.cluster, "mqcli bench analytics (cluster)")
        cluster_start = time.perf_counter() - t0
        try:
            cluster_s = []
            for _ in range(rounds + 1):  # the first is the cluster's warm-up, as in local mode
                warm(paths)
                t = time.perf_counter()
                cluster_res = spark_pass(on_cluster.spark, paths)
                cluster_s.append(time.perf_counter() - t)
            cluster_first, cluster_s = cluster_s[0], cluster_s[1:]
            cores = on_cluster.spark.sparkContext.defaultParallelism
        finally:
            on_cluster.spark.stop()
        problems_c = compare(cluster_res, python_res) if python_res else []
        cluster = {"master": on_cluster.master, "cores": cores, "session_start_s": round(cluster_start, 2),
                   "seconds": [round(x, 2) for x in cluster_s], "median_s": round(_median(cluster_s), 2),
                   "first_round_s": round(cluster_first, 2),
                   "agrees_with_python": not problems_c, "problems": problems_c}
        log(f"cluster: {cluster['median_s']} s on {cluster['master']} ({cores} cores)")
    assert spark_res is not None and python_res is not None
    problems = compare(spark_res, python_res) + sample_problems(sample)
    if pushdown and pushdown["with_pushdown_rows"] != pushdown["without_pushdown_rows"]:
        problems.append(f"pushdown: {pushdown['with_pushdown_rows']} rows with, "
                        f"{pushdown['without_pushdown_rows']} without")
    if cluster and cluster["problems"]:
        problems += [f"cluster: {p}" for p in cluster["problems"]]
    if desc["reports"] != spark_res["reports"]:
        problems.append(f"the stores hold {desc['reports']} reports, the passes read {spark_res['reports']}")
    for k in ("routes", "complete", "loops"):
        if desc[k] != python_res[k]:
            problems.append(f"{k}: built {desc[k]}, found {python_res[k]}")
    spark_med, python_med = _median(spark_s), _median(python_s)
    n = desc["reports"]
    ratio = (n / spark_med) / (n / python_med)
    notes = [
        "spark seconds: from the read to the collected links and summary (Routes.totals: one job; "
        "the source decodes labels and bodies as it reads, report_fields.py), in the session "
        "already started (its start-up is session_start_s); the first query of the run also "
        "starts Spark's Python workers",
        "python: pure Python, record by record (store.records.decode); each report's label and "
        "body decoded by store/analytics/report_fields.py (store.trace's decoders, once per "
        "distinct text after the fixed-width head), then the routes and links in dicts; the "
        "Spark source decodes a batch of records at once with numpy (record_arrays.py)",
        "both passes read the store files from the page cache (read once before each pass)",
        "read_floor: the Spark source's read and decoding of the same reports with only a count "
        "after it (one round, after the rounds): no Spark job over these reports takes less; "
        "ratio_bound is the python median over it, cpu_ratio_bound the same in CPU seconds",
        "cpu_seconds: CPU time (user + system) over each pass: for spark, of this process and its "
        "descendants (the driver's JVM and the Python workers); for python, of this process "
        "alone; a busy machine stretches wall time far more than CPU time",
    ]
    if args.quick or args.reports:
        notes.append("non-default size: Spark's fixed costs weigh more in small runs")
    from .report import busy_notes, dirty_notes, finished

    notes += dirty_notes(info)
    first = warmup["spark_s"]
    one_off = python_med / (session_s + first)
    notes.append(f"warm-up: one untimed round of each pass before the timed ones (spark {first:.1f} s, "
                 f"python {warmup['python_s']:.1f} s), as the store suite warms up; Spark's is cold "
                 f"(the JVM compiles the query's code, the Python workers start) against "
                 f"{min(spark_s):.1f} s at best after it. A one-off `mqcli analyze routes` pays "
                 f"the session's start-up and the cold round: {one_off:.2f}x the Python pass "
                 f"(ratio_one_off)")
    info = finished(info)
    notes += busy_notes(info, "Spark, which needs both cores, suffers more than the one-process pass; "
                              "rerun on a quiet machine")
    links = {f"{names.get(k.split('>')[0], k.split('>')[0])}>{names.get(k.split('>')[1], k.split('>')[1])}": v
             for k, v in spark_res["links"].items()}
    return {
        "schema": 1,
        "suite": "analytics",
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "machine": {**info, "spark": _version("pyspark"), "pyarrow": _version("pyarrow"),
                    "java": _java_version(), "master": setup.master},
        "parameters": {"reports": n, "routes": desc["routes"], "stores": len(paths),
                       "per_store": desc["per_store"], "seed": args.seed, "rounds": rounds,
                       "quick": bool(args.quick), "store_build_s": desc.get("built_s"),
                       "statistic": "median seconds over the timed rounds, after one untimed warm-up "
                                    "round of each pass; spark and python alternating"},
        "session_start_s": round(session_s, 2),
        "spark": {"seconds": [round(s, 2) for s in spark_s], "median_s": round(spark_med, 2),
                  "reports_per_s": round(n / spark_med), "first_round_s": round(first, 2),
                  "cpu_seconds": [round(c, 1) for c in spark_cpu]},
        "python": {"seconds": [round(s, 2) for s in python_s], "median_s": round(python_med, 2),
                   "reports_per_s": round(n / python_med), "cpu_seconds": [round(c, 1) for c in python_cpu]},
        "read_floor": None if floor_s is None else {
            "seconds": round(floor_s, 2), "cpu_seconds": None if floor_cpu is None else round(floor_cpu, 1),
            "ratio_bound": round(python_med / floor_s, 3),
            "cpu_ratio_bound": (round(_median(python_cpu) / floor_cpu, 3) if floor_cpu and python_cpu else None)},
        "ratio": round(ratio, 3),
        "ratio_with_session_start": round(python_med / (spark_med + session_s), 3),
        "ratio_one_off": round(one_off, 3),
        "warmup": {k: round(v, 2) for k, v in warmup.items()},
        "target": {"min_ratio": TARGET_RATIO, "ratio": round(ratio, 3), "met": ratio >= TARGET_RATIO},
        "targets_met": ratio >= TARGET_RATIO,
        "result": {"routes": spark_res["routes"], "complete": spark_res["complete"],
                   "loops": spark_res["loops"], "links": links},
        "pushdown": pushdown,
        "cluster": cluster,
        "real_sample": sample,
        "agreement": {"agree": not problems, "problems": problems},
        "notes": notes,
    }


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _java_version() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    # a JVM says "Picked up JAVA_TOOL_OPTIONS: ..." first when that is set (the tests set it)
    lines = [line for line in (out.stderr or out.stdout).splitlines() if not line.startswith("Picked up ")]
    return lines[0] if lines else None


def render_table(doc: dict) -> str:
    p = doc["parameters"]
    lines = [
        f"analytics: routes over {p['reports']:,} trace reports ({p['routes']:,} routes) in "
        f"{p['stores']} stores, {doc['machine']['cpu_count']} CPUs, Spark {doc['machine']['spark']} "
        f"({doc['machine']['master']})",
        "",
        f"{'pass':<10}{'seconds':>10}{'reports/s':>14}",
        f"{'spark':<10}{doc['spark']['median_s']:>10.2f}{doc['spark']['reports_per_s']:>14,}",
        f"{'python':<10}{doc['python']['median_s']:>10.2f}{doc['python']['reports_per_s']:>14,}",
        "",
        f"Spark session start-up: {doc['session_start_s']:.2f} s (not in the rate); "
        f"warm-up (cold) Spark round: {doc['spark']['first_round_s']:.2f} s (not in the median)",
        f"ratio spark/python: {doc['ratio']:.2f}x (target >= {TARGET_RATIO}x: "
        f"{'met' if doc['target']['met'] else 'NOT met'}); with start-up: "
        f"{doc['ratio_with_session_start']:.2f}x; a one-off run (start-up and cold round): "
        f"{doc['ratio_one_off']:.2f}x",
        f"passes agree: {'yes' if doc['agreement']['agree'] else 'NO: ' + '; '.join(doc['agreement']['problems'])}",
        f"CPU seconds per round: spark {doc['spark'].get('cpu_seconds')} (driver JVM and Python workers), "
        f"python {doc['python'].get('cpu_seconds')}",
        *([f"read floor (the source's read and decoding, counted): {doc['read_floor']['seconds']:.2f} s, "
           f"{doc['read_floor']['cpu_seconds']} CPU s; python/floor {doc['read_floor']['ratio_bound']:.2f}x "
           f"(CPU {doc['read_floor']['cpu_ratio_bound']}x): the most any Spark job over this read can reach"]
          if doc.get("read_floor") else []),
        "",
        f"{'link':<12}{'count':>10}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}",
    ]
    if doc.get("cluster"):
        c = doc["cluster"]
        lines[5:5] = [f"{'cluster':<10}{c['median_s']:>10.2f}{round(p['reports'] / c['median_s']):>14,}"
                      f"  ({c['master']}, {c['cores']} executor cores; session start {c['session_start_s']:.2f} s)"]
    for link, v in sorted(doc["result"]["links"].items()):
        lines.append(f"{link:<12}{v['count']:>10,}{v['p50_ms']:>10.2f}{v['p95_ms']:>10.2f}{v['p99_ms']:>10.2f}")
    if doc.get("pushdown"):
        d = doc["pushdown"]
        same = d["with_pushdown_rows"] == d["without_pushdown_rows"]
        lines += ["", f"pushdown over {d['messages']:,} messages in 20 queues: {d['query']}",
                  f"  with pushdown {d['with_pushdown_s']:.2f} s, without {d['without_pushdown_s']:.2f} s "
                  f"({d['speedup']:.2f}x, best of 2 each); "
                  + (f"rows {d['with_pushdown_rows']:,} both" if same else f"ROWS DIFFER: {d}")]
    lines += ["", "notes:"] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(lines)


def main(args, log) -> int:
    from . import report

    t0 = time.perf_counter()
    info = report.machine_info(args.tmpdir or tempfile.gettempdir(), REPO)
    doc = run(args, info, log)
    doc["parameters"]["elapsed_s"] = round(time.perf_counter() - t0, 1)
    print()
    print(render_table(doc))
    report.save(doc, args.out, DEFAULT_OUT, doc["parameters"]["elapsed_s"])
    if not doc["agreement"]["agree"]:
        print("the passes disagree: " + "; ".join(doc["agreement"]["problems"]))
        return 1
    if not doc["targets_met"]:
        print(f"target missed: ratio {doc['ratio']:.2f}x < {TARGET_RATIO}x")
        return 1 if args.check else 0
    return 0
