"""Links to other queue managers: link add/list/remove/keygen (docs/design.md#store-and-forward)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from store import links

from ..options import Session, shared_options
from ..render import iso

app = typer.Typer(
    help="Links to other queue managers, for store-and-forward.\n\n\b\nExample:\n"
         "  mqcli link keygen qm2.key\n"
         "  mqcli link add qm2 10.0.0.2:7000 --key-file qm2.key\n"
         "  mqcli put 'DIRECT=OS:qm2\\orders' hello && mqcli dispatch --once",
    no_args_is_help=True, rich_markup_mode=None)

NameArg = Annotated[str, typer.Argument(metavar="NAME", show_default=False,
                                        help="The queue manager DIRECT=OS:NAME\\queue names.")]
COLUMNS = [("name", "link"), ("address", "address"), ("key_file", "key file"), ("peer_guid", "next hop"),
           ("created", "created")]


def link_doc(link: links.LinkInfo) -> dict:
    d = link.to_dict()
    d["created"] = iso(link.created)
    return d


@app.command("add")
@shared_options
def add(
    s: Session, name: NameArg,
    address: Annotated[str, typer.Argument(metavar="HOST:PORT", show_default=False,
                                           help="Where the next hop toward NAME listens (`mqcli listen`).")],
    key_file: Annotated[Path, typer.Option("--key-file", help="The pre-shared key both ends hold (`mqcli link keygen`).",
                                           show_default=False)],
) -> None:
    """Register a link: messages put to DIRECT=OS:NAME\\queue go to HOST:PORT.

    NAME is the destination queue manager; HOST:PORT is the next hop that accepts messages for
    it (NAME itself, or a queue manager that forwards). A DIRECT=TCP:<ip>\\queue name goes over
    the link whose host is that address. The key file must be mode 0600.

    \b
    Example:
      mqcli link add qm2 127.0.0.1:7000 --key-file qm2.key
    """
    with s.open() as st:
        link = st.add_link(name, address, str(key_file))
    s.out.document(link_doc(link))


@app.command("list")
@shared_options
def list_(s: Session) -> None:
    """List the links.

    \b
    Example:
      mqcli link list -o json
    """
    with s.open(reading=True) as st:
        rows = [link_doc(link) for link in st.links()]
    s.out.table(rows, COLUMNS)


@app.command("remove")
@shared_options
def remove(s: Session, name: NameArg) -> None:
    """Remove a link; its outgoing queues keep their messages until a link takes them again.

    \b
    Example:
      mqcli link remove qm2
    """
    with s.open() as st:
        link = st.remove_link(name)
    s.out.document(link_doc(link))


@app.command("keygen")
@shared_options(store=False)
def keygen(
    s: Session,
    file: Annotated[Path, typer.Argument(metavar="FILE", show_default=False, help="The key file to create.")],
) -> None:
    """Write a new pre-shared key file (32 random bytes in hex, mode 0600; never overwrites).

    Copy it to the other queue manager by a safe channel; both ends use the same file.

    \b
    Example:
      mqcli link keygen qm2.key
    """
    path = links.generate_key_file(file)
    s.out.document({"key_file": str(path), "mode": "0600"})
