"""Merging two memory spaces with the dedup of a cube import (memory_core.spaces.fusion): a fact close to
one of the target's updates it (the older text stays a version) or confirms it (no new version), a pinned
target is left and the conflict reported, a page held already is not doubled and takes no fact with it,
an older fact is kept archived, and a dry run says all this and changes nothing. Real store, real embedder."""

from __future__ import annotations

from memory_core.spaces.fusion import SpaceMerge


def _two_spaces(s, clock, pairs, *, pin_target: bool = False):
    """Personal holds the first text of each pair, Work (an hour later) the second; returns Work's id."""
    work = s.spaces.create("Work")
    held = [s.persona.add_knowledge("user", a, pinned=pin_target) for a, _ in pairs]
    clock.advance(3600)
    offered = [s.persona.add_knowledge("user", b, space_id=work) for _, b in pairs]
    return work, held, offered


def _active(s, text: str) -> list:
    return [k for k in s.persona.list_knowledge(limit=100) if k.text == text]


def test_a_newer_fact_updates_the_targets_and_a_restatement_confirms_it(open_store, clock):
    s = open_store()
    work, [porto, dog, colour], [lyon, named, same] = _two_spaces(
        s,
        clock,
        [
            ("The user lives in Porto.", "The user lives in Lyon now."),
            ("The user's dog is called Biscuit.", "The user's dog is named Biscuit."),
            ("The user's favourite colour is green.", "The user's favourite colour is green."),
        ],
    )
    before = s.persona.get_knowledge(dog)
    m = s.spaces.merge(work, 1)
    assert isinstance(m, SpaceMerge) and not m.dry_run
    assert (m.facts.updated, m.facts.confirmed, m.facts.duplicates, m.facts.moved, m.conflicts) == (1, 1, 1, 0, [])
    assert sorted((f.how, f.into, f.held, f.offered) for f in m.fused) == [
        ("confirmed", dog, "The user's dog is called Biscuit.", "The user's dog is named Biscuit."),
        ("held", colour, "The user's favourite colour is green.", "The user's favourite colour is green."),
        ("updated", porto, "The user lives in Porto.", "The user lives in Lyon now."),
    ]
    # the update: one fact, the newer text current, the older a version; no second active copy
    moved = s.persona.get_knowledge(porto)
    assert moved.text == "The user lives in Lyon now." and moved.version == 2 and moved.space_id == 1
    assert [v.text for v in s.persona.item_versions("knowledge", porto)] == ["The user lives in Porto.", moved.text]
    assert s.persona.get_knowledge(lyon) is None and len(_active(s, moved.text)) == 1
    # the restatement: one more confirmation, no new version, the held words kept
    confirmed = s.persona.get_knowledge(dog)
    assert confirmed.text == before.text and confirmed.version == before.version
    assert confirmed.confirmations == before.confirmations + 1 and confirmed.confidence >= before.confidence
    assert s.persona.get_knowledge(named) is None
    # word for word: kept once
    assert s.persona.get_knowledge(same) is None and [
        k.id for k in _active(s, "The user's favourite colour is green.")
    ] == [colour]
    assert [sp.name for sp in s.spaces.list()] == ["Personal"]
    assert s.persona.count_knowledge() == 3
    assert s.check_integrity() == []
    fused = [e for e in s.event_log.events(limit=1000) if e.kind == "space_fused"]
    assert {e.detail["how"] for e in fused} == {"updated", "confirmed", "held"}


def test_a_pinned_target_is_left_and_the_conflict_reported(open_store, clock):
    s = open_store()
    work, [porto], [lyon] = _two_spaces(
        s, clock, [("The user lives in Porto.", "The user lives in Lyon now.")], pin_target=True
    )
    m = s.spaces.merge(work, 1)
    assert (m.facts.pinned, m.facts.updated, m.facts.moved) == (1, 0, 1)
    [c] = m.conflicts
    assert (c.kind, c.held_id, c.held, c.kept_id, c.offered) == (
        "knowledge",
        porto,
        "The user lives in Porto.",
        lyon,
        "The user lives in Lyon now.",
    )
    held, kept = s.persona.get_knowledge(porto), s.persona.get_knowledge(lyon)
    assert held.text == "The user lives in Porto." and held.version == 1 and held.pinned
    assert kept.status == "active" and kept.space_id == 1  # both left, side by side
    assert any(e.kind == "update_skipped" and e.item_id == porto for e in s.event_log.events(limit=1000))
    assert s.check_integrity() == []


