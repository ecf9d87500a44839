"""No imported text holds a NUL: a NUL byte anywhere in a file is refused with where it is (not only
in the first 64 KiB that are sniffed for binary), and a JSON "\\u0000" escape is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.importers import ImportFatalError, load

FIXTURES = Path(__file__).parent / "fixtures"


def _long_transcript(tmp_path: Path) -> tuple[Path, int]:
    """A real transcript of 100 KB with one NUL byte at line 1203, past the sniffed head."""
    lines = []
    for i in range(1, 1201, 2):
        lines.append(f"User: question {i} about the balcony garden and its tomatoes, once more.")
        lines.append(f"Assistant: answer {i + 1}: water them in the morning, and feed them weekly.")
    lines.append("User: and the basil?")
    lines.append("Assistant: it likes the sun\x00 and warm nights.")
    text = "\n".join(lines) + "\n"
    path = tmp_path / "garden.txt"
    path.write_bytes(text.encode("utf-8"))
    offset = text.encode("utf-8").index(b"\x00")
    assert offset > 64 * 1024
    return path, offset


def test_a_nul_byte_past_the_first_64_kib_is_refused_with_its_position(tmp_path, mnemo_dirs, capsys):
    path, offset = _long_transcript(tmp_path)
    expected = (
        f"garden.txt: line 1202, column 28 (byte {offset}): a NUL byte (0x00), which text never holds; "
        "the file is damaged or not text: remove that byte and import the file again"
    )
    with pytest.raises(ImportFatalError) as exc:
        load(path)
    assert str(exc.value) == expected
    assert main(["ingest", str(path), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"mnemo ingest: error: {expected}\n"
    assert not (mnemo_dirs["data"] / "mnemo.sqlite3").exists()  # nothing stored
    # without the byte, the same file imports
    path.write_bytes(path.read_bytes().replace(b"\x00", b""))
    (conv,) = load(path).conversations
    assert conv.turns[-1].text == "it likes the sun and warm nights."


def test_a_nul_in_the_head_is_still_a_binary_file(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_bytes(b"User: hi\x00\nAssistant: hello\n")
    with pytest.raises(ImportFatalError) as exc:
        load(path)
    assert str(exc.value) == (
        "chat.txt: this is a binary file, not a text or JSON export (control byte 0x00 at byte 8)"
    )


def test_a_utf16_file_with_a_nul_character_is_refused(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_bytes("User: hi\nAssistant: hel\x00lo\n".encode("utf-16"))
    with pytest.raises(ImportFatalError) as exc:
        load(path)
    assert str(exc.value) == (
        "chat.txt: line 2: a NUL character (U+0000), which text never holds; "
        "the file is damaged or not text: remove it and import the file again"
    )


def test_json_nul_escapes_are_dropped_from_messages_and_titles(tmp_path):
    export = json.loads((FIXTURES / "chatgpt_conversations.json").read_text(encoding="utf-8"))
    conv = export[0]
    conv["title"] = "Trip\u0000 to Lisbon"
    conv["mapping"]["u-2"]["message"]["content"]["parts"] = ["Where\u0000 should I stay?"]  # on the kept branch
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export), encoding="utf-8")  # json.dumps writes the escape "\u0000"
    assert b"\\u0000" in path.read_bytes() and b"\x00" not in path.read_bytes()
    first = load(path).conversations[0]
    assert first.title == "Trip to Lisbon"
    assert "Where should I stay?" in [t.text for t in first.turns]
    assert not any("\x00" in t.text for c in load(path).conversations for t in c.turns)
