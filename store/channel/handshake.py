"""The handshake: version negotiation, queue manager identities, and mutual authentication
with the link's pre-shared key (docs/protocol.md §2). Sans-IO: these functions turn payloads
into payloads; `wire`, `listener` and `dispatcher` move them.

    client                                   server
    HELLO     magic, versions, Nc, GUID, name ─►
              ◄─ CHALLENGE  version, Ns, GUID, max frame, name,
                            server proof = HMAC(K, "server" ‖ HELLO ‖ CHALLENGE-before-proof)
    AUTH      client proof = HMAC(K, "client" ‖ HELLO ‖ CHALLENGE) ─►
              ◄─ READY

Both proofs are HMAC-SHA256 with the 32-byte key K over the whole transcript so far, which
holds both fresh 32-byte nonces: the key itself never crosses the wire, each side proves it
holds K over a nonce the other side just chose (a recorded handshake replayed later fails on
the new nonce), the two proofs have different labels (one cannot be reflected as the other),
and both identities, versions and the server's frame limit are bound into them (no downgrade
or substitution). Proofs are compared with `hmac.compare_digest`.

The session key that seals every later frame (`Session`) is HMAC(K, "session" ‖ HELLO ‖
CHALLENGE ‖ AUTH): fresh per connection, so a frame of one session means nothing in another.
Sealing is integrity, not secrecy: the channel is not encrypted (docs/protocol.md §6).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
import uuid
from dataclasses import dataclass, field

from ..errors import AuthenticationFailed, ChannelError, ProtocolError, VersionMismatch
from .frames import HEADER, MIN_MAX_FRAME, FrameType

MAGIC = b"MQCF"
#: Versions this implementation speaks, lowest and highest. Version 2 names each transfer by
#: the sender's incarnation and seq and counts dead-lettered arrivals in the ACK (batches.py);
#: version 1 de-duplicated by msg_id, which repeats, so it is not spoken any more.
MIN_VERSION = MAX_VERSION = 2
KEY_SIZE = 32
NONCE_SIZE = 32
MAC_SIZE = 32
MAX_NAME_BYTES = 255

_HELLO = struct.Struct(">4sHH32s16sH")        # magic min max nonce guid name_len, then name
_CHALLENGE = struct.Struct(">H32s16sIH")      # version nonce guid max_frame name_len, name, proof
_SEQ = struct.Struct(">Q")
_SEALED_PREFIX = MAC_SIZE + _SEQ.size

_SERVER_PROOF = b"mqcli-channel v1 server proof\0"
_CLIENT_PROOF = b"mqcli-channel v1 client proof\0"
_SESSION_KEY = b"mqcli-channel v1 session key\0"
_FROM_CLIENT, _FROM_SERVER = b"C", b"S"


def check_key(key: bytes) -> bytes:
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_SIZE:
        raise ChannelError(f"a link key must be {KEY_SIZE} bytes (`mqcli link keygen` makes one)")
    return bytes(key)


def _name_bytes(name: str) -> bytes:
    raw = name.encode("utf-8")
    if len(raw) > MAX_NAME_BYTES:
        raw = raw[:MAX_NAME_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return raw


def _name(raw: bytes, what: str) -> str:
    if len(raw) > MAX_NAME_BYTES:  # docs/protocol.md 2.1; our own encoder cuts a longer one
        raise ProtocolError(f"{what}: the queue manager name is {len(raw)} bytes, more than {MAX_NAME_BYTES}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what}: the queue manager name is not UTF-8") from None


def _guid_text(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


# ---- the three messages ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    min_version: int
    max_version: int
    nonce: bytes
    guid: str
    name: str


def encode_hello(guid: str, name: str, nonce: bytes,
                 versions: tuple[int, int] = (MIN_VERSION, MAX_VERSION)) -> bytes:
    raw = _name_bytes(name)
    return _HELLO.pack(MAGIC, versions[0], versions[1], nonce, uuid.UUID(guid).bytes, len(raw)) + raw


def decode_hello(payload: bytes) -> Hello:
    if len(payload) < _HELLO.size:
        raise ProtocolError(f"HELLO of {len(payload)} bytes is too short")
    magic, low, high, nonce, guid, n = _HELLO.unpack_from(payload)
    if magic != MAGIC:
        raise ProtocolError("HELLO does not start with the mqcli channel magic: not an mqcli peer")
    if len(payload) != _HELLO.size + n:
        raise ProtocolError("HELLO length does not match its name")
    if low > high or low == 0:
        raise ProtocolError(f"HELLO offers an empty version range {low}..{high}")
    return Hello(low, high, nonce, _guid_text(guid), _name(payload[_HELLO.size:], "HELLO"))


@dataclass(frozen=True, slots=True)
class Challenge:
    version: int
    nonce: bytes
    guid: str
    max_frame: int
    name: str
    proof: bytes


def decode_challenge(payload: bytes) -> Challenge:
    if len(payload) < _CHALLENGE.size + MAC_SIZE:
        raise ProtocolError(f"CHALLENGE of {len(payload)} bytes is too short")
    version, nonce, guid, max_frame, n = _CHALLENGE.unpack_from(payload)
    if len(payload) != _CHALLENGE.size + n + MAC_SIZE:
        raise ProtocolError("CHALLENGE length does not match its name")
    name = _name(payload[_CHALLENGE.size:_CHALLENGE.size + n], "CHALLENGE")
    return Challenge(version, nonce, _guid_text(guid), max_frame, name, payload[-MAC_SIZE:])


def _mac(key: bytes, *parts: bytes) -> bytes:
    m = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        m.update(part)
    return m.digest()


def server_proof(key: bytes, hello: bytes, challenge_body: bytes) -> bytes:
    """The server's proof: over HELLO and the CHALLENGE payload before its proof field."""
    return _mac(key, _SERVER_PROOF, hello, challenge_body)


