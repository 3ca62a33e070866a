"""Ctrl-C and SIGTERM: exit 130 and 143, with nothing half-done left behind (README.md#exit-codes).

SIGTERM is treated as Ctrl-C: it raises `Terminated`, a KeyboardInterrupt, so the clean-up
that runs for Ctrl-C (a `.part` file removed, a JSON array closed, a transaction aborted) runs
for it too; only the exit code (128 + 15) and the message differ.

A command that commits and then prints what it committed (the ids of a put) must not be
interrupted in between: the messages would be stored and their ids never shown, and a script
that reruns the failed put would store them twice. `deferred()` holds both signals over such a
window and acts on them when it closes.

This module is imported first thing at start-up: it imports nothing that start-up does not
import anyway.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# every signal whose handler may raise: the two above, and SIGALRM, which ends the grace a
# stalled write gets (Deferral); a write whose count matters blocks them (render.py: _File)
RAISING = (*SIGNALS, signal.SIGALRM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where a KeyboardInterrupt would be (exit 143)."""


# Typer turns a KeyboardInterrupt into a bare exit code, 130, so the signal that caused it is
# kept here for `interruption()`.
_received: int | None = None


# SIGINT and SIGTERM that commands took as their clean end (a follower, a worker): what a batch
# looks at after each line, to stop as the signal asked (mqcli/commands/batch.py)
_stops: list[int] = []


def stopped_by(signum: int) -> None:
    """A command ends cleanly (exit 0) because of `signum`: say so to whoever runs it."""
    _stops.append(signum)


def stops() -> int:
    """How many such signals came so far (compare before and after a command)."""
    return len(_stops)


def last_stop() -> int | None:
    return _stops[-1] if _stops else None


def _terminate(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signum
    raise Terminated()


def install() -> None:
    """Make SIGTERM raise `Terminated` (unless it is ignored, as `nohup` and some supervisors
    start us), and send again a signal whose exception Python dropped (`_dropped`). For the
    `mqcli` process only; `listen` and `dispatch` put their own handlers over it while they
    serve."""
    global _next_unraisablehook
    if sys.unraisablehook is not _dropped:
        _next_unraisablehook, sys.unraisablehook = sys.unraisablehook, _dropped
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)


_next_unraisablehook: Callable[[sys.UnraisableHookArgs], Any] = sys.__unraisablehook__
# a signal whose exception Python dropped, sent again (`_dropped`); until it is acted on, what
# it broke on the way (an import it interrupted: "cannot import name ...") is its doing
_resent: int | None = None


def resent() -> bool:
    """Whether a Ctrl-C or SIGTERM came whose exception Python dropped (it is sent again)."""
    return _resent is not None


