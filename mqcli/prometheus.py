"""`stats --prometheus`: the store's queues as Prometheus metrics, in the text exposition format
(version 0.0.4), for node_exporter's textfile collector (`--textfile PATH`, written atomically)
or any scraper that runs a command. Names follow Prometheus conventions: `mqcli_` prefix, base
units (seconds, bytes), `_total` for counters, labels for queue, state, priority and reason."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .outfile import written_whole
from .render import age_seconds

CONTENT_TYPE = "text/plain; version=0.0.4"


class Metrics:
    """Families of samples, written in the order they were first declared."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, help_text: str, value: float | int,
            labels: dict[str, Any] | None = None) -> None:
        family = self._families.setdefault(name, (kind, help_text, []))
        family[2].append(f"{name}{_labels(labels)} {_number(value)}")

    def text(self) -> str:
        out = []
        for name, (kind, help_text, samples) in self._families.items():
            out.append(f"# HELP {name} {_escape_help(help_text)}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(samples)
        return "\n".join(out) + "\n"


def store_metrics(stats: Iterable[Any], info: Any, transactions: int, outgoing: Iterable[Any],
                  now: float | None = None) -> str:
    """The exposition text of `Store.stats()`, `Store.info()`, the number of open
    transactions and `Store.outgoing_list()`."""
    now = time.time() if now is None else now
    now_us = int(now * 1_000_000)
    m = Metrics()
    for q in stats:
        queue = {"queue": q.name}
        for state, n in q.by_state.items():
            m.add("mqcli_queue_depth", "gauge", "Messages in the queue, by state.", n, {**queue, "state": state})
        for priority, n in q.by_priority.items():
            m.add("mqcli_queue_depth_by_priority", "gauge", "Messages in the queue, by priority (0-7).", n,
                  {**queue, "priority": priority})
        m.add("mqcli_queue_bytes", "gauge", "Bytes of message bodies in the queue.", q.bytes, queue)
        if q.quota:
            m.add("mqcli_queue_quota_bytes", "gauge", "The queue's quota in bytes (queues with one).", q.quota, queue)
            m.add("mqcli_queue_quota_used_ratio", "gauge", "Bytes in the queue over its quota (queues with one).",
                  q.bytes / q.quota, queue)
        if q.oldest_put_time is not None:
            m.add("mqcli_queue_oldest_message_age_seconds", "gauge",
                  "Age of the oldest message in the queue (queues with messages).",
                  age_seconds(q.oldest_put_time, now_us), queue)
        if q.oldest_in_flight is not None:
            m.add("mqcli_queue_oldest_in_flight_age_seconds", "gauge",
                  "How long the longest-held in-flight message has been in its state (queues with any).",
                  age_seconds(q.oldest_in_flight, now_us), queue)
        for key, name, help_text in _TOTALS:
            m.add(name, "counter", help_text, q.totals.get(key, 0), queue)
        for reason, n in sorted(q.dead_lettered_by_reason.items()):
            m.add("mqcli_queue_dead_lettered_by_reason_total", "counter",
                  "Messages moved from the queue to a dead-letter queue, by reason.", n, {**queue, "reason": reason})
        if q.last_put is not None:
            m.add("mqcli_queue_last_put_timestamp_seconds", "gauge", "When a message was last put on the queue.",
                  q.last_put / 1e6, queue)
        if q.last_get is not None:
            m.add("mqcli_queue_last_get_timestamp_seconds", "gauge", "When a message was last got from the queue.",
                  q.last_get / 1e6, queue)
    m.add("mqcli_transactions_open", "gauge", "Transactions begun and not yet committed or aborted.", transactions)
    for o in outgoing:
        labels = {"queue": o.name, "destination": o.destination_qm}
        m.add("mqcli_outgoing_messages", "gauge", "Messages waiting in an outgoing queue, by its state.", o.messages,
              {**labels, "state": o.state})
        m.add("mqcli_outgoing_bytes", "gauge", "Bytes waiting in an outgoing queue.", o.bytes, labels)
        m.add("mqcli_outgoing_in_flight", "gauge", "Messages of an outgoing queue being sent now.", o.in_flight, labels)
        m.add("mqcli_outgoing_failed_attempts", "gauge", "Failed delivery attempts since the last success.",
              o.attempts, labels)
        if o.next_retry is not None:
            m.add("mqcli_outgoing_next_retry_timestamp_seconds", "gauge", "When the dispatcher tries again.",
                  o.next_retry / 1e6, labels)
    m.add("mqcli_store_messages", "gauge", "Messages in the store.", info.messages)
    m.add("mqcli_store_bytes", "gauge", "Bytes of message bodies in the store.", info.bytes)
    m.add("mqcli_store_map_used_bytes", "gauge", "Bytes of the LMDB map in use.", info.map_used)
    m.add("mqcli_store_map_size_bytes", "gauge", "Size of the LMDB map (the most the store can hold).", info.map_size)
    if info.quota:
        m.add("mqcli_store_quota_bytes", "gauge", "The store's quota in bytes.", info.quota)
    m.add("mqcli_store_throttled", "gauge", "1 if the queue manager accepts no message.", int(info.throttled))
    return m.text()


def write_textfile(path: Path, text: str) -> None:
    """Write atomically, as `export --to` does (outfile.written_whole): a temporary file in the
    same directory, synced, renamed over `path`, so that node_exporter's textfile collector
    never reads half a file. A target that is not a regular file (a FIFO, /dev/stdout) is
    written in place, never replaced."""
    with written_whole(path) as target:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if target != path:
                os.fsync(f.fileno())
                os.chmod(target, 0o644)  # the collector runs as another user


_TOTALS = (
    ("put_messages", "mqcli_queue_put_messages_total", "Messages put on the queue (a two-phase put once confirmed, a transaction's once committed)."),
    ("put_bytes", "mqcli_queue_put_bytes_total", "Bytes of the messages put on the queue."),
    ("got_messages", "mqcli_queue_got_messages_total", "Messages got from the queue (committed destructive gets)."),
    ("got_bytes", "mqcli_queue_got_bytes_total", "Bytes of the messages got from the queue."),
    ("expired", "mqcli_queue_expired_messages_total", "Messages of the queue that expired."),
    ("backed_out", "mqcli_queue_backouts_total", "Backouts of the queue's messages (undone gets, aborts)."),
    ("dead_lettered", "mqcli_queue_dead_lettered_messages_total", "Messages moved from the queue to a dead-letter queue."),
)


def _labels(labels: dict[str, Any] | None) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items()) + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
