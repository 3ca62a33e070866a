"""MSMQ format names (SPEC §3, MS-MQMQ 2.1): parse them, print them back.

Wherever a queue is named, the name may be a plain queue name or a format name:

    q                                        a local queue (SPEC §3 name rules)
    q;journal                                its journal (the store's NAME;journal)
    PUBLIC=<queue-guid>[;JOURNAL]            MS-MQMQ 2.1.3
    PRIVATE=<qm-guid>\\<hex number>[;JOURNAL] MS-MQMQ 2.1.4
    DIRECT=OS:<machine>\\<queue>[;JOURNAL]    MS-MQMQ 2.1.2; also TCP:<IPv4 address>
    DIRECT=OS:<machine>\\PRIVATE$\\<queue>[;JOURNAL]
    DIRECT=OS:<machine>\\SYSTEM$;(JOURNAL|DEADLETTER|DEADXACT)
    DIRECT=HTTP://<host>[:<port>]/msmq/[PRIVATE$/]<queue>[;JOURNAL]   and HTTPS
    MACHINE=<qm-guid>;(JOURNAL|DEADLETTER|DEADXACT)                  MS-MQMQ 2.1.6
    MULTICAST=<IPv4 multicast address>:<port>                        MS-MQMQ 2.1.6

`parse` is the only door: it validates every part and raises `BadData` (exit 12) naming the
part that is wrong. `str(fn)` prints the canonical form, and parse→print is the identity on
canonical text. Canonical means:

- keywords upper-case as MS-MQMQ writes them (PUBLIC=, DIRECT=, OS, TCP, HTTP, HTTPS,
  PRIVATE$, SYSTEM$, ;JOURNAL, ;DEADLETTER, ;DEADXACT); the HTTP path segment `msmq`
  lower-case, as MSMQ's own examples write it, and `/` as the separator after it;
- GUIDs lower-case, as the store makes them (`str(uuid4())`);
- the private queue number as 8 lower-case hex digits, zero-padded (MS-MQMQ allows 1 to 8);
- a local journal as `NAME;journal`, the name the store gives it (`queues.journal_name`);
- queue names, machine names and hosts as written: names are case-insensitive but shown as
  created (SPEC §3), so printing never changes their case.

Keywords are matched case-insensitively, ASCII only: `str.upper` maps some non-ASCII letters
to ASCII ones (dotless i → I), and 'PUBLıC=' must not pass for 'PUBLIC='.

Recognised and refused: DIRECT=IPX (no SPX/IPX transport here), DL= and CONNECTOR= (no
directory service). MULTICAST= parses but is never dispatched (seed 003), nor are HTTP(S)
direct names; see `FormatName.dispatchable`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from .errors import BadData
from .queues import DEAD_LETTER, DEAD_LETTER_TX, MAX_NAME

Kind = Literal["local", "public", "private", "direct", "machine", "multicast"]
Protocol = Literal["os", "tcp", "http", "https"]
Suffix = Literal["journal", "deadletter", "deadxact"]

#: Longest machine name in a direct format name (MSMQ: 256 Unicode characters).
MAX_MACHINE = 256
#: What MACHINE=<this qm>;DEADLETTER and ;DEADXACT name in this store (SPEC §3). A machine
#: journal (;JOURNAL) has no queue in the store.
SYSTEM_QUEUES_BY_SUFFIX: dict[str, str] = {"deadletter": DEAD_LETTER, "deadxact": DEAD_LETTER_TX}

_GUID = re.compile(r"[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,8}")
_PORT = re.compile(r"0|[1-9][0-9]{0,4}")
_MACHINE = re.compile(r"[A-Za-z0-9._-]+")
_QUEUE_PUNCTUATION = frozenset("._-/")
_SUFFIXES: dict[str | None, Suffix] = {
    "JOURNAL": "journal", "DEADLETTER": "deadletter", "DEADXACT": "deadxact"}
_MACHINE_SUFFIXES = ("journal", "deadletter", "deadxact")
_PROTOCOLS: dict[str | None, Protocol] = {
    "OS": "os", "TCP": "tcp", "HTTP": "http", "HTTPS": "https"}


@dataclass(frozen=True, slots=True)
class FormatName:
    """One parsed format name. Which fields are set depends on `kind`:

    - local: queue, suffix (None or "journal")
    - public: guid (the queue's GUID), suffix (None or "journal")
    - private: qm_guid, queue_number, suffix (None or "journal")
    - direct: protocol, address, and either queue (+ private for PRIVATE$, suffix None or
      "journal") or, for SYSTEM$, queue None and suffix "journal"/"deadletter"/"deadxact".
      address is a machine name or "." (os), an IPv4 address (tcp), or a host (http/https,
      with the URL's port, if any, in port)
    - machine: qm_guid, suffix (always set)
    - multicast: address (an IPv4 multicast address), port

    Build these with `parse`; the constructor does not validate. Equality compares fields as
    written, so names differing only in case are unequal here; the store's lookups fold case.
    """

    kind: Kind
    guid: str | None = None
    qm_guid: str | None = None
    queue_number: int | None = None
    protocol: Protocol | None = None
    address: str | None = None
    port: int | None = None
    queue: str | None = None
    private: bool = False
    suffix: Suffix | None = None

    def __str__(self) -> str:
        tail = f";{self.suffix.upper()}" if self.suffix else ""
        if self.kind == "local":
            return f"{self.queue};journal" if self.suffix else f"{self.queue}"
        if self.kind == "public":
            return f"PUBLIC={self.guid}{tail}"
        if self.kind == "private":
            return f"PRIVATE={self.qm_guid}\\{self.queue_number:08x}{tail}"
        if self.kind == "machine":
            return f"MACHINE={self.qm_guid}{tail}"
        if self.kind == "multicast":
            return f"MULTICAST={self.address}:{self.port}"
        assert self.protocol is not None
        if self.protocol in ("http", "https"):
            port = f":{self.port}" if self.port is not None else ""
            head, sep = f"DIRECT={self.protocol.upper()}://{self.address}{port}/msmq/", "/"
        else:
            head, sep = f"DIRECT={self.protocol.upper()}:{self.address}\\", "\\"
        if self.queue is None:
            return f"{head}SYSTEM${tail}"
        return f"{head}{'PRIVATE$' + sep if self.private else ''}{self.queue}{tail}"

    def is_local(self, qm_name: str, qm_guid: str) -> bool:
        """Does this name address a queue of the queue manager named qm_name with qm_guid?

        - local: yes.
        - public: yes. There is no directory service, so a queue GUID can only be looked up
          in this store (which may then find no such queue).
        - private, machine: when the GUID is qm_guid (case-insensitive).
        - direct OS: when the machine is "." or qm_name (case-insensitive).
        - direct TCP: no, even for a loopback address: two queue managers on one host are
          told apart by port, which a TCP direct name lacks; the caller matches it to a
          link (SPEC §8).
        - direct HTTP(S), multicast: no (never dispatched either, seed 003).
        """
        if self.kind in ("local", "public"):
            return True
        if self.kind in ("private", "machine"):
            return (self.qm_guid or "").casefold() == qm_guid.casefold()
        if self.kind == "direct" and self.protocol == "os":
            return self.address == "." or (self.address or "").casefold() == qm_name.casefold()
        return False

    @property
    def dispatchable(self) -> bool:
        """False for the destinations seed 003 never sends to: a multicast name, or a direct
        name over HTTP or HTTPS. Whether a dispatchable name is local is `is_local`'s call."""
        return not (self.kind == "multicast" or self.protocol in ("http", "https"))


def parse(text: str) -> FormatName:
    """Parse a plain queue name or an MSMQ format name; raise BadData naming the bad part."""
    if type(text) is str:
        return _parse_cached(text)
    return _Parser(text).parse()


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> FormatName:
    # FormatName is frozen, so one parse can serve every caller. A received batch names the same
    # few destinations a thousand times, and each arrival parses its name several times over
    # (store-and-forward throughput doubled with this). Errors are raised, never cached.
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, detail: str) -> BadData:
        return BadData(f"format name {_show(self.text)}: {detail}")

    def parse(self) -> FormatName:
        text = self.text
        if not isinstance(text, str):
            raise BadData(f"format name must be text, got {type(text).__name__}")
        if not text:
            raise self.fail("it is empty")
        head, eq, body = text.partition("=")
        if not eq:
            return self.local(text)
        keyword = _keyword(head)
        if keyword == "PUBLIC":
            return self.public(body)
        if keyword == "PRIVATE":
            return self.private_(body)
        if keyword == "DIRECT":
            return self.direct(body)
        if keyword == "MACHINE":
            return self.machine(body)
        if keyword == "MULTICAST":
            return self.multicast(body)
        if keyword in ("DL", "CONNECTOR"):
            raise self.fail(f"{keyword}= format names need a directory service; not supported")
        raise self.fail(f"the type {_show(head)} is not PUBLIC, PRIVATE, DIRECT, MACHINE or "
                        f"MULTICAST (a plain queue name has no '=')")

    # ---- the forms ----------------------------------------------------------------------

    def local(self, text: str) -> FormatName:
        name, semi, suffix = text.partition(";")
        if semi:
            self.suffix(suffix, ("journal",))
        return FormatName("local", queue=self.queue(name), suffix="journal" if semi else None)

    def public(self, body: str) -> FormatName:
        guid, suffix = self.split_suffix(body)
        return FormatName("public", guid=self.guid(guid, "queue GUID"),
                          suffix=self.suffix(suffix, ("journal",)))

    def private_(self, body: str) -> FormatName:
        rest, suffix = self.split_suffix(body)
        guid, slash, number = rest.partition("\\")
        if not slash:
            raise self.fail("missing '\\' between the queue manager GUID and the queue number")
        qm_guid = self.guid(guid, "queue manager GUID")
        if not _HEX.fullmatch(number):
            raise self.fail(f"the queue number {_show(number)} is not 1 to 8 hex digits")
        return FormatName("private", qm_guid=qm_guid, queue_number=int(number, 16),
                          suffix=self.suffix(suffix, ("journal",)))

    def machine(self, body: str) -> FormatName:
        guid, suffix = self.split_suffix(body)
        qm_guid = self.guid(guid, "queue manager GUID")
        if suffix is None:
            raise self.fail("MACHINE= needs ;JOURNAL, ;DEADLETTER or ;DEADXACT")
        return FormatName("machine", qm_guid=qm_guid, suffix=self.suffix(suffix, _MACHINE_SUFFIXES))

    def multicast(self, body: str) -> FormatName:
        if ";" in body:
            raise self.fail("a MULTICAST= format name takes no ;suffix")
        address, colon, port = body.rpartition(":")
        if not colon:
            raise self.fail(f"missing ':<port>' after the multicast address {_show(body)}")
        ip = self.ipv4(address, "multicast address")
        if not ip.is_multicast:
            raise self.fail(f"the multicast address {_show(address)} is not in "
                            "224.0.0.0-239.255.255.255")
        return FormatName("multicast", address=address, port=self.port(port))

    def direct(self, body: str) -> FormatName:
        name, colon, rest = body.partition(":")
        if not colon:
            raise self.fail("missing ':' after the protocol (DIRECT=OS:machine\\queue)")
        if _keyword(name) == "IPX":
            raise self.fail("the IPX protocol is recognised but not supported; use OS or TCP")
        protocol = _PROTOCOLS.get(_keyword(name))
        if protocol is None:
            raise self.fail(f"the protocol {_show(name)} is not OS, TCP, HTTP or HTTPS")
        if protocol in ("http", "https"):
            return self.direct_http(protocol, rest)
        address, slash, path = rest.partition("\\")
        if not slash:
            raise self.fail(f"missing '\\' between the address {_show(address)} and the queue")
        if protocol == "tcp":
            self.ipv4(address, "TCP address")
        else:
            self.machine_name(address, "machine name")
        return self.direct_path(protocol, address, None, path, "\\")

    def direct_http(self, protocol: Protocol, rest: str) -> FormatName:
        if not rest.startswith("//"):
            raise self.fail(f"an {protocol.upper()} address is a URL: "
                            f"DIRECT={protocol.upper()}://host/msmq/queue")
        url = rest[2:]
        end = min((i for i in (url.find("/"), url.find("\\")) if i >= 0), default=len(url))
        authority, path = url[:end], url[end:]
        host, colon, port = authority.partition(":")
        self.machine_name(host, "host")
        number = self.port(port) if colon else None
        if path[:5].lower() not in ("/msmq", "\\msmq") or path[5:6] not in ("/", "\\"):
            raise self.fail(f"the URL path {_show(path)} does not start with /msmq/ "
                            f"(DIRECT={protocol.upper()}://host/msmq/queue)")
        return self.direct_path(protocol, host, number, path[6:], "/\\")

    def direct_path(self, protocol: Protocol, address: str, port: int | None, path: str,
                    separators: str) -> FormatName:
        """What follows the address: [PRIVATE$<sep>]queue[;JOURNAL] or SYSTEM$;suffix."""
        path, suffix = self.split_suffix(path)
        if _keyword(path) == "SYSTEM$":
            if suffix is None:
                raise self.fail("SYSTEM$ needs ;JOURNAL, ;DEADLETTER or ;DEADXACT")
            return FormatName("direct", protocol=protocol, address=address, port=port,
                              suffix=self.suffix(suffix, _MACHINE_SUFFIXES))
        if _keyword(path) == "PRIVATE$":
            raise self.fail("PRIVATE$ needs a queue name after it")
        private = _keyword(path[:8]) == "PRIVATE$" and path[8:9] != "" and path[8] in separators
        return FormatName("direct", protocol=protocol, address=address, port=port,
                          queue=self.queue(path[9:] if private else path), private=private,
                          suffix=self.suffix(suffix, ("journal",)))

    # ---- the parts ----------------------------------------------------------------------

    def split_suffix(self, text: str) -> tuple[str, str | None]:
        before, semi, after = text.partition(";")
        return before, (after if semi else None)

    def suffix(self, suffix: str | None, allowed: tuple[str, ...]) -> Suffix | None:
        if suffix is None:
            return None
        word = _SUFFIXES.get(_keyword(suffix))
        if word is None or word not in allowed:
            want = " or ".join(f";{a.upper()}" for a in allowed)
            raise self.fail(f"the suffix {_show(';' + suffix)} is not {want}")
        return word

    def guid(self, text: str, what: str) -> str:
        if not _GUID.fullmatch(text):
            raise self.fail(f"the {what} {_show(text)} is not a GUID "
                            "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
        return text.lower()

    def queue(self, name: str) -> str:
        # the store's queue name rule (queues.validate_name), reported as bad data here
        if not name:
            raise self.fail("the queue name is empty")
        if len(name) > MAX_NAME:
            raise self.fail(f"the queue name is {len(name)} characters; at most {MAX_NAME}")
        bad = next((c for c in name if not (c.isalnum() or c in _QUEUE_PUNCTUATION)), None)
        if bad is not None:
            raise self.fail(f"the queue name {_show(name)} has {bad!r}; "
                            "use letters, digits and . _ - /")
        return name

    def machine_name(self, name: str, what: str) -> None:
        if not name:
            raise self.fail(f"the {what} is empty")
        if len(name) > MAX_MACHINE or not _MACHINE.fullmatch(name):
            raise self.fail(f"the {what} {_show(name)} is not 1 to {MAX_MACHINE} ASCII letters, "
                            "digits and . _ -")

    def ipv4(self, text: str, what: str) -> ipaddress.IPv4Address:
        # ipaddress refuses leading zeros ('010.0.0.1' is octal to some resolvers), so a
        # valid address prints back exactly as written
        try:
            if not text.isascii():
                raise ValueError(text)
            return ipaddress.IPv4Address(text)
        except ValueError:
            raise self.fail(f"the {what} {_show(text)} is not an IPv4 address (a.b.c.d)") from None

    def port(self, text: str) -> int:
        if not _PORT.fullmatch(text) or int(text) > 65535:
            raise self.fail(f"the port {_show(text)} is not a number 0 to 65535")
        return int(text)


def _keyword(text: str) -> str | None:
    """Upper-cased text for keyword matching, or None when it is not ASCII."""
    return text.upper() if text.isascii() else None


def _show(text: str, limit: int = 200) -> str:
    """Quote user text for an error message: as typed when printable, else repr-escaped."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"'{text}'" if text.isprintable() and "'" not in text else repr(text)