def _dropped(unraisable: sys.UnraisableHookArgs) -> None:
    """sys.unraisablehook: an exception raised where Python cannot let it propagate (a weakref
    callback, a __del__, a generator the garbage collector closes) is printed and dropped.

    A handler that raises runs wherever the main thread is when Python next looks for signals,
    and importlib frees each module's lock through a weakref callback as every import ends: a
    Ctrl-C or SIGTERM that comes just then would be lost there (a `get --wait` would wait its
    whole time and say that no message came). Such a signal is sent to the main thread again,
    where its handler acts at the next point it can raise, and nothing is printed. It is sent
    from a thread of its own: sent from here, its handler would run inside this hook, and be
    dropped again."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        _next_unraisablehook(unraisable)
        return
    global _resent
    signum = _resent = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
    main = threading.main_thread().ident
    assert main is not None  # it runs
    try:
        _thread.start_new_thread(signal.pthread_kill, (main, signum))
    except RuntimeError:
        pass  # the interpreter is shutting down: the exit code is decided


def interruption() -> KeyboardInterrupt:
    """The exception to report for an interrupted command: Ctrl-C, or SIGTERM."""
    return Terminated() if signal.SIGTERM in (_received, _resent) else KeyboardInterrupt()


def _waiting_to_write() -> bool:
    """Whether the main thread waits for its turn to write (store/writer_lock.py), with nothing
    begun: a signal a Deferral holds acts at once there, or a put behind a stopped writer would
    wait for it with the signal held. (A get's removal of what it delivered that waits so ends
    too: what it delivered comes back, shown again, never lost.) Looked up, not imported: a
    process that has not opened a store has no writer waiting."""
    lock = sys.modules.get("store.writer_lock")
    return lock is not None and lock.waiting()


class Deferral:
    """Holds SIGINT and SIGTERM from `hold()` until `release()`, which then acts on the first
    one that came, as if it had come then (the handler that was in place runs).

    What a command writes after it committed (the ids of a put) is written inside `writing()`:
    a signal waits for that write too, but a reader that stalls (a full pipe, Ctrl-Z) must not
    make Ctrl-C or SIGTERM wait for ever: if the write has not finished `GRACE` seconds after
    the signal, the signal interrupts it (the caller says what was committed)."""

    GRACE = 0.5

    def __init__(self) -> None:
        self._saved: dict[int, Any] = {}
        self._pending: list[int] = []
        self.is_writing = False
        self._alarm: Any = None

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._pending.append(signum)
        if self.is_writing:
            self._arm()
        elif _waiting_to_write():  # for its turn to write, behind another writer: nothing begun
            self.act()

    def _arm(self) -> None:
        if self._alarm is None:
            self._alarm = signal.signal(signal.SIGALRM, self._stalled)
            signal.setitimer(signal.ITIMER_REAL, self.GRACE)

    def _stalled(self, signum: int, frame: FrameType | None) -> None:
        if self.is_writing and self._pending:
            self.act()

    def act(self) -> None:
        """Act on a signal that came, now (its handler raises)."""
        if not self._pending:
            return
        signum = self._pending[0]
        self._pending.clear()
        handler = self._saved.get(signum)
        if callable(handler):
            handler(signum, None)
        self.release()  # the default action: put it back and let it act
        signal.raise_signal(signum)

    def hold(self) -> None:
        if self._saved or threading.current_thread() is not threading.main_thread():
            return  # held already; or not the main thread, which no signal interrupts
        for signum in SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not signal.SIG_IGN and handler is not None:
                self._saved[signum] = signal.signal(signum, self._note)

    def release(self) -> None:
        """Put the handlers back; then deliver a signal that came while they were held."""
        self.stop_writing()
        saved, self._saved = self._saved, {}
        came: KeyboardInterrupt | None = None
        for signum, handler in saved.items():
            while True:
                try:
                    signal.signal(signum, handler)
                    break
                except KeyboardInterrupt as exc:
                    # signal.signal first runs the handlers of signals that came, and one put
                    # back raises there: the other still goes back, or its signals would only
                    # be noted here from now on, and never acted on
                    came = came or exc
        if self._pending:
            signum = self._pending[0]
            self._pending.clear()
            signal.raise_signal(signum)  # the restored handler raises here (or the default acts)
        if came is not None:
            raise came

    @contextmanager
    def writing(self, stalled: Callable[[], None]) -> Iterator[None]:
        """Write what was committed: a signal that came (or comes) waits `GRACE` seconds for the
        write at most, then interrupts it, and `stalled` says what the output could not show."""
        self.is_writing = True
        if self._pending and self._saved:
            self._arm()
        try:
            yield
        except KeyboardInterrupt:  # held signals raise only here: the write stalled
            stalled()
            raise
        finally:
            self.stop_writing()

    def stop_writing(self) -> None:
        self.is_writing = False
        if self._alarm is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._alarm)
            self._alarm = None


class WritingGate(Deferral):
    """A Deferral for a destructive get, which the store asks to deliver a batch with no
    write transaction open, and which then removes what was delivered and puts back what was
    not.

    A signal that comes while a batch is being written waits for that write to finish, and
    then stops the get before the next batch: what was printed is exactly what is removed.
    A write stalled `GRACE` seconds after the signal is interrupted (Deferral.writing): the
    messages written whole are removed, the rest go back to the queue (the one cut part
    way may have partly gone out: a get may show a message again, never lose one), and the
    output is marked torn. The interruption comes while the write waits for room, never
    between a write and its count (render.py: _File), or messages the reader got whole
    would go back too.
    """

    def start_writing(self) -> None:
        self.hold()
        self.act()  # a signal came since the last message: stop before this one
        self.is_writing = True


@contextmanager
def deferred() -> Iterator[Deferral]:
    """Hold SIGINT and SIGTERM over the block; a signal that came is acted on at its end (also
    when the block failed: the interruption is what is reported, and no signal is lost)."""
    gate = Deferral()
    try:
        gate.hold()  # a signal may raise in it, between the two handlers: the first goes back too
        yield gate
    finally:
        gate.release()
