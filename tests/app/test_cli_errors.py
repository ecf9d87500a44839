"""Known failures give one line, `mnemo COMMAND: error: …`, naming the file and the fix, never a
traceback: a broken model file, a data folder that cannot be written or made, a lock held. Exit 1
for a failure, 2 for bad input. Each through the real `mnemo` entry point, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from app.messages import OTHER_DATA_FOLDER
from tests.app.test_cli_basics import _run

CHOOSE_ANOTHER = "choose another one in Settings, or clear it to use the bundled one."


def _one_line_error(out, command: str, code: int = 1) -> str:
    assert out.returncode == code, out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    prefix = f"mnemo {command}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix) :]


def _settings(dirs, data: dict) -> Path:
    dirs["config"].mkdir(parents=True, exist_ok=True)
    path = dirs["config"] / "settings.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def broken_embedder(mnemo_dirs, tmp_path):
    from models.resolve import default_embedder_files

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(default_embedder_files().model.read_bytes()[:50_000])  # cut short: no model
    settings = _settings(mnemo_dirs, {"embedding": {"onnx_path": str(broken)}})
    return broken, settings


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "TRANSCRIPT"],
        ["search", "tea"],
        ["chats", "list"],
        ["memory", "add", "fact", "I like tea"],
        ["memory", "list", "knowledge"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_broken_embedder_file_is_one_line_naming_it_and_the_fix(args, broken_embedder, mnemo_dirs, tmp_path):
    broken, settings = broken_embedder
    transcript = tmp_path / "t.md"
    transcript.write_text("User: I like tea.\nAssistant: Noted.\n")
    args = [str(transcript) if a == "TRANSCRIPT" else a for a in args]
    command = " ".join(args[:2]) if args[0] in ("chats", "memory") else args[0]
    message = _one_line_error(_run(args, mnemo_dirs), command)
    assert message == (
        f"{broken}: ONNX Runtime cannot load this model: Protobuf parsing failed. It is the embedding model "
        f'chosen as "embedding.onnx_path" in {settings}: {CHOOSE_ANOTHER}'
    )
    assert not (mnemo_dirs["data"] / "mnemo.sqlite3").exists()  # nothing was opened, nothing changed


def test_a_broken_chat_model_file_for_ask(mnemo_dirs, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 100)
    settings = _settings(mnemo_dirs, {"chat": {"gguf_path": str(bad)}})
    message = _one_line_error(_run(["ask", "Hello"], mnemo_dirs), "ask")
    assert message.startswith(f"{bad}: llama.cpp failed to load this model: ")
    assert message.endswith(f'It is the chat model chosen as "chat.gguf_path" in {settings}: {CHOOSE_ANOTHER}')


def _refuse_new_files(folder: Path):
    """Make `folder` refuse new files, as a read-only folder does: chmod 0555; as root, which chmod does
    not stop, the immutable attribute (chattr +i) does the same. Returns the undo."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        undo = lambda: folder.chmod(0o700)  # noqa: E731
    else:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"running as root, where chmod 0555 does not stop writes, and chattr +i failed: {done.stderr}")
        undo = lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)  # noqa: E731
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return undo
    undo()
    pytest.skip(f"{folder} still takes new files (a file system without permissions?)")


@pytest.mark.parametrize("existing", [True, False], ids=["with a memory", "empty"])
def test_a_read_only_data_folder_names_the_file_the_cause_and_the_fix(existing, mnemo_dirs):
    data = mnemo_dirs["data"]
    db = data / "mnemo.sqlite3"
    if existing:
        assert _run(["memory", "add", "fact", "I like tea"], mnemo_dirs).returncode == 0
        before = db.read_bytes()
    else:
        data.mkdir(parents=True)
    undo = _refuse_new_files(data)
    try:
        expected = (
            f"cannot open the memory database {db}: the data folder {data} does not let Mnemo create files in "
            f"it. Make it writable (e.g. chmod u+rwx {data}), or {OTHER_DATA_FOLDER}."
        )
        for args in (["search", "tea"], ["memory", "add", "fact", "I like coffee"], ["chats", "list"]):
            command = " ".join(args[:2]) if args[0] in ("chats", "memory") else args[0]
            assert _one_line_error(_run(args, mnemo_dirs), command) == expected
    finally:
        undo()
    if existing:
        assert db.read_bytes() == before
    else:
        assert not db.exists()


def test_a_data_folder_that_cannot_be_made_says_what_is_in_the_way(mnemo_dirs, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    dirs = dict(mnemo_dirs, data=blocker / "data")
    db = blocker / "data" / "mnemo.sqlite3"
    assert _one_line_error(_run(["search", "tea"], dirs), "search") == (
        f"cannot open the memory database {db}: the data folder cannot be made there, as {blocker} is a file. "
        f"Move that file away, or {OTHER_DATA_FOLDER}."
    )


def test_restore_beside_the_window_names_the_lock(mnemo_dirs, tmp_path):
    from app.runtime.instance_lock import InstanceLock

    backup = tmp_path / "backup.sqlite3"
    backup.write_bytes(b"")
    held = InstanceLock(mnemo_dirs["data"])
    assert held.acquire()
    try:
        out = _run(["memory", "restore", str(backup), "--yes"], mnemo_dirs)
    finally:
        held.release()
    assert _one_line_error(out, "memory restore") == (
        f"Mnemo is open on this memory (its window holds {mnemo_dirs['data'] / 'mnemo.lock'}): close its window "
        "first (restore swaps the database file)"
    )


def test_bad_input_exits_2_and_failures_1(mnemo_dirs):
    out = _run(["memory", "add", "trait", "jazz"], mnemo_dirs)  # a trait needs a dimension and a value
    assert _one_line_error(out, "memory add", code=2).startswith("a trait needs a dimension and a value")
