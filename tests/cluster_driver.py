"""The driver of one Spark application on a standalone cluster that runs `mqcli` commands given
on stdin, for tests/cluster_helpers.py `ClusterApp`: `python cluster_driver.py MASTER_URL`.

It makes the session as `mqcli analyze ... --master MASTER_URL` makes it (store.analytics.session
`new_session`: the driver bound to loopback, huge methods compiled, no task retries, tuned for
the cluster's cores), then reads one JSON array of arguments a line, runs `mqcli ARGS` in this
process (mqcli.app.run, as tests/cli_helpers.py `invoke` does), which finds the session active
and uses it, and writes one JSON object a line: {"code", "stdout", "stderr"}. The session is
stopped at end of input. One application start (a driver JVM, an executor JVM on each Worker,
their Python workers) then serves every command, as a notebook's session serves many queries.

Protocol lines go to a copy of the original stdout; the process's own file descriptor 1 is
pointed at stderr first, so nothing the JVM or a library prints can corrupt them.
"""

from __future__ import annotations

import json
import os
import sys


def main(master: str) -> int:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    from click.testing import CliRunner

    from mqcli.app import run
    from store.analytics.session import new_session

    setup = new_session(master, "mqcli analyze")
    runner = CliRunner()
    try:
        for line in sys.stdin:
            argv = [str(a) for a in json.loads(line)]
            with runner.isolation() as (out, err, _mixed):
                code = run(argv)
                sys.stdout.flush()
                sys.stderr.flush()
                stdout = out.getvalue().decode("utf-8", "backslashreplace")
                stderr = err.getvalue().decode("utf-8", "backslashreplace")
            protocol.write(json.dumps({"code": int(code), "stdout": stdout, "stderr": stderr}) + "\n")
            protocol.flush()
    finally:
        setup.spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
