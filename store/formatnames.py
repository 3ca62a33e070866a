"""MSMQ format names ([MS-MQMQ] 2.1, docs/design.md#queues): parse them, print them back.

Wherever a queue is named, the name may be a plain queue name or a format name:

    q                                        a local queue (store/queues.py name rules)
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
  created (docs/design.md#queues), so printing never changes their case.

Keywords are matched case-insensitively, ASCII only: `str.upper` maps some non-ASCII letters
to ASCII ones (dotless i → I), and 'PUBLıC=' must not pass for 'PUBLIC='.

Recognised and refused: DIRECT=IPX (no SPX/IPX transport here), DL= and CONNECTOR= (no
directory service). MULTICAST= parses but is never dispatched ([MS-MQQB] 3.1.7.12), nor are HTTP(S)
direct names; see `FormatName.dispatchable`.

`check_syntax` is the other door, for text that only has to *be* a format name: the `queue` of
a trace report body ([MS-MQQB] 3.1.5.8.9, whose `queue-format` is MS-MQMQ 2.1's ABNF) names a destination
that may be on any MSMQ queue manager, so it is held to MS-MQMQ's syntax, not to what this store
can resolve. It says where a name goes wrong: the 1-based column of the first character at which
no format name can continue. The two doors differ only where the store is narrower (or, for
HTTP, wider) than MS-MQMQ's ABNF; `check_syntax`'s comment lists where.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from .abnf import Scanner
from .errors import BadData, FormatNameSyntaxError
from .errors import shown as _show
from .queues import DEAD_LETTER, DEAD_LETTER_TX, MAX_NAME

Kind = Literal["local", "public", "private", "direct", "machine", "multicast"]
Protocol = Literal["os", "tcp", "http", "https"]
Suffix = Literal["journal", "deadletter", "deadxact"]

#: Longest machine name in a direct format name (MSMQ: 256 Unicode characters).
MAX_MACHINE = 256
#: What MACHINE=<this qm>;DEADLETTER and ;DEADXACT name in this store (docs/design.md#queues). A machine
#: journal (;JOURNAL) has no queue in the store.
SYSTEM_QUEUES_BY_SUFFIX: dict[str, str] = {"deadletter": DEAD_LETTER, "deadxact": DEAD_LETTER_TX}

_GUID_GROUPS = (8, 4, 4, 4, 12)  # hex digits in each '-'-separated group of a GUID
_GUID = re.compile("-".join(f"[0-9A-Fa-f]{{{n}}}" for n in _GUID_GROUPS))
_HEX = re.compile(r"[0-9A-Fa-f]{1,8}")
_PORT = re.compile(r"0|[1-9][0-9]{0,4}")
_MACHINE = re.compile(r"[A-Za-z0-9._-]+")
_QUEUE_PUNCTUATION = frozenset("._-/")
_SUFFIXES: dict[str | None, Suffix] = {
    "JOURNAL": "journal", "DEADLETTER": "deadletter", "DEADXACT": "deadxact"}
_MACHINE_SUFFIXES = ("journal", "deadletter", "deadxact")
_MACHINE_QUEUES = tuple(word.upper() for word in _MACHINE_SUFFIXES)  # JOURNAL, DEADLETTER, DEADXACT
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
        return self._text("/")

    def mqmq_text(self) -> str:
        """The name as MS-MQMQ 2.1.2's ABNF spells it, for trace report bodies ([MS-MQQB] 3.1.5.8.9,
        TraceMessage.Body: "queue = queue-format"): as str() except that an HTTP(S) name has
        "\\" after /msmq (`DIRECT=HTTP://h/msmq\\q`), where str() prints MSMQ 3.0's URL form
        (`…/msmq/q`); MSMQ accepts both."""
        return self._text("\\")

    def _text(self, http_separator: str) -> str:
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
            sep = http_separator
            head = f"DIRECT={self.protocol.upper()}://{self.address}{port}/msmq{sep}"
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
          link (docs/design.md#store-and-forward).
        - direct HTTP(S), multicast: no (never dispatched either, [MS-MQQB] 3.1.7.12).
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
        """False for the destinations [MS-MQQB] 3.1.7.12 never sends to: a multicast name, or a direct
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


