"""Copying between memory spaces (memory_core.spaces.component copy_pages / copy_facts): a copy is a new item in the
target space with the same text, vector and sources; the original stays and is forgotten on its own; a
segment's copied pages make a segment of one space; each copy is logged. Real store, real embedder."""

from __future__ import annotations

from memory_core import RetrievalBudget
from tests.memory_core.test_spaces import EXCHANGES, _fill


def test_copied_pages_are_new_pages_of_the_target_space(open_store, clock):
    s = open_store(stm_capacity=1)
    cid = s.conversations.create_conversation()
    ids = _fill(s, clock, cid)
    work = s.spaces.create("Work")
    before = s.event_log.latest_event_id()
    new = s.spaces.copy_pages(ids[:2], work)
    assert len(new) == 2 and not set(new) & set(ids)
    assert s.spaces.copy_pages(new, work) == []  # already there
    for old, nid in zip(ids[:2], new):
        a, b = s.pages.get(old), s.pages.get(nid)
        assert (b.user_text, b.assistant_text, b.timestamp, b.conversation_id) == (
            a.user_text,
            a.assistant_text,
            a.timestamp,
            a.conversation_id,
        )
        assert a.space_id == 1 and b.space_id == work and b.tier == a.tier
    assert {sp.name: sp.pages for sp in s.spaces.list()} == {"Personal": len(ids), "Work": 2}
    for sg in s.segments.list_segments(limit=50):
        pages = s.pages.list_pages(segment_id=sg.id, limit=50)
        assert {p.space_id for p in pages} <= {sg.space_id} and sg.page_count == len(pages)
    assert s.check_integrity() == []
    assert [e.kind for e in s.event_log.events(since_id=before, kinds=["space_copied"])] == ["space_copied"]
    # the copy is recalled in Work, and forgetting the original leaves it
    s.curation.forget("page", ids[0])
    hits = s.retrieve("golden retriever puppy Biscuit", cid, RetrievalBudget(pages=3), spaces=frozenset({work}))
    assert new[0] in {h.page.id for h in hits.pages} | {h.page.id for h in hits.stm}
    assert s.pages.get(new[0]) is not None


def test_copied_facts_keep_text_vector_and_sources(open_store, clock):
    s = open_store(stm_capacity=1)
    cid = s.conversations.create_conversation()
    _fill(s, clock, cid, EXCHANGES[:1])
    work = s.spaces.create("Work")
    kid = s.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    tid = s.persona.add_trait("likes", "dogs")
    [copy] = s.spaces.copy_facts("knowledge", [kid], work)
    [tcopy] = s.spaces.copy_facts("trait", [tid], work)
    a, b = s.persona.get_knowledge(kid), s.persona.get_knowledge(copy)
    assert b.text == a.text and b.space_id == work and a.space_id == 1 and b.status == "active"
    assert s.persona.get_trait(tcopy).value == "dogs" and s.persona.get_trait(tcopy).space_id == work
    hits = s.retrieve("what is my dog called", cid, RetrievalBudget(knowledge=3), spaces=frozenset({work}))
    assert copy in {h.item.id for h in hits.knowledge}
    s.curation.forget("knowledge", [kid])
    assert s.persona.get_knowledge(copy).status == "active"
    assert s.check_integrity() == []
