"""Stale-reader worker for tests/test_crash.py: opens the store and browses in a loop until
it is SIGKILLed (so it is very likely inside a read transaction when killed).

usage: browse_loop.py STORE QUEUE
"""

import sys
import time

from store import Store


def main() -> int:
    path, queue = sys.argv[1:3]
    st = Store.open(path)
    st.browse(queue, states="all")
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st.browse(queue, states="all")
    return 5


if __name__ == "__main__":
    sys.exit(main())
