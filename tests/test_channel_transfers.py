"""Exactly once over the channel names a *transfer*, not a msg_id: real `mqcli listen` and
`mqcli dispatch` subprocesses on loopback. A store restored from its backup, a replayed
`put --jsonl` of a message sent before, a `move --copy` followed by a `move` of the original,
and arrivals the receiver dead-letters (reported back in
the ACK). The retransmission after a lost ack is tests/reliability/test_channel_kills.py's."""

import json
import os
import shutil
from collections import Counter

import pytest

from channel_helpers import linked_pair, mqcli
from store import NewMessage, Store

DEST = "DIRECT=OS:qmB\\q"


@pytest.fixture
def net(tmp_path):
    """qmA with a link qmB to a listener on qmB (queue q)."""
    with linked_pair(tmp_path, ("local",), ("q",)) as n:
        yield n


def put(store, dest, bodies, **fields):
    with Store.open(store) as st:
        return st.put_many(dest, [NewMessage(b, **fields) for b in bodies])


def arrived(store):
    with Store.open(store) as st:
        return st.browse("q", states="all")


def dispatch_json(store):
    r = mqcli(store, "-o", "json", "dispatch", "--once")
    assert r.code == 0, r
    (row,) = json.loads(r.out)
    return row


def test_a_store_restored_from_its_backup_sends_its_new_messages_not_as_duplicates(net):
    put(net.a, DEST, [b"m1", b"m2"])
    backup = net.tmp / "backup"
    assert mqcli(net.a, "backup", backup).code == 0
    # put and sent after the backup: the restore forgets them, and their msg_ids and seqs are
    # given again to the next puts
    after = put(net.a, DEST, [b"m3", b"m4"])
    row = dispatch_json(net.a)
    assert (row["messages"], row["duplicates"]) == (4, 0)

    # the recovery of RELIABILITY.md: the backup's files copied over the store's, in place
    data = net.a / "data.mdb"
    inode = os.stat(data).st_ino
    for name in os.listdir(backup):
        if (backup / name).is_file() and name != "lock.mdb":
            shutil.copyfile(backup / name, net.a / name)
    assert os.stat(data).st_ino == inode  # the same file: only the backup's marker tells
    again = put(net.a, DEST, [b"m5", b"m6"])
    assert [m.msg_id for m in again] == [m.msg_id for m in after]  # the ids repeat

    row = dispatch_json(net.a)
    # m1 and m2 were in the backup: the restore resurrects them and they cross again; the new
    # puts cross, none is taken for a duplicate
    assert (row["messages"], row["stored"], row["duplicates"]) == (4, 4, 0)
    got = Counter(m.body for m in arrived(net.b))
    assert got == {b"m1": 2, b"m2": 2, b"m3": 1, b"m4": 1, b"m5": 1, b"m6": 1}

    # and the restored store's next sends are one incarnation again: a resend is dropped
    put(net.a, DEST, [b"m7"])
    assert dispatch_json(net.a)["duplicates"] == 0
    assert Counter(m.body for m in arrived(net.b))[b"m7"] == 1


def test_a_copy_moved_to_a_remote_queue_and_then_its_original_both_cross(net):
    put(net.a, DEST, [b"first"])  # makes the outgoing queue a move can name
    assert dispatch_json(net.a)["stored"] == 1
    (m,) = put(net.a, "local", [b"twice"])
    assert mqcli(net.a, "move", "local", DEST, "--copy").code == 0
    row = dispatch_json(net.a)
    assert (row["stored"], row["duplicates"]) == (1, 0)
    assert mqcli(net.a, "move", "local", DEST).code == 0  # the original
    row = dispatch_json(net.a)
    assert (row["stored"], row["duplicates"]) == (1, 0)
    copy, original = arrived(net.b)[1:]
    assert copy.body == original.body == b"twice" and original.msg_id == m.msg_id
    assert copy.msg_id != m.msg_id and copy.props["mqcli.copy_of"] == m.msg_id


def test_a_replayed_put_of_a_message_sent_before_crosses_again(net):
    (m,) = put(net.a, DEST, [b"again"])
    r = mqcli(net.a, "-o", "jsonl", "browse", DEST)
    assert r.code == 0, r
    assert dispatch_json(net.a)["stored"] == 1  # it left the outgoing queue: the receiver has it
    r = mqcli(net.a, "put", DEST, "--jsonl", "-", input=r.stdout)  # the same msg_id, sent again
    assert r.code == 0, r
    row = dispatch_json(net.a)
    assert (row["stored"], row["duplicates"]) == (1, 0)
    assert [(x.body, x.msg_id) for x in arrived(net.b)] == [(b"again", m.msg_id)] * 2


def test_dispatch_reports_the_arrivals_the_receiver_dead_lettered_and_exits_0(net):
    put(net.a, "DIRECT=OS:qmB\\nosuch", [b"lost-1", b"lost-2"])
    put(net.a, DEST, [b"fine"])
    r = mqcli(net.a, "dispatch", "--once")
    assert r.code == 0, r  # they crossed: what became of them there is the receiver's
    (warning,) = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning.startswith("mqcli: warning: link 'qmB': 2 dead-lettered there: destination not available: ")
    assert warning.endswith("(2)") and "nosuch" in warning

    put(net.a, "DIRECT=OS:qmB\\nosuch", [b"lost-3"], dead_letter=False)  # discarded there: counted too
    row = dispatch_json(net.a)
    assert row["messages"] == 1 and row["stored"] == 0
    ((reason, count),) = row["dead_lettered"].items()
    assert count == 1 and reason.startswith("destination not available: ") and "nosuch" in reason

    with Store.open(net.b) as st:
        assert sorted(m.body for m in st.browse("dead-letter")) == [b"lost-1", b"lost-2"]
        assert [m.body for m in st.browse("q")] == [b"fine"]
    r = mqcli(net.a, "-o", "json", "outgoing", "show", "DIRECT=OS:qmB\\nosuch")
    assert r.code == 0, r
    sent = [h for h in json.loads(r.out)["history"] if h["event"] == "sent"]
    assert [sum(h["dead_lettered"].values()) for h in sent] == [2, 1]
    assert "2 dead-lettered there" in sent[0]["detail"]
