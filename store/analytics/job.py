"""The pipeline as a Spark job: `spark-submit` this file (or `python -m store.analytics.job`).

    spark-submit --master spark://host:7077 "$(python -c 'import store.analytics.job as j; print(j.__file__)')" \\
        routes /var/lib/mq/qm1 /var/lib/mq/qm2 --out /shared/mq-routes --format parquet
    python -m store.analytics.job health --parquet /shared/exports --stuck-after 10m

The options are `mqcli analyze`'s: STORE..., --snapshots DIR or --parquet DIR, --queue (repeatable), --out DIR,
--format parquet|csv|json, --plot FILE.png, --master URL, and --stuck-after for health. The
result goes to stdout as JSON: health, an array of rows; routes, {"summary", "links"} (the
routes themselves go to --out). Under spark-submit the session spark-submit made is used
(its master, its configuration); run directly, an embedded `local[*]` one. The stores must be
readable where the tasks run (a cluster's executors need the store directories on their own
disks and the mqcli package installed); for stores on other hosts take snapshots (`mqcli
snapshot DIR` on each host, then --snapshots DIR), or export them with `mqcli export --format
parquet`. A partition that finds another store, or none, where one was planned fails the job
(exit 11).

Under spark-submit, give the JVMs `-XX:-DontCompileHugeMethods` (`--driver-java-options` and
`--conf spark.executor.extraJavaOptions=…`; session.py says why): the sessions mqcli makes
itself have it.

Exit codes are mqcli's (README.md#exit-codes): 2 usage, 6 no such queue, 11 store unavailable, 12 bad data,
1 when Spark fails.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

# absolute imports: spark-submit runs this file as __main__, outside its package
from store.analytics.outputs import FORMATS
from store.errors import InvalidArgument, StoreError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """`250ms`, `30s`, `5m`, `2h` (a bare number is seconds) → seconds."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise InvalidArgument(f"invalid duration {text!r}: use 250ms, 30s, 5m or 2h")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="store.analytics.job", description=__doc__.split("\n\n")[0])
    p.add_argument("analysis", choices=("health", "routes"))
    p.add_argument("stores", nargs="*", metavar="STORE", help="store directories")
    p.add_argument("--parquet", metavar="DIR", help="read Parquet exports instead of stores")
    p.add_argument("--snapshots", metavar="DIR", help="read the newest snapshot of each store in DIR "
                                                     "(`mqcli snapshot DIR`) instead of stores")
    p.add_argument("--queue", action="append", metavar="Q", help="only this queue (repeatable)")
    p.add_argument("--out", metavar="DIR", help="write the result datasets under DIR")
    p.add_argument("--format", choices=FORMATS, default="parquet", help="format of --out")
    p.add_argument("--plot", metavar="FILE.png", help="draw a chart")
    p.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--stuck-after", default="5m", metavar="D",
                   help="health: in flight longer than this counts as stuck (default 5m)")
    return p


def run(args: argparse.Namespace) -> Any:
    """Run one analysis; returns the JSON-ready result."""
    from store.analytics import require
    from store.analytics.outputs import plot_health, plot_links, to_records, write_datasets
    from store.analytics.pipeline import Source, run_health, run_routes
    from store.analytics.session import spark_session

    require()
    if args.plot is not None:
        require(("matplotlib",), "--plot")
    stuck_after = duration(args.stuck_after)
    source = Source(stores=list(args.stores), parquet=args.parquet, snapshots=args.snapshots, queues=args.queue)
    source.check()
    for note in source.notes:
        sys.stderr.write(f"store.analytics.job: note: {note}\n")
    with spark_session(args.master, f"mqcli analyze {args.analysis}",
                       sql_labels=args.analysis == "routes" and source.sql_labels) as setup:
        if args.analysis == "health":
            df = run_health(setup.spark, source, now_us=int(time.time() * 1_000_000),
                            stuck_after_us=int(stuck_after * 1_000_000))
            df = df.persist()
            try:
                rows = to_records(df)
                if args.out:
                    write_datasets({"health": df}, args.out, args.format)
            finally:
                df.unpersist()
            if args.plot:
                plot_health(rows, args.plot)
            return rows
        report = run_routes(setup.spark, source)
        try:
            if args.out:
                write_datasets({"routes": report.result.routes, "links": report.result.links},
                               args.out, args.format)
        finally:
            report.close()
        if args.plot:
            plot_links(report.links, args.plot, source.names)
        return {"summary": report.summary, "links": report.links}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result = run(args)
    except StoreError as exc:
        sys.stderr.write(f"store.analytics.job: error: {exc.message} [{exc.status}]\n")
        return exc.exit_code
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
