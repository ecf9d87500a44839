"""A memory segmented by an older rule is segmented again, once, in resumable "resegment" jobs (issue 31)."""

from __future__ import annotations

from memory_core import segments as S

from .conftest import basis, mix

D = 384
TOPICS = ["kayak river paddle", "violin concert bow", "garden tomato soil", "chess opening gambit"]


def _old_memory(open_store, path):
    """A memory as the old rule left it: every mid-term page in one segment, no `segmenting` mark."""
    s = open_store(path, stm_capacity=0, tau=1e9)
    cid = s.create_conversation()
    for i in range(6):
        for k, words in enumerate(TOPICS):
            s.add_page(cid, f"{words} {i}", "ok", embedding=mix(D, k, 40 + 4 * i + k, 0.9))
    keep = s.list_segments(order_by="id", descending=False, limit=1)[0].id
    s._x("UPDATE page SET segment_id = ? WHERE tier = 'mtm'", (keep,))
    s._x("DELETE FROM segment_vec WHERE segment_id != ?", (keep,))
    s._x("DELETE FROM segment WHERE id != ?", (keep,))
    with s.transaction():
        s.segments.rebuild(keep)
    s._x("DELETE FROM meta WHERE key = 'segmenting'")
    s._x("DELETE FROM job WHERE kind = 'title_segment'")  # the old rule's memories queued no titles
    assert s.count_segments() == 1 and s.get_segment(keep).page_count == 24
    return s


def test_an_older_memory_is_segmented_again_in_batches(open_store, tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    _old_memory(open_store, path).close()
    monkeypatch.setattr(S, "RESEGMENT_BATCH", 10)  # three jobs for 24 pages: it resumes batch by batch
    s = open_store(path, stm_capacity=0, tau=1e9)
    assert [j.kind for j in s.list_jobs("pending")] == ["resegment"]
    assert s.run_pending(max_jobs=1) == 1
    assert s.count_pages(tier="mtm") == 24  # nothing lost between batches
    s.run_pending()
    assert s.pending_jobs() == 0
    segs = s.list_segments(limit=100)
    assert len(segs) >= 4 and max(seg.page_count for seg in segs) <= 8
    assert all(s.get_page(p.id).segment_id is not None for p in s.list_pages(tier="mtm", limit=100))
    assert sum(seg.page_count for seg in segs) == 24
    assert any(e.kind == "resegmented" for e in s.events(limit=100))
    # once: a later opening queues nothing
    s.close()
    assert open_store(path, stm_capacity=0, tau=1e9).pending_jobs() == 0


def test_a_pinned_segment_is_left_as_it_is(open_store, tmp_path):
    path = tmp_path / "old.db"
    old = _old_memory(open_store, path)
    sid = old.list_segments(limit=1)[0].id
    old.pin("segment", sid)
    old._x("DELETE FROM meta WHERE key = 'segmenting'")
    old.close()
    s = open_store(path, stm_capacity=0, tau=1e9)
    assert s.pending_jobs() == 0  # nothing unpinned to segment again
    assert s.get_segment(sid).page_count == 24


def test_a_new_memory_queues_no_resegmenting(open_store):
    s = open_store(stm_capacity=0, tau=1e9)
    s.add_page(s.create_conversation(), "hello", "hi", embedding=basis(D, 1))
    assert s.pending_jobs() == 0


def test_segmenting_again_keeps_a_page_that_opens_no_topic_with_its_dialogue(open_store, tmp_path):
    """The resegment job places pages by the current rule, chain links as they were made (decision 0024)."""
    path = tmp_path / "old.db"
    s = open_store(path, stm_capacity=0, tau=1e9)
    cid = s.create_conversation()
    kayak = [
        s.add_page(cid, f"kayak river paddle {w}", "fun", embedding=mix(D, 0, 10 + i, 0.9))
        for i, w in enumerate(["trip", "again"])
    ]
    wow = s.add_page(cid, "wow kayak river sounds great", "yes", embedding=mix(D, 0, 50, 0.3))
    away = s.add_page(cid, "wow kayak river sounds great", "yes", embedding=mix(D, 0, 60, -0.6))
    keep = s.get_page(kayak[0]).segment_id
    s._x("UPDATE page SET segment_id = ? WHERE tier = 'mtm'", (keep,))  # as an older rule might have left them
    s._x("DELETE FROM segment_vec WHERE segment_id != ?", (keep,))
    s._x("DELETE FROM segment WHERE id != ?", (keep,))
    with s.transaction():
        s.segments.rebuild(keep)
    s._x("DELETE FROM meta WHERE key = 'segmenting'")
    s.close()
    s = open_store(path, stm_capacity=0, tau=1e9)
    s.run_pending()
    seg = s.get_page(kayak[0]).segment_id
    assert s.get_page(kayak[1]).segment_id == seg == s.get_page(wow).segment_id
    assert s.get_page(away).segment_id not in (None, seg)
