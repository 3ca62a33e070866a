"""The msg_id and unique-id indexes (docs/design.md#tables), with *runs*.

A batch of messages put together gets msg_id numbers, put times and seqs that all step by one
(`Write.allocate_ids`, the SequentialID of [MS-MQDMPR] 3.1.7.1.9), so one index entry can stand for many of them:

- ``N origin(16) n(4) seq(8)`` → ``qid(4) 7-priority(1) count(2)``: the messages seq … seq+count-1
  have the msg_ids ``origin\\n`` … ``origin\\n+count-1``;
- ``V origin(16) put_time(8) seq(8)`` → the same value: their unique ids are ``origin:put_time`` …

A run is 2 to `MAX_RUN` messages of one queue and one priority; its N and V entries always cover
the same messages. A message put alone, imported, copied or dead-lettered on its own keeps
entries of its own, ``M origin n seq`` and ``U origin put_time seq`` → its location, found by
their prefix (a copy keeps its msg_id; its own seq keeps the entries apart).

A lookup reads the message's own entries under the id's prefix, then walks back over the runs
whose first id is within `MAX_RUN` of it (few: each stands for several messages). A run outlives
the removal of its messages until the last one goes: `release` deletes the runs a commit left
empty, looking each up once per run, not once per message. Lookups check that the message they
find still carries the id they looked for.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import lmdb

from . import keys
from .records import Message

if TYPE_CHECKING:
    from .write import Write

MAX_RUN = 256  # also bounds how far a lookup walks back from the id it looks for
KIND = {keys.MSGID: keys.MSGID, keys.MSGID_RUN: keys.MSGID, keys.UNIQ: keys.UNIQ, keys.UNIQ_RUN: keys.UNIQ}
"""Each tag of this index → the id it is for: msg_id (M, N) or unique id (U, V)."""
_RUN_OF = {keys.MSGID: keys.MSGID_RUN, keys.UNIQ: keys.UNIQ_RUN}
_ORDINAL = {keys.MSGID: keys.ORIGIN_N_SEQ_KEY, keys.UNIQ: keys.ORIGIN_TIME_SEQ_KEY}  # by kind
_LOCATION_SIZE = len(keys.location(0, 0))
_COUNT = struct.Struct(">H")  # after the location, in a run's value
_LAST_SEQ = (1 << 64) - 1
_U64 = keys.U64


def run_count(value: bytes) -> int:
    """The number of messages an entry stands for: one for a message's own (a location)."""
    return 1 if len(value) == _LOCATION_SIZE else _COUNT.unpack_from(value, _LOCATION_SIZE)[0]


def parse_run(key: bytes, value: bytes) -> tuple[bytes, bytes, int, int, bytes, int]:
    """(tag, origin, first ordinal, first seq, location, count) of an M, U, N or V entry."""
    tag, origin, ordinal, seq = _ORDINAL[KIND[key[:1]]].unpack(key)
    return tag, origin, ordinal, seq, bytes(value[:_LOCATION_SIZE]), run_count(value)


def run_entries(qid: int, messages: Iterable[Message]) -> list[tuple[bytes, bytes]]:
    """The msg_id and unique-id entries of messages of one queue being stored: N and V for
    each run of them, M and U for a message alone."""
    out: list[tuple[bytes, bytes]] = []
    count = 0
    first = None
    seq = n = put_time = priority = 0
    origin = b""
    for m in messages:
        if (count < MAX_RUN and m.seq == seq + count and m.msg_n == n + count
                and m.put_time == put_time + count and m.priority == priority and m.origin == origin):
            count += 1
            continue
        if first is not None:
            _emit(out, qid, first, count)
        first, count = m, 1
        seq, n, put_time, priority, origin = m.seq, m.msg_n, m.put_time, m.priority, m.origin
    if first is not None:
        _emit(out, qid, first, count)
    return out


def _emit(out: list[tuple[bytes, bytes]], qid: int, first: Message, count: int) -> None:
    if count == 1:  # a message alone: entries of its own, found by their prefix
        m_tag, u_tag, value = keys.MSGID, keys.UNIQ, keys.location(qid, first.priority)
    else:
        m_tag, u_tag, value = keys.MSGID_RUN, keys.UNIQ_RUN, keys.location(qid, first.priority) + _COUNT.pack(count)
    out.append((keys.ORIGIN_N_SEQ_KEY.pack(m_tag, first.origin, first.msg_n, first.seq), value))
    out.append((keys.ORIGIN_TIME_SEQ_KEY.pack(u_tag, first.origin, first.put_time, first.seq), value))


def members(cur: lmdb.Cursor[bytes], tag: bytes, origin: bytes, ordinal: int) -> list[tuple[int, bytes]]:
    """(seq, location) of every message the index says has this msg_id number (tag M) or put
    time (tag U), seq ascending: the messages' own entries under the id's prefix, then the runs
    that cover the id."""
    found = []
    prefix = _ORDINAL[tag].pack(tag, origin, ordinal, 0)[:-keys.SEQ_SIZE]
    if cur.set_range(prefix):
        for key, value in cur:
            if not key.startswith(prefix):
                break
            found.append((keys.seq_of(key), bytes(value[:_LOCATION_SIZE])))
    found += ((seq, location) for _, seq, _, _, location in _runs_covering(cur, tag, origin, ordinal))
    found.sort()
    return found


