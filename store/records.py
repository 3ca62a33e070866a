"""Message records: the `Message` type, its binary codec, and its JSON form.

The binary record is versioned (first byte) so that stores written by older versions stay
readable: `decode` dispatches on the version, and a new layout gets a new version number, never
an in-place change. No pickle: a fixed big-endian header, then length-prefixed fields.
"""

from __future__ import annotations

import base64
import binascii
import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import BadData, InvalidArgument

PUT_UNCONFIRMED = "put-unconfirmed"
AVAILABLE = "available"
LOCKED_BROWSE = "locked-browse"
GET_UNCONFIRMED = "get-unconfirmed"
BROWSE_GET_UNCONFIRMED = "browse-get-unconfirmed"
TX_LOCKED = "tx-locked"
STATES = (PUT_UNCONFIRMED, AVAILABLE, LOCKED_BROWSE, GET_UNCONFIRMED, BROWSE_GET_UNCONFIRMED, TX_LOCKED)
_STATE_CODE = {name: i + 1 for i, name in enumerate(STATES)}
_STATE_NAME = {i + 1: name for i, name in enumerate(STATES)}

MAX_PRIORITY = 7
DEFAULT_PRIORITY = 3
MAX_LABEL_CHARS = 250
MAX_CORREL_BYTES = 255
MAX_PROP_BYTES = 0xFFFF

_F_REPORT, _F_EXPRESS, _F_TRACE, _F_NO_DEAD_LETTER = 1, 2, 4, 8
_NONE16 = 0xFFFF
FORMAT_V1 = 1
# version flags state priority qid seq lookup_hi origin msg_n put_time expires app_specific
# hops backouts confirm_id lock_id tx lease_expires since
_HEADER = struct.Struct(">BBBBIQB16sIqqiHHqqqqq")
# correl label report_queue dead_letter_reason original_queue props body
_LENGTHS = struct.Struct(">HHHHHII")
_PROP_KEY = struct.Struct(">H")
_PROP_VALUE = struct.Struct(">I")
_FIXED = _HEADER.size + _LENGTHS.size
_HEADER_AND_LENGTHS = struct.Struct(_HEADER.format + _LENGTHS.format[1:])  # one unpack in decode

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_GUID_TEXT: dict[bytes, str] = {}


def guid_text(raw: bytes) -> str:
    text = _GUID_TEXT.get(raw)
    if text is None:
        text = _GUID_TEXT[raw] = str(uuid.UUID(bytes=raw))
    return text


