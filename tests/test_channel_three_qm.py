"""Three queue managers on loopback, each with a real `mqcli listen` and `mqcli dispatch --follow`:
traced messages go A → B → C (A reaches C through B: A's link named qmC points at B's listener)
and their trace reports come back to A's report queue through outgoing queues (C's link qmA
points at B, B's at A). Every message arrives once, in order within its priority, with hops 2,
and A's report queue holds the report of every hop.

Both tests run in one worker (their xdist group) and their `mqcli analyze routes` commands in one
local Spark application (`pipeline`, tests/cluster_helpers.py `ClusterApp`), started while the
first test moves its messages: each application start costs a JVM and tens of seconds."""

import json
import subprocess
from collections import Counter, defaultdict
from dataclasses import replace

import pytest

from channel_helpers import ListenerProc, keygen, make_store, mqcli, wait_until
from cli_helpers import mqcli_command
from store import NewMessage, Store
from store import trace
from store.reports import describe

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("three-qm")]

# traced messages in the route test: 20 of each priority, more than two batches of --batch 64,
# so order within a priority is checked across batches and both hops
N = 160


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The module's one local Spark application running `mqcli analyze` commands as the installed
    `mqcli analyze ... --master local[2]` runs them; None without the spark extra (CI installs it)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        yield None
        return
    from cluster_helpers import ClusterApp

    app = ClusterApp("local[2]", tmp_path_factory.mktemp("three-qm-app"),
                     env={"SPARK_LOCAL_IP": "127.0.0.1"}).start()
    try:
        yield app
    finally:
        app.stop()


def count(store, queue):
    with Store.open(store) as st:
        return st.queue_info(queue).depth


