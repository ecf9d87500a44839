"""Store plumbing: schema, WAL, dimension guard, transactions, listeners, conversations and messages."""

from __future__ import annotations

import threading

import pytest

from memory_core import EmbeddingMismatchError, MemoryStore, StoreClosedError
from memory_core.storage.schema import SCHEMA_VERSION


def test_schema_wal_foreign_keys_and_meta(open_store, tmp_path, embedder):
    s = open_store()
    assert s.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
    assert s.db.scalar("PRAGMA journal_mode").lower() == "wal"
    assert s.db.scalar("PRAGMA foreign_keys") == 1
    tables = {r[0] for r in s.db.rows("SELECT name FROM sqlite_master WHERE type IN ('table')")}
    for t in (
        "conversation",
        "message",
        "page",
        "segment",
        "trait",
        "knowledge",
        "job",
        "event",
        "meta",
        "page_vec",
        "segment_vec",
        "knowledge_vec",
        "page_fts",
        "page_tri",
        "knowledge_fts",
        "chain",
    ):
        assert t in tables
    st = s.stats()
    assert st["embed_model_id"] == embedder.model_id and st["embed_dim"] == embedder.dim
    s.close()
    # reopening does not migrate again and keeps data
    s2 = open_store()
    assert s2.db.scalar("PRAGMA user_version") == SCHEMA_VERSION


def test_refuses_other_dimension(open_store, tmp_path, embedder):
    open_store().close()
    with pytest.raises(EmbeddingMismatchError, match="384-dimensional"):
        MemoryStore.open(tmp_path / "memory.db", lambda t: None, embed_model_id="other", dim=512)


def test_same_dim_new_model_queues_reembed_and_reports_progress(open_store, tmp_path, embedder, clock):
    s = open_store()
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "I like green tea", "Noted.")
    s.intake.add_pages(cid, [{"user_text": f"note {i}", "assistant_text": "ok"} for i in range(299)])
    s.close()
    s2 = MemoryStore.open(
        tmp_path / "memory.db", embedder.embed, embed_model_id="another-model", dim=embedder.dim, clock=clock
    )
    try:
        assert "reembed" in [j.kind for j in s2.jobs.list_jobs("pending")]
        seen = []
        s2.jobs.on_progress = lambda what, done, total: seen.append((what, done, total))
        s2.jobs.run_pending(kinds=["reembed"])
        assert s2.jobs.pending(kinds=["reembed"]) == 0
        # two jobs of 256 and 44 pages; where the second starts is said once, not again after the first
        assert seen == [
            ("re-embedding memory", 0, 300),
            ("re-embedding memory", 256, 300),
            ("re-embedding memory", 300, 300),
        ]
        assert s2.stats()["embed_model_id"] == "another-model"
        assert s2.check_integrity() == []
    finally:
        s2.close()


