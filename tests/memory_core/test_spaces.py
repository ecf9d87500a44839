"""Memory spaces (memory_core.spaces.component): the migration keeps an old memory in Personal, chats write to
their space and read what they are set to, moves and merges keep counts (a merge drops what the target
holds word for word; the rest of the fusion: test_space_merge.py), forgetting in one space leaves the
same words in another, and one space goes out as a cube and comes back as a new space. Real store, real
embedder."""

from __future__ import annotations

import time

import pytest

from memory_core import RetrievalBudget
from memory_core.cubes.export import CubeSelection
from memory_core.spaces.component import SpaceError
from memory_core.storage.schema import MIGRATIONS, _m_spaces, connect

EXCHANGES = [
    ("I adopted a golden retriever puppy named Biscuit.", "Congratulations, Biscuit sounds sweet."),
    ("My sister Laura is getting married in Lisbon next spring.", "How exciting, Lisbon is beautiful."),
    ("I'm allergic to shellfish so I avoid shrimp.", "Good to know, I'll keep that in mind."),
]


def _fill(s, clock, cid, rows=EXCHANGES):
    ids = []
    for u, a in rows:
        clock.advance(3600)
        ids.append(s.intake.add_page(cid, u, a))
    return ids


def test_an_old_memory_opens_with_everything_in_personal(tmp_path, open_store, embedder):
    path = tmp_path / "old.db"
    conn = connect(path)
    upto = MIGRATIONS.index(_m_spaces)
    for i, m in enumerate(MIGRATIONS[:upto]):
        m(conn, embedder.dim)
        conn.execute(f"PRAGMA user_version={i + 1}")
    conn.execute("INSERT INTO conversation(title, created_at, updated_at) VALUES ('old chat', 1, 1)")
    conn.execute(
        "INSERT INTO knowledge(owner, text, created_at, updated_at) VALUES ('user', 'The user likes tea.', 1, 1)"
    )
    conn.close()
    s = open_store(path)
    spaces = s.spaces.list()
    assert [(sp.id, sp.name, sp.facts, sp.chats) for sp in spaces] == [(1, "Personal", 1, 1)]
    conv = s.conversations.list_conversations()[0]
    assert (conv.space_id, conv.read_spaces) == (1, None)
    assert s.spaces.read_set(conv.id) == frozenset({1})
    assert [k.space_id for k in s.persona.list_knowledge()] == [1]


def test_a_chat_writes_to_its_space_and_reads_what_it_is_set_to(open_store, clock):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    home, office = (
        s.conversations.create_conversation("home"),
        s.conversations.create_conversation("office", space_id=work),
    )
    _fill(s, clock, home)
    office_ids = _fill(s, clock, office, [("The Biscuit account report is due Friday.", "Good luck with it.")])
    assert {p.space_id for p in s.pages.list_pages(conversation_id=office, limit=10)} == {work}
    assert {p.space_id for p in s.pages.list_pages(conversation_id=home, limit=10)} == {1}
    # a segment holds pages of one space
    assert {sg.space_id for sg in s.segments.list_segments(limit=50)} <= {1, work}
    for sg in s.segments.list_segments(limit=50):
        assert {p.space_id for p in s.pages.list_pages(segment_id=sg.id, limit=50)} == {sg.space_id}
    assert s.spaces.read_set(office) == frozenset({work})
    got = s.retrieve("Biscuit", office, RetrievalBudget(pages=5), spaces=s.spaces.read_set(office))
    assert {h.page.id for h in got.pages} <= set(office_ids)
    s.spaces.set_chat_space(office, reads="all")
    assert s.spaces.read_set(office) is None
    assert s.spaces.chat_space(office) == (work, "all")
    everything = s.retrieve("Biscuit", office, RetrievalBudget(pages=5), spaces=None)
    assert {h.page.id for h in everything.pages} - set(office_ids)


def test_names_are_checked(open_store):
    s = open_store()
    work = s.spaces.create("Work")
    with pytest.raises(SpaceError, match="exists already"):
        s.spaces.create(" work ")
    with pytest.raises(SpaceError, match="needs a name"):
        s.spaces.create("   ")
    s.spaces.rename(work, "Office")
    assert s.spaces.resolve("office") == work and s.spaces.resolve(str(work)) == work
    with pytest.raises(SpaceError, match="no space named"):
        s.spaces.resolve("Work")


def test_move_keeps_counts_and_segments_to_one_space(open_store, clock):
    s = open_store(stm_capacity=1)
    cid = s.conversations.create_conversation()
    ids = _fill(s, clock, cid)
    work = s.spaces.create("Work")
    total = s.pages.count_pages()
    moved = s.spaces.move_pages(ids[:2], work)
    assert moved == 2 and s.spaces.move_pages(ids[:2], work) == 0
    counts = {sp.name: sp.pages for sp in s.spaces.list()}
    assert counts == {"Personal": total - 2, "Work": 2}
    for sg in s.segments.list_segments(limit=50):
        pages = s.pages.list_pages(segment_id=sg.id, limit=50)
        assert pages and {p.space_id for p in pages} == {sg.space_id}
        assert sg.page_count == len(pages)
    fact = s.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    assert s.spaces.move_facts("knowledge", [fact], work) == 1
    assert s.persona.get_knowledge(fact).space_id == work


