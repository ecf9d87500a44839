"""The management API the inspector reads: event filters, a segment's events (visits included),
deep paging that matches shallow paging, knowledge counts with a text filter."""

from __future__ import annotations

from memory_core import RetrievalBudget

from .conftest import basis, mix


def _fill(store, n: int, per_conv: int = 40):
    """n pages with fixed vectors (no model needed for the paging mechanics)."""
    dim = store.dim
    done = 0
    while done < n:
        cid = store.conversations.create_conversation(f"c{done}")
        k = min(per_conv, n - done)
        store.intake.add_pages(
            cid,
            [
                {
                    "user_text": f"page {done + i} about topic {(done + i) % 7}",
                    "assistant_text": "ok",
                    "timestamp": 1000.0 + done + i,
                    "embedding": mix(dim, (done + i) % 7, 100 + (done + i) % 5, 0.9),
                }
                for i in range(k)
            ],
        )
        done += k


def test_events_filters_and_latest_id(open_store):
    s = open_store(stm_capacity=1)
    assert s.event_log.latest_event_id() == 0 and s.event_log.events() == []
    _fill(s, 30)
    every = s.event_log.events(limit=10_000)
    assert s.event_log.latest_event_id() == every[-1].id
    moved = s.event_log.events(limit=10_000, kinds=["page_moved"])
    assert moved and {e.kind for e in moved} == {"page_moved"}
    assert [e.id for e in moved] == [e.id for e in every if e.kind == "page_moved"]
    rest = s.event_log.events(limit=10_000, exclude_kinds=["page_moved"])
    assert len(rest) + len(moved) == len(every)
    newest = s.event_log.events(limit=5, newest=True)
    assert [e.id for e in newest] == [e.id for e in every[-5:]]
    sid = moved[0].detail["segment_id"]
    own = s.event_log.events(limit=1000, item_kind="segment", item_id=sid)
    assert own and all(e.item_kind == "segment" and e.item_id == sid for e in own)


def test_segment_events_include_visits_and_replay_heat(open_store, clock):
    s = open_store(stm_capacity=1)
    dim = s.dim
    cid = s.conversations.create_conversation("t")
    for i in range(4):
        s.intake.add_page(cid, f"I like hiking {i}", "nice", embedding=mix(dim, 3, 50 + i, 0.95))
        clock.advance(60)
    s.intake.add_page(cid, "unrelated", "ok", embedding=basis(dim, 200))  # pushes the last hiking page out of STM
    seg = s.segments.list_segments(tier="mtm", order_by="page_count", limit=1)[0]
    before = seg.n_visit
    r = s.retrieve("hiking", None, RetrievalBudget(pages=3))
    assert any(h.page.segment_id == seg.id for h in r.pages)
    s.segments.record_quoted_pages([h.page.id for h in r.pages])  # the reply's prompt quoted them
    evs = s.event_log.segment_events(seg.id)
    visits = [e for e in evs if e.kind == "segment_visited"]
    after = s.segments.get(seg.id)
    assert after.n_visit == before + 1 and len(visits) == after.n_visit
    assert visits[-1].detail["n_visit"] == after.n_visit
    moved_in = [e for e in evs if e.kind == "page_moved"]
    assert len(moved_in) == after.page_count
    assert [e.id for e in evs] == sorted(e.id for e in evs)
    # no record_visits -> no event
    n = len(s.event_log.segment_events(seg.id))
    s.retrieve("hiking", None, RetrievalBudget(pages=3), record_visits=False)
    assert len(s.event_log.segment_events(seg.id)) == n


def test_deep_pages_equal_shallow_pages_for_every_order(open_store):
    s = open_store(stm_capacity=3, mtm_capacity=20)
    _fill(s, 1300)
    for order in ("id", "tier", "segment", "conversation", "timestamp"):
        for desc in (False, True):
            whole = [p.id for p in s.pages.list_pages(order_by=order, descending=desc, limit=2000)]
            assert len(whole) == 1300
            deep = [p.id for p in s.pages.list_pages(order_by=order, descending=desc, limit=150, offset=1100)]
            assert deep == whole[1100:1250], (order, desc)
            tail = s.pages.list_pages(order_by=order, descending=desc, limit=500, offset=1200)
            assert [p.id for p in tail] == whole[1200:]
            assert all(p.user_text.startswith("page ") for p in tail)
    # with a filter, the deep path pages through the filtered rows
    odd = [p.id for p in s.pages.list_pages(text="topic 3", order_by="timestamp", limit=5000)]
    assert 150 < len(odd) < 1300
    many = [p.id for p in s.pages.list_pages(text="about", order_by="segment", limit=5000)]
    assert len(many) > 1050
    assert [p.id for p in s.pages.list_pages(text="about", order_by="segment", limit=50, offset=1000)] == many[
        1000:1050
    ]


def test_count_knowledge_with_text(open_store):
    s = open_store()
    for owner, text in [
        ("user", "Loves hiking in the Alps"),
        ("user", "Owns a cat"),
        ("assistant", "Suggested hiking boots"),
    ]:
        s.persona.add_knowledge(owner, text)
    assert s.persona.count_knowledge(text="hiking") == 2
    assert s.persona.count_knowledge("user", text="hiking") == 1
    assert s.persona.count_knowledge(text="HIKING") == 2
    assert len(s.persona.list_knowledge(text="hiking")) == s.persona.count_knowledge(text="hiking")
