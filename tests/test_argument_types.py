"""The library refuses arguments of the wrong type with InvalidArgument (exit 2 in the CLI)
naming the argument, not a TypeError from deep inside, and stores nothing (README.md#exit-codes: bad input
gets a clear error and loses nothing)."""

import pytest

from store import NewMessage
from store.errors import InvalidArgument

PUT_FIELDS = [
    ("body", "text", "body must be bytes"),
    ("priority", "3", "priority must be an int 0..7, got str '3'"),
    ("priority", 3.5, "priority must be an int 0..7, got float 3.5"),
    ("correl_id", b"c", "correl_id must be a str or None, got bytes b'c'"),
    ("label", b"l", "label must be a str, got bytes b'l'"),
    ("props", {"k": 1}, "props must map str names to str values"),
    ("props", {1: "v"}, "props must map str names to str values"),
    ("props", ["k"], "props must be a dict or None, got list ['k']"),
    ("app_specific", "7", "app_specific must be an int, got str '7'"),
    ("ttl", "10", "ttl must be a number of seconds, got str '10'"),
    ("report_queue", 5, "report_queue must be a queue name (str) or None, got int 5"),
    ("label", "\ud800", "label is not valid text (it holds a lone surrogate): '\\ud800'"),
    ("correl_id", "c\udc00", "correl_id is not valid text (it holds a lone surrogate): 'c\\udc00'"),
    ("props", {"k": "\udc80"}, "a property is not valid text (it holds a lone surrogate): '\\udc80'"),
]


@pytest.mark.parametrize("field,value,said", PUT_FIELDS, ids=[f"{f}={v!r}" for f, v, _ in PUT_FIELDS])
def test_a_put_field_of_the_wrong_type_is_refused_and_nothing_is_stored(st, field, value, said):
    fields = {"body": b"ok", field: value}
    batch = [NewMessage(b"fine"), NewMessage(**fields)]
    with pytest.raises(InvalidArgument) as e:
        st.put_many("q", batch)
    assert str(e.value) == said
    with pytest.raises(InvalidArgument):
        st.put("q", **fields)
    assert st.queue_info("q").depth == 0 and st.info().sequential_id == 0


GET_ARGS = [
    ({"msg_id": 5}, "msg_id must be a str or None, got int 5"),
    ({"unique_id": 5}, "unique_id must be a str or None, got int 5"),
    ({"correl_id": b"c"}, "correl_id must be a str or None, got bytes b'c'"),
    ({"priority": "3"}, "priority must be an int or None, got str '3'"),
    ({"lookup_id": "5"}, "lookup_id must be an int or None, got str '5'"),
    ({"wait": "1"}, "wait must be a number of seconds, got str '1' (None waits forever)"),
    ({"confirm_id": 1, "lease": "5"}, "lease must be a number of seconds, got str '5'"),
]


@pytest.mark.parametrize("args,said", GET_ARGS, ids=[next(iter(a)) if len(a) == 1 else "lease" for a, _ in GET_ARGS])
def test_a_get_argument_of_the_wrong_type_is_refused_and_nothing_is_taken(st, args, said):
    st.put("q", b"x")
    with pytest.raises(InvalidArgument) as e:
        st.get("q", **{"wait": 0, **args})
    assert str(e.value) == said
    assert [m.body for m in st.browse("q")] == [b"x"]


def test_a_lease_without_a_confirm_id_is_refused(st):
    with pytest.raises(InvalidArgument, match="a lease goes with a confirm id: it bounds how long the put"):
        st.put("q", b"x", lease=5)
    st.put("q", b"x")
    with pytest.raises(InvalidArgument, match="a lease goes with a confirm id: it bounds how long the get"):
        st.get("q", wait=0, lease=5)
    assert [m.body for m in st.browse("q")] == [b"x"]


def test_counts_limits_and_queue_names_of_the_wrong_type_are_refused(st):
    with pytest.raises(InvalidArgument, match="count must be an int of at least 1, got '3'"):
        st.get_many("q", "3", wait=0)
    with pytest.raises(InvalidArgument, match="limit must be an int of at least 1, got '2'"):
        st.browse("q", limit="2")
    for call in (lambda: st.put(5, b"x"), lambda: st.get(5, wait=0), lambda: st.browse(5)):
        with pytest.raises(InvalidArgument, match="a queue name must be a str, got int 5"):
            call()


