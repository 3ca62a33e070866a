"""`mqcli listen` as a real subprocess on a loopback port, fed by raw protocol clients: it stores
what an authenticated peer sends and acks it, and refuses a wrong key, garbage, an oversized
frame, a tampered or malformed batch and a connection dropped mid-frame, storing nothing of
them (checked in the store afterwards) and staying up for the next peer."""

import contextlib
import os
import re
import secrets
import signal
import struct
import subprocess

import pytest

from channel_helpers import (
    READY, ListenerProc, RawPeer, batch_body, bodies, wait_until, keygen, make_store, message_count, mqcli, records_for,
    sealed_batch,
)
from cli_helpers import mqcli_command
from store import Store
from store.channel.batches import decode_ack
from store.channel.frames import ErrorCode, FrameType, decode_error
from store.channel.handshake import ClientHandshake, client_proof
from store.links import load_key

MAX_FRAME = 64 * 1024


@pytest.fixture
def chan(tmp_path):
    """Store qmB with queue q and a listener on it (64 KiB frames); real records bound for it."""
    b = tmp_path / "b"
    b_guid = make_store(b, "qmB", "q")
    key_file = keygen(tmp_path / "k.key")
    origin, items = records_for(tmp_path, "qmB", "q", [b"m-%d" % i for i in range(5)])

    class Chan:
        pass

    c = Chan()
    c.store, c.guid, c.key, c.origin, c.items = b, b_guid, load_key(key_file), origin, items
    c.listener = ListenerProc(b, key_file, 0, "--max-frame", str(MAX_FRAME), "--idle-timeout", "2s")
    c.port = c.listener.port
    yield c
    try:
        assert c.listener.alive(), c.listener.stderr  # survived whatever the test sent
        assert c.listener.stop() == 0, c.listener.stderr
        assert "Traceback" not in c.listener.stderr
        assert mqcli(b, "check").code == 0
    finally:
        c.listener.kill()


def refused(peer: RawPeer, code: ErrorCode, text: str) -> None:
    frame = peer.read_frame()
    assert frame is not None and frame.type == FrameType.ERROR, frame
    got_code, got_text = decode_error(frame.payload)
    assert (got_code, text in got_text) == (code, True), (got_code, got_text)
    assert peer.closed_by_peer()


def test_a_batch_is_stored_and_acked_once_and_a_resend_is_dropped(chan):
    with RawPeer(chan.port) as peer:
        session = peer.handshake(chan.key, chan.origin)
        assert (session.peer_guid, session.peer_name) == (chan.guid, "qmB")
        peer.send(sealed_batch(session, chan.items))
        ack = peer.read_frame()
        assert ack.type == FrameType.ACK
        assert decode_ack(session.open(ack.type, ack.payload)) == (1, 5, 0, {})
        assert bodies(chan.store, "q") == [b"m-%d" % i for i in range(5)]
        peer.send(sealed_batch(session, chan.items))  # a resend after a lost ack
        ack = peer.read_frame()
        assert decode_ack(session.open(ack.type, ack.payload)) == (2, 0, 5, {})
        peer.send_parts(session.seal(FrameType.BYE, b""))
        assert peer.closed_by_peer()
    with Store.open(chan.store) as st:
        assert [m.hops for m in st.browse("q")] == [1] * 5
        assert st.info().messages == 5


def test_a_peer_with_the_wrong_key_is_refused_and_nothing_is_stored(chan):
    wrong = secrets.token_bytes(32)
    with RawPeer(chan.port) as peer:
        client = ClientHandshake(wrong, chan.origin, "intruder")
        hello = client.hello()
        peer.send_frame(FrameType.HELLO, hello)
        challenge = peer.read_frame()
        assert challenge.type == FrameType.CHALLENGE
        peer.send_frame(FrameType.AUTH, client_proof(wrong, hello, challenge.payload))
        refused(peer, ErrorCode.AUTHENTICATION, "did not prove it holds the listener's key")
    assert message_count(chan.store) == 0
    wait_until(lambda: "intruder" in chan.listener.stderr, 10, "the refusal in the listener's log")
    assert "refused: the peer (queue manager 'intruder'" in chan.listener.stderr


def test_a_batch_without_authentication_is_refused(chan):
    with RawPeer(chan.port) as peer:
        client = ClientHandshake(chan.key, chan.origin, "skipper")
        peer.send_frame(FrameType.HELLO, client.hello())
        assert peer.read_frame().type == FrameType.CHALLENGE
        peer.send_frame(FrameType.BATCH, b"\x00" * 40 + batch_body(chan.items))
        refused(peer, ErrorCode.PROTOCOL, "sent BATCH while expecting AUTH")
    with RawPeer(chan.port) as peer:  # or straight away
        peer.send_frame(FrameType.BATCH, batch_body(chan.items[:1]))
        refused(peer, ErrorCode.PROTOCOL, "while expecting HELLO")
    assert message_count(chan.store) == 0


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"\x00\x00\x00\x05\x99hello",         # an unknown frame type
    b"\x00\x00\x00\x03\x01abc",           # a HELLO that is not one
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
])
def test_garbage_is_refused_and_nothing_is_stored(chan, garbage):
    with RawPeer(chan.port) as peer:
        peer.send(garbage)
        assert peer.closed_by_peer()
    assert message_count(chan.store) == 0


