"""Links to other queue managers (docs/design.md#store-and-forward) and their pre-shared key files.

A link NAME is the queue manager that `DIRECT=OS:NAME\\queue` names; its HOST:PORT is the next
hop that accepts messages for it: the queue manager itself, or one that forwards (A can reach C
through B with `link add C <B's address>`). A DIRECT=TCP:<ip>\\queue name is sent over the link
whose host is that address.

Key files hold 32 random bytes as 64 hex digits and a newline, mode 0600. A key file others may
read is refused: whoever reads it can impersonate both ends.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from .arguments import is_decimal
from .errors import BadData, InvalidArgument, StorePermission
from .errors import LinkExists, LinkNotFound  # noqa: F401 (importable from here too)
from .ownership import open_checked, require_owner
from .keys import queue_key

KEY_BYTES = 32
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, slots=True)
class LinkInfo:
    """A link to another queue manager: its name, address and key file."""

    name: str
    host: str
    port: int
    key_file: str
    created: int
    peer_guid: str | None = None  # the next hop's queue manager GUID, learnt at the last handshake

    @property
    def address(self) -> str:
        """HOST:PORT, an IPv6 host in brackets ([::1]:5000, as `listen` prints its own)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "address": self.address}


def validate_name(name: str) -> str:
    """A link is named like the machine in a DIRECT=OS: format name (store/formatnames.py)."""
    if not isinstance(name, str) or not 1 <= len(name) <= 256 or not set(name) <= _NAME_CHARS:
        raise InvalidArgument(f"link name {name!r} must be 1 to 256 ASCII letters, digits and . _ - "
                              "(the queue manager name DIRECT=OS:NAME\\queue uses)")
    return name


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets: [::1]:7000)."""
    host, colon, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not is_decimal(port) or not 1 <= int(port) <= 65535:
        raise InvalidArgument(f"address {text!r} is not HOST:PORT with a port 1-65535")
    if any(c.isspace() for c in host):
        raise InvalidArgument(f"address {text!r} has a space in its host")
    return host, int(port)


def encode(link: LinkInfo) -> bytes:
    return json.dumps(asdict(link), separators=(",", ":")).encode()


def decode(raw: bytes) -> LinkInfo:
    try:
        return LinkInfo(**json.loads(raw))
    except (ValueError, TypeError) as exc:
        raise BadData(f"malformed link record: {exc}") from None


def key(name: str) -> bytes:
    return queue_key(name)


# ---- key files ----------------------------------------------------------------------------------

def generate_key_file(path: str | os.PathLike[str]) -> Path:
    """Write a new key file (0600, never over an existing file)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise InvalidArgument(f"{path} exists; a key file is never overwritten (remove it first)") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # whatever the umask
        import secrets  # only keygen draws a key: hmac and hashlib are not loaded otherwise

        f.write(secrets.token_hex(KEY_BYTES) + "\n")
    return path


# A key file holds 64 hex digits and a line end; a little room for a CRLF or spaces around.
KEY_FILE_MAX_BYTES = 256


def load_key(path: str | os.PathLike[str]) -> bytes:
    """The 32-byte key of a key file. Refused, before a byte is read: a symbolic link, a file
    that is not regular (exit 12), one another user owns (store/ownership.py: they could swap
    the key), one others may read (exit 11), one larger than a key file is (exit 12); then a
    malformed one. Checked with fstat on the opened file, not by its path, and no more than
    KEY_FILE_MAX_BYTES + 1 bytes are read: `--key-file /dev/zero` or a multi-GB file given by
    mistake is not read whole. O_NONBLOCK: opening a FIFO nobody writes to must not hang."""
    path = Path(path)
    try:
        fd, info = open_checked(path, os.O_RDONLY | os.O_NONBLOCK, f"key file {path}")
    except FileNotFoundError:
        raise InvalidArgument(f"key file {path} does not exist (make one with `mqcli link keygen {path}`)") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read key file {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(info.st_mode):
            raise BadData(f"key file {path} is not a regular file (make one with `mqcli link keygen FILE`)")
        require_owner(info, f"key file {path}")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise StorePermission(f"key file {path} is readable by others (mode {mode:o}); run `chmod 600 {path}`")
        if info.st_size > KEY_FILE_MAX_BYTES:
            raise BadData(f"key file {path} is {info.st_size} bytes; a key file holds {KEY_BYTES * 2} hex "
                          "digits (make one with `mqcli link keygen FILE`)")
        data = os.read(fd, KEY_FILE_MAX_BYTES + 1)  # a regular file: no EAGAIN, one read
    except OSError as exc:
        raise InvalidArgument(f"cannot read key file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        raw = bytes.fromhex(data.decode("ascii").strip()) if len(data) <= KEY_FILE_MAX_BYTES else b""
    except (UnicodeDecodeError, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise BadData(f"key file {path} does not hold {KEY_BYTES * 2} hex digits (make one with "
                      "`mqcli link keygen FILE`)")
    return raw
