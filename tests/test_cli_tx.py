"""CLI: transactions that span invocations — tx begin/commit/abort/list/show, put/get/move
--tx (docs/design.md#transactions; exit 10)."""

import json
import os
import subprocess
import textwrap
import time

import pytest

from channel_helpers import wait_until
from cli_helpers import BROKEN_OUTPUTS, mqcli_command
from store import NewMessage, Store

TX_ERROR = "[MQ_ERROR_TRANSACTION_USAGE]"


@pytest.fixture
def txcli(cli):
    """The `cli` fixture with transactional queues `a` and `b` (and the plain queue `q`)."""
    for name in ("a", "b"):
        cli.ok("queue", "create", name, "--transactional", "-q")
    return cli


def begin(cli, *args):
    return int(cli.ok("tx", "begin", *args).out)


def seed(cli, queue, *bodies):
    """Put committed messages on a transactional queue; return their records."""
    t = begin(cli)
    records = [cli.put(queue, body, "--tx", t) for body in bodies]
    cli.ok("tx", "commit", t)
    return records


def bodies(cli, queue):
    return [m["body"] for m in cli.json("browse", queue)]


# ---- begin, commit, abort -----------------------------------------------------------------


def test_tx_begin_prints_the_bare_id_in_text_and_an_object_in_json(txcli):
    first = txcli.ok("tx", "begin")
    assert first.out.strip().isdigit() and first.stderr == ""
    doc = txcli.json("tx", "begin", "--timeout", "5m")
    assert doc == {"tx": int(first.out) + 1, "timeout_s": 300.0}
    assert txcli.json("tx", "begin") == {"tx": int(first.out) + 2, "timeout_s": 600.0}
    assert txcli.json("tx", "begin", "--timeout", "forever") == {"tx": int(first.out) + 3, "timeout_s": None}


def test_tx_begin_without_timeout_times_out_after_ten_minutes_and_forever_never(txcli):
    ten_minutes = begin(txcli)
    forever = begin(txcli, "--timeout", "FOREVER")
    with Store.open(txcli.store) as st:  # the deadline the store keeps, to the microsecond
        deadlines = {info.tx: (info.deadline, info.created) for info in st.tx_list()}
    deadline, created = deadlines[ten_minutes]
    assert deadline - created == 600_000_000
    assert deadlines[forever][0] is None
    (row,) = [r for r in txcli.json("tx", "list") if r["tx"] == forever]
    assert row["timeout_left"] is None


def test_tx_begin_timeout_zero_or_garbage_is_exit_2(txcli):
    r = txcli.fails(2, "tx", "begin", "--timeout", "0")
    assert txcli.error_line(r) == "mqcli: error: timeout must be positive, got 0.0 [MQ_ERROR_INVALID_PARAMETER]"
    r = txcli.fails(2, "tx", "begin", "--timeout", "10 minutes")
    assert txcli.error_line(r) == "mqcli: error: invalid timeout '10 minutes': use 250ms, 30s, 5m, 2h or forever [USAGE]"
    assert txcli.json("tx", "list") == []


def test_put_and_get_inside_a_transaction_are_invisible_until_commit(txcli):
    (old,) = seed(txcli, "a", "old")
    t = begin(txcli)
    new = txcli.put("b", "new", "--tx", t)
    assert new["state"] == "tx-locked" and new["tx"] == t
    got = txcli.json("get", "a", "--tx", str(t))
    assert got["msg_id"] == old["msg_id"] and got["state"] == "tx-locked" and got["tx"] == t
    assert bodies(txcli, "a") == [] and bodies(txcli, "b") == []
    txcli.fails(3, "get", "b")
    assert txcli.json("tx", "commit", t) == {"tx": t, "committed": 2}
    assert bodies(txcli, "a") == [] and bodies(txcli, "b") == ["new"]
    with Store.open(txcli.store) as st:  # and the store agrees, record by record
        assert st.check() == [] and st.queue_info("a").depth == 0


def test_abort_drops_the_puts_and_returns_the_gets_with_a_backout(txcli):
    seed(txcli, "a", "keep")
    t = begin(txcli)
    txcli.put("b", "drop", "--tx", t)
    txcli.ok("get", "a", "--tx", t)
    assert txcli.json("tx", "abort", t) == {"tx": t, "aborted": 2}
    assert bodies(txcli, "b") == []
    (back,) = txcli.json("browse", "a")
    assert back["body"] == "keep" and back["backouts"] == 1


