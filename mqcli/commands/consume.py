"""`mqcli consume QUEUE --exec CMD`: a worker for shell users, like `xargs` over a queue or
`nats sub` with a handler. Each message is got two-phase and handed to CMD (body on stdin,
fields in MQ_* variables); exit 0 confirms it, anything else undoes it (a backout: at the
queue's max-backouts it goes to the dead-letter queue). The confirm of one message and the get
of the next share one durable commit (store/consumer.py)."""

from __future__ import annotations

import os
import queue as queues
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer

from store import Message

from ..durations import parse_duration
from ..options import Session, shared_options
from ..render import iso
from .message import QueueArg, WhereOpt

DEFAULT_LEASE = "5m"
# the store's lease outlives the command's by this much (up to 30s), so that a command killed
# at its lease is undone by this process, not lapsed; it returns the messages of a killed worker


def store_lease(lease: float) -> float:
    return lease + max(1.0, min(30.0, lease))
# how often a waiting worker looks at Ctrl-C (it waits on the store's wake-up meanwhile)
SLICE = 1.0


@dataclass
class Outcome:
    message: Message
    code: int | None  # the command's exit status; None: killed past its lease
    error: str | None = None  # it could not be started


@dataclass
class Tally:
    messages: int = 0
    confirmed: int = 0
    undone: int = 0
    killed: int = 0
    not_started: int = 0
    lapsed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@shared_options
def consume(
    s: Session,
    queue: QueueArg,
    command: Annotated[str, typer.Option("--exec", "-e", metavar="CMD", show_default=False,
                                         help="Shell command run for each message (sh -c): the body on stdin, the fields in MQ_* variables; exit 0 confirms the message, any other status undoes it.")],
    lease: Annotated[str, typer.Option("--lease", help="How long a command may run: past it, it is killed and its message undone.")] = DEFAULT_LEASE,
    parallel: Annotated[int, typer.Option("--parallel", "-P", min=1, max=256, help="Run up to N commands at once.")] = 1,
    count: Annotated[Optional[int], typer.Option("--count", "-n", min=1, help="Stop after N messages.")] = None,
    idle: Annotated[Optional[str], typer.Option("--idle", help="Stop after this long with no message (default: wait for more, until Ctrl-C).")] = None,
    where: WhereOpt = None,
) -> None:
    """Run a command for each message of a queue; exit 0 confirms it, anything else undoes it.

    Each message is got two-phase: the command's exit status decides. A failing message is
    undone with a backout, so at the queue's max-backouts it goes to the dead-letter queue
    (`mqcli queue set Q --max-backouts N`). The command gets the body on stdin and MQ_QUEUE,
    MQ_MSG_ID, MQ_CORREL_ID, MQ_PRIORITY, MQ_LABEL, MQ_BACKOUTS, MQ_PUT_TIME and MQ_PROP_<NAME>
    in its environment, and this process's stdout and stderr. Ctrl-C (or SIGTERM) takes no new
    message, lets the running commands finish, confirms what they handled and exits 0; a second
    one kills them (their messages are undone). If this worker is killed, its messages go back
    when their lease runs out (twice --lease, at most --lease plus 30s), so a message may run twice, never be lost.

    \b
    Examples:
      mqcli consume orders --exec 'jq -r .id >> handled.txt'
      mqcli consume mail --exec 'sendmail -t' --parallel 4 --lease 2m
      mqcli consume jobs --exec './run-job.sh' --where "props.kind = 'nightly'" --idle 30s
    """
    lease_s = parse_duration(lease, allow_forever=False, what="lease")
    idle_s = None if idle is None else parse_duration(idle, allow_forever=False, what="idle time")
    tally = Tally()
    environment = dict(os.environ)  # read once; each command gets it and its message's fields
    with s.open() as st, st.consumer(queue, lease=store_lease(lease_s), where=where) as consumer, \
            _Stopping() as stopping:
        results: queues.Queue[Outcome] = queues.Queue()
        running: dict[int, subprocess.Popen[bytes]] = {}
        last = time.monotonic()

        def settle(outcome: Outcome) -> None:
            running.pop(outcome.message.confirm_id, None)  # type: ignore[arg-type]  # got under a confirm id
            if outcome.code == 0:
                consumer.confirm(outcome.message)
                tally.confirmed += 1
            else:
                consumer.undo(outcome.message)
                tally.undone += 1
                if outcome.code is None:
                    tally.killed += 1
                    s.out.note(f"mqcli: message {outcome.message.msg_id}: the command ran past --lease {lease}; "
                               "killed, message undone")
                if outcome.error is not None:
                    tally.not_started += 1
                    s.out.note(f"mqcli: message {outcome.message.msg_id}: {outcome.error}; message undone")
            for m, exc in consumer.failed:
                tally.lapsed += 1
                s.out.note(f"mqcli: message {m.msg_id}: {exc.message}")
            consumer.failed.clear()

        while True:
            while not results.empty():
                settle(results.get())
            if stopping.hard:
                for proc in running.values():
                    _kill(proc)
            done = stopping.asked or (count is not None and tally.messages >= count)
            if done or len(running) >= parallel:
                if not running:
                    break
                try:  # a slice at a time: a second Ctrl-C is acted on while commands run
                    settle(results.get(timeout=SLICE))
                except queues.Empty:
                    pass
                continue
            wait = 0.0 if running else SLICE
            if idle_s is not None and not running:
                wait = max(0.0, min(wait, last + idle_s - time.monotonic()))
            m = consumer.next(wait=wait)
            if m is None:
                if running:
                    try:  # a command ends, or a slice passes and the queue is looked at again
                        settle(results.get(timeout=SLICE))
                    except queues.Empty:
                        pass
                elif idle_s is not None and time.monotonic() - last >= idle_s:
                    break
                continue
            last = time.monotonic()
            tally.messages += 1
            running[m.confirm_id] = _start(command, environment, queue, m, lease_s, results)  # type: ignore[index]  # got under a confirm id
        for m, exc in consumer.failed:
            tally.lapsed += 1
            s.out.note(f"mqcli: message {m.msg_id}: {exc.message}")
    summary = tally.as_dict()
    if s.out.mode in ("json", "jsonl"):
        s.out.document({"queue": queue, **summary})
    else:
        s.out.note(f"consume {queue}: {tally.messages} messages, {tally.confirmed} confirmed, "
                   f"{tally.undone} undone" + (f" ({tally.killed} killed past --lease)" if tally.killed else ""))


