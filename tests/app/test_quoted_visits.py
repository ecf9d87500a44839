"""Heat counts a visit only for a page a reply's prompt quoted (issue 31): small talk heats nothing, a
question whose answer is quoted heats that page's topic. Real store file, real embedder, the bundled GGUF."""

from __future__ import annotations

STATEMENTS = [
    "My sister Margot lives in Lisbon and teaches violin.",
    "I fixed the leaking kitchen tap this morning.",
    "Our cat Pixel knocked the plant off the shelf again.",
    "I signed up for a pottery class on Thursdays.",
    "The train to work was late three times this week.",
    "I am saving up for a trip to Japan next spring.",
]


def _visits(store) -> dict[int, int]:
    return {s.id: s.n_visit for s in store.segments.list_segments(limit=10_000)}


def _filled(agent, store) -> int:
    cid = agent.new_conversation()
    for text in STATEMENTS:
        agent.send(cid, text)
        store.jobs.run_pending(allow_llm=False)
    assert store.segments.count_segments() > 0  # STM holds 3: the first pages are in topics
    return cid


def test_hi_in_a_fresh_chat_heats_no_segment(agent, store):
    _filled(agent, store)
    before = _visits(store)
    events_before = store.event_log.latest_event_id()
    result = agent.send(agent.new_conversation(), "Hi!")
    assert result.status in ("complete", "stopped")
    assert result.trace["included"]["pages"] == []  # small talk quotes nothing
    assert _visits(store) == before
    assert not [e for e in store.event_log.events(limit=1000) if e.id > events_before and e.kind == "segment_visited"]


def test_a_quoted_page_heats_its_segment_and_only_its(agent, store):
    cid = _filled(agent, store)
    margot = store.pages.list_pages(conversation_id=cid, order_by="timestamp", descending=False, limit=1)[0]
    assert margot.segment_id is not None
    before = _visits(store)
    result = agent.send(agent.new_conversation(), "Where does my sister Margot live?")
    quoted = result.trace["included"]["pages"]
    assert margot.id in quoted
    after = _visits(store)
    quoted_segments = {store.pages.get(p).segment_id for p in quoted} - {None}
    assert after[margot.segment_id] == before[margot.segment_id] + 1
    for sid, n in after.items():  # recalled but not quoted: no visit
        assert n == before.get(sid, 0) + (1 if sid in quoted_segments else 0)


def test_retrieval_alone_records_no_visit(store):
    cid = store.conversations.create_conversation()
    for text in STATEMENTS:
        store.intake.add_page(cid, text, "Noted.")
    before = _visits(store)
    assert store.retrieve("Where does Margot live?").pages
    assert _visits(store) == before
