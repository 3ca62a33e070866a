"""Trace report labels and bodies: encoded from their fields, decoded strictly by [MS-MQQB]'s
ABNF or by every form Windows' Message Queuing documentation gives.

[MS-MQQB]'s ABNF (the `strict` decoders follow it alone, rule by rule):

    label      = qm-id %x3A message-id %x3A hops SP "received by" SP computer SP "at" SP
                 time-date %x0000
    qm-id      = 4HEXDIG
    message-id = 8HEXDIG
    hops       = 2HEXDIG
    computer   = GUID
    time-date  = hour SP ("AM" / "PM") SP date
    hour       = 2DIGIT ":" 2DIGIT [":" 2DIGIT]
    date       = day "," month SP 2DIGIT SP year
    month      = "Jan" / "Feb" / ... / "Dec"
    day        = "Mon" / "Tue" / ... / "Sun"
    year       = 2DIGIT
    GUID       = 8HEXDIG "-" 4HEXDIG "-" 4HEXDIG "-" 4HEXDIG "-" 12HEXDIG

    Report     = "<MESSAGE ID>" id "</MESSAGE ID>" CR LF "<TARGET QUEUE>" queue "</TARGET QUEUE>" CR LF
    id         = 8HEXDIG
    queue      = queue-format            ; MS-MQMQ section 2.1: store.formatnames.check_syntax

The forms Windows' Message Queuing documentation adds (SDK "Report Messages", "Tracing
Messages", "Specifying Multiple Report Queues"; administration guide "Report Message Format"),
which real report queues hold and the default (not strict) decoders accept too, written here in
the same ABNF (rules named as the errors name them):

    any-label      = (report-label / conflict-label) [%x0000]
    report-label   = qm-id %x3A message-id %x3A hops SP (received / sent) SP "at" SP time-date
    received       = "received by" SP computer
    sent           = "sent from" SP computer SP "to" SP address
    conflict-label = "Report Message Conflict"
    computer       = GUID / machine-name      ; a GUID-shaped name is the GUID
    machine-name   = 1*255(ALPHA / DIGIT / "-" / "_" / ".")
    address        = ipx-address / 1*255(ALPHA / DIGIT / "-" / "_" / ".") [":" port]
    ipx-address    = 8HEXDIG ":" 12HEXDIG     ; network:node
    port           = 1*5DIGIT                 ; 0-65535 (mqcli names a next hop by host:port)

    any-report     = Report [next-hop] [hop-count]
    next-hop       = "<NEXT HOP>" address "</NEXT HOP>" CR LF
    hop-count      = "<HOP COUNT>" 1*3DIGIT "</HOP COUNT>" CR LF    ; 0-255, the hops field's range

A decoded label says its `event` (received, sent, conflict) and `next_hop` (the address of a
`sent from` label, else None); a conflict label has no other field (all None). A decoded body
has `next_hop` and `hop_count` (None when absent). The documentation writes the address as an
IP or IPX address; a host name, and a port after the host, are mqcli's readings (its links are
HOST:PORT, and every listener of a test may share one address).

How [MS-MQQB] is read where it leaves room (each reading is also noted where it is applied):

- ABNF quoted strings are case-insensitive (RFC 5234 §2.3), and HEXDIG is `DIGIT / "A" / ...
  / "F"` made of such strings, so `received BY`, `pm`, `NOV` and lowercase hex all match.
  Only ASCII letters fold: the Kelvin sign is not a `k`.
- The label ends in %x0000; `decode_label` takes it with or without that NUL (a command-line
  argument cannot hold one), and nothing may follow it. `encode_label` writes it.
- `hour` is a 12-hour clock (it is followed by AM/PM): hours 01-12, `12:xx AM` is just after
  midnight and `12:xx PM` just after noon; minutes and seconds 00-59 (no leap second).
- The 2DIGIT between month and year is the day of the month, 01 to the month's length; the year
  is 20YY (our reading, UTC like every time here; Spark's `yy` reads the same century); the day name must be
  that date's weekday. Times are UTC.
- Errors name the innermost rule *of [MS-MQQB]* that failed (`qm-id`, not the core rule
  HEXDIG). `computer` and `queue` are bare aliases, so their failures are named by the rule
  they alias: `GUID` and `queue-format`.
- `queue-format` is MS-MQMQ 2.1's syntax, which store/formatnames.py holds for the whole
  project (`check_syntax`; its comment says where `formatnames.parse`, the names this store
  resolves, is narrower or wider). A body names a destination on any queue manager, so it is
  held to the syntax, not to what this store can resolve.

Error columns are 1-based. For a syntax error the column is that of the first character at
which no valid label (or body) can continue, left to right (one past the end if the text stops
short). A value that is well formed but out of range (hour 13, minute 60, day 31 of a 30-day
month, Feb 29 of a common year, a day name that is not the date's weekday) is reported at the
first column of that value, as soon as the rule that holds it has been read. A body is one text:
its columns count CR and LF like any other character.

The vectors in tests/vectors/ hold these decoders (and the Spark SQL decoder of the pipeline)
to the same answers.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from .abnf import Scanner, abnf_equal
from .errors import BadData, FormatNameSyntaxError, InvalidArgument, TraceFormatError
from .formatnames import check_syntax, is_format_name_char

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # datetime.weekday() order
_MONTH_LENGTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # the longest, in a leap year
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
MAX_NAME = 255  # machine-name, and the host of an address
MAX_PORT = 0xFFFF
MAX_MESSAGE_ID = 0xFFFF_FFFF  # 8HEXDIG
MAX_HOPS = 0xFF               # 2HEXDIG
MIN_YEAR, MAX_YEAR = 2000, 2099


RECEIVED, SENT, CONFLICT = "received", "sent", "conflict"  # a label's event
CONFLICT_LABEL = "Report Message Conflict"


class ReportLabel(NamedTuple):
    """The fields of a report message's label. A conflict label (`event` conflict) has none
    but its event: every other field is None."""

    qm_id: str | None           # the four hex digits, as written
    message_id: int | None      # 0 .. 0xFFFFFFFF
    hops: int | None            # 0 .. 0xFF
    computer: str | None        # a GUID (lowercase) or a machine name (as written)
    time: datetime | None       # UTC, whole seconds
    has_seconds: bool | None = True  # whether the label wrote the seconds (`hour`'s optional part)
    event: str = RECEIVED       # received, sent or conflict
    next_hop: str | None = None  # the address of a `sent from` label, as written

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "qm_id": self.qm_id, "message_id": self.message_id, "hops": self.hops,
                "computer": self.computer,
                "time": None if self.time is None else self.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "has_seconds": self.has_seconds, "next_hop": self.next_hop}

    def encode(self, *, nul: bool = True) -> str:
        if self.event == CONFLICT:
            return CONFLICT_LABEL + ("\0" if nul else "")
        assert self.qm_id is not None and self.message_id is not None and self.hops is not None
        assert self.computer is not None and self.time is not None
        return encode_label(self.qm_id, self.message_id, self.hops, self.computer, self.time,
                            has_seconds=bool(self.has_seconds), nul=nul,
                            next_hop=self.next_hop if self.event == SENT else None)


@dataclass(frozen=True)
class ReportBody:
    """The fields of a report message's body."""

    message_id: int       # `id`, 0 .. 0xFFFFFFFF
    queue: str            # the destination's format name (MS-MQMQ 2.1), as written
    next_hop: str | None = None   # <NEXT HOP>, as written
    hop_count: int | None = None  # <HOP COUNT>, 0 .. 0xFF

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "queue": self.queue, "next_hop": self.next_hop,
                "hop_count": self.hop_count}

    def encode(self) -> str:
        return encode_body(self.message_id, self.queue, next_hop=self.next_hop, hop_count=self.hop_count)


