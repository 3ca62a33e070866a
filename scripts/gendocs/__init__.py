"""The jobs of scripts/gen_docs.py, one module each.

    tree.py     the mqcli command tree, read from the Typer app, and help text split into blocks
    man.py      man(7) pages: one per command and mqcli(1), whose EXIT STATUS comes from
                store/exit_codes.py
    bash.py     the bash completion script
    zsh.py      the zsh completion script
    fish.py     the fish completion script
    readme.py   the generated parts of README.md (the exit-code table)
    helptext.py mqcli/help_text.py, the --help of put, get and browse for mqcli/fastpath.py

Each job is a function from the command tree (or the exit-code table) to the text of a file;
scripts/gen_docs.py writes them or checks them (`--check`).
"""

PROG = "mqcli"
GENERATED_BY = "scripts/gen_docs.py"
REGENERATE = "python scripts/gen_docs.py"
