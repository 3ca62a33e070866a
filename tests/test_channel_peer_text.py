"""What a peer says is shown escaped: anything that answers a link's address may send an ERROR
frame before it authenticates (docs/protocol.md §6), and its text becomes the outgoing queue's
last error and a history detail. `outgoing list` and `outgoing show` print it with its control
characters, escape sequences and bidirectional overrides escaped, as the error line does; their
JSON keeps the exact text."""

import json
import socket
import struct
import threading
import unicodedata

from channel_helpers import keygen, make_store, mqcli
from store.channel.frames import FrameType

HOSTILE = "\x1b]0;pwned title\x07\x1b[2J\x1b[1;31mFAKE: all messages delivered\x1b[0m \u202eevil\n"
TO_EVIL = "DIRECT=OS:evil\\q"


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c not in "\n" and unicodedata.category(c) in ("Cc", "Cf")]


def test_a_peers_error_text_is_shown_escaped_and_kept_exact_in_json(tmp_path):
    a = tmp_path / "a"
    make_store(a, "qmA")
    payload = struct.pack(">H", 1) + HOSTILE.encode("utf-8")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)

    def answer() -> None:  # not a listener: it answers the first HELLO with an ERROR and closes
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            try:
                conn.recv(4096)
                conn.sendall(struct.pack(">IB", len(payload), FrameType.ERROR) + payload)
            except OSError:
                pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        key = tmp_path / "k.key"
        keygen(key)
        assert mqcli(a, "link", "add", "evil", f"127.0.0.1:{server.getsockname()[1]}", "--key-file", key).code == 0
        assert mqcli(a, "put", TO_EVIL, "x").code == 0
        assert mqcli(a, "dispatch", "--once", "--timeout", "5s", timeout=60).code == 13
    finally:
        server.close()
        thread.join(30)
    for args in (("outgoing", "list"), ("outgoing", "show", TO_EVIL), ("outgoing", "hold", TO_EVIL)):
        r = mqcli(a, *args)
        assert r.code == 0, r
        text = r.out
        assert _raw_controls(text) == [], (args, text)
        if args[1] != "list":  # a table folds a long cell across lines
            assert "\\x1b[1;31mFAKE: all messages delivered\\x1b[0m \\u202eevil\\n" in text, (args, text)
    shown = json.loads(mqcli(a, "-o", "json", "outgoing", "show", TO_EVIL).out)
    assert HOSTILE in shown["last_error"]  # the exact text: JSON escapes it
    assert any(HOSTILE in h["detail"] for h in shown["history"])
    listed = json.loads(mqcli(a, "-o", "json", "outgoing", "list").out)
    assert HOSTILE in listed[0]["last_error"]
