"""`mnemo ask -` reads the message from standard input (the real CLI in a process of its own, the
bundled GGUF answering); empty, non-UTF-8 or NUL-holding input gets one line and exit 2, before any
model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def ask(dirs, stdin: bytes, *args: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, MNEMO_DATA_DIR=str(dirs["data"]), MNEMO_CONFIG_DIR=str(dirs["config"]), QT_QPA_PLATFORM="offscreen"
    )
    return subprocess.run(
        [sys.executable, "-m", "app", "ask", "-", *args], input=stdin, capture_output=True, env=env, timeout=300
    )


def test_ask_dash_takes_the_message_from_standard_input(mnemo_dirs, embedder):
    mnemo_dirs["config"].mkdir(parents=True)
    (mnemo_dirs["config"] / "settings.json").write_text(json.dumps({"chat": {"max_tokens": 8}}))
    message = "My notes, piped in:\n- the spare key is under the blue pot\n- café at 9 ☕"
    out = ask(mnemo_dirs, (message + "\n").encode("utf-8"), "--json")
    assert out.returncode == 0, out.stderr.decode()
    result = json.loads(out.stdout)
    assert result["status"] == "complete" and result["text"].strip()
    from memory_core import MemoryStore

    store = MemoryStore.open(
        mnemo_dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )
    try:
        user, reply = store.conversations.list_messages(result["conversation_id"])
        assert user.role == "user" and user.content == message  # whole, lines kept, the final newline not
        assert reply.id == result["message_id"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (b"", "mnemo ask: error: nothing to ask: standard input is empty (e.g. echo 'Hello' | mnemo ask -)"),
        (b" \n\n", "mnemo ask: error: nothing to ask: standard input is empty (e.g. echo 'Hello' | mnemo ask -)"),
        (
            "¿Qué tal?".encode("latin-1"),
            "mnemo ask: error: standard input is not UTF-8 text (byte 0xbf at byte 0); "
            "convert it first, e.g. with iconv -t UTF-8",
        ),
        (b"hello\x00world", "mnemo ask: error: standard input holds a NUL byte (character 6), so it is not text"),
    ],
    ids=["empty", "blank", "latin-1", "nul"],
)
def test_bad_standard_input_is_one_line_and_exit_2(mnemo_dirs, stdin, expected):
    out = ask(mnemo_dirs, stdin)
    assert out.returncode == 2 and out.stdout == b""
    assert out.stderr.decode() == expected + "\n"
    assert not (mnemo_dirs["data"] / "mnemo.sqlite3").exists()  # failed before the memory was opened
