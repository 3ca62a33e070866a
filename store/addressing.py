"""Which queue a name means: the one place where a queue name or an MSMQ format name becomes a
queue of this store.

A name goes in once; a queue comes out, one of:

- a local queue, named plainly (`orders`) or by a local format name (`PUBLIC=<queue guid>`,
  `PRIVATE=<this qm's guid>\\<number>`, `DIRECT=OS:<this qm>\\orders`, [MS-MQMQ] 2.1);
- a journal (`orders;journal`, `…;JOURNAL`), made on first use by a get that keeps one;
- a dead-letter queue (`MACHINE=<guid>;DEADLETTER` or `;DEADXACT`);
- the outgoing queue of another queue manager's queue: a store queue named by the canonical
  text of the format name, whose `outgoing` attribute names the queue manager it is bound for
  (docs/protocol.md). A put or an arrival makes it on first use; every other operation finds
  only one that exists.

`Write.queue` below this module knows only the names queues are stored under. Everything that
takes a name from a user, a file or a peer asks here, with the format name parsed once
(`formatnames.parse`) and passed on as a `FormatName`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import formatnames
from .errors import QueueNotAvailable
from .queues import JOURNAL_SUFFIX, QueueInfo, journal_name, validate_name
from .records import Message, guid_text

if TYPE_CHECKING:
    from .write import Write

#: The queue manager a traced message's report queue lives on, kept with the message so that
#: reports made at later hops find their way back (there is no directory service).
REPORT_QM_PROP = "mqcli.report_qm"


def is_format_name(text: str) -> bool:
    """A plain queue name cannot hold '=' (queues.validate_name); every format name but a
    plain local one has it."""
    return "=" in text


def lookup(t: Write, text: str) -> QueueInfo:
    """The existing queue `text` addresses (QueueNotAvailable when there is none): get,
    browse, move, purge and every other operation on a queue that must be there."""
    if type(text) is not str or not is_format_name(text):
        return t.queue(text)
    stored = t.find_queue(text)  # an outgoing queue is stored under its format name's text
    if stored is not None:
        return stored
    return lookup_parsed(t, formatnames.parse(text), text)


def lookup_parsed(t: Write, fn: formatnames.FormatName, text: str) -> QueueInfo:
    """`lookup` of a format name already parsed (`text` is how the user spelled it)."""
    if is_local(t, fn):
        return t.queue(_local_name(t, fn, text))
    return _outgoing(t, fn)


def for_put(t: Write, text: str, m: Message | None = None) -> QueueInfo:
    """The queue a message put to (or arriving for) `text` goes into: a local queue that
    exists, or the outgoing queue for another queue manager's, made on first use."""
    if type(text) is not str or not is_format_name(text):
        return t.queue(text)
    stored = t.find_queue(text)  # the outgoing queue, named as it is stored: nothing to parse
    if stored is not None:
        return stored
    return for_put_parsed(t, formatnames.parse(text), text, m)


def for_put_parsed(t: Write, fn: formatnames.FormatName, text: str, m: Message | None = None) -> QueueInfo:
    """`for_put` of a format name already parsed. A public format name is local unless its
    queue is not here and the message says which queue manager holds it (REPORT_QM_PROP: a
    report finding its way back)."""
    if not is_local(t, fn):
        return _open_outgoing(t, fn)
    try:
        return lookup_parsed(t, fn, text)
    except QueueNotAvailable:
        via = (m.props.get(REPORT_QM_PROP) if m is not None else None) or ""
        if fn.kind != "public" or not via or via.casefold() == t.qm_name.casefold():
            raise
        return _open_outgoing(t, fn, via)


def for_import(t: Write, text: str) -> QueueInfo:
    """The queue an imported record names, made if missing: a plain queue, a journal
    (NAME;journal, as export writes it), or the outgoing queue of a format name."""
    try:
        return lookup(t, text)
    except QueueNotAvailable:
        if is_format_name(text):
            return for_put(t, text)
        if text.casefold().endswith(JOURNAL_SUFFIX):
            return t.journal_queue(validate_name(text[:-len(JOURNAL_SUFFIX)]))
        return t.create_queue(validate_name(text))


def check_import_name(text: str) -> str:
    """`text` if an imported record may name it (for_import): a format name, a journal
    (NAME;journal) or a plain queue name; BadData or InvalidArgument saying why not. Checked
    before a store is open, so that a bad name is reported with its line."""
    if is_format_name(text):
        formatnames.parse(text)
    else:
        validate_name(text[:-len(JOURNAL_SUFFIX)] if text.casefold().endswith(JOURNAL_SUFFIX) else text)
    return text


def is_local(t: Write, fn: formatnames.FormatName) -> bool:
    """Does `fn` address a queue of this queue manager (FormatName.is_local)?"""
    return fn.is_local(t.qm_name, guid_text(t.origin))


def bound_for(fn: formatnames.FormatName) -> str:
    """The queue manager a non-local format name is bound for ("" when the name does not say)."""
    if fn.kind in ("direct", "multicast"):
        return fn.address or ""
    return ""


def _outgoing(t: Write, fn: formatnames.FormatName) -> QueueInfo:
    """The existing outgoing queue for a non-local format name."""
    name = str(fn)
    q = t.find_queue(name)
    if q is None:
        raise QueueNotAvailable(f"{name!r} names a queue of another queue manager and nothing was sent "
                                "there yet (no outgoing queue)")
    return q


def _open_outgoing(t: Write, fn: formatnames.FormatName, via: str | None = None) -> QueueInfo:
    """The outgoing queue for `fn`, made on first use."""
    return t.find_queue(str(fn)) or t.create_queue(str(fn), label=f"outgoing to {fn!s}",
                                                   outgoing=via if via is not None else bound_for(fn))


def _local_name(t: Write, fn: formatnames.FormatName, text: str) -> str:
    """The stored name of the local queue a local format name addresses ([MS-MQMQ] 2.1)."""
    if fn.kind == "public":
        found = [q for q in (t.queue(n) for n in t.queue_names()) if q.guid == fn.guid]
        if not found:
            raise QueueNotAvailable(f"no queue has the GUID {fn.guid} ({text!r})")
        name = found[0].name
    elif fn.kind == "private":  # a private queue's number is its qid
        if not t.queue_exists(fn.queue_number or 0):
            raise QueueNotAvailable(f"no queue has the private number {fn.queue_number:x} ({text!r})")
        name = t.queue_name(fn.queue_number or 0)
    elif fn.queue is None:  # MACHINE=...;X or DIRECT=...\SYSTEM$;X
        system = formatnames.SYSTEM_QUEUES_BY_SUFFIX.get(fn.suffix or "")
        if system is None:
            raise QueueNotAvailable(f"{text!r}: the queue manager's own journal is not kept")
        return system
    else:
        name = fn.queue
    return journal_name(name) if fn.suffix == "journal" else name
