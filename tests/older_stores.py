"""Stores as an older mqcli left them, made from a store of this version with raw py-lmdb."""

import json

import lmdb

from store import Store, keys
from store.environment import MARKER


def as_an_older_mqcli_left_it(path, *, tables=True):
    """The store at `path` (closed) as a mqcli of format 3 from before per-queue counters left
    it: no counters entry for any queue, no layout number, the marker's format 3; without
    `tables`, no `holders` or `ids` table either."""
    marker = json.loads((path / MARKER).read_text())
    env = lmdb.open(str(path), map_size=marker["map_size"], max_dbs=32)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        cur = txn.cursor(db=meta)
        counters = [bytes(k) for k in cur.iternext(values=False) if k[:1] == b"k" and len(k) == 5]
        for key in counters + [keys.META_FORMAT]:
            txn.delete(key, db=meta)
        if not tables:
            for name in (b"holders", b"ids"):
                txn.drop(env.open_db(name, txn=txn), delete=True)
    env.close()
    assert counters  # the system queues' at least
    (path / MARKER).write_text(json.dumps({**marker, "format": 3}))


def an_older_store(path, body=b"m", *, tables=True):
    """A store at `path` with queue q holding `body`, as an older mqcli left it
    (as_an_older_mqcli_left_it)."""
    with Store.open(path, create=True) as st:
        st.create_queue("q")
        st.put("q", body)
    as_an_older_mqcli_left_it(path, tables=tables)
    return path
