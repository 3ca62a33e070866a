"""The channel: listen and dispatch (docs/design.md#store-and-forward, docs/protocol.md).

`listen` receives batches from other queue managers' dispatchers into this store; `dispatch`
sends this store's outgoing queues over their links. Both stop cleanly on SIGTERM (exit 0) and
Ctrl-C (exit 130): what was acknowledged is stored on the other side, what was not goes again.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from store.errors import ChannelError, Interrupted

from ..durations import parse_duration, parse_size
from ..exits import UsageError, one_line
from ..loglines import LogLines
from ..options import Session, shared_options

if TYPE_CHECKING:
    from store import Store

RESULT_COLUMNS = [("link", "link"), ("address", "address"), ("peer", "next hop"), ("messages", "messages"),
                  ("duplicates", "duplicates"), ("batches", "batches"), ("seconds", "seconds"),
                  ("error", "error")]


def _left(st: Store, only: tuple[str, ...], stopped: bool) -> str | None:
    """What a dispatch that ends leaves behind, as one line, or None: the outgoing queues that
    hold messages it does not send (held, locked, no link, never sent by [MS-MQQB]
    3.1.7.12), and, when a signal stopped it, every message still waiting."""
    links = {name.casefold() for name in only}
    queues = [q for q in st.outgoing_list() if q.messages and (not links or (q.link or "").casefold() in links)]
    said = []
    if stopped and queues:
        n = sum(q.messages for q in queues)
        said.append(f"stopped: {n} message{'s' if n != 1 else ''} wait in outgoing queues for the next dispatch")
    left = [q for q in queues if q.why]
    if left:
        n = sum(q.messages for q in left)
        said.append(f"{n} message{'s' if n != 1 else ''} wait in outgoing queues that are not dispatched: "
                    + "; ".join(f"{one_line(q.name)} ({q.messages}): {one_line(q.why or '')}" for q in left))
    return "\n".join(said) or None


@shared_options
def listen(
    s: Session,
    key_file: Annotated[Path, typer.Option(
        "--key-file", show_default=False,
        help="The pre-shared key peers must prove they hold (`mqcli link keygen`; mode 0600).")],
    bind: Annotated[str, typer.Option(
        "--bind", metavar="HOST:PORT",
        help="Address to listen on; loopback unless told otherwise. Port 0 picks a free port "
             "(printed on the ready line).")] = "127.0.0.1:1801",
    max_frame: Annotated[str, typer.Option(
        "--max-frame", metavar="BYTES",
        help="Largest frame a peer may send (a batch of messages), e.g. 16MiB; larger ones are "
             "refused from their header. 64KiB to 4GiB less one byte (a 32-bit length).")] = "16MiB",
    idle_timeout: Annotated[str, typer.Option(
        "--idle-timeout", metavar="DURATION",
        help="Close a connection that sends no frame for this long (or forever).")] = "60s",
    handshake_timeout: Annotated[str, typer.Option(
        "--handshake-timeout", metavar="DURATION",
        help="Close a connection that has not proved the key this long after it was accepted.")] = "5s",
) -> None:
    """Receive messages from other queue managers into this store until stopped.

    Peers (`mqcli dispatch` of stores with a link to this address) must prove they hold the
    key; each batch is acknowledged only after it is committed here, and a message received
    twice is stored once. Prints "listening on HOST:PORT" on stderr when ready. SIGTERM stops
    it (exit 0), Ctrl-C too (exit 130), after the batch being committed is acknowledged.
    Connections that have not proved the key yet have a pool of their own (32, 8 from one
    address) apart from the 64 authenticated peers, so sockets held open by strangers cannot
    lock peers out. The channel is authenticated, not encrypted: binding a non-loopback address
    prints a warning.

    \b
    Example:
      mqcli link keygen qm2.key
      mqcli --store /var/lib/mq/qm2 listen --bind 127.0.0.1:7000 --key-file qm2.key
    """
    from store.channel.frames import MAX_MAX_FRAME, MIN_MAX_FRAME
    from store.channel.listener import ListenerConfig, is_loopback, parse_bind, serve
    from store.links import load_key

    try:
        host, port = parse_bind(bind)
    except ChannelError as exc:  # a value that cannot be valid: a usage error, as for the others
        raise UsageError(str(exc)) from None
    frame = parse_size(max_frame, "--max-frame")
    if not MIN_MAX_FRAME <= frame <= MAX_MAX_FRAME:  # CHALLENGE carries it in 32 bits
        raise UsageError(f"invalid --max-frame {max_frame!r}: from 64KiB ({MIN_MAX_FRAME}) to 4GiB less "
                         f"one byte ({MAX_MAX_FRAME}); a frame's length is a 32-bit field")
    deadline = parse_duration(handshake_timeout, allow_forever=False, what="--handshake-timeout")
    if not deadline:
        raise UsageError("--handshake-timeout must be positive")
    config = ListenerConfig(
        host, port, max_frame=frame, handshake_timeout=deadline,
        idle_timeout=parse_duration(idle_timeout, what="--idle-timeout"))
    key = load_key(key_file)

    def ready(host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        if not is_loopback(host):
            s.out.note(f"mqcli: warning: listening on {shown}, which is not a loopback address: peers "
                       f"must prove they hold the key, but messages cross unencrypted; between "
                       f"machines use a tunnel (SSH, WireGuard) or a private network (docs/protocol.md)")
        sys.stderr.write(f"listening on {shown}:{port}\n")  # always: scripts wait for this line
        sys.stderr.flush()

    with s.open() as st:
        log = LogLines("listen", s.out.quiet)  # never blocks the loop (mqcli/loglines.py)
        try:
            stopped_by = serve(st, key, config, log=log, ready=ready)
        finally:
            log.finish()  # the count of lines dropped, if any
    if stopped_by == signal.SIGINT:
        raise Interrupted()


@shared_options
def dispatch(
    s: Session,
    once: Annotated[bool, typer.Option("--once", help="Send everything sendable now, then exit.")] = False,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep sending as messages arrive, retrying failed links, until stopped.")] = False,
    batch: Annotated[int, typer.Option("--batch", metavar="N", min=1, max=65535,
                                       help="Messages per batch (one commit at the receiver).")] = 1000,
    link: Annotated[Optional[list[str]], typer.Option(
        "--link", metavar="NAME", help="Only this link (repeatable).")] = None,
    timeout: Annotated[str, typer.Option(
        "--timeout", metavar="DURATION", help="Connect and handshake, and each acknowledgement, within this.")] = "30s",
    retry_max: Annotated[str, typer.Option(
        "--retry-max", metavar="DURATION",
        help="--follow: longest wait before retrying a failed link (the wait doubles from 1s up to "
             "this, with jitter).")] = "60s",
) -> None:
    """Send the outgoing queues to their links' listeners.

    Held, locked, HTTP(S) and multicast outgoing queues are not sent, as in MSMQ. A message
    leaves the outgoing queue only when the receiver has committed it. --once exits 13 if a
    link failed (its queues record the error; `mqcli outgoing show`); --follow retries with
    backoff. A version the peer chose that this mqcli does not speak, or a link back to this
    queue manager, locks the queues until `mqcli outgoing resume` (a message larger than the
    peer takes locks its own queue); a wrong key and the peer's refusals are retried. One dispatcher per store.
    Messages the receiver dead-lettered (no such queue, expired, over quota) did cross: a
    warning per link says how many and why, and the exit status stays 0.

    \b
    Example:
      mqcli put 'DIRECT=OS:qm2\\orders' hello
      mqcli dispatch --once
      mqcli dispatch --follow --link qm2
    """
    from store.channel.dispatcher import DispatchConfig, describe_dead_lettered, run

    if once == follow:
        raise UsageError("give exactly one of --once and --follow")
    t = parse_duration(timeout, allow_forever=False, what="--timeout")
    rmax = parse_duration(retry_max, allow_forever=False, what="--retry-max")
    assert t is not None and rmax is not None
    if t <= 0:
        raise UsageError("--timeout must be positive")
    config = DispatchConfig(batch=batch, timeout=t, retry_min=min(1.0, rmax), retry_max=rmax,
                            links=tuple(link or ()))
    with s.open() as st:
        if config.links:
            for name in config.links:
                st.link(name)  # exit 6 for a link that does not exist
        log = LogLines("dispatch", s.out.quiet)  # never blocks the loop (mqcli/loglines.py)
        try:
            results, stopped_by = run(st, config, follow=follow, log=log)
        finally:
            log.finish()  # the count of lines dropped, if any
        left = _left(st, config.links, bool(stopped_by)) if stopped_by or not follow else None
    rows = [r.to_dict() for r in results]
    if s.out.mode == "text":  # the error may quote a peer: escaped, as outgoing show does
        rows = [{**row, "error": None if row.get("error") is None else one_line(row["error"])} for row in rows]
    if rows or s.out.mode != "text":
        s.out.table(rows, RESULT_COLUMNS)
    if left or not rows:
        s.out.note(left or "nothing to send")
    for r in results:  # they crossed (exit 0), but did not reach their queue there
        if r.dead_lettered:
            s.out.note(f"mqcli: warning: link {r.link!r}: {describe_dead_lettered(r.dead_lettered)}")
    if stopped_by == signal.SIGINT:
        raise Interrupted()
    failed = [r for r in results if r.error]
    if failed and not stopped_by:
        raise ChannelError(f"{len(failed)} of {len(results)} links failed: "
                           + "; ".join(r.error for r in failed if r.error))


def register(app: typer.Typer) -> None:
    app.command("listen")(listen)
    app.command("dispatch")(dispatch)
