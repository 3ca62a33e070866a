"""The mqcli command line (Typer); see SPEC §6."""

__version__ = "0.1.0"
