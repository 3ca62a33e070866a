"""Message records: the `Message` type, its binary codec, and its JSON form.

The binary record is versioned (first byte) so that stores written by older versions stay
readable: `decode` dispatches on the version, and a new layout gets a new version number, never
an in-place change. No pickle: a fixed big-endian header, then length-prefixed fields.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from .arguments import is_decimal
from .errors import BadData, InvalidArgument, MessageExpired, QueueNotAvailable, QueueQuotaExceeded
from .keys import LOOKUP_SEQ_MASK

PUT_UNCONFIRMED = "put-unconfirmed"
AVAILABLE = "available"
LOCKED_BROWSE = "locked-browse"
GET_UNCONFIRMED = "get-unconfirmed"
BROWSE_GET_UNCONFIRMED = "browse-get-unconfirmed"
TX_LOCKED = "tx-locked"
STATES = (PUT_UNCONFIRMED, AVAILABLE, LOCKED_BROWSE, GET_UNCONFIRMED, BROWSE_GET_UNCONFIRMED, TX_LOCKED)
_STATE_CODE = {name: i + 1 for i, name in enumerate(STATES)}
_AVAILABLE_CODE, _TX_LOCKED_CODE = _STATE_CODE[AVAILABLE], _STATE_CODE[TX_LOCKED]
_STATE_NAME = {i + 1: name for i, name in enumerate(STATES)}

MAX_PRIORITY = 7
DEFAULT_PRIORITY = 3
MAX_LABEL_CHARS = 250
MAX_CORREL_BYTES = 255
MAX_PROP_BYTES = 0xFFFF
MAX_BODY_BYTES = (1 << 32) - 1  # the record format's limit (a 32-bit length)
DEFAULT_MAX_MESSAGE_SIZE = 4 << 20  # a store's max-message-size: MSMQ's MaxMessageSize, 4 MB

_F_REPORT, _F_EXPRESS, _F_TRACE, _F_NO_DEAD_LETTER, _F_TX_PUT = 1, 2, 4, 8, 16
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
_HEADER_AND_LENGTHS = struct.Struct(_HEADER.format + _LENGTHS.format[1:])
# the same bytes as decode unpacks them: the five in-flight fields (confirm_id .. since) as one
# 40-byte field and the optional fields' lengths (correl_id .. props) as one 14-byte field, each
# compared whole with its usual value (an available message's: none set, no optional field) and
# unpacked only when it differs: 17 values a record, not 26 (-9% of a batched get's instructions).
_IN_FLIGHT = struct.Struct(">" + _HEADER.format[-5:])
_OPTIONAL_LENGTHS = struct.Struct(_LENGTHS.format[:-1])
_AT_REST = struct.Struct(f"{_HEADER.format[:-5]}{_IN_FLIGHT.size}s{_OPTIONAL_LENGTHS.size}sI")
_NOT_IN_FLIGHT = bytes(_IN_FLIGHT.size)
_NO_OPTIONAL = _OPTIONAL_LENGTHS.pack(_NONE16, 0, _NONE16, _NONE16, _NONE16, 0)
# positions in a _HEADER_AND_LENGTHS tuple (RecordColumns keeps the tuples, decode unpacks them)
(_H_VERSION, _H_FLAGS, _H_STATE, _H_PRIORITY, _H_QID, _H_SEQ, _H_LOOKUP_HI, _H_ORIGIN, _H_MSG_N,
 _H_PUT_TIME, _H_EXPIRES, _H_APP_SPECIFIC, _H_HOPS, _H_BACKOUTS, _H_CONFIRM_ID, _H_LOCK_ID, _H_TX,
 _H_LEASE, _H_SINCE, _H_N_CORREL, _H_N_LABEL, _H_N_RQ, _H_N_REASON, _H_N_ORIG, _H_N_PROPS,
 _H_N_BODY) = range(26)

# The layout for a reader of many records at once (store/analytics/record_arrays.py builds its
# array type from these): the names of _HEADER_AND_LENGTHS's values in order (the length of
# an optional string is ABSENT when the string is absent), its struct format and size, the
# flag bits and each state by its code (None for a code no state has).
HEADER_FIELDS = ("version", "flags", "state", "priority", "qid", "seq", "lookup_hi", "origin", "msg_n",
                 "put_time", "expires", "app_specific", "hops", "backouts", "confirm_id", "lock_id", "tx",
                 "lease_expires", "since", "n_correl_id", "n_label", "n_report_queue",
                 "n_dead_letter_reason", "n_original_queue", "n_props", "n_body")
HEADER_FORMAT = _HEADER_AND_LENGTHS.format
HEADER_SIZE = _FIXED
ABSENT = _NONE16
FLAG_REPORT, FLAG_EXPRESS, FLAG_TRACE, FLAG_NO_DEAD_LETTER = _F_REPORT, _F_EXPRESS, _F_TRACE, _F_NO_DEAD_LETTER
STATE_BY_CODE = tuple(_STATE_NAME.get(code) for code in range(max(_STATE_NAME) + 1))
OPTIONAL_STRINGS = ("correl_id", "label", "report_queue", "dead_letter_reason", "original_queue")  # record order

# where a record's header keeps its in-flight fields: a hold rewrites them in place
_AT_STATE = struct.calcsize(">BB")
_AT_CONFIRM = struct.calcsize(">BBBBIQB16sIqqiHH")
_AT_SINCE = struct.calcsize(">BBBBIQB16sIqqiHHqqqq")
_Q = struct.Struct(">q")
# a record's format version and put time, all a walk for the oldest message reads of it
# (store/write.py `oldest_times`): one unpack a record instead of decode's
VERSION_AND_PUT_TIME = struct.Struct(f">B{struct.calcsize('>BBBBIQB16sI') - 1}xq")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# the times this store writes and reads (µs since the epoch): ISO-8601's four-digit years
MIN_US = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
MAX_US = (datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)
# How far ahead of this store's clock a put time given with a record (import, a replayed `put
# --jsonl`) may be. The put-time counter moves past the put times of this queue manager's own
# messages stored with their ids (Write.keep_ids_ahead_of), and every later put is stamped
# after it (Write.allocate_ids): a put time far ahead would stamp every later message there.
# A day holds any clock written in the wrong time zone (UTC+14 at most) and any real skew
# between hosts; anything later is not a time a message was put.
MAX_PUT_TIME_LEAD_US = 86_400 * 1_000_000
_GUID_TEXT: dict[bytes, str] = {}


def msg_id_text(origin: bytes, msg_n: int) -> str:
    """A msg_id as MSMQ writes it: the origin queue manager's GUID, a backslash, the number."""
    return f"{guid_text(origin)}\\{msg_n}"


