"""CLI: link add/list/remove/keygen and outgoing list/show/hold/resume (docs/design.md#store-and-forward)."""

import stat

TO_QM2 = "DIRECT=OS:qm2\\orders"


def linked(cli, tmp_path):
    key = tmp_path / "qm2.key"
    assert cli.json("link", "keygen", str(key)) == {"key_file": str(key), "mode": "0600"}
    link = cli.json("link", "add", "qm2", "127.0.0.1:7000", "--key-file", str(key))
    assert (link["name"], link["address"], link["peer_guid"]) == ("qm2", "127.0.0.1:7000", None)
    return key


def test_link_keygen_writes_a_0600_key_and_refuses_to_overwrite_it(cli, tmp_path):
    key = linked(cli, tmp_path)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_text().strip()) == 64
    assert "never overwritten" in cli.fails(2, "link", "keygen", str(key)).stderr


def test_link_add_refuses_a_bad_address_a_duplicate_and_an_unsafe_key(cli, tmp_path):
    key = linked(cli, tmp_path)
    cli.fails(2, "link", "add", "qm3", "127.0.0.1", "--key-file", str(key))
    cli.fails(2, "link", "add", "QM2", "127.0.0.1:1", "--key-file", str(key))
    cli.fails(2, "link", "add", "bad\\name", "127.0.0.1:1", "--key-file", str(key))
    key.chmod(0o644)
    assert "chmod 600" in cli.fails(11, "link", "add", "qm3", "127.0.0.1:1", "--key-file", str(key)).stderr


def test_link_list_and_remove(cli, tmp_path):
    linked(cli, tmp_path)
    assert [link["name"] for link in cli.json("link", "list")] == ["qm2"]
    cli.ok("link", "remove", "qm2")
    assert cli.json("link", "list") == []
    cli.fails(6, "link", "remove", "qm2")


def test_a_put_to_a_linked_queue_manager_shows_in_outgoing_not_in_queue_list(cli, tmp_path):
    linked(cli, tmp_path)
    put = cli.put(TO_QM2, "hello")
    assert put["queue"] == TO_QM2
    assert TO_QM2 not in [q["name"] for q in cli.json("queue", "list")]
    (row,) = cli.json("outgoing", "list")
    assert (row["name"], row["state"], row["messages"], row["bytes"], row["link"], row["why"]) == \
        (TO_QM2, "active", 1, 5, "qm2", None)
    assert row["oldest_age_s"] >= 0
    assert [m["msg_id"] for m in cli.json("browse", TO_QM2)] == [put["msg_id"]]
    assert "active" in cli.ok("outgoing", "list").out


def test_outgoing_hold_and_resume_change_the_state_and_the_history(cli, tmp_path):
    linked(cli, tmp_path)
    cli.put(TO_QM2, "hello")
    assert cli.json("outgoing", "hold", TO_QM2)["state"] == "on-hold"
    shown = cli.json("outgoing", "show", TO_QM2)
    assert shown["why"].startswith("on hold") and [h["event"] for h in shown["history"]] == ["hold"]
    assert cli.json("outgoing", "resume", TO_QM2)["state"] == "active"
    assert "resume  by an operator" in cli.ok("outgoing", "show", TO_QM2).out


def test_http_and_multicast_destinations_say_why_they_are_not_sent(cli):
    cli.put("DIRECT=HTTP://web/msmq/q", "x")
    cli.put("MULTICAST=224.1.2.3:8080", "x")
    rows = {r["name"]: r for r in cli.json("outgoing", "list")}
    assert rows["DIRECT=HTTP://web/msmq/q"]["state"] == "locked"
    assert "[MS-MQQB] 3.1.7.12" in rows["MULTICAST=224.1.2.3:8080"]["why"]


def test_outgoing_show_of_a_queue_that_is_not_outgoing_exits_6(cli):
    assert "not an outgoing queue" in cli.fails(6, "outgoing", "show", "q").stderr


def test_an_ipv6_link_address_is_shown_in_brackets_as_listen_prints_its_own(cli, tmp_path):
    key = linked(cli, tmp_path)
    cli.ok("link", "add", "qm6", "[::1]:5000", "--key-file", str(key), "-q")
    (link,) = [x for x in cli.json("link", "list") if x["name"] == "qm6"]
    assert (link["host"], link["port"], link["address"]) == ("::1", 5000, "[::1]:5000")
    assert b"[::1]:5000" in cli.ok("link", "list").stdout
