"""Queue definitions travel with data: export writes one definition record per exported user
queue, import into a fresh store makes the queues as they were, leaves an existing one as it
is (and says so), and a dump without definitions still imports."""

from cli_helpers import Cli


def test_export_then_import_into_a_fresh_store_restores_the_definitions(cli, tmp_path):
    cli.ok("queue", "create", "pay", "--label", "payments", "--quota", "100000", "--max-backouts", "3",
           "--journal", "-q")
    cli.ok("queue", "create", "ledger", "--transactional", "-q")
    cli.put("pay", "p1")
    dump = tmp_path / "dump.jsonl"
    cli.ok("export", "pay", "ledger", "--to", str(dump))
    lines = dump.read_text().splitlines()
    assert lines[0] == ('{"queue_definition":{"name":"pay","label":"payments","quota":100000,'
                        '"transactional":false,"journal":true,"max_backouts":3}}')
    assert lines[2].startswith('{"queue_definition":{"name":"ledger"')
    fresh = Cli(tmp_path / "fresh", tmp_path / "xdg2")
    fresh.ok("init", "-q")
    result = fresh("import", str(dump), "-o", "json")
    assert result.code == 0 and result.json() == {"imported": 1, "skipped": 0}, result
    assert "created queue 'pay' from its definition" in result.stderr
    for name in ("pay", "ledger"):
        want = cli.json("queue", "show", name)
        got = fresh.json("queue", "show", name)
        assert {k: got[k] for k in ("label", "quota", "transactional", "journal", "max_backouts")} == \
            {k: want[k] for k in ("label", "quota", "transactional", "journal", "max_backouts")}
    assert [m["body"] for m in fresh.jsonl("browse", "pay")] == ["p1"]


def test_import_leaves_an_existing_queue_as_it_is_and_says_so(cli, tmp_path):
    cli.ok("queue", "create", "pay", "--max-backouts", "3", "-q")
    dump = tmp_path / "dump.jsonl"
    cli.ok("export", "pay", "--to", str(dump))
    other = Cli(tmp_path / "other", tmp_path / "xdg2")
    other.ok("init", "-q")
    other.ok("queue", "create", "pay", "--max-backouts", "9", "-q")
    result = other("import", str(dump))
    assert result.code == 0, result
    assert "queue 'pay' exists: left as it is (its definition in the dump is not applied)" in result.stderr
    assert other.json("queue", "show", "pay")["max_backouts"] == 9


def test_a_dump_without_definitions_still_imports(cli, tmp_path):
    cli.put("q", "m")
    dump = tmp_path / "dump.jsonl"
    cli.ok("export", "q", "--to", str(dump))
    old = tmp_path / "old.jsonl"
    old.write_text("".join(line + "\n" for line in dump.read_text().splitlines() if "queue_definition" not in line))
    other = Cli(tmp_path / "other", tmp_path / "xdg2")
    other.ok("init", "-q")
    assert other.json("import", str(old)) == {"imported": 1, "skipped": 0}


def test_a_bad_definition_line_is_bad_data_naming_the_line_and_stores_nothing(cli, tmp_path):
    dump = tmp_path / "bad.jsonl"
    dump.write_text('{"queue_definition":{"name":"x","max_backouts":"3"}}\n')
    result = cli.fails(12, "import", str(dump))
    assert "line 1: queue_definition field 'max_backouts' has the wrong type" in result.stderr
    assert "x" not in [q["name"] for q in cli.json("queue", "list")]