# ---- MS-MQMQ 2.1 syntax, column by column -----------------------------------------------------
#
#   queue-format  = PublicName / PrivateName / DirectName / MachineName / MulticastName
#   PublicName    = "PUBLIC=" Guid [";JOURNAL"]
#   PrivateName   = "PRIVATE=" Guid "\" 1*8HEXDIG [";JOURNAL"]
#   DirectName    = "DIRECT=" Protocol ":" Address ("\PRIVATE$\" QueueName [";JOURNAL"]
#                   / "\SYSTEM$;" ("JOURNAL" / "DEADLETTER" / "DEADXACT")
#                   / "\" QueueName [";JOURNAL"])
#   MachineName   = "MACHINE=" Guid ";" ("JOURNAL" / "DEADLETTER" / "DEADXACT")
#   MulticastName = "MULTICAST=" IPv4 ":" Port     ; 224.0.0.0 - 239.255.255.255
#
# Address: OS a computer name (1*256 VCHAR but "\"), TCP an IPv4 address, HTTP/HTTPS
# "//" host [":" Port] "/MSMQ", IPX 8HEXDIG ":" 12HEXDIG. QueueName is MS-MQMQ 2.1.1's
# (1*124 of %x21 / %x23-2A / %x2D-3A / %x3C-5B / %x5D-7F), without MSMQ 4.0's subqueues
# (";JOURNAL" would be ambiguous) and with letters beyond ASCII too, because store queue
# names may hold them ("letters", store/queues.py). Keywords are ABNF strings:
# case-insensitive, ASCII letters only (RFC 5234 §2.3).
#
# Where `parse` decides otherwise, a report body keeps to this grammar, because [MS-MQQB]
# (3.1.5.8.9 Sending a Trace Message, TraceMessage.Body: "queue = queue-format",
# "The ABNF rule queue-format is as specified in [MS-MQMQ] section 2.1") says so; `parse`'s
# narrower rules are the store's (docs/design.md#queues), for names it must resolve. Accepted here, refused by
# `parse`:
#   - DIRECT=IPX:<network>:<host>\...            (parse: IPX recognised, not supported)
#   - queue names with MS-MQMQ punctuation beyond . _ - /, e.g. DIRECT=OS:qm2\a</b>c
#   - computer names and HTTP hosts of any VCHAR, e.g. DIRECT=OS:a$b\q (parse: A-Z a-z 0-9 . _ -)
#   - IPv4 octets and ports with leading zeros: DIRECT=TCP:010.0.0.1\q, MULTICAST=224.0.0.1:080
#   - a queue named PRIVATE$ or SYSTEM$ (or PRIVATE$/q after HTTP): DIRECT=OS:.\PRIVATE$,
#     DIRECT=OS:.\SYSTEM$, DIRECT=HTTP://h/MSMQ\PRIVATE$/q (parse: a private queue 'q')
# Accepted by `parse`, refused here:
#   - plain queue names (q, q;journal): a local name, not a format name
#   - HTTP(S) names with '/' after "/MSMQ" or '\' before it, MSMQ 3.0's URL form, e.g.
#     DIRECT=HTTP://h/msmq/q, the form `parse` prints (MS-MQMQ's ABNF has "/MSMQ" "\")

#: The ABNF strings of the forms, protocols and machine queues, in the order they are tried
#: (HTTPS before HTTP: the longer literal must be tried first).
_FORMS = ("PUBLIC=", "PRIVATE=", "DIRECT=", "MACHINE=", "MULTICAST=")
_SYNTAX_PROTOCOLS = ("TCP", "OS", "HTTPS", "HTTP", "IPX")
_HEXDIGS = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")


def check_syntax(text: str, start: int = 0, stop: int | None = None) -> str:
    """Check that text[start:stop] is one format name by MS-MQMQ 2.1's ABNF and return it.

    Raises FormatNameSyntaxError at the first character, counted in the whole of `text`, at
    which no format name can continue. A name that stops short is reported at `stop`; what the
    error says it found there is the character of `text` at that place (or end of input), so a
    caller that confines the name to part of a longer text gets errors in that text's terms.
    Plain queue names are not format names here; `parse` is for names the store resolves.
    """
    if not isinstance(text, str):
        raise BadData(f"format name must be text, got {type(text).__name__}")
    return _QueueFormat(text, start, len(text) if stop is None else min(stop, len(text))).queue_format()


