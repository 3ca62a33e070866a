"""The handshake (store/channel/handshake.py): mutual HMAC-SHA256 challenge-response over fresh
nonces. In memory for each rule, then over real TCP: the real dispatcher's bytes, captured by a
recording proxy, never hold the key, and replayed verbatim to the listener they are refused."""

import secrets
import socket
import threading

import pytest

from channel_helpers import ListenerProc, RawPeer, bodies, keygen, make_store, message_count, mqcli, wait_until
from store.channel.frames import FrameDecoder, FrameType, ProtocolError
from store.channel.handshake import (
    AuthenticationFailed, ClientHandshake, ServerHandshake, VersionMismatch, client_proof, decode_hello, encode_hello,
)
from store.links import load_key

GUID_C, GUID_S = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"


def run_handshake(client_key, server_key, *, versions=(2, 2)):
    client = ClientHandshake(client_key, GUID_C, "qmC", versions=versions)
    server = ServerHandshake(server_key, GUID_S, "qmS", 1 << 20)
    challenge = server.on_hello(client.hello())
    auth = client.on_challenge(challenge)
    server_session = server.on_auth(auth)
    return client.on_ready(b""), server_session


def test_right_key_authenticates_both_ends_and_agrees_on_a_session():
    key = secrets.token_bytes(32)
    c, s = run_handshake(key, key)
    assert (c.peer_guid, c.peer_name, c.max_frame, c.version) == (GUID_S, "qmS", 1 << 20, 2)
    assert (s.peer_guid, s.peer_name) == (GUID_C, "qmC")
    assert c.key == s.key
    body = b"batch body"
    parts = c.seal(FrameType.BATCH, body)
    assert bytes(s.open(FrameType.BATCH, b"".join(parts[1:]))) == body
    back = s.seal(FrameType.ACK, b"ack")
    assert bytes(c.open(FrameType.ACK, b"".join(back[1:]))) == b"ack"


def test_each_connection_has_a_fresh_session_key():
    key = secrets.token_bytes(32)
    assert run_handshake(key, key)[0].key != run_handshake(key, key)[0].key


def test_client_refuses_a_server_with_another_key():
    with pytest.raises(AuthenticationFailed, match="did not prove it holds the link's key"):
        run_handshake(secrets.token_bytes(32), secrets.token_bytes(32))


def test_server_refuses_a_client_with_another_key():
    key, wrong = secrets.token_bytes(32), secrets.token_bytes(32)
    client = ClientHandshake(wrong, GUID_C, "qmC")
    server = ServerHandshake(key, GUID_S, "qmS", 1 << 20)
    hello = client.hello()
    challenge = server.on_hello(hello)
    # a client that does not check the server and answers with its own (wrong) key
    with pytest.raises(AuthenticationFailed, match="did not prove it holds the listener's key"):
        server.on_auth(client_proof(wrong, hello, challenge))


def test_a_replayed_handshake_is_refused():
    key = secrets.token_bytes(32)
    client = ClientHandshake(key, GUID_C, "qmC")
    first = ServerHandshake(key, GUID_S, "qmS", 1 << 20)
    hello = client.hello()
    auth = client.on_challenge(first.on_hello(hello))
    first.on_auth(auth)  # the genuine session
    second = ServerHandshake(key, GUID_S, "qmS", 1 << 20)
    second.on_hello(hello)  # replayed HELLO: the server answers with a new nonce...
    with pytest.raises(AuthenticationFailed):
        second.on_auth(auth)  # ...so the recorded proof is worthless


def test_a_server_proof_cannot_be_reflected_as_a_client_proof():
    key = secrets.token_bytes(32)
    client = ClientHandshake(key, GUID_C, "qmC")
    server = ServerHandshake(key, GUID_S, "qmS", 1 << 20)
    challenge = server.on_hello(client.hello())
    with pytest.raises(AuthenticationFailed):
        server.on_auth(challenge[-32:])


def test_a_changed_challenge_fails_the_server_proof():
    key = secrets.token_bytes(32)
    client = ClientHandshake(key, GUID_C, "qmC")
    server = ServerHandshake(key, GUID_S, "qmS", 1 << 20)
    challenge = bytearray(server.on_hello(client.hello()))
    challenge[40] ^= 1  # a bit of the server's GUID
    with pytest.raises(AuthenticationFailed):
        client.on_challenge(bytes(challenge))


def test_a_challenge_version_counts_only_once_its_proof_verifies():
    # anyone answering at the link's address can send a CHALLENGE: an unproven one that names a
    # version we do not speak is a failed proof (the version is inside it), never VersionMismatch
    key = secrets.token_bytes(32)
    client = ClientHandshake(key, GUID_C, "qmC")
    server = ServerHandshake(secrets.token_bytes(32), GUID_S, "qmS", 1 << 20)
    challenge = bytearray(server.on_hello(client.hello()))
    challenge[0:2] = (7).to_bytes(2, "big")
    with pytest.raises(AuthenticationFailed):
        client.on_challenge(bytes(challenge))


