"""Producer worker for tests/test_concurrency.py (run as a real subprocess).

usage: producer.py STORE QUEUE PRODUCER_ID COUNT SEED

Puts COUNT messages whose bodies are b"<producer>:<seq>:<priority>", seq 0..COUNT-1 in
put order, with priorities drawn from 0-7, mostly in put_many batches of varied sizes and
sometimes as single puts. Exits 0 when every put has committed.
"""

import random
import sys

from store import NewMessage, Store


def body(producer: int, seq: int, priority: int) -> bytes:
    return f"{producer}:{seq}:{priority}".encode()


def main() -> int:
    path, queue, producer, count, seed = sys.argv[1:6]
    producer, count, seed = int(producer), int(count), int(seed)
    rng = random.Random(seed)
    sizes = [1, 2, 3, 5, 8, 13, 21, 34, 55, 100]
    seq = 0
    with Store.open(path) as st:
        while seq < count:
            if rng.random() < 0.15:
                prio = rng.randrange(8)
                st.put(queue, body(producer, seq, prio), priority=prio)
                seq += 1
            else:
                k = min(rng.choice(sizes), count - seq)
                batch = []
                for i in range(k):
                    prio = rng.randrange(8)
                    batch.append(NewMessage(body(producer, seq + i, prio), priority=prio))
                stored = st.put_many(queue, batch)
                if len(stored) != k:
                    print(f"put_many stored {len(stored)} of {k}", file=sys.stderr)
                    return 4
                seq += k
    return 0


if __name__ == "__main__":
    sys.exit(main())
