"""`--where SELECTOR` on the operators' commands the SPEC lists with it besides get, browse and
move: export, queue purge and undo --all/--older-than."""

import json

from store import NewMessage, Store

REGIONS = ["eu", "us", "ap"]


def fill(cli, n=12):
    with Store.open(cli.store) as st:
        st.put_many("q", [NewMessage(f"m{i:02d}".encode(), props={"region": REGIONS[i % 3]}) for i in range(n)])


def eu(n=12):
    return sorted(f"m{i:02d}" for i in range(n) if REGIONS[i % 3] == "eu")


def test_export_where_writes_only_the_selected_messages(cli, tmp_path):
    fill(cli)
    dump = tmp_path / "eu.jsonl"
    r = cli.ok("export", "q", "--where", "props.region = 'eu'", "--to", str(dump))
    records = [json.loads(line) for line in dump.read_text().splitlines()]
    assert sorted(d["body"] for d in records if "body" in d) == eu()
    assert f"exported {len(eu())} messages" in r.stderr
    assert len(cli.jsonl("browse", "q", "-o", "jsonl")) == 12  # an export takes nothing
    cli.fails(2, "export", "q", "--where", "region ==")


def test_queue_purge_where_removes_only_the_selected_messages_and_dry_run_counts_them(cli):
    fill(cli)
    assert cli.json("queue", "purge", "q", "--where", "props.region = 'eu'", "--dry-run") == {
        "queue": "q", "would_remove": len(eu()), "dry_run": True}
    assert len(cli.jsonl("browse", "q", "-o", "jsonl")) == 12
    assert cli.json("queue", "purge", "q", "--where", "props.region = 'eu'", "--yes") == {
        "queue": "q", "removed": len(eu())}
    left = sorted(m["body"] for m in cli.jsonl("browse", "q", "-o", "jsonl"))
    assert left == sorted(set(f"m{i:02d}" for i in range(12)) - set(eu()))
    assert cli.ok("check").code == 0


def test_undo_all_where_releases_only_the_selected_in_flight_messages(cli):
    fill(cli)
    held = cli.jsonl("get", "q", "--all", "--confirm-id", "7", "-o", "jsonl")
    assert len(held) == 12
    assert cli.json("undo", "--all", "--where", "props.region = 'eu'")["undone"] == len(eu())
    states = {m["body"]: m["state"] for m in cli.jsonl("browse", "q", "--state", "all", "-o", "jsonl")}
    assert sorted(b for b, s in states.items() if s == "available") == eu()
    assert sum(s == "get-unconfirmed" for s in states.values()) == 12 - len(eu())
    cli.fails(2, "undo", "q", "--confirm-id", "7", "--where", "priority = 3")