def test_a_changed_model_reembeds_batch_by_batch_resumes_and_ranks_only_what_it_can(
    open_store, tmp_path, embedder, clock
):
    """Each batch commits alone and queues the next, so a closed app resumes. Meanwhile a page not done yet
    holds the old model's vector, which cannot be compared with a query the new model embedded: its cosine is
    left out (keywords still find it); pages done, and pages written since, rank by meaning."""
    import numpy as np

    from memory_core import MemoryParams, RetrievalBudget
    from memory_core.types import page_text

    s = open_store(stm_capacity=2)  # most pages paged out to mid-term segments
    cid = s.conversations.create_conversation()
    texts = [(f"Day {i}: the tomato seedlings by the fence got {i} litres of water.", "Noted.") for i in range(6)]
    ids = [s.intake.add_page(cid, u, a) for u, a in texts]
    kid = s.persona.add_knowledge("user", "The user grows tomato seedlings by the fence.")
    s.close()

    def other_model(batch):  # a model of the same dimension whose space is not the old one's
        return np.ascontiguousarray(embedder.embed(batch)[:, ::-1])

    def reopen():
        store = MemoryStore.open(
            tmp_path / "memory.db",
            other_model,
            embed_model_id="other-model",
            dim=embedder.dim,
            clock=clock,
            params=MemoryParams.from_flat(stm_capacity=2),
        )
        store.upkeep.REEMBED_BATCH = 4
        return store

    def similarity(store):
        hits = store.retrieve(
            "How much water did the tomato seedlings get?", budget=RetrievalBudget(pages=10), record_visits=False
        ).pages
        return {h.page.id: h.similarity for h in hits}

    s2 = reopen()
    assert s2.upkeep.reembedding() == (0, ids[-1])
    found = similarity(s2)
    assert set(found) >= set(ids) and all(found[i] is None for i in ids)  # by keywords alone: meaning unknown
    # (so the quoting floor goes by their score alone, not refusing them for a cosine of 0), and the trace says so
    hits = s2.retrieve("How much water did the tomato seedlings get?", record_visits=False).pages
    assert all(h.standout is None and "re-embedding" in h.reason for h in hits if h.page.id in ids)
    new = s2.intake.add_page(cid, "The tomato seedlings need water every day.", "Sure.")
    assert similarity(s2)[new] > 0.3  # written by the new model
    # and how far it stands out is measured against the pages it can be compared with (none other yet)
    from memory_core.recall.retriever import typical_cosine

    hit = next(
        h
        for h in s2.retrieve("How much water did the tomato seedlings get?", record_visits=False).pages
        if h.page.id == new
    )
    assert hit.standout == pytest.approx(hit.similarity - typical_cosine(np.zeros(0)), abs=1e-6)
    assert s2.jobs.run_pending(max_jobs=1, kinds=["reembed"]) == 1
    assert s2.upkeep.reembedding() == (ids[3], ids[-1])
    s2.close()  # the app closes after one batch
    s3 = reopen()
    assert s3.jobs.pending(kinds=["reembed"]) == 1 and s3.upkeep.reembedding() == (ids[3], ids[-1])  # resumed
    found = similarity(s3)
    assert all(found[i] > 0.3 for i in ids[:4]) and all(found[i] is None for i in ids[4:])
    knowledge = np.frombuffer(
        s3.db.one("SELECT embedding FROM knowledge_vec WHERE knowledge_id = ?", (kid,))[0], np.float32
    )
    np.testing.assert_allclose(knowledge, other_model(["The user grows tomato seedlings by the fence."])[0], atol=1e-5)
    assert s3.jobs.run_pending(kinds=["reembed"]) == 1
    assert s3.upkeep.reembedding() is None and s3.jobs.pending(kinds=["reembed"]) == 0
    np.testing.assert_allclose(s3.pages.page_vec(ids[-1]), other_model([page_text(*texts[-1])])[0], atol=1e-5)
    assert all(v > 0.3 for v in similarity(s3).values())
    segments = {p.segment_id for p in s3.pages.list_pages() if p.segment_id is not None}
    assert segments
    for sid in segments:  # each segment's vector is its pages' new ones summed
        stored = np.frombuffer(s3.db.one("SELECT emb_sum FROM segment WHERE id = ?", (sid,))[0], np.float32)
        members = [p.id for p in s3.pages.list_pages() if p.segment_id == sid]
        np.testing.assert_allclose(stored, sum(s3.pages.page_vec(i) for i in members), atol=1e-5)
    assert s3.check_integrity() == []


def test_transaction_rollback_and_nesting(open_store):
    s = open_store()
    with pytest.raises(RuntimeError):
        with s.transaction():
            s.conversations.create_conversation("a")
            raise RuntimeError("boom")
    assert s.conversations.list_conversations() == []
    with s.transaction():
        s.conversations.create_conversation("outer")
        with pytest.raises(ValueError):
            with s.transaction():
                s.conversations.create_conversation("inner")
                raise ValueError
    assert [c.title for c in s.conversations.list_conversations()] == ["outer"]


def test_listeners_called_after_commit(open_store):
    s = open_store()
    seen = []

    def listener(ev):
        # the event is already committed: another connection can read it
        seen.append((ev.kind, s.db.scalar("SELECT count(*) FROM event WHERE id = ?", (ev.id,))))

    s.db.add_listener(listener)
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "hello there", "hi")
    assert ("page_added", 1) in seen
    with pytest.raises(RuntimeError):
        with s.transaction():
            s.set_paused(True)
            raise RuntimeError
    assert not any(k == "paused" for k, _ in seen)
    assert s.is_paused() is False


def test_second_connection_in_another_thread(open_store, tmp_path):
    s = open_store()
    cid = s.conversations.create_conversation("shared")
    s.intake.add_page(cid, "The cat sleeps on the sofa", "Cats love sofas.")
    result = {}

    def reader():
        other = open_store()
        result["titles"] = [c.title for c in other.conversations.list_conversations()]
        result["pages"] = [h.page.user_text for h in other.retrieve("cat sofa", None).pages]

    th = threading.Thread(target=reader)
    th.start()
    th.join(60)
    assert result["titles"] == ["shared"]
    assert result["pages"] == ["The cat sleeps on the sofa"]