# ---- encoding ---------------------------------------------------------------------------------

def encode_label(qm_id: str, message_id: int, hops: int, computer: str | uuid.UUID, time: datetime,
                 *, has_seconds: bool = True, nul: bool = True, next_hop: str | None = None) -> str:
    """The label of a report message, e.g. `1A2B:0000002A:01 received by 6f1c…9a0b at 03:15:42 PM
    Sun,Nov 22 26` and a NUL (omitted with `nul=False`); with `next_hop` (an address) the
    departure's form, `… sent from <computer> to <next_hop> at …`. Hex is written uppercase
    except the qm_id (as given) and a GUID (lowercase, as MSMQ writes GUIDs); `computer` is a
    GUID or a machine name. Without `has_seconds` the seconds are left out (and dropped).
    Raises InvalidArgument for a field that cannot be written.
    """
    if not (isinstance(qm_id, str) and len(qm_id) == 4 and set(qm_id) <= _HEX):
        raise InvalidArgument(f"qm_id must be four hex digits, got {qm_id!r}")
    _check_int("message_id", message_id, MAX_MESSAGE_ID)
    _check_int("hops", hops, MAX_HOPS)
    name = _computer_text(computer)
    utc = _utc(time)
    hour = f"{utc.hour % 12 or 12:02d}:{utc.minute:02d}" + (f":{utc.second:02d}" if has_seconds else "")
    date = f"{DAYS[utc.weekday()]},{MONTHS[utc.month - 1]} {utc.day:02d} {utc.year % 100:02d}"
    event = "received by " + name if next_hop is None else f"sent from {name} to {_address_text(next_hop)}"
    return (f"{qm_id}:{message_id:08X}:{hops:02X} {event} at "
            f"{hour} {'PM' if utc.hour >= 12 else 'AM'} {date}" + ("\0" if nul else ""))