def client_proof(key: bytes, hello: bytes, challenge: bytes) -> bytes:
    """The client's proof: over HELLO and the whole CHALLENGE payload (the server's proof in it)."""
    return _mac(key, _CLIENT_PROOF, hello, challenge)


def session_key(key: bytes, hello: bytes, challenge: bytes, auth: bytes) -> bytes:
    return _mac(key, _SESSION_KEY, hello, challenge, auth)


def _verify(expected: bytes, got: bytes) -> bool:
    return len(got) == MAC_SIZE and hmac.compare_digest(expected, got)


# ---- the two roles -------------------------------------------------------------------

class ClientHandshake:
    """The dispatcher's side. `hello()`, then `on_challenge(payload)` → AUTH payload (raises
    AuthenticationFailed if the server does not prove the key), then `on_ready()` → Session."""

    def __init__(self, key: bytes, guid: str, name: str, *,
                 versions: tuple[int, int] = (MIN_VERSION, MAX_VERSION)) -> None:
        self._key = check_key(key)
        self.guid, self.name = guid, name
        self._versions = versions
        self._hello = b""
        self._challenge = b""
        self._auth = b""
        self.peer: Challenge | None = None

    def hello(self) -> bytes:
        self._hello = encode_hello(self.guid, self.name, secrets.token_bytes(NONCE_SIZE), self._versions)
        return self._hello

    def on_challenge(self, payload: bytes) -> bytes:
        if not self._hello:
            raise ProtocolError("CHALLENGE before HELLO")
        c = decode_challenge(payload)
        # the proof first: it covers the version, and until it verifies anyone who answers at
        # the link's address could have chosen that version (a reason to lock the queues)
        if not _verify(server_proof(self._key, self._hello, payload[:-MAC_SIZE]), c.proof):
            raise AuthenticationFailed(
                f"the listener (calling itself queue manager {c.name!r}, {c.guid}) did not prove it "
                f"holds the link's key: the two ends have different keys, or something else answers there")
        if not self._versions[0] <= c.version <= self._versions[1]:
            raise VersionMismatch(f"the listener chose protocol version {c.version}, which this "
                                  f"mqcli does not speak ({self._versions[0]}..{self._versions[1]})")
        if c.max_frame < MIN_MAX_FRAME:
            raise ProtocolError(f"the listener's maximum frame size {c.max_frame} is below "
                                f"the protocol's minimum {MIN_MAX_FRAME}")
        self.peer = c
        self._challenge = payload
        self._auth = client_proof(self._key, self._hello, payload)
        return self._auth

    def on_ready(self, payload: bytes) -> Session:
        if self.peer is None or not self._auth:
            raise ProtocolError("READY before CHALLENGE")
        if payload:
            raise ProtocolError("READY carries no payload")
        c = self.peer
        return Session(session_key(self._key, self._hello, self._challenge, self._auth), "client",
                       c.version, c.guid, c.name, c.max_frame)