def test_conversations_crud_search_and_flags(open_store, clock):
    s = open_store()
    a = s.conversations.create_conversation("Trip to Kyoto", source="import", external_id="x1")
    clock.advance(10)
    b = s.conversations.create_conversation("Groceries")
    s.conversations.add_message(a, "user", "東京タワーに行きました")
    clock.advance(10)
    s.conversations.add_message(b, "user", "buy oat milk and bananas")
    assert [c.id for c in s.conversations.list_conversations()] == [b, a]  # newest updated first
    assert s.conversations.find_conversation("import", "x1").id == a
    assert s.conversations.find_conversation("import", "nope") is None
    hits = s.conversations.search_conversations("oat milk")
    assert [c.id for c, _ in hits] == [b] and "oat milk" in hits[0][1]
    assert [c.id for c, _ in s.conversations.search_conversations("kyoto")] == [a]  # title, case-insensitive
    assert [c.id for c, _ in s.conversations.search_conversations("東京タワー")] == [a]  # CJK substring (trigram)
    s.conversations.rename_conversation(b, "Shopping")
    assert s.conversations.get_conversation(b).title == "Shopping"
    s.conversations.set_conversation_flags(b, memory_paused=True, incognito=True)
    c = s.conversations.get_conversation(b)
    assert c.memory_paused and c.incognito
    s.conversations.delete_conversation(b)
    assert s.conversations.get_conversation(b) is None
    assert s.db.scalar("SELECT count(*) FROM message WHERE conversation_id = ?", (b,)) == 0
    assert s.conversations.search_conversations("bananas") == []


