"""Messages held by a live process while it does I/O with no write transaction open.

A destructive get that writes its messages somewhere (a terminal, a pipe, a file) and a
dispatcher that sends a batch over a socket must not hold the store's one LMDB write lock
while they wait on that I/O: a reader that stalls (`get q --all | sleep 20`, Ctrl-Z, a full
pipe) would block every other process on the store. So they take their messages in a light
commit into an in-flight state under a fresh token, do the I/O with no transaction open, and
finish in a second commit (remove what was delivered, put back what was not).

What if the process dies in between? Its messages must go back, and only its own: a put
awaiting its confirm, a consumer's two-phase get or a browse lock on the same queue belong to
someone who may still come back. Each holder (one per open `Store` that holds something) keeps
an exclusive `flock` on its own file `holders/<holder id>` in the store directory for as long
as it lives; the kernel drops the lock when the process ends, however it ends (SIGKILL, a
crash, power loss). Table `holders` maps each token to its holder and queue, written in the
commit that takes the messages. Every write transaction looks at that table (usually empty:
one cursor step) and returns the messages of holders whose lock is free: they died.

A held message is `get-unconfirmed` under the token (`browse-get-unconfirmed` when it was got
under a browse lock, so that it goes back to `locked-browse`), with no lease: it is held for as
long as the holder lives. Going back costs no backout: a failed delivery is not the message's
fault. Table `holders`: token u64 → holder id (16) ‖ pid u32 ‖ kind u8 ‖ qid u32 ‖ since u64
‖ places, or for a two-phase get (kind 3) ‖ the confirm id u64 its messages will be pending
under once written: that id has its holder from the take on (ids.claim asks `claimed`), though
nothing is pending under it until the hold ends.

Two ways to hold. A hold of chosen messages (an exact id, a lock id, a dispatcher's batch)
moves each record into `msg` in its held state, with a confirm index entry, as a two-phase get
does. The plain get of the next messages (`mqcli get`, the hot path) holds them *in place*:
their positions and records stay where they are, and the row lists them in `places`
(7-priority u8 ‖ seq u64 each, in queue order). Readers of the position list step over placed
messages (Write.positions) and show them as `get-unconfirmed` under the token (Write.load), so a
hold costs one row, however many messages it holds, and the messages a hold gives back are
already in their places. See docs/holders.md.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import keys
from .errors import StoreCorrupt, StorePermission, StoreUnavailable
from .ownership import open_checked, private_dir
from .records import AVAILABLE, BROWSE_GET_UNCONFIRMED, GET_UNCONFIRMED, LOCKED_BROWSE, Message

if TYPE_CHECKING:
    from .queues import QueueInfo
    from .write import Write

HOLDERS_DIR = "holders"
GET, DISPATCH, TWO_PHASE_GET, CONSUME = 1, 2, 3, 4
KINDS = {GET: "get", DISPATCH: "dispatch", TWO_PHASE_GET: "two-phase get", CONSUME: "consumer"}
# A consumer's row (kind CONSUME, no places) holds no message itself: it says that the messages
# of its queue got two-phase under the confirm ids base+1 ... base+CONSUMER_IDS are a live
# consumer's (store/consumer.py), which an operators' undo or a purge leaves to it. Their leases
# still lapse (a stopped consumer's messages come back), and when the consumer dies the row is
# only forgotten: its messages come back as their leases lapse, with a backout, as before. Its
# key is CONSUMERS | base, after every hold's (tokens are below 2**62), so that a write that
# meets only consumers' rows finds no hold (Write.any_held: no maintenance, no lookups).
CONSUMERS = 1 << 63
CONSUMER_IDS = 1 << 40
_ROW = struct.Struct(">16sIBIQ")
_TOKEN = struct.Struct(">Q")
PLACE = struct.Struct(">BQ")  # one message held in place: 7-priority, seq (its position key's tail)
# how long a holder seen alive is taken to be alive without asking the kernel again: a dead
# holder's messages come back within this time of the next write, and a store with a holder
# writing to a stalled pipe costs other writers one lock probe a second, not one per commit
_ALIVE_FOR = 1.0


@dataclass(frozen=True, slots=True)
class Hold:
    """A hold in place: its token, the holding process and the messages it holds (docs/holders.md)."""

    token: int
    holder: bytes
    pid: int
    kind: int
    qid: int
    since: int
    places: bytes = b""  # the messages held in place, PLACE each (empty: held in `msg`)
    confirm_id: int | None = None  # a two-phase get's: the id its messages go under once written

    @property
    def placed(self) -> list[tuple[int, int]]:
        """(7-priority, seq) of each message held in place, in queue order."""
        return [PLACE.unpack_from(self.places, at) for at in range(0, len(self.places), PLACE.size)]

    @property
    def what(self) -> str:
        return f"{KINDS.get(self.kind, 'a process')} in process {self.pid}"


@dataclass(frozen=True, slots=True)
class Placed:
    """A plain get's hold in place as its process made it (Write.hold_next): the token, the
    row's places, and each message as it was found, with its position key."""
    token: int
    places: bytes
    positions: list[bytes]
    messages: list[Message]


