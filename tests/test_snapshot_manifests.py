"""A snapshot is read only as its manifest says, and its manifest only whole (docs/design.md#pipeline,
"Many hosts: snapshots"); all of it before Spark starts, so none of these tests starts Spark:

- a manifest damaged in any field (a missing or mistyped field, a number out of range, a
  format this mqcli does not read, a file a snapshot does not hold, JSON nested without end)
  is refused with exit 11 and one line naming the snapshot and the field, never exit 1;
- a copy whose files or own store identity (GUID, name, SequentialID) differ from its manifest
  is refused by the driver's check, naming what differs: a data file swapped for another
  store's, with the manifest's checksum and GUID made to match, is not read as the first store.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import invoke
from store import Store
from store.analytics.locate import MANIFEST, STORE_DIR, check_manifest, own_identity
from store.analytics.pipeline import Source
from store.analytics.snapshots import identities, take
from store.errors import StoreCorrupt


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path, monkeypatch):
    """Local copies of snapshots go under this test's own $TMPDIR, never a shared one."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def _snapshot(tmp_path: Path, name: str = "qm1", into: str = "snaps", messages: int = 1) -> Path:
    """A store `name` with a queue and `messages` messages, and one snapshot of it under `into`."""
    with Store.open(tmp_path / name, create=True, name=name) as st:
        st.create_queue("orders")
        for i in range(messages):
            st.put("orders", b"m%d" % i)
        snapshot, _ = take(st, tmp_path / into)
    return snapshot


def _edit(snapshot: Path, change: Callable[[dict[str, Any]], object]) -> None:
    file = snapshot / MANIFEST
    manifest = json.loads(file.read_text())
    change(manifest)
    file.write_text(json.dumps(manifest))


def _refused(root: Path) -> str:
    """`mqcli analyze health --snapshots ROOT` ends with exit 11 and one line: that line."""
    result = invoke(["analyze", "health", "--snapshots", root])
    assert result.code == 11, result
    assert len(result.err_lines) == 1, result
    return result.err_lines[0]


def _drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def change(m: dict[str, Any]) -> None:
        for key in path[:-1]:
            m = m[key]
        del m[path[-1]]
    return change


def _set(value: object, *path: str) -> Callable[[dict[str, Any]], None]:
    def change(m: dict[str, Any]) -> None:
        for key in path[:-1]:
            m = m[key]
        m[path[-1]] = value
    return change


