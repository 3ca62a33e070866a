"""Message filters: the MQe index fields (msg_id, unique_id, lookup_id, correl_id, priority)
and a selector (`where`, store/selectors.py), one value for every operation that selects
messages. An equality on an indexed field inside the selector is used as if given on its own,
so `where="correl_id = 'x'"` reads the correl_id index, not the queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .arguments import is_int
from .errors import InvalidArgument, MessageNotFound
from .records import MAX_PRIORITY, Message, parse_msg_id, parse_unique_id

if TYPE_CHECKING:
    from .selectors import Selector


@dataclass(frozen=True, slots=True)
class Filter:
    """Which messages an operation selects: ids, correl_id, priority and a `where` selector."""

    msg_id: str | None = None
    correl_id: str | None = None
    lookup_id: int | None = None
    priority: int | None = None
    unique_id: str | None = None
    where: str | None = None
    msg_id_parts: tuple[bytes, int] | None = field(default=None, compare=False)
    unique_id_parts: tuple[bytes, int] | None = field(default=None, compare=False)
    selector: Selector | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.msg_id is None and self.unique_id is None and self.correl_id is None and self.lookup_id is None
                and self.priority is None and self.where is None):
            return  # every message: nothing to check (a consumer's get, every time)
        for name, fits, what in (("msg_id", _is_str, "a str"), ("unique_id", _is_str, "a str"),
                                 ("correl_id", _is_str, "a str"), ("lookup_id", is_int, "an int"),
                                 ("priority", is_int, "an int"), ("where", _is_str, "a str")):
            value = getattr(self, name)
            if value is not None and not fits(value):
                raise InvalidArgument(f"{name} must be {what} or None, got {type(value).__name__} {value!r:.40}")
        if self.msg_id is not None:
            object.__setattr__(self, "msg_id_parts", parse_msg_id(self.msg_id))
        if self.unique_id is not None:
            object.__setattr__(self, "unique_id_parts", parse_unique_id(self.unique_id))
        if self.priority is not None and not 0 <= self.priority <= MAX_PRIORITY:
            raise InvalidArgument(f"priority must be 0..7, got {self.priority}")
        if self.lookup_id is not None and not 0 <= self.lookup_id < 1 << 64:
            raise InvalidArgument(f"lookup id must be a 64-bit unsigned integer, got {self.lookup_id}")
        if self.where is not None:
            from .selectors import compile_selector  # only a --where loads the selector parser

            selector = compile_selector(self.where)
            object.__setattr__(self, "selector", selector)
            for name, value in selector.index.items():  # the index serves what the selector needs
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)

    @property
    def plain(self) -> bool:
        """Whether it selects every message of the queue (or of one priority) in queue order."""
        return not self.exact and self.correl_id is None and self.selector is None

    @property
    def exact(self) -> bool:
        """Whether it names one message ([MS-MQDMPR] 3.1.7.1.10: such a get does not wait for one to come)."""
        return self.msg_id is not None or self.unique_id is not None or self.lookup_id is not None

    def matches(self, m: Message, now: int) -> bool:
        """Whether `m` passes, at `now` (µs: a selector's `age`)."""
        if self.msg_id_parts is not None and (m.origin, m.msg_n) != self.msg_id_parts:
            return False
        if self.unique_id_parts is not None and (m.origin, m.put_time) != self.unique_id_parts:
            return False
        return ((self.correl_id is None or m.correl_id == self.correl_id)
                and (self.lookup_id is None or m.lookup_id == self.lookup_id)
                and (self.priority is None or m.priority == self.priority)
                and (self.selector is None or self.selector.matches(m, now)))

    def describe(self) -> str:
        """The filter as an error names it: `with msg_id X and where ...`, or "" for none."""
        # an equality the index took from the selector is named once, in its `where`
        stated = self.selector.index if self.selector is not None else {}
        parts = [f"{name} {value}" for name, value in (
            ("msg_id", self.msg_id), ("unique_id", self.unique_id), ("lookup_id", self.lookup_id),
            ("correl_id", self.correl_id), ("priority", self.priority))
            if value is not None and stated.get(name) != value]
        if self.where is not None:
            parts.append(f"where {self.where}")
        return "with " + " and ".join(parts) if parts else ""

    def not_found(self, queue: str) -> MessageNotFound:
        """The error for an exact id that names no message of `queue` (its name as stored)."""
        return MessageNotFound(f"no message {self.describe()} in queue {queue!r}")


def _is_str(value: object) -> bool:
    return isinstance(value, str)