def new_token() -> int:
    return (int.from_bytes(os.urandom(8), "big") >> 2) + 1  # 62 random bits, as secrets.randbits


def decode(key: bytes, value: bytes) -> Hold:
    holder, pid, kind, qid, since = _ROW.unpack_from(value)
    tail = value[_ROW.size:]
    if kind == TWO_PHASE_GET:
        if len(tail) != _TOKEN.size:
            raise StoreCorrupt(f"holder row {key.hex()}: a two-phase get's row ends in {len(tail)} bytes, "
                               f"not its confirm id")
        return Hold(_TOKEN.unpack(key)[0], holder, pid, kind, qid, since, b"", _TOKEN.unpack(tail)[0])
    if len(tail) % PLACE.size:
        raise StoreCorrupt(f"holder row {key.hex()}: {len(tail)} bytes of places, not whole entries")
    return Hold(_TOKEN.unpack(key)[0], holder, pid, kind, qid, since, tail)


def lookup(t: Write, token: int) -> Hold | None:
    raw = t.lt.get(_TOKEN.pack(token), db=t.dbs["holders"])
    return None if raw is None else decode(_TOKEN.pack(token), bytes(raw))


def claimed(t: Write, qid: int, confirm_id: int) -> Hold | None:
    """The two-phase get, if any, that is writing out messages it will put under `confirm_id`
    in queue `qid` (its hold row names the id): the id's holder, though nothing is pending
    under it yet. The rows are few (one a live holder), and usually none."""
    if not t.any_held():
        return None
    return next((h for h in holds(t) if h.confirm_id == confirm_id and h.qid == qid), None)


def delivering(t: Write, m: Message) -> str | None:
    """Who is delivering `m` right now ("get in process 4711": a live process writing it out,
    sending it, or a consumer handling it), None if no one: what an operators' undo or purge
    leaves to that process."""
    if m.confirm_id is None:
        return None
    hold = lookup(t, m.confirm_id) if t.any_held() else None
    if hold is None and m.state == GET_UNCONFIRMED:
        hold = consuming(t, m.qid, m.confirm_id)
    return None if hold is None else hold.what


def consuming(t: Write, qid: int, confirm_id: int) -> Hold | None:
    """The consumer whose confirm ids in queue `qid` include `confirm_id`, if any (a dead
    one's row is there until `recover` forgets it: callers recover first). Those ids are its
    own: ids.claim refuses them to anyone else, ids.draw never draws one."""
    return next((h for h in _consumers(t, qid) if 0 < confirm_id - (h.token - CONSUMERS) <= CONSUMER_IDS), None)


def range_free(t: Write, qid: int, base: int) -> bool:
    """Whether the confirm ids base+1 ... base+CONSUMER_IDS of queue `qid` are no one's, for a
    new consumer to take: no consumer's range overlaps them, no message is pending under one
    and no two-phase get is writing out messages it will hold under one."""
    last = base + CONSUMER_IDS
    if any(abs((h.token - CONSUMERS) - base) < CONSUMER_IDS for h in _consumers(t, qid)):
        return False
    if t.any_held() and any(h.qid == qid and h.confirm_id is not None and base < h.confirm_id <= last
                            for h in holds(t)):
        return False
    cur = t.lt.cursor(db=t.dbs["idx"])
    return not (cur.set_range(keys.id_in_queue_prefix(keys.CONFIRM, qid, base + 1))
                and cur.key() < keys.id_in_queue_prefix(keys.CONFIRM, qid, last + 1))


