"""Links that route in a circle end at the hop limit: qmA's link qmC points at qmB's listener and
qmB's link qmC at qmA's, so a message for DIRECT=OS:qmC\\q goes back and forth. The queue
manager where it arrives for its 15th hop does not forward it: it dead-letters it, naming the
hop count, and the ACK tells the sender why (outgoing.HOP_LIMIT; Windows' Message Queuing:
MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED)."""

import json

import pytest
from channel_helpers import ListenerProc, keygen, make_store, mqcli
from store import Store, outgoing

pytestmark = pytest.mark.slow  # 15 `dispatch --once` processes, one per hop

TO_C = "DIRECT=OS:qmC\\q"


def _waiting(path):
    with Store.open(path) as st:
        return len(st.browse(TO_C)) if TO_C.casefold() in {o.name.casefold() for o in st.outgoing_list()} else 0


def test_a_message_looping_between_two_real_queue_managers_is_dead_lettered_at_the_hop_limit(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA")
    make_store(b, "qmB")
    key = keygen(tmp_path / "k.key")
    listeners = {"a": ListenerProc(a, key), "b": ListenerProc(b, key)}
    try:
        assert mqcli(a, "link", "add", "qmC", f"127.0.0.1:{listeners['b'].port}", "--key-file", key).code == 0
        assert mqcli(b, "link", "add", "qmC", f"127.0.0.1:{listeners['a'].port}", "--key-file", key).code == 0
        msg_id = json.loads(mqcli(a, "-o", "json", "put", TO_C, "looping").out)["msg_id"]
        rounds = []
        sender, receiver = a, b
        while _waiting(sender):
            assert len(rounds) < outgoing.HOP_LIMIT, "still looping"
            r = mqcli(sender, "-o", "json", "dispatch", "--once", "--timeout", "10s", timeout=60)
            assert r.code == 0, r
            rounds.append(json.loads(r.out)[0])
            sender, receiver = receiver, sender
        assert _waiting(a) == _waiting(b) == 0
    finally:
        for listener in listeners.values():
            assert listener.stop() == 0, listener.stderr
            listener.kill()
    assert len(rounds) == outgoing.HOP_LIMIT
    assert rounds[-1]["dead_lettered"] == {outgoing.HOP_LIMIT_REASON: 1}, rounds[-1]
    dead = json.loads(mqcli(b, "-o", "json", "browse", "dead-letter").out)  # hop 15 is odd: at qmB
    assert [(d["msg_id"], d["hops"], d["dead_letter_reason"]) for d in dead] == [
        (msg_id, outgoing.HOP_LIMIT, outgoing.HOP_LIMIT_REASON)]
    for store in (a, b):
        assert mqcli(store, "check").code == 0