def test_merge_drops_what_the_target_holds_and_moves_the_rest(open_store, clock):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    home, office = (
        s.conversations.create_conversation("home"),
        s.conversations.create_conversation("office", space_id=work),
    )
    _fill(s, clock, home)
    _fill(s, clock, office, [("Our team adopted a new code review process.", "Reviews catch bugs early.")])
    # the same exchange in both spaces (same words, same time): a copy
    same = EXCHANGES[0]
    p = s.pages.get(s.pages.list_pages(conversation_id=home, limit=10, text="Biscuit")[0].id)
    with s.transaction():
        s.db.execute(
            "INSERT INTO page(conversation_id, user_text, assistant_text, timestamp, tier, created_at, space_id) "
            "VALUES (?, ?, ?, ?, 'stm', ?, ?)",
            (office, same[0], same[1], p.timestamp, clock(), work),
        )
    s.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    k2 = s.persona.add_knowledge("user", "The user works on the Biscuit account.")
    s.spaces.move_facts("knowledge", [k2], work)
    with s.transaction():
        s.db.execute(
            "INSERT INTO knowledge(owner, text, created_at, updated_at, space_id) VALUES (?, ?, ?, ?, ?)",
            ("user", "The user's dog is called Biscuit.", clock(), clock(), work),
        )
    before = s.pages.count_pages()
    m = s.spaces.merge(work, 1)
    assert (m.pages.duplicates, m.pages.moved) == (1, 1)
    assert (m.facts.duplicates, m.facts.moved) == (1, 1)
    assert s.pages.count_pages() == before - 1
    assert [(sp.id, sp.pages) for sp in s.spaces.list()] == [(1, before - 1)]
    assert s.conversations.get_conversation(office).space_id == 1
    assert len([k for k in s.persona.list_knowledge() if "dog" in k.text]) == 1


def test_forgetting_in_one_space_leaves_the_same_words_in_another(open_store, clock):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    home, office = (
        s.conversations.create_conversation("home"),
        s.conversations.create_conversation("office", space_id=work),
    )
    [a] = _fill(s, clock, home, EXCHANGES[:1])
    [b] = _fill(s, clock, office, EXCHANGES[:1])
    assert s.pages.get(b).space_id == work
    s.curation.forget("page", a)
    assert s.pages.get(a) is None and s.pages.get(b) is not None
    hits = s.retrieve("dog named Biscuit", office, RetrievalBudget(pages=3), spaces=frozenset({work}))
    assert b in {h.page.id for h in hits.pages} | {h.page.id for h in hits.stm}


def test_delete_refuses_a_space_with_memory_unless_forgotten(open_store, clock):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    office = s.conversations.create_conversation("office", space_id=work)
    _fill(s, clock, office)
    with pytest.raises(SpaceError, match="holds 3 pages"):
        s.spaces.delete(work)
    assert s.spaces.delete(work, forget=True) == 3
    with pytest.raises(SpaceError, match="last space"):
        s.spaces.delete(1)
    assert s.pages.count_pages() == 0 and s.conversations.get_conversation(office).space_id == 1


def test_one_space_exports_as_a_cube_and_imports_as_a_new_space(open_store, clock, tmp_path):
    s = open_store(stm_capacity=1)
    work = s.spaces.create("Work")
    home, office = (
        s.conversations.create_conversation("home"),
        s.conversations.create_conversation("office", space_id=work),
    )
    _fill(s, clock, home)
    _fill(s, clock, office, [("The client from Porto wants the dashboard in blue.", "Blue it is.")])
    cube = tmp_path / "work.mnemocube"
    out = s.cubes.export(cube, CubeSelection(space_id=work))
    assert out.counts["pages"] == 1
    other = open_store(tmp_path / "other.db")
    other_cid = other.conversations.create_conversation("mine")
    _fill(other, clock, other_cid, EXCHANGES[:1])
    t0 = time.monotonic()
    rec = other.cubes.import_cube(cube)
    assert rec.status == "done" and time.monotonic() - t0 < 120
    new = other.spaces.create("Imported work")
    moved = other.spaces.adopt_import(rec.id, new)
    assert moved == 1
    names = {sp.name: sp.pages for sp in other.spaces.list()}
    assert names == {"Personal": 1, "Imported work": 1}


def test_a_fact_drawn_from_a_spaces_pages_is_kept_in_that_space(open_store, clock, embedder):
    s = open_store()
    work = s.spaces.create("Work")
    office = s.conversations.create_conversation("office", space_id=work)
    [pid] = _fill(s, clock, office, [("Our release is planned for March.", "Noted, March it is.")])
    text = "The user's team releases in March."
    with s.transaction():
        assert s.merge.upsert_knowledge("user", text, 0.7, [pid], embedder.embed([text])[0], {office}, "test")
        assert s.merge.upsert_trait(
            "work", "plans releases", "", 0.7, [pid], embedder.embed(["plans releases"])[0], {office}, "test"
        )
    [fact] = [k for k in s.persona.list_knowledge() if k.text == text]
    assert fact.space_id == work
    assert [t.space_id for t in s.persona.list_traits()] == [work]
    assert s.persona.add_knowledge("user", "The user likes green tea.") and {
        k.space_id for k in s.persona.list_knowledge() if "green tea" in k.text
    } == {1}
