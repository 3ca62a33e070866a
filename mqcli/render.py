"""Rendering for every command: `text`, `json`, `jsonl`, `body`, `hex` (the output modes of README.md#output).

Data goes to stdout, diagnostics to stderr. `json` prints one document (an object for a
single-message command, an array for listings and multi-message commands), `jsonl` one object
a line, `body` the raw body bytes separated by a delimiter, `hex` a header block and a hex dump
of the body per message (mqcli/hexdump.py); `--format` fills a template per message
(mqcli/template.py). Everything is written as UTF-8 bytes
and flushed per message, because a destructive get commits only after its output is written.
rich is imported only when a text table or a progress bar is drawn.
"""

from __future__ import annotations

import bisect
import errno
import functools
import os
import select
import signal
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from store.records import iso_time
from typing import TYPE_CHECKING, Any, BinaryIO, ContextManager, TextIO, TypeVar, overload

from . import jsonl
from .exits import one_line, to_devnull
from .signals import RAISING, Deferral

if TYPE_CHECKING:
    from store import Message
    from store.errors import DiskFull

    from .template import Template

MODES = ("text", "json", "jsonl", "body", "hex")


class OutputClosed(Exception):
    """stdout's reader went away. Not an OSError, so that click does not turn it into exit 1."""


# errnos of a write that found no room: a full disk (or /dev/full), a full quota, a file as
# large as this process may write (`ulimit -f`: CPython ignores SIGXFSZ, so the write fails)
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def no_room(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _NO_ROOM


def reader_gone(exc: BaseException, out: Any) -> bool:
    """Whether a write to `out` failed because its reader went away: a pipe's (EPIPE), or a
    terminal that hung up (EIO: a closed ssh session, a killed terminal window)."""
    if isinstance(exc, BrokenPipeError):
        return True
    if not (isinstance(exc, OSError) and exc.errno == errno.EIO):
        return False
    try:  # not isatty(): a terminal that hung up fails tcgetattr too
        return stat.S_ISCHR(os.fstat(out.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def disk_full(where: str | None, exc: BaseException | None = None) -> DiskFull:
    """The error for a write that found no room (`exc`, if known): `where` is the file
    written, None for stdout."""
    from store.errors import DiskFull

    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return DiskFull(f"{where or 'stdout'} reached the largest file this process may write "
                        f"(`ulimit -f`): raise the limit, or write elsewhere")
    if where is None:
        return DiskFull("stdout's device is full: free some space on it, or send the output elsewhere")
    return DiskFull(f"the disk holding {where} is full: free some space on it, or write elsewhere")


@contextmanager
def writing_to(where: str | None) -> Iterator[None]:
    """A full disk or device met in the block is exit 8 naming `where` (None: stdout)."""
    try:
        yield
    except OSError as exc:
        if no_room(exc):
            raise disk_full(where, exc) from None
        raise


@overload
def iso(us: int) -> str: ...
@overload
def iso(us: int | None) -> str | None: ...


def iso(us: int | None) -> str | None:
    return None if us is None else iso_time(us)  # exact µs (no float), four-digit years


@overload
def age_seconds(us: int, now_us: int) -> float: ...
@overload
def age_seconds(us: int | None, now_us: int) -> float | None: ...


def age_seconds(us: int | None, now_us: int) -> float | None:
    """The age in seconds, to the millisecond, at `now_us` of a time `us` (both µs since the
    epoch); None for no time. Never negative: a time ahead of this clock (written on a host whose
    clock was ahead) is 0 old. Every output's age comes from here (`age`, the JSON `*age_s`
    fields, Prometheus, health), so they all give one answer."""
    return None if us is None else round(max(0, now_us - us) / 1e6, 3)


def back_in_time(count: int, what: str, by_ms: float) -> str:
    """The note for `count` steps or links of routes that take negative time, by up to `by_ms`:
    no message does; each queue manager stamps its reports by its own clock (`trace route`,
    `analyze routes`)."""
    return (f"{count} {what} go back in time, by up to {by_ms:.3f} ms: the queue managers' clocks "
            f"differ at least that much (each stamps its reports by its own)")


def age(us: int | None, now_us: int) -> str:
    """A short human age like 3s, 4m12s, 2h05m, 3d04h."""
    if us is None:
        return "-"
    seconds = int(age_seconds(us, now_us))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_bytes(n: int) -> str:
    """A byte count in binary units, three significant digits: 512 B, 1.5 KiB, 23.4 MiB."""
    if n < 1024:
        return f"{n} B"
    value, text, step = float(n), "", 0
    while step < len(_BINARY_UNITS):
        value /= 1024
        text = f"{value:.3g}"
        if "e" not in text:  # below 999.5 (1000 and up is the next unit's 0.977)
            break
        step += 1
    return f"{text} {_BINARY_UNITS[min(step, len(_BINARY_UNITS) - 1)]}"


def json_line(obj: Any) -> bytes:
    return jsonl.dumps(obj)


def _body_text(body: bytes, limit: int | None = None) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, not UTF-8: use -o body or -o json>"
    if limit is not None and len(text) > limit:
        return text[:limit] + "…"
    return text


def write_all(stream: BinaryIO, data: bytes) -> None:
    """Write every byte of `data`, or raise. A buffered stream takes it all; a raw one takes
    what it can and says how much: stdout is raw when PYTHONUNBUFFERED is set, and a pipe whose
    reader goes away takes part of a large write. Ignoring the count lost the rest, and a
    destructive get then committed messages nobody received. A failure carries in `written` how
    many bytes the stream took."""
    view = memoryview(data)
    written = 0
    try:
        while written < len(view):
            n = stream.write(view[written:])
            if n is None:  # a non-blocking stream that is full: wait until it takes more
                select.select([], [stream], [])
                continue
            written += n  # counted once the write returned: an interruption undercounts
    except BaseException as exc:
        exc.written = written  # type: ignore[attr-defined]  # the bytes the stream took
        raise


class _File:
    """A file descriptor written so that the count of bytes the kernel took is never lost.

    A write that a signal interrupts returns the part it took, and CPython runs the signal's
    handler as soon as the call returns: a handler that raises there (Ctrl-C; the end of a
    stalled write's grace, mqcli/signals.py) would lose that part from the count, and a
    destructive get would put back messages its reader got whole. So the raising signals are
    blocked over each write and its count, and no write may block, or a stalled reader would
    hold them for ever: the waiting is done in select, where a signal acts with nothing in
    flight. A pipe is written through a description of its own, non-blocking (on Linux,
    /proc/self/fd), which takes what fits, as much as one blocking write would; the file's
    own description stays as it is, since others share it (a shell, `2>&1`). A pipe without
    one, a socket or a terminal takes PIPE_BUF bytes at a time, once select says there is
    room for them."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.written = 0  # in all, since it was made
        mode = os.fstat(fd).st_mode
        self.pipe = stat.S_ISFIFO(mode)
        stalls = self.pipe or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))
        self.step = select.PIPE_BUF if stalls else None  # None: all at once (a file, /dev/null)
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # what each write puts back

    def write(self, data: bytes) -> None:
        own = None
        if self.pipe:
            try:
                own = os.open(f"/proc/self/fd/{self.fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:  # not Linux; another user's pipe; no reader left (the write says so)
                pass
        try:
            self._write(data, self.fd if own is None else own, self.step if own is None else None)
        finally:
            if own is not None:
                os.close(own)

    def _write(self, data: bytes, fd: int, step: int | None) -> None:
        view = memoryview(data)
        at, full = 0, step is not None
        while at < len(view):
            end = len(view) if step is None else min(len(view), at + step)
            if full:
                select.select([], [fd], [])
            n = 0
            try:  # a handler may still raise as the block returns: the finally unblocks then too
                signal.pthread_sigmask(signal.SIG_BLOCK, RAISING)
                try:
                    n = os.write(fd, view[at:end])
                except BlockingIOError:  # no room (a non-blocking description)
                    pass
                self.written += n
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
            at += n
            full = step is not None or at < end


class Output:
    """The renderer of one command invocation."""

    def __init__(self, mode: str = "text", *, quiet: bool = False, delimiter: bytes = b"\n",
                 stdout: BinaryIO | None = None, stderr: TextIO | None = None,
                 where: str | None = None) -> None:
        self.mode = mode
        self.quiet = quiet
        self.delimiter = delimiter
        self.out = stdout if stdout is not None else sys.stdout.buffer
        self.where = where  # what `out` writes to, named in a full-disk error; None: stdout
        self.err = stderr if stderr is not None else sys.stderr
        self.torn = False  # a write to stdout failed or was interrupted part-way
        self.template: Template | None = None  # --format: each message fills it, whatever the mode

    def reader_gone(self) -> bool:
        """Whether stdout is a pipe or socket whose reader has gone (POLLERR, POLLHUP), asked
        without waiting: a put stops before it stores what no one would see the ids of."""
        try:
            fd = self.out.fileno()
        except (AttributeError, OSError, ValueError):  # a stream in memory (a batch line's)
            return False
        poller = select.poll()
        poller.register(fd, 0)  # no event asked: a pipe with room or a file never reports
        return bool(poller.poll(0))

    # ---- diagnostics -------------------------------------------------------------------

    def note(self, text: str) -> None:
        """A diagnostic line on stderr (not data); -q silences it."""
        if not self.quiet:
            try:
                self.err.write(text + "\n")
                self.err.flush()
            except BrokenPipeError:  # whoever read stderr went away: notes have no reader left,
                self.quiet = True     # and the command goes on doing its work
                if self.err is sys.stderr:
                    to_devnull(sys.stderr)

    def write_counted(self, data: bytes, ends: Sequence[int]) -> None:
        """Write `data`, made of parts that end at the offsets `ends`, straight to the file
        (not into a buffer), so that when the write fails or is interrupted the exception
        can say in `delivered` how many parts went out whole (a destructive get removes just
        those, and puts back the rest)."""
        out = self.out
        file = self._file
        before = file.written if file is not None else 0
        written = 0
        try:
            if file is not None:
                out.flush()  # what a buffered stdout holds goes first; then past its buffer
                file.write(data)
            else:  # a stream in memory (a batch line's output): as it counts
                write_all(out, data)
                written = len(data)
                out.flush()
        except BaseException as exc:
            # the descriptor's count is right whenever the exception came, a stream's only
            # if it came out of the write
            written = file.written - before if file is not None else getattr(exc, "written", written)
            delivered = bisect.bisect_right(ends, written)
            self.torn = written != (ends[delivered - 1] if delivered else 0)  # a part was cut
            # a closed pipe or a full device: the messages not written go back (a destructive
            # get removes only the `delivered` first ones)
            gone = reader_gone(exc, self.out)
            if gone or no_room(exc):
                exc = OutputClosed() if gone else disk_full(self.where, exc)
                exc.delivered = delivered  # type: ignore[union-attr]  # read by Store.get's deliver
                raise exc from None
            exc.delivered = delivered  # type: ignore[attr-defined]  # read by Store.get's deliver
            raise

    @functools.cached_property
    def _file(self) -> _File | None:
        """`out`'s file descriptor, None for a stream with none."""
        try:
            return _File(self.out.fileno())
        except (AttributeError, OSError, ValueError):  # a buffer in memory, a closed file
            return None

    def write_unless_stalled(self, data: bytes) -> None:
        """Write `data` (the end of a JSON array after a failure) if the output takes it within
        Deferral.GRACE seconds: a command on its way out (Ctrl-C, a stalled write interrupted) must not wait for
        a reader that stopped reading. If it does not take it, the output is torn, and what
        stdout still buffers goes to /dev/null."""
        try:
            fd = self.out.fileno()
        except (AttributeError, OSError, ValueError):  # a buffer in memory (a batch line's output)
            self._write(data)
            return
        try:
            blocking = os.get_blocking(fd)
            os.set_blocking(fd, False)
        except OSError:
            self._write(data)
            return
        taken = False
        try:
            for wait in (True, False):  # a slow reader gets GRACE to make room; one that stalled, no more
                try:
                    self.out.flush()
                    taken = os.write(fd, data) == len(data)
                    break
                except BlockingIOError:
                    if wait:
                        select.select([], [fd], [], Deferral.GRACE)
        except OSError:  # BrokenPipeError (gone), a full disk
            pass
        finally:
            os.set_blocking(fd, blocking)
        if not taken:
            self.torn = True
            if self.out is sys.stdout.buffer:
                to_devnull(sys.stdout)

    def _write(self, data: bytes) -> None:
        try:
            write_all(self.out, data)
            self.out.flush()
        except OSError as exc:
            self.torn = True
            if reader_gone(exc, self.out):
                raise OutputClosed() from None
            if no_room(exc):
                raise disk_full(self.where, exc) from None
            raise
        except BaseException:
            self.torn = True  # interrupted part-way: what follows could not be parsed
            if self.out is sys.stdout.buffer:  # the command ends here: what stdout still buffers
                to_devnull(sys.stdout)           # must not block its exit on a stalled reader
            raise

    # ---- messages ----------------------------------------------------------------------

    def message(self, m: Message) -> None:
        """A single-message command's result (put, get without --count)."""
        if self.template is not None:
            self._write(self.template.render(m))
        elif self.mode == "hex":
            from . import hexdump

            self._write(hexdump.message(m))
        elif self.mode == "json" or self.mode == "jsonl":
            self._write(json_line(m.to_dict()) + b"\n")
        elif self.mode == "body":
            self._write(m.body + self.delimiter)
        else:
            self._write(_text_message(m).encode("utf-8"))

    def messages(self) -> ContextManager[MessageStream]:
        """A stream of messages (get --count, browse); each is written and flushed at once."""
        return _until_closed(MessageStream(self))

    def documents(self) -> ContextManager[DocumentStream]:
        """A stream of JSON objects (json or jsonl mode), each written and flushed at once."""
        return _until_closed(DocumentStream(self))

    def msg_ids(self, messages: Sequence[Message]) -> None:
        """What a put prints: each new msg_id (text), or the records (json/jsonl)."""
        if self.mode in ("text", "body", "hex"):
            self._write("".join(m.msg_id + "\n" for m in messages).encode("utf-8"))
        elif self.mode == "jsonl" or len(messages) != 1:
            with self.messages() as stream:
                for m in messages:
                    stream.write(m)
        else:
            self.message(messages[0])

    # ---- records: listings and documents -----------------------------------------------

    def document(self, obj: dict[str, Any], text_lines: Sequence[tuple[str, Any]] | None = None) -> None:
        """One object: `info`, `queue show`, a sweep result."""
        if self.mode in ("json", "jsonl"):
            self._write(json_line(obj) + b"\n")
            return
        pairs = text_lines if text_lines is not None else list(obj.items())
        width = max((len(k) for k, _ in pairs), default=0)
        self._write("".join(f"{k:<{width}}  {_plain(v)}\n" for k, v in pairs).encode("utf-8"))

    def table(self, rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
              title: str | None = None) -> None:
        """A listing: a rich table in text, an array in json, lines in jsonl."""
        if self.mode == "json":
            self._write(json_line(list(rows)) + b"\n")
        elif self.mode == "jsonl":
            self._write(b"".join(json_line(r) + b"\n" for r in rows))
        else:
            self._write(render_table(rows, columns, title).encode("utf-8"))

    def value(self, value: Any, key: str) -> None:
        """One scalar result (an id, a count): bare in text, `{key: value}` in json."""
        if self.mode in ("json", "jsonl"):
            self._write(json_line({key: value}) + b"\n")
        else:
            self._write(f"{value}\n".encode("utf-8"))


class MessageStream:
    """Messages written as they come; `extend` writes a batch with one flush."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.count = 0

    def _encode(self, m: Message, number: int) -> bytes:
        """Message `number` (1, 2, ...) of the stream."""
        o = self.output
        if o.template is not None:
            return o.template.render(m)
        if o.mode == "hex":
            from . import hexdump

            return hexdump.message(m, number)
        if o.mode == "json":
            return _array_element(json_line(m.to_dict()), number)
        if o.mode == "jsonl":
            return json_line(m.to_dict()) + b"\n"
        if o.mode == "body":
            return m.body + o.delimiter
        return _text_message(m, number).encode("utf-8")

    def write(self, m: Message) -> None:
        self.output._write(self._encode(m, self.count + 1))
        self.count += 1

    def extend(self, messages: Sequence[Message]) -> None:
        """Write a batch with one write (a destructive get's delivery): if it fails, the
        exception's `delivered` says how many of the messages went out whole."""
        parts, ends, at = [], [], 0
        for i, m in enumerate(messages, self.count + 1):
            part = self._encode(m, i)
            parts.append(part)
            at += len(part)
            ends.append(at)
        try:
            self.output.write_counted(b"".join(parts), ends)
        except BaseException as exc:
            self.count += getattr(exc, "delivered", 0)
            raise
        self.count += len(messages)

    def close(self, failed: bool = False) -> None:
        """End the JSON array; after a failure with nothing written, or a torn write, write
        nothing."""
        if self.output.mode == "json" and self.output.template is None and not (failed and (self.count == 0 or self.output.torn)):
            _end_array(self.output, self.count, failed)


class DocumentStream:
    """JSON objects written as they come: lines in jsonl, the elements of one array in json
    (`mqcli batch`'s result of each line)."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.count = 0

    def write(self, obj: dict[str, Any]) -> None:
        self.output._write(self.start() + json_line(obj) + self.end())

    def start(self) -> bytes:
        """What begins the next object, for one written in parts (`output._write` each part,
        then `end()`): its place in the array in json."""
        self.count += 1
        return _array_element(b"", self.count) if self.output.mode == "json" else b""

    def end(self) -> bytes:
        """What ends an object: the line's end in jsonl."""
        return b"" if self.output.mode == "json" else b"\n"

    def close(self, failed: bool = False) -> None:
        if self.output.mode == "json" and not (failed and (self.count == 0 or self.output.torn)):
            _end_array(self.output, self.count, failed)


_Stream = TypeVar("_Stream", MessageStream, DocumentStream)


@contextmanager
def _until_closed(stream: _Stream) -> Iterator[_Stream]:
    """`stream` for the block, closed at its end (as failed, if the block raised)."""
    try:
        yield stream
    except BaseException:
        stream.close(failed=True)
        raise
    stream.close()


def _array_element(data: bytes, number: int) -> bytes:
    """Element `number` (1, 2, ...) of a JSON array written as it comes."""
    return (b"[" if number == 1 else b",\n") + data


def _end_array(output: Output, count: int, failed: bool) -> None:
    end = b"[]\n" if count == 0 else b"]\n"
    if failed:  # a command that is ending: a reader that stalled must not hold it up
        output.write_unless_stalled(end)
    else:
        output._write(end)


def _plain(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _text_message(m: Message, index: int | None = None) -> str:
    """A message as a line of its fields, then its body. Whoever put the message chose its
    label, correl_id, properties and original queue: each is shown escaped as on an error line,
    so that the fields stay one line and send no escape sequence to the terminal. The body is
    its text (README.md#inspecting-messages: `-o hex` is the view where any bytes are safe)."""
    head = f"[{index}] " if index is not None else ""
    fields = [f"msg_id={m.msg_id}", f"priority={m.priority}", f"size={m.size}"]
    if m.state != "available":
        fields.append(f"state={m.state}")
    for name in ("correl_id", "label", "confirm_id", "lock_id", "tx"):
        value = getattr(m, name)
        if value:
            fields.append(f"{name}={one_line(str(value))}")
    props = m.props
    if m.dead_letter_reason is not None:
        from store.deadletters import DEAD_LETTER_TIME, dead_letter_status

        # a dead letter says why (with its MQ status), from where and when, up front
        fields.append(f"dead_letter_reason={m.dead_letter_reason!r}")
        fields.append(f"status={dead_letter_status(m.dead_letter_reason)}")
        fields.append(f"original_queue={one_line(m.original_queue or '-')}")
        fields.append(f"dead_lettered={one_line(props.get(DEAD_LETTER_TIME, '-'))}")
        props = {k: v for k, v in props.items() if k != DEAD_LETTER_TIME}
    if props:
        fields.append("props=" + ",".join(f"{one_line(k)}={one_line(v)}" for k, v in props.items()))
    return f"{head}{' '.join(fields)}\n{_body_text(m.body)}\n"


def render_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]],
                 title: str | None = None) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=None, pad_edge=False, header_style="bold")
    for key, header in columns:
        table.add_column(header, justify="right" if rows and isinstance(rows[0].get(key), int) else "left",
                         overflow="fold")
    for row in rows:
        table.add_row(*(_plain(row.get(key)) for key, _ in columns))
    buffer = StringIO()
    # markup off: a cell is text, never rich markup (a peer's error text `[/x]` was a crash)
    console = Console(file=buffer, width=_width(), force_terminal=sys.stdout.isatty(),
                      color_system="auto" if sys.stdout.isatty() else None, markup=False)
    console.print(table)
    return buffer.getvalue()


def _width() -> int:
    try:
        return max(80, os.get_terminal_size().columns)
    except OSError:
        return 200


@contextmanager
def progress(description: str, total: int | Callable[[], int | None] | None = None, *,
             unit: str = "messages", enabled: bool = True) -> Iterator[Any]:
    """A progress bar on stderr (never stdout), only when stderr is a terminal; else a silent
    stand-in. In "messages" it shows done of `total` with a rate and the time left; in "bytes"
    (reading a file) bytes of `total` in binary units, the rate and the time left. `total` may
    be a callable, asked only when a bar is drawn: a count read from the store costs nothing
    when no one sees it. None: not known (a pipe), the count alone is shown."""
    if not (enabled and sys.stderr.isatty()):
        yield _NoProgress()
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, ProgressColumn,
                               TextColumn, TimeElapsedColumn, TimeRemainingColumn)
    from rich.text import Text

    class _Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            # rich's estimate needs two updates; after one (a single batch), the mean so far
            speed = task.finished_speed or task.speed or (task.completed / task.elapsed if task.elapsed else None)
            if not speed:
                return Text("")
            return Text(f"{human_bytes(int(speed))}/s" if unit == "bytes" else f"{speed:,.0f} msg/s")

    known = total() if callable(total) else total
    done = DownloadColumn(binary_units=True) if unit == "bytes" else MofNCompleteColumn()
    bar = Progress(TextColumn("{task.description}"), BarColumn(), done, _Rate(),
                   TimeRemainingColumn() if known is not None else TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True, redirect_stdout=False, redirect_stderr=False)
    with bar:
        task = bar.add_task(description, total=known)
        yield _Progress(bar, task)


@contextmanager
def counting(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """`progress` in messages, yielding only its `advance(n)`."""
    with progress(description, total=total) as bar:
        yield bar.advance


class _NoProgress:
    def advance(self, n: int = 1) -> None:
        pass

    def reached(self, completed: int) -> None:
        pass


class _Progress:
    def __init__(self, bar: Any, task: Any) -> None:
        self.bar, self.task = bar, task

    def advance(self, n: int = 1) -> None:
        self.bar.update(self.task, advance=n)

    def reached(self, completed: int) -> None:
        self.bar.update(self.task, completed=completed)
