"""`mqcli` and `python -m mqcli`."""

import sys


def main(fast: bool = True) -> None:
    """The entry point; fast=False runs every command line through the Typer app (the tests
    compare the two paths)."""
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
    sys.exit(code)


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
