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

import signal
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
    start us). For the `mqcli` process only; `listen` and `dispatch` put their own handlers
    over it while they serve."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)


def interruption() -> KeyboardInterrupt:
    """The exception to report for an interrupted command: Ctrl-C, or SIGTERM."""
    return Terminated() if _received == signal.SIGTERM else KeyboardInterrupt()


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
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        if self._pending:
            signum = self._pending[0]
            self._pending.clear()
            signal.raise_signal(signum)  # the restored handler raises here (or the default acts)

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
    gate.hold()
    try:
        yield gate
    finally:
        gate.release()