def test_message_branches(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    u1 = s.conversations.add_message(cid, "user", "What is 2+2?")
    a1 = s.conversations.add_message(cid, "assistant", "5", meta={"tokens": 1})
    assert [m.id for m in s.conversations.list_messages(cid)] == [u1, a1]
    assert s.conversations.get_message(a1).parent_id == u1
    a2 = s.conversations.add_message(cid, "assistant", "4", parent_id=u1)  # regenerate
    assert [m.id for m in s.conversations.message_children(u1)] == [a1, a2]
    assert [m.content for m in s.conversations.list_messages(cid)] == ["What is 2+2?", "4"]
    assert [m.content for m in s.conversations.list_messages(cid, leaf_id=a1)] == ["What is 2+2?", "5"]
    u2 = s.conversations.add_message(cid, "user", "What is 3+3?", parent_id=None)  # edit of the root: a new root
    assert [m.id for m in s.conversations.list_messages(cid)] == [u2]
    sib = s.conversations.message_siblings(cid)  # what ‹ i/n › shows
    assert sib == {a1: [a1, a2], a2: [a1, a2], u1: [u1, u2], u2: [u1, u2]}
    s.conversations.update_message(a1, content="five", status="error", meta={"trace": {"x": 1}})
    m = s.conversations.get_message(a1)
    assert (m.content, m.status, m.meta) == ("five", "error", {"tokens": 1, "trace": {"x": 1}})
    s.conversations.update_message(a1, meta={"only": True}, replace_meta=True)
    assert s.conversations.get_message(a1).meta == {"only": True}
    with pytest.raises(ValueError):
        other = s.conversations.create_conversation()
        s.conversations.add_message(other, "user", "x", parent_id=u1)


def test_delete_conversation_keeps_memory(open_store):
    s = open_store(stm_capacity=2)
    cid = s.conversations.create_conversation()
    ids = [s.intake.add_page(cid, f"I planted {w} in the garden", "Nice.") for w in ("tulips", "roses", "basil")]
    s.conversations.delete_conversation(cid)
    pages = s.pages.list_pages(order_by="id", descending=False)
    assert [p.id for p in pages] == ids
    assert all(p.conversation_id is None and p.tier == "mtm" for p in pages)
    assert s.check_integrity() == []


def test_pause_globally_and_per_conversation(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    s.set_paused(True)
    assert s.is_paused()
    assert s.intake.add_page(cid, "secret plans", "ok") == 0
    s.set_paused(False)
    s.conversations.set_conversation_flags(cid, memory_paused=True)
    assert s.intake.add_page(cid, "more secret plans", "ok") == 0
    assert s.intake.add_pages(cid, [{"user_text": "x y z", "assistant_text": "ok"}]) == [0]
    inc = s.conversations.create_conversation(incognito=True)
    assert s.intake.add_page(inc, "incognito words", "ok") == 0
    assert s.pages.count_pages() == 0
    s.conversations.set_conversation_flags(cid, memory_paused=False)
    assert s.intake.add_page(cid, "now remembered", "ok") > 0
    assert s.pages.count_pages() == 1


def test_closed_store_raises(open_store):
    s = open_store()
    s.close()
    with pytest.raises(StoreClosedError):
        s.conversations.list_conversations()


def test_agent_helpers(open_store):
    s = open_store()
    cid = s.conversations.create_conversation()
    u = s.conversations.add_message(cid, "user", "hi")
    a = s.conversations.add_message(cid, "assistant", "partial rep", status="streaming")
    b = s.conversations.add_message(cid, "assistant", "other", parent_id=u)
    assert [m.id for m in s.conversations.list_messages_to(a)] == [u, a]
    assert s.conversations.list_messages_to(999) == []
    assert s.conversations.mark_interrupted_messages() == 1
    assert (
        s.conversations.get_message(a).status == "interrupted"
        and s.conversations.get_message(a).content == "partial rep"
    )
    p = s.intake.add_page(cid, "hi", "partial rep", user_message_id=u, assistant_message_id=a)
    assert [x.id for x in s.pages.list_pages(assistant_message_id=a)] == [p]
    assert s.pages.count_pages(user_message_id=u) == 1 and s.pages.count_pages(assistant_message_id=b) == 0
    s.jobs.enqueue("add_page", {"cid": cid, "user_text": "hi", "assistant_text": "other"}, key=f"page:{b}")
    assert s.jobs.cancel(key=f"page:{b}") == 1 and s.jobs.pending() == 0


def test_migrates_a_version_1_database(tmp_path, embedder, clock):
    from memory_core.storage import schema as D

    conn = D.connect(tmp_path / "old.db")
    conn.execute("BEGIN")
    D.MIGRATIONS[0](conn, embedder.dim)
    conn.execute("PRAGMA user_version=1")
    conn.execute("COMMIT")
    conn.close()
    s = MemoryStore.open(
        tmp_path / "old.db", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim, clock=clock
    )
    try:
        assert s.db.scalar("PRAGMA user_version") == D.SCHEMA_VERSION >= 2
        assert s.db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'page_pinned'") == 1
        cid = s.conversations.create_conversation()
        s.intake.add_page(cid, "works after migration", "yes")
    finally:
        s.close()


def test_many_connections_creating_one_new_file_at_once(tmp_path):
    """Several threads opening a brand-new database (app start: UI + workers) never fail with BUSY."""
    import threading

    from memory_core.storage.schema import connect, migrate

    errors = []
    for trial in range(10):
        path = tmp_path / f"new-{trial}.db"

        def open_and_migrate(path=path):
            try:
                conn = connect(path)
                migrate(conn, 384)
                conn.close()
            except Exception as exc:
                errors.append(repr(exc))

        threads = [threading.Thread(target=open_and_migrate) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


@pytest.mark.parametrize("damage", ["not sqlite", "torn header"])
def test_a_damaged_file_raises_a_clear_error_and_is_left_as_it_was(open_store, tmp_path, damage):
    from memory_core import DamagedDatabaseError

    path = tmp_path / "damaged.db"
    if damage == "not sqlite":
        path.write_bytes(b"my notes, not a database\n" * 300)
    else:
        s = open_store(path)
        s.intake.add_page(s.conversations.create_conversation(), "I keep bees.", "Nice.")
        s.close()
        for extra in ("-wal", "-shm"):
            (tmp_path / f"damaged.db{extra}").unlink(missing_ok=True)
        raw = bytearray(path.read_bytes())
        raw[16:24] = b"\xff" * 8  # page size and format bytes of the header
        path.write_bytes(bytes(raw))
    before = path.read_bytes()
    with pytest.raises(DamagedDatabaseError) as err:
        open_store(path)
    assert str(path) in str(err.value) and "left as it is" in str(err.value)
    assert path.read_bytes() == before


def test_only_asks_is_a_short_question_and_nothing_more():
    from memory_core.text import only_asks

    assert only_asks("What was the name of my first dog?")
    assert only_asks("Hi! whats my sisters name")  # a greeting beside it, no "?"
    assert only_asks("Where did I park? Was it level 2?")
    assert not only_asks("My sister's name is Ana.")
    assert not only_asks("Ana's birthday is on May 3. What should I get her?")  # it tells something too
    assert not only_asks(
        "Should I take the job offer in Berlin at Siemens, given that my wife Ana would "
        "rather stay in Lyon near her parents?"
    )  # long: it tells things
    assert not only_asks("Hi!") and not only_asks("")


def test_repeats_question_needs_a_question_with_the_same_content_words():
    from memory_core.text import repeats_question

    assert repeats_question("What is my sister's name?", "what's my sisters name??")
    assert repeats_question("Where did I park the car", "Where did I park the car?")
    assert not repeats_question("What is my sister's name?", "My sister's name is Ana.")  # a statement
    assert not repeats_question("What is my brother's name?", "What is my sister's name?")
    assert not repeats_question("What's my sister's name and where does she live?", "What is my sister's name?")
    assert not repeats_question("?", "?")
    # typed without a question mark
    assert repeats_question("whats my sisters name", "whats my sisters name")
    assert repeats_question("What is my sister's name?", "what is my sisters name")
    assert not repeats_question("my sisters name", "my sisters name")  # not a question
