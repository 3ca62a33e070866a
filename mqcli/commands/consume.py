"""`mqcli consume QUEUE --exec CMD`: a worker for shell users, like `xargs` over a queue or
`nats sub` with a handler. Each message is got two-phase and handed to CMD (body on stdin,
fields in MQ_* variables); exit 0 confirms it, anything else undoes it (a backout: at the
queue's max-backouts it goes to the dead-letter queue). The confirm of one message and the get
of the next share one durable commit (store/consumer.py); when no get is coming (the worker
stops, or pauses after a failure) the confirm is committed on its own, at once."""

from __future__ import annotations

import errno
import json
import os
import queue as queues
import re
import select
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Annotated, Any, BinaryIO, Optional

import typer

from store import Message

from .. import shorthands, signals
from ..durations import parse_duration
from ..exits import UsageError, one_line
from ..lifeline import Lifeline
from ..options import Session, shared_options
from ..render import OutputClosed, disk_full, iso
from .message import BodyHasOpt, LabelIsOpt, NewerOpt, OlderOpt, PropIsOpt, QueueArg, WhereOpt

DEFAULT_LEASE = "5m"
# the store's lease outlives the command's by this much (up to 30s), so that a command killed
# at its lease is undone by this process, not lapsed; it returns the messages of a killed worker


def store_lease(lease: float) -> float:
    return lease + max(1.0, min(30.0, lease))


def watcher_deadline(lease: float) -> float:
    """When the lifeline's watcher kills a command still running, in seconds from its start:
    after this worker would have (at `lease`), before the store lease of its message lapses
    and another worker may run it: a stopped worker's command never runs beside that one."""
    return (lease + store_lease(lease)) / 2
# how often a waiting worker looks at Ctrl-C (it waits on the store's wake-up meanwhile)
SLICE = 1.0
# after a command fails, the next message waits this long, doubled for each failure in a row
# up to BACKOFF_MAX: a message that always fails (and comes straight back, at the head of the
# queue) or a handler whose backend is down is not retried hundreds of times a second
BACKOFF = 0.05
BACKOFF_MAX = 2.0
def _killed_by(signum: int) -> tuple[int, int]:
    """How a command that `signum` killed is reported (by Popen, or by sh for its child)."""
    return -signum, 128 + signum


_SIGPIPED = _killed_by(signal.SIGPIPE)


# the shell's own statuses for a command it could not run (POSIX, as xargs uses them): the
# worker stops (exit 2), the message goes back without a backout, instead of every message
# of the queue failing its way to the dead-letter queue
_CANNOT_RUN = {126: "found but not executable", 127: "not found"}
_PROP = "MQ_PROP_"  # a message's properties; the worker's own MQ_PROP_* variables are not passed on
# What one exec may pass (execve(2), "Limits on size of arguments and environment"): on Linux
# each string at most MAX_ARG_STRLEN, 32 pages (128 KiB with 4 KiB pages), and all of them with
# their pointers at most ARG_MAX, a quarter of the stack limit (2 MiB at the usual 8 MiB, never
# less than 128 KiB). A message's variables stay well within both, so its command always starts.
# One variable (NAME=value, its NUL and pointer): half the per-string limit at the smallest page
# size. A property larger than that belongs in the body, which stdin carries whole.
VAR_MAX = 64 << 10
# All of a message's variables: 64 KiB of properties in MQ_PROPS and again in MQ_PROP_*, plus
# the fields. A sixteenth of the usual ARG_MAX: the command's own children (`xargs`, `find
# -exec`) inherit them and keep room for their arguments; and a message gets the same variables
# on every worker, whatever its stack limit, unless the worker's own environment leaves less.
VARS_MAX = 128 << 10
OMITTED_MAX = 8 << 10  # of them MQ_PROPS_OMITTED, which names the properties left out
HEADROOM = 2048  # as POSIX leaves xargs: ARG_MAX - 2048 for arguments and environment together
_POINTER = 8  # each string's pointer in argv or envp counts toward ARG_MAX


@dataclass
class Outcome:
    message: Message
    code: int | None  # the command's exit status; None: killed past its lease
    error: str | None = None  # it could not be started
    ours: bool = False  # for a reason of this worker's (its environment is too large), not the message's


