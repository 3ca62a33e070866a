"""`mqcli redrive`: dead letters of mixed reasons back to their original queues (or --to),
fresh; one whose original queue vanished stays and is reported; --dry-run changes nothing;
`browse dead-letter` shows reason, MQ status, original queue and time."""

import time

from store import Store


def dead_letters(cli):
    """A max-backouts dead letter from `pay`, an expired one from `q`, an expired one from `gone`
    (then deleted), one of each in `dead-letter`."""
    cli.ok("queue", "create", "pay", "--max-backouts", "1", "-q")
    cli.ok("queue", "create", "gone", "-q")
    cli.put("pay", "poison", "--prop", "k=v")
    cli.ok("get", "pay", "--confirm-id", "5")
    cli.ok("undo", "pay", "--confirm-id", "5")
    cli.put("q", "late", "--ttl", "1ms")
    cli.put("gone", "orphan", "--ttl", "1ms")
    time.sleep(0.01)
    cli.ok("sweep", "-q")
    cli.ok("queue", "delete", "gone", "--yes", "-q")


def test_browse_dead_letter_shows_reason_status_original_queue_and_time(cli):
    dead_letters(cli)
    text = cli.ok("browse", "dead-letter").out
    assert "dead_letter_reason='max-backouts' status=MQMSG_CLASS_NACK_RECEIVE_REJECTED original_queue=pay dead_lettered=20" in text
    assert "dead_letter_reason='expired' status=MQ_ERROR_MESSAGE_TIMED_OUT original_queue=q dead_lettered=20" in text
    records = cli.jsonl("browse", "dead-letter")
    assert {r["dead_letter_status"] for r in records} == {"MQMSG_CLASS_NACK_RECEIVE_REJECTED", "MQ_ERROR_MESSAGE_TIMED_OUT"}
    assert all(r["props"]["mqcli.dead_letter_time"] >= r["put_time"] for r in records)


def test_redrive_moves_mixed_reasons_home_fresh_and_leaves_a_vanished_queues_letter(cli):
    dead_letters(cli)
    dry = cli(*"redrive --dry-run -o json".split())
    assert dry.code == 0 and dry.json() == {"dead_letter_queue": "dead-letter", "would_move": {"pay": 1, "q": 1},
                                            "stayed": {"gone": 1}, "dry_run": True}
    assert len(cli.jsonl("browse", "dead-letter")) == 3  # nothing moved
    result = cli("redrive", "-o", "json")
    assert result.code == 0, result
    assert result.json() == {"dead_letter_queue": "dead-letter", "moved": {"pay": 1, "q": 1},
                             "stayed": {"gone": 1}, "dry_run": False}
    assert "1 dead letter stays in dead-letter: queue 'gone' no longer exists" in result.stderr
    for queue, body in (("pay", "poison"), ("q", "late")):
        [m] = cli.jsonl("browse", queue)
        assert m["body"] == body and m["backouts"] == 0 and "dead_letter_reason" not in m
        assert "mqcli.dead_letter_time" not in m["props"]
    assert cli.jsonl("browse", "pay")[0]["props"] == {"k": "v"}
    [left] = cli.jsonl("browse", "dead-letter")
    assert left["original_queue"] == "gone" and left["body"] == "orphan"
    # fresh: one more backout does not send it straight back (max-backouts 1 counts from 0)
    cli.ok("get", "pay", "--confirm-id", "6")
    cli.ok("undo", "pay", "--confirm-id", "6")
    assert [m["body"] for m in cli.jsonl("browse", "dead-letter")] == ["orphan", "poison"] or \
        [m["body"] for m in cli.jsonl("browse", "dead-letter")] == ["poison", "orphan"]


def test_redrive_where_and_to_moves_only_the_selected_to_one_queue(cli):
    dead_letters(cli)
    cli.ok("queue", "create", "retry", "-q")
    text = cli.ok("redrive", "--where", "dead_letter_reason = 'expired'", "--to", "retry").out
    assert "moved to retry  2" in text
    assert sorted(m["body"] for m in cli.jsonl("browse", "retry")) == ["late", "orphan"]
    assert [m["body"] for m in cli.jsonl("browse", "dead-letter")] == ["poison"]


def test_redrive_refuses_a_queue_that_is_no_dead_letter_queue(cli):
    cli.fails(2, "redrive", "q")
    cli.fails(2, "redrive", "--to", "dead-letter-tx")
    cli.fails(6, "redrive", "--to", "nowhere")


def test_a_record_stored_before_dead_letter_times_still_redrives(cli):
    # a dead letter as older versions stored it: reason and original queue, no time property
    from dataclasses import replace

    with Store.open(cli.store) as st:
        st.put("q", b"old")
        [m] = st.browse("q")
        st.import_messages("dead-letter", [replace(m, msg_n=m.msg_n + 100, dead_letter_reason="expired",
                                                   original_queue="q", props={})])
    assert "dead_lettered=-" in cli.ok("browse", "dead-letter").out
    assert cli.json("redrive")["moved"] == {"q": 1}


def test_a_redrive_whose_later_batch_fails_says_what_the_earlier_ones_moved(cli):
    # it moves 1,000 dead letters a commit: a later batch refused (the queue's quota) printed
    # only the error, and a script retrying on exit 7 could not tell what had gone home
    cli.ok("put", "q", "m", "--count", "2500", "--ttl", "1ms", "-q")
    time.sleep(0.01)
    cli.ok("sweep", "-q")
    cli.ok("queue", "set", "q", "--quota", "1500", "-q")
    r = cli("redrive", "-o", "json")
    assert r.code == 7, r
    assert r.json() == {"dead_letter_queue": "dead-letter", "moved": {"q": 1000}, "failed": True}
    assert cli.json("queue", "show", "q")["depth"] == 1000
    assert cli.json("queue", "show", "dead-letter")["depth"] == 1500


def test_a_dead_letter_is_never_refused_for_want_of_room(cli):
    # refusing it would lose the message: the dead-letter queue takes it past its own quota
    cli.ok("queue", "set", "dead-letter", "--quota", "10", "-q")
    cli.put("q", "x" * 50, "--ttl", "1ms")
    time.sleep(0.01)
    cli.ok("sweep", "-q")
    shown = cli.json("queue", "show", "dead-letter")
    assert (shown["depth"], shown["bytes"], shown["quota"]) == (1, 50, 10)
