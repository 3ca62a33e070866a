"""Consumer worker for tests/test_concurrency.py (run as a real subprocess).

usage: consumer.py STORE QUEUE CONSUMER_ID MODE DONE_FLAG OUT SEED DEADLINE_S

MODE is "destructive" (get / get_many remove the messages) or "twophase" (get / get_many
with a confirm id, then confirm). Each received message is written to OUT as one line
"<body> <priority>" in the order received -- after the get returned (destructive) or after
the confirm returned (twophase) -- and flushed.

Termination: DONE_FLAG is created by the parent after every producer has exited. Once the
flag has been seen *before* a get starts, a Timeout from that get means nothing is available
and nothing ever will be again (no undo is used), so the consumer exits 0. A consumer still
running after DEADLINE_S seconds exits 3, so a store bug fails the test instead of hanging.
"""

import os
import random
import sys
import time

from store import Store, errors


def main() -> int:
    path, queue, cid, mode, done_flag, out_path, seed, deadline_s = sys.argv[1:9]
    cid, seed, deadline_s = int(cid), int(seed), float(deadline_s)
    if mode not in ("destructive", "twophase"):
        print(f"bad mode {mode}", file=sys.stderr)
        return 2
    rng = random.Random(seed)
    deadline = time.monotonic() + deadline_s
    confirm_id = (cid + 1) * 10**12  # disjoint ranges per consumer
    counts = [1, 1, 1, 2, 4, 8, 16, 32, 64]
    with Store.open(path) as st, open(out_path, "w", encoding="ascii") as out:
        while True:
            if time.monotonic() > deadline:
                print("consumer deadline reached", file=sys.stderr)
                return 3
            done = os.path.exists(done_flag)
            n = rng.choice(counts)
            c = None
            if mode == "twophase":
                confirm_id += 1
                c = confirm_id
            try:
                if n == 1 and rng.random() < 0.5:
                    msgs = [st.get(queue, wait=0.3, confirm_id=c)]
                else:
                    msgs = st.get_many(queue, n, wait=0.3, confirm_id=c)
            except errors.Timeout:
                if done:
                    return 0
                continue
            if not 1 <= len(msgs) <= n:
                print(f"get_many({n}) returned {len(msgs)} messages", file=sys.stderr)
                return 4
            if c is not None:
                for m in msgs:
                    if m.state != "get-unconfirmed" or m.confirm_id != c:
                        print(f"two-phase get returned {m.msg_id} state={m.state} "
                              f"confirm_id={m.confirm_id}, expected {c}", file=sys.stderr)
                        return 4
                confirmed = st.confirm(queue, c)
                if confirmed != len(msgs):
                    print(f"confirm {c} removed {confirmed}, got {len(msgs)}", file=sys.stderr)
                    return 4
            out.write("".join(f"{m.body.decode()} {m.priority}\n" for m in msgs))
            out.flush()


if __name__ == "__main__":
    sys.exit(main())
