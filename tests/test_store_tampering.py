"""A store someone else changed under mqcli: an entry in `holders/` that is no holder's file,
counters a flipped byte left out of range, and a name whose key LMDB cannot hold. Each must end
in a clear exit code or in normal work, never in a hang, an internal error, or a message lost
or handed out twice."""

import fcntl
import os

import pytest

from store import Store, holders, keys
from store.queue_counters import QueueCounters, counters_key
from test_holders_attacks import drained, everything, fill, in_flight, stalled_get

# ΐ: a letter whose case-folded form is three code points, six bytes of UTF-8
GREEK = "\u0390"


# ---- holders/ ----------------------------------------------------------------------------------

def replace_holder_file(cli, spawn, replace, *, kill):
    """A get holding 10 messages (SIGKILLed if `kill`), its holder file then replaced by
    `replace(path)`; returns the get and that path."""
    fill(cli.store, 10)
    reader = stalled_get(cli, spawn, "--all")
    (name,) = os.listdir(cli.store / holders.HOLDERS_DIR)
    if kill:
        reader.kill()
        reader.wait(timeout=30)
    path = cli.store / holders.HOLDERS_DIR / name
    os.unlink(path)
    replace(path)
    return reader, path


def fifo(path):
    os.mkfifo(path, 0o600)


@pytest.fixture
def locked_elsewhere(tmp_path):
    """Make `path` a symbolic link to a file this test keeps locked, as a live holder would."""
    target = tmp_path / "locked"
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield lambda path: os.symlink(target, path)
    os.close(fd)


@pytest.mark.parametrize("impostor", ["fifo", "link to a locked file"])
def test_an_entry_in_place_of_a_dead_holders_file_gives_its_messages_back_once(
        cli, spawn, impostor, locked_elsewhere):
    replace = fifo if impostor == "fifo" else locked_elsewhere
    _, path = replace_holder_file(cli, spawn, replace, kill=True)
    # a timeout kills a put that hangs in the entry's open(), holding the write lock
    assert cli.subprocess("put", "q", "after", timeout=30).code == 0
    left = everything(cli.store, "q")
    assert {m.state for m in left} == {"available"} and {m.backouts for m in left} == {0}
    bodies = [m.body[:6] for m in left]
    assert sorted(bodies) == sorted([b"%06d" % i for i in range(10)] + [b"after"])
    assert not os.path.lexists(path)  # the dead holder's entry went with its messages
    assert cli.ok("check").code == 0


def test_a_fifo_in_place_of_a_live_holders_file_blocks_no_writer_and_takes_nothing_from_it(cli, spawn):
    reader, _ = replace_holder_file(cli, spawn, fifo, kill=False)
    assert cli.subprocess("put", "q", "after", timeout=30).code == 0
    try:
        assert len(in_flight(cli.store)) == 10, "a live get's messages were taken from it"
    finally:
        shown = drained(reader)
    assert shown == [b"%06d" % i for i in range(10)] + [b"after"]  # --all: the put's too, once each
    assert everything(cli.store, "q") == []


# ---- counters ----------------------------------------------------------------------------------

def zero_counter(path, entry):
    """Counters as a flipped byte may leave them: queue q's message count (`stats`, meta
    ``q qid``) or its count at priority 3 (`counters`, meta ``k qid``) zero while it holds messages."""
    with Store.open(path) as st, st._env.begin(write=True) as lt:
        qid, meta = st.queue_info("q").qid, st._dbs["meta"]
        if entry == "stats":
            lt.put(keys.qstats_key(qid), keys.QSTATS.pack(0, 0), db=meta)
        else:
            c = QueueCounters.decode(bytes(lt.get(counters_key(qid), db=meta)))
            c.by_priority[3] = 0
            lt.put(counters_key(qid), c.encode(), db=meta)


@pytest.mark.parametrize("entry", ["stats", "counters"])
def test_a_counter_a_get_would_take_below_zero_is_a_corrupt_store_and_loses_nothing(cli, entry):
    for body in ("a", "b", "c"):
        cli.ok("put", "q", body, "-q")
    zero_counter(cli.store, entry)
    result = cli.subprocess("get", "q", "-o", "body")  # a process of its own, whose hold ends with it
    assert result.code == 11 and result.err_lines == [(
        "mqcli: error: the counters of queue 'q' are out of range (a damaged store); "
        "run `mqcli check` [MQ_ERROR_STORE_CORRUPT]")], result
    assert [(m.body, m.state) for m in everything(cli.store, "q")] == [
        (b"a", "available"), (b"b", "available"), (b"c", "available")]
    cli.fails(11, "check")


# ---- names -------------------------------------------------------------------------------------

def test_lmdbs_longest_key_is_the_one_the_store_keeps_to(st):
    assert st._env.max_key_size() == keys.MAX_KEY


def test_a_name_whose_key_lmdb_cannot_hold_is_refused_as_too_long_in_bytes(cli):
    name = GREEK * 124
    result = cli.fails(2, "queue", "create", name)
    assert cli.error_line(result) == (
        f"mqcli: error: queue name {name!r} is too long in bytes: 744 case-folded (UTF-8), "
        "at most 503 [MQ_ERROR_INVALID_PARAMETER]")
    # nor as the outgoing queue of another queue manager's queue, named by its format name
    cli.fails(2, "put", f"DIRECT=OS:other\\{name}", "x")
    assert cli.ok("check").code == 0


def test_a_name_leaves_room_for_its_journals_key(cli):
    longest = GREEK * 83 + "abcde"  # 503 bytes case-folded: NAME;journal is LMDB's 511
    cli.fails(2, "queue", "create", longest + "f")
    cli.ok("queue", "create", "--journal", longest, "-q")
    cli.ok("put", longest, "kept", "-q")
    cli.ok("get", longest, "-q")
    assert [m.body for m in everything(cli.store, longest + ";journal")] == [b"kept"]


def test_a_name_of_124_ascii_characters_is_a_queue(cli):
    name = "n" * 124
    cli.ok("queue", "create", "--journal", name, "-q")
    cli.ok("put", name, "hello", "-q")
    assert cli.ok("get", name, "-o", "body").stdout == b"hello\n"
    assert cli.ok("check").code == 0
