"""`mqcli completion bash|zsh|fish`: print the shell's completion script.

The scripts are generated files (completions/, by scripts/gen_docs.py); `pip install` puts them
where each shell's completion system looks under the environment's prefix (pyproject.toml's
data-files), and a checkout has them beside the package. They complete commands and options
themselves and ask `mqcli __complete` (mqcli/complete.py) for the names a store holds."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path
from typing import Annotated

import click
import typer

from ..exits import ExitCode, Failed, Status
from ..options import Session, shared_options

#: shell -> (the script's file name, the directory under share/ that the shell searches)
SCRIPTS = {
    "bash": ("mqcli.bash", "bash-completion/completions"),
    "zsh": ("_mqcli", "zsh/site-functions"),
    "fish": ("mqcli.fish", "fish/vendor_completions.d"),
}


def script_path(shell: str) -> Path | None:
    """The shell's script: a checkout's completions/, else where `pip install` put it."""
    name, share = SCRIPTS[shell]
    places = [Path(__file__).resolve().parents[2] / "completions" / name]
    for scheme in sorted({sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user")}):
        places.append(Path(sysconfig.get_path("data", scheme)) / "share" / share / name)
    return next((p for p in places if p.is_file()), None)


@shared_options(store=False)
def completion(
    s: Session,
    shell: Annotated[str, typer.Argument(click_type=click.Choice(sorted(SCRIPTS)), metavar="SHELL", show_default=False,
                                         help="The shell: bash, zsh or fish.")],
) -> None:
    """Print the completion script of a shell (queue names, transactions and links come from the store).

    \b
    Example:
      mqcli completion bash > ~/.local/share/bash-completion/completions/mqcli
      mqcli completion zsh > ~/.zfunc/_mqcli     # a directory of $fpath, before compinit
      mqcli completion fish > ~/.config/fish/completions/mqcli.fish
    """
    path = script_path(shell)
    if path is None:
        raise Failed(ExitCode.INTERNAL, Status.INTERNAL,
                     f"the {shell} completion script is not installed with this mqcli ({SCRIPTS[shell][0]})")
    sys.stdout.write(path.read_text(encoding="utf-8"))


def register(app: typer.Typer) -> None:
    app.command()(completion)