def test_put_tx_with_count_and_lines_puts_every_batch_in_the_transaction(txcli, tmp_path):
    t = begin(txcli)
    assert len(txcli.ok("put", "a", "x", "--count", "1500", "--tx", t).out.splitlines()) == 1500
    lines = tmp_path / "lines.txt"
    lines.write_text("one\ntwo\n")
    assert len(txcli.jsonl("put", "b", "--lines", lines, "--tx", t)) == 2
    assert txcli.json("queue", "show", "a")["available"] == 0
    assert txcli.json("tx", "commit", t) == {"tx": t, "committed": 1502}
    assert txcli.json("queue", "show", "a")["available"] == 1500
    assert bodies(txcli, "b") == ["one", "two"]


def test_get_tx_with_count_takes_several_messages_in_the_transaction(txcli):
    seed(txcli, "a", "1", "2", "3")
    t = begin(txcli)
    got = txcli.json("get", "a", "--tx", t, "--count", "2")
    assert [m["body"] for m in got] == ["1", "2"] and {m["state"] for m in got} == {"tx-locked"}
    txcli.ok("tx", "commit", t)
    assert bodies(txcli, "a") == ["3"]


@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
def test_a_get_in_a_transaction_whose_output_fails_gives_back_what_it_did_not_write(txcli, output):
    # the messages stayed in the transaction, unwritten, and its commit removed them: a script
    # that commits after `get --tx T ... | head` lost every message the pipe did not take
    seed(txcli, "a", *(f"m{i}" for i in range(5)))
    t = begin(txcli)
    code = txcli.into(output, "get", "a", "--tx", t, "--all", "-o", "jsonl").code
    assert code in (8, 141), code
    txcli.ok("tx", "commit", t)  # it commits what the get wrote whole: nothing
    assert bodies(txcli, "a") == [f"m{i}" for i in range(5)]
    assert {m["backouts"] for m in txcli.json("browse", "a")} == {0}  # never received: no backout


def _stalled_tx_get(txcli, t, n):
    """`get a --tx T --all` writing into a pipe nobody reads, once it holds its messages: (the
    process, the pipe's read end)."""
    seed_many(txcli, "a", n)
    r, w = os.pipe()
    get = subprocess.Popen([*mqcli_command(), "get", "a", "--tx", str(t), "--all", "-o", "jsonl"], stdout=w,
                           stderr=subprocess.PIPE, env={**os.environ, **txcli.env})
    os.close(w)
    wait_until(lambda: any(m["state"] == "get-unconfirmed" for m in txcli.json("inflight", "a")), 30,
               "the get to hold its messages")
    return get, r


def seed_many(cli, queue, n):
    with Store.open(cli.store) as st:
        t = st.tx_begin()
        st.put_many(queue, [NewMessage(b"%05d" % i) for i in range(n)], tx=t)
        st.tx_commit(t)


def test_a_get_in_a_transaction_killed_while_it_writes_loses_nothing_to_the_commit(txcli):
    # its messages went into T at the take: SIGKILLed with its output stalled (the OOM killer,
    # timeout -s KILL), the ones it had not written stayed in T and the commit removed them
    t = begin(txcli)
    get, r = _stalled_tx_get(txcli, t, 3000)
    get.kill()
    get.wait(timeout=30)
    os.close(r)
    txcli.ok("tx", "commit", t)
    left = txcli.json("browse", "a")
    assert len(left) == 3000 and {m["backouts"] for m in left} == {0}  # held, never in T: all back


def test_a_commit_while_a_get_in_the_transaction_writes_loses_nothing(txcli):
    # the commit removed the messages the get had taken into T and not yet written; the get's
    # output then failing had nothing left to give back
    t = begin(txcli)
    get, r = _stalled_tx_get(txcli, t, 3000)
    txcli.ok("tx", "commit", t)  # T holds none of them yet: they go in once written
    with os.fdopen(r, "rb") as out:
        read = out.read().count(b"\n")
    _, err = get.communicate(timeout=60)
    assert get.returncode == 10 and f"transaction {t} ended".encode() in err, err
    left = txcli.json("browse", "a")
    assert read >= 1 and len(left) == 3000  # written, and back: T was gone (at least once, not lost)


def test_a_get_in_a_transaction_under_a_lock_whose_output_fails_leaves_the_lock(txcli):
    # its messages went back available, not under lock L: anyone could take them, and the
    # lock's owner found nothing
    seed(txcli, "a", "1", "2")
    lock = txcli.ok("browse", "a", "--lock", "--lock-id", "77", "-q").out.strip()
    assert lock == "77"
    t = begin(txcli)
    assert txcli.into("closed pipe", "get", "a", "--tx", t, "--lock-id", "77", "--all").code == 141
    assert {(m["state"], m.get("lock_id")) for m in txcli.json("browse", "a", "--state", "all")} == {("locked-browse", 77)}


