"""`mqcli health`: a Nagios / Icinga check of the store's queues, in the plugin format (one line,
`MQCLI <STATE> - <what> | <performance data>`), with the plugin API's exit codes: 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN. That is this command's exception to mqcli's exit-code table:
the monitoring system reads the code, so a missing store, a bad threshold or any other mistake
in the command line is UNKNOWN (3), never CRITICAL (2, mqcli's usage error).

Performance data follows the Nagios Plugin Development Guidelines (section "Performance data"):
`'label'=value[unit];[warn];[crit];[min];[max]`, numbers in plain decimal notation, a label
quoted, without `=`, its single quotes doubled."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..durations import parse_duration
from ..exits import UsageError, one_line
from ..options import Session, shared_options
from ..render import Output, age_seconds

if TYPE_CHECKING:
    from store import Store

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATE_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}
DEAD_LETTER_QUEUES = ("dead-letter", "dead-letter-tx")


@dataclass
class Threshold:
    warn: float | None
    crit: float | None

    def state(self, value: float) -> int:
        if self.crit is not None and value > self.crit:
            return CRITICAL
        if self.warn is not None and value > self.warn:
            return WARNING
        return OK


@dataclass
class Check:
    label: str
    value: float
    unit: str  # "" for a count, "s", "%"
    threshold: Threshold

    @property
    def state(self) -> int:
        return self.threshold.state(self.value)

    def perfdata(self) -> str:
        warn = "" if self.threshold.warn is None else _num(self.threshold.warn)
        crit = "" if self.threshold.crit is None else _num(self.threshold.crit)
        top = ";100" if self.unit == "%" else ""
        return f"{perf_label(self.label)}={_num(self.value)}{self.unit};{warn};{crit};0{top}"


@shared_options
def health(
    s: Session,
    queues: Annotated[Optional[list[str]], typer.Argument(help="Queues to check (default: every queue but the system ones).", show_default=False)] = None,
    depth: Annotated[Optional[str], typer.Option("--depth", metavar="W:C", help="Messages in a queue: warn above W, critical above C.")] = None,
    age: Annotated[Optional[str], typer.Option("--age", metavar="W:C", help="Age of a queue's oldest message (durations, e.g. 10m:1h).")] = None,
    inflight_age: Annotated[Optional[str], typer.Option("--inflight-age", metavar="W:C", help="How long a queue's oldest in-flight message has been held (durations).")] = None,
    dead_letters: Annotated[Optional[str], typer.Option("--dead-letters", metavar="W:C", help="Messages in the dead-letter queues.")] = None,
    quota_pct: Annotated[Optional[str], typer.Option("--quota-pct", metavar="W:C", help="Bytes in a queue with a quota, in % of it.")] = None,
) -> None:
    """A Nagios / Icinga check: one line in the plugin format with performance data; exit 0 OK,
    1 WARNING, 2 CRITICAL, 3 UNKNOWN.

    A value above W warns and above C is critical; each of W and C may be left out (`:100`,
    `50:`), and a check not asked for only reports its value. -o json prints the same as an
    object with each check's value, thresholds and state.

    \b
    Examples:
      mqcli health orders payments --depth 1000:10000 --age 10m:1h --dead-letters 1:100
      mqcli health --inflight-age 5m:30m --quota-pct 80:95 -o json
    """
    as_json = s.out.mode in ("json", "jsonl")
    try:
        limits = {
            "depth": _threshold(depth, "--depth", False), "age": _threshold(age, "--age", True),
            "inflight_age": _threshold(inflight_age, "--inflight-age", True),
            "dead_letters": _threshold(dead_letters, "--dead-letters", False),
            "quota_pct": _threshold(quota_pct, "--quota-pct", False),
        }
        with s.open(reading=True) as st:
            stats = {q.name: q for q in st.stats()}
            named = None if not queues else _stored_names(st, queues)
        checks = _checks(stats, named, limits, int(time.time() * 1_000_000))
    except Exception as exc:  # the plugin API: whatever stops the check is UNKNOWN
        text = getattr(exc, "message", None) or str(exc)
        _finish(as_json, UNKNOWN, text, [], s.out)
        return
    worst = max((c.state for c in checks), default=OK)
    bad = [c for c in checks if c.state == worst and worst != OK]
    what = ", ".join(f"{c.label} {_num(c.value)}{c.unit}" for c in bad) if bad else \
        _queues_ok(checks)
    _finish(as_json, worst, what, checks, s.out)


def _stored_names(st: Store, names: list[str]) -> list[str]:
    """The stored names of the queues named (a name or a format name, wherever a queue is
    named: PUBLIC=, DIRECT=OS:.\\q, q;JOURNAL); UsageError naming those the store lacks."""
    from store.errors import BadData, QueueNotAvailable

    found, missing = [], []
    for name in names:
        try:
            found.append(st.queue_info(name).name)
        except (QueueNotAvailable, BadData):
            missing.append(name)
    if missing:
        raise UsageError(f"no queue {', '.join(map(repr, missing))} in the store")
    return found


def _checks(stats: dict[str, Any], names: list[str] | None, limits: dict[str, Threshold], now_us: int) -> list[Check]:
    if names:
        chosen = [q for q in stats.values() if q.name in names]
    else:
        chosen = [q for q in stats.values() if not q.system]
    checks = []
    for q in chosen:
        checks.append(Check(f"{q.name} depth", q.depth, "", limits["depth"]))
        oldest = 0.0 if q.oldest_put_time is None else age_seconds(q.oldest_put_time, now_us)
        checks.append(Check(f"{q.name} age", oldest, "s", limits["age"]))
        held = 0.0 if q.oldest_in_flight is None else age_seconds(q.oldest_in_flight, now_us)
        checks.append(Check(f"{q.name} inflight age", held, "s", limits["inflight_age"]))
        if q.quota:
            checks.append(Check(f"{q.name} quota", round(100 * q.bytes / q.quota, 2), "%", limits["quota_pct"]))
    dead = sum(stats[n].depth for n in DEAD_LETTER_QUEUES if n in stats)
    checks.append(Check("dead letters", dead, "", limits["dead_letters"]))
    return checks


def _queues_ok(checks: list[Check]) -> str:
    n = len([c for c in checks if c.label.endswith(" depth")])
    return f"{n} queue{'' if n == 1 else 's'}"


def usage_error(message: str, as_json: bool) -> int:
    """A health command line that cannot run as written (an unknown option, a missing value, a
    bad -o or --store): UNKNOWN, in the plugin format (-o json: the usual object), not mqcli's
    usage error, whose exit 2 a monitoring system reads as CRITICAL. Returns the exit code."""
    _write(as_json, UNKNOWN, message, [], Output("json" if as_json else "text"))
    return UNKNOWN


def _finish(as_json: bool, state: int, what: str, checks: list[Check], out: Output) -> None:
    _write(as_json, state, what, checks, out)
    if state:
        raise typer.Exit(state)


def _write(as_json: bool, state: int, what: str, checks: list[Check], out: Output) -> None:
    name = STATE_NAMES[state]
    if as_json:
        out.document({"state": name, "exit": state, "summary": what, "checks": [
            {"label": c.label, "value": c.value, "unit": c.unit, "warn": c.threshold.warn,
             "crit": c.threshold.crit, "state": STATE_NAMES[c.state]} for c in checks]})
    else:
        perf = " ".join(c.perfdata() for c in checks)
        # one line, and no `|` but the one before the performance data (the plugin format): a
        # queue name or an error may quote what a user typed
        what = one_line(what).replace("|", "¦")
        sys.stdout.write(f"MQCLI {name} - {what}" + (f" | {perf}" if perf else "") + "\n")
        sys.stdout.flush()


def _threshold(text: str | None, option: str, durations: bool) -> Threshold:
    if text is None:
        return Threshold(None, None)
    warn, sep, crit = text.partition(":")
    if not sep:
        raise UsageError(f"{option} {text!r}: give W:C (either may be left out, e.g. 100:1000, :1000)")

    def value(part: str) -> float | None:
        part = part.strip()
        if not part:
            return None
        if durations:
            return parse_duration(part, allow_forever=False, what=f"{option} threshold")
        try:
            number = float(part)
        except ValueError:
            raise UsageError(f"{option} {text!r}: {part!r} is not a number") from None
        if not math.isfinite(number) or number < 0:
            raise UsageError(f"{option} {text!r}: thresholds are finite numbers ≥ 0")
        return number
    t = Threshold(value(warn), value(crit))
    if t.warn is not None and t.crit is not None and t.warn > t.crit:
        raise UsageError(f"{option} {text!r}: the warning threshold is above the critical one")
    return t


def _num(value: float) -> str:
    """A number as performance data gives it: plain decimal notation (no exponent, every digit:
    the threshold shown is the one in force), a whole number without a point."""
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")  # repr: the shortest text that reads back as value


def perf_label(name: str) -> str:
    """A performance-data label: quoted, `=` (which would end the label) made `_`, and a
    single quote doubled, as the plugin guidelines say."""
    return "'" + name.replace("=", "_").replace("'", "''") + "'"


def register(app: typer.Typer) -> None:
    app.command()(health)
