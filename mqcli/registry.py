"""Where every mqcli command is registered: one map, name -> (module, attribute, help line).

A process pays only for the command it runs (docs/design.md#command-line): `LazyGroup`, the root
click group, lists the commands and their one-line help from the map, and imports a command's
module only when that command (or group) is run or its --help shown. The doc generator and
`mqcli batch` get the whole tree, built from the same map (`mqcli.app.full_command`).

A new command is one line here: the module under mqcli/commands/, the attribute (a function
for a command, a `typer.Typer` for a group of commands) and the first sentence of its help, as
`mqcli --help` lists it (tests/test_registry.py checks all three against the module).
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

import click
from typer.core import TyperGroup


class Entry(NamedTuple):
    module: str      # under mqcli.commands
    attribute: str   # a command function, or a typer.Typer for a group
    help: str        # the first sentence of the help text


# in the order `mqcli --help` lists them: Typer puts commands before groups
COMMANDS: dict[str, Entry] = {
    "init": Entry("qmgr", "init", "Create a store (one queue manager), with its dead-letter queues."),
    "info": Entry("qmgr", "info", "Show the queue manager: identity, usage, quota, throttle."),
    "check": Entry("qmgr", "check", "Verify that every record and index entry of the store agree (exit 11 if not)."),
    "backup": Entry("qmgr", "backup", "Copy the store, compacted and consistent, while other processes keep using it."),
    "sweep": Entry("qmgr", "sweep", "Expire messages past their ttl, undo lapsed leases, abort timed-out "
                   "transactions (also done on every write)."),
    "stats": Entry("qmgr", "stats", "Per queue: depth by state and priority, bytes, oldest message, last put and get."),
    "put": Entry("message", "put", "Put a message (or many) on a queue; prints each new msg_id."),
    "get": Entry("message", "get", "Get (destructively) the next message; with --confirm-id, a two-phase get."),
    "browse": Entry("message", "browse", "Show messages in queue order without taking them; --lock locks them "
                    "(MQe browseWithLock)."),
    "unlock": Entry("message", "unlock", "Unlock the messages of a browse with lock (MQe unlockMessage)."),
    "confirm": Entry("message", "confirm", "Confirm the put or get pending under a confirm id (MQe confirm)."),
    "undo": Entry("message", "undo", "Undo a pending put or get (--confirm-id) or a browse lock (--lock-id); "
                  "operators can undo everything in flight (--all, --older-than)."),
    "delete": Entry("message", "delete", "Delete one message by msg_id (MQe deleteMessage); a locked one needs "
                    "its --lock-id."),
    "move": Entry("message", "move", "Move (or copy) available messages to another queue, atomically per batch "
                  "of 1,000."),
    "inflight": Entry("message", "inflight", "Every locked, unconfirmed or transactional message: ids, state, age, "
                      "lease left."),
    "export": Entry("transfer", "export", "Dump queues as JSONL, one message a line with every field (any state), "
                    "in queue order."),
    "import": Entry("transfer", "import_", "Load a JSONL dump: every record back on its queue (created if missing), "
                    "ids kept."),
    "redrive": Entry("deadletter", "redrive", "Move dead letters back to their original queues (or --to QUEUE), "
                     "fresh, atomically per batch of 1,000."),
    "consume": Entry("consume", "consume", "Run a command for each message of a queue; exit 0 confirms it, "
                     "anything else undoes it."),
    "batch": Entry("batch", "batch", "Run mqcli commands from a file, one per line, in one process against one "
                   "open store."),
    "health": Entry("health", "health", "A Nagios / Icinga check: one line in the plugin format with performance "
                    "data; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."),
    "listen": Entry("channel", "listen", "Receive messages from other queue managers into this store until stopped."),
    "dispatch": Entry("channel", "dispatch", "Send the outgoing queues to their links' listeners."),
    "completion": Entry("completion", "completion", "Print the completion script of a shell (queue names, "
                        "transactions and links come from the store)."),
    "snapshot": Entry("snapshot", "snapshot", "Write a snapshot of the store into a new subdirectory of DIR, for "
                      "`mqcli analyze --snapshots DIR` on any host."),
    "bench": Entry("bench", "bench", "Measure throughput and latency with real producer and consumer processes."),
    "qmgr": Entry("qmgr", "qmgr_app", "Queue manager settings."),
    "queue": Entry("queue", "app", "Queue administration."),
    "tx": Entry("tx", "app", "Transactions that span several invocations (MSMQ transactions)."),
    "trace": Entry("trace", "app", "Trace reports (MSMQ's PROPID_M_TRACE): decode labels and bodies, list a "
                   "report queue, follow a route."),
    "link": Entry("link", "app", "Links to other queue managers, for store-and-forward."),
    "outgoing": Entry("outgoing", "app", "Outgoing queues: what waits to be sent to other queue managers, and why."),
    "analyze": Entry("analyze", "app", "The data pipeline on PySpark (needs `pip install 'mqcli[spark]'`): store "
                     "health and trace-report routes, over stores or Parquet exports."),
}


def target(name: str) -> Any:
    """The function or typer.Typer registered as `name` (imports its module)."""
    entry = COMMANDS[name]
    return getattr(importlib.import_module(f"mqcli.commands.{entry.module}"), entry.attribute)


def add_to(app: Any, name: str) -> None:
    """Register `name` on a typer.Typer, as a command or a group."""
    import typer

    obj = target(name)
    if isinstance(obj, typer.Typer):
        app.add_typer(obj, name=name)
    else:
        app.command(name)(obj)


def build(name: str, parent: TyperGroup) -> click.Command:
    """The click command (or group) `name`, built by Typer as in the whole tree: with the
    parent's markup mode and exception settings."""
    import typer
    import typer.main

    scratch = typer.Typer(rich_markup_mode=parent.rich_markup_mode, add_completion=False)
    scratch.callback()(_nothing)  # a group, whatever it holds
    add_to(scratch, name)
    group = typer.main.get_command(scratch)
    assert isinstance(group, click.Group)
    return group.commands[name]


def _nothing() -> None:
    """A scratch group's callback (never run)."""


class LazyGroup(TyperGroup):
    """The root group: its commands come from COMMANDS, each built on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS) + [name for name in self.commands if name not in COMMANDS]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = build(cmd_name, self)
        return self.commands.get(cmd_name)

    def load_all(self) -> LazyGroup:
        """Build every command now (the whole tree, for the doc generator and `batch`)."""
        for name in COMMANDS:
            self.get_command(click.Context(self), name)
        return self

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return click.Group.resolve_command(self, ctx, args)
        except click.UsageError as exc:
            if self.suggest_commands and args:  # as TyperGroup does, over every command
                from difflib import get_close_matches

                matches = get_close_matches(args[0], self.list_commands(ctx))
                if matches:
                    hint = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
                    raise click.UsageError(hint, exc.ctx) from None
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from the help lines of the map: no command module is imported."""
        rows = [(name, click.Command(name, help=COMMANDS[name].help)) for name in COMMANDS]
        rows += [(name, cmd) for name, cmd in self.commands.items() if name not in COMMANDS and not cmd.hidden]
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])
