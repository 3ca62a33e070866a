"""Every stream the command line reads, each read with a bound.

Every command reads its inputs here: a message body (an argument, `--file`, or `-` for stdin),
the records of `put --jsonl` and `import`, the lines of `put --lines`, a trace label or body,
the command lines of `batch`.

An input may be endless (`/dev/zero`, a pipe from `yes`) or huge (a 100 MB line, a 3 GB file
given by mistake). Reading it whole, or a line of it whole, grows memory with it until the
process dies, so nothing here calls `read()` or `readline()` without a limit: each reader
takes at most one byte past what a valid input can hold and refuses the rest with its
documented exit code, before memory grows with it. A body is refused as the store refuses it
(exit 8, MessageTooLarge); a JSONL record or a trace label that long cannot be valid data
(exit 12, BadData).

Key files are read by the library (store/links.py `load_key`), which bounds them itself.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Generic, Optional, TypeVar

from store import errors
from store.records import DEFAULT_PRIORITY, MAX_PUT_TIME_LEAD_US, PUT_UNCONFIRMED, Message, check_put_time

if TYPE_CHECKING:  # the engine loads when a record is read, not with `put --help`
    from store import NewMessage

from . import jsonl  # orjson itself loads on first use
from .exits import UsageError

# The longest JSON a record of a store can take, beyond its body: every other field, with a
# label of 250 characters and a correl_id of 255 bytes written as \uXXXX escapes, a report
# queue and property map of ordinary size.
_RECORD_FIELDS_BYTES = 1 << 20
# A body of N bytes is at most 6 N bytes of JSON: a control character is written \u00XX.
_JSON_BYTES_PER_BODY_BYTE = 6
# A trace label holds at most 250 characters (MSMQ's MQ_MAX_MSG_LABEL_LEN) and a report body
# a few short elements; this is far more than either, and little enough to read at once.
TRACE_INPUT_BYTES = 64 << 10
# A batch command line longer than this is refused (exit 12), not read whole.
COMMAND_LINE_CHARS = 1 << 20
# The records of a file's first 64 MiB are kept as they were checked (WholeFile): parsed
# once, in about 80 MB of memory; beyond that they are read again.
KEEP_READ_BYTES = 64 << 20

T = TypeVar("T")


# what reads stdin already, if something does (`mqcli batch -`): no command of it may
_stdin_reader: str | None = None


@contextmanager
def stdin_read_by(reader: str | None) -> Iterator[None]:
    """Inside the block stdin belongs to `reader` (None: to nobody): a `-` of a command is
    refused, instead of reading what `reader` was to read (a batch's next lines as a body)."""
    global _stdin_reader
    saved, _stdin_reader = _stdin_reader, reader
    try:
        yield
    finally:
        _stdin_reader = saved


def _stdin() -> BinaryIO:
    if _stdin_reader is not None:
        raise UsageError(f"stdin is read by {_stdin_reader}: give this input in a file, not -")
    return sys.stdin.buffer


def open_input(name: str) -> BinaryIO:
    """The stream a FILE|- argument names: stdin for `-`."""
    if name == "-":
        return _stdin()
    try:
        return open(name, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror}") from None


def close_input(stream: BinaryIO) -> None:
    if stream is not sys.stdin.buffer:
        stream.close()


@contextmanager
def opened(name: str) -> Iterator[BinaryIO]:
    """The stream a FILE|- argument names, closed at the end of the block (stdin is left open)."""
    stream = open_input(name)
    try:
        yield stream
    finally:
        close_input(stream)


# ---- message bodies: at most the store's max-message-size (exit 8) ----------------------

def message_body(body: Optional[str], file: Optional[Path], limit: Callable[[], int]) -> bytes:
    """The body of `put`: the BODY argument's own bytes, the --file, or stdin for `-`; a file
    or stdin is read no further than the store's max-message-size `limit()` (asked only then)."""
    if body is not None and file is not None:
        raise UsageError("give the body as an argument or with --file, not both")
    if file is not None:
        try:
            with open(file, "rb") as stream:
                return read_body(stream, limit())
        except OSError as exc:
            raise UsageError(f"cannot read --file {file}: {exc.strerror}") from None
    if body is None:
        raise UsageError("give a BODY, --file FILE, or - to read the body from stdin (or use --jsonl/--lines)")
    if body == "-":
        return read_body(_stdin(), limit())
    return os.fsencode(body)  # the argument's own bytes, even if they are not UTF-8


def read_body(stream: BinaryIO, limit: int) -> bytes:
    """The body in `stream`, read no further than one byte past the store's max-message-size
    `limit`: a larger one is refused as the store would refuse it (exit 8), without reading it
    all."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        size = os.fstat(stream.fileno()).st_size if _is_file(stream) else _size_if_it_ends(stream, len(data))
        raise too_large(limit, size)
    return data


def _size_if_it_ends(stream: BinaryIO, read: int, further: int = 64 << 20) -> Optional[int]:
    """The size of a body from a pipe that is over the limit, if it ends within `further`
    more bytes (read and dropped a MiB at a time); None for one that goes on (/dev/zero)."""
    while further > 0:
        chunk = stream.read(min(1 << 20, further))
        if not chunk:
            return read
        read += len(chunk)
        further -= len(chunk)
    return None


def _is_file(stream: BinaryIO) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def remaining_size(stream: BinaryIO) -> Optional[int]:
    """How many bytes are left to read in a regular file (stdin too, when redirected from
    one); None for a pipe, a terminal or a device, whose end is not known."""
    if not _is_file(stream):
        return None
    try:
        return max(os.fstat(stream.fileno()).st_size - stream.tell(), 0)
    except (OSError, ValueError):
        return None


@contextmanager
def reading_progress(description: str, stream: BinaryIO,
                     position: Optional[Callable[[], int]] = None) -> Iterator[Callable[[int], None]]:
    """A progress bar of reading `stream` (mqcli/render.py `progress`): bytes read of a regular
    file's size (or up to `position()`: where the records handled end, WholeFile.position),
    with the rate and the time left; for a pipe, the records read. Yields `step(records)`,
    called after each batch of records is handled."""
    from .render import progress

    size = remaining_size(stream)
    if size is None:
        with progress(description) as bar:
            yield bar.advance
        return
    start = stream.tell()
    at = position or stream.tell
    with progress(description, total=size, unit="bytes") as bar:
        # the position, not a sum of line lengths: what the readers took from the file
        yield lambda records: bar.reached(at() - start)


def too_large(limit: int, size: Optional[int] = None, where: str = "") -> errors.MessageTooLarge:
    """The store's refusal (store.write), for a body not read to its end: its size is the
    file's, or only known to be over the limit."""
    shown = f"is {size} bytes, more" if size is not None and size > limit else "is larger"
    return errors.MessageTooLarge(
        f"{where}the message body {shown} than the store's max-message-size of "
        f"{limit} bytes (`mqcli qmgr set --max-message-size`)")


def body_lines(stream: BinaryIO, limit: int) -> Iterator[bytes]:
    """The bodies of `put --lines`: each line without its end (LF or CRLF). A line longer
    than the store's max-message-size `limit` is refused after reading that much of it."""
    cap = limit + 2  # a body of `limit` bytes and its CRLF
    for number, line in enumerate(iter(lambda: stream.readline(cap), b""), 1):
        if len(line) == cap and not line.endswith(b"\n"):
            raise too_large(limit, where=f"line {number}: ")
        yield line.rstrip(b"\n").removesuffix(b"\r")


# ---- JSONL records: a line at most what a record of the store can take (exit 12) ---------

def record_line_limit(max_message_size: int) -> int:
    """The longest line a record of a store with this max-message-size can take."""
    return _JSON_BYTES_PER_BODY_BYTE * max_message_size + _RECORD_FIELDS_BYTES


def jsonl_lines(stream: BinaryIO, limit: int, first: int = 1, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) for each line, each read no further than `limit` + 1 bytes: a
    longer line is BadData naming it, refused before it is read to its end. `first` is the
    number of the line the stream is at; with `end`, nothing is read from that offset on."""
    def read_line() -> bytes:
        return stream.readline(limit + 1 if end is None else min(limit + 1, max(end - stream.tell(), 0)))

    for number, line in enumerate(iter(read_line, b""), first):
        if len(line) > limit and not line.endswith(b"\n"):
            raise errors.BadData(f"line {number}: longer than {limit} bytes, more than any record this "
                                 "store can hold (its max-message-size bounds a record's line); "
                                 "is this a JSONL dump?")
        yield number, line


def loads_record(number: int, line: bytes) -> Any:
    """The JSON value of JSONL line `number`; BadData naming the line if it is not JSON or an
    object in it (the record, or one of its fields' objects: props, a queue definition) names
    a field twice. RFC 8259 leaves which one counts to the parser; a record is refused instead
    of one of its values being dropped unseen.

    Without a second parse: every name in a JSON text is followed by a colon, and a colon is
    otherwise only ever inside a string, written as itself or as a `\\u` escape; the value's
    value written back (orjson) has one colon for every name kept and the same colons inside its
    strings. So with no `\\u` in the line, as many colons in the line as in what is written
    back means no name was dropped (and as many as names, without writing it back: a record of
    your own with no colon in its texts);
    any other line goes through the standard library's parser, which lists every pair."""
    try:
        record = jsonl.loads(line)
    except ValueError as exc:
        raise errors.BadData(f"line {number}: not JSON: {exc}") from None
    if type(record) is dict:
        colons = line.count(b":")
        props = record.get("props")
        if colons == len(record) + (len(props) if type(props) is dict else 0):
            return record  # a colon for each name (of the record and its props), and no other
        try:
            same = b"\\u" not in line and colons == jsonl.dumps(record).count(b":")
        except TypeError:  # nested deeper than orjson writes (it reads deeper)
            same = False
        if not same:
            _refuse_duplicates(number, line)
    return record


def _refuse_duplicates(number: int, line: bytes) -> None:
    import json

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for name, _ in items:
            if name in seen:
                raise errors.BadData(f"line {number}: field {name!r} is given twice")
            seen.add(name)
        return dict(items)

    try:
        json.loads(line, object_pairs_hook=pairs)
    except RecursionError:  # nested deeper than Python's parser goes (orjson took up to 1,024)
        raise errors.BadData(f"line {number}: nested too deeply for a record") from None


def put_time_check() -> Callable[[int], None]:
    """A check of the put times records carry, as they are read: BadData for one more than
    records.MAX_PUT_TIME_LEAD_US ahead of the clock (records.check_put_time). The clock is read
    again only for a put time past the bound it gave last: a pipe into `put --jsonl -` may run
    for days."""
    import time

    latest = -1

    def check(put_time: int) -> None:
        nonlocal latest
        if put_time > latest:
            now = int(time.time() * 1_000_000)
            latest = now + MAX_PUT_TIME_LEAD_US
            check_put_time(put_time, now)
    return check


def read_records(stream: BinaryIO, limit: int,
                 other: Optional[Callable[[int, object], Any]] = None, first: int = 1,
                 end: int | None = None,
                 put_times: Optional[Callable[[int], None]] = None) -> Iterator[tuple[int, Any]]:
    """(line number, record) for each non-empty JSONL line; a bad or overlong line is BadData
    naming it. `other(line number, parsed JSON)` may claim a line that is not a message (an
    export's queue definitions): what it returns, if not None, is yielded instead. `first`
    and `end`: as jsonl_lines takes them. `put_times` (put_time_check()) checks each message's
    put time: one too far ahead of the clock is a bad line too (not given when the put times
    are replaced: --new-ids)."""

    for number, line in jsonl_lines(stream, limit, first, end):
        if line.isspace() or not line:
            continue
        record = loads_record(number, line)
        if other is not None and (claimed := other(number, record)) is not None:
            yield number, claimed
            continue
        try:
            m = Message.from_dict(record)
            if put_times is not None:
                put_times(m.put_time)
        except (errors.BadData, errors.InvalidArgument) as exc:
            raise errors.BadData(f"line {number}: {exc.message}") from None
        yield number, m


# ---- put --jsonl: your own records; a bad one is exit 12 and stores nothing of its batch ---

# A record without msg_id is a new message: any subset of these (README.md#your-own-jsonl).
NEW_RECORD_FIELDS = frozenset(("body", "body_b64", "priority", "label", "correl_id", "props", "ttl",
                               "expires", "app_specific", "express"))
# a new record's fields and the JSON types they take (a bool is no int here)
_NEW_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "body": ((str,), "a string"), "body_b64": ((str,), "a base64 string"),
    "priority": ((int,), "an integer 0..7"), "label": ((str,), "a string"),
    "correl_id": ((str, type(None)), "a string or null"), "props": ((dict,), "an object of strings"),
    "ttl": ((str, int, float), "a duration like \"30s\" or a number of seconds"),
    "expires": ((str, type(None)), "an ISO-8601 time or null"),
    "app_specific": ((int,), "an integer"), "express": ((bool,), "true or false"),
}


def put_record(record: Any, now_us: int,
               put_times: Optional[Callable[[int], None]] = None) -> Message | NewMessage:
    """One parsed line of `put --jsonl`: a new message (no msg_id), or a replayed record that
    keeps its msg_id. An unknown field or a wrong type is BadData naming the field; `now_us` is
    the time an `expires` is counted from (a new message has a time to be received);
    `put_times` (put_time_check()) checks a replayed record's put time (not given when
    --new-ids replaces it)."""
    if not isinstance(record, dict):
        raise errors.BadData("a record must be a JSON object")
    if "msg_id" in record:  # a replay of the JSON form (its fields: records.RECORD_FIELDS)
        m = Message.from_dict(record)
        if m.state == PUT_UNCONFIRMED:
            raise errors.BadData("a record in state put-unconfirmed (a put awaiting its confirm, as an older "
                                 "mqcli exported them) is not a message; `mqcli import` leaves them out")
        if put_times is not None:
            put_times(m.put_time)
        return m
    unknown = record.keys() - NEW_RECORD_FIELDS
    if unknown:
        raise errors.BadData(f"field {min(unknown)!r} is unknown: a new message takes "
                             + ", ".join(sorted(NEW_RECORD_FIELDS)) + " (and msg_id to replay a record)")
    for key, value in record.items():
        kinds, what = _NEW_TYPES[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise errors.BadData(f"field {key!r} must be {what}, got {_json_shown(value)}")
    if "body" in record and "body_b64" in record:
        raise errors.BadData("a record has either 'body' or 'body_b64', not both")
    if "ttl" in record and record.get("expires") is not None:
        raise errors.BadData("a record has either 'ttl' or 'expires', not both")
    body = record.get("body", "").encode("utf-8") if "body_b64" not in record else _b64(record["body_b64"])
    props = record.get("props") or None
    if props is not None and not all(type(v) is str for v in props.values()):
        raise errors.BadData("field 'props' must map names to strings")
    ttl = _ttl(record["ttl"]) if "ttl" in record else None
    expires = None
    if record.get("expires") is not None:
        from store.records import parse_iso_time

        expires = parse_iso_time(record["expires"], "field 'expires'")
        if expires <= now_us:  # the store would refuse it (exit 9) after the lines before it were put
            raise errors.BadData(f"field 'expires' has passed: {record['expires']}")
    from store import NewMessage

    new = NewMessage(body, priority=record.get("priority", DEFAULT_PRIORITY), correl_id=record.get("correl_id"),
                     label=record.get("label", ""), props=props, app_specific=record.get("app_specific", 0),
                     ttl=ttl, express=record.get("express", False), expires=expires)
    _check_fits(new)
    return new


def _json_shown(value: Any) -> str:
    """The start of a field's value as JSON, for an error line; a value nested deeper than
    orjson writes (it reads deeper) is named by its type."""
    try:
        return jsonl.dumps(value).decode("utf-8")[:40]
    except TypeError:
        return f"a deeply nested {'array' if isinstance(value, list) else 'object'}"


def _b64(text: str) -> bytes:
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise errors.BadData("field 'body_b64' is not valid base64") from None


def _ttl(value: str | int | float) -> float:
    from .durations import MAX_SECONDS, parse_duration

    if isinstance(value, str):
        try:
            seconds = parse_duration(value, allow_forever=False, what="duration")
        except UsageError as exc:
            raise errors.BadData(f"field 'ttl': {exc}") from None
        assert seconds is not None
    else:
        seconds = float(value)
    if not 0 < seconds <= MAX_SECONDS:
        raise errors.BadData(f"field 'ttl' must be a positive duration up to 100 years, got {value!r}")
    return seconds


def _check_fits(new: NewMessage) -> None:
    """The checks a put makes of each message's fields (priority 0..7, label and correl_id
    lengths, a 32-bit app_specific), made as the line is read, so a bad line stores nothing."""
    from store.records import validate_fields

    wrong = new.wrong_type()
    if wrong is not None:
        raise errors.BadData(wrong)
    try:
        validate_fields(Message(new.body, priority=new.priority, correl_id=new.correl_id, label=new.label,
                                props=new.props or {}, app_specific=new.app_specific))
    except errors.InvalidArgument as exc:
        raise errors.BadData(exc.message) from None


def put_records(stream: BinaryIO, limit: int, max_message_size: int,
                new_ids: bool = False) -> Iterable[tuple[int, Message | NewMessage]]:
    """(line number, message) for each record of `put --jsonl`. A regular file is read and
    checked whole before the first record is handed out (WholeFile): a bad line (BadData
    naming it and its field, exit 12) or an oversized body (exit 8) stores nothing of the file,
    as `import FILE` does. A pipe is read as it comes (`get --follow -o jsonl | put --jsonl -`
    never ends): the caller's batches of 1,000 are each all or nothing, and a bad line stores
    nothing of its batch, as `import -` does."""
    import time

    now = int(time.time() * 1_000_000)  # an `expires` must be later than the start
    put_times = None if new_ids else put_time_check()

    def records(first: int = 1, end: int | None = None) -> Iterator[tuple[int, Message | NewMessage]]:
        for number, line in jsonl_lines(stream, limit, first, end):
            if line and not line.isspace():
                m = _record_of(number, line, now, put_times)
                if len(m.body) > max_message_size:
                    raise too_large(max_message_size, len(m.body), where=f"line {number}: ")
                yield number, m

    if _is_file(stream) and stream.seekable():
        return WholeFile(stream, records)
    return records()


class WholeFile(Generic[T]):
    """The records of a regular file, every one read by `records(first line number, end)`
    (which raises at a bad one) before the first is handed out, so a bad line hands out none.

    The records of the file's first KEEP_READ_BYTES are kept as they were read, the rest are
    read again from where the kept ones end up to where the first read ended (lines written
    to the file meanwhile were not checked, and are not handed out, whatever the file's size):
    a file that size is parsed once, and memory is bounded whatever the file's size (a record
    kept takes about 1.2 times its line).
    `position()` is where in the file the records handed out so far end, for progress."""

    def __init__(self, stream: BinaryIO, records: Callable[[int, int | None], Iterator[tuple[int, T]]]) -> None:
        self.stream, self.records = stream, records
        self.start = stream.tell()
        self.handed_out: int | None = None  # the position of the last record handed out
        self.kept: list[tuple[int, T, int]] | None = None  # (line number, record, end), last first
        self.resume: tuple[int, int] | None = None  # (offset, line number) the second read starts at
        self.end = self.start  # where the check read ended

    def position(self) -> int:
        return self.stream.tell() if self.handed_out is None else self.handed_out

    def check(self, step: Optional[Callable[[int], None]] = None) -> None:
        """Read the whole file now (iterating does, if this was not called), and go back to
        where it started; `step(1000)` after each 1,000 records read (a progress bar's)."""
        if self.kept is not None:
            return
        stream, kept = self.stream, []
        # what is kept is acyclic and lives on: the collector's passes over it, as it grows,
        # cost as much as reading it (50,000 records: 1.2 s with them, 1.0 s without)
        collecting = gc.isenabled()
        gc.disable()
        try:
            for count, (number, record) in enumerate(self.records(1, None), 1):
                if self.resume is None:
                    at = stream.tell()
                    kept.append((number, record, at))
                    if at - self.start > KEEP_READ_BYTES:
                        self.resume = (at, number + 1)
                if step is not None and count % 1000 == 0:
                    step(1000)
        finally:
            if collecting:
                gc.enable()
        kept.reverse()  # handed out from the end of the list, each let go as it goes
        self.kept, self.end = kept, stream.tell()
        stream.seek(self.start)  # as if nothing was read yet (a progress bar measures from here)

    def __iter__(self) -> Iterator[tuple[int, T]]:
        self.check()
        kept = self.kept
        assert kept is not None
        while kept:
            number, record, self.handed_out = kept.pop()
            yield number, record
        self.stream.seek(self.end if self.resume is None else self.resume[0])
        self.handed_out = None
        if self.resume is not None:
            yield from self.records(self.resume[1], self.end)


def _record_of(number: int, line: bytes, now_us: int,
               put_times: Optional[Callable[[int], None]]) -> Message | NewMessage:
    record = loads_record(number, line)
    try:
        return put_record(record, now_us, put_times)
    except (errors.BadData, errors.InvalidArgument) as exc:
        raise errors.BadData(f"line {number}: {exc.message}") from None


# ---- small texts: a trace label or report body from stdin (exit 12) ----------------------

def read_small(stream: BinaryIO, limit: int, what: str) -> bytes:
    """All of `stream` if it holds at most `limit` bytes; else BadData, after reading one byte
    more than that."""
    data = b""
    while len(data) <= limit:
        chunk = stream.read(limit + 1 - len(data))
        if not chunk:
            return data
        data += chunk
    raise errors.BadData(f"stdin holds more than {limit} bytes, more than any {what}")


def trace_text(body: bool) -> str:
    """A trace label (or with `body`, a report body) from stdin, as `trace decode -` reads it."""
    data = read_small(_stdin(), TRACE_INPUT_BYTES,
                      "trace report body" if body else "trace label (250 characters)")
    # bytes that are not UTF-8 become lone surrogates, which no rule accepts: the decoder then
    # names their column like any other bad character
    text = data.decode("utf-8", "surrogateescape")
    if not body and text.endswith("\n"):
        text = text[:-1]  # a label holds no LF: this is the line end `echo` adds
    return text


# ---- command lines: `mqcli batch`, UTF-8 text a line at most COMMAND_LINE_CHARS (exit 12) --

def command_lines(stream: BinaryIO, limit: int = COMMAND_LINE_CHARS) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of each line, as it comes (a pipe is read a
    line at a time), each read no further than `limit` characters can take in UTF-8: a longer
    line, or one that is not UTF-8 text, is BadData naming it (the lines before it have run).
    A UTF-8 byte order mark before the first line is skipped."""
    number = 0
    most = 4 * limit + 2  # every character in four bytes, and CR LF
    while True:
        raw = stream.readline(most)
        if not raw:
            return
        number += 1
        if len(raw) == most and not raw.endswith(b"\n"):
            raise errors.BadData(f"line {number} is longer than {limit:,} characters")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.BadData(f"line {number} is not UTF-8 text: {exc.reason} at byte {exc.start + 1}") from None
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        text = text[:-1] if text.endswith("\n") else text
        text = text[:-1] if text.endswith("\r") else text
        if len(text) > limit:
            raise errors.BadData(f"line {number} is longer than {limit:,} characters")
        yield number, text
