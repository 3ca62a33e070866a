"""A RecordView (store/records.py) reads every field a selector uses as the full decode does:
the `--where` scan tests records through it and decodes only the matches."""

from hypothesis import given, settings
from hypothesis import strategies as st

from store.records import Message, RecordView, decode, encode
from store.selectors import FIELDS

texts = st.text(max_size=12)
optional = st.none() | texts


@st.composite
def messages(draw):
    return Message(
        draw(st.binary(max_size=40)), "q", draw(st.sampled_from(["available", "locked-browse"])),
        draw(st.integers(0, 7)), draw(st.integers(0, 1 << 40)), 1, draw(st.binary(min_size=16, max_size=16)),
        draw(st.integers(0, (1 << 32) - 1)), 0, draw(st.integers(0, 1 << 62)),
        draw(st.none() | st.integers(1, 1 << 62)), draw(optional), draw(texts),
        draw(st.dictionaries(texts, texts, max_size=4)), draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        draw(st.booleans()), draw(st.booleans()), False, True, draw(optional),
        draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFFFF)),
        dead_letter_reason=draw(optional), original_queue=draw(optional))


@settings(max_examples=300, deadline=None)
@given(messages(), st.lists(texts, max_size=3))
def test_a_record_view_reads_what_the_decode_reads(m, names):
    raw = encode(m)
    full, view = decode(raw, "q"), RecordView(raw, "q")
    now = 1 << 62
    for name, (_, read) in FIELDS.items():
        assert read(view, now) == read(full, now), name
    for name in [*names, *full.props]:
        assert view.props.get(name) == full.props.get(name), name
    assert view.body == full.body and view.message() == full
