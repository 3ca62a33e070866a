"""A full disk, for real: stores on a small tmpfs mounted for the test (needs root; skipped
where mounting is not allowed).

A full disk is exit 8 like a full map (README.md#exit-codes: "the store is ... full"), never "corrupt": a put
that does not fit stores nothing, gets keep working, and puts work again once there is room.
`init` and `backup` on a full disk leave nothing half-made behind.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import NewMessage, Store, errors

KiB = 1 << 10


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs at tmp_path/disk, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(disk)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk, leave: int) -> None:
    """Fill the disk but `leave` bytes (one filler file; remove it to free the space)."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(disk / "filler", "wb") as f:
        if free > leave:
            f.write(b"\0" * (free - leave))
        f.flush()
        os.fsync(f.fileno())


def test_puts_on_a_full_disk_are_exit_8_whole_batches_only_and_gets_go_on(small_disk):
    path = small_disk / "s"
    with Store.open(path, create=True, map_size=64 << 20) as st:
        st.create_queue("q")
        fill(small_disk, 256 * KiB)
        stored = 0
        with pytest.raises(errors.StoreFull, match="disk") as info:
            for _ in range(1000):
                st.put_many("q", [NewMessage(b"x" * 1000) for _ in range(20)])
                stored += 20
        assert info.value.exit_code == 8
        assert st.queue_info("q").depth == stored and stored > 0
        assert st.get("q", wait=0).body == b"x" * 1000
        assert st.check() == []
        (small_disk / "filler").unlink()
        st.put("q", b"room again")
        assert st.queue_info("q").depth == stored
    cli = subprocess.run([sys.executable, "-m", "mqcli", "--store", str(path), "check"],
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr


@pytest.mark.parametrize("leave", [0, 8 * KiB, 16 * KiB, 64 * KiB])
def test_init_on_a_full_disk_leaves_a_store_the_next_init_finishes(small_disk, leave):
    fill(small_disk, leave)
    path = small_disk / "s"
    try:
        Store.open(path, create=True, name="qm").close()
    except errors.StoreError as exc:
        assert exc.exit_code in (8, 11), exc  # full: 8; a half-written LMDB file LMDB won't map: 11
        assert "Traceback" not in str(exc)
    (small_disk / "filler").unlink()
    with Store.open(path, create=True, name="qm") as st:
        assert {q.name for q in st.list_queues() if q.system} == {"dead-letter", "dead-letter-tx"}
        assert st.check() == []


def test_a_backup_that_does_not_fit_leaves_nothing_and_can_be_retried(small_disk, tmp_path):
    with Store.open(tmp_path / "src", create=True) as st:
        st.create_queue("q")
        st.put_many("q", [NewMessage(os.urandom(1000)) for _ in range(1000)])  # ~1.4 MB copied
        fill(small_disk, 512 * KiB)
        target = small_disk / "bk"
        with pytest.raises(errors.StoreError) as info:
            st.backup(target)
        assert info.value.exit_code in (8, 11)
        assert not target.exists()
        (small_disk / "filler").unlink()
        st.backup(target)
    with Store.open(target) as copy:
        assert copy.queue_info("q").depth == 1000 and copy.check() == []