def test_traced_messages_cross_two_hops_and_their_reports_come_home(tmp_path, pipeline):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    guids = {"qmA": make_store(a, "qmA", "reports"), "qmB": make_store(b, "qmB"), "qmC": make_store(c, "qmC", "q")}
    keys = {name: keygen(tmp_path / f"{name}.key") for name in ("qmA", "qmB", "qmC")}  # one per listener
    listeners = {}
    followers = []
    try:
        for name, store in (("qmA", a), ("qmB", b), ("qmC", c)):
            listeners[name] = ListenerProc(store, keys[name])
        port = {name: listener.port for name, listener in listeners.items()}
        for store, link, via in ((a, "qmB", "qmB"), (a, "qmC", "qmB"), (b, "qmC", "qmC"), (b, "qmA", "qmA"),
                                 (c, "qmA", "qmB")):
            r = mqcli(store, "link", "add", link, f"127.0.0.1:{port[via]}", "--key-file", keys[via])
            assert r.code == 0, r

        expected: dict[int, list[bytes]] = defaultdict(list)
        with Store.open(a) as st:
            batch = []
            for i in range(N):
                p = (i * 5) % 8
                body = b"msg-%04d" % i
                expected[p].append(body)
                batch.append(NewMessage(body, priority=p, trace=True, report_queue="reports"))
            sent = st.put_many("DIRECT=OS:qmC\\q", batch)
        msg_ids = {m.msg_id for m in sent}

        for store in (a, b, c):
            followers.append(subprocess.Popen(
                [*mqcli_command(), "--store", str(store), "dispatch", "--follow", "--batch", "64", "--retry-max", "1s"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        wait_until(lambda: count(c, "q") == N, 120, f"{N} messages at qmC")
        wait_until(lambda: count(a, "reports") >= 5 * N, 120, "every report back at qmA")

        with Store.open(c) as st:
            arrived = st.browse("q")
        assert Counter(m.body for m in arrived) == Counter(b for bodies in expected.values() for b in bodies)
        assert len(arrived) == N  # each once
        for p, bodies in expected.items():  # FIFO within each priority, across both hops
            assert [m.body for m in arrived if m.priority == p] == bodies
        assert [m.priority for m in arrived] == sorted((m.priority for m in arrived), reverse=True)
        assert {m.hops for m in arrived} == {2}
        assert {m.msg_id for m in arrived} == msg_ids  # ids kept end to end

        with Store.open(a) as st:
            rows = [describe(m) for m in st.browse("reports")]
        assert len(rows) == 5 * N and not any("error" in r for r in rows)
        route = defaultdict(list)
        for r in rows:
            route[r["msg_id"]].append((r["hops"], r["event"], r["computer"]))
        assert set(route) == msg_ids
        hop = [(0, "enqueued", guids["qmA"]), (0, "sent", guids["qmA"]), (1, "received", guids["qmB"]),
               (1, "sent", guids["qmB"]), (2, "received", guids["qmC"])]
        for msg_id, steps in route.items():
            assert sorted(steps) == sorted(hop), (msg_id, steps)
        delivered = [r for r in rows if r["delivered"]]
        assert len(delivered) == N and {r["computer"] for r in delivered} == {guids["qmC"]}
        _labels_are_as_windows_writes_them(a, guids, port)

        for f in followers:
            f.terminate()
        for f in followers:
            _, err = f.communicate(timeout=60)
            assert f.returncode == 0 and b"Traceback" not in err, err
        with Store.open(a) as st, Store.open(b) as stb:  # nothing left waiting or in flight
            assert all(o.messages == 0 for o in st.outgoing_list() + stb.outgoing_list())
        for listener in listeners.values():
            assert listener.stop() == 0, listener.stderr
        for store in (a, b, c):
            assert mqcli(store, "check").code == 0
        _routes_rebuilt_by_the_pipeline(pipeline, a, guids, msg_ids)
    finally:
        for f in followers:
            if f.poll() is None:
                f.kill()
                f.communicate(timeout=30)
        for listener in listeners.values():
            listener.kill()


def _routes_rebuilt_by_the_pipeline(pipeline, a, guids, msg_ids):
    """Issue 7: `mqcli analyze routes` on local Spark rebuilds, from A's report queue, the route
    every message took through the real listeners and dispatchers: A, B, C in hop order."""
    if pipeline is None:
        return
    # the same reports without their mqcli.event property: the labels alone give the events
    stripped = a.parent / "stripped"
    with Store.open(a) as st:
        reports = [replace(m, props={k: v for k, v in m.props.items() if k != "mqcli.event"})
                   for m in st.browse("reports")]
    with Store.open(stripped, create=True, name="stripped") as st:
        st.create_queue("reports")
        st.import_messages("reports", reports)
    for store in (a, stripped):
        r = pipeline.run(["--store", a, "analyze", "routes", store, "-o", "json"])
        assert r.code == 0, r
        rows = json.loads(r.stdout)
        assert {row["msg_id"] for row in rows} == msg_ids
        for row in rows:
            assert row["path"] == [guids["qmA"], guids["qmB"], guids["qmC"]], row
            assert row["hops"] == 2 and row["complete"] is True, row


def _labels_are_as_windows_writes_them(a, guids, port):
    """Issue 22: every departure is labelled `sent from <its queue manager's GUID> to <the next
    hop's address>` with <NEXT HOP> and <HOP COUNT> in its body; every arrival, and the first
    enqueue at the origin, `received by`; and the labels alone, with the mqcli.event property
    removed, give each report's event."""
    with Store.open(a) as st:
        reports = st.browse("reports")
    seen = Counter()
    for m in reports:
        label = trace.decode_label(m.label)
        body = trace.decode_body(m.body.decode("utf-8"))
        stripped = describe(replace(m, props={k: v for k, v in m.props.items() if k != "mqcli.event"}))
        if label.event == "sent":
            # A sends to B's listener for both hops' links (qmC via qmB); B sends to C's
            want = {guids["qmA"]: f"127.0.0.1:{port['qmB']}", guids["qmB"]: f"127.0.0.1:{port['qmC']}"}
            assert label.next_hop == want[label.computer] == body.next_hop, (label, body)
            assert body.hop_count == label.hops == {guids["qmA"]: 0, guids["qmB"]: 1}[label.computer]
            assert m.props["mqcli.event"] == "sent"
        else:
            assert label.event == "received" and label.next_hop is None and body.next_hop is None
            assert body.hop_count is None
            assert m.props["mqcli.event"] == ("enqueued" if label.hops == 0 else "received")
        assert stripped["event"] == m.props["mqcli.event"]
        seen[(label.event, label.hops)] += 1
    assert seen == {("received", 0): N, ("sent", 0): N, ("received", 1): N, ("sent", 1): N, ("received", 2): N}


M = 30  # traced messages in the conflict test


def test_a_hop_with_its_own_report_queue_sends_conflict_reports_there(tmp_path, pipeline):
    """Issue 22: A → B → C with real listeners and dispatchers, B with a report queue of its own
    (`qmgr set --report-queue`). As Windows' "Specifying Multiple Report Queues" describes, B
    sends each report to the message's report queue (A's) and a conflict report, label `Report
    Message Conflict`, the mirrored report's body, to its own; C, with none, sends no conflict.
    `trace route` and `analyze routes` rebuild every route from labels and bodies alone (the
    mqcli.event property removed), are not confused by the conflict reports and count them."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    guids = {"qmA": make_store(a, "qmA", "reports"), "qmB": make_store(b, "qmB", "breports"),
             "qmC": make_store(c, "qmC", "q")}
    r = mqcli(b, "qmgr", "set", "--report-queue", "breports", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout)["report_queue"] == "breports", r
    assert json.loads(mqcli(b, "info", "-o", "json").stdout)["report_queue"] == "breports"
    keys = {name: keygen(tmp_path / f"{name}.key") for name in ("qmA", "qmB", "qmC")}
    listeners = {}
    followers = []
    try:
        for name, store in (("qmA", a), ("qmB", b), ("qmC", c)):
            listeners[name] = ListenerProc(store, keys[name])
        port = {name: listener.port for name, listener in listeners.items()}
        for store, link, via in ((a, "qmC", "qmB"), (b, "qmC", "qmC"), (b, "qmA", "qmA"), (c, "qmA", "qmB")):
            assert mqcli(store, "link", "add", link, f"127.0.0.1:{port[via]}", "--key-file", keys[via]).code == 0
        with Store.open(a) as st:
            sent = st.put_many("DIRECT=OS:qmC\\q", [NewMessage(b"m%d" % i, trace=True, report_queue="reports")
                                                   for i in range(M)])
        msg_ids = {m.msg_id for m in sent}
        for store in (a, b, c):
            followers.append(subprocess.Popen(
                [*mqcli_command(), "--store", str(store), "dispatch", "--follow", "--retry-max", "1s"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        wait_until(lambda: count(c, "q") == M, 120, f"{M} messages at qmC")
        wait_until(lambda: count(a, "reports") >= 5 * M, 120, "every report back at qmA")
        wait_until(lambda: count(b, "breports") >= 2 * M, 120, "B's conflict reports")
        for f in followers:
            f.terminate()
        for f in followers:
            _, err = f.communicate(timeout=60)
            assert f.returncode == 0 and b"Traceback" not in err, err
        for listener in listeners.values():
            assert listener.stop() == 0, listener.stderr
    finally:
        for f in followers:
            if f.poll() is None:
                f.kill()
                f.communicate(timeout=30)
        for listener in listeners.values():
            listener.kill()

    with Store.open(a) as st:
        a_reports = st.browse("reports")
    with Store.open(b) as st:
        conflicts = st.browse("breports")
    with Store.open(c) as st:
        assert st.queue_info("q").depth == M and not any(m.report for m in st.browse("q"))
    # every report in A's queue, by its label: the five of a route through B, no conflict
    seen = Counter()
    b_bodies = defaultdict(set)
    for m in a_reports:
        label = trace.decode_label(m.label)
        assert label.event in ("sent", "received"), m.label
        seen[(label.event, label.hops, label.computer)] += 1
        if label.computer == guids["qmB"]:
            b_bodies[m.correl_id].add(m.body)
    assert seen == {("received", 0, guids["qmA"]): M, ("sent", 0, guids["qmA"]): M,
                    ("received", 1, guids["qmB"]): M, ("sent", 1, guids["qmB"]): M,
                    ("received", 2, guids["qmC"]): M}
    # B's own report queue: one conflict report for each of B's two reports, its body the same
    assert len(conflicts) == 2 * M
    b_conflicts = defaultdict(set)
    for m in conflicts:
        assert m.report and m.label == "Report Message Conflict\0", m.label
        assert trace.decode_label(m.label).event == "conflict"
        body = trace.decode_body(m.body.decode("utf-8"))
        assert body.message_id == int(m.correl_id.split("\\")[1]) & trace.MAX_MESSAGE_ID
        b_conflicts[m.correl_id].add(m.body)
    assert b_conflicts == b_bodies and set(b_conflicts) == msg_ids
    assert all(len(bodies) == 2 for bodies in b_conflicts.values())  # received, and sent with next hop

    # labels and bodies alone: A's reports and B's conflicts with mqcli.event removed
    def strip(m):
        return replace(m, props={k: v for k, v in m.props.items() if k != "mqcli.event"})

    stripped_a, stripped_b = tmp_path / "stripped-a", tmp_path / "stripped-b"
    for path, queue, messages in ((stripped_a, "reports", a_reports), (stripped_b, "breports", conflicts)):
        with Store.open(path, create=True, name=path.name) as st:
            st.create_queue(queue)
            st.import_messages(queue, [strip(m) for m in messages])
    for msg_id in sorted(msg_ids)[:5]:
        r = mqcli(stripped_a, "trace", "route", msg_id, "--report-queue", "reports", "-o", "json")
        assert r.code == 0, r
        steps = json.loads(r.stdout)
        assert [(s["hops"], s["event"], s["computer"]) for s in steps] == [
            (0, "enqueued", guids["qmA"]), (0, "sent", guids["qmA"]), (1, "received", guids["qmB"]),
            (1, "sent", guids["qmB"]), (2, "received", guids["qmC"])], steps
        assert all(s["since_previous_us"] >= 0 for s in steps[1:])
        r = mqcli(stripped_b, "trace", "route", msg_id, "--report-queue", "breports")
        assert r.code == 4 and "2 conflict report(s)" in r.stderr, r
    _conflicts_do_not_confuse_the_pipeline(pipeline, tmp_path, stripped_a, stripped_b, guids, msg_ids)


def _conflicts_do_not_confuse_the_pipeline(pipeline, tmp_path, stripped_a, stripped_b, guids, msg_ids):
    if pipeline is None:
        return
    out = tmp_path / "out"
    r = pipeline.run(["--store", stripped_a, "analyze", "routes", stripped_a, stripped_b, "--out", out,
                      "--format", "json"])
    assert r.code == 0, r
    fields = [line.split() for line in r.stdout.decode().splitlines()]
    wanted = ("reports", "conflict_reports", "invalid_reports", "routes", "complete", "loops")
    summary = {f[0]: f[1] for f in fields if len(f) == 2 and f[0] in wanted}
    assert summary == {"reports": str(7 * M), "conflict_reports": str(2 * M), "invalid_reports": "0",
                       "routes": str(M), "complete": str(M), "loops": "0"}, r.stdout
    routes = [json.loads(line) for f in sorted((out / "routes").glob("*.json")) for line in f.read_text().splitlines()]
    assert {row["msg_id"] for row in routes} == msg_ids
    assert all(row["path"] == [guids["qmA"], guids["qmB"], guids["qmC"]] and row["complete"] for row in routes)
    links = [json.loads(line) for f in sorted((out / "links").glob("*.json")) for line in f.read_text().splitlines()]
    assert {(x["from_qm"], x["to_qm"]): x["count"] for x in links} == {
        (guids["qmA"], guids["qmB"]): M, (guids["qmB"], guids["qmC"]): M}
    assert all(x[k] >= 0 for x in links for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "max_ms"))
