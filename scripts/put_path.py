"""Which modules of store/ one put enters, and how often it parses a format name.

    python scripts/put_path.py            # a put to a local queue and to a format name

A put should cross few modules (each crossing is a file a reader follows) and parse a format
name once. tests/test_put_path.py holds both to their bounds.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Store  # noqa: E402  (after the path above, for a checkout without install)

PACKAGE = str(ROOT / "store")


def trace(call: Callable[[], Any]) -> tuple[list[str], Counter[str]]:
    """Run `call`; return the store/ modules its Python frames entered, in order of first
    entry, and how many times each store/ function was called (`module:function`)."""
    modules: list[str] = []
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(PACKAGE):
            return
        module = "store" + path[len(PACKAGE):-3].replace("/", ".").removesuffix(".__init__")
        if module not in modules:
            modules.append(module)
        calls[f"{module}:{frame.f_code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return modules, calls


#: What each traced put is addressed to: a local queue by name, another queue manager's queue
#: by its format name (its outgoing queue is stored under that text), and a local queue by a
#: format name (parsed to find the local name).
ADDRESSES = {
    "local queue": "orders",
    "format name of a remote queue": r"DIRECT=TCP:192.0.2.7\orders",
    "format name of a local queue": r"DIRECT=OS:qmA\orders",
}


def put_paths(directory: str) -> dict[str, tuple[list[str], Counter[str]]]:
    """One traced put to each of ADDRESSES in a new store under `directory`, in the steady
    state of a process that puts again and again (a worker, `consume`, a dispatcher): two puts
    before it made the outgoing queue and filled the decoded-queue cache. (A process's first
    put also decodes the queue's record: one more module, store/queues.py.)"""
    found = {}
    with Store.open(Path(directory) / "qm", create=True, name="qmA") as st:
        st.create_queue("orders")
        for name, queue in ADDRESSES.items():
            st.put(queue, b"warm-up")
            st.put(queue, b"warm-up")
            found[name] = trace(lambda queue=queue: st.put(queue, b"hello"))
    return found


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for name, (modules, calls) in put_paths(tmp).items():
            parses = calls["store.formatnames:parse"]
            print(f"put to a {name}: {len(modules)} modules of store/, format name parsed {parses} time(s)")
            for module in modules:
                print(f"  {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
