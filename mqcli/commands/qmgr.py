"""The queue manager: init, info, qmgr set, check, backup, sweep, stats."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from store import Store, StoreInfo

from ..durations import parse_duration, parse_size
from ..exits import UsageError
from ..options import Session, shared_options
from ..session import unshare
from ..render import age, age_seconds, iso

if TYPE_CHECKING:
    from store.engine import QueueStats

qmgr_app = typer.Typer(
    help="Queue manager settings.\n\n\b\nExample:\n  mqcli qmgr set --quota 10GiB",
    no_args_is_help=True, rich_markup_mode=None)


def _info_doc(info: StoreInfo) -> dict:
    return {
        "guid": info.guid, "name": info.name, "path": info.path, "created": iso(info.created),
        "sequential_id": info.sequential_id, "messages": info.messages, "bytes": info.bytes,
        "quota": info.quota, "throttled": info.throttled, "max_message_size": info.max_message_size,
        "queues": info.queues,
        "map_size": info.map_size, "map_used": info.map_used, "report_queue": info.report_queue,
    }


@shared_options
def init(
    s: Session,
    name: Annotated[Optional[str], typer.Option("--name", help="Queue manager name (default: the host name).")] = None,
) -> None:
    """Create a store (one queue manager), with its dead-letter queues.

    \b
    Example:
      mqcli --store /var/lib/mq/qm1 init --name qm1
    """
    from store.environment import read_marker, store_exists
    from store.ownership import check_store

    # whose directory it is, before reading anything in it
    existed = (check_store(s.store_path, allow_foreign=s.allow_foreign) is not None
               and store_exists(s.store_path))
    unfinished = existed and bool(read_marker(s.store_path).get("creating"))
    with s.open(create=True, name=name) as st:
        if unfinished:
            s.out.note(f"finished the store at {s.store_path}, which an earlier init left unfinished")
        elif existed:
            s.out.note(f"a store already exists at {s.store_path}; leaving it as it is")
        info = st.info()
    s.out.document(_info_doc(info))


@shared_options
def info(s: Session) -> None:
    """Show the queue manager: identity, usage, quota, throttle.

    \b
    Example:
      mqcli info -o json
    """
    with s.open(reading=True) as st:
        s.out.document(_info_doc(st.info()))


@qmgr_app.command("set")
@shared_options
def qmgr_set(
    s: Session,
    quota: Annotated[Optional[str], typer.Option("--quota", help="Store quota in bytes (0: none), e.g. 10GiB.")] = None,
    throttle: Annotated[Optional[bool], typer.Option("--throttle/--no-throttle", help="Refuse every put (enqueue status 2).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Queue manager name.")] = None,
    max_message_size: Annotated[Optional[str], typer.Option("--max-message-size", help="Largest message body a put accepts, e.g. 16MiB (default 4MiB, like MSMQ).")] = None,
    report_queue: Annotated[Optional[str], typer.Option(
        "--report-queue", metavar="QUEUE",
        help="This queue manager's own report queue (a queue of this store; '' removes it).")] = None,
) -> None:
    """Change the queue manager's quota, throttle, name, max message size or report queue.

    With its own report queue, a queue manager that handles a traced message whose report
    queue is another sends the report there as usual and a conflict report (label `Report
    Message Conflict`, the same body) to its own, as Windows does with several report queues.

    \b
    Examples:
      mqcli qmgr set --quota 10GiB --no-throttle
      mqcli qmgr set --report-queue reports
    """
    if quota is None and throttle is None and name is None and max_message_size is None and report_queue is None:
        raise UsageError("nothing to set: give --quota, --throttle/--no-throttle, --name, --max-message-size "
                         "or --report-queue")
    with s.open() as st:
        info = st.set_qmgr(name=name, quota=None if quota is None else parse_size(quota, "quota"),
                           throttled=throttle,
                           max_message_size=None if max_message_size is None
                           else parse_size(max_message_size, "max-message-size"),
                           report_queue=report_queue)
    s.out.document(_info_doc(info))


@shared_options
def check(s: Session) -> None:
    """Verify that every record and index entry of the store agree (exit 11 if not).

    \b
    Example:
      mqcli check && echo consistent
    """
    from store.check_process import check_isolated
    from store.errors import StoreCorrupt
    from store.ownership import check_store

    checked = check_store(s.store_path, allow_foreign=s.allow_foreign)  # refused here, said once here
    if checked is not None:
        s.said_foreign(checked.foreign_owner)
    # in a child process: a damaged data file can crash whoever reads it (LMDB trusts its pages)
    unshare(s.store_path)
    problems = check_isolated(s.store_path, allow_unsafe_permissions=s.allow_unsafe,
                              allow_foreign_owner=s.allow_foreign)
    if s.out.mode in ("json", "jsonl"):  # the document lists the problems; stderr only the error
        s.out.document({"ok": not problems, "problems": problems})
    elif not problems:
        s.out.note(f"store {s.store_path}: consistent")
    else:
        for problem in problems:
            s.out.err.write(f"mqcli: check: {problem}\n")
    if problems:
        raise StoreCorrupt(f"the store at {s.store_path} is inconsistent: {len(problems)} problem(s) found")


@shared_options
def backup(
    s: Session,
    target: Annotated[Path, typer.Argument(help="New directory for the copy.")],
) -> None:
    """Copy the store, compacted and consistent, while other processes keep using it.

    \b
    Example:
      mqcli backup /backups/qm1-$(date +%F)
    """
    with s.open(create=False, reading=True) as st:  # it writes nothing: no wait behind a stopped writer
        st.backup(target)
    with Store.open(target) as copy, copy.as_is():  # read as copied: no expiry run on the copy
        s.out.document({"backup": str(target), **_info_doc(copy.info())})


@shared_options
def sweep(
    s: Session,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what is due, change nothing.")] = False,
) -> None:
    """Expire messages past their ttl, undo lapsed leases, abort timed-out transactions (also
    done on every write).

    \b
    Example:
      mqcli sweep --dry-run
    """
    with s.open(reading=dry_run) as st:  # a dry run writes nothing: no wait behind a stopped writer
        result = st.sweep(dry_run=dry_run)
    s.out.document({"expired": result.expired, "leases_undone": result.leases_undone,
                    "transactions_aborted": result.transactions_aborted, "dry_run": dry_run})


_STATE_COLUMNS = [("put-unconfirmed", "put-unc"), ("available", "avail"), ("locked-browse", "locked"),
                  ("get-unconfirmed", "get-unc"), ("browse-get-unconfirmed", "brw-get-unc"),
                  ("tx-locked", "tx")]


def _stats_rows(st: Store) -> list[dict]:
    stats = st.stats()
    now = int(time.time() * 1_000_000)  # after the read: no age of what it found is negative
    return [_stats_row(q, now) for q in stats]


def _stats_row(q: QueueStats, now: int) -> dict:
    """What `stats -o json|jsonl` prints for one queue (`stats --watch -o jsonl` too), at `now` (µs)."""
    row = {"queue": q.name, "depth": q.depth, "bytes": q.bytes}
    row.update({state: q.by_state[state] for state, _ in _STATE_COLUMNS})
    row["by_priority"] = {str(p): n for p, n in q.by_priority.items() if n}
    row["oldest"] = iso(q.oldest_put_time)
    row["oldest_age_s"] = age_seconds(q.oldest_put_time, now)
    row["age"] = age(q.oldest_put_time, now)
    # IBM MQ's LPUTTIME / LGETTIME: is anything still putting, is anyone still getting?
    row["last_put"], row["last_get"] = iso(q.last_put), iso(q.last_get)
    row["put_age"], row["get_age"] = age(q.last_put, now), age(q.last_get, now)
    return row


@shared_options
def stats(
    s: Session,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh until Ctrl-C: a live table on a terminal; to a pipe or file, or with -o jsonl, a snapshot appended per interval.")] = False,
    interval: Annotated[str, typer.Option("--interval", help="Refresh interval with --watch.")] = "1s",
    prometheus: Annotated[bool, typer.Option("--prometheus", help="Print Prometheus metrics (text exposition format 0.0.4).")] = False,
    textfile: Annotated[Optional[Path], typer.Option("--textfile", metavar="PATH", help="With --prometheus: write the metrics to PATH atomically (node_exporter's textfile collector) instead of stdout.")] = None,
) -> None:
    """Per queue: depth by state and priority, bytes, oldest message, last put and get.

    Read from counters the store keeps (no walk over the messages): cheap enough to run every
    few seconds on a deep queue. --prometheus adds the cumulative counts (put, got, expired,
    backed out, dead-lettered by reason), quota use and the oldest in-flight age. --watch
    redraws a table that fits the terminal: put and get rates per second, bytes in KiB/MiB,
    quota use, messages by priority, long queue names shortened in the middle; Ctrl-C ends it
    with exit 0. To a pipe or a file it appends a snapshot each interval instead: a table
    under a `mqcli stats — TIME — every N` line, or with -o jsonl the object -o jsonl prints
    per queue plus time, put_rate and get_rate (-o json is refused: a watch is no one document).

    \b
    Example:
      mqcli stats --watch
      mqcli stats --watch --interval 10s -o jsonl >> stats.jsonl
      mqcli stats --prometheus --textfile /var/lib/node_exporter/textfile/mqcli.prom
    """
    if textfile is not None and not prometheus:
        raise UsageError("--textfile goes with --prometheus")
    if prometheus and watch:
        raise UsageError("--prometheus does not go with --watch (a scraper or cron runs it)")
    if watch and s.out.mode == "json":
        raise UsageError("--watch does not go with -o json (one document, and a watch never ends): use -o jsonl")
    if prometheus:
        from ..prometheus import store_metrics, write_textfile

        with s.open(reading=True) as st:
            text = store_metrics(st.stats(), st.info(), len(st.tx_list()), st.outgoing_list())
        if textfile is None:
            sys.stdout.write(text)
            return
        try:
            write_textfile(textfile, text)
        except OSError as exc:
            raise UsageError(f"cannot write {textfile}: {exc.strerror or exc}") from None
        return
    columns = [("queue", "queue"), ("depth", "depth"), ("bytes", "bytes"),
               *[(k, h) for k, h in _STATE_COLUMNS], ("age", "oldest"), ("put_age", "last put"),
               ("get_age", "last get")]
    with s.open(reading=True) as st:
        if not watch:
            rows = _stats_rows(st)
            if s.out.mode == "text":
                for row in rows:
                    row["by_priority"] = " ".join(f"p{p}:{n}" for p, n in row["by_priority"].items())
                columns.append(("by_priority", "by priority"))
            s.out.table(rows, columns)
            return
        from ..watch import watch as watch_stats

        seconds = parse_duration(interval, allow_forever=False, what="interval") or 1.0
        watch_stats(st, seconds, s.out, _stats_row)


def register(app: typer.Typer) -> None:
    for fn in (init, info, check, backup, sweep, stats):
        app.command()(fn)
    app.add_typer(qmgr_app, name="qmgr")