@pytest.mark.parametrize("output", BROKEN_OUTPUTS)
def test_tx_begin_whose_id_cannot_be_written_leaves_no_transaction(txcli, output):
    # its id reached no one: an open transaction nobody could commit or abort, taking part in
    # nothing until its timeout
    assert txcli.into(output, "tx", "begin", "--timeout", "forever").code in (8, 141)
    assert txcli.json("tx", "list") == []


# ---- exit codes ---------------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["commit", "abort", "show"])
def test_an_unknown_transaction_is_exit_10(txcli, verb):
    r = txcli.fails(10, "tx", verb, "999")
    assert txcli.error_line(r) == ("mqcli: error: transaction 999 is unknown, finished or timed out "
                                   f"(start one with `mqcli tx begin`) {TX_ERROR}")


@pytest.mark.parametrize("first, then", [("commit", "commit"), ("abort", "commit"), ("commit", "abort")])
def test_finishing_a_finished_transaction_is_exit_10_and_changes_nothing(txcli, first, then):
    t = begin(txcli)
    txcli.put("a", "x", "--tx", t)
    txcli.ok("tx", first, t)
    before = txcli.json("browse", "a", "--state", "all")
    r = txcli.fails(10, "tx", then, t)
    assert f"transaction {t} is unknown, finished or timed out" in txcli.error_line(r)
    txcli.fails(10, "put", "a", "y", "--tx", t)
    txcli.fails(10, "get", "a", "--tx", t)
    assert txcli.json("browse", "a", "--state", "all") == before


def test_a_plain_put_to_a_transactional_queue_is_exit_10(txcli):
    r = txcli.fails(10, "put", "a", "x")
    assert txcli.error_line(r) == ("mqcli: error: queue 'a' is transactional: put inside a transaction "
                                   f"(`mqcli tx begin`, then --tx) {TX_ERROR}")
    assert txcli.json("queue", "show", "a")["depth"] == 0


def test_a_transaction_takes_part_only_in_transactional_queues(txcli):
    txcli.put("q", "plain")
    t = begin(txcli)
    for args in (("put", "q", "x", "--tx", t), ("get", "q", "--tx", t)):
        r = txcli.fails(10, *args)
        assert txcli.error_line(r) == ("mqcli: error: queue 'q' is not transactional: only transactional "
                                       f"queues take part in transactions {TX_ERROR}")
    assert bodies(txcli, "q") == ["plain"]


def test_get_tx_of_a_message_another_transaction_holds_is_exit_5(txcli):
    (m,) = seed(txcli, "a", "x")
    t1, t2 = begin(txcli), begin(txcli)
    txcli.ok("get", "a", "--tx", t1, "--msg-id", m["msg_id"])
    r = txcli.fails(5, "get", "a", "--tx", t2, "--msg-id", m["msg_id"])
    assert txcli.error_line(r).endswith("[MQ_ERROR_MESSAGE_ALREADY_RECEIVED]")
    txcli.fails(5, "get", "a", "--msg-id", m["msg_id"])  # nor may a plain get take it
    assert txcli.json("tx", "show", t2)["operations"] == 0


def test_tx_with_confirm_id_is_a_usage_error(txcli):
    seed(txcli, "a", "x")
    t = begin(txcli)
    r = txcli.fails(2, "get", "a", "--tx", t, "--confirm-id", "7")
    assert txcli.error_line(r) == ("mqcli: error: a get is either in a transaction or two-phase, not both "
                                   "[MQ_ERROR_INVALID_PARAMETER]")
    r = txcli.fails(2, "put", "a", "y", "--tx", t, "--confirm-id", "7")
    assert txcli.error_line(r) == ("mqcli: error: a put is either in a transaction or two-phase, not both "
                                   "[MQ_ERROR_INVALID_PARAMETER]")
    assert txcli.json("tx", "show", t)["operations"] == 0


def test_put_jsonl_with_tx_is_a_usage_error(txcli):
    t = begin(txcli)
    r = txcli.fails(2, "put", "a", "--jsonl", "-", "--tx", t, input=b"")
    assert txcli.error_line(r) == ("mqcli: error: --jsonl cannot be used with --tx; use --lines, or put "
                                   "the records first and move them [USAGE]")


