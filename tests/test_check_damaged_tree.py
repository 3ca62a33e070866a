"""`mqcli check` finds a damaged B-tree page that a walk in key order does not read: a routing
key of a branch page (LMDB keeps no checksums). With one, a browse that resumes a page by a
seek landed in the wrong leaf and showed messages twice while check said "consistent"."""

import mmap
import struct

import lmdb

# LMDB's on-disk layout (lmdb.h/mdb.c, 0.9): a named table's record in the main table is its
# MDB_db, and a page starts with its header; a branch page's node is lo(2) hi(2) flags(2)
# ksize(2) then the key
_MDB_DB = struct.Struct("<IHHQQQQQ")  # pad flags depth branch_pages leaf_pages overflow_pages entries root
_PAGE_HEADER = struct.Struct("<QHHHH")  # pgno pad flags lower upper
_P_BRANCH = 0x01


def _damage_a_routing_key(store_dir, table):
    """Raise the key that routes lookups to the pos table's second leaf past that leaf's first
    key: a walk still reads every key, a lookup of that first key goes to the leaf before."""
    env = lmdb.open(str(store_dir), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        root = _MDB_DB.unpack(txn.get(table))[-1]
    env.close()
    page_size = mmap.PAGESIZE
    with open(store_dir / "data.mdb", "r+b") as f:
        f.seek(root * page_size)
        page = bytearray(f.read(page_size))
        _, _, flags, lower, _ = _PAGE_HEADER.unpack_from(page)
        assert flags & _P_BRANCH, "the table fits one leaf: put more messages"
        assert (lower - _PAGE_HEADER.size) // 2 >= 2
        node = struct.unpack_from("<H", page, _PAGE_HEADER.size + 2)[0]  # the second child's node
        size = struct.unpack_from("<H", page, node + 6)[0]
        key = bytes(page[node + 8:node + 8 + size])
        page[node + 8:node + 8 + size] = key[:-8] + (int.from_bytes(key[-8:], "big") + 1).to_bytes(8, "big")
        f.seek(root * page_size)
        f.write(page)


def test_check_finds_a_damaged_routing_key_that_a_walk_does_not_read(cli, tmp_path):
    lines = tmp_path / "lines"
    lines.write_text("".join(f"message-{i:05d}-{'z' * 50}\n" for i in range(3000)))
    cli.ok("put", "q", "--lines", str(lines), "-q")
    assert cli.ok("check").code == 0
    _damage_a_routing_key(cli.store, b"pos")
    r = cli.fails(11, "check")
    assert "table pos: a lookup of key" in r.stdout.decode() + r.stderr
    assert "is inconsistent" in cli.error_line(r)
