"""Child for tests/test_tx_crash.py: prepares one large transaction, then commits it (or holds it).

usage: tx_child.py STORE SEED ROUND OPS MODE

Begins an untimed transaction T and adds OPS operations in random-sized batches, in a random
mix: puts of bodies ``r<ROUND>-<i>`` to the transactional queue ``txin`` (put_many inside T)
and gets from the transactional queue ``txsrc`` (get_many inside T), which the parent has
filled. Then, on stdout (one flushed line each):

  prepared {"tx": T, "puts": [body, ...], "gets": [msg_id, ...]}   every operation of T
  committing                       about to call tx_commit(T) (MODE commit)
  committed N                      tx_commit returned, N operations applied
  holding                          T stays open until the parent kills us (MODE hold)

The parent SIGKILLs the child at some moment after "committing" (or "holding").
"""

import json
import random
import sys
import time

from store import NewMessage, Store

PUT_QUEUE = "txin"
GET_QUEUE = "txsrc"


def main() -> int:
    path, seed, rnd, ops, mode = sys.argv[1:6]
    rng = random.Random(int(seed))
    ops = int(ops)

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    st = Store.open(path)
    t = st.tx_begin(timeout=None)  # untimed: only commit, abort or the parent decide its fate
    puts: list[str] = []
    gets: list[str] = []
    want_gets = rng.randint(ops // 4, 3 * ops // 4)
    while len(puts) + len(gets) < ops:
        left = ops - len(puts) - len(gets)
        k = min(left, rng.randint(1, 120))
        get_more = len(gets) < want_gets and (len(puts) >= ops - want_gets or rng.random() < 0.5)
        if get_more:
            k = min(k, want_gets - len(gets))
            got = st.get_many(GET_QUEUE, k, wait=0, tx=t)
            assert len(got) == k, f"only {len(got)} of {k} messages in {GET_QUEUE}"
            gets += [m.msg_id for m in got]
        else:
            k = min(k, ops - want_gets - len(puts))
            bodies = [f"r{rnd}-{len(puts) + i}" for i in range(k)]
            st.put_many(PUT_QUEUE, [NewMessage(b.encode()) for b in bodies], tx=t)
            puts += bodies
    say("prepared " + json.dumps({"tx": t, "puts": puts, "gets": gets}))
    if mode == "hold":
        say("holding")
        time.sleep(120)  # never outlive a parent that failed to kill us
        return 5
    say("committing")
    done = st.tx_commit(t)
    say(f"committed {done}")
    time.sleep(120)  # the parent kills us here too, when its delay outlasts the commit
    return 5


if __name__ == "__main__":
    sys.exit(main())