def test_random_bytes_are_refused(chan):
    for _ in range(5):
        with RawPeer(chan.port) as peer:
            try:
                peer.send(secrets.token_bytes(3000))
            except (BrokenPipeError, ConnectionResetError):
                pass  # it may have closed already
            assert peer.closed_by_peer()
    assert message_count(chan.store) == 0


def test_an_oversized_frame_is_refused_from_its_header(chan):
    with RawPeer(chan.port) as peer:  # before authentication the limit is a few KiB
        peer.send(struct.pack(">IB", 5000, FrameType.HELLO))
        refused(peer, ErrorCode.TOO_LARGE, "HELLO frame of 5000 bytes is over the limit of 4096")
    with RawPeer(chan.port) as peer:  # after it, the listener's --max-frame
        peer.handshake(chan.key, chan.origin)
        peer.send(struct.pack(">IB", MAX_FRAME + 1, FrameType.BATCH))  # the header only
        refused(peer, ErrorCode.TOO_LARGE, f"BATCH frame of {MAX_FRAME + 1} bytes is over the limit of {MAX_FRAME}")
    assert message_count(chan.store) == 0


def test_a_connection_dropped_mid_frame_stores_nothing(chan):
    for cut in (1, 5, 40, 100):
        with RawPeer(chan.port) as peer:
            session = peer.handshake(chan.key, chan.origin)
            frame = sealed_batch(session, chan.items)
            peer.send(frame[:len(frame) - cut])
        # the listener saw the end of the stream inside the frame
        assert message_count(chan.store) == 0
    with RawPeer(chan.port) as peer:  # and it still serves the next peer
        session = peer.handshake(chan.key, chan.origin)
        peer.send(sealed_batch(session, chan.items))
        assert decode_ack(session.open(FrameType.ACK, peer.read_frame().payload))[1] == 5
    assert message_count(chan.store) == 5
    wait_until(lambda: "ended inside a BATCH frame" in chan.listener.stderr, 10, "the drop in the log")


def test_a_tampered_batch_is_refused_and_nothing_is_stored(chan):
    with RawPeer(chan.port) as peer:
        session = peer.handshake(chan.key, chan.origin)
        frame = bytearray(sealed_batch(session, chan.items))
        frame[-1] ^= 0x01  # one bit of the last message body
        peer.send(bytes(frame))
        refused(peer, ErrorCode.AUTHENTICATION, "failed its seal")
    assert message_count(chan.store) == 0


def test_a_batch_with_a_bad_record_is_refused_whole(chan):
    bad = chan.items[:4] + [(chan.items[4][0], b"\x01not a record")]
    with RawPeer(chan.port) as peer:
        session = peer.handshake(chan.key, chan.origin)
        peer.send(sealed_batch(session, bad))
        refused(peer, ErrorCode.BAD_DATA, "malformed message record")
    with RawPeer(chan.port) as peer:
        session = peer.handshake(chan.key, chan.origin)
        peer.send(sealed_batch(session, [("NOT A FORMAT NAME\\", chan.items[0][1])]))
        refused(peer, ErrorCode.BAD_DATA, "")
    assert message_count(chan.store) == 0


def test_a_replayed_frame_within_a_session_is_refused(chan):
    with RawPeer(chan.port) as peer:
        session = peer.handshake(chan.key, chan.origin)
        frame = sealed_batch(session, chan.items[:2])
        peer.send(frame)
        assert decode_ack(session.open(FrameType.ACK, peer.read_frame().payload)) == (1, 2, 0, {})
        peer.send(frame)
        refused(peer, ErrorCode.PROTOCOL, "out of sequence")
    assert message_count(chan.store) == 2


def test_the_listener_refuses_its_own_queue_manager(chan):
    with RawPeer(chan.port) as peer:  # a peer that shows the listener's own GUID
        client = ClientHandshake(chan.key, chan.guid, "qmB")
        peer.send_frame(FrameType.HELLO, client.hello())
        peer.send_frame(FrameType.AUTH, client.on_challenge(peer.read_frame().payload))
        refused(peer, ErrorCode.PROTOCOL, "this queue manager itself")
    assert message_count(chan.store) == 0