def is_format_name_char(c: str) -> bool:
    """Whether c may appear somewhere in a format name: %x21-7F, or a letter or digit beyond
    ASCII (store queue names may hold them). SP, controls and other text end a name."""
    return "\x21" <= c <= "\x7f" or (c >= "\x80" and c.isalnum())


def _queue_name_char(c: str) -> bool:
    # MS-MQMQ 2.1.1 QueueName: no SP, '"', '+', ',', ';' or '\'
    return is_format_name_char(c) and c not in '"+,;\\'


def _computer_name_char(c: str) -> bool:
    return c not in "\\\x7f" and is_format_name_char(c)


def _host_char(c: str) -> bool:
    return c not in "\\/:" and is_format_name_char(c)


class _QueueFormat(Scanner):
    """MS-MQMQ 2.1's `queue-format`, one method per rule; see `check_syntax`."""

    def error(self, column: int, detail: str, rule: str | None) -> FormatNameSyntaxError:
        return FormatNameSyntaxError(self.text, column, detail)

    # ---- the rules ---------------------------------------------------------------------

    def queue_format(self) -> str:
        start = self.pos
        form = self.choice(_FORMS, "a format name")
        if form == 0:  # PUBLIC=
            self.guid()
            self.journal()
        elif form == 1:  # PRIVATE=
            self.guid()
            self.literal("\\", "'\\'")
            self.run(_HEXDIGS.__contains__, 1, 8, "1*8HEXDIG (the queue number)")
            self.journal()
        elif form == 2:  # DIRECT=
            self.direct()
        elif form == 3:  # MACHINE=
            self.guid()
            self.literal(";", "';'")
            self.choice(_MACHINE_QUEUES, "a machine queue")
        else:  # MULTICAST=
            self.ipv4(multicast=True)
            self.literal(":", "':'")
            self.port()
        self.end("expected the end of the format name")
        return self.text[start:self.limit]

    def guid(self) -> None:
        for group, count in enumerate(_GUID_GROUPS):
            if group:
                self.literal("-", "'-'")
            self.run(_HEXDIGS.__contains__, count, count, "HEXDIG", counted=True)

    def journal(self) -> None:
        if self.peek() == ";":
            self.literal(";JOURNAL")

    def direct(self) -> None:
        protocol = _SYNTAX_PROTOCOLS[self.choice(_SYNTAX_PROTOCOLS, "a protocol")]
        self.literal(":", "':'")
        if protocol == "TCP":
            self.ipv4(multicast=False)
        elif protocol == "OS":
            self.run(_computer_name_char, 1, MAX_MACHINE, "a computer name")
        elif protocol == "IPX":
            self.run(_HEXDIGS.__contains__, 8, 8, "8HEXDIG (the IPX network)")
            self.literal(":", "':'")
            self.run(_HEXDIGS.__contains__, 12, 12, "12HEXDIG (the IPX host)")
        else:  # HTTP, HTTPS
            self.literal("//", "'//'")
            self.run(_host_char, 1, MAX_MACHINE, "a host")
            if self.peek() == ":":
                self.pos += 1
                self.port()
            self.literal("/MSMQ")
        self.literal("\\", "'\\'")
        if self.lookahead("PRIVATE$\\"):
            self.pos += 9
        elif self.lookahead("SYSTEM$;"):
            self.pos += 8
            self.choice(_MACHINE_QUEUES, "a machine queue")
            return
        self.run(_queue_name_char, 1, MAX_NAME, "a queue name")
        self.journal()

    def ipv4(self, *, multicast: bool) -> None:
        for i in range(4):
            if i:
                self.literal(".", "'.'")
            start = self.pos
            octet = int(self.run(_DIGITS.__contains__, 1, 3, "1*3DIGIT"))
            if octet > 255 or (multicast and i == 0 and not 224 <= octet <= 239):
                self.fail(f"{octet} is out of range "
                          + ("(224-239: a class D multicast address)" if multicast and i == 0
                             else "(0-255)"), start)

    def port(self) -> None:
        start = self.pos
        if int(self.run(_DIGITS.__contains__, 1, 5, "a port (1*5DIGIT)")) > 65535:
            self.fail(f"port {self.text[start:self.pos]} is out of range (0-65535)", start)


def _keyword(text: str) -> str | None:
    """Upper-cased text for keyword matching, or None when it is not ASCII."""
    return text.upper() if text.isascii() else None
