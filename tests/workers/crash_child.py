"""Child for tests/test_crash.py: batched puts and two-phase gets until SIGKILLed.

usage: crash_child.py STORE QUEUE PROGRESS_FILE SEED ROUND

Progress protocol (one line per write(2) on an O_APPEND file, so a line is in the file as
soon as the call returns, whatever happens to the process afterwards):

  ready                               the store is open
  begin-put B K                       about to put_many bodies r<ROUND>-b<B>-0 .. -<K-1>
  put B K                             that put_many committed
  begin-get C N                       about to get_many(N, confirm_id=C)
  empty C                             the get timed out: nothing available
  got C body,body,...                 the two-phase get committed with these bodies
  begin-confirm C                     about to confirm C
  confirmed C COUNT                   confirm C committed, removing COUNT messages

Only the operation after the last "begin-" line without its completion line can be in
progress at the moment of the kill.
"""

import os
import random
import sys
import time

from store import NewMessage, Store, errors


def main() -> int:
    path, queue, progress, seed, rnd = sys.argv[1:6]
    rng = random.Random(int(seed))
    rnd = int(rnd)
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def report(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    st = Store.open(path)
    report("ready")
    batch = 0
    cid = rnd * 1_000_000 + 1
    deadline = time.monotonic() + 60  # never outlive a parent that failed to kill us
    while time.monotonic() < deadline:
        if rng.random() < 0.45:
            k = rng.randint(1, 40)
            bodies = [f"r{rnd}-b{batch}-{i}" for i in range(k)]
            report(f"begin-put {batch} {k}")
            stored = st.put_many(queue, [NewMessage(b.encode(), priority=rng.randrange(8))
                                         for b in bodies])
            assert len(stored) == k
            report(f"put {batch} {k}")
            batch += 1
        else:
            n = rng.randint(1, 30)
            report(f"begin-get {cid} {n}")
            try:
                msgs = st.get_many(queue, n, wait=0, confirm_id=cid)
            except errors.Timeout:
                report(f"empty {cid}")
                cid += 1
                continue
            report(f"got {cid} " + ",".join(m.body.decode() for m in msgs))
            report(f"begin-confirm {cid}")
            count = st.confirm(queue, cid)
            report(f"confirmed {cid} {count}")
            cid += 1
    return 5


if __name__ == "__main__":
    sys.exit(main())