@dataclass
class Tally:
    messages: int = 0
    confirmed: int = 0
    undone: int = 0
    killed: int = 0
    not_started: int = 0
    lapsed: int = 0
    # undone without a backout: the command died writing to this worker's closed output, or
    # could not be started for a reason of this worker's own
    returned: int = 0

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
    idle: Annotated[Optional[str], typer.Option("--idle", help="Stop after this long with no command running and no message to take (default: wait for more, until Ctrl-C).")] = None,
    where: WhereOpt = None, label: LabelIsOpt = None, prop: PropIsOpt = None, older_than: OlderOpt = None, newer_than: NewerOpt = None,
    body_contains: BodyHasOpt = None,
) -> None:
    """Run a command for each message of a queue; exit 0 confirms it, anything else undoes it.

    Each message is got two-phase: the command's exit status decides. A failing message is
    undone with a backout, so at the queue's max-backouts it goes to the dead-letter queue
    (`mqcli queue set Q --max-backouts N`); after a failure the next message waits 50ms,
    doubled for each failure in a row up to 2s. The command gets the body on stdin (whole,
    from a file), MQ_QUEUE, MQ_MSG_ID, MQ_CORREL_ID, MQ_PRIORITY, MQ_LABEL, MQ_BACKOUTS,
    MQ_PUT_TIME, MQ_PROPS (JSON) and MQ_PROP_<NAME> in its environment, and this process's
    stdout and stderr. So that the command always starts, a property too large for the
    environment is left out of MQ_PROPS and MQ_PROP_<NAME>: one whose variable passes 64 KiB,
    then the largest until MQ_PROPS is within 64 KiB and all the message's variables within
    128 KiB. MQ_PROPS_OMITTED names them (a JSON array; empty if none), as does a note on
    stderr; `mqcli browse "$MQ_QUEUE" --msg-id "$MQ_MSG_ID" --state get-unconfirmed -o json`
    reads the whole message. If the worker's own environment leaves no room to start a command,
    its message goes back without a backout and the exit is 2. Ctrl-C (or SIGTERM) takes no new
    message, lets the running commands finish, confirms what they handled and exits 0; a
    second one kills them (their messages are undone) and exits 130 (143). If stdout is a pipe whose reader went away, no new
    message is taken and the exit is 141; a command that SIGPIPE killed meanwhile did not
    fail on its message, which goes back without a backout. If this worker is killed, its commands are killed
    too and its messages go back when their lease runs out (twice --lease, at most --lease
    plus 30s), so a message may run twice, never be lost.

    \b
    Examples:
      mqcli consume orders --exec 'jq -r .id >> handled.txt'
      mqcli consume mail --exec 'sendmail -t' --parallel 4 --lease 2m
      mqcli consume jobs --exec './run-job.sh' --where "props.kind = 'nightly'" --idle 30s
    """
    where = shorthands.selector(locals())
    lease_s = parse_duration(lease, allow_forever=False, what="lease")
    if lease_s < 0.001:  # below a millisecond every command is killed as it starts
        raise UsageError(f"invalid lease {lease!r}: a command needs some time to run (250ms at least is sensible)")
    if not command.strip():
        raise UsageError("--exec needs a command: an empty one would confirm every message unhandled")
    idle_s = None if idle is None else parse_duration(idle, allow_forever=False, what="idle time")
    tally = Tally()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(_PROP)}  # read once
    room = _room(environment, command)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        # started with SIGCHLD ignored (some supervisors do): the commands would be reaped
        # unseen, and their exit status, which decides confirm or undo, lost (Python says 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with s.open() as st, st.consumer(queue, lease=store_lease(lease_s), where=where) as consumer, \
            Lifeline() as lifeline, _Stopping() as stopping:
        if not lifeline.guarded:
            s.out.note("mqcli: consume: note: commands start without waiting for this worker's watcher to know "
                       "of them (a shell here cannot read the worker's /proc/PID/fd): a worker killed as it "
                       "starts one may leave that one running")
        results: queues.Queue[Outcome] = queues.Queue()
        running: dict[int, _Run] = {}
        idle_since = time.monotonic()  # when the last command ended, or the worker started (--idle)
        streak = 0  # commands that failed in a row: the next message waits (backoff)
        resume = 0.0  # no message is taken before this (time.monotonic)
        output_closed = False
        output_full = False  # a command failed with stdout /dev/full or a file on a full disk: no more are run
        unstartable: str | None = None  # why no command can start here (E2BIG): the worker stops

        def settle(outcome: Outcome) -> None:
            nonlocal streak, resume, idle_since, unstartable, output_full
            m = outcome.message
            running.pop(m.confirm_id, None)  # type: ignore[arg-type]  # got under a confirm id
            # idle is time with nothing to do: it starts when the last command ends, not when
            # its message was taken (then a command longer than --idle ended the worker at once)
            idle_since = time.monotonic()
            if outcome.code == 0:
                consumer.confirm(m)
                tally.confirmed += 1
                streak = 0
            else:
                failed = len(consumer.failed)
                # a command killed by SIGPIPE when this worker's own output closed (`| head -1`)
                # did not fail on its message: it goes back as a get puts back what it could
                # not write, without a backout toward the dead-letter queue
                # nor did one this worker could not start for its own reason
                # nor did one that the signal stopping this worker killed too (systemd's stop
                # sends SIGTERM to the whole cgroup): a service restart would count a backout
                # for every message in flight, and dead-letter some
                # nor did one that failed while this worker's stdout, which it may have written
                # to, is full: the worker stops (its log is full, or its output lost)
                output_full = output_full or _output_full()
                returned = (outcome.ours or (outcome.code in _SIGPIPED and (output_closed or _output_closed()))
                            or output_full
                            or (stopping.asked and outcome.code in _killed_by(stopping.signum)))
                consumer.undo(m, backout=not returned)
                tally.undone += 1
                tally.returned += returned
                for gone, exc in consumer.failed[failed:]:  # it was back in the queue already
                    s.out.note(f"mqcli: message {gone.msg_id}: {exc.message}")
                del consumer.failed[failed:]
                if outcome.code is None:
                    tally.killed += 1
                    s.out.note(f"mqcli: message {m.msg_id}: the command ran past --lease {lease}; killed, message undone")
                if outcome.error is not None:
                    tally.not_started += 1
                    if outcome.ours:
                        unstartable = f"message {m.msg_id}: {outcome.error}; the message went back without a backout"
                    else:
                        s.out.note(f"mqcli: message {m.msg_id}: {outcome.error}; message undone")
                streak += 1
                resume = time.monotonic() + min(BACKOFF * 2 ** (streak - 1), BACKOFF_MAX)
            late_confirms()

        def late_confirms() -> None:
            """Confirms that failed when committed: handled, but the lease had lapsed (the
            message was back in the queue, maybe handled again) or it expired meanwhile."""
            for m, exc in consumer.failed:
                tally.confirmed -= 1
                tally.lapsed += 1
                s.out.note(f"mqcli: message {m.msg_id}: handled, but not confirmed: {exc.message}")
            consumer.failed.clear()

        while True:
            while not results.empty():
                settle(results.get())
            if stopping.hard:
                for run in running.values():
                    run.kill()
            output_closed = output_closed or _output_closed()
            done = (stopping.asked or output_closed or output_full or unstartable is not None
                    or (count is not None and tally.messages >= count))
            backoff = resume - time.monotonic()
            if done or len(running) >= parallel or backoff > 0:
                if done and not running:
                    break
                # no get comes to carry the confirms until a command ends (stopping: never) or
                # the pause does; they are committed now, as a command waited for may run up
                # to --lease longer, past the store lease of the messages handled meanwhile
                consumer.flush()
                late_confirms()
                try:  # a slice at a time: a second Ctrl-C is acted on while commands run
                    settle(results.get(timeout=SLICE if done or backoff <= 0 else min(SLICE, backoff)))
                except queues.Empty:
                    pass
                continue
            wait = 0.0 if running else SLICE
            if idle_s is not None and not running:
                wait = max(0.0, min(wait, idle_since + idle_s - time.monotonic()))
            m = consumer.next(wait=wait)
            late_confirms()
            if m is None:
                if running:
                    try:  # a command ends, or a slice passes and the queue is looked at again
                        settle(results.get(timeout=SLICE))
                    except queues.Empty:
                        pass
                elif idle_s is not None and time.monotonic() - idle_since >= idle_s:
                    break
                continue
            tally.messages += 1
            env, omitted = _environment(environment, room, queue, m)
            if omitted:
                s.out.note(f"mqcli: message {m.msg_id}: properties too large for the environment left out: "
                           + _names(omitted))
            running[m.confirm_id] = _start(command, env, m, lease_s, results, lifeline)  # type: ignore[index]  # got under a confirm id
        consumer.flush()
        late_confirms()
    summary = tally.as_dict()
    if s.out.mode in ("json", "jsonl"):
        s.out.document({"queue": queue, **summary})
    else:
        s.out.note(f"consume {queue}: {tally.messages} messages, {tally.confirmed} confirmed, {tally.undone} undone"
                   + (f" ({tally.killed} killed past --lease)" if tally.killed else "")
                   + (f" ({tally.returned} back without a backout"
                      f"{': the output closed' if output_closed else ': the output is full' if output_full else ''})"
                      if tally.returned else "")
                   + (f", {tally.lapsed} handled but not confirmed (taken from this worker meanwhile: "
                      "its lease lapsed, or it expired, was undone or purged)" if tally.lapsed else ""))
    if unstartable is not None:  # exit 2: it is how the worker was started, and starting it again so fails again
        raise UsageError(unstartable)
    if output_closed:
        raise OutputClosed()
    if output_full:
        raise disk_full(None)
    if stopping.hard:  # the second signal killed the commands: it acts now, as if it came now (130, 143)
        signal.raise_signal(stopping.signum)