def none_between(cur: lmdb.Cursor[bytes], origin: bytes, first: int, last: int) -> bool:
    """Whether the index certainly holds no message with a msg_id `origin\\n`, first ≤ n ≤ last:
    no own entry in that span and no run reaching into it (a few cursor steps for a whole
    batch). False only means "look each id up": a run outlives some of its messages."""
    layout = keys.ORIGIN_N_SEQ_KEY
    end = layout.pack(keys.MSGID, origin, last, _LAST_SEQ)
    if cur.set_range(layout.pack(keys.MSGID, origin, first, 0)) and cur.key() <= end:
        return False
    end = layout.pack(keys.MSGID_RUN, origin, last, _LAST_SEQ)
    ok = cur.set_range(layout.pack(keys.MSGID_RUN, origin, max(0, first - MAX_RUN + 1), 0))
    while ok and cur.key() <= end:  # the runs that start in the span or up to MAX_RUN before it
        run_first = layout.unpack(cur.key())[2]
        if run_first + run_count(cur.value()) > first:
            return False
        ok = cur.next()
    return True


def _runs_covering(cur: lmdb.Cursor[bytes], tag: bytes, origin: bytes, ordinal: int,
                   ) -> Iterator[tuple[bytes, int, int, int, bytes]]:
    """(key, member seq, first seq, count, location) of each run covering the id, walking back
    from it over the runs whose first id is within MAX_RUN (a copy's run may cover an id from
    behind shorter ones)."""
    layout, run_tag = _ORDINAL[tag], _RUN_OF[tag]
    prefix = run_tag + origin
    ok = cur.prev() if cur.set_range(layout.pack(run_tag, origin, ordinal, _LAST_SEQ)) else cur.last()
    while ok:
        key, value = cur.item()
        if not key.startswith(prefix):
            return
        _, _, first, seq = layout.unpack(key)
        if first <= ordinal - MAX_RUN:
            return
        count = run_count(value)
        if ordinal - first < count:
            yield bytes(key), seq + ordinal - first, seq, count, bytes(value[:_LOCATION_SIZE])
        ok = cur.prev()


def release(t: Write, messages: Iterable[Message]) -> None:
    """Delete the runs of removed `messages` that no message is left in (call it after their
    records are gone). The run found last (`Write.last_run`, carried from this process's
    previous commit) is looked at first: a consumer takes a run's messages one a commit, and
    a seq names one message, so a seq in that run's span is one of its members."""
    lt, idx = t.lt, t.idx_db
    touched: dict[bytes, tuple[int, int, bytes, Message]] = {}
    seq = count = 0
    last = t.last_run
    for m in messages:
        if seq <= m.seq < seq + count:  # in the run found last: a seq names one message
            continue
        if last is not None and last[1] <= m.seq < last[1] + last[2]:
            key, seq, count, location = last
        else:
            if lt.delete(keys.ORIGIN_N_SEQ_KEY.pack(keys.MSGID, m.origin, m.msg_n, m.seq), db=idx):
                lt.delete(keys.ORIGIN_TIME_SEQ_KEY.pack(keys.UNIQ, m.origin, m.put_time, m.seq), db=idx)
                continue  # it had entries of its own
            run = next((r for r in _runs_covering(t.cursor("idx"), keys.MSGID, m.origin, m.msg_n) if r[1] == m.seq),
                       None)
            if run is None:
                continue  # no run holds it: a damaged store (check says so)
            key, _, seq, count, location = run
            last = t.last_run = (key, seq, count, location)
        touched[key] = (seq, count, location, m)
    if not touched:
        return
    pos, held = t.cursor("pos"), t.cursor("msg")
    for key, (seq, count, location, m) in touched.items():
        if _any_left(pos, keys.POS + location, seq, count) or _any_left(held, b"", seq, count):
            continue
        lt.delete(key, db=idx)
        if last is not None and last[0] == key:
            last = t.last_run = None
        put_time = m.put_time - (m.seq - seq)
        lt.delete(keys.ORIGIN_TIME_SEQ_KEY.pack(keys.UNIQ_RUN, m.origin, put_time, seq), db=idx)


def _any_left(cur: lmdb.Cursor[bytes], prefix: bytes, seq: int, count: int) -> bool:
    """Whether a key `prefix seq(8)` with seq in [seq, seq+count) exists."""
    if not cur.set_range(prefix + _U64.pack(seq)):  # keys.seq_key
        return False
    key = cur.key()
    size = len(prefix) + keys.SEQ_SIZE
    return len(key) == size and key.startswith(prefix) and _U64.unpack_from(key, size - keys.SEQ_SIZE)[0] < seq + count