DAMAGED = {  # a manifest edit -> what the one-line error says of it
    "an entry without sha256": (_drop("files", "data.mdb", "sha256"),
                                "'files' entry 'data.mdb': 'sha256' is missing"),
    "an entry that is a string": (_set("80b5", "files", "data.mdb"),
                                  "'files' entry 'data.mdb' must be an object, got a JSON string"),
    "a guid that is an object": (_set({"a": 1}, "guid"), "'guid' must be a GUID's text, got a JSON object"),
    "a guid that is a list": (_set([1], "guid"), "'guid' must be a GUID's text, got a JSON array"),
    "a guid that is no GUID": (_set("qm1", "guid"), "'guid' must be a GUID's text"),
    "no name": (_drop("name"), "'name' is missing"),
    "a name that is a number": (_set(7, "name"), "'name' must be text, got a JSON number (7)"),
    "a file name with a NUL": (_set({"size": 1, "sha256": "0" * 64}, "files", "a\0b"),
                               "'files' names 'a\\x00b', which is no file of a snapshot"),
    "lock.mdb listed": (_set({"size": 1, "sha256": "0" * 64}, "files", "lock.mdb"), "'files' names 'lock.mdb'"),
    "a file name outside": (_set({"size": 1, "sha256": "0" * 64}, "files", "../data.mdb"), "'files' names '../data.mdb'"),
    "no marker listed": (_drop("files", "mqcli-store.json"), "'files' has no 'mqcli-store.json'"),
    "files a list": (_set([], "files"), "'files' must be an object naming each file, got a JSON array"),
    "an unknown format": (_set(99, "format"), "'format' is 99, and this mqcli reads format 1 only"),
    "no format": (_drop("format"), "'format' is missing"),
    "a format that is text": (_set("1", "format"), "'format' must be a whole number, got a JSON string"),
    "a store path that is relative": (_set("qm1", "store"), "'store' must be an absolute path, got 'qm1'"),
    "a store path that is null": (_set(None, "store"), "'store' must be an absolute path, got null"),
    "a negative sequential_id": (_set(-1, "sequential_id"), "'sequential_id' must be 0 to 18446744073709551615"),
    "a sequential_id that is a bool": (_set(True, "sequential_id"), "'sequential_id' must be a whole number"),
    "a size that is text": (_set("45056", "files", "data.mdb", "size"),
                            "'files' entry 'data.mdb': 'size' must be a whole number (bytes), got a JSON string"),
    "a sha256 that is short": (_set("00", "files", "data.mdb", "sha256"),
                               "'files' entry 'data.mdb': 'sha256' must be 64 hex digits, got '00'"),
    "a taken that is no time": (_set("yesterday", "taken"), "'taken' must be a UTC time"),
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_manifest_is_refused_naming_the_field(tmp_path, damage):
    change, why = DAMAGED[damage]
    snapshot = _snapshot(tmp_path)
    _edit(snapshot, change)
    line = _refused(tmp_path / "snaps")
    assert line.startswith(f"mqcli: error: the snapshot manifest {snapshot / MANIFEST} is damaged: "), line
    assert why in line and line.endswith("take the snapshot again [MQ_ERROR_STORE_CORRUPT]"), line


@pytest.mark.parametrize("nested", ["[" * 100_000 + "]" * 100_000,
                                    '{"format": 1, "z": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_a_manifest_nested_without_end_is_refused(tmp_path, nested):
    snapshot = _snapshot(tmp_path)
    (snapshot / MANIFEST).write_text(nested)  # 200 kB: far under the size bound
    assert _refused(tmp_path / "snaps") == (f"mqcli: error: the snapshot manifest {snapshot / MANIFEST} is "
                                            f"unreadable: it nests deeper than a manifest does [MQ_ERROR_STORE_CORRUPT]")


@pytest.mark.parametrize("taken_us", ['"abc"', "null", "[1]", "1e999", "1.5", "true", "-1"])
def test_one_of_two_snapshots_of_a_store_with_a_bad_time_is_refused(tmp_path, taken_us):
    first = _snapshot(tmp_path)
    second = first.with_name(first.name + "-2")  # the next hour's snapshot of the same store
    shutil.copytree(first, second)
    text = re.sub(r'"taken_us": -?\d+', f'"taken_us": {taken_us}', (first / MANIFEST).read_text())
    (second / MANIFEST).write_text(text)
    line = _refused(tmp_path / "snaps")
    assert f"the snapshot manifest {second / MANIFEST} is damaged: 'taken_us' must be" in line, line


def _check(root: Path) -> Source:
    """What `mqcli analyze --snapshots ROOT` runs before Spark starts."""
    source = Source(snapshots=str(root))
    source.check()
    return source


def test_a_snapshot_as_taken_passes_and_its_manifest_is_its_store(tmp_path):
    snapshot = _snapshot(tmp_path, messages=3)
    manifest = check_manifest(json.loads((snapshot / MANIFEST).read_text()))
    with Store.open(tmp_path / "qm1") as st, st.as_is():
        info = st.info()
    assert own_identity(snapshot / STORE_DIR) == {"guid": info.guid, "name": "qm1", "sequential_id": info.sequential_id}
    assert {k: manifest[k] for k in ("guid", "name", "sequential_id")} == own_identity(snapshot / STORE_DIR)
    assert manifest["files"]["data.mdb"]["size"] == (snapshot / STORE_DIR / "data.mdb").stat().st_size
    assert _check(tmp_path / "snaps").names == {info.guid: "qm1"}
    assert _check(tmp_path / "snaps").names == {info.guid: "qm1"}  # the local copy made above, reused


def _sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def test_a_guid_edited_in_the_manifest_alone_is_refused_before_spark(tmp_path):
    snapshot = _snapshot(tmp_path)
    other = json.loads((_snapshot(tmp_path, "qm2", into="other") / MANIFEST).read_text())["guid"]
    guid = json.loads((snapshot / MANIFEST).read_text())["guid"]
    _edit(snapshot, _set(other, "guid"))
    with pytest.raises(StoreCorrupt) as caught:
        _check(tmp_path / "snaps")
    assert caught.value.message == (f"the snapshot {snapshot} does not match its manifest: its store has guid "
                                    f"'{guid}' (the manifest says '{other}'); a damaged or forged snapshot is not read")


def test_a_wrong_sequential_id_or_size_is_refused(tmp_path):
    snapshot = _snapshot(tmp_path, messages=2)
    _edit(snapshot, _set(999_999, "sequential_id"))
    with pytest.raises(StoreCorrupt, match=r"its store has sequential_id 2 \(the manifest says 999999\)"):
        _check(tmp_path / "snaps")
    _edit(snapshot, _set(2, "sequential_id"))
    size = (snapshot / STORE_DIR / "data.mdb").stat().st_size
    _edit(snapshot, _set(size - 4096, "files", "data.mdb", "size"))
    with pytest.raises(StoreCorrupt) as caught:
        _check(tmp_path / "snaps")
    assert caught.value.message == (f"the snapshot file {snapshot / STORE_DIR / 'data.mdb'} is {size} bytes, its "
                                    f"manifest says {size - 4096} (damaged or cut short in transfer); copy the "
                                    f"snapshot again")
    _edit(snapshot, _set(size, "files", "data.mdb", "size"))
    assert len(_check(tmp_path / "snaps").names) == 1


def test_a_data_file_swapped_for_another_stores_is_refused(tmp_path):
    """Store B's data.mdb in store A's snapshot, the manifest's checksum, size and GUID made
    B's: the copy's own name and SequentialID still say it is not the store the manifest names."""
    snapshot = _snapshot(tmp_path, "A", messages=2)
    b_snapshot = _snapshot(tmp_path, "B", into="other", messages=5)
    data = snapshot / STORE_DIR / "data.mdb"
    data.write_bytes((b_snapshot / STORE_DIR / "data.mdb").read_bytes())
    b_guid = json.loads((b_snapshot / MANIFEST).read_text())["guid"]

    def forge(m: dict[str, Any]) -> None:
        m["files"]["data.mdb"] = {"size": data.stat().st_size, "sha256": _sha256(data)}
        m["guid"] = b_guid
    _edit(snapshot, forge)
    with pytest.raises(StoreCorrupt) as caught:
        _check(tmp_path / "snaps")
    assert caught.value.exit_code == 11
    assert caught.value.message == (f"the snapshot {snapshot} does not match its manifest: its store has name 'B' "
                                    f"(the manifest says 'A'); sequential_id 5 (the manifest says 2); a damaged or "
                                    f"forged snapshot is not read")
    line = _refused(tmp_path / "snaps")  # and so `analyze`, before Spark starts
    assert line == f"mqcli: error: {caught.value.message} [MQ_ERROR_STORE_CORRUPT]"


def test_snapshots_of_two_stores_with_one_guid_are_said_not_dropped_silently(tmp_path):
    # a store and its copy (cp -a, a backup restored on another host or path: or the same
    # store moved, or its host renamed) snapshotted into one DIR: the newest was read and the
    # other's figures dropped without a word. The newest is still read (a renamed host or a
    # moved store must not stop the analysis), and the left-out snapshot is named
    first = _snapshot(tmp_path)
    shutil.copytree(tmp_path / "qm1", tmp_path / "copy")  # cp -a, or a backup restored elsewhere
    with Store.open(tmp_path / "copy") as st:
        st.put("orders", b"only in the copy")
        second, _ = take(st, tmp_path / "snaps")
    manifest = json.loads((first / MANIFEST).read_text())
    source = _check(tmp_path / "snaps")
    assert source.notes == [
        f"snapshots of queue manager {manifest['guid']} in {tmp_path / 'snaps'} were taken of more than one store "
        f"(a copy of it, a restored backup, or the store moved or its host renamed): read the newest, {second.name} "
        f"(store {tmp_path / 'copy'} on {manifest['host']}); left out {first.name} (store {tmp_path / 'qm1'} on "
        f"{manifest['host']})"]
    assert [w.path for w in identities(tmp_path / "snaps")] == [str(tmp_path / "copy")]
    with Store.open(tmp_path / "copy") as st:  # one store's snapshots, however many: its history, unsaid
        take(st, tmp_path / "more")
        take(st, tmp_path / "more")
    assert _check(tmp_path / "more").notes == []
