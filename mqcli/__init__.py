"""The mqcli command line (Typer); see README.md#command-reference."""

__version__ = "0.1.0"