def encode_conflict_label(*, nul: bool = True) -> str:
    """The label of a conflict report: `Report Message Conflict` and a NUL."""
    return CONFLICT_LABEL + ("\0" if nul else "")


def encode_body(message_id: int, queue: str, *, next_hop: str | None = None,
                hop_count: int | None = None) -> str:
    """The body of a report message: the message id and its destination queue's format name,
    then `<NEXT HOP>` and `<HOP COUNT>` when given (the departure's body, as Windows writes it)."""
    _check_int("message_id", message_id, MAX_MESSAGE_ID)
    if not isinstance(queue, str):
        raise InvalidArgument(f"queue must be a format name, got {queue!r}")
    try:
        check_syntax(queue)
    except FormatNameSyntaxError as exc:
        raise InvalidArgument(f"queue {queue!r} is not a format name (MS-MQMQ 2.1): "
                              f"column {exc.column}: {exc.detail}") from None
    text = f"<MESSAGE ID>{message_id:08X}</MESSAGE ID>\r\n<TARGET QUEUE>{queue}</TARGET QUEUE>\r\n"
    if next_hop is not None:
        text += f"<NEXT HOP>{_address_text(next_hop)}</NEXT HOP>\r\n"
    if hop_count is not None:
        _check_int("hop_count", hop_count, MAX_HOPS)
        text += f"<HOP COUNT>{hop_count}</HOP COUNT>\r\n"
    return text


def _check_int(name: str, value: int, maximum: int) -> None:
    if not (type(value) is int and 0 <= value <= maximum):
        raise InvalidArgument(f"{name} must be an integer 0..{maximum:#x}, got {value!r}")


def _computer_text(computer: str | uuid.UUID) -> str:
    if isinstance(computer, uuid.UUID):
        return str(computer)
    if isinstance(computer, str) and _GUID_RE.fullmatch(computer):
        return computer.lower()
    if isinstance(computer, str) and _NAME_RE.fullmatch(computer):
        return computer
    raise InvalidArgument(f"computer must be a GUID xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx or a machine "
                          f"name (1-255 of A-Z a-z 0-9 - _ .), got {computer!r}")


def _address_text(address: str) -> str:
    if not isinstance(address, str) or _address_value(address) is None:
        raise InvalidArgument(f"next hop must be an IPX address (network:node) or a host with an "
                              f"optional :port, got {address!r}")
    return address


def _utc(time: datetime) -> datetime:
    if not isinstance(time, datetime) or time.tzinfo is None or time.utcoffset() is None:
        raise InvalidArgument(f"time must be a timezone-aware datetime (labels are UTC), got {time!r}")
    utc = time.astimezone(UTC)
    if not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise InvalidArgument(f"time must be in {MIN_YEAR}..{MAX_YEAR} (the label has a two-digit "
                              f"year), got {utc.isoformat()}")
    return utc


# ---- decoding ---------------------------------------------------------------------------------

def decode_label(text: str, *, strict: bool = False) -> ReportLabel:
    """Decode a report label, with or without its trailing NUL: any documented form, or with
    `strict` only [MS-MQQB]'s ABNF (`received by` a GUID).

    Raises TraceFormatError (a BadData) naming the 1-based column and the rule that failed.
    """
    if not isinstance(text, str):
        raise BadData(f"a trace label is text, got {type(text).__name__}")
    return _fast_label(text, strict) or _Parser(text, "label", strict).label()