def unique_id_text(origin: bytes, put_time: int) -> str:
    """The MQe unique id: the origin's GUID and the put time in µs."""
    return f"{guid_text(origin)}:{put_time}"


def lookup_id_of(lookup_hi: int, seq: int) -> int:
    """[MS-MQDMPR] 3.1.7.1.9: the high byte set at enqueue, the seven low bytes from SequentialID."""
    return (lookup_hi << 56) | (seq & LOOKUP_SEQ_MASK)


def guid_text(raw: bytes) -> str:
    """16 GUID bytes → the text str(uuid.UUID(bytes=raw)) gives (without importing uuid, which
    imports platform: a put or get pays for it at start-up)."""
    text = _GUID_TEXT.get(raw)
    if text is None:
        if len(raw) != 16:
            raise ValueError(f"a GUID is 16 bytes, not {len(raw)}")
        h = raw.hex()
        text = _GUID_TEXT[raw] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return text


_ISO_SECONDS: dict[int, str] = {}


def iso_time(us: int) -> str:
    """ISO-8601 UTC with microseconds; the date-and-second part is cached (exports and gets
    format many times of the same second). A time outside MIN_US..MAX_US (a record from a
    peer, or written by an older version) is written as the nearest end of that range, never
    an error: what a store holds can always be shown."""
    seconds, micros = divmod(min(max(us, MIN_US), MAX_US), 1_000_000)
    prefix = _ISO_SECONDS.get(seconds)
    if prefix is None:
        if len(_ISO_SECONDS) > 4096:
            _ISO_SECONDS.clear()
        # isoformat, not strftime("%Y"): glibc writes year 1 as "1", not "0001"
        prefix = _ISO_SECONDS[seconds] = (_EPOCH + timedelta(seconds=seconds)).isoformat()[:19]
    return f"{prefix}.{micros:06d}Z"


def check_put_time(put_time: int, now: int, where: str = "") -> None:
    """BadData (its message starting with `where`) unless `put_time` (µs) is at most
    MAX_PUT_TIME_LEAD_US ahead of `now`, the store's clock: a record that carries one later is
    not stored with it."""
    if put_time > now + MAX_PUT_TIME_LEAD_US:
        raise BadData(f"{where}put_time {iso_time(put_time)} is more than {MAX_PUT_TIME_LEAD_US // 3_600_000_000}h "
                      f"ahead of this store's clock ({iso_time(now)}); --new-ids stores the message with a new put time")


_ISO_PARSED: dict[str, int] = {}


def parse_iso_time(text: str, what: str = "time") -> int:
    """ISO-8601 → µs since the epoch (naive means UTC). Our own form
    `YYYY-MM-DDTHH:MM:SS.ffffffZ` takes a cached fast path."""
    if len(text) == 27 and text[19] == "." and text[26] == "Z" and is_decimal(text[20:26]):
        seconds = _ISO_PARSED.get(text[:19])
        if seconds is None:
            seconds = _parse_iso(text[:19] + "Z", what) // 1_000_000
            if len(_ISO_PARSED) < 4096:
                _ISO_PARSED[text[:19]] = seconds
        return seconds * 1_000_000 + int(text[20:26])
    return _parse_iso(text, what)