class ServerHandshake:
    """The listener's side: `on_hello(payload)` → CHALLENGE payload, then `on_auth(payload)` →
    Session (raises AuthenticationFailed if the client does not prove the key)."""

    def __init__(self, key: bytes, guid: str, name: str, max_frame: int,
                 versions: tuple[int, int] = (MIN_VERSION, MAX_VERSION)) -> None:
        self._key = check_key(key)
        self.guid, self.name, self.max_frame = guid, name, max_frame
        self._versions = versions
        self._hello = b""
        self._challenge = b""
        self.peer: Hello | None = None
        self.version = 0

    def on_hello(self, payload: bytes) -> bytes:
        h = decode_hello(payload)
        version = min(h.max_version, self._versions[1])
        if version < max(h.min_version, self._versions[0]):
            raise VersionMismatch(f"the peer speaks protocol versions {h.min_version}..{h.max_version}, "
                                  f"this listener {self._versions[0]}..{self._versions[1]}")
        self.peer, self.version, self._hello = h, version, payload
        raw = _name_bytes(self.name)
        body = _CHALLENGE.pack(version, secrets.token_bytes(NONCE_SIZE), uuid.UUID(self.guid).bytes,
                               self.max_frame, len(raw)) + raw
        self._challenge = body + server_proof(self._key, payload, body)
        return self._challenge

    def on_auth(self, payload: bytes) -> Session:
        if self.peer is None:
            raise ProtocolError("AUTH before HELLO")
        if not _verify(client_proof(self._key, self._hello, self._challenge), payload):
            raise AuthenticationFailed(
                f"the peer (queue manager {self.peer.name!r}, {self.peer.guid}) did not prove it "
                f"holds the listener's key")
        h = self.peer
        return Session(session_key(self._key, self._hello, self._challenge, payload), "server",
                       self.version, h.guid, h.name, self.max_frame)


# ---- after the handshake: sealed frames --------------------------------------------------

@dataclass
class Session:
    """An authenticated connection's state: who the peer is, and the key and counters that
    seal (and open) BATCH, ACK and BYE frames.

    A sealed payload is `tag(32) ‖ seq(u64) ‖ body` with tag = HMAC(session key, direction ‖
    frame type ‖ seq ‖ body). Each direction numbers its sealed frames 1, 2, 3…; a frame out of
    that order (replayed, dropped or reordered) is refused, and so is one sent the other way
    (the direction byte differs)."""

    key: bytes = field(repr=False)
    role: str
    version: int
    peer_guid: str
    peer_name: str
    max_frame: int  # the listener's limit: the largest frame the client may send
    sent: int = 0
    received: int = 0

    def __post_init__(self) -> None:
        self._base = hmac.new(self.key, digestmod=hashlib.sha256)
        self._out, self._in = (_FROM_CLIENT, _FROM_SERVER) if self.role == "client" else (_FROM_SERVER, _FROM_CLIENT)

    def _tag(self, direction: bytes, ftype: int, seq: bytes, body: bytes | memoryview) -> bytes:
        m = self._base.copy()
        m.update(direction + bytes((ftype,)) + seq)
        m.update(body)
        return m.digest()

    def seal(self, ftype: FrameType, body: bytes) -> list[bytes]:
        """The frame's bytes as parts (header, tag and seq, body): a large body is not copied."""
        self.sent += 1
        seq = _SEQ.pack(self.sent)
        return [HEADER.pack(_SEALED_PREFIX + len(body), ftype),
                self._tag(self._out, ftype, seq, body) + seq, body]

    def open(self, ftype: FrameType, payload: bytes) -> memoryview:
        """The body of a sealed frame from the peer; AuthenticationFailed if its tag does not
        verify, ProtocolError if it is out of sequence."""
        if len(payload) < _SEALED_PREFIX:
            raise ProtocolError(f"sealed {ftype.name} frame of {len(payload)} bytes is too short")
        view = memoryview(payload)
        seq = payload[MAC_SIZE:_SEALED_PREFIX]
        body = view[_SEALED_PREFIX:]
        if not hmac.compare_digest(self._tag(self._in, ftype, seq, body), payload[:MAC_SIZE]):
            raise AuthenticationFailed(f"a {ftype.name} frame failed its seal: changed on the way, "
                                       f"or not from the authenticated peer")
        (n,) = _SEQ.unpack(seq)
        if n != self.received + 1:
            raise ProtocolError(f"{ftype.name} frame number {n} out of sequence "
                                f"(expected {self.received + 1}): replayed or reordered")
        self.received = n
        return body