def _consumers(t: Write, qid: int) -> list[Hold]:
    """The consumers' rows of queue `qid` (after every hold's)."""
    cur = t.lt.cursor(db=t.dbs["holders"])
    if not cur.set_range(_TOKEN.pack(CONSUMERS)):
        return []
    return [h for key, value in cur if (h := decode(bytes(key), bytes(value))).kind == CONSUME and h.qid == qid]


def leaving(t: Write, m: Message) -> bool:
    """Whether a get is delivering `m` right now: it is on its way out of the store (in
    `get a --all -o jsonl | put b --jsonl -` the put meets the msg_ids the get still holds,
    and must not take them for copies already stored)."""
    if m.state != GET_UNCONFIRMED or m.confirm_id is None:
        return False
    hold = lookup(t, m.confirm_id)
    return hold is not None and hold.kind == GET


def holds(t: Write) -> list[Hold]:
    return [decode(bytes(k), bytes(v)) for k, v in t.lt.cursor(db=t.dbs["holders"])]


class Holder:
    """This process's side: the locked file that says it is alive, made on first use, and a
    cache of which other holders were seen alive lately."""

    def __init__(self, store_dir: Path) -> None:
        self.dir = store_dir / HOLDERS_DIR
        self.id = os.urandom(16)
        self.pid = os.getpid()
        self._fd: int | None = None
        self._alive: dict[bytes, float] = {}
        _LIVE[:] = [r for r in _LIVE if r() is not None] + [weakref.ref(self)]

    def ensure(self) -> None:
        """Make and lock this holder's file; before the first commit that names it."""
        if self._fd is not None:
            return
        try:
            private_dir(self.dir)
            fd = os.open(self.dir / self.id.hex(),  # a fresh random name: never an existing file
                         os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:  # not our bug: the store's directory is not as `mqcli init` made it
            raise StoreUnavailable(
                f"cannot hold messages in the store at {self.dir.parent}: {exc.strerror or exc} "
                f"({self.dir} must be a directory this user may write)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _owned_by_the_store(self.dir, fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def register(self, t: Write, token: int, q: QueueInfo, kind: int, places: bytes = b"",
                 confirm_id: int | None = None) -> None:
        """Record that this process holds `token`, in the commit that puts messages under it;
        `places` lists the messages it holds in place (PLACE each); a two-phase get names the
        `confirm_id` its messages go under once written (kind TWO_PHASE_GET)."""
        assert (kind == TWO_PHASE_GET) == (confirm_id is not None) and not (places and confirm_id is not None)
        self.ensure()
        tail = places if confirm_id is None else _TOKEN.pack(confirm_id)
        t.lt.put(_TOKEN.pack(token), _ROW.pack(self.id, self.pid, kind, q.qid, t.now) + tail,
                 db=t.dbs["holders"])
        t.holds_changed()

    def hold(self, t: Write, q: QueueInfo, messages: list[Message], kind: int,
             confirm_id: int | None = None) -> int:
        """Put `messages` (available, or locked-browse) in flight under a new token held by
        this process; returns the token. The `Message` objects are left as they were found.
        Light: a lost hold only means the messages were not taken. (A plain get holds the
        next messages faster with Write.hold_next.) A two-phase get (TWO_PHASE_GET) names its
        `confirm_id`."""
        token = new_token()
        self.register(t, token, q, kind, confirm_id=confirm_id)
        for m in messages:
            # the caller keeps the message as it was found (what a get shows); the record changes
            was = m.state, m.confirm_id, m.since
            state = BROWSE_GET_UNCONFIRMED if m.state == LOCKED_BROWSE else GET_UNCONFIRMED
            t.transition(m, durable=False, state=state, confirm_id=token, since=t.now)
            m.state, m.confirm_id, m.since = was
        return token

    def is_alive(self, hold: Hold) -> bool:
        holder = hold.holder
        if holder == self.id:
            return True
        seen = self._alive.get(holder)
        now = time.monotonic()
        if seen is not None and now - seen < _ALIVE_FOR:
            return True
        alive = _locked(self.dir / holder.hex())
        if alive is None:  # no holder's file: deleted or replaced (a clean-up script), or its holder died
            alive = _process_lives(hold.pid, hold.since)
        if alive:
            self._alive[holder] = now
        else:
            self._alive.pop(holder, None)
        return alive

    def let_go(self) -> None:
        """Drop the lock and keep the file: from now on this holder is dead to every process,
        this one too (a file that is gone leaves its process to decide: `is_alive`). Safe in a
        finalizer: no store is touched. The next writer that looks returns or forgets what its
        rows held, and removes the file."""
        if self._fd is not None and os.getpid() == self.pid:
            os.close(self._fd)
        self._fd = None

    def close(self) -> None:
        """Drop the lock and the file (rows naming this holder, if any are left, are then
        returned by the next writer, as for a holder that died)."""
        if self._fd is not None and os.getpid() == self.pid:
            try:
                os.unlink(self.dir / self.id.hex())
            except OSError:
                pass
            os.close(self._fd)
        self._fd = None


def _owned_by_the_store(folder: Path, fd: int) -> None:
    """Root working in a user's store (`sudo mqcli get`; nobody else may enter a 0700 store)
    gives `holders/` and its holder file to the store's owner. Left root's, the directory
    would refuse the owner's every later hold (exit 11), and the file the owner's look at it
    once root's process died, so that its messages would stay held for good (`_locked` takes
    a file it cannot open for a live holder's)."""
    owner = os.stat(folder.parent)
    if os.geteuid() == owner.st_uid:
        return
    try:
        if os.stat(folder).st_uid != owner.st_uid:
            os.chown(folder, owner.st_uid, owner.st_gid)
        os.fchown(fd, owner.st_uid, owner.st_gid)
    except OSError:
        pass  # not permitted: as before, the directory and file stay this user's


def _after_fork_in_child() -> None:
    """A forked child shares its parent's open file descriptions, and so the holder locks: if
    it kept them, a parent that died would still look alive, its messages held for as long as
    the child lives (a worker pool, a daemon). The child cannot use its parent's store handle
    anyway (Store._env), so it lets go of them; the parent's locks stay, as flock(2) keeps a
    lock until every descriptor of it is closed."""
    for ref in list(_LIVE):
        holder = ref()
        if holder is not None and holder._fd is not None:
            try:
                os.close(holder._fd)
            except OSError:
                pass
            holder._fd = None


# the holders of this process, by plain weak references pruned as holders are made: a WeakSet's
# removal callback runs at garbage collection, where a SIGTERM's Terminated raised into it is
# only printed ("Exception ignored") and the signal lost (seen in tests/test_cli_signals.py)
_LIVE: list[weakref.ref[Holder]] = []
os.register_at_fork(after_in_child=_after_fork_in_child)


def _locked(path: Path) -> bool | None:
    """Whether a live process holds the lock on `path`; None if no holder's file is there.

    Only a regular file can be a holder's (`Holder.ensure` makes it with O_EXCL). Anything else
    there (a FIFO, a socket, a symbolic link, a directory) took the place of a holder's file
    that someone removed, so, as for a missing file, the holder's process decides
    (`Holder.is_alive`): taken for alive, a dead holder's messages would stay held for good;
    taken for dead, a live holder's would be handed out twice. The open follows no link and
    does not wait (this runs in the write transaction: a FIFO's open would block every writer),
    and fstat checks what it opened."""
    try:
        fd, st = open_checked(path, os.O_RDONLY | os.O_NONBLOCK, f"holder file {path}")
    except (FileNotFoundError, StorePermission):  # no entry, or a symbolic link
        return None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket
            return None
        return True  # cannot tell (another user's file?): never take a live holder's messages
    try:
        if not stat.S_ISREG(st.st_mode):
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # EWOULDBLOCK: its holder lives; anything else: cannot tell, so alive
    finally:
        os.close(fd)
    return False


def _process_lives(pid: int, since: int) -> bool:
    """Whether process `pid` lives and is the one that made a hold at `since` (µs since the
    epoch): it started before then. A process started later reuses a dead holder's pid. The
    fallback for a holder whose file is gone: a live holder keeps its flock on an unlinked
    file, where nobody else can see it. Without /proc (not Linux), a missing file means dead,
    as before."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            proc_stat = f.read()
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError):
        return False
    # fields after the command name, which is in parentheses and may hold spaces: the 22nd
    # field of the line (starttime, clock ticks after boot) is the 20th after it
    try:
        ticks = int(proc_stat[proc_stat.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return False
    # btime is whole seconds, rounded down: `started` is at most a second early, so a process
    # that started before the hold always passes, and a pid reused within a second of the
    # hold is taken for the holder (its messages stay held until that process ends)
    started = boot + ticks / os.sysconf("SC_CLK_TCK")
    return started <= since / 1_000_000


def finish(t: Write, hold: Hold, q: QueueInfo, delivered: set[int]) -> tuple[list[Message], list[Message]]:
    """End a hold: the messages whose seq is in `delivered` are removed (a get) and returned
    first; the rest go back, without a backout. Light: the caller makes the removal durable."""
    held = t.with_token(q, hold.token)
    done = [m for m in held if m.seq in delivered]
    back = [m for m in held if m.seq not in delivered]
    if done:
        t.remove_many(done)
    for m in back:
        if hold.places:
            t.woke.add(q.qid)  # in place already: forgetting the row gives it back
        else:
            give_back(t, m)
    forget(t, hold.token)
    return done, back


def forget(t: Write, token: int) -> None:
    t.lt.delete(_TOKEN.pack(token), db=t.dbs["holders"])
    t.holds_changed()


def unplace(t: Write, hold: Hold, seq: int) -> None:
    """Take one message out of a hold in place (it is being removed or moved meanwhile)."""
    kept = b"".join(hold.places[at:at + PLACE.size] for at in range(0, len(hold.places), PLACE.size)
                    if PLACE.unpack_from(hold.places, at)[1] != seq)
    raw = t.lt.get(_TOKEN.pack(hold.token), db=t.dbs["holders"])
    if raw is not None:
        t.lt.put(_TOKEN.pack(hold.token), bytes(raw)[:_ROW.size] + kept, db=t.dbs["holders"])
        t.holds_changed()


def give_back(t: Write, m: Message) -> Message:
    """A held message back where the hold found it: available, or locked-browse under its lock."""
    kept = t.leave(m, LOCKED_BROWSE if m.state == BROWSE_GET_UNCONFIRMED else AVAILABLE, durable=False)
    assert kept is not None  # no backout: it stays
    return kept


def recover(t: Write, me: Holder) -> int:
    """Return the messages of holders that died; the number returned."""
    returned = 0
    for hold in holds(t):
        if me.is_alive(hold):
            continue
        returned += _end(t, hold)
        try:
            os.unlink(me.dir / hold.holder.hex())
        except OSError:
            pass
    return returned


def give_back_all(t: Write) -> int:
    """Return the messages of every hold, alive or not: a backup's copy, whose holders are the
    original store's processes (their files are not copied, and a pid there names whatever
    process has it where the copy is restored: held for ever). The number returned."""
    return sum(_end(t, hold) for hold in holds(t))


def _end(t: Write, hold: Hold) -> int:
    """End a hold with nothing delivered: its messages go back; how many."""
    if not t.queue_exists(hold.qid):
        forget(t, hold.token)
        return 0
    _, back = finish(t, hold, t.queue(t.queue_name(hold.qid)), set())
    return len(back)


def remove_dead_files(me: Holder) -> int:
    """Remove the files of holders that died holding nothing (a `dispatch --follow` killed
    while idle): no row names them, so `recover` never sees them. For `sweep`, inside its
    write transaction: a holder makes and locks its file inside one (`ensure`), so a file
    found unlocked here is a dead holder's, not a new one's."""
    removed = 0
    try:
        entries = list(os.scandir(me.dir))
    except OSError:
        return 0
    for entry in entries:
        if len(entry.name) != 32 or entry.name == me.id.hex() or not entry.is_file(follow_symlinks=False):
            continue  # not a holder file: not ours to judge
        if _locked(Path(entry.path)) is False:
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed


def recovery_due(t: Write, me: Holder) -> bool:
    """Whether a reader should run a write first: a dead holder's messages are waiting."""
    return any(not me.is_alive(h) for h in holds(t))
