"""Text tables show what they hold as text: a cell is never read as rich markup (a peer's error
text reaches `outgoing list`; `[/x]` in it made the table a MarkupError, exit 1)."""

from mqcli.render import render_table


def test_a_table_cell_is_shown_as_its_text_never_as_markup():
    for text in ("[/x] refused", "[bold red]FAKE[/] delivered", "[link=file:///etc]x[/link]"):
        out = render_table([{"error": text}], [("error", "error")])
        assert text in out