# The fast path: one regular expression for the label's syntax, then the range checks. It
# accepts exactly what the parser accepts (tests/test_trace_codec.py holds them together on the
# vectors and on Hypothesis input); anything it does not accept goes to the parser, which
# accepts it or finds the column and rule to report. re.ASCII keeps case folding to ASCII.
_HEX_RE = "[0-9A-Fa-f]"
_NAME_RE_TEXT = "[0-9A-Za-z._-]"
_GUID_RE_TEXT = rf"{_HEX_RE}{{8}}-{_HEX_RE}{{4}}-{_HEX_RE}{{4}}-{_HEX_RE}{{4}}-{_HEX_RE}{{12}}"
_ADDRESS_RE_TEXT = rf"{_HEX_RE}{{8}}:{_HEX_RE}{{12}}|{_NAME_RE_TEXT}{{1,{MAX_NAME}}}(?::[0-9]{{1,5}})?"
_TIME_RE_TEXT = (r"([0-9]{2}):([0-9]{2})(?::([0-9]{2}))? (?i:(AM)|PM) "
                 rf"(?i:({'|'.join(DAYS)})),(?i:({'|'.join(MONTHS)})) ([0-9]{{2}}) ([0-9]{{2}})\x00?")
_LABEL_RE = re.compile(
    rf"({_HEX_RE}{{4}}):({_HEX_RE}{{8}}):({_HEX_RE}{{2}}) (?i:received by) ({_GUID_RE_TEXT}) (?i:at) "
    + _TIME_RE_TEXT, re.ASCII)
_ANY_LABEL_RE = re.compile(
    rf"({_HEX_RE}{{4}}):({_HEX_RE}{{8}}):({_HEX_RE}{{2}}) (?:(?i:received by) ({_NAME_RE_TEXT}{{1,{MAX_NAME}}})"
    rf"|(?i:sent from) ({_NAME_RE_TEXT}{{1,{MAX_NAME}}}) (?i:to) ({_ADDRESS_RE_TEXT})) (?i:at) "
    + _TIME_RE_TEXT, re.ASCII)
_CONFLICT_RE = re.compile(r"(?i:Report Message Conflict)\x00?", re.ASCII)
_GUID_RE = re.compile(_GUID_RE_TEXT, re.ASCII)
_NAME_RE = re.compile(f"{_NAME_RE_TEXT}{{1,{MAX_NAME}}}", re.ASCII)
_IPX_RE = re.compile(rf"{_HEX_RE}{{8}}:{_HEX_RE}{{12}}", re.ASCII)
_ADDRESS_RE = re.compile(rf"({_NAME_RE_TEXT}{{1,{MAX_NAME}}})(?::([0-9]{{1,5}}))?", re.ASCII)
_DAY_NUMBER = {d.lower(): i for i, d in enumerate(DAYS)}
_MONTH_NUMBER = {m.lower(): i + 1 for i, m in enumerate(MONTHS)}


_TIMES: dict[str, tuple[datetime, bool] | None] = {}  # time-date text → its value; reports come in bursts


def _address_value(text: str) -> str | None:
    """`text` when it is an `address` (an IPX address, or a host and an optional port up to
    65535), else None."""
    if _IPX_RE.fullmatch(text):
        return text
    m = _ADDRESS_RE.fullmatch(text)
    return text if m is not None and (m.group(2) is None or int(m.group(2)) <= MAX_PORT) else None


def _computer_value(text: str) -> str:
    """A GUID-shaped computer is the GUID, lowercase; any other is a machine name, as written."""
    return text.lower() if len(text) == 36 and _GUID_RE.fullmatch(text) else text


# A label's first 17 columns (`qm_id:message_id:hops `) are fixed-width, so the regular
# expressions above match a label exactly when its head matches _HEAD_RE and its rest (the
# event, the computer and the time-date) matches the rest of them. Reports come in bursts that
# share the rest (every hop of every message traced through one computer in one second): the
# rest's decoded fields, or None when it does not match, are kept by text, one dict per mode.
_HEAD_RE = re.compile(rf"{_HEX_RE}{{4}}:{_HEX_RE}{{8}}:{_HEX_RE}{{2}} ", re.ASCII)
_HEAD = 17
_RESTS: tuple[dict[str, tuple[Any, ...] | None], dict[str, tuple[Any, ...] | None]] = ({}, {})
_new_tuple = tuple.__new__


