"""`mqcli` and `python -m mqcli`."""

import sys


def main(fast: bool = True) -> None:
    """The entry point; fast=False runs every command line through the Typer app (the tests
    compare the two paths)."""
    if sys.stdin is None or sys.stdout is None or sys.stderr is None:
        _closed_streams()
    if sys.argv[1:2] == ["__complete"]:  # a shell completing a name: nothing of the app is loaded
        from .complete import main as complete

        sys.exit(complete(sys.argv[2:]))
    if sys.argv[1:] == ["--version"]:  # before anything of the app loads (docs/design.md#command-line)
        from . import __version__

        sys.stdout.write(f"mqcli {__version__}\n")
        sys.exit(0)
    try:
        from . import signals  # first: SIGTERM is an interruption from here on

        signals.install()
        with signals.deferred():  # a signal inside an extension's init (orjson's) crashes it: acted on after
            # put, get and browse without Typer when their command line is a plain one (mqcli/fastpath.py)
            from .fastpath import prepared

            command = prepared(sys.argv[1:]) if fast else None
            if command is None:
                from .app import run

                command = run
        code = command()
    except KeyboardInterrupt as exc:
        code = _interrupted(exc)
    _quiet_exit()
    _forget_escaped_interrupts()
    sys.exit(code)


def _forget_escaped_interrupts() -> None:
    """Exit with `code` even after a Ctrl-C that we caught: under `python -m`, CPython ends a
    process by SIGINT instead of its exit code when a KeyboardInterrupt left an exec of a
    string (a dataclass being made while a module imported), caught or not. The flag it keeps
    for that is cleared at the start of every such exec."""
    exec("")


def _closed_streams() -> None:
    """mqcli started with stdin, stdout or stderr closed (`mqcli get q >&-`; Python then sets
    the stream to None): each descriptor gets something, so that no file the command opens
    (the store's data.mdb) takes its number and receives what is written there. A closed stdin
    reads as empty (/dev/null); a closed stdout is a pipe with no reader, so that writing to it
    is the output closed (exit 141, and a get takes nothing), as for `mqcli get q | true`; a
    closed stderr is /dev/null."""
    import os

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        if fd == 1:
            read, write = os.pipe()
            os.dup2(write, fd)
            for end in (read, write):
                if end != fd:
                    os.close(end)
        else:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8",  # noqa: SIM115  # the process's own
                                errors="surrogateescape" if fd < 2 else "backslashreplace", closefd=False))


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM outside `run` (during the imports): the one-line error, no traceback."""
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C does not break the report
    from .exits import report, wants_json
    from .signals import Terminated

    return report(exc if isinstance(exc, Terminated) else KeyboardInterrupt(),
                  json_errors=wants_json(sys.argv[1:]))


def _quiet_exit() -> None:
    """The command is done and its exit code decided: a signal that comes while the
    interpreter shuts down changes neither, and prints no traceback."""
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, signal.SIG_IGN)


if __name__ == "__main__":
    main()