def _start(command: str, env: dict[str, str], m: Message, lease: float, results: queues.Queue[Outcome],
           lifeline: Lifeline) -> _Run:
    """Run the command for `m` in its own session (Ctrl-C at the terminal is ours to act on),
    its body whole on stdin before it starts, and report its exit status, or None if it ran
    past its lease. The lifeline kills it if this worker is killed (mqcli/lifeline.py). An
    environment the system refuses (E2BIG) is the worker's, not the message's: the message's
    own variables were kept within bounds (_environment)."""
    try:
        body = _body_file(m.body)
    except OSError as exc:
        results.put(Outcome(m, 127, f"cannot hand its body over: {exc.strerror or exc}"))
        return _Run(None)
    try:
        proc = lifeline.start(command, body, env, time.monotonic() + watcher_deadline(lease))
    except OSError as exc:
        too_large = exc.errno == errno.E2BIG
        results.put(Outcome(m, 127, f"cannot run /bin/sh: {exc.strerror or exc}" + (
            ": the worker's environment and --exec leave no room for a message's variables (start it with a "
            "smaller environment, or a larger stack limit: ulimit -s)" if too_large else ""), ours=too_large))
        return _Run(None)
    finally:
        body.close()
    run = _Run(proc)
    threading.Thread(target=run.wait, args=(m, lease, results, lifeline), daemon=True).start()
    return run


