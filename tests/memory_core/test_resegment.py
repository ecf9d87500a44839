"""A memory segmented by an older rule is segmented again, once, in resumable "resegment" jobs (issue 31)."""

from __future__ import annotations

from memory_core.segments import component as S

from .conftest import basis, mix

D = 384
TOPICS = ["kayak river paddle", "violin concert bow", "garden tomato soil", "chess opening gambit"]


def _old_memory(open_store, path):
    """A memory as the old rule left it: every mid-term page in one segment, no `segmenting` mark."""
    s = open_store(path, stm_capacity=0, tau=1e9)
    cid = s.conversations.create_conversation()
    for i in range(6):
        for k, words in enumerate(TOPICS):
            s.intake.add_page(cid, f"{words} {i}", "ok", embedding=mix(D, k, 40 + 4 * i + k, 0.9))
    keep = s.segments.list_segments(order_by="id", descending=False, limit=1)[0].id
    s.db.execute("UPDATE page SET segment_id = ? WHERE tier = 'mtm'", (keep,))
    s.db.execute("DELETE FROM segment_vec WHERE segment_id != ?", (keep,))
    s.db.execute("DELETE FROM segment WHERE id != ?", (keep,))
    with s.transaction():
        s.segments.rebuild(keep)
    s.db.execute("DELETE FROM meta WHERE key = 'segmenting'")
    s.db.execute("DELETE FROM job WHERE kind = 'title_segment'")  # the old rule's memories queued no titles
    assert s.segments.count_segments() == 1 and s.segments.get(keep).page_count == 24
    return s


def test_an_older_memory_is_segmented_again_in_batches(open_store, tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _old_memory(open_store, path).close()
    monkeypatch.setattr(S, "RESEGMENT_BATCH", 10)  # three jobs for 24 pages: it resumes batch by batch
    s = open_store(path, stm_capacity=0, tau=1e9)
    assert [j.kind for j in s.jobs.list_jobs("pending")] == ["resegment"]
    assert s.jobs.run_pending(max_jobs=1) == 1
    assert s.pages.count_pages(tier="mtm") == 24  # nothing lost between batches
    s.jobs.run_pending()
    assert s.jobs.pending() == 0
    segs = s.segments.list_segments(limit=100)
    assert len(segs) >= 4 and max(seg.page_count for seg in segs) <= 8
    assert all(s.pages.get(p.id).segment_id is not None for p in s.pages.list_pages(tier="mtm", limit=100))
    assert sum(seg.page_count for seg in segs) == 24
    assert any(e.kind == "resegmented" for e in s.event_log.events(limit=100))
    # once: a later opening queues nothing
    s.close()
    assert open_store(path, stm_capacity=0, tau=1e9).jobs.pending() == 0


def test_a_pinned_segment_is_left_as_it_is(open_store, tmp_path):
    path = tmp_path / "old.db"
    old = _old_memory(open_store, path)
    sid = old.segments.list_segments(limit=1)[0].id
    old.curation.pin("segment", sid)
    old.db.execute("DELETE FROM meta WHERE key = 'segmenting'")
    old.close()
    s = open_store(path, stm_capacity=0, tau=1e9)
    assert s.jobs.pending() == 0  # nothing unpinned to segment again
    assert s.segments.get(sid).page_count == 24


def test_a_new_memory_queues_no_resegmenting(open_store):
    s = open_store(stm_capacity=0, tau=1e9)
    s.intake.add_page(s.conversations.create_conversation(), "hello", "hi", embedding=basis(D, 1))
    assert s.jobs.pending() == 0


def test_segmenting_again_keeps_a_page_that_opens_no_topic_with_its_dialogue(open_store, tmp_path):
    """The resegment job places pages by the current rule, chain links as they were made (decision 0024)."""
    path = tmp_path / "old.db"
    s = open_store(path, stm_capacity=0, tau=1e9)
    cid = s.conversations.create_conversation()
    kayak = [
        s.intake.add_page(cid, f"kayak river paddle {w}", "fun", embedding=mix(D, 0, 10 + i, 0.9))
        for i, w in enumerate(["trip", "again"])
    ]
    wow = s.intake.add_page(cid, "wow kayak river sounds great", "yes", embedding=mix(D, 0, 50, 0.3))
    away = s.intake.add_page(cid, "wow kayak river sounds great", "yes", embedding=mix(D, 0, 60, -0.6))
    keep = s.pages.get(kayak[0]).segment_id
    s.db.execute("UPDATE page SET segment_id = ? WHERE tier = 'mtm'", (keep,))  # as an older rule might have left them
    s.db.execute("DELETE FROM segment_vec WHERE segment_id != ?", (keep,))
    s.db.execute("DELETE FROM segment WHERE id != ?", (keep,))
    with s.transaction():
        s.segments.rebuild(keep)
    s.db.execute("DELETE FROM meta WHERE key = 'segmenting'")
    s.close()
    s = open_store(path, stm_capacity=0, tau=1e9)
    s.jobs.run_pending()
    seg = s.pages.get(kayak[0]).segment_id
    assert s.pages.get(kayak[1]).segment_id == seg == s.pages.get(wow).segment_id
    assert s.pages.get(away).segment_id not in (None, seg)
