"""A put crosses few modules of store/ and parses a format name at most once
(scripts/put_path.py traces it with sys.setprofile; run it to see the modules)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _put_path():
    spec = importlib.util.spec_from_file_location("put_path", ROOT / "scripts" / "put_path.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# a put's modules: engine, write, addressing, keys, records, ... and writer_lock (the writers'
# waiting room a write takes first, where a signal gets through: store/writer_lock.py)
def test_a_put_to_a_local_queue_or_a_remote_format_name_crosses_at_most_9_modules(tmp_path):
    paths = _put_path().put_paths(str(tmp_path))
    for name in ("local queue", "format name of a remote queue"):
        modules, calls = paths[name]
        assert "store.engine" in modules and "store.write" in modules  # the trace saw the put
        assert len(modules) <= 9, (name, modules)
        assert calls["store.formatnames:parse"] == 0, name  # stored under its name: nothing to parse


def test_a_local_format_name_is_parsed_once_and_crosses_only_the_parser_more(tmp_path):
    modules, calls = _put_path().put_paths(str(tmp_path))["format name of a local queue"]
    assert calls["store.formatnames:parse"] == 1
    assert len(modules) <= 10, modules
    assert "store.outgoing" not in modules and "store.reports" not in modules


def test_the_put_traced_is_a_real_put(tmp_path):
    """The paths are measured on real puts: each queue holds what was put to it."""
    put_path = _put_path()
    put_path.put_paths(str(tmp_path))
    from store import Store

    with Store.open(tmp_path / "qm") as st:
        assert st.queue_info("orders").depth == 6  # 3 by name, 3 by DIRECT=OS:qmA\orders
        remote = next(q for q in st.list_queues() if q.outgoing is not None)
        assert remote.depth == 3