def test_an_idle_connection_is_closed(chan):
    with RawPeer(chan.port, timeout=30) as peer:
        peer.handshake(chan.key, chan.origin)
        refused(peer, ErrorCode.PROTOCOL, "sent nothing for 2s")
    with RawPeer(chan.port, timeout=30) as peer:  # a silent peer gets no handshake either
        assert peer.closed_by_peer()


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_signals_stop_the_listener_cleanly(tmp_path, signum, code):
    b = tmp_path / "b"
    make_store(b, "qmB", "q")
    key_file = keygen(tmp_path / "k.key")
    origin, items = records_for(tmp_path, "qmB", "q", [b"x", b"y"])
    with ListenerProc(b, key_file) as listener:
        with RawPeer(listener.port) as peer:  # a connected, idle peer does not hold it up
            session = peer.handshake(load_key(key_file), origin)
            peer.send(sealed_batch(session, items))
            assert peer.read_frame().type == FrameType.ACK
            assert listener.stop(signum) == code
            refused(peer, ErrorCode.SHUTTING_DOWN, "stopping")
        lines = listener.lines
    assert ("mqcli: error: interrupted [INTERRUPTED]" in lines) == (signum == signal.SIGINT)
    assert not any("Traceback" in line for line in lines)
    assert bodies(b, "q") == [b"x", b"y"]


def test_the_largest_max_frame_a_32_bit_length_allows_is_announced_and_served(tmp_path):
    b = tmp_path / "b"
    make_store(b, "qmB", "q")
    key_file = keygen(tmp_path / "k.key")
    origin, items = records_for(tmp_path, "qmB", "q", [b"x"])
    with ListenerProc(b, key_file, 0, "--max-frame", "4294967295") as listener:
        with RawPeer(listener.port) as peer:
            session = peer.handshake(load_key(key_file), origin)
            assert session.max_frame == 4294967295
            peer.send(sealed_batch(session, items))
            assert peer.read_frame().type == FrameType.ACK
        assert listener.stop() == 0, listener.stderr
    assert bodies(b, "q") == [b"x"]


def test_listen_usage_errors(tmp_path):
    b = tmp_path / "b"
    make_store(b, "qmB")
    key_file = keygen(tmp_path / "k.key")
    r = mqcli(b, "listen", "--key-file", tmp_path / "missing.key")
    assert r.code == 2 and "does not exist" in r.stderr
    r = mqcli(b, "listen", "--key-file", key_file, "--bind", "127.0.0.1:99999")
    assert r.code == 2 and "--bind '127.0.0.1:99999'" in r.stderr
    for bad in ("1KiB", "4GiB", "4294967296", "1TiB"):  # below the minimum, beyond a u32 length
        r = mqcli(b, "listen", "--key-file", key_file, "--max-frame", bad)
        assert r.code == 2, r
        assert f"invalid --max-frame {bad!r}: from 64KiB (65536) to 4GiB less one byte (4294967295)" in r.stderr
    for bad, why in (("0s", "must be positive"), ("forever", "cannot be forever"), ("soon", "invalid")):
        r = mqcli(b, "listen", "--key-file", key_file, "--handshake-timeout", bad)
        assert r.code == 2 and "--handshake-timeout" in r.stderr and why in r.stderr, r
    with ListenerProc(b, key_file) as first:  # the port is taken
        r = mqcli(b, "listen", "--key-file", key_file, "--bind", f"127.0.0.1:{first.port}")
        assert r.code == 13 and f"cannot listen on 127.0.0.1:{first.port}" in r.stderr
        assert r.stderr.count("mqcli: error:") == 1


def test_a_listener_whose_log_is_not_read_still_serves_and_stops(tmp_path):
    # its stderr a pipe nobody drains (`listen 2>&1 | tee log`, tee stopped): the first log
    # line blocked the event loop, so no peer was answered (the senders' dispatch failed
    # with exit 13) and SIGTERM was not acted on until someone read the pipe
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA")
    make_store(b, "qmB", "q")
    key = keygen(tmp_path / "k.key")
    r, w = os.pipe()
    listener = subprocess.Popen([*mqcli_command(), "--store", str(b), "listen", "--bind", "127.0.0.1:0",
                                 "--key-file", str(key)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=w)
    os.close(w)
    try:
        ready = b""
        while not ready.endswith(b"\n"):
            ready += os.read(r, 1)
        port = int(READY.match(ready.decode().strip()).group(2))
        filler = os.open(f"/proc/self/fd/{r}", os.O_WRONLY | os.O_NONBLOCK)  # the pipe, full from now on
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(filler, b"x" * 4096)
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{port}", "--key-file", key).code == 0
        for i in range(3):  # each connection logs a line or two, none of which fits
            with Store.open(a) as st:
                st.put("DIRECT=OS:qmB\\q", b"m%d" % i)
            assert mqcli(a, "dispatch", "--once", "--timeout", "10s").code == 0
        assert bodies(b, "q") == [b"m0", b"m1", b"m2"]
        os.close(filler)
        listener.send_signal(signal.SIGTERM)
        log = b""
        while chunk := os.read(r, 65536):  # read at last, to its end: the listener says what was lost
            log += chunk
        assert listener.wait(timeout=30) == 0
        dropped = re.search(rb"mqcli: listen: (\d+) log lines? dropped: stderr was not being read\n", log)
        assert dropped and int(dropped.group(1)) >= 3, log[-500:]
    finally:
        listener.kill()
        os.close(r)