def test_no_common_version_is_refused():
    key = secrets.token_bytes(32)
    with pytest.raises(VersionMismatch, match="3..4"):
        run_handshake(key, key, versions=(3, 4))
    # version 1 de-duplicated by msg_id, which repeats: a dispatcher that speaks only it is refused
    with pytest.raises(VersionMismatch, match="1..1"):
        run_handshake(key, key, versions=(1, 1))


def test_sealed_frames_refuse_tampering_replay_and_reflection():
    key = secrets.token_bytes(32)
    c, s = run_handshake(key, key)
    first = b"".join(c.seal(FrameType.BATCH, b"one")[1:])
    tampered = bytearray(b"".join(c.seal(FrameType.BATCH, b"two")[1:]))
    tampered[-1] ^= 1
    assert bytes(s.open(FrameType.BATCH, first)) == b"one"
    with pytest.raises(AuthenticationFailed):
        s.open(FrameType.BATCH, bytes(tampered))
    with pytest.raises(ProtocolError, match="out of sequence"):
        s.open(FrameType.BATCH, first)  # the same frame again
    with pytest.raises(AuthenticationFailed):
        s.open(FrameType.BYE, b"".join(c.seal(FrameType.BATCH, b"x")[1:]))  # another type
    with pytest.raises(AuthenticationFailed):
        c.open(FrameType.BATCH, b"".join(c.seal(FrameType.BATCH, b"x")[1:]))  # sent back to its sender


def test_keys_must_be_32_bytes():
    with pytest.raises(Exception, match="32 bytes"):
        ClientHandshake(b"short", GUID_C, "qmC")


# ---- over real TCP --------------------------------------------------------------------------

class RecordingProxy:
    """Forwards one TCP connection to `port`, recording what the client sent."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listen = socket.create_server(("127.0.0.1", 0))
        self.listen.settimeout(60)
        self.port = self.listen.getsockname()[1]
        self.client_bytes = bytearray()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _pipe(self, src, dst, record):
        try:
            while data := src.recv(65536):
                if record:
                    self.client_bytes += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _run(self):
        client, _ = self.listen.accept()
        server = socket.create_connection(("127.0.0.1", self.target), timeout=60)
        client.settimeout(60)
        up = threading.Thread(target=self._pipe, args=(client, server, True), daemon=True)
        up.start()
        self._pipe(server, client, False)
        up.join(60)
        client.close()
        server.close()


def test_the_key_never_crosses_the_wire_and_a_replayed_session_is_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_store(a, "qmA")
    make_store(b, "qmB", "q")
    key_file = keygen(tmp_path / "k.key")
    key = load_key(key_file)
    with ListenerProc(b, key_file) as listener:
        proxy = RecordingProxy(listener.port)
        assert mqcli(a, "link", "add", "qmB", f"127.0.0.1:{proxy.port}", "--key-file", key_file).code == 0
        assert mqcli(a, "put", "DIRECT=OS:qmB\\q", "secret-free body", "--count", "3").code == 0
        result = mqcli(a, "dispatch", "--once")
        assert result.code == 0, result
        proxy.thread.join(30)
        assert bodies(b, "q") == [b"secret-free body"] * 3
        sent = bytes(proxy.client_bytes)
        assert sent.startswith(b"\x00\x00") and b"MQCF" in sent  # the HELLO went through the proxy
        for form in (key, key.hex().encode(), key.hex().upper().encode(), key[:16], key[16:]):
            assert form not in sent

        # the same bytes, replayed: the listener's nonce is new, so the recorded AUTH fails
        recorded = FrameDecoder().feed(sent)
        assert [f.type for f in recorded[:2]] == [FrameType.HELLO, FrameType.AUTH]
        assert FrameType.BATCH in [f.type for f in recorded]
        before = message_count(b)
        with RawPeer(listener.port) as replay:
            replay.send_frame(FrameType.HELLO, recorded[0].payload)
            assert replay.read_frame().type == FrameType.CHALLENGE
            replay.send_frame(FrameType.AUTH, recorded[1].payload)
            refusal = replay.read_frame()
            assert refusal.type == FrameType.ERROR
            assert b"did not prove it holds the listener's key" in refusal.payload
            assert replay.closed_by_peer()
        assert message_count(b) == before
        wait_until(lambda: "did not prove it holds the listener's key" in listener.stderr, 10, "the log line")
        assert listener.stop() == 0


def test_a_name_longer_than_the_protocol_allows_is_refused():
    # docs/protocol.md 2.1: a queue manager name is at most 255 bytes (our own encoder cuts a
    # longer one); a HELLO naming 4,000 bytes was answered
    head = encode_hello(GUID_C, "", secrets.token_bytes(32))  # its name's length (u16) last
    name = b"n" * 4000
    with pytest.raises(ProtocolError, match="the queue manager name is 4000 bytes, more than 255"):
        decode_hello(head[:-2] + len(name).to_bytes(2, "big") + name)
    assert decode_hello(encode_hello(GUID_C, "é" * 200, secrets.token_bytes(32))).name == "é" * 127  # cut whole