def _body_file(body: bytes) -> BinaryIO:
    """The body in a file of its own (in memory where the system has memfd), read from its
    start: the command's stdin. Written whole before the command starts, so a command never
    reads a body cut short (a pipe fed by this worker ends early if the worker dies), and one
    that does not read it never blocks the worker."""
    if hasattr(os, "memfd_create"):
        f: BinaryIO = open(os.memfd_create("mqcli-body", os.MFD_CLOEXEC), "w+b")
    else:
        f = tempfile.TemporaryFile()
    try:
        f.write(body)
        f.flush()
        f.seek(0)
    except BaseException:
        f.close()
        raise
    return f


class _Run:
    """A running command: its process, and whether it ended (then its process group is never
    signalled again: once reaped, its id may be another process's)."""

    def __init__(self, proc: subprocess.Popen[bytes] | None) -> None:
        self.proc = proc  # None: it never started (its outcome is queued already)
        self._ended = proc is None
        self._lock = threading.Lock()

    def kill(self) -> bool:
        """SIGKILL its process group if it has not ended; whether it was signalled."""
        with self._lock:
            if self._ended or self.proc is None:
                return False
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                return False
            return True

    def wait(self, m: Message, lease: float, results: queues.Queue[Outcome], lifeline: Lifeline) -> None:
        """Wait for the command (killed at its lease) and queue its outcome. It ran past its
        lease only if the kill ended it: a command that exited first keeps its status, however
        late this worker (stopped, or short of CPU) came to look."""
        proc = self.proc
        assert proc is not None
        # a timer kills it at its lease: Popen.wait(timeout) would poll, sleeping up to 50 ms
        overdue = threading.Event()

        def at_lease() -> None:
            if self.kill():
                overdue.set()

        timer = threading.Timer(lease, at_lease)
        timer.daemon = True
        timer.start()
        code: int | None = 1  # if this thread fails, the message is undone (and the worker does not wait for ever)
        error = None
        passed = True
        try:
            if hasattr(os, "waitid"):  # it ended; not reaped, so its id is still its own
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            else:
                proc.wait()
            with self._lock:
                self._ended = True
            timer.cancel()
            passed = lifeline.release(proc.pid)
            code = proc.wait()
            if not passed:  # its shell could not read the gate: the worker's environment, not the message
                error = "its shell could not pass the worker's gate (/proc/PID/fd), so the command never ran"
            elif overdue.is_set() and code == -signal.SIGKILL:
                code = None
            elif code in _CANNOT_RUN:  # the worker's --exec, not the message: it would fail on every one
                error = f"the shell could not run the command (exit {code}: {_CANNOT_RUN[code]}; see its stderr)"
        except OSError as exc:  # its status is lost (reaped by someone else): not confirmed
            error = f"cannot learn how the command ended: {exc.strerror or exc}"
        finally:
            results.put(Outcome(m, code, error, ours=not passed or code in _CANNOT_RUN))


