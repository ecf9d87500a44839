"""Forgetting purges (memory_core.storage.purge): secure delete and owner-only files at every open, finished
jobs without text, traces without the forgotten text, full-text indexes merged, the write-ahead log
emptied, a wipe vacuumed, a purge a crash cut short finished at the next open, and the spans of time
the backups are judged by. A real file; the bytes are read raw."""

from __future__ import annotations

import os
import stat

import pytest

from memory_core import read_forgotten_spans
from memory_core.storage.codec import to_json
from memory_core.storage.purge import PENDING_KEY, Purge
from memory_core.storage.schema import connect
from tests.reliability.fts_blocks import fts_terms

WORD = "zorbquaxil"  # no other text holds it


def _raw(path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_memory_file_and_its_wal_and_shm_are_the_users_alone(tmp_path, open_store):
    path = tmp_path / "memory.db"
    s = open_store(path)
    s.persona.add_knowledge("user", "I keep bees on the roof.")
    assert {_mode(path), _mode(f"{path}-wal"), _mode(f"{path}-shm")} == {0o600}
    assert s.db.scalar("PRAGMA secure_delete") == 1
    s.close()
    # a file an older Mnemo left readable by all is tightened at the next open, its -wal and -shm too
    os.chmod(path, 0o644)
    for side in ("-wal", "-shm"):
        if os.path.exists(f"{path}{side}"):
            os.chmod(f"{path}{side}", 0o644)
    conn = connect(path)
    try:
        assert _mode(path) == 0o600 and _mode(f"{path}-wal") == 0o600 and _mode(f"{path}-shm") == 0o600
    finally:
        conn.close()


def test_a_finished_job_keeps_no_text_but_its_key(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    jid = s.jobs.enqueue(
        "add_page", {"cid": cid, "user_text": f"My {WORD} is blue.", "assistant_text": "Noted."}, key="k:1"
    )
    assert s.jobs.run_pending(allow_llm=False) == 1
    assert s.db.rows("SELECT status, payload FROM job WHERE id = ?", (jid,)) == [("done", "{}")]
    assert s.jobs.enqueue("add_page", {"cid": cid, "user_text": "again", "assistant_text": "x"}, key="k:1") == jid


def test_forgetting_a_chat_takes_its_failed_page_jobs_with_their_text(open_store):
    s = open_store()
    cid, other = s.conversations.create_conversation(), s.conversations.create_conversation()
    for c in (cid, other):
        jid = s.jobs.enqueue("add_page", {"cid": c, "user_text": f"the {WORD} code", "assistant_text": "ok"})
        s.db.execute("UPDATE job SET status = 'failed', error = 'boom' WHERE id = ?", (jid,))
    s.curation.forget_conversation(cid)
    left = s.db.rows("SELECT payload FROM job")
    assert len(left) == 1 and f'"cid":{other}' in left[0][0]


def _reply_with_trace(s, cid, page_id, knowledge_id, *, remembered=None) -> int:
    """A reply whose stored trace recalled a page and a fact, as the agent writes it."""
    r = s.retrieve("what is the secret word?", cid)
    trace = r.to_trace()
    assert any(k["knowledge_id"] == knowledge_id for k in trace["knowledge"])
    assert any(p["page_id"] == page_id for p in trace["pages"] + trace["stm"])
    stats = {"remembered": remembered} if remembered else {}
    return s.conversations.add_message(cid, "assistant", "I cannot say.", meta={"trace": trace, "stats": stats})


def test_replies_traces_lose_the_text_of_a_forgotten_fact_and_keep_the_rest(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    pid = s.intake.add_page(None, f"The secret word is {WORD}.", "I will keep it.", meta={"source_title": WORD})
    kid = s.persona.add_knowledge("user", f"The secret word is {WORD}.")
    keep = s.persona.add_knowledge("user", "The secret word of the club is 'lantern'.")
    remembered = {"kind": "knowledge", "id": kid, "text": f"The secret word is {WORD}.", "outcome": "added"}
    mid = _reply_with_trace(s, cid, pid, kid, remembered=remembered)
    assert WORD in to_json(s.conversations.get_message(mid).meta)
    s.curation.forget("knowledge", kid)
    meta = s.conversations.get_message(mid).meta
    fact = next(k for k in meta["trace"]["knowledge"] if k["knowledge_id"] == kid)
    assert fact["text"] == "" and fact["forgotten"] is True and "score" in fact and "reason" in fact
    assert meta["stats"]["remembered"] == {"kind": "knowledge", "id": kid, "outcome": "added", "forgotten": True}
    other = next(k for k in meta["trace"]["knowledge"] if k["knowledge_id"] == keep)
    assert other["text"] == "The secret word of the club is 'lantern'." and "forgotten" not in other
    # the page's meta was still quoted; forgetting the page takes it (its id, score and reason stay)
    assert WORD in to_json(meta)
    s.curation.forget("page", pid)
    meta = s.conversations.get_message(mid).meta
    assert WORD not in to_json(meta)
    hit = next(p for p in meta["trace"]["pages"] + meta["trace"]["stm"] if p["page_id"] == pid)
    assert hit["meta"] == {} and hit["forgotten"] is True and "score" in hit


def test_a_wipe_takes_every_recalled_text_from_every_trace_and_vacuums_the_file(tmp_path, open_store):
    path = tmp_path / "memory.db"
    s = open_store(path)
    cid = s.conversations.create_conversation()
    s.conversations.add_message(cid, "user", "what is the secret word?")
    pid = s.intake.add_page(None, f"The secret word is {WORD}.", "I will keep it.")
    kid = s.persona.add_knowledge("user", f"The secret word is {WORD}.")
    s.persona.add_trait("likes", f"the {WORD} game")
    mid = _reply_with_trace(s, cid, pid, kid)
    s.intake.add_pages(None, [{"user_text": f"filler {i} " * 40, "assistant_text": "ok " * 40} for i in range(60)])
    pages_before = s.db.scalar("PRAGMA page_count")
    s.curation.wipe_memory()
    assert WORD not in to_json(s.conversations.get_message(mid).meta)
    assert s.db.scalar("PRAGMA freelist_count") == 0 and s.db.scalar("PRAGMA page_count") < pages_before
    assert WORD.encode() not in _raw(path)
    assert s.conversations.get_message(mid).content == "I cannot say."  # the chat stays


def test_a_forgotten_page_leaves_no_term_in_the_index_and_no_byte_in_the_file(tmp_path, open_store):
    path = tmp_path / "memory.db"
    s = open_store(path)
    s.intake.add_pages(None, [{"user_text": f"note {i} about gardens", "assistant_text": "fine"} for i in range(40)])
    pid = s.intake.add_page(None, f"My locker holds the {WORD} box.", "Noted.")
    s.intake.add_pages(None, [{"user_text": f"later note {i}", "assistant_text": "fine"} for i in range(40)])
    assert b"0" + WORD.encode() in fts_terms(s.db.conn, "page_fts")
    s.curation.forget("page", pid)
    terms = fts_terms(s.db.conn, "page_fts")
    assert b"0" + WORD.encode() not in terms and b"0garden" in terms  # the rest is still indexed
    assert s.pages.list_pages(text="gardens", limit=100)  # and found
    assert WORD.encode()[1:] not in _raw(path)
    assert os.path.getsize(f"{path}-wal") == 0  # checkpointed and truncated
    assert s.db.get_meta(PENDING_KEY) is None


def test_a_deleted_chats_messages_leave_the_message_index(open_store):
    s = open_store()
    cid, other = s.conversations.create_conversation(), s.conversations.create_conversation()
    s.conversations.add_message(cid, "user", f"my {WORD} password")
    for i in range(30):
        s.conversations.add_message(other, "user", f"a message about tea number {i}")
    tri = [b"0" + WORD[i : i + 3].encode() for i in range(len(WORD) - 2)]
    assert all(t in fts_terms(s.db.conn, "message_fts") for t in tri)
    s.conversations.delete_conversation(cid)
    terms = fts_terms(s.db.conn, "message_fts")
    assert not any(t in terms for t in tri) and b"0tea" in terms
    assert s.conversations.search_conversations("tea")


def test_a_purge_a_crash_cut_short_is_finished_at_the_next_open(tmp_path, open_store, monkeypatch):
    path = tmp_path / "memory.db"
    s = open_store(path)
    s.intake.add_pages(None, [{"user_text": f"note {i}", "assistant_text": "fine"} for i in range(30)])
    pid = s.intake.add_page(None, f"The {WORD} is in the drawer.", "Noted.")
    with monkeypatch.context() as m:
        m.setattr(Purge, "finish", lambda self, f: None)  # the process dies right after the commit
        s.curation.forget("page", pid)
        assert b"0" + WORD.encode() in fts_terms(s.db.conn, "page_fts")
        assert s.db.get_meta(PENDING_KEY) is not None
    s.close()
    s = open_store(path)
    assert b"0" + WORD.encode() not in fts_terms(s.db.conn, "page_fts")
    assert s.db.get_meta(PENDING_KEY) is None


def test_each_forget_records_when_what_it_removed_existed(tmp_path, open_store, clock):
    path = tmp_path / "memory.db"
    s = open_store(path)
    kid = s.persona.add_knowledge("user", "I was born in Lyon.")
    made = clock()
    clock.advance(3600)
    s.persona.add_knowledge("user", "I keep bees on the roof.")
    assert s.db.purge.spans() == []
    clock.advance(3600)
    s.curation.forget("knowledge", kid)
    assert s.db.purge.spans() == [(made, clock())]
    # a chat deleted later, made after the first span ended: a second span
    clock.advance(3600)
    cid = s.conversations.create_conversation()
    s.conversations.add_message(cid, "user", "hello")
    clock.advance(60)
    s.conversations.delete_conversation(cid)
    assert s.db.purge.spans() == [(made, made + 7200), (made + 10800, made + 10860)]
    assert read_forgotten_spans(path) == s.db.purge.spans()  # read without a store (mnemo memory backups)


@pytest.mark.parametrize("rolled_back", [True, False])
def test_a_forget_rolled_back_leaves_traces_and_spans_alone(open_store, rolled_back):
    s = open_store()
    cid = s.conversations.create_conversation()
    pid = s.intake.add_page(None, f"The secret word is {WORD}.", "I will keep it.")
    kid = s.persona.add_knowledge("user", f"The secret word is {WORD}.")
    mid = _reply_with_trace(s, cid, pid, kid)
    with s.transaction():
        try:
            with s.transaction():
                s.curation.forget("knowledge", kid)
                if rolled_back:
                    raise RuntimeError("changed my mind")
        except RuntimeError:
            pass
    assert (WORD in to_json(s.conversations.get_message(mid).meta)) is rolled_back
    assert (s.persona.get_knowledge(kid) is not None) is rolled_back
    assert (s.db.purge.spans() == []) is rolled_back


def test_a_request_to_forget_takes_the_replies_still_waiting_to_become_pages(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    said = s.jobs.enqueue("add_page", {"cid": cid, "user_text": "My locker code is 4312.", "assistant_text": "Noted."})
    other = s.jobs.enqueue("add_page", {"cid": cid, "user_text": "The locker room smells.", "assistant_text": "Oh."})
    assert s.curation.forget_waiting_pages("code") == 0  # one word names too much
    assert s.curation.forget_waiting_pages("my locker code is 4312") == 1
    assert [r[0] for r in s.db.rows("SELECT id FROM job")] == [other] and said != other
    s.jobs.run_pending(allow_llm=False)
    assert not s.pages.list_pages(text="4312") and s.pages.list_pages(text="smells")
