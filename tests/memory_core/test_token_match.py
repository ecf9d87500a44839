"""Word-by-word matching (memory_core.pages.token_match, page_tok): the functions by hand, then the store with
the real embedder's token vectors: rows kept through add/edit/forget/wipe, the score it adds, the
background indexing of older memories, and a changed embedding model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memory_core import MemoryStore, RetrievalBudget
from memory_core.pages import token_match as TM
from memory_core.types import page_text


def test_content_positions_keep_words_that_carry_topic():
    toks = [
        "melanie",
        "'",
        "s",
        "pot",
        "##tery",
        "class",
        ",",
        "and",
        "the",
        "kids",
        "loved",
        "it",
        "!",
        "a",
        "2023",
        "东",
        "京",
    ]
    kept = [toks[i] for i in TM.content_positions(toks)]
    assert kept == ["melanie", "pot", "##tery", "class", "kids", "loved", "2023", "东", "京"]
    assert [toks[i] for i in TM.content_positions(toks, drop=["Melanie"])][:2] == ["pot", "##tery"]
    # a continuation piece of a dropped word goes with it
    assert TM.content_positions(["the", "##re", "rome"]) == [2]


def test_pack_keeps_the_cosines_and_unpack_renormalises():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(6, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    toks = ["rome", "the", "trip", "week", "!", "short"]
    blob = TM.pack(v, toks)
    assert len(blob) == 4 * 192  # "the" and "!" are not kept; two values a byte
    back = TM.unpack(blob, 384)
    np.testing.assert_allclose(np.linalg.norm(back, axis=1), 1.0, atol=1e-5)
    cos = np.sum(back * v[[0, 2, 3, 5]], axis=1)
    assert cos.min() > 0.97  # 4 bits a value (MiniLM's token rows: 0.98-0.99)
    # the largest value of each row comes back exactly, its sign too
    big = np.argmax(np.abs(v[[0, 2, 3, 5]]), axis=1)
    assert np.array_equal(np.sign(back[range(4), big]), np.sign(v[[0, 2, 3, 5]][range(4), big]))
    # an odd dimension pads its last byte
    odd = TM.pack(v[:1, :5] / np.linalg.norm(v[:1, :5]), ["rome"])
    assert len(odd) == 3 and TM.unpack(odd, 5).shape == (1, 5)
    assert TM.pack(v[:2], ["the", "!"]) == b"" and TM.unpack(b"", 384).shape == (0, 384)


def test_maxsim_by_hand():
    q = np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32)
    page_a = np.array([[1, 0, 0], [0.6, 0.8, 0]], dtype=np.float32)  # best: 1.0 and 0.8
    page_b = np.array([[0, 0, 1]], dtype=np.float32)  # best: 0 and 0
    empty = np.zeros((0, 3), dtype=np.float32)
    np.testing.assert_allclose(TM.maxsim(q, [page_a, empty, page_b]), [0.9, 0.0, 0.0], atol=1e-6)
    assert TM.maxsim(q, []).shape == (0,)
    # packed: the same figures through 4-bit rows (within their rounding: 0.6 / 0.8 is stored as 5 / 7)
    blobs = [TM.pack(page_a, ["rome", "trip"]), b"", TM.pack(page_b, ["city"])]
    np.testing.assert_allclose(TM.maxsim_packed(q, blobs, 3), [0.9, 0.0, 0.0], atol=2e-2)
    rng = np.random.default_rng(3)
    pages = [rng.normal(size=(n, 16)).astype(np.float32) for n in (3, 0, 5, 1)]
    pages = [p / np.linalg.norm(p, axis=1, keepdims=True) if len(p) else p for p in pages]
    qq = rng.normal(size=(4, 16)).astype(np.float32)
    packed = [TM.pack(p, ["word"] * len(p)) for p in pages]
    np.testing.assert_allclose(
        TM.maxsim_packed(qq, packed, 16), TM.maxsim(qq, [TM.unpack(b, 16) for b in packed]), atol=1e-5
    )
    assert TM.maxsim_packed(qq, [], 16).shape == (0,) and TM.maxsim_packed(qq, [b""], 16).tolist() == [0.0]
    # a damaged row cut short keeps its whole rows and does not fail the query
    cut = [packed[0][:-3], packed[2]]
    np.testing.assert_allclose(
        TM.maxsim_packed(qq, cut, 16),
        TM.maxsim(qq, [TM.unpack(packed[0][:16], 16), TM.unpack(packed[2], 16)]),
        atol=1e-5,
    )
    assert TM.query_matrix(q, ["how", "are"]) is None


def _rows(store) -> dict[int, bytes]:
    return dict(store.db.rows("SELECT page_id, vecs FROM page_tok"))


def test_token_rows_follow_pages_through_add_edit_forget_and_wipe(open_tok, embedder):
    s = open_tok()
    cid = s.conversations.create_conversation()
    a = s.intake.add_page(cid, "I took a short trip to Rome last week.", "Rome is lovely in spring!")
    b = s.intake.add_page(cid, "Oh, is it?", "Yes, it is. Me too!")
    s.intake.add_pages(
        cid, [{"user_text": f"Imported message {i} about gardening", "assistant_text": "Nice."} for i in range(3)]
    )
    rows = _rows(s)
    assert set(rows) == {p.id for p in s.pages.list_pages()} and s.jobs.pending(kinds=["index_tokens"]) == 0
    vecs, per_text = embedder.embed_with_tokens(
        [page_text("I took a short trip to Rome last week.", "Rome is lovely in spring!")]
    )
    assert rows[a] == TM.pack(*per_text[0])  # the vectors of the pass that embedded the page
    assert rows[b] == b""  # "Oh, is it? Yes, it is. Me too!": no content word
    stats = s.stats()
    sides = dict(s.db.rows("SELECT page_id, sides FROM page_tok"))  # and each page's two side vectors
    assert stats["pages_word_indexed"] == 5
    assert stats["word_index_bytes"] == sum(len(v) for v in rows.values()) + sum(len(v) for v in sides.values())
    s.curation.edit_page(a, user_text="I took a long trip to Lisbon last month.")
    edited = TM.unpack(_rows(s)[a], embedder.dim)
    _, per_new = embedder.embed_with_tokens(
        [page_text("I took a long trip to Lisbon last month.", "Rome is lovely in spring!")]
    )
    assert edited.shape[0] == len(TM.content_positions(per_new[0][1]))
    s.curation.forget("page", a)
    assert a not in _rows(s)
    s.curation.wipe_memory()
    assert _rows(s) == {}


def test_retrieval_adds_the_word_by_word_score(open_tok, embedder, tmp_path):
    s = open_tok()
    cid = s.conversations.create_conversation()
    user, reply = "Last week I took a short trip to Rome to clear my mind.", "Sounds like a great break!"
    s.intake.add_page(cid, user, reply)
    s.close()
    query = "Which cities have I visited?"
    scores, hits = {}, {}
    for w in (0.0, 1.0):
        st = open_tok(w_tokens=w)
        (hit,) = st.retrieve(query, budget=RetrievalBudget(pages=5), record_visits=False).pages
        scores[w], hits[w] = hit.score, hit
        assert ("word by word" in hit.reason) == (w > 0)
    # the quoting floor reads the score without the match (app.chat.prompting.QuoteFloor)
    assert hits[1.0].match_score == pytest.approx(scores[0.0], abs=1e-6)
    assert hits[0.0].match_score == pytest.approx(scores[0.0], abs=1e-6)
    (qv, qt), (pv, pt) = embedder.embed_with_tokens([query, page_text(user, reply)])[1]
    expected = TM.maxsim(TM.query_matrix(qv, qt), [TM.unpack(TM.pack(pv, pt), embedder.dim)])[0]
    assert 0.3 < expected < 1.0
    assert scores[1.0] - scores[0.0] == pytest.approx(expected, abs=1e-4)
    # without a token embedder the store ranks as before, whatever w_tokens says
    plain = open_tok(tokens=False)
    (hit,) = plain.retrieve(query, budget=RetrievalBudget(pages=5), record_visits=False).pages
    assert hit.score == pytest.approx(scores[0.0], abs=1e-6) and "word by word" not in hit.reason


def test_an_older_memory_is_indexed_in_the_background_with_progress(open_tok):
    """A memory from before word rows (its pages read in context already) gets them, batch by batch."""
    old = open_tok()
    cid = old.conversations.create_conversation()
    for i in range(7):
        old.intake.add_page(cid, f"Message {i}: I planted {i} tomato seedlings in the garden.", "Lovely!")
    with old.transaction():
        old.db.execute("DELETE FROM page_tok")
    old.close()
    s = open_tok(tokens=True)
    assert s.jobs.pending(kinds=["index_tokens"]) == 1 and s.jobs.pending(kinds=["read_in_context"]) == 0
    seen = []
    s.jobs.on_progress = lambda what, done, total: seen.append((what, done, total))
    s.upkeep.TOKEN_INDEX_BATCH = 3  # three jobs, each queueing the next
    assert s.jobs.run_pending() == 3
    assert len(_rows(s)) == 7 and s.jobs.pending() == 0
    words = [x for x in seen if x[0] == "indexing words"]
    assert words[0] == ("indexing words", 0, 7) and words[-1] == ("indexing words", 7, 7)
    s.close()
    assert open_tok(tokens=True).jobs.pending() == 0  # nothing left to index: nothing queued


def test_pages_without_rows_are_scored_on_the_spot_when_few(open_tok):
    s = open_tok()
    cid = s.conversations.create_conversation()
    for i in range(30):
        s.intake.add_page(cid, f"Note {i}: the tomato seedlings need water every {i} days.", "Got it.")
    ids = [p.id for p in s.pages.list_pages()]
    s.db.execute("DELETE FROM page_tok WHERE page_id = ?", (ids[0],))  # one page of 30 not indexed yet
    hits = s.retrieve(
        "How often do the tomato seedlings need water?", budget=RetrievalBudget(pages=30), record_visits=False
    ).pages
    assert all("word by word" in h.reason for h in hits)
    with s.transaction():
        s.db.execute("DELETE FROM page_tok WHERE page_id IN (SELECT value FROM json_each(?))", (str(ids[:15]),))
    hits = s.retrieve(
        "How often do the tomato seedlings need water?", budget=RetrievalBudget(pages=30), record_visits=False
    ).pages
    assert hits and not any("word by word" in h.reason for h in hits)  # half missing: nobody scored


def test_a_changed_embedding_model_drops_the_token_rows(open_tok):
    s = open_tok()
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "My sister lives in Porto.", "Nice city!")
    assert len(_rows(s)) == 1
    s.close()
    s = open_tok(model_id="another-model-384d")
    assert _rows(s) == {}
    # the re-embedding writes the new model's rows as it goes: no separate indexing pass
    assert s.jobs.pending(kinds=["reembed"]) == 1 and s.jobs.pending(kinds=["index_tokens"]) == 0
    s.jobs.run_pending()
    assert len(_rows(s)) == 1


def test_migration_adds_the_token_table(tmp_path, embedder, clock):
    from memory_core.storage import schema as D

    conn = D.connect(tmp_path / "v3.db")
    for i in range(3):
        conn.execute("BEGIN")
        D.MIGRATIONS[i](conn, embedder.dim)
        conn.execute(f"PRAGMA user_version={i + 1}")
        conn.execute("COMMIT")
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'page_tok'").fetchone()
    conn.close()
    s = MemoryStore.open(
        tmp_path / "v3.db",
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        clock=clock,
        embed_tokens=embedder.embed_with_tokens,
    )
    try:
        assert s.db.scalar("PRAGMA user_version") == D.SCHEMA_VERSION >= 5
        cid = s.conversations.create_conversation()
        s.intake.add_page(cid, "works after migration", "yes")
        assert s.db.scalar("SELECT count(*) FROM page_tok") == 1
    finally:
        s.close()


# ---------------------------------------------------------------- what a page is read after (late chunking)
TURTLES = [
    ("Look how cute my two turtles are!", "Aww, adorable! How long have you had them?"),
    ("I've had them for 3 years now.", "They must bring you a lot of joy."),
    ("They do. I walk them every Sunday.", "Ha, that's sweet!"),
]


def _read_after(embedder, user, reply, context):
    """The vector and packed rows of a page read after `context`, straight from the embedder."""
    vecs, per_text = embedder.embed_with_tokens([page_text(user, reply)], [context])
    return vecs[0], TM.pack(*per_text[0])


def test_a_page_is_read_after_the_last_side_of_the_page_before_it(open_tok, embedder, clock):
    s = open_tok()
    cid = s.conversations.create_conversation()
    a = s.intake.add_page(cid, *TURTLES[0])
    b = s.intake.add_page(cid, *TURTLES[1])
    vec_b, rows_b = _read_after(embedder, *TURTLES[1], TURTLES[0][1])
    np.testing.assert_allclose(s.pages.page_vec(b), vec_b, atol=1e-6)
    assert _rows(s)[b] == rows_b
    np.testing.assert_allclose(s.pages.page_vec(a), embedder.embed([page_text(*TURTLES[0])])[0], atol=1e-6)
    # another conversation, or the same one a day later, starts afresh
    other = s.intake.add_page(s.conversations.create_conversation(), *TURTLES[2])
    clock.advance(86400)
    later = s.intake.add_page(cid, *TURTLES[2])
    plain = embedder.embed([page_text(*TURTLES[2])])[0]
    np.testing.assert_allclose(s.pages.page_vec(other), plain, atol=1e-6)
    np.testing.assert_allclose(s.pages.page_vec(later), plain, atol=1e-6)
    # a page with no reply gives its message as the next page's context
    c2 = s.conversations.create_conversation()
    s.intake.add_page(c2, "Look how cute my two turtles are!", "")
    d = s.intake.add_page(c2, *TURTLES[1])
    np.testing.assert_allclose(s.pages.page_vec(d), _read_after(embedder, *TURTLES[1], TURTLES[0][0])[0], atol=1e-6)


def test_every_way_in_reads_the_same_context(open_tok, embedder, tmp_path):
    """add_page one by one, add_pages in one call, embed_pages in chunks (the importer) and the add_page job
    give each page the same vector and rows."""
    items = [{"user_text": u, "assistant_text": a} for u, a in TURTLES]
    one = open_tok(tmp_path / "one.db")
    cid = one.conversations.create_conversation()
    by_one = [one.intake.add_page(cid, it["user_text"], it["assistant_text"]) for it in items]
    bulk = open_tok(tmp_path / "bulk.db")
    by_bulk = bulk.intake.add_pages(bulk.conversations.create_conversation(), [dict(it) for it in items])
    chunked = open_tok(tmp_path / "chunked.db")
    pre = [dict(it) for it in items]
    chunked.intake.embed_pages(pre[:2])
    chunked.intake.embed_pages(pre[2:], before=pre[1])  # a later chunk: read after the chunk before
    by_chunk = chunked.intake.add_pages(chunked.conversations.create_conversation(), pre)
    jobs = open_tok(tmp_path / "jobs.db")
    jcid = jobs.conversations.create_conversation()
    for it in items:
        jobs.jobs.enqueue("add_page", {"cid": jcid, **it})
    jobs.jobs.run_pending()
    by_job = [p.id for p in sorted(jobs.pages.list_pages(), key=lambda p: p.id)]
    for store, ids in ((bulk, by_bulk), (chunked, by_chunk), (jobs, by_job)):
        for mine, theirs in zip(by_one, ids):
            np.testing.assert_allclose(store.pages.page_vec(theirs), one.pages.page_vec(mine), atol=1e-5)
            assert _rows(store)[theirs] == _rows(one)[mine]


def test_editing_or_forgetting_a_page_reads_the_next_one_again(open_tok, embedder):
    s = open_tok()
    cid = s.conversations.create_conversation()
    a, b, c = (s.intake.add_page(cid, u, r) for u, r in TURTLES)
    s.curation.edit_page(a, assistant_text="Aww! How old are they?")
    vec_b, rows_b = _read_after(embedder, *TURTLES[1], "Aww! How old are they?")
    np.testing.assert_allclose(s.pages.page_vec(b), vec_b, atol=1e-6)
    assert _rows(s)[b] == rows_b
    s.curation.forget("page", b)  # c was read after b's words: now after a's
    vec_c, rows_c = _read_after(embedder, *TURTLES[2], "Aww! How old are they?")
    np.testing.assert_allclose(s.pages.page_vec(c), vec_c, atol=1e-6)
    assert _rows(s)[c] == rows_c
    s.curation.forget("page", a)  # nothing before c any more
    np.testing.assert_allclose(s.pages.page_vec(c), embedder.embed([page_text(*TURTLES[2])])[0], atol=1e-6)


def test_indexing_words_later_reads_the_same_context(open_tok, embedder):
    s = open_tok()
    cid = s.conversations.create_conversation()
    ids = [s.intake.add_page(cid, u, r) for u, r in TURTLES]
    before = _rows(s)
    with s.transaction():
        s.db.execute("DELETE FROM page_tok")
    s.pages.queue_token_index(missing=True)
    s.jobs.run_pending()
    assert _rows(s) == before and set(before) == set(ids)


def test_an_older_memory_is_read_in_context_again_in_the_background(open_tok, embedder, tmp_path):
    """Pages embedded before pages were read after their neighbour (or without a token embedder) are
    embedded again, once, when the memory is opened with one."""
    path = tmp_path / "old.db"
    old = open_tok(path, tokens=False)
    cid = old.conversations.create_conversation()
    ids = [old.intake.add_page(cid, u, r) for u, r in TURTLES]
    plain = old.pages.page_vec(ids[1])
    old.close()
    s = open_tok(path)
    assert s.jobs.pending(kinds=["read_in_context"]) == 1 and s.jobs.pending(kinds=["reembed"]) == 0
    s.jobs.run_pending()
    np.testing.assert_allclose(
        s.pages.page_vec(ids[1]), _read_after(embedder, *TURTLES[1], TURTLES[0][1])[0], atol=1e-6
    )
    assert float(s.pages.page_vec(ids[1]) @ plain) < 0.99
    assert _rows(s)[ids[1]] == _read_after(embedder, *TURTLES[1], TURTLES[0][1])[1]
    s.close()
    again = open_tok(path)
    assert again.jobs.pending(kinds=["read_in_context"]) == 0  # once
    fresh = open_tok(tmp_path / "fresh.db")
    fresh.intake.add_page(fresh.conversations.create_conversation(), *TURTLES[0])
    assert fresh.jobs.pending(kinds=["read_in_context"]) == 0


def _tomato_pages(n: int) -> list[tuple[str, str]]:
    return [
        (f"Day {i}: I planted {i} tomato seedlings by the fence.", f"Reply {i}: lovely, water them well!")
        for i in range(n)
    ]


def test_reading_an_older_memory_in_context_goes_batch_by_batch_and_resumes(open_tok, embedder, tmp_path):
    """Each batch commits alone and queues the next: a closed app resumes where it stopped. Until its turn a
    page keeps its old vector and word rows (the same model's), so the memory ranks meanwhile; its segment's
    vector follows its pages."""
    path = tmp_path / "batches.db"
    old = open_tok(path, tokens=False, stm_capacity=2)  # most pages paged out to mid-term segments
    cid = old.conversations.create_conversation()
    for u, a in _tomato_pages(7):
        old.intake.add_page(cid, u, a)
    old.close()
    first = open_tok(path, stm_capacity=2)
    index = first.jobs.handler("index_tokens")(0, {})  # word rows for every page, as a memory from before had
    with first.transaction():
        index()
    rows = _rows(first)
    assert len(rows) == 7
    first.upkeep.READ_IN_CONTEXT_BATCH = 3
    seen = []
    first.jobs.on_progress = lambda what, done, total: seen.append((what, done, total))
    assert first.jobs.run_pending(max_jobs=1, kinds=["read_in_context"]) == 1
    first.close()  # the app closes after one batch
    assert ("re-embedding memory", 3, 7) in seen
    ids = sorted(rows)
    ctx = {ids[i]: _tomato_pages(7)[i - 1][1] for i in range(1, 7)}
    pages = dict(zip(ids, _tomato_pages(7)))
    s = open_tok(path, stm_capacity=2)
    assert s.jobs.pending(kinds=["read_in_context"]) == 1  # resumed, not started again
    assert _rows(s) == rows  # nothing dropped meanwhile
    plain_last = s.pages.page_vec(ids[-1])
    np.testing.assert_allclose(
        s.pages.page_vec(ids[1]), _read_after(embedder, *pages[ids[1]], ctx[ids[1]])[0], atol=1e-6
    )
    assert s.retrieve("tomato seedlings by the fence", record_visits=False).pages
    s.upkeep.READ_IN_CONTEXT_BATCH = 3
    events = []
    s.db.add_listener(events.append)
    assert s.jobs.run_pending(kinds=["read_in_context"]) == 2  # pages 4-6, then 7
    np.testing.assert_allclose(
        s.pages.page_vec(ids[-1]), _read_after(embedder, *pages[ids[-1]], ctx[ids[-1]])[0], atol=1e-6
    )
    assert float(s.pages.page_vec(ids[-1]) @ plain_last) < 0.9999
    assert s.jobs.pending(kinds=["read_in_context", "index_tokens", "reembed"]) == 0
    done = [e for e in events if e.kind == "reembedded"]
    assert len(done) == 1 and "read after the one before it" in done[0].summary
    segments = {p.segment_id for p in s.pages.list_pages() if p.segment_id is not None}
    assert segments
    for sid in segments:
        members = [p.id for p in s.pages.list_pages() if p.segment_id == sid]
        total = sum(s.pages.page_vec(pid) for pid in members)
        stored = np.frombuffer(
            s.db.execute("SELECT emb_sum FROM segment WHERE id = ?", (sid,)).fetchone()[0], np.float32
        )
        np.testing.assert_allclose(stored, total, atol=1e-5)


def test_a_page_edited_while_its_batch_was_read_keeps_the_edit(open_tok, embedder, tmp_path):
    """The batch is embedded outside the write: a page edited (or one whose page before was) meanwhile is
    left as the edit wrote it."""
    path = tmp_path / "edited.db"
    old = open_tok(path, tokens=False)
    cid = old.conversations.create_conversation()
    ids = [old.intake.add_page(cid, u, a) for u, a in _tomato_pages(3)]
    old.close()
    s = open_tok(path)
    apply = s.jobs.handler("read_in_context")(0, {"after": 0})
    s.curation.edit_page(ids[0], assistant_text="Reply 0: those need shade in July.")
    edited = {pid: s.pages.page_vec(pid) for pid in ids[:2]}
    with s.transaction():
        apply()
    for pid in ids[:2]:
        np.testing.assert_allclose(s.pages.page_vec(pid), edited[pid], atol=1e-6)
    np.testing.assert_allclose(
        s.pages.page_vec(ids[1]),
        _read_after(embedder, *_tomato_pages(3)[1], "Reply 0: those need shade in July.")[0],
        atol=1e-6,
    )


def test_pages_added_while_words_were_off_are_read_in_context_again(open_tok, embedder, tmp_path):
    """A memory read in context, opened once without a token embedder ("w tokens" 0), gets pages embedded
    alone; opened with one again, those are embedded again (once), and the event says why."""
    path = tmp_path / "toggle.db"
    s = open_tok(path)
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, *TURTLES[0])
    s.close()
    untouched = open_tok(path, tokens=False)  # opened without adding anything: nothing to redo
    untouched.close()
    assert open_tok(path).jobs.pending(kinds=["read_in_context"]) == 0
    off = open_tok(path, tokens=False)
    later = off.intake.add_page(cid, *TURTLES[1])
    off.close()
    events = []
    on = open_tok(path)
    on.db.add_listener(events.append)
    assert on.jobs.pending(kinds=["read_in_context"]) == 1
    on.jobs.run_pending()
    np.testing.assert_allclose(
        on.pages.page_vec(later), _read_after(embedder, *TURTLES[1], TURTLES[0][1])[0], atol=1e-6
    )
    done = [e for e in events if e.kind == "reembedded"]
    assert done and "read after the one before it" in done[0].summary
    on.close()
    assert open_tok(path).jobs.pending(kinds=["read_in_context"]) == 0
    # and again: each time pages were embedded alone (no job key that happened once keeps it from running)
    off = open_tok(path, tokens=False)
    off.intake.add_page(cid, "Day 9: the turtles came out in the sun.", "Lovely!")
    off.close()
    assert open_tok(path).jobs.pending(kinds=["read_in_context"]) == 1


def _context_job_starts(store) -> list[int]:
    return [
        int(json.loads(p)["after"])
        for (p,) in store.db.rows("SELECT payload FROM job WHERE status = 'pending' AND kind = 'read_in_context'")
    ]


def test_reading_in_context_again_starts_at_the_first_page_embedded_alone(open_tok, embedder, tmp_path):
    """Pages added, and the page after a forgotten one, while words were off: only those and what follows them
    are read again, not the whole memory."""
    path = tmp_path / "from.db"
    s = open_tok(path)
    cid = s.conversations.create_conversation()
    pages = _tomato_pages(6)
    ids = [s.intake.add_page(cid, u, a) for u, a in pages[:5]]
    s.close()
    off = open_tok(path, tokens=False)
    ids.append(off.intake.add_page(cid, *pages[5]))
    off.curation.forget("page", ids[3])  # ids[4] was read after it
    off.close()
    on = open_tok(path)
    assert _context_job_starts(on) == [ids[4] - 1]
    seen = []
    on.jobs.on_progress = lambda what, done, total: seen.append((what, done, total))
    on.jobs.run_pending()
    assert seen[0] == ("re-embedding memory", 3, 5)  # the three pages before it are not redone
    np.testing.assert_allclose(on.pages.page_vec(ids[4]), _read_after(embedder, *pages[4], pages[2][1])[0], atol=1e-6)
    np.testing.assert_allclose(on.pages.page_vec(ids[5]), _read_after(embedder, *pages[5], pages[4][1])[0], atol=1e-6)
    assert _rows(on)[ids[5]] == _read_after(embedder, *pages[5], pages[4][1])[1]
    assert on.db.get_meta("alone_from") is None and on.jobs.pending(kinds=["read_in_context"]) == 0
    on.close()
    assert open_tok(path).jobs.pending(kinds=["read_in_context"]) == 0


def test_reading_in_context_resumes_after_an_opening_without_words(open_tok, embedder, tmp_path):
    """A "read_in_context" job run while words are off stops at its cursor, and the next opening with them
    resumes there; a page before the cursor edited meanwhile moves the start back to it."""
    path = tmp_path / "resume.db"
    pages = _tomato_pages(7)
    old = open_tok(path, tokens=False)
    cid = old.conversations.create_conversation()
    ids = [old.intake.add_page(cid, u, a) for u, a in pages]
    old.close()
    first = open_tok(path)
    first.upkeep.READ_IN_CONTEXT_BATCH = 3
    assert first.jobs.run_pending(max_jobs=1, kinds=["read_in_context"]) == 1
    assert _context_job_starts(first) == [ids[2]]
    first.close()
    off = open_tok(path, tokens=False)
    assert off.jobs.run_pending(kinds=["read_in_context"]) == 1  # runs, but cannot read anything in context
    off.close()
    again = open_tok(path)
    assert _context_job_starts(again) == [ids[2]]  # resumed, not started from the first page
    again.close()
    off = open_tok(path, tokens=False)
    off.curation.edit_page(ids[1], assistant_text="Reply 1: they need shade in July.")
    off.close()
    s = open_tok(path)
    assert _context_job_starts(s) == [ids[0]]  # one job, from the edited page
    s.jobs.run_pending()
    edited = ("Day 1: I planted 1 tomato seedlings by the fence.", "Reply 1: they need shade in July.")
    np.testing.assert_allclose(s.pages.page_vec(ids[1]), _read_after(embedder, *edited, pages[0][1])[0], atol=1e-6)
    np.testing.assert_allclose(s.pages.page_vec(ids[2]), _read_after(embedder, *pages[2], edited[1])[0], atol=1e-6)
    np.testing.assert_allclose(s.pages.page_vec(ids[6]), _read_after(embedder, *pages[6], pages[5][1])[0], atol=1e-6)
    assert s.jobs.pending(kinds=["read_in_context"]) == 0