def _fast_label(text: str, strict: bool = False) -> ReportLabel | None:
    if _HEAD_RE.match(text) is None:
        return _matched_label(text, strict)
    rests = _RESTS[strict]
    rest = text[_HEAD:]
    tail: tuple[Any, ...] | None | Literal[False] = rests.get(rest, False)
    if tail is False:
        label = _matched_label(text, strict)
        tail = None if label is None else tuple(label[3:])
        if len(rests) >= 65536:
            rests.clear()
        rests[rest] = tail
    if tail is None:
        return None
    # the tuple made directly (as ReportLabel._make does, without its length check: `tail`
    # is the last five fields of a label made above): NamedTuple's own __new__, a Python
    # function, was 2,000 of this common case's 17,300 instructions
    return _new_tuple(ReportLabel, (text[:4], int(text[5:13], 16), int(text[14:16], 16)) + tail)


def _matched_label(text: str, strict: bool) -> ReportLabel | None:
    """_fast_label by the whole regular expression."""
    m = (_LABEL_RE if strict else _ANY_LABEL_RE).fullmatch(text)
    if m is None:
        if not strict and _CONFLICT_RE.fullmatch(text):
            return ReportLabel(None, None, None, None, None, None, CONFLICT)
        return None
    first = 5 if strict else 7  # the time-date's groups
    when = text[m.start(first):m.end(first + 7)]
    value: tuple[datetime, bool] | None | Literal[False] = _TIMES.get(when, False)
    if value is False:
        if len(_TIMES) >= 65536:
            _TIMES.clear()
        value = _TIMES[when] = _time_date(*m.group(*range(first, first + 8)))
    if value is None:
        return None
    qm_id, message_id, hops = m.group(1, 2, 3)
    if strict:
        return ReportLabel(qm_id, int(message_id, 16), int(hops, 16), m.group(4).lower(), *value)
    if m.group(4) is not None:
        return ReportLabel(qm_id, int(message_id, 16), int(hops, 16), _computer_value(m.group(4)), *value)
    if _address_value(m.group(6)) is None:  # a port above 65535
        return None
    return ReportLabel(qm_id, int(message_id, 16), int(hops, 16), _computer_value(m.group(5)), *value,
                       SENT, m.group(6))


def _time_date(hh: str, mm: str, ss: str | None, am: str | None, day: str, month: str, dd: str,
               yy: str) -> tuple[datetime, bool] | None:
    hour, minute, second = int(hh), int(mm), int(ss or 0)
    year, month_n, day_n = 2000 + int(yy), _MONTH_NUMBER[month.lower()], int(dd)
    if not (1 <= hour <= 12 and minute <= 59 and second <= 59):
        return None
    try:
        date = datetime(year, month_n, day_n, hour % 12 + (0 if am else 12), minute, second, tzinfo=UTC)
    except ValueError:  # no such day in that month
        return None
    return (date, ss is not None) if date.weekday() == _DAY_NUMBER[day.lower()] else None


def decode_body(text: str, *, strict: bool = False) -> ReportBody:
    """Decode a report body: `Report` of [MS-MQQB], ending with its CR LF, then (unless
    `strict`) `<NEXT HOP>` and `<HOP COUNT>` when there.

    Raises TraceFormatError (a BadData) naming the 1-based column and the rule that failed.
    """
    if not isinstance(text, str):
        raise BadData(f"a trace body is text, got {type(text).__name__}")
    return _Parser(text, "body", strict).report()


def _starts(text: str, pos: int, literal: str) -> bool:
    return len(text) - pos >= len(literal) and all(abnf_equal(text[pos + i], c) for i, c in enumerate(literal))


