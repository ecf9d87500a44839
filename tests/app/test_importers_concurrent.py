"""Two imports at once into one memory (real store file, real embedder): the second import of the same
file fails at once with one clear line, before it embeds anything, from a thread or another process;
overlapping files both finish, with nothing written twice and no "UNIQUE constraint failed"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.importers import load, write_all
from app.importers.claim import ImportBusyError, import_claim
from memory_core import MemoryStore

FIXTURES = Path(__file__).parent / "fixtures"
EXPORT = FIXTURES / "chatgpt_conversations.json"
BUSY = (
    "chatgpt_conversations.json: already being imported into this memory by another Mnemo window or command; "
    "wait for it to finish (importing it again then adds only what is missing)"
)


class _Counting:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, embedder):
        self.embedder, self.texts = embedder, 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.embedder.embed(texts)


@pytest.fixture
def open_store(tmp_path, embedder):
    opened: list[MemoryStore] = []

    def _open_store(embed=None) -> MemoryStore:
        s = MemoryStore.open(
            tmp_path / "data" / "mnemo.sqlite3",
            embed or embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
        )
        opened.append(s)
        return s

    yield _open_store
    for s in opened:
        s.close()


class _Paused:
    """An import's progress that stops at its first report (a conversation embedded, not yet written)
    until released, so another import can run while this one is in the middle of its work."""

    def __init__(self):
        self.note, self.reached, self.go = "", threading.Event(), threading.Event()

    def update(self, n: int = 1) -> None:
        self.reached.set()
        assert self.go.wait(120)


def _import_in_thread(store, parsed, path, progress):
    box: dict = {}

    def run():
        try:
            box["report"] = write_all(store, parsed, path=str(path), progress=progress)
        except BaseException as exc:  # the test reads it
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_the_same_file_twice_at_once_the_second_fails_before_embedding(open_store, embedder):
    parsed = load(EXPORT)
    first, paused = open_store(), _Paused()
    thread, box = _import_in_thread(first, parsed, EXPORT, paused)
    try:
        assert paused.reached.wait(120)  # the first import holds the claim and has embedded a page
        counting = _Counting(embedder)
        second = open_store(counting.embed)
        with pytest.raises(ImportBusyError) as exc:
            write_all(second, load(EXPORT), path=str(EXPORT))
        assert str(exc.value) == BUSY and exc.value.exit_code == 1
        assert counting.texts == 0 and second.stats()["conversations"] == 0  # nothing embedded, nothing written
    finally:
        paused.go.set()
        thread.join(120)
    assert "error" not in box, box.get("error")
    assert box["report"].count("imported") == 3
    # the claim is gone with its import: the file imports again (adding nothing), no lock file is left
    again = write_all(second, load(EXPORT), path=str(EXPORT))
    assert again.count("already imported") == 3 and again.turns_written == 0
    assert second.stats()["conversations"] == 3 and second.stats()["messages"] == 13
    assert not list((Path(second.path).parent).glob(".import-*.lock"))


def test_overlapping_files_at_once_both_finish_without_duplicates(open_store, tmp_path):
    """One file holds all three conversations, another only the first: the first import is held after
    embedding that conversation while the second writes it; the first then finds it written."""
    full = json.loads(EXPORT.read_text(encoding="utf-8"))
    part = tmp_path / "part.json"
    part.write_text(json.dumps(full[:1]), encoding="utf-8")
    first, paused = open_store(), _Paused()
    thread, box = _import_in_thread(first, load(EXPORT), EXPORT, paused)
    try:
        assert paused.reached.wait(120)
        second = open_store()
        report = write_all(second, load(part), path=str(part))  # a different file: not refused
        assert report.count("imported") == 1
    finally:
        paused.go.set()
        thread.join(120)
    assert "error" not in box, box.get("error")
    outcomes = {o.external_id: o.status for o in box["report"].outcomes}
    assert sorted(outcomes.values()) == ["already imported", "imported", "imported"]
    assert outcomes[full[0]["id"]] == "already imported"
    st = second.stats()
    assert st["conversations"] == 3 and st["messages"] == 13 and second.check_integrity() == []


def test_another_process_importing_the_same_file_fails_at_once(open_store, tmp_path):
    """`mnemo ingest` in a second process, while this one holds the file's import: exit 1, one line."""
    store = open_store()
    data_dir = Path(store.path).parent
    env = dict(
        os.environ,
        MNEMO_DATA_DIR=str(data_dir),
        MNEMO_CONFIG_DIR=str(tmp_path / "config"),
        QT_QPA_PLATFORM="offscreen",
    )
    with import_claim(store, load(EXPORT).conversations, EXPORT.name):
        out = subprocess.run(
            [sys.executable, "-m", "app", "ingest", str(EXPORT), "--no-progress"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.splitlines()[-1] == f"mnemo ingest: error: {BUSY}"
    assert "UNIQUE" not in out.stderr and store.stats()["conversations"] == 0