QUEUE_ATTRS = [
    ({"transactional": "no"}, "transactional must be True or False, got 'no'"),  # truthy: was stored
    ({"journal": "yes"}, "journal must be True or False, got 'yes'"),
    ({"label": 5}, "queue label must be a str, got int 5"),
    ({"quota": "5"}, "quota must be a byte count ≥ 0, got '5'"),
    ({"max_backouts": True}, "max-backouts must be 0..65535, got True"),
]


@pytest.mark.parametrize("attrs,said", QUEUE_ATTRS, ids=[next(iter(a)) for a, _ in QUEUE_ATTRS])
def test_queue_attributes_of_the_wrong_type_are_refused_not_stored(st, attrs, said):
    with pytest.raises(InvalidArgument) as e:
        st.create_queue("other", **attrs)
    assert str(e.value) == said
    with pytest.raises(InvalidArgument) as e:
        st.set_queue("q", **attrs)
    assert str(e.value) == said
    assert "other" not in [q.name for q in st.list_queues()]
    q = st.queue_info("q")
    assert (q.transactional, q.journal, q.label, q.quota, q.max_backouts) == (False, False, "", 0, 0)


def test_queue_manager_settings_of_the_wrong_type_are_refused(st):
    for kw, said in (({"name": 5}, "the queue manager name must be a str, got int 5"),
                     ({"throttled": "no"}, "throttled must be True or False, got 'no'"),
                     ({"max_message_size": "5"}, "max-message-size must be 1..4294967295 bytes, got '5'")):
        with pytest.raises(InvalidArgument) as e:
            st.set_qmgr(**kw)
        assert str(e.value) == said
    info = st.info()
    assert (info.name, info.throttled, info.max_message_size) == ("qm1", False, 4 << 20)


def test_move_undo_browse_states_and_export_check_their_arguments(st):
    st.create_queue("r")
    st.put("q", b"x")
    for call, said in ((lambda: list(st.move("q", 5)), "a queue name must be a str, got int 5"),
                       (lambda: list(st.move("q", "r", count="5")), "count must be an int of at least 1, got '5'"),
                       (lambda: list(st.move("q", "r", batch=0)), "batch must be an int of at least 1, got 0"),
                       (lambda: st.undo_inflight(older_than="5"), "older_than must be a number of seconds ≥ 0, got '5'"),
                       (lambda: st.browse("q", states=5), "states must be a state name or several, got int 5")):
        with pytest.raises(InvalidArgument) as e:
            call()
        assert str(e.value) == said
    assert [m.body for m in st.browse("q")] == [b"x"] and st.browse("r") == []
    assert [m.body for m in st.export_messages("q")] == [b"x"]  # one name, not its letters


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e300, 2.0 ** 32])
def test_a_duration_must_be_finite_and_at_most_136_years(st, value):
    for kwargs in ({"ttl": value}, {"confirm_id": 1, "lease": value}):
        with pytest.raises(InvalidArgument, match="finite number of seconds"):
            st.put("q", b"x", **kwargs)
    st.put("q", b"x")
    with pytest.raises(InvalidArgument, match="finite number of seconds"):
        st.get("q", wait=value)
    assert st.queue_info("q").depth == 1
    st.put("q", b"long-lived", ttl=2 ** 32 - 1)  # MSMQ's INFINITE still fits


def test_a_bool_is_no_priority(st):
    with pytest.raises(InvalidArgument, match="priority must be an int 0..7, got bool True"):
        st.put("q", b"x", priority=True)
    assert st.queue_info("q").depth == 0


def test_ports_and_sequence_numbers_are_ascii_digits_only():
    from store.arguments import is_decimal

    assert [is_decimal(t) for t in ("0", "7000", "")] == [True, True, False]
    assert [is_decimal(t) for t in ("²", "١", "１２", "-1", " 1")] == [False] * 5  # isdigit takes the first three
