"""A full disk during a chat turn: a clear message, nothing saved before is lost, and the turn and
its memory update work again once there is space. Real store file, real GGUF, real SQLite errors
(raised by the `full_disk` VFS below SQLite)."""

from __future__ import annotations

import pytest

from app.chat.agent import MESSAGE_NOT_SAVED, REPLY_NOT_SAVED, ChatAgent, DiskFullError
from app.chat.writer_lease import release as restart_here
from memory_core import MemoryParams, MemoryStore, is_storage_full


@pytest.fixture(autouse=True)
def _disk_before_store(full_disk):
    """The store must be opened through the full-disk VFS: install it before any other fixture."""
    yield


def _integrity(store) -> str:
    return store.db.execute("PRAGMA integrity_check").fetchone()[0]


def test_a_message_sent_to_a_full_disk_is_refused_clearly_and_nothing_is_lost(agent, store, full_disk):
    cid = agent.new_conversation()
    first = agent.send(cid, "My cat is called Miso.")
    assert first.status == "complete"
    store.jobs.run_pending(allow_llm=False)
    before = [(m.role, m.content) for m in store.conversations.list_messages(cid)]

    full_disk.full = True
    with pytest.raises(DiskFullError) as err:
        agent.send(cid, "And my dog is called Tofu.")
    assert str(err.value) == MESSAGE_NOT_SAVED and "disk is full" in str(err.value)
    assert [(m.role, m.content) for m in store.conversations.list_messages(cid)] == before  # readable, unchanged

    full_disk.full = False
    assert _integrity(store) == "ok"
    again = agent.send(cid, "And my dog is called Tofu.")
    assert again.status == "complete"
    assert [m.content for m in store.conversations.list_messages(cid)][:3] == [
        before[0][1],
        before[1][1],
        "And my dog is called Tofu.",
    ]


def test_the_disk_filling_during_a_reply_keeps_what_was_saved(agent, store, full_disk):
    cid = agent.new_conversation()
    chunks: list[str] = []

    def on_token(chunk: str) -> None:
        chunks.append(chunk)
        if len(chunks) == 3:  # the first chunk was saved at once; then the disk fills
            full_disk.full = True

    result = agent.send(cid, "Tell me about the sea.", on_token=on_token)
    assert len(chunks) > 3, "the reply kept streaming after the disk filled"
    assert result.status == "failed" and result.error == REPLY_NOT_SAVED
    assert result.text == "".join(chunks)  # shown in full to the user

    full_disk.full = False
    assert _integrity(store) == "ok"
    user, reply = store.conversations.list_messages(cid)
    assert user.content == "Tell me about the sea."
    assert reply.status == "streaming" and reply.content == chunks[0]  # what the first flush saved
    # the next start marks it interrupted and queues its memory update, as after a crash
    restart_here()
    assert ChatAgent(store, agent.model).recover_interrupted() == 1
    assert store.conversations.get_message(reply.id).status == "interrupted"
    assert store.jobs.run_pending(allow_llm=False) == 1
    assert store.pages.count_pages(conversation_id=cid) == 1


def test_a_memory_job_waits_for_disk_space_without_counting_a_failure(agent, store, full_disk):
    cid = agent.new_conversation()
    assert agent.send(cid, "I live in Porto.").status == "complete"
    assert store.jobs.pending() == 1

    full_disk.full = True
    with pytest.raises(Exception) as err:
        store.jobs.run_pending(allow_llm=False)
    assert is_storage_full(err.value)
    full_disk.full = False
    job = store.jobs.list_jobs(status="pending")[0]
    assert job.attempts == 0 and job.error is None  # not the job's fault: not counted

    assert store.jobs.run_pending(allow_llm=False) == 1
    assert store.pages.count_pages(conversation_id=cid) == 1


def test_recall_still_answers_when_the_disk_is_full(tmp_path, embedder, full_disk):
    s = MemoryStore.open(
        tmp_path / "recall.sqlite3",
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        params=MemoryParams.from_flat(stm_capacity=1),
    )
    try:
        cid = s.conversations.create_conversation()
        s.intake.add_page(cid, "My sister Margot teaches violin in Lisbon.", "How lovely!")
        s.intake.add_page(cid, "I repaired my bicycle brakes today.", "Well done.")
        s.intake.add_page(cid, "We had pasta for dinner.", "Yum.")
        full_disk.full = True
        r = s.retrieve("Who teaches violin?")  # segments that supplied a page get a visit: a write
        assert r.segments and "Margot" in r.pages[0].page.text
        full_disk.full = False
        assert s.retrieve("Who teaches violin?").pages[0].page.text == r.pages[0].page.text
    finally:
        s.close()


def test_an_import_into_a_full_disk_stops_clearly_and_finishes_later(mnemo_dirs, embedder, full_disk):
    from pathlib import Path

    from app.context import AppContext
    from app.importers.job import ImportJob, run_import

    export = Path(__file__).parent / "fixtures" / "chatgpt_conversations.json"
    ctx = AppContext.create()
    ctx._embedder = embedder
    s = ctx.open_store()  # the profile exists before the disk fills
    s.close()
    full_disk.full = True
    job = run_import(ctx, ImportJob(export))
    assert job.phase == "failed" and job.error.startswith("The disk is full, so the import stopped")
    full_disk.full = False
    job = run_import(ctx, ImportJob(export))
    assert job.phase == "done", job.error
    s = ctx.open_store()
    try:
        assert s.conversations.list_conversations() and s.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        s.close()


def test_mnemo_ingest_on_a_full_disk_says_so_and_finishes_when_run_again(mnemo_dirs, embedder, full_disk, capsys):
    from pathlib import Path

    from app.cli import main

    export = Path(__file__).parent / "fixtures" / "chatgpt_conversations.json"
    assert main(["memory", "stats"]) == 0  # the profile exists before the disk fills
    capsys.readouterr()
    full_disk.full = True
    assert main(["ingest", str(export), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "mnemo ingest: error: The disk is full, so the import stopped" in err and "Traceback" not in err
    full_disk.full = False
    assert main(["ingest", str(export), "--no-progress"]) == 0
    assert "imported" in capsys.readouterr().out


def test_the_disk_filling_as_the_reply_is_queued_for_memory_rolls_back_both(agent, store, monkeypatch):
    """The reply's final save and its memory job commit together: when the job cannot be queued,
    the reply row stays as a crash leaves it, and the next start keeps it and queues its memory."""
    import apsw

    from app.chat.recovery import recover_interrupted

    def full(*args, **kwargs):  # the disk fills as the reply's page is queued
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(store.jobs, "enqueue", full)
    cid = agent.new_conversation()
    result = agent.send(cid, "Hello there.")
    assert result.status == "failed" and result.error == REPLY_NOT_SAVED
    reply = store.conversations.list_messages(cid)[1]
    assert reply.status == "streaming" and store.jobs.pending() == 0  # neither half committed
    monkeypatch.undo()
    restart_here()
    done = recover_interrupted(store)
    assert done.replies == 1 and done.queued == (1 if reply.content.strip() else 0)
