"""The library refuses arguments of the wrong type with InvalidArgument (exit 2 in the CLI)
naming the argument, not a TypeError from deep inside, and stores nothing (SPEC §6: bad input
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
    ({"wait": "1"}, "wait must be a number of seconds or None (forever), got '1'"),
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