class _Parser(Scanner):
    """[MS-MQQB]'s `label` and `Report` (`strict`), or the documented forms' `any-label` and
    `any-report`, one method per rule; errors name the rule ([MS-MQQB]'s where it has one)."""

    def __init__(self, text: str, kind: str, strict: bool = True) -> None:
        super().__init__(text)
        self.kind = kind
        self.strict = strict

    def error(self, column: int, detail: str, rule: str | None) -> TraceFormatError:
        assert rule is not None, "every trace error names [MS-MQQB]'s rule that failed"
        return TraceFormatError(self.kind, column, rule, detail)

    def hexdig(self, count: int, rule: str) -> str:
        return self.run(_HEX.__contains__, count, count, "HEXDIG", rule=rule, counted=True)

    def digits(self, count: int, rule: str) -> str:
        return self.run(_DIGITS.__contains__, count, count, "DIGIT", rule=rule, counted=True)

    # ---- label -------------------------------------------------------------------------

    def label(self) -> ReportLabel:
        if not self.strict and abnf_equal(self.peek(), "R"):  # no qm-id starts with R
            self.literal(CONFLICT_LABEL, repr(CONFLICT_LABEL), rule="conflict-label")
            self.label_end("after 'Report Message Conflict'")
            return ReportLabel(None, None, None, None, None, None, CONFLICT)
        qm_id = self.hexdig(4, "qm-id")
        self.literal(":", "':' (%x3A)", rule="label")
        message_id = int(self.hexdig(8, "message-id"), 16)
        self.literal(":", "':' (%x3A)", rule="label")
        hops = int(self.hexdig(2, "hops"), 16)
        next_hop = None
        if self.strict:
            self.literal(" received by ", "SP \"received by\" SP", rule="label")
            computer = self.guid("GUID").lower()  # computer = GUID: reported as GUID
        else:
            self.literal(" ", "SP", rule="label")
            sent = self.choice(("received by", "sent from"), "the event", rule="label") == 1
            self.literal(" ", "SP", rule="label")
            computer = self.computer()
            if sent:
                self.literal(" to ", "SP \"to\" SP", rule="label")
                next_hop = self.address()
        self.literal(" at ", "SP \"at\" SP", rule="label")
        time, has_seconds = self.time_date()
        self.label_end("after the year")
        return ReportLabel(qm_id, message_id, hops, computer, time, has_seconds,
                           RECEIVED if next_hop is None else SENT, next_hop)

    def label_end(self, where: str) -> None:
        # %x0000 ends the label; decode takes the label without it too (a command-line
        # argument cannot hold a NUL), but nothing may follow it
        if self.peek() == "\0":
            self.pos += 1
            self.end("expected end of label after %x0000", rule="label")
        else:
            self.end(f"expected %x0000 (NUL) or end of label {where}", rule="label")

    def computer(self) -> str:
        """computer = GUID / machine-name: a GUID-shaped name is the GUID (lowercase)."""
        name = self.run(_NAME_CHARS.__contains__, 1, MAX_NAME, "a GUID or machine name (A-Z a-z 0-9 - _ .)",
                        rule="computer")
        if self.peek() in _NAME_CHARS and self.peek():
            self.fail(f"a machine name has at most {MAX_NAME} characters", rule="machine-name")
        return _computer_value(name)

    def address(self) -> str:
        """address = ipx-address / host [":" port]: as written."""
        start = self.pos
        m = _IPX_RE.match(self.text, self.pos, self.limit)
        if m is not None:
            self.pos = m.end()
            return m.group()
        self.run(_NAME_CHARS.__contains__, 1, MAX_NAME, "an address (IPX network:node, or a host)", rule="address")
        if self.peek() in _NAME_CHARS and self.peek():
            self.fail(f"a host has at most {MAX_NAME} characters", rule="address")
        if self.peek() == ":":
            self.pos += 1
            port_at = self.pos
            port = int(self.run(_DIGITS.__contains__, 1, 5, "DIGIT (the port)", rule="port"))
            if port > MAX_PORT:
                self.fail(f"port {port} is out of range (0-{MAX_PORT})", port_at, rule="port")
        return self.text[start:self.pos]

    def guid(self, rule: str) -> str:
        start = self.pos
        for i, count in enumerate((8, 4, 4, 4, 12)):
            if i:
                self.literal("-", "'-'", rule=rule)
            self.hexdig(count, rule)
        return self.text[start:self.pos]

    def time_date(self) -> tuple[datetime, bool]:
        hour, minute, second = self.hour()
        self.literal(" ", "SP", rule="time-date")
        pm = self.choice(("AM", "PM"), "AM or PM", rule="time-date") == 1
        self.literal(" ", "SP", rule="time-date")
        year, month, day = self.date()
        # [MS-MQQB]: hour is a 12-hour clock (followed by AM/PM): 12 AM is 00h, 12 PM is 12h
        hour24 = hour % 12 + (12 if pm else 0)
        return datetime(year, month, day, hour24, minute, second or 0, tzinfo=UTC), second is not None

    def hour(self) -> tuple[int, int, int | None]:
        start = self.pos
        hour = int(self.digits(2, "hour"))
        if not 1 <= hour <= 12:
            self.fail(f"{self.text[start:start + 2]} is not an hour of the 12-hour clock "
                      "(01-12, followed by AM or PM)", start, rule="hour")
        self.literal(":", "':'", rule="hour")
        minute = self.two_digit_sixty("minute")
        second = None
        if self.peek() == ":":  # [":" 2DIGIT]
            self.pos += 1
            second = self.two_digit_sixty("second")
        elif self.peek() != " ":
            self.fail(f"expected ':' (seconds) or SP after the minutes, found {self.found()}",
                      rule="time-date")
        return hour, minute, second

    def two_digit_sixty(self, what: str) -> int:
        start = self.pos
        value = int(self.digits(2, "hour"))
        if value > 59:
            self.fail(f"{self.text[start:start + 2]} is not a {what} (00-59)", start, rule="hour")
        return value

    def date(self) -> tuple[int, int, int]:
        day_at = self.pos
        weekday = self.choice(DAYS, "a day", rule="day")
        self.literal(",", "','", rule="date")
        month = self.choice(MONTHS, "a month", rule="month") + 1
        self.literal(" ", "SP", rule="date")
        dd_at = self.pos
        day = int(self.digits(2, "date"))
        if not 1 <= day <= _MONTH_LENGTH[month - 1]:
            self.fail(f"{MONTHS[month - 1]} has no day {self.text[dd_at:dd_at + 2]}", dd_at,
                      rule="date")
        self.literal(" ", "SP", rule="date")
        # year = 2DIGIT: our reading is 20YY
        year = 2000 + int(self.digits(2, "year"))
        try:
            weekday_of = datetime(year, month, day).weekday()
        except ValueError:  # Feb 29 of a common year
            self.fail(f"{MONTHS[month - 1]} {day:02d} is not a date in {year}", dd_at, rule="date")
        if weekday_of != weekday:
            self.fail(f"{MONTHS[month - 1]} {day:02d} {year} is a {DAYS[weekday_of]}, "
                      f"not a {DAYS[weekday]}", day_at, rule="day")
        return year, month, day

    # ---- body --------------------------------------------------------------------------

    def report(self) -> ReportBody:
        self.literal("<MESSAGE ID>", rule="Report")
        message_id = int(self.hexdig(8, "id"), 16)
        self.literal("</MESSAGE ID>", rule="Report")
        self.literal("\r\n", "CR LF", rule="Report")
        self.literal("<TARGET QUEUE>", rule="Report")
        # A format name holds no SP, so the queue ends at the first "</TARGET QUEUE>", or
        # else where a character that no format name holds stops it.
        stop = self.pos
        while (stop < len(self.text) and is_format_name_char(self.text[stop])
               and not _starts(self.text, stop, "</TARGET QUEUE>")):
            stop += 1
        try:
            queue = check_syntax(self.text, self.pos, stop)
        except FormatNameSyntaxError as exc:  # queue = queue-format: reported as queue-format
            raise TraceFormatError(self.kind, exc.column, "queue-format", exc.detail) from None
        self.pos = stop
        self.literal("</TARGET QUEUE>", rule="Report")
        self.literal("\r\n", "CR LF", rule="Report")
        if self.strict:
            self.end("expected end of body after CR LF", rule="Report")
            return ReportBody(message_id, queue)
        next_hop = hop_count = None
        options: tuple[str, ...] = ("<NEXT HOP>", "<HOP COUNT>")
        while self.pos < self.limit and options:
            # each element at most once, in this order: what comes next is one that is left
            picked = options[self.choice(options, "an element or the end of the body", rule="Report")]
            if picked == "<NEXT HOP>":
                next_hop = self.address()
                self.literal("</NEXT HOP>", rule="next-hop")
                self.literal("\r\n", "CR LF", rule="next-hop")
                options = ("<HOP COUNT>",)
            else:
                at = self.pos
                hop_count = int(self.run(_DIGITS.__contains__, 1, 3, "DIGIT", rule="hop-count"))
                if hop_count > MAX_HOPS:
                    self.fail(f"hop count {hop_count} is out of range (0-{MAX_HOPS})", at, rule="hop-count")
                self.literal("</HOP COUNT>", rule="hop-count")
                self.literal("\r\n", "CR LF", rule="hop-count")
                options = ()
        self.end("expected end of body after CR LF", rule="Report")
        return ReportBody(message_id, queue, next_hop, hop_count)
