"""Trace times are causal: through two real hops A → B → C (three stores, real listeners and
`dispatch --follow` processes on loopback, one clock), every traced message's reports, in route
order, never go back in time: `sent` is stamped when the message leaves (the take), `received`
at the receiving commit. `mqcli trace route` shows no negative step, and `analyze routes` gives
every link a latency ≥ 0 that agrees with the routes `trace route` prints.

All three tests are in the Spark tests' xdist group (tests/conftest.py), so they run next to
each other in one worker and the module's `hops` (the messages moved through real listeners) is
built once; with the Spark test alone in the group, it would run apart from the other two (in
another worker or at another time) and `hops` would be built twice."""

import json
import math
import subprocess
from collections import defaultdict

import pytest

from channel_helpers import ListenerProc, keygen, make_store, mqcli, wait_until
from cli_helpers import mqcli_command
from store import NewMessage, Store
from store.reports import describe, route

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark")]

N = 200


def _depth(store, queue):
    with Store.open(store) as st:
        return st.queue_info(queue).depth


@pytest.fixture(scope="module")
def hops(tmp_path_factory):
    """A, B, C after N traced messages crossed A → B → C and their reports came back to A's
    queue `reports` (C's and B's links to qmA go through B and A's listener)."""
    tmp = tmp_path_factory.mktemp("hops")
    a, b, c = tmp / "a", tmp / "b", tmp / "c"
    guids = {"qmA": make_store(a, "qmA", "reports"), "qmB": make_store(b, "qmB"), "qmC": make_store(c, "qmC", "q")}
    keys = {name: keygen(tmp / f"{name}.key") for name in guids}
    listeners, followers = {}, []
    try:
        for name, store in (("qmA", a), ("qmB", b), ("qmC", c)):
            listeners[name] = ListenerProc(store, keys[name])
        port = {name: listener.port for name, listener in listeners.items()}
        for store, link, via in ((a, "qmB", "qmB"), (a, "qmC", "qmB"), (b, "qmC", "qmC"), (b, "qmA", "qmA"),
                                 (c, "qmA", "qmB")):
            assert mqcli(store, "link", "add", link, f"127.0.0.1:{port[via]}", "--key-file", keys[via]).code == 0
        for store in (a, b, c):  # running before the puts: messages leave as they come
            followers.append(subprocess.Popen(
                [*mqcli_command(), "--store", str(store), "dispatch", "--follow", "--batch", "16",
                 "--retry-max", "1s"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        sent = []
        with Store.open(a) as st:
            for at in range(0, N, 20):  # in bursts, so a put time counter runs ahead of the clock
                sent += st.put_many("DIRECT=OS:qmC\\q", [NewMessage(b"m-%d" % i, trace=True, report_queue="reports")
                                                        for i in range(at, at + 20)])
        wait_until(lambda: _depth(c, "q") == N, 120, f"{N} messages at qmC")
        wait_until(lambda: _depth(a, "reports") >= 5 * N, 120, "every report back at qmA")
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
        rows = [describe(m) for m in st.browse("reports")]
    by_msg = defaultdict(list)
    for r in rows:
        by_msg[r["msg_id"]].append(r)
    assert set(by_msg) == {m.msg_id for m in sent}
    return {"a": a, "guids": guids, "routes": {m: route(rs) for m, rs in by_msg.items()}}


def test_every_route_goes_forward_in_time_through_two_real_hops(hops):
    g = hops["guids"]
    order = [(0, "enqueued", g["qmA"]), (0, "sent", g["qmA"]), (1, "received", g["qmB"]),
             (1, "sent", g["qmB"]), (2, "received", g["qmC"])]
    for msg_id, steps in hops["routes"].items():
        assert [(r["hops"], r["event"], r["computer"]) for r in steps] == order, msg_id
        times = [r["time"] for r in steps]
        assert times == sorted(times), (msg_id, times)
        assert all(r["since_previous_us"] >= 0 for r in steps[1:]), msg_id


def test_trace_route_shows_no_negative_step(hops):
    for msg_id in sorted(hops["routes"])[:: N // 5]:
        r = mqcli(hops["a"], "-o", "json", "trace", "route", msg_id, "--report-queue", "reports")
        assert r.code == 0, r
        steps = json.loads(r.out)
        assert [s["since_previous_us"] for s in steps] == [
            s["since_previous_us"] for s in hops["routes"][msg_id]]
        assert all(s["since_previous_us"] >= 0 for s in steps[1:]), steps
        text = mqcli(hops["a"], "trace", "route", msg_id, "--report-queue", "reports")
        assert text.code == 0 and "+-" not in text.out, text


def _nearest_rank(values, p):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@pytest.mark.spark
def test_analyze_routes_gives_every_real_link_a_latency_at_least_0_as_trace_route_does(spark, hops):
    from store.analytics.pipeline import Source, run_routes

    g = hops["guids"]
    expected = defaultdict(list)  # link → received at the next hop less sent at this one, per message
    for steps in hops["routes"].values():
        at = {(r["hops"], r["event"]): r["time"] for r in steps}
        expected[(g["qmA"], g["qmB"])].append(at[(1, "received")] - at[(0, "sent")])
        expected[(g["qmB"], g["qmC"])].append(at[(2, "received")] - at[(1, "sent")])
    source = Source(stores=[str(hops["a"])])
    source.check()
    result = run_routes(spark, source)
    try:
        links = {(r["from_qm"], r["to_qm"]): r for r in result.links}
        assert set(links) == set(expected)
        for link, values in expected.items():
            assert min(values) >= 0
            assert links[link]["count"] == N
            assert links[link]["p50_ms"] >= 0
            assert links[link]["p50_ms"] == _nearest_rank(values, 0.5) / 1000, link
    finally:
        result.close()
