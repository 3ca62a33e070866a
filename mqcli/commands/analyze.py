"""analyze health / routes: the PySpark pipeline over stores or Parquet exports (docs/design.md#pipeline).

PySpark is the optional extra `spark`; this module imports it (through store.analytics) only
when a command runs, so `mqcli --help` and every other command never pay for it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from ..durations import parse_duration
from ..exits import UsageError
from ..outfile import written_whole
from ..options import Session, shared_options
from ..render import age, back_in_time, progress

if TYPE_CHECKING:
    from store.analytics.pipeline import Source

FORMATS = ("parquet", "csv", "json")

app = typer.Typer(
    help="The data pipeline on PySpark (needs `pip install 'mqcli[spark]'`): store health and "
         "trace-report routes, over stores or Parquet exports.\n\n\b\nExample:\n"
         "  mqcli analyze health /var/lib/mq/qm1 /var/lib/mq/qm2\n"
         "  mqcli analyze routes /var/lib/mq/qm1 --plot links.png",
    no_args_is_help=True, rich_markup_mode=None)

StoresArg = Annotated[Optional[list[Path]], typer.Argument(
    metavar="[STORE]...", show_default=False,
    help="Store directories (default: the --store one); or use --parquet.")]
ParquetOpt = Annotated[Optional[Path], typer.Option(
    "--parquet", metavar="DIR", show_default=False,
    help="Read Parquet exports (`mqcli export --format parquet`) instead of stores.")]
SnapshotsOpt = Annotated[Optional[Path], typer.Option(
    "--snapshots", metavar="DIR", show_default=False,
    help="Read the newest snapshot of each store in DIR (`mqcli snapshot DIR` on each host) instead of "
         "stores: each executor copies what it reads to its local disk.")]
QueueOpt = Annotated[Optional[list[str]], typer.Option(
    "--queue", metavar="Q", show_default=False, help="Only this queue (repeatable).")]
OutOpt = Annotated[Optional[Path], typer.Option(
    "--out", metavar="DIR", show_default=False,
    help="Also write the result datasets under DIR (each replaced if it exists).")]
FormatOpt = Annotated[str, typer.Option(
    "--format", metavar="parquet|csv|json", help="Format of the --out datasets.")]
PlotOpt = Annotated[Optional[Path], typer.Option(
    "--plot", metavar="FILE.png", show_default=False, help="Draw a chart into this PNG file.")]
MasterOpt = Annotated[Optional[str], typer.Option(
    "--master", metavar="URL", show_default=False,
    help="Spark master (default: Spark's own configuration, else embedded local[*]).")]


def _prepare(s: Session, stores: Optional[list[Path]], parquet: Optional[Path], queues: Optional[list[str]],
             fmt: str, plot: Optional[Path], reports: Optional[Path] = None,
             snapshots: Optional[Path] = None, out: Optional[Path] = None) -> Source:
    """Check the command line and the inputs before Spark starts."""
    from store.analytics import require
    from store.analytics.pipeline import Source

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if plot is not None and plot.suffix.lower() != ".png":
        raise UsageError(f"--plot writes a PNG: name the file FILE.png, got {str(plot)!r}")
    if out is not None and out.exists() and not out.is_dir():  # Spark found out after the whole job
        raise UsageError(f"cannot write into {out}: it is not a directory (--out names a directory)")
    if plot is not None and not plot.absolute().parent.is_dir():  # found out after the whole job, it was exit 1
        raise UsageError(f"cannot write {plot}: {plot.absolute().parent} is not a directory")
    if sum((bool(stores), parquet is not None, snapshots is not None)) > 1:
        raise UsageError("give store directories, --snapshots DIR or --parquet DIR: one of them")
    if reports is not None and (stores or parquet is not None or snapshots is not None or queues):
        raise UsageError("--reports FILE is read alone: give no store directories, --snapshots, --parquet "
                         "or --queue with it")
    require(what="analyze")
    if plot is not None:
        require(("matplotlib",), "--plot")
    if reports is not None:
        source = Source(reports=str(reports))
        source.check()
        return source
    paths = [str(p) for p in stores or []]
    if not paths and parquet is None and snapshots is None:
        paths = [str(s.store_path)]
    source = Source(stores=paths, parquet=None if parquet is None else str(parquet), queues=queues,
                    snapshots=None if snapshots is None else str(snapshots), allow_foreign_owner=s.allow_foreign)
    source.check()
    for path, owner in source.foreign_owners.items():
        s.said_foreign(owner, path)
    for note in source.notes:
        s.out.note(f"mqcli: note: {note}")
    return source


def _plot(s: Session, plot: Path, draw: Callable[[Path], object]) -> None:
    """Draw the PNG into `plot` whole or not at all, as export writes (outfile.written_whole)."""
    try:
        with written_whole(plot) as path:
            draw(path)
    except OSError as exc:
        raise UsageError(f"cannot write {plot}: {exc.strerror or exc}") from None
    s.out.note(f"wrote {plot}")


def _written(s: Session, paths: list[str]) -> None:
    for p in paths:
        s.out.note(f"wrote {p}")


@app.command("health")
@shared_options
def health(
    s: Session,
    stores: StoresArg = None,
    parquet: ParquetOpt = None,
    snapshots: SnapshotsOpt = None,
    queue: QueueOpt = None,
    stuck_after: Annotated[str, typer.Option(
        "--stuck-after", metavar="DURATION",
        help="A message in flight (locked, unconfirmed, in a transaction) longer than this counts as stuck.")] = "5m",
    out: OutOpt = None, fmt: FormatOpt = "parquet", plot: PlotOpt = None, master: MasterOpt = None,
) -> None:
    """Per store and queue: depth by state and priority, bytes, oldest age, messages in flight
    and stuck, expired but not yet swept, backouts.

    The same figures as `mqcli stats` for the same stores (read read-only, while others write),
    plus what needs a look (expired and lapsed messages are counted, never swept: reads do not
    write). -o json prints one object per queue. --out writes the dataset
    `health`; --plot draws depth by state per queue.

    \b
    Examples:
      mqcli analyze health /var/lib/mq/qm1 /var/lib/mq/qm2 --stuck-after 10m
      mqcli analyze health --parquet exports/ -o json
      mqcli analyze health --snapshots /shared/mq-snapshots --master spark://head:7077
    """
    stuck = parse_duration(stuck_after, allow_forever=False, what="--stuck-after") or 0.0
    source = _prepare(s, stores, parquet, queue, fmt, plot, snapshots=snapshots, out=out)
    from store.analytics.outputs import plot_health, to_records, write_datasets
    from store.analytics.pipeline import run_health
    from store.analytics.session import spark_session

    now = int(time.time() * 1_000_000)
    with progress("analyze health", enabled=not s.out.quiet), spark_session(master, "mqcli analyze health") as setup:
        df = run_health(setup.spark, source, now_us=now, stuck_after_us=int(stuck * 1_000_000)).persist()
        try:
            rows = to_records(df)
            written = write_datasets({"health": df}, out, fmt) if out is not None else []
        finally:
            df.unpersist()
    _written(s, written)
    if plot is not None:
        _plot(s, plot, lambda path: plot_health(rows, path))
    if s.out.mode in ("json", "jsonl"):
        s.out.table(rows, [])
        return
    many = len({r["store_guid"] for r in rows}) > 1
    for r in rows:
        r["age"] = age(None if r["oldest_age_s"] is None else now - int(r["oldest_age_s"] * 1_000_000), now)
    columns = [*([("store_name", "store")] if many else []), ("queue", "queue"), ("depth", "depth"),
               ("bytes", "bytes"), ("available", "avail"), ("in_flight", "in flight"), ("stuck", "stuck"),
               ("expired", "expired"), ("lapsed", "lapsed"), ("backouts", "backouts"), ("age", "oldest")]
    s.out.table(rows, columns)


@app.command("routes")
@shared_options
def routes(
    s: Session,
    stores: StoresArg = None,
    parquet: ParquetOpt = None,
    snapshots: SnapshotsOpt = None,
    queue: QueueOpt = None,
    reports: Annotated[Optional[Path], typer.Option(
        "--reports", metavar="FILE", show_default=False,
        help="Read reports from FILE (JSONL or CSV rows of label, body, arrived), e.g. an export of a "
             "Windows report queue, instead of stores.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Rows shown per table in text output.")] = 20,
    out: OutOpt = None, fmt: FormatOpt = "parquet", plot: PlotOpt = None, master: MasterOpt = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep reading reports as they arrive (a Spark stream) and print the per-link "
                         "latency percentiles again after each batch of new ones.")] = False,
    interval: Annotated[str, typer.Option(
        "--interval", metavar="DURATION", help="With --follow: how often to look for new reports.")] = "5s",
    checkpoint: Annotated[Optional[Path], typer.Option(
        "--checkpoint", metavar="DIR", show_default=False,
        help="With --follow: keep the stream's progress and the reports read in DIR, so that a "
             "restart neither loses nor counts twice a report (default: a temporary folder).")] = None,
    count: Annotated[Optional[int], typer.Option(
        "--count", metavar="N", min=1, show_default=False,
        help="With --follow: stop after N updates.")] = None,
    idle: Annotated[Optional[str], typer.Option(
        "--idle", metavar="DURATION", show_default=False,
        help="With --follow: stop when no report came for this long.")] = None,
) -> None:
    """Rebuild every traced message's route from its trace reports: per-link latency, routes
    that never reached their target queue, loops.

    Reports are decoded by Spark SQL (no Python UDF). Text output shows the links (p50, p95,
    p99 in ms), the incomplete routes and the loops; -o json prints every route (msg_id, hops,
    path: queue manager GUIDs in hop order, complete, loop, …). --out writes the datasets
    `routes` and `links`; --plot draws the per-link latencies. Conflict reports (a hop's copies
    for its own report queue) belong to no route; the summary counts them.

    --reports FILE runs the same analysis on reports no mqcli store wrote: JSON Lines or CSV
    rows of label, body and arrived (ISO-8601 with Z or an offset), such as an export of a
    Windows report queue (README: "Reports from a Windows report queue"). Routes are keyed by
    their labels (qm-id:message-id), a report's time is its event's as its label gives it (not
    the arrival time: reports travel back by different paths), and a route is complete when
    its last report is a `received by`. At most 256 MiB and 1,000,000 rows; a malformed row
    exits 12 naming the row and the column.

    --follow streams the stores' reports (by SequentialID, as they are enqueued) and prints
    the links again after each batch of new reports: one JSON object per update with -o json.
    Stop it with Ctrl-C, or let --count or --idle end it.

    \b
    Examples:
      mqcli analyze routes /var/lib/mq/qm1 /var/lib/mq/qm2 --plot links.png
      mqcli analyze routes --queue reports --follow --interval 10s --checkpoint ~/.mq-follow
      mqcli analyze routes --reports reports.csv -o json
      mqcli analyze routes --queue reports -o json | jq '.[] | select(.complete | not)'
      mqcli analyze routes --parquet exports/ --out results/ --format csv
    """
    if follow:
        if snapshots is not None:
            raise UsageError("--follow reads stores as reports arrive: no --snapshots with it")
        _follow(s, stores, parquet, queue, reports, out, plot, master, interval, checkpoint, count, idle)
        return
    if checkpoint is not None or count is not None or idle is not None:
        raise UsageError("--checkpoint, --count and --idle go with --follow")
    source = _prepare(s, stores, parquet, queue, fmt, plot, reports, snapshots, out)
    from pyspark.sql import functions as F

    from store.analytics.outputs import plot_links, to_records, write_datasets
    from store.analytics.pipeline import run_routes
    from store.analytics.session import spark_session

    text = s.out.mode not in ("json", "jsonl")
    with (progress("analyze routes", enabled=not s.out.quiet),
          spark_session(master, "mqcli analyze routes", sql_labels=source.sql_labels) as setup):
        report = run_routes(setup.spark, source)
        try:
            routes_df = report.result.routes
            if text:
                incomplete = to_records(routes_df.where(~F.col("complete")).orderBy("started"), limit)
                loops = to_records(routes_df.where(F.col("loop")).orderBy("started"), limit)
            else:
                rows = to_records(routes_df.orderBy("started", "msg_id"))
            written = (write_datasets({"routes": routes_df, "links": report.result.links}, out, fmt)
                       if out is not None else [])
        finally:
            report.close()
    _written(s, written)
    if plot is not None:
        _plot(s, plot, lambda path: plot_links(report.links, path, source.names))
    if not text:
        s.out.table(rows, [])
        return
    _render_routes(s, report.summary, report.links, incomplete, loops, source.names, limit)


def _follow(s: Session, stores: Optional[list[Path]], parquet: Optional[Path], queues: Optional[list[str]],
            reports: Optional[Path], out: Optional[Path], plot: Optional[Path], master: Optional[str],
            interval: str, checkpoint: Optional[Path], count: Optional[int], idle: Optional[str]) -> None:
    """`analyze routes --follow`: the links again after each batch of new reports."""
    import tempfile

    if parquet is not None or reports is not None or out is not None or plot is not None:
        raise UsageError("--follow reads stores: no --parquet, --reports, --out or --plot with it")
    every = parse_duration(interval, allow_forever=False, what="--interval") or 0.0
    quiet_for = None if idle is None else parse_duration(idle, what="--idle")
    source = _prepare(s, stores, None, queues, "parquet", None)
    from store.analytics.session import spark_session
    from store.analytics.stream import Update, follow_routes

    def show(u: Update) -> None:
        if s.out.mode in ("json", "jsonl"):
            s.out.document({"batch": u.batch_id, "new_reports": u.new_reports, **u.summary, "links": u.links})
            return
        _render_routes(s, u.summary, u.links, [], [], source.names, 0)

    with tempfile.TemporaryDirectory(prefix="mqcli-follow-") as scratch, \
            spark_session(master, "mqcli analyze routes --follow") as setup:
        folder = checkpoint if checkpoint is not None else Path(scratch)
        follow_routes(setup.spark, source.stores, source.queues, checkpoint=folder, interval_s=every,
                      count=count, idle_s=quiet_for, on_update=show, allow_foreign=source.allow_foreign_owner)


def _render_routes(s: Session, summary: dict[str, int], links: list[dict[str, Any]],
                   incomplete: list[dict[str, Any]], loops: list[dict[str, Any]],
                   names: dict[str, str], limit: int) -> None:
    def qm(guid: str) -> str:
        return names.get(guid, guid)

    def path(guids: list[str]) -> str:
        return " > ".join(qm(g) for g in guids)

    s.out.document(summary)
    for r in links:
        r["link"] = f"{qm(r['from_qm'])} > {qm(r['to_qm'])}"
    backwards = [r["min_ms"] for r in links if r.get("min_ms") is not None and r["min_ms"] < 0]
    if backwards:
        s.out.note(back_in_time(len(backwards), "link(s)", -min(backwards)))
    s.out.table(links, [("link", "link"), ("count", "messages"), ("min_ms", "min ms"), ("p50_ms", "p50 ms"),
                        ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms")],
                title="latency per link")
    for title, rows, n in (("incomplete routes (never reached their target queue)", incomplete,
                            summary["incomplete"]), ("loops", loops, summary["loops"])):
        if not rows:
            continue
        for r in rows:
            r["route"] = path(r["path"])
        shown = f" (first {len(rows)} of {n})" if n > len(rows) else ""
        s.out.table(rows, [("msg_id", "msg_id"), ("hops", "hops"), ("route", "path"),
                           ("target_queue", "target"), ("started", "started")], title=title + shown)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="analyze")
