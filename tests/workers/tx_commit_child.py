"""Child of tests/test_crash_tx.py: builds a 1,000-operation transaction, then commits it.

argv: store path, round tag, half (operations per kind). Prints "tx <id>", then "committing"
right before tx_commit, then "committed"; the parent SIGKILLs it around the commit.
"""

import sys

from store import NewMessage, Store

path, tag, half = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Store.open(path) as st:
    t = st.tx_begin()
    print(f"tx {t}", flush=True)
    st.put_many("dst", [NewMessage(f"{tag}-{i}".encode()) for i in range(half)], tx=t)
    got = st.get_many("src", half, wait=0, tx=t)
    assert len(got) == half
    print("committing", flush=True)
    st.tx_commit(t)
    print("committed", flush=True)