def iso_time(us: int) -> str:
    return (_EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso_time(text: str, what: str = "time") -> int:
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise BadData(f"{what}: not an ISO-8601 time: {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // timedelta(microseconds=1)


@dataclass(slots=True, eq=True)
class Message:
    """One message as the store holds it (SPEC §4). Times are µs since the epoch, UTC."""

    body: bytes
    queue: str = ""
    state: str = AVAILABLE
    priority: int = DEFAULT_PRIORITY
    seq: int = 0
    qid: int = 0
    origin: bytes = b"\0" * 16
    msg_n: int = 0
    lookup_hi: int = 0
    put_time: int = 0
    expires: int | None = None
    correl_id: str | None = None
    label: str = ""
    props: dict[str, str] = field(default_factory=dict)
    app_specific: int = 0
    report: bool = False
    express: bool = False
    trace: bool = False
    dead_letter: bool = True
    report_queue: str | None = None
    hops: int = 0
    backouts: int = 0
    confirm_id: int | None = None
    lock_id: int | None = None
    tx: int | None = None
    lease_expires: int | None = None
    since: int | None = None
    dead_letter_reason: str | None = None
    original_queue: str | None = None

    @property
    def msg_id(self) -> str:
        return f"{guid_text(self.origin)}\\{self.msg_n}"

    @property
    def lookup_id(self) -> int:
        # seed 000: high byte set at enqueue, seven low bytes from SequentialID
        return (self.lookup_hi << 56) | (self.seq & ((1 << 56) - 1))

    @property
    def unique_id(self) -> str:
        return f"{guid_text(self.origin)}:{self.put_time}"

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def msg_class(self) -> str:
        return "report" if self.report else "normal"

    @property
    def delivery(self) -> str:
        return "express" if self.express else "recoverable"

    @property
    def in_flight(self) -> bool:
        return self.state != AVAILABLE

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: SPEC §4 field names, ISO-8601 times, `body` or `body_b64`."""
        d: dict[str, Any] = {
            "msg_id": self.msg_id,
            "lookup_id": self.lookup_id,
            "unique_id": self.unique_id,
            "correl_id": self.correl_id,
            "priority": self.priority,
            "label": self.label,
        }
        try:
            d["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        d.update(
            size=self.size,
            props=dict(self.props),
            app_specific=self.app_specific,
            **{"class": self.msg_class},
            delivery=self.delivery,
            queue=self.queue,
            state=self.state,
            put_time=iso_time(self.put_time),
            expires=None if self.expires is None else iso_time(self.expires),
            dead_letter=self.dead_letter,
            trace=self.trace,
            report_queue=self.report_queue,
            hops=self.hops,
            backouts=self.backouts,
        )
        if self.in_flight:
            d.update(
                confirm_id=self.confirm_id,
                lock_id=self.lock_id,
                tx=self.tx,
                lease_expires=None if self.lease_expires is None else iso_time(self.lease_expires),
            )
        if self.dead_letter_reason is not None:
            d["dead_letter_reason"] = self.dead_letter_reason
            d["original_queue"] = self.original_queue
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Message:
        """Read the JSON form back (export/import); every field is checked."""
        return _from_dict(d)


def encode(m: Message) -> bytes:
    correl = _opt_bytes(m.correl_id)
    label = m.label.encode("utf-8")
    report_queue = _opt_bytes(m.report_queue)
    reason = _opt_bytes(m.dead_letter_reason)
    original = _opt_bytes(m.original_queue)
    props = _encode_props(m.props) if m.props else b""
    flags = (
        (_F_REPORT if m.report else 0)
        | (_F_EXPRESS if m.express else 0)
        | (_F_TRACE if m.trace else 0)
        | (0 if m.dead_letter else _F_NO_DEAD_LETTER)
    )
    head = _HEADER.pack(
        FORMAT_V1, flags, _STATE_CODE[m.state], m.priority, m.qid, m.seq, m.lookup_hi,
        m.origin, m.msg_n, m.put_time, m.expires or 0, m.app_specific, m.hops, m.backouts,
        m.confirm_id or 0, m.lock_id or 0, m.tx or 0, m.lease_expires or 0, m.since or 0,
    )
    lengths = _LENGTHS.pack(
        _NONE16 if correl is None else len(correl),
        len(label),
        _NONE16 if report_queue is None else len(report_queue),
        _NONE16 if reason is None else len(reason),
        _NONE16 if original is None else len(original),
        len(props),
        len(m.body),
    )
    return b"".join((head, lengths, correl or b"", label, report_queue or b"", reason or b"",
                     original or b"", props, m.body))


def decode(buf: bytes, queue: str = "") -> Message:
    """Decode a record; raises BadData for anything that is not a valid record."""
    try:
        if buf[0] != FORMAT_V1:
            raise BadData(f"record format {buf[0]} is not known to this version")
        (_, flags, state, priority, qid, seq, lookup_hi, origin, msg_n, put_time, expires,
         app_specific, hops, backouts, confirm_id, lock_id, tx, lease, since,
         n_correl, n_label, n_rq, n_reason, n_orig, n_props, n_body) = _HEADER_AND_LENGTHS.unpack_from(buf)
        at = _FIXED
        # optional strings inline: this runs once per message got
        correl = report_queue = reason = original = None
        if n_correl != _NONE16:
            correl = buf[at:at + n_correl].decode("utf-8")
            at += n_correl
        label = buf[at:at + n_label].decode("utf-8") if n_label else ""
        at += n_label
        if n_rq != _NONE16:
            report_queue = buf[at:at + n_rq].decode("utf-8")
            at += n_rq
        if n_reason != _NONE16:
            reason = buf[at:at + n_reason].decode("utf-8")
            at += n_reason
        if n_orig != _NONE16:
            original = buf[at:at + n_orig].decode("utf-8")
            at += n_orig
        props = _decode_props(buf[at:at + n_props]) if n_props else {}
        at += n_props
        if at + n_body != len(buf):
            raise BadData("record length does not match its fields")
        return Message(
            buf[at:], queue, _STATE_NAME[state], priority, seq, qid, origin, msg_n, lookup_hi,
            put_time, expires or None, correl, label, props, app_specific,
            bool(flags & _F_REPORT), bool(flags & _F_EXPRESS), bool(flags & _F_TRACE),
            not flags & _F_NO_DEAD_LETTER, report_queue, hops, backouts,
            confirm_id or None, lock_id or None, tx or None, lease or None, since or None,
            reason, original,
        )
    except BadData:
        raise
    except (struct.error, IndexError, KeyError, UnicodeDecodeError) as exc:
        raise BadData(f"malformed message record: {exc}") from None


def _opt_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _encode_props(props: dict[str, str]) -> bytes:
    parts = []
    for k, v in props.items():
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        parts += (_PROP_KEY.pack(len(kb)), kb, _PROP_VALUE.pack(len(vb)), vb)
    return b"".join(parts)


def _decode_props(raw: bytes) -> dict[str, str]:
    props, at = {}, 0
    while at < len(raw):
        (nk,) = _PROP_KEY.unpack_from(raw, at)
        at += _PROP_KEY.size
        k = bytes(raw[at:at + nk]).decode("utf-8")
        at += nk
        (nv,) = _PROP_VALUE.unpack_from(raw, at)
        at += _PROP_VALUE.size
        props[k] = bytes(raw[at:at + nv]).decode("utf-8")
        at += nv
    if at != len(raw):
        raise BadData("malformed message properties")
    return props


# ---- JSON form -------------------------------------------------------------------------

def parse_msg_id(text: Any) -> tuple[bytes, int]:
    """`<origin-qm-guid>\\<n>` → (16 GUID bytes, n)."""
    if not isinstance(text, str) or "\\" not in text:
        raise BadData(f"msg_id must look like <guid>\\<n>, got {text!r}")
    guid, _, n = text.rpartition("\\")
    try:
        origin = uuid.UUID(guid).bytes
        number = int(n)
    except ValueError:
        raise BadData(f"msg_id must look like <guid>\\<n>, got {text!r}") from None
    if not 0 <= number < 1 << 32 or not n.isdigit():
        raise BadData(f"msg_id sequence number must be 0..4294967295, got {n!r}")
    return origin, number


def parse_unique_id(text: Any) -> tuple[bytes, int]:
    """`<origin-qm-guid>:<put_time µs>` → (16 GUID bytes, put_time)."""
    if not isinstance(text, str) or ":" not in text:
        raise BadData(f"unique_id must look like <guid>:<put time µs>, got {text!r}")
    guid, _, t = text.rpartition(":")
    try:
        return uuid.UUID(guid).bytes, int(t)
    except ValueError:
        raise BadData(f"unique_id must look like <guid>:<put time µs>, got {text!r}") from None


def _from_dict(d: Any) -> Message:
    if not isinstance(d, dict):
        raise BadData("a message record must be a JSON object")

    def get(key: str, kind: type | tuple[type, ...], default: Any = ..., nullable: bool = False) -> Any:
        if key not in d:
            if default is ...:
                raise BadData(f"field {key!r} is missing")
            return default
        value = d[key]
        if value is None and nullable:
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise BadData(f"field {key!r} has the wrong type: {value!r}")
        return value

    if "body" in d and "body_b64" in d:
        raise BadData("a record has either 'body' or 'body_b64', not both")
    if "body_b64" in d:
        try:
            body = base64.b64decode(get("body_b64", str), validate=True)
        except (binascii.Error, ValueError):
            raise BadData("field 'body_b64' is not valid base64") from None
    else:
        body = get("body", str).encode("utf-8")
    origin, msg_n = parse_msg_id(get("msg_id", str))
    lookup_id = get("lookup_id", int, 0)
    put_time = parse_iso_time(get("put_time", str), "put_time")
    expires_text = get("expires", str, None, nullable=True)
    props = get("props", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise BadData("field 'props' must map strings to strings")
    msg_class = get("class", str, "normal")
    delivery = get("delivery", str, "recoverable")
    state = get("state", str, AVAILABLE)
    if msg_class not in ("normal", "report"):
        raise BadData(f"field 'class' must be normal or report, got {msg_class!r}")
    if delivery not in ("recoverable", "express"):
        raise BadData(f"field 'delivery' must be recoverable or express, got {delivery!r}")
    if state not in STATES:
        raise BadData(f"field 'state' is not a message state: {state!r}")
    m = Message(
        body=body,
        queue=get("queue", str, ""),
        priority=get("priority", int, DEFAULT_PRIORITY),
        origin=origin,
        msg_n=msg_n,
        lookup_hi=(lookup_id >> 56) & 0xFF,
        put_time=put_time,
        expires=None if expires_text is None else parse_iso_time(expires_text, "expires"),
        correl_id=get("correl_id", str, None, nullable=True),
        label=get("label", str, ""),
        props=dict(props),
        app_specific=get("app_specific", int, 0),
        report=msg_class == "report",
        express=delivery == "express",
        trace=get("trace", bool, False),
        dead_letter=get("dead_letter", bool, True),
        report_queue=get("report_queue", str, None, nullable=True),
        hops=get("hops", int, 0),
        backouts=get("backouts", int, 0),
        dead_letter_reason=get("dead_letter_reason", str, None, nullable=True),
        original_queue=get("original_queue", str, None, nullable=True),
    )
    validate_fields(m)
    return m


def validate_fields(m: Message) -> None:
    """Raise InvalidArgument unless every field fits the record format and SPEC §4."""
    if not isinstance(m.body, (bytes, bytearray)):
        raise InvalidArgument("body must be bytes")
    if not 0 <= m.priority <= MAX_PRIORITY:
        raise InvalidArgument(f"priority must be 0..7, got {m.priority}")
    if len(m.label) > MAX_LABEL_CHARS:
        raise InvalidArgument(f"label is longer than {MAX_LABEL_CHARS} characters")
    if m.correl_id is not None and len(m.correl_id.encode("utf-8")) > MAX_CORREL_BYTES:
        raise InvalidArgument(f"correl_id is longer than {MAX_CORREL_BYTES} bytes")
    if not -(1 << 31) <= m.app_specific < 1 << 32:
        raise InvalidArgument("app_specific must fit in 32 bits")
    if not 0 <= m.hops <= 0xFFFF or not 0 <= m.backouts <= 0xFFFF:
        raise InvalidArgument("hops and backouts must be 0..65535")
    if m.report_queue is not None and len(m.report_queue.encode("utf-8")) >= _NONE16:
        raise InvalidArgument("report_queue is too long")
    if len(m.body) >= 1 << 32:
        raise InvalidArgument("body is larger than 4 GiB")
    for k, v in m.props.items():
        if len(k.encode("utf-8")) > MAX_PROP_BYTES:
            raise InvalidArgument(f"property name {k[:20]!r}… is too long")