def test_a_tx_id_that_is_not_a_number_is_a_usage_error(txcli):
    txcli.fails(2, "tx", "commit", "abc")
    txcli.fails(2, "put", "a", "x", "--tx", "abc")


def test_a_timed_out_transaction_is_aborted_and_then_exit_10(txcli):
    seed(txcli, "a", "keep")
    t = begin(txcli, "--timeout", "1s")
    txcli.put("b", "drop", "--tx", t)
    txcli.ok("get", "a", "--tx", t)
    left = float(txcli.json("tx", "show", t)["timeout_left"].rstrip("s"))
    time.sleep(left + 0.1)
    assert bodies(txcli, "a") == ["keep"] and bodies(txcli, "b") == []
    assert txcli.json("tx", "list") == []
    txcli.fails(10, "tx", "commit", t)


@pytest.mark.parametrize("finish, a_after, b_after", [
    ("commit", ["3"], ["1", "2"]),
    ("abort", ["1", "2", "3"], []),
])
def test_move_tx_moves_nothing_until_the_transaction_finishes(txcli, finish, a_after, b_after):
    moved = seed(txcli, "a", "1", "2", "3")
    t = begin(txcli)
    assert txcli.json("move", "a", "b", "--count", "2", "--tx", t) == {"source": "a", "target": "b", "moved": 2}
    assert bodies(txcli, "a") == ["3"] and bodies(txcli, "b") == []
    doc = txcli.json("tx", "show", t)
    assert (doc["puts"], doc["gets"]) == (2, 2)
    assert {m["msg_id"] for m in doc["messages"]} == {m["msg_id"] for m in moved[:2]}  # ids kept
    txcli.ok("tx", finish, t)
    assert bodies(txcli, "a") == a_after and bodies(txcli, "b") == b_after


def test_move_tx_needs_transactional_queues(txcli):
    txcli.put("q", "plain")
    t = begin(txcli)
    r = txcli.fails(10, "move", "q", "a", "--tx", t)
    assert "queue 'q' is not transactional" in txcli.error_line(r)
    assert bodies(txcli, "q") == ["plain"]


def test_move_tx_out_of_dead_letter_tx_puts_the_message_back_fresh_on_commit(txcli):
    txcli.ok("queue", "set", "a", "--max-backouts", "1", "-q")
    (m,) = seed(txcli, "a", "poison")
    t = begin(txcli)
    txcli.ok("get", "a", "--tx", t, "-q")
    txcli.ok("tx", "abort", t)  # its first backout: max-backouts, so to dead-letter-tx
    (dead,) = txcli.json("browse", "dead-letter-tx")
    assert (dead["msg_id"], dead["backouts"], dead["original_queue"]) == (m["msg_id"], 1, "a")
    t = begin(txcli)
    assert txcli.json("move", "dead-letter-tx", "a", "--tx", t)["moved"] == 1
    txcli.ok("tx", "commit", t)
    (back,) = txcli.json("browse", "a")
    assert back["msg_id"] == m["msg_id"] and back["backouts"] == 0 and "original_queue" not in back
    r = txcli.fails(10, "move", "dead-letter", "a", "--tx", begin(txcli))
    assert txcli.error_line(r) == ("mqcli: error: queue 'dead-letter' is not transactional: only transactional "
                                   "queues take part in transactions [MQ_ERROR_TRANSACTION_USAGE]")


# ---- list, show, inflight, stats ----------------------------------------------------------


def test_tx_list_json_shape(txcli):
    assert txcli.json("tx", "list") == []
    seed(txcli, "a", "x")
    t1 = begin(txcli, "--timeout", "1h")
    t2 = begin(txcli, "--timeout", "forever")
    txcli.put("b", "y", "--tx", t1)
    txcli.ok("get", "a", "--tx", t1)
    rows = txcli.json("tx", "list")
    assert [r["tx"] for r in rows] == [t1, t2]
    first, second = rows
    assert set(first) == {"tx", "created", "age", "age_s", "deadline", "timeout_left", "operations", "queues"}
    assert first["operations"] == 2 and sorted(first["queues"]) == ["a", "b"]
    assert first["created"].endswith("Z") and first["deadline"].endswith("Z") and first["age_s"] >= 0
    assert 3590 < float(first["timeout_left"].rstrip("s")) <= 3600
    assert second == {**second, "operations": 0, "queues": [], "deadline": None, "timeout_left": None}
    assert [r["tx"] for r in txcli.jsonl("tx", "list")] == [t1, t2]
    text = txcli.ok("tx", "list").out.splitlines()
    assert text[0].split() == ["tx", "age", "timeout", "left", "operations", "queues"]
    assert text[1].split()[0] == str(t1) and text[1].split()[-1] in ("a,b", "b,a")


