"""A trace report's computer as `analyze routes` groups, sorts and joins it: two integers
rather than the GUID's 36 characters (docs/design.md#trace-reports).

A report's computer (the queue manager where the event happened) is a GUID, lowercase as the
decoders give it, or else a machine name. Every report is shuffled, grouped and sorted by its
route's steps, a step being a (hops, computer) pair; a string there makes Spark hash, compare and
copy 36 bytes a report where two longs take 16 of fixed width (at 2,000,000 reports, A/B: 8.3
→ 7.8 s a round, then 10.3 → 9.2 s once the text stayed in the Python worker). So `analyze
routes` keys a step by

- `hi`, `lo`: the GUID's 128 bits, each half as a signed long shifted by 2⁶³ so that the order
  of the numbers is the order of the lowercase text (null for a machine name);
- `name`: the machine name (null for a GUID).

The key is exact, not a hash: equal keys are equal computers, and the name comes back from it
(`name_of`). Ties (one route, one hop count, one µs) are broken by it: machine names first, in
their order, then GUIDs in theirs.

The same key is made in Python (`key_of`: the `mqstore` source's `trace_computer_hi`,
`trace_computer_lo` and `trace_computer_name` columns, per distinct label; `analyze routes`
reads these instead of `trace_computer`, so the GUID's text never leaves the Python worker) and
by Spark SQL expressions (`key_columns`: labels decoded by labels.py); tests hold both to the
same values.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

# a GUID as the decoders write it: lowercase, 8-4-4-4-12
GUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_GUID_SQL = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_SHIFT = 1 << 63
KEY_FIELDS = ("hi", "lo", "name")


def key_of(computer: str | None) -> tuple[int | None, int | None, str | None]:
    """(hi, lo, name) of a computer: its GUID's halves, each less 2⁶³, and no name; or no
    halves and the name."""
    if computer is None or GUID_TEXT.match(computer) is None:
        return None, None, computer
    return (int(computer[0:8] + computer[9:13] + computer[14:18], 16) - _SHIFT,
            int(computer[19:23] + computer[24:36], 16) - _SHIFT, None)


def key_columns(computer: Column) -> tuple[Column, Column, Column]:
    """`key_of` as Spark SQL expressions over a column of computers."""
    from pyspark.sql import functions as F

    guid = computer.rlike(_GUID_SQL)

    def half(*spans: tuple[int, int]) -> Column:
        # 16 hex digits as two 32-bit words: (high − 2³¹) × 2³² + low is the value less 2⁶³,
        # and never leaves a long
        digits = F.concat(*[F.substring(computer, at, n) for at, n in spans])
        high = F.conv(F.substring(digits, 1, 8), 16, 10).cast("long")
        low = F.conv(F.substring(digits, 9, 8), 16, 10).cast("long")
        return F.when(guid, (high - (1 << 31)) * (1 << 32) + low)

    # a null computer has a null key: null halves and a null name
    return half((1, 8), (10, 4), (15, 4)), half((20, 4), (25, 12)), F.when(~guid, computer)


def key(hi: Column, lo: Column, name: Column) -> Column:
    """The step key, a struct of `KEY_FIELDS`."""
    from pyspark.sql import functions as F

    return F.struct(hi.alias("hi"), lo.alias("lo"), name.alias("name"))


def name_of(computer_key: Column) -> Column:
    """The computer a key was made from: its name, else its GUID as lowercase text."""
    from pyspark.sql import functions as F

    def hex16(half: Column) -> Column:
        return F.lower(F.lpad(F.hex(half.bitwiseXOR(F.lit(-_SHIFT))), 16, "0"))

    hi, lo = hex16(computer_key["hi"]), hex16(computer_key["lo"])
    guid = F.concat_ws("-", F.substring(hi, 1, 8), F.substring(hi, 9, 4), F.substring(hi, 13, 4),
                       F.substring(lo, 1, 4), F.substring(lo, 5, 12))
    return F.coalesce(computer_key["name"], F.when(computer_key["hi"].isNotNull(), guid))