def _start(command: str, environment: dict[str, str], queue: str, m: Message, lease: float,
           results: queues.Queue[Outcome]) -> subprocess.Popen[bytes]:
    """Run the command for `m` in its own session (Ctrl-C at the terminal is ours to act on),
    feed it the body and report its exit status, or None if it ran past its lease."""
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, env=_environment(environment, queue, m),
                                start_new_session=True)
    except OSError as exc:
        results.put(Outcome(m, 127, f"cannot run /bin/sh: {exc.strerror or exc}"))
        return _Nothing()  # type: ignore[return-value]  # stands in for the Popen

    def feed_and_wait() -> None:
        # a timer kills it at its lease: Popen.wait(timeout) would poll, sleeping up to 50 ms.
        # Started before the body is written: a command that hangs without reading a body
        # larger than the pipe holds would otherwise block the write, and never be killed
        killed = threading.Event()

        def overdue() -> None:
            killed.set()
            _kill(proc)

        timer = threading.Timer(lease, overdue)
        timer.daemon = True
        timer.start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(m.body)
        except (BrokenPipeError, OSError):
            pass  # it does not read its stdin (or was killed): its exit status still decides
        try:
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        code = proc.wait()
        timer.cancel()
        results.put(Outcome(m, None if killed.is_set() else code))

    threading.Thread(target=feed_and_wait, daemon=True).start()
    return proc


class _Nothing:
    """Stands for a command that never started (its outcome is queued already)."""

    pid = None

    def poll(self) -> int:
        return 127


def _kill(proc: Any) -> None:
    if getattr(proc, "pid", None) is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_NAME = re.compile(r"[^A-Za-z0-9_]")


def _environment(base: dict[str, str], queue: str, m: Message) -> dict[str, str]:
    """The worker's environment and the message's fields (a NUL, which no environment
    variable may hold, is dropped)."""
    fields = {
        "MQ_QUEUE": queue, "MQ_MSG_ID": m.msg_id, "MQ_CORREL_ID": m.correl_id or "",
        "MQ_PRIORITY": str(m.priority), "MQ_LABEL": m.label, "MQ_BACKOUTS": str(m.backouts),
        "MQ_PUT_TIME": iso(m.put_time), "MQ_LOOKUP_ID": str(m.lookup_id),
    }
    fields.update((f"MQ_PROP_{_NAME.sub('_', name)}", value) for name, value in m.props.items())
    return {**base, **{k: v.replace("\0", "") for k, v in fields.items()}}


class _Stopping:
    """SIGINT and SIGTERM while consuming: the first asks to stop taking messages (the running
    commands finish), the second to kill them."""

    def __init__(self) -> None:
        self.asked = False
        self.hard = False
        self._saved: dict[int, Any] = {}

    def _note(self, signum: int, frame: object) -> None:
        if self.asked:
            self.hard = True
        self.asked = True

    def __enter__(self) -> _Stopping:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._saved[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)


def register(app: typer.Typer) -> None:
    app.command()(consume)