def _parse_iso(text: str, what: str) -> int:
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise BadData(f"{what}: not an ISO-8601 time: {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    us = (dt - _EPOCH) // timedelta(microseconds=1)
    if not MIN_US <= us <= MAX_US:  # an offset can take a time out of range: iso_time could not write it
        raise BadData(f"{what}: {text!r} is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z (UTC)")
    return us


# MSMQ's class for a message that the receiving application rejected (mq.h
# MQMSG_CLASS_NACK_RECEIVE_REJECTED): MSMQ's own answer to a poison message, which has no
# MQ_ERROR_* status of its own.
POISON_STATUS = "MQMSG_CLASS_NACK_RECEIVE_REJECTED"
# and for one that would have made more hops than MSMQ allows (store/outgoing.py HOP_LIMIT)
HOP_COUNT_STATUS = "MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED"


def dead_letter_status(reason: str | None) -> str | None:
    """The MQ status a dead-letter reason stands for (None for a message that is no dead
    letter). The reasons are the ones this store writes: `expired` and `expired in transit`
    (the time to be received passed: MQ_ERROR_MESSAGE_TIMED_OUT), `max-backouts` (a poison
    message), `hop count exceeded` (store/outgoing.py HOP_LIMIT), `queue quota exceeded (N bytes)`
    and `destination not available: Q` (an
    arrival that could not be enqueued, docs/protocol.md). Anything else is MQ_ERROR."""
    if reason is None:
        return None
    if reason.startswith("expired"):
        return MessageExpired.status
    if reason == "max-backouts":
        return POISON_STATUS
    if reason.startswith("hop count exceeded"):
        return HOP_COUNT_STATUS
    if reason.startswith("queue quota exceeded"):
        return QueueQuotaExceeded.status
    if reason.startswith("destination not available"):
        return QueueNotAvailable.status
    return "MQ_ERROR"


@dataclass(slots=True, eq=True)
class Message:
    """One message as the store holds it (docs/design.md#messages). Times are µs since the epoch, UTC."""

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
    tx_put: bool = False  # tx-locked by a put inside its transaction (else by a get)

    @property
    def msg_id(self) -> str:
        return msg_id_text(self.origin, self.msg_n)

    @property
    def lookup_id(self) -> int:
        return lookup_id_of(self.lookup_hi, self.seq)

    @property
    def unique_id(self) -> str:
        return unique_id_text(self.origin, self.put_time)

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
    def hidden(self) -> bool:
        """Not yet put: a put awaiting its confirm, or a put inside an open transaction. Such
        a message is hidden from every query, even by its own id (MQe Put Unconfirmed)."""
        return self.state == PUT_UNCONFIRMED or (self.state == TX_LOCKED and self.tx_put)

    @property
    def in_flight(self) -> bool:
        return self.state != AVAILABLE

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the field names of docs/design.md#messages, ISO-8601 times, `body` or `body_b64`."""
        origin = guid_text(self.origin)
        d: dict[str, Any] = {
            "msg_id": f"{origin}\\{self.msg_n}",
            "lookup_id": (self.lookup_hi << 56) | (self.seq & 0xFFFFFFFFFFFFFF),
            "unique_id": f"{origin}:{self.put_time}",
            "correl_id": self.correl_id,
            "priority": self.priority,
            "label": self.label,
        }
        try:
            d["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        d["size"] = len(self.body)
        d["props"] = dict(self.props)
        d["app_specific"] = self.app_specific
        d["class"] = "report" if self.report else "normal"
        d["delivery"] = "express" if self.express else "recoverable"
        d["queue"] = self.queue
        d["state"] = self.state
        d["put_time"] = iso_time(self.put_time)
        d["expires"] = None if self.expires is None else iso_time(self.expires)
        d["dead_letter"] = self.dead_letter
        d["trace"] = self.trace
        d["report_queue"] = self.report_queue
        d["hops"] = self.hops
        d["backouts"] = self.backouts
        if self.state != AVAILABLE:
            d["confirm_id"] = self.confirm_id
            d["lock_id"] = self.lock_id
            d["tx"] = self.tx
            d["lease_expires"] = None if self.lease_expires is None else iso_time(self.lease_expires)
        if self.dead_letter_reason is not None:
            d["dead_letter_reason"] = self.dead_letter_reason
            d["dead_letter_status"] = dead_letter_status(self.dead_letter_reason)
            d["original_queue"] = self.original_queue
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Message:
        """Read the JSON form back (export/import); every field is checked."""
        return _from_dict(d)


def at_rest(m: Message, state: str = AVAILABLE) -> Message:
    """`m` out of every in-flight state: in `state` (available, unless a caller puts it back
    under its browse lock), with no confirm id, lock id, transaction, lease or time it entered
    an in-flight state. The one list of the in-flight fields: a move, a copy, an import or an
    arrival that missed one would carry a stale holder into its new place."""
    m.state = state
    m.confirm_id = m.lock_id = m.tx = m.lease_expires = m.since = None
    m.tx_put = False
    return m


def encode(m: Message) -> bytes:
    if (m.correl_id is None and not m.label and m.report_queue is None and not m.props
            and m.dead_letter_reason is None and m.original_queue is None):
        # the common case, no optional fields: the header and the body (the batched-put hot path)
        flags = ((_F_REPORT if m.report else 0) | (_F_EXPRESS if m.express else 0) | (_F_TRACE if m.trace else 0)
                 | (0 if m.dead_letter else _F_NO_DEAD_LETTER) | (_F_TX_PUT if m.tx_put else 0))
        if m.confirm_id is None and m.lock_id is None and m.tx is None and m.lease_expires is None and m.since is None:
            # and at rest (a put's): the in-flight fields and the lengths as decode compares them,
            # packed whole (11 values fewer to convert: -5% of a batched put's instructions)
            return _AT_REST.pack(
                FORMAT_V1, flags, _STATE_CODE[m.state], m.priority, m.qid, m.seq, m.lookup_hi, m.origin, m.msg_n,
                m.put_time, m.expires or 0, m.app_specific, m.hops, m.backouts, _NOT_IN_FLIGHT, _NO_OPTIONAL,
                len(m.body),
            ) + m.body
        return _HEADER_AND_LENGTHS.pack(
            FORMAT_V1, flags, _STATE_CODE[m.state],
            m.priority, m.qid, m.seq, m.lookup_hi, m.origin, m.msg_n, m.put_time, m.expires or 0,
            m.app_specific, m.hops, m.backouts, m.confirm_id or 0, m.lock_id or 0, m.tx or 0,
            m.lease_expires or 0, m.since or 0, _NONE16, 0, _NONE16, _NONE16, _NONE16, 0, len(m.body),
        ) + m.body
    correl = None if m.correl_id is None else m.correl_id.encode("utf-8")
    label = m.label.encode("utf-8") if m.label else b""
    report_queue = None if m.report_queue is None else m.report_queue.encode("utf-8")
    reason = None if m.dead_letter_reason is None else m.dead_letter_reason.encode("utf-8")
    original = None if m.original_queue is None else m.original_queue.encode("utf-8")
    props = _encode_props(m.props) if m.props else b""
    flags = (
        (_F_REPORT if m.report else 0)
        | (_F_EXPRESS if m.express else 0)
        | (_F_TRACE if m.trace else 0)
        | (0 if m.dead_letter else _F_NO_DEAD_LETTER)
        | (_F_TX_PUT if m.tx_put else 0)
    )
    fixed = _HEADER_AND_LENGTHS.pack(
        FORMAT_V1, flags, _STATE_CODE[m.state], m.priority, m.qid, m.seq, m.lookup_hi,
        m.origin, m.msg_n, m.put_time, m.expires or 0, m.app_specific, m.hops, m.backouts,
        m.confirm_id or 0, m.lock_id or 0, m.tx or 0, m.lease_expires or 0, m.since or 0,
        _NONE16 if correl is None else len(correl),
        len(label),
        _NONE16 if report_queue is None else len(report_queue),
        _NONE16 if reason is None else len(reason),
        _NONE16 if original is None else len(original),
        len(props),
        len(m.body),
    )
    if correl is None and not label and report_queue is None and reason is None and original is None and not props:
        return fixed + m.body  # the common case: no optional fields
    return b"".join((fixed, correl or b"", label, report_queue or b"", reason or b"",
                     original or b"", props, m.body))


def held_records(raws: list[bytes], state: str, confirm_id: int, since: int) -> list[bytes]:
    """Available messages' records (no in-flight fields set), now in flight under
    `confirm_id` since `since`: their headers changed in place, no decode or encode."""
    code = bytes((_STATE_CODE[state],))
    cid, at = _Q.pack(confirm_id), _Q.pack(since)
    s, c, c_end, t, t_end = _AT_STATE, _AT_CONFIRM, _AT_CONFIRM + 8, _AT_SINCE, _AT_SINCE + 8
    return [b"".join((raw[:s], code, raw[s + 1:c], cid, raw[c_end:t], at, raw[t_end:])) for raw in raws]


def tx_put_committed(raw: bytes) -> bytes | None:
    """The record of a message put inside a transaction (tx-locked, `tx_put`), as the commit
    makes it available: at_rest's changes made to the header's bytes (state, the tx-put flag,
    the five in-flight fields), no decode or encode. None for any other record."""
    if len(raw) < _FIXED or raw[0] != FORMAT_V1 or not raw[1] & _F_TX_PUT or raw[_AT_STATE] != _TX_LOCKED_CODE:
        return None
    return b"".join((raw[:1], bytes((raw[1] & ~_F_TX_PUT, _AVAILABLE_CODE)), raw[_AT_STATE + 1:_AT_CONFIRM],
                     _NOT_IN_FLIGHT, raw[_AT_CONFIRM + _IN_FLIGHT.size:]))


def body_size_of(raw: bytes) -> int:
    """The size of a valid record's body, read from its header alone."""
    return int(_BODY_SIZE.unpack_from(raw, _FIXED - _BODY_SIZE.size)[0])


_BODY_SIZE = struct.Struct(">I")  # the last of a record's lengths
_new_message = Message.__new__  # decode's common case: see there
# a record's flags byte -> (report, express, trace, dead_letter, tx_put), as Message takes them
_FLAG_FIELDS = tuple((bool(f & _F_REPORT), bool(f & _F_EXPRESS), bool(f & _F_TRACE), not f & _F_NO_DEAD_LETTER,
                      bool(f & _F_TX_PUT)) for f in range(256))


def decode(buf: bytes, queue: str = "") -> Message:
    """Decode a record; raises BadData for anything that is not a valid record."""
    return decode_many((buf,), queue)[0]


def put_time_of(buf: bytes) -> int:
    """A record's put time (µs), read from its header alone (VERSION_AND_PUT_TIME)."""
    if len(buf) >= _FIXED and buf[0] == FORMAT_V1:
        return int(VERSION_AND_PUT_TIME.unpack_from(buf)[1])
    return decode(buf).put_time  # another format, or no record: decode says what is wrong


def decode_many(bufs: Iterable[bytes], queue: str = "") -> list[Message]:
    """`decode` of each record, in one loop: a batched get's hot path (no call a record for
    the common one). Raises BadData for the first that is not a valid record."""
    messages: list[Message] = []
    for buf in bufs:
        try:
            (version, flags, state, priority, qid, seq, lookup_hi, origin, msg_n, put_time, expires,
             app_specific, hops, backouts, in_flight, optional, n_body) = _AT_REST.unpack_from(buf)
            report, express, trace, dead_letter, tx_put = _FLAG_FIELDS[flags]
            state_name = _STATE_NAME[state]
        except (struct.error, IndexError, KeyError):
            messages.append(_decode_any(buf, queue))  # raises the error that names what is wrong
            continue
        if version != FORMAT_V1 or optional != _NO_OPTIONAL or _FIXED + n_body != len(buf):
            messages.append(_decode_any(buf, queue))
            continue
        if in_flight == _NOT_IN_FLIGHT:  # at rest: an available message, as a get takes it
            confirm_id = lock_id = tx = lease = since = None
        else:
            confirm_id, lock_id, tx, lease, since = _IN_FLIGHT.unpack(in_flight)
            confirm_id, lock_id, tx = confirm_id or None, lock_id or None, tx or None
            lease, since = lease or None, since or None
        # the common case: no optional field (as encode writes it). The fields are
        # set on a bare instance: calling Message's __init__ with 30 arguments costs 2,400
        # more instructions than the 30 stores (a batched get: ~10%). Every field is set
        # (Message's order); the round-trip tests fail on one left out.
        m = _new_message(Message)
        m.body = buf[_FIXED:]
        m.queue = queue
        m.state = state_name
        m.priority = priority
        m.seq = seq
        m.qid = qid
        m.origin = origin
        m.msg_n = msg_n
        m.lookup_hi = lookup_hi
        m.put_time = put_time
        m.expires = expires or None
        m.correl_id = None
        m.label = ""
        m.props = {}
        m.app_specific = app_specific
        m.report = report
        m.express = express
        m.trace = trace
        m.dead_letter = dead_letter
        m.report_queue = None
        m.hops = hops
        m.backouts = backouts
        m.confirm_id = confirm_id
        m.lock_id = lock_id
        m.tx = tx
        m.lease_expires = lease
        m.since = since
        m.dead_letter_reason = None
        m.original_queue = None
        m.tx_put = tx_put
        messages.append(m)
    return messages


def _decode_any(buf: bytes, queue: str) -> Message:
    """decode of any record: with optional fields, or not a valid record (BadData)."""
    try:
        if buf[0] != FORMAT_V1:
            raise BadData(f"record format {buf[0]} is not known to this version")
        (_, flags, state, priority, qid, seq, lookup_hi, origin, msg_n, put_time, expires,
         app_specific, hops, backouts, in_flight, optional, n_body) = _AT_REST.unpack_from(buf)
        report, express, trace, dead_letter, tx_put = _FLAG_FIELDS[flags]
        confirm_id, lock_id, tx, lease, since = _IN_FLIGHT.unpack(in_flight)
        n_correl, n_label, n_rq, n_reason, n_orig, n_props = _OPTIONAL_LENGTHS.unpack(optional)
        at = _FIXED
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
            put_time, expires or None, correl, label, props, app_specific, report, express, trace,
            dead_letter, report_queue, hops, backouts, confirm_id or None, lock_id or None, tx or None,
            lease or None, since or None, reason, original, tx_put,
        )
    except BadData:
        raise
    except (struct.error, IndexError, KeyError, UnicodeDecodeError) as exc:
        raise BadData(f"malformed message record: {exc}") from None


def _encode_props(props: dict[str, str]) -> bytes:
    parts: list[bytes] = []
    for k, v in props.items():
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        parts += (_PROP_KEY.pack(len(kb)), kb, _PROP_VALUE.pack(len(vb)), vb)
    return b"".join(parts)


def _decode_props(raw: bytes) -> dict[str, str]:
    keys, values = _props_lists(raw)
    return dict(zip(keys, values))


def _props_lists(raw: bytes) -> tuple[list[str], list[str]]:
    """A property block's keys and values, in record order."""
    keys, values, at = [], [], 0
    while at < len(raw):
        (nk,) = _PROP_KEY.unpack_from(raw, at)
        at += _PROP_KEY.size
        keys.append(raw[at:at + nk].decode("utf-8"))
        at += nk
        (nv,) = _PROP_VALUE.unpack_from(raw, at)
        at += _PROP_VALUE.size
        values.append(raw[at:at + nv].decode("utf-8"))
        at += nv
    if at != len(raw):
        raise BadData("malformed message properties")
    return keys, values


# ---- many records, field by field -------------------------------------------------------

# header-only fields: header position; the *_NONE ones are null when zero (as in decode)
_HEADER_FIELDS = {"qid": _H_QID, "seq": _H_SEQ, "priority": _H_PRIORITY, "app_specific": _H_APP_SPECIFIC,
                  "put_time": _H_PUT_TIME, "hops": _H_HOPS, "backouts": _H_BACKOUTS, "size": _H_N_BODY,
                  "origin": _H_ORIGIN, "msg_n": _H_MSG_N, "lookup_hi": _H_LOOKUP_HI}
_HEADER_FIELDS_NONE = {"expires": _H_EXPIRES, "confirm_id": _H_CONFIRM_ID, "lock_id": _H_LOCK_ID,
                       "tx": _H_TX, "lease_expires": _H_LEASE, "since": _H_SINCE}
# the optional strings in record order: field → its length's header position
_STRING_FIELDS = {"correl_id": _H_N_CORREL, "label": _H_N_LABEL, "report_queue": _H_N_RQ,
                  "dead_letter_reason": _H_N_REASON, "original_queue": _H_N_ORIG}
_STRING_AT = {name: k for k, name in enumerate(_STRING_FIELDS)}  # its index in a record's starts
_STRING_LENGTHS = tuple(_STRING_FIELDS.values())
_PROPS_SEEN: dict[bytes, tuple[list[str], list[str], dict[str, str]]] = {}  # property block → parsed


def decode_columns(bufs: Sequence[bytes], qids: Container[int], report_only: bool = False) -> RecordColumns:
    """Split records for reading field by field (`RecordColumns`): only those of the queues
    `qids`, and with `report_only` only reports. Raises BadData for a record that is not a
    valid record, and for one of another format version even when `decode` knows it."""
    unpack = _HEADER_AND_LENGTHS.unpack_from
    headers, kept = [], []
    for buf in bufs:
        if buf[0] != FORMAT_V1:
            decode(buf)  # another version: raises BadData unless it knows it
            raise BadData(f"record format {buf[0]} cannot be read column by column")
        try:
            h = unpack(buf)
        except struct.error as exc:
            raise BadData(f"malformed message record: {exc}") from None
        if h[_H_QID] not in qids or (report_only and not h[_H_FLAGS] & _F_REPORT):
            continue
        headers.append(h)
        kept.append(buf)
    # where each optional string and the props and body start, checked against the length
    starts: list[tuple[int, ...]] = []
    for h, buf in zip(headers, kept):
        at = _FIXED
        offsets = []
        for i in _STRING_LENGTHS:
            offsets.append(at)
            n = h[i]
            if n != _NONE16:
                at += n
        offsets.append(at)  # props
        at += h[_H_N_PROPS]
        offsets.append(at)  # body
        if at + h[_H_N_BODY] != len(buf):
            raise BadData("record length does not match its fields")
        starts.append(tuple(offsets))
    return RecordColumns(headers, kept, starts)


class RecordColumns:
    """Version-1 records read field by field, each field of every record as one plain list,
    without a `Message` per record: the pipeline's scan (store/analytics/columns.py) makes an
    Arrow column of each list, four times faster than decoding. Values are `decode`'s: times in
    µs, absent optional fields None. A field is read only when asked for; a malformed part of a
    record raises BadData then."""

    __slots__ = ("_bufs", "_headers", "_starts")

    def __init__(self, headers: list[tuple[Any, ...]], bufs: list[bytes], starts: list[tuple[int, ...]]):
        self._headers = headers
        self._bufs = bufs
        self._starts = starts  # per record: the five optional strings', the props' and the body's offsets

    def __len__(self) -> int:
        return len(self._headers)

    def values(self, name: str) -> list[Any]:
        """One field of every record, by its JSON name (`Message.to_dict`; `class` and
        `delivery` as text there), or by its `Message` attribute name for those the JSON form
        lacks (`qid`, `seq`, `since`, `origin`, `msg_n`, `lookup_hi`, `report`, `express`).
        Props: `props_entries`, `prop_values`."""
        try:
            return self._values(name)
        except UnicodeDecodeError as exc:
            raise BadData(f"malformed message record: {exc}") from None

    def _values(self, name: str) -> list[Any]:
        headers = self._headers
        i = _HEADER_FIELDS.get(name)
        if i is not None:
            return list(map(itemgetter(i), headers))
        i = _HEADER_FIELDS_NONE.get(name)
        if i is not None:
            return [h[i] or None for h in headers]
        i = _STRING_FIELDS.get(name)
        if i is not None:
            k = _STRING_AT[name]
            empty = "" if name == "label" else None
            return [empty if h[i] == _NONE16 or (h[i] == 0 and empty is not None)
                    else buf[s[k]:s[k] + h[i]].decode("utf-8")
                    for h, buf, s in zip(headers, self._bufs, self._starts)]
        if name == "state":
            values = [_STATE_NAME.get(h[_H_STATE]) for h in headers]
            if None in values:
                raise BadData("malformed message record: unknown state")
            return values
        if name == "msg_id":
            return [msg_id_text(h[_H_ORIGIN], h[_H_MSG_N]) for h in headers]
        if name == "unique_id":
            return [unique_id_text(h[_H_ORIGIN], h[_H_PUT_TIME]) for h in headers]
        if name == "lookup_id":
            return [lookup_id_of(h[_H_LOOKUP_HI], h[_H_SEQ]) for h in headers]
        if name == "class":
            return ["report" if h[_H_FLAGS] & _F_REPORT else "normal" for h in headers]
        if name == "delivery":
            return ["express" if h[_H_FLAGS] & _F_EXPRESS else "recoverable" for h in headers]
        if name == "report":
            return [bool(h[_H_FLAGS] & _F_REPORT) for h in headers]
        if name == "express":
            return [bool(h[_H_FLAGS] & _F_EXPRESS) for h in headers]
        if name == "trace":
            return [bool(h[_H_FLAGS] & _F_TRACE) for h in headers]
        if name == "dead_letter":
            return [not h[_H_FLAGS] & _F_NO_DEAD_LETTER for h in headers]
        if name == "body":
            return [buf[s[6]:] for buf, s in zip(self._bufs, self._starts)]
        raise InvalidArgument(f"a record has no field {name!r}")

    def props_entries(self) -> tuple[list[int], list[str], list[str]]:
        """Every record's properties as one list of keys and one of values, in record order,
        and where each record's start (one offset per record, then the end): a map column."""
        keys: list[str] = []
        values: list[str] = []
        offsets = [0]
        for buf, s in zip(self._bufs, self._starts):
            parsed = _props_of(buf[s[5]:s[6]])
            keys += parsed[0]
            values += parsed[1]
            offsets.append(len(keys))
        return offsets, keys, values

    def prop_values(self, key: str) -> list[str | None]:
        """One property of every record (None where a record lacks it)."""
        return [block_property(buf[s[5]:s[6]], key) for buf, s in zip(self._bufs, self._starts)]


def block_property(block: bytes, key: str) -> str | None:
    """One property of a record's property block (BadData if the block is malformed)."""
    return _props_of(block)[2].get(key)


def _props_of(block: bytes) -> tuple[list[str], list[str], dict[str, str]]:
    """A property block's keys, values and map (shared: not to be changed). Blocks repeat
    (every trace report has one of four), so each distinct block is parsed once."""
    parsed = _PROPS_SEEN.get(block)
    if parsed is None:
        if len(_PROPS_SEEN) >= 4096:
            _PROPS_SEEN.clear()
        try:
            keys, values = _props_lists(block)
        except (UnicodeDecodeError, struct.error) as exc:
            raise BadData(f"malformed message record: {exc}") from None
        parsed = _PROPS_SEEN[block] = (keys, values, dict(zip(keys, values)))
    return parsed


# ---- JSON form -------------------------------------------------------------------------

_GUID_BYTES: dict[str, bytes] = {}


def guid_bytes(text: str) -> bytes:
    """GUID text → 16 bytes (ValueError if it is not a GUID); cached, there are few origins."""
    raw = _GUID_BYTES.get(text)
    if raw is None:
        import uuid

        raw = uuid.UUID(text).bytes
        if len(_GUID_BYTES) < 4096:
            _GUID_BYTES[text] = raw
    return raw


def parse_msg_id(text: Any) -> tuple[bytes, int]:
    """`<origin-qm-guid>\\<n>` → (16 GUID bytes, n)."""
    if not isinstance(text, str) or "\\" not in text:
        raise BadData(f"msg_id must look like <guid>\\<n>, got {text!r}")
    guid, _, n = text.rpartition("\\")
    try:
        origin = guid_bytes(guid)
        number = int(n)
    except ValueError:
        raise BadData(f"msg_id must look like <guid>\\<n>, got {text!r}") from None
    if not 0 <= number < 1 << 32 or not is_decimal(n):
        raise BadData(f"msg_id sequence number must be 0..4294967295, got {n!r}")
    return origin, number


def parse_unique_id(text: Any) -> tuple[bytes, int]:
    """`<origin-qm-guid>:<put_time µs>` → (16 GUID bytes, put_time)."""
    if not isinstance(text, str) or ":" not in text:
        raise BadData(f"unique_id must look like <guid>:<put time µs>, got {text!r}")
    guid, _, t = text.rpartition(":")
    try:
        origin, put_time = guid_bytes(guid), int(t)
    except ValueError:
        raise BadData(f"unique_id must look like <guid>:<put time µs>, got {text!r}") from None
    if not (t.isascii() and t.isdigit()) or put_time >= 1 << 63:  # a signed 64-bit field and key
        raise BadData(f"unique_id put time must be 0..{(1 << 63) - 1} µs, got {t[:40]!r}")
    return origin, put_time


_MISSING = object()
# (JSON key, type, default, may be null); checked in one loop because import runs this per line
_OPTIONAL_FIELDS = (
    ("queue", str, "", False), ("priority", int, DEFAULT_PRIORITY, False),
    ("lookup_id", int, 0, False), ("expires", str, None, True), ("props", dict, None, False),
    ("class", str, "normal", False), ("delivery", str, "recoverable", False),
    ("state", str, AVAILABLE, False), ("correl_id", str, None, True), ("label", str, "", False),
    ("app_specific", int, 0, False), ("trace", bool, False, False), ("dead_letter", bool, True, False),
    ("report_queue", str, None, True), ("hops", int, 0, False), ("backouts", int, 0, False),
    ("dead_letter_reason", str, None, True), ("original_queue", str, None, True),
)


# the exact keys and value types of an available message as to_dict writes it: a record that
# matches them (what export and get -o jsonl print) is read in one step
_CANONICAL_KEYS = ("msg_id", "lookup_id", "unique_id", "correl_id", "priority", "label", "body",
                   "size", "props", "app_specific", "class", "delivery", "queue", "state",
                   "put_time", "expires", "dead_letter", "trace", "report_queue", "hops", "backouts")
# every key to_dict may write: a record with any other is refused (a field this version does
# not know would be dropped, and the message imported would not be the one exported)
RECORD_FIELDS = frozenset((*_CANONICAL_KEYS, "body_b64", "confirm_id", "lock_id", "tx", "lease_expires",
                           "dead_letter_reason", "dead_letter_status", "original_queue"))


def _from_canonical(d: dict[str, Any]) -> Message | None:
    if len(d) != len(_CANONICAL_KEYS) or tuple(d) != _CANONICAL_KEYS:
        return None
    (msg_id, lookup_id, _, correl_id, priority, label, body, _, props, app_specific, msg_class,
     delivery, queue, state, put_time, expires, dead_letter, trace, report_queue, hops, backouts) = d.values()
    # exact types (a bool is not an int here); anything else goes to the full reader, which
    # names what is wrong
    if not (int is type(lookup_id) is type(priority) is type(app_specific) is type(hops) is type(backouts)
            and str is type(msg_id) is type(label) is type(body) is type(msg_class) is type(delivery)
            is type(queue) is type(state) is type(put_time)
            and bool is type(dead_letter) is type(trace) and dict is type(props)
            and (correl_id is None or type(correl_id) is str) and (expires is None or type(expires) is str)
            and (report_queue is None or type(report_queue) is str)
            and state == AVAILABLE and msg_class in ("normal", "report")
            and delivery in ("recoverable", "express")
            and (not props or all(type(k) is str and type(v) is str for k, v in props.items()))):
        return None
    origin, msg_n = parse_msg_id(msg_id)
    return Message(
        body.encode("utf-8"), queue, AVAILABLE, priority, 0, 0, origin, msg_n, (lookup_id >> 56) & 0xFF,
        parse_iso_time(put_time, "put_time"), None if expires is None else parse_iso_time(expires, "expires"),
        correl_id, label, dict(props), app_specific, msg_class == "report", delivery == "express",
        trace, dead_letter, report_queue, hops, backouts,
    )


def _from_dict(d: Any) -> Message:
    if not isinstance(d, dict):
        raise BadData("a message record must be a JSON object")
    m = _from_canonical(d)
    if m is not None:
        validate_fields(m)
        return m
    if not RECORD_FIELDS.issuperset(d):
        unknown = d.keys() - RECORD_FIELDS
        raise BadData(f"field {min(unknown)!r} is not a field of a message record (as `get -o jsonl` "
                      f"and `export` write them)")
    f: dict[str, Any] = {}
    for key, kind, default, nullable in _OPTIONAL_FIELDS:
        value = d.get(key, _MISSING)
        if value is _MISSING:
            value = default
        elif type(value) is not kind and not (value is None and nullable):
            if kind is int and type(value) is float and abs(value) >= 2 ** 63:  # the JSON reader's reading of a large integer
                raise BadData(f"field {key!r} is out of range: {_shown(value)}")
            raise BadData(f"field {key!r} has the wrong type: {_shown(value)}")
        f[key] = value
    if "body_b64" in d:
        if "body" in d:
            raise BadData("a record has either 'body' or 'body_b64', not both")
        try:
            body = base64.b64decode(_required(d, "body_b64"), validate=True)
        except (binascii.Error, ValueError):
            raise BadData("field 'body_b64' is not valid base64") from None
    else:
        body = _required(d, "body").encode("utf-8")
    origin, msg_n = parse_msg_id(_required(d, "msg_id"))
    props = f["props"] or {}
    if not all(type(k) is str and type(v) is str for k, v in props.items()):
        raise BadData("field 'props' must map strings to strings")
    if f["class"] not in ("normal", "report"):
        raise BadData(f"field 'class' must be normal or report, got {f['class']!r}")
    if f["delivery"] not in ("recoverable", "express"):
        raise BadData(f"field 'delivery' must be recoverable or express, got {f['delivery']!r}")
    if f["state"] not in STATES:
        raise BadData(f"field 'state' is not a message state: {f['state']!r}")
    m = Message(
        body=body,
        queue=f["queue"],
        # every record reads back at rest but a put awaiting its confirm (an older mqcli's
        # export wrote them): no message yet, which Store.import_messages does not store
        state=PUT_UNCONFIRMED if f["state"] == PUT_UNCONFIRMED else AVAILABLE,
        priority=f["priority"],
        origin=origin,
        msg_n=msg_n,
        lookup_hi=(f["lookup_id"] >> 56) & 0xFF,
        put_time=parse_iso_time(_required(d, "put_time"), "put_time"),
        expires=None if f["expires"] is None else parse_iso_time(f["expires"], "expires"),
        correl_id=f["correl_id"],
        label=f["label"],
        props=dict(props),
        app_specific=f["app_specific"],
        report=f["class"] == "report",
        express=f["delivery"] == "express",
        trace=f["trace"],
        dead_letter=f["dead_letter"],
        report_queue=f["report_queue"],
        hops=f["hops"],
        backouts=f["backouts"],
        dead_letter_reason=f["dead_letter_reason"],
        original_queue=f["original_queue"],
    )
    validate_fields(m)
    return m


def _shown(value: object) -> str:
    """A field's value in an error line: its repr cut short in length and depth (a value
    nested a thousand deep has no full repr)."""
    import reprlib

    return reprlib.repr(value)


def _required(d: dict[str, Any], key: str) -> str:
    value = d.get(key, _MISSING)
    if value is _MISSING:
        raise BadData(f"field {key!r} is missing")
    if type(value) is not str:
        raise BadData(f"field {key!r} has the wrong type: {_shown(value)}")
    return value


def validate_fields(m: Message) -> None:
    """Raise InvalidArgument unless every field fits the record format and docs/design.md#messages."""
    body, priority = m.body, m.priority
    if (type(body) is bytes and type(priority) is int and 0 <= priority <= MAX_PRIORITY and m.app_specific == 0
            and m.hops == 0 and m.backouts == 0 and not m.label and m.correl_id is None
            and m.report_queue is None and not m.props and len(body) < 1 << 32):
        return  # the common case at a glance (the batched-put hot path); else each check below
    if not isinstance(m.body, (bytes, bytearray)):
        raise InvalidArgument("body must be bytes")
    if not 0 <= m.priority <= MAX_PRIORITY or type(m.priority) is not int:  # a bool is no priority
        raise InvalidArgument(f"priority must be an int 0..7, got {type(m.priority).__name__} {m.priority!r:.40}")
    if not -(1 << 31) <= m.app_specific < 1 << 31:  # the record holds a signed 32-bit int
        raise InvalidArgument(f"app_specific must be -2147483648..2147483647, got {m.app_specific}")
    if not 0 <= m.hops <= 0xFFFF or not 0 <= m.backouts <= 0xFFFF:
        raise InvalidArgument("hops and backouts must be 0..65535")
    if len(m.body) >= 1 << 32:
        raise InvalidArgument("body is larger than 4 GiB")
    if m.label and len(m.label) > MAX_LABEL_CHARS:
        raise InvalidArgument(f"label is longer than {MAX_LABEL_CHARS} characters")
    if m.correl_id is not None and len(m.correl_id.encode("utf-8")) > MAX_CORREL_BYTES:
        raise InvalidArgument(f"correl_id is longer than {MAX_CORREL_BYTES} bytes")
    if m.report_queue is not None and len(m.report_queue.encode("utf-8")) >= _NONE16:
        raise InvalidArgument("report_queue is too long")
    for k in m.props:
        if len(k.encode("utf-8")) > MAX_PROP_BYTES:
            raise InvalidArgument(f"property name {k[:20]!r}… is too long")


# ---- one record, lazily ------------------------------------------------------------------

class RecordView:
    """A version-1 record as a selector reads it (store/selectors.py FIELDS), without decoding
    it: the fixed header is unpacked once, a string field or a property is read from the bytes
    when the expression asks for it, the body only for a selector on `body`. The candidate loop of a `--where` scan
    (store/write.py `candidates`) tests each record through one and decodes only those that
    match (README.md#selectors). A part of a malformed record is read as it lies; the
    full decode of a match still raises BadData (`mqcli check` finds the others)."""

    __slots__ = ("_buf", "_h", "queue")

    def __init__(self, buf: bytes, queue: str = "") -> None:
        if buf[0] != FORMAT_V1:
            decode(buf)  # another version: raises BadData unless it knows it
            raise BadData(f"record format {buf[0]} cannot be read lazily")
        try:
            self._h = _HEADER_AND_LENGTHS.unpack_from(buf)
        except struct.error as exc:
            raise BadData(f"malformed message record: {exc}") from None
        self._buf = buf
        self.queue = queue

    def _string(self, index: int) -> str | None:
        """The optional string whose length is at header position `index` (None if absent)."""
        h = self._h
        n = h[index]
        if n == _NONE16:
            return None
        at = _FIXED
        for i in _STRING_LENGTHS:
            if i == index:
                return self._buf[at:at + n].decode("utf-8")
            if h[i] != _NONE16:
                at += h[i]
        raise AssertionError(index)

    def _props_at(self) -> int:
        h = self._h
        at = _FIXED
        for i in _STRING_LENGTHS:
            n = h[i]
            if n != _NONE16:
                at += n
        return at

    @property
    def priority(self) -> int:
        return self._h[_H_PRIORITY]  # type: ignore[no-any-return]

    @property
    def label(self) -> str:
        return self._string(_H_N_LABEL) or ""

    @property
    def correl_id(self) -> str | None:
        return self._string(_H_N_CORREL)

    @property
    def dead_letter_reason(self) -> str | None:
        return self._string(_H_N_REASON)

    @property
    def original_queue(self) -> str | None:
        return self._string(_H_N_ORIG)

    @property
    def msg_id(self) -> str:
        return msg_id_text(self._h[_H_ORIGIN], self._h[_H_MSG_N])

    @property
    def size(self) -> int:
        return self._h[_H_N_BODY]  # type: ignore[no-any-return]

    @property
    def put_time(self) -> int:
        return self._h[_H_PUT_TIME]  # type: ignore[no-any-return]

    @property
    def expires(self) -> int | None:
        return self._h[_H_EXPIRES] or None

    @property
    def backouts(self) -> int:
        return self._h[_H_BACKOUTS]  # type: ignore[no-any-return]

    @property
    def hops(self) -> int:
        return self._h[_H_HOPS]  # type: ignore[no-any-return]

    @property
    def app_specific(self) -> int:
        return self._h[_H_APP_SPECIFIC]  # type: ignore[no-any-return]

    @property
    def msg_class(self) -> str:
        return "report" if self._h[_H_FLAGS] & _F_REPORT else "normal"

    @property
    def delivery(self) -> str:
        return "express" if self._h[_H_FLAGS] & _F_EXPRESS else "recoverable"

    @property
    def state(self) -> str:
        return _STATE_NAME[self._h[_H_STATE]]

    @property
    def props(self) -> PropsView:
        at = self._props_at()
        return PropsView(self._buf[at:at + self._h[_H_N_PROPS]])

    @property
    def body(self) -> bytes:
        return self._buf[len(self._buf) - self._h[_H_N_BODY]:]

    def message(self) -> Message:
        """The whole message (a full decode)."""
        return decode(self._buf, self.queue)


class PropsView:
    """A property block read one name at a time: `get` walks the entries comparing names as
    bytes and decodes only the value asked for."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    def get(self, name: str, default: str | None = None) -> str | None:
        raw = self._raw
        if not raw:
            return default
        wanted = _name_bytes(name)
        at, end = 0, len(raw)
        try:
            while at < end:
                (nk,) = _PROP_KEY.unpack_from(raw, at)
                at += _PROP_KEY.size
                same = raw[at:at + nk] == wanted
                at += nk
                (nv,) = _PROP_VALUE.unpack_from(raw, at)
                at += _PROP_VALUE.size
                if same:
                    return raw[at:at + nv].decode("utf-8")
                at += nv
        except (struct.error, UnicodeDecodeError) as exc:
            raise BadData(f"malformed message properties: {exc}") from None
        return default


_NAME_BYTES: dict[str, bytes] = {}


def _name_bytes(name: str) -> bytes:
    """A property name's UTF-8 bytes; cached, as a selector asks for the same few names."""
    b = _NAME_BYTES.get(name)
    if b is None:
        b = name.encode("utf-8")
        if len(_NAME_BYTES) < 1024:
            _NAME_BYTES[name] = b
    return b
