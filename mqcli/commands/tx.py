"""Transactions that span invocations: tx begin/commit/abort/list/show (docs/design.md#transactions).

`tx begin` prints an id; later invocations put and get under it (`put --tx`, `get --tx`), and
their messages stay tx-locked, invisible to everyone else, until `tx commit` applies them all
in one LMDB transaction or `tx abort` (or the timeout) puts everything back.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from store.errors import DiskFull

from .. import values
from ..durations import parse_duration
from ..options import Session, shared_options
from ..render import OutputClosed, age, age_seconds, iso
from ..signals import deferred

if TYPE_CHECKING:
    from store import Message
    from store.msmq_transactions import TxInfo

app = typer.Typer(
    help="Transactions that span several invocations (MSMQ transactions).\n\n\b\nExample:\n"
         "  T=$(mqcli tx begin --timeout 5m)\n"
         "  mqcli get orders --tx \"$T\" -o body --delimiter '' | mqcli put shipping - --tx \"$T\"\n"
         "  mqcli tx commit \"$T\"",
    no_args_is_help=True, rich_markup_mode=None)

TxArg = Annotated[int, typer.Argument(metavar="TX", help="Transaction id printed by `mqcli tx begin`.",
                                      callback=values.positive_id, show_default=False)]

COLUMNS = [("tx", "tx"), ("age", "age"), ("timeout_left", "timeout left"),
           ("operations", "operations"), ("queues", "queues")]


def _now() -> int:
    return int(time.time() * 1_000_000)


def tx_doc(info: TxInfo, now: int) -> dict[str, Any]:
    """A transaction as `tx list` and `tx show` print it (names as `inflight` uses them)."""
    return {
        "tx": info.tx, "created": iso(info.created), "age": age(info.created, now),
        "age_s": age_seconds(info.created, now),
        "deadline": iso(info.deadline),
        "timeout_left": None if info.deadline is None else f"{max(0, info.deadline - now) / 1e6:.1f}s",
        "operations": info.operations, "queues": list(info.queues),
    }


def _operation(m: Message) -> str:
    # a put inside T waits for the commit to appear; a get inside T for the commit to go
    return "put" if m.tx_put else "get"


@app.command("begin")
@shared_options
def begin(
    s: Session,
    timeout: Annotated[Optional[str], typer.Option(
        "--timeout", help="Abort the transaction if not committed within this time, e.g. 5m, or forever "
                          "(default: 10m; a lapsed one is aborted on the next access to the store).")] = None,
) -> None:
    """Start a transaction and print its id, for --tx on later put and get commands.

    Not committed within --timeout (10 minutes unless told, so that a script that dies leaves
    no message locked for good), it is aborted; --timeout forever opts out.

    \b
    Example:
      T=$(mqcli tx begin --timeout 5m)
      mqcli put orders 'hello' --tx "$T" && mqcli tx commit "$T"
    """
    from store.msmq_transactions import DEFAULT_TIMEOUT

    seconds = DEFAULT_TIMEOUT if timeout is None else parse_duration(timeout, what="timeout")
    with s.open() as st, deferred() as gate:  # a transaction begun is printed: Ctrl-C waits for its id
        tx = st.tx_begin(timeout=seconds)
        try:
            with gate.writing(lambda: s.out.note(f"transaction {tx} was begun; the output stalled, "
                                                 "so its id may not have been written")):
                if s.out.mode in ("json", "jsonl"):
                    s.out.document({"tx": tx, "timeout_s": seconds})
                else:
                    s.out.value(tx, "tx")
        except (OutputClosed, DiskFull):  # its id reached no one, who could use it: it never was
            st.tx_abort(tx)
            raise


@app.command("commit")
@shared_options
def commit(s: Session, tx: TxArg) -> None:
    """Commit a transaction: every put appears and every get is removed, all at once.

    Exit 10 if the transaction is unknown, already finished or timed out.

    \b
    Example:
      mqcli tx commit 17
    """
    with s.open() as st:
        n = st.tx_commit(tx)
    s.out.document({"tx": tx, "committed": n})


@app.command("abort")
@shared_options
def abort(s: Session, tx: TxArg) -> None:
    """Abort a transaction: its puts vanish and its gets return (each counts a backout).

    \b
    Example:
      mqcli tx abort 17
    """
    with s.open() as st:
        n = st.tx_abort(tx)
    s.out.document({"tx": tx, "aborted": n})


@app.command("list")
@shared_options
def list_(s: Session) -> None:
    """List the open transactions: age, timeout left, operations and queues.

    \b
    Example:
      mqcli tx list -o json
    """
    with s.open(reading=True) as st:
        infos = st.tx_list()
    now = _now()  # after the read: no age of what it found is negative
    rows = [tx_doc(info, now) for info in infos]
    if s.out.mode == "text":
        for row in rows:
            row["queues"] = ",".join(row["queues"]) or None
    s.out.table(rows, COLUMNS)


@app.command("show")
@shared_options
def show(s: Session, tx: TxArg) -> None:
    """Show a transaction, then its messages in queue order as browse does.

    Each message's operation is `put` (it appears on commit) or `get` (it is removed on commit).

    \b
    Example:
      mqcli tx show 17 -o json
    """
    with s.open(reading=True) as st:
        info, messages = st.tx_show(tx)
    doc = tx_doc(info, _now())  # after the read: no age of what it found is negative
    doc["puts"] = sum(m.tx_put for m in messages)
    doc["gets"] = len(messages) - doc["puts"]
    if s.out.mode in ("json", "jsonl"):
        doc["messages"] = [{**m.to_dict(), "operation": _operation(m)} for m in messages]
        s.out.document(doc)
        return
    if s.out.mode == "text":
        doc["queues"] = ",".join(doc["queues"]) or None
        s.out.document(doc, [(k, v) for k, v in doc.items() if k != "age_s"])
        if messages:
            s.out._write(b"\n")
    with s.out.messages() as stream:
        stream.extend(messages)