_NAME = re.compile(r"[^A-Za-z0-9_]")


def _size(name: str, value: str) -> int:
    """The bytes `NAME=value` takes of ARG_MAX: the string as exec gets it, its NUL, its pointer."""
    return len(os.fsencode(name)) + len(os.fsencode(value)) + 2 + _POINTER


def _room(environment: dict[str, str], command: str) -> int:
    """The bytes a message's variables may take: VARS_MAX, or less where the worker's own
    environment and command line leave less of ARG_MAX (a small stack limit, a huge environment)."""
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        arg_max = 128 << 10  # Linux's least
    if arg_max < 0:  # no limit
        return VARS_MAX
    argv = sum(len(os.fsencode(arg)) + 1 + _POINTER for arg in ("/bin/sh", "-c", command))
    return min(VARS_MAX, arg_max - HEADROOM - argv - sum(_size(k, v) for k, v in environment.items()))


def _environment(base: dict[str, str], room: int, queue: str, m: Message) -> tuple[dict[str, str], list[str]]:
    """The worker's environment and the message's fields, and the names of the properties left
    out. Every property is in MQ_PROPS (a JSON object); each also in MQ_PROP_<NAME>, its name's
    other characters than letters, digits and _ made _, unless another property has that
    variable: a name that needs no change first, then in the message's order. A NUL, which no
    environment variable may hold, is dropped (MQ_PROPS keeps it, as \\u0000).

    A property is left out of both (and named in MQ_PROPS_OMITTED) if its variable, or MQ_PROPS
    with it alone, would pass VAR_MAX; then, the largest first, until MQ_PROPS is within VAR_MAX
    and all the message's variables within `room`: the command always starts, with what fits.
    The other fields are small (the store bounds a label to 250 characters, a correlation id to
    255 bytes)."""
    props = m.props or {}
    fields = {
        "MQ_QUEUE": queue, "MQ_MSG_ID": m.msg_id, "MQ_CORREL_ID": m.correl_id or "",
        "MQ_PRIORITY": str(m.priority), "MQ_LABEL": m.label, "MQ_BACKOUTS": str(m.backouts),
        "MQ_PUT_TIME": iso(m.put_time), "MQ_LOOKUP_ID": str(m.lookup_id), "MQ_PROPS": "{}",
    }
    variables: dict[str, str] = {}  # property name -> its MQ_PROP_ variable, if it is the first to claim it
    claimed: set[str] = set()
    for name in sorted(props, key=lambda name: _NAME.search(name) is not None):  # stable
        variable = f"{_PROP}{_NAME.sub('_', name)}"
        if variable not in claimed:
            claimed.add(variable)
            variables[name] = variable
    # the bytes each property takes: `"name": "value", ` in MQ_PROPS, and its own variable (a
    # property is UTF-8: no surrogate to escape); a message may have hundreds of thousands
    quoted = json.encoder.encode_basestring  # as json.dumps(ensure_ascii=False) quotes a string
    in_json = {name: len(quoted(name).encode()) + len(quoted(value).encode()) + 4 for name, value in props.items()}
    own = {name: len(variables[name]) + len(props[name].replace("\0", "").encode()) + 2 + _POINTER
           if name in variables else 0 for name in props}
    empty = _size("MQ_PROPS", "{}")
    left_out = {name for name in props if own[name] > VAR_MAX or empty + in_json[name] > VAR_MAX}
    json_size, total = empty, sum(_size(k, v) for k, v in fields.items()) + OMITTED_MAX
    by_size = sorted((name for name in props if name not in left_out), key=lambda name: in_json[name] + own[name])
    for i, name in enumerate(by_size):  # the smallest first: what does not fit is the largest
        json_size += in_json[name]
        total += in_json[name] + own[name]
        if json_size > VAR_MAX or total > room:
            left_out.update(by_size[i:])
            break
    passed = {name: value for name, value in props.items() if name not in left_out}
    omitted = [name for name in props if name in left_out]  # in the message's order
    if passed:
        fields["MQ_PROPS"] = json.dumps(passed, ensure_ascii=False)
    fields.update((variables[name], passed[name]) for name in variables if name in passed)
    fields["MQ_PROPS_OMITTED"] = _omitted(omitted)
    return {**base, **{k: v.replace("\0", "") for k, v in fields.items()}}, omitted