def test_tx_show_json_shape(txcli):
    (old,) = seed(txcli, "a", "old")
    t = begin(txcli, "--timeout", "10m")
    new = txcli.put("b", "new", "--tx", t, "--priority", "6")
    txcli.ok("get", "a", "--tx", t)
    doc = txcli.json("tx", "show", t)
    assert doc["tx"] == t and doc["operations"] == 2 and (doc["puts"], doc["gets"]) == (1, 1)
    assert sorted(doc["queues"]) == ["a", "b"] and doc["timeout_left"].endswith("s")
    by_op = {m["operation"]: m for m in doc["messages"]}
    assert by_op["put"]["msg_id"] == new["msg_id"] and by_op["put"]["queue"] == "b"
    assert by_op["get"]["msg_id"] == old["msg_id"] and by_op["get"]["queue"] == "a"
    assert all(m["state"] == "tx-locked" and m["tx"] == t for m in doc["messages"])
    (line,) = txcli.jsonl("tx", "show", t)  # one object on one line, like document()
    assert line["messages"] == doc["messages"] and line.keys() == doc.keys()
    text = txcli.ok("tx", "show", t).out
    assert text.startswith("tx ") and "puts          1" in text and "state=tx-locked" in text
    assert "\nnew\n" in text and "\nold\n" in text
    assert txcli.ok("tx", "show", t, "-o", "body").stdout in (b"old\nnew\n", b"new\nold\n")


def test_inflight_and_stats_show_tx_locked_messages(txcli):
    (old,) = seed(txcli, "a", "old")
    t = begin(txcli)
    new = txcli.put("b", "new", "--tx", t)
    txcli.ok("get", "a", "--tx", t)
    rows = txcli.json("inflight")
    assert [(r["queue"], r["msg_id"], r["state"], r["tx"]) for r in rows] == [
        ("a", old["msg_id"], "tx-locked", t), ("b", new["msg_id"], "tx-locked", t)]
    assert "tx" in txcli.ok("inflight").out.splitlines()[0].split()
    stats = {r["queue"]: r for r in txcli.json("stats")}
    assert (stats["a"]["tx-locked"], stats["a"]["available"]) == (1, 0)
    assert (stats["b"]["tx-locked"], stats["b"]["depth"]) == (1, 1)
    txcli.ok("tx", "commit", t)
    assert txcli.json("inflight") == []
    assert {r["queue"]: r["tx-locked"] for r in txcli.json("stats")}["b"] == 0


# ---- across processes ---------------------------------------------------------------------


def test_a_shell_script_moves_work_atomically_across_invocations(txcli, tmp_path):
    """begin in one process, get and put --tx in others, commit in a last one: until the
    commit no other process sees the work move; after it, the work has moved all at once."""
    seed(txcli, "a", "job-1", "job-2")
    script = tmp_path / "move-work.sh"
    script.write_text(textwrap.dedent("""\
        set -eu
        T=$(mqcli tx begin --timeout 1m)
        for _ in 1 2; do
            mqcli get a --tx "$T" -o body --delimiter "" | mqcli put b - --tx "$T" > /dev/null
        done
        mqcli -o json browse b > before-commit.json
        mqcli -o json queue show a > a-before-commit.json
        mqcli tx commit "$T"
        echo "$T" > tx-id
        """))
    bin_dir = str(tmp_path / "bin")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mqcli").write_text("#!/bin/sh\nexec " + " ".join(mqcli_command()) + ' "$@"\n')
    (tmp_path / "bin" / "mqcli").chmod(0o755)
    proc = subprocess.run(["sh", str(script)], cwd=tmp_path, capture_output=True, timeout=120,
                          env={**os.environ, **txcli.env, "PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr
    t = int((tmp_path / "tx-id").read_text())
    assert proc.stdout.decode() == f"tx         {t}\ncommitted  4\n"
    assert json.loads((tmp_path / "before-commit.json").read_text()) == []
    a_before = json.loads((tmp_path / "a-before-commit.json").read_text())
    assert (a_before["depth"], a_before["available"]) == (2, 0)
    assert bodies(txcli, "a") == []
    assert bodies(txcli, "b") == ["job-1", "job-2"]
    assert txcli.json("tx", "list") == []