def test_an_older_fact_is_kept_archived_behind_the_newer_one(open_store, clock):
    s = open_store()
    work = s.spaces.create("Work")
    old = s.persona.add_knowledge("user", "The user lives in Porto.", space_id=work)
    clock.advance(3600)
    new = s.persona.add_knowledge("user", "The user lives in Lyon now.")
    m = s.spaces.merge(work, 1)
    assert (m.facts.older, m.facts.updated, m.facts.moved) == (1, 0, 1)
    assert (
        s.persona.get_knowledge(new).text == "The user lives in Lyon now." and s.persona.get_knowledge(new).version == 1
    )
    kept = s.persona.get_knowledge(old)
    assert kept.status == "archived" and kept.space_id == 1
    assert [k.id for k in s.persona.list_knowledge(limit=10)] == [new]


def test_traits_fuse_by_the_persona_rules(open_store, clock):
    s = open_store()
    work = s.spaces.create("Work")
    jazz = s.persona.add_trait("likes", "jazz")
    diet = s.persona.add_trait("diet", "vegetarian")
    clock.advance(60)
    s.persona.add_trait("likes", "jazz", space_id=work)
    s.persona.add_trait("diet", "vegan", space_id=work)
    s.persona.add_trait("occupation", "nurse", space_id=work)
    m = s.spaces.merge(work, 1)
    assert (m.traits.duplicates, m.traits.updated, m.traits.moved) == (1, 1, 1)
    assert s.persona.get_trait(diet).value == "vegan" and s.persona.get_trait(diet).version == 2
    assert [v.text for v in s.persona.item_versions("trait", diet)][0] == "vegetarian"
    assert sorted((t.dimension, t.value) for t in s.persona.list_traits()) == [
        ("diet", "vegan"),
        ("likes", "jazz"),
        ("occupation", "nurse"),
    ]
    assert s.persona.get_trait(jazz).space_id == 1 and s.check_integrity() == []


def test_pages_held_already_are_not_doubled_and_take_no_fact_with_them(open_store, clock, embedder):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    home, office = (
        s.conversations.create_conversation("home"),
        s.conversations.create_conversation("office", space_id=work),
    )
    said = ("I adopted a golden retriever puppy named Biscuit.", "Congratulations, Biscuit sounds sweet.")
    clock.advance(60)
    held = s.intake.add_page(home, *said)
    [copy] = s.spaces.copy_pages([held], work)  # the same exchange in Work (as a copy or an import leaves it)
    s.curation.pin("page", copy)
    clock.advance(60)
    other = s.intake.add_page(office, "Our sprint review moved to Thursday.", "Thursday it is.")
    text = "The user has a puppy called Biscuit."
    with s.transaction():  # a fact of Work drawn only from Work's copy of the page
        assert s.merge.upsert_knowledge("user", text, 0.7, [copy], embedder.embed([text])[0], {office}, "test")
    [fact] = _active(s, text)
    assert fact.space_id == work
    plan = s.spaces.merge(work, 1, dry_run=True)
    total = s.pages.count_pages()
    m = s.spaces.merge(work, 1)
    assert (m.pages.duplicates, m.pages.moved, m.facts.moved) == (1, 1, 1)
    assert plan.to_json() == {**m.to_json(), "dry_run": True}
    assert s.pages.count_pages() == total - 1 and s.pages.get(copy) is None
    assert s.pages.get(other).space_id == 1
    kept = s.persona.get_knowledge(fact.id)
    assert kept is not None and kept.source_page_ids == [held]  # drawn from the page that stays
    assert s.pages.get(held).pinned  # the copy's pin kept
    assert len(s.pages.list_pages(text="golden retriever", limit=10)) == 1
    assert s.check_integrity() == []


def test_a_dry_run_says_what_would_happen_and_changes_nothing(open_store, clock):
    s = open_store(stm_capacity=1)
    work, [porto], [lyon] = _two_spaces(s, clock, [("The user lives in Porto.", "The user lives in Lyon now.")])
    office = s.conversations.create_conversation("office", space_id=work)
    s.intake.add_page(office, "Our sprint review moved to Thursday.", "Thursday it is.")
    events = s.event_log.latest_event_id()
    plan = s.spaces.merge(work, 1, dry_run=True)
    assert plan.dry_run and (plan.facts.updated, plan.pages.moved) == (1, 1)
    assert [(sp.name, sp.pages, sp.facts) for sp in s.spaces.list()] == [("Personal", 0, 1), ("Work", 1, 1)]
    assert (
        s.persona.get_knowledge(porto).text == "The user lives in Porto."
        and s.persona.get_knowledge(lyon).space_id == work
    )
    assert s.event_log.latest_event_id() == events and s.check_integrity() == []
    done = s.spaces.merge(work, 1)
    assert done.to_json() == {**plan.to_json(), "dry_run": False}