def _omitted(names: list[str]) -> str:
    """MQ_PROPS_OMITTED: empty, or the names left out as a JSON array, as many as OMITTED_MAX
    holds; then the number of those not named (names are strings: a number is no name)."""
    if not names:
        return ""
    size = _size("MQ_PROPS_OMITTED", "[]") + len(", 4294967295")  # and room for the number
    for i, name in enumerate(names):
        size += len(os.fsencode(json.dumps(name, ensure_ascii=False))) + 2
        if size > OMITTED_MAX:
            return json.dumps([*names[:i], len(names) - i], ensure_ascii=False)
    return json.dumps(names, ensure_ascii=False)


def _names(names: list[str], shown: int = 5) -> str:
    """Property names for a note on stderr: the first few, each cut to 40 characters."""
    text = ", ".join(one_line(n if len(n) <= 40 else n[:40] + "…") for n in names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _output_closed() -> bool:
    """Whether this worker's stdout, which the commands write to, is a pipe or socket whose
    reader went away (`mqcli consume q --exec … | head -1`): every command would fail writing
    to it, and each failure is a backout that takes its message toward the dead-letter queue."""
    try:
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, AttributeError, ValueError):  # no poll() here, or no stdout at all
        return False


def _output_full() -> bool:
    """Whether this worker's stdout, which the commands write to, is /dev/full or a file on a
    full filesystem: every command writing to it fails (ENOSPC), through no fault of its
    message, and each failure would be a backout toward the dead-letter queue."""
    try:
        st = os.fstat(1)
        if stat.S_ISCHR(st.st_mode):
            return st.st_rdev == os.makedev(1, 7)  # /dev/full
        if not stat.S_ISREG(st.st_mode):
            return False
        vfs = os.fstatvfs(1)
    except (OSError, AttributeError):  # no stdout at all
        return False
    return (vfs.f_bfree if os.geteuid() == 0 else vfs.f_bavail) == 0  # root may use the reserved blocks


class _Stopping:
    """SIGINT and SIGTERM while consuming: the first asks to stop taking messages (the running
    commands finish), the second to kill them."""

    def __init__(self) -> None:
        self.asked = False
        self.hard = False
        self.signum: int = signal.SIGINT
        self._saved: dict[int, Any] = {}

    def _note(self, signum: int, frame: object) -> None:
        if self.asked:
            self.hard = True
        self.asked = True
        self.signum = signum
        signals.stopped_by(signum)  # a batch running this stops after it

    def __enter__(self) -> _Stopping:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                # one ignored stays ignored (a shell starts `consume ... &` with SIGINT so):
                # a worker that acted on it killed its commands and exited 0, as if stopped
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._saved[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)


def register(app: typer.Typer) -> None:
    app.command()(consume)
