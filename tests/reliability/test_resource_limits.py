"""Resource limits, through real `mqcli` processes.

- A full store — its LMDB map used up (a store made with a 1 MiB map), or its quota reached —
  refuses puts with exit 8, whole batches only, and keeps serving gets; once messages are got,
  puts are taken again (for a full map, from the second commit on: see below), and
  `mqcli check` passes throughout.
- A message body larger than the store's max-message-size (MSMQ's MaxMessageSize: 4 MiB unless
  `qmgr set --max-message-size` says otherwise) is refused with exit 8
  (MQ_ERROR_INSUFFICIENT_RESOURCES, MSMQ's status for it, the same family as an exceeded
  machine quota: README.md#exit-codes gives exit 8 to a put the store has no room for, while exit 12 is for
  data that is malformed, which a large body is not), by every way of putting.
"""

from __future__ import annotations

import json

import pytest

from cli_helpers import Cli
from store import Store, errors

MiB = 1 << 20


@pytest.fixture
def small(tmp_path) -> Cli:
    """A store whose map is 1 MiB (kept in its marker: every process maps it so)."""
    with Store.open(tmp_path / "store", create=True, map_size=MiB) as st:
        st.create_queue("q")
    return Cli(tmp_path / "store", tmp_path / "xdg")


def _depth(cli: Cli, queue: str = "q") -> int:
    return cli.json("queue", "show", queue)["depth"]


def test_a_full_map_refuses_puts_with_exit_8_and_keeps_serving_gets(small):
    body = b"x" * 1000
    refused = None
    for _ in range(100):  # 100 batches of 50 KB cannot fit in 1 MiB
        r = small.subprocess("put", "q", "-", "--count", "50", "-q", input=body)
        if r.code != 0:
            refused = r
            break
    assert refused is not None and refused.code == 8, refused
    assert refused.err_lines == [f"mqcli: error: the store at {small.store} is full (its map is "
                                 f"used up); get or purge messages [MQ_ERROR_STORE_FULL]"]
    depth = _depth(small)
    assert depth > 0 and depth % 50 == 0  # whole batches only

    r = small.subprocess("put", "q", "--lines", "-", input=b"y" * 1000 + b"\n" + b"z" * 1000 + b"\n" * 300)
    assert r.code == 8 and _depth(small) == depth  # a --lines batch: all or nothing
    r = small.subprocess("get", "q", "--count", "10", "-o", "body")
    assert r.code == 0 and r.stdout == (body + b"\n") * 10
    assert small.subprocess("check", "-q").code == 0
    assert small.subprocess("get", "q", "--all", "-o", "body").code == 0
    assert _depth(small) == 0
    # room again — after one more commit: LMDB reuses the pages a commit freed only once the
    # next commit has replaced the snapshot that still uses them (its previous meta page)
    assert small.subprocess("put", "q", "small").code == 0
    assert small.subprocess("put", "q", "-", "--count", "50", "-q", input=body).code == 0
    assert small.subprocess("check", "-q").code == 0


def test_a_store_at_its_quota_refuses_puts_and_keeps_serving_gets(cli):
    cli.ok("qmgr", "set", "--quota", "1KiB", "-q")
    assert cli.subprocess("put", "q", "-", "--count", "4", "-q", input=b"a" * 256).code == 0
    r = cli.subprocess("put", "q", "b")
    assert r.code == 8 and "store quota of 1024 bytes would be exceeded" in r.stderr, r
    assert cli.subprocess("get", "q", "-o", "body").stdout == b"a" * 256 + b"\n"
    assert cli.subprocess("put", "q", "b").code == 0


def test_the_default_max_message_size_is_4_mib(cli):
    assert cli.json("info")["max_message_size"] == 4 * MiB
    assert cli.subprocess("put", "q", "-", "-q", input=b"m" * (4 * MiB)).code == 0
    r = cli.subprocess("put", "q", "-", input=b"m" * (4 * MiB + 1))
    assert r.code == 8 and r.stdout == b"", r
    assert r.err_lines == [
        f"mqcli: error: the message body is {4 * MiB + 1} bytes, more than the store's "
        f"max-message-size of {4 * MiB} bytes (`mqcli qmgr set --max-message-size`) "
        f"[MQ_ERROR_INSUFFICIENT_RESOURCES]"]
    got = cli.subprocess("get", "q", "-o", "body", "--delimiter", "")
    assert got.stdout == b"m" * (4 * MiB)
    assert _depth(cli) == 0


def test_max_message_size_applies_to_every_way_of_putting(cli, tmp_path):
    doc = cli.json("qmgr", "set", "--max-message-size", "1KiB")
    assert doc["max_message_size"] == 1024
    assert cli.subprocess("info", "-o", "json").json()["max_message_size"] == 1024  # it is kept
    r = cli.subprocess("put", "q", "-", "-o", "json", input=b"k" * 1024)
    assert r.code == 0
    stored = r.json()
    origin = stored["msg_id"].rsplit("\\", 1)[0]
    # records of msg_ids not in the store (one that is would be skipped, not refused)
    record = dict(stored, msg_id=f"{origin}\\1000")
    big = dict(stored, msg_id=f"{origin}\\1001", body="k" * 1025)

    def refused(*args, input=None):
        r = cli.subprocess(*args, input=input)
        assert r.code == 8 and "[MQ_ERROR_INSUFFICIENT_RESOURCES]" in r.stderr, (args, r)
        assert _depth(cli) == 1, args  # nothing of the batch was stored

    refused("put", "q", "-", "--count", "3", input=b"k" * 1025)
    refused("put", "q", "--lines", "-", input=b"ok\n" + b"k" * 1025 + b"\n")
    refused("put", "q", "--jsonl", "-", input=(json.dumps(record) + "\n" + json.dumps(big) + "\n").encode())
    tx = cli.subprocess("queue", "create", "tq", "--transactional", "-q")
    assert tx.code == 0
    t = cli.subprocess("tx", "begin").out.strip()
    r = cli.subprocess("put", "tq", "-", "--tx", t, input=b"k" * 1025)
    assert r.code == 8, r
    (tmp_path / "big.jsonl").write_text(json.dumps(dict(big, queue="q")) + "\n")
    refused("import", tmp_path / "big.jsonl")
    refused("put", "q", "-", "--confirm-id", "5", input=b"k" * 1025)

    assert cli.subprocess("qmgr", "set", "--max-message-size", "2KiB", "-q").code == 0
    assert cli.subprocess("put", "q", "-", "-q", input=b"k" * 1025).code == 0


@pytest.mark.parametrize("size", ["0", "5GiB", "lots"])
def test_an_impossible_max_message_size_is_a_usage_error(cli, size):
    r = cli.fails(2, "qmgr", "set", "--max-message-size", size)
    assert "max-message-size" in r.stderr
    assert cli.json("info")["max_message_size"] == 4 * MiB


def test_the_library_raises_message_too_large_with_exit_8(tmp_path):
    with Store.open(tmp_path / "s", create=True) as st:
        st.create_queue("q")
        st.set_qmgr(max_message_size=10)
        with pytest.raises(errors.MessageTooLarge) as info:
            st.put("q", b"x" * 11)
        assert isinstance(info.value, errors.StoreQuotaExceeded)
        assert (info.value.exit_code, info.value.status, info.value.code) == (
            8, "MQ_ERROR_INSUFFICIENT_RESOURCES", "0xC00E0027")
        assert st.put("q", b"x" * 10).size == 10
        assert st.info().max_message_size == 10
