"""Memory cubes end to end on a real memory file with the real embedder: a cube imported into an empty
memory ranks the same pages, holds the same persona (versions and sources) and the same pins; a second
import adds nothing; a merge follows the persona's rules and an undo puts memory back exactly."""

from __future__ import annotations

import zipfile

import pytest

from memory_core.cubes import CubeCancelled, CubeSelection

from .cubes_support import QUESTIONS, build_memory, counts, dump, persona, persona_text, pins, structure, top

PARAMS = {"stm_capacity": 3}


@pytest.fixture
def source(open_tok, tmp_path, clock):
    s = open_tok(tmp_path / "source.db", **PARAMS)
    ids = build_memory(s, clock)
    return s, ids


def test_round_trip_into_an_empty_memory(source, open_tok, tmp_path):
    src, _ = source
    cube = src.cubes.export(tmp_path / "all.mnemocube", app_version="test")
    assert cube.vectors and cube.counts["pages"] == src.pages.count_pages()
    with zipfile.ZipFile(cube.path) as zf:
        assert "manifest.json" in zf.namelist() and "vectors/pages.jsonl" in zf.namelist()
    dst = open_tok(tmp_path / "empty.db", **PARAMS)
    record = dst.cubes.import_cube(cube.path)
    assert record.status == "done" and record.counts.pages["added"] == src.pages.count_pages()
    assert dst.check_integrity() == []
    for q in QUESTIONS:
        assert top(dst, q) == top(src, q), q
    assert persona(dst) == persona(src)
    assert pins(dst) == pins(src)
    assert structure(dst) == structure(src)
    assert {k: v for k, v in counts(dst).items()} == counts(src)
    # the vectors came with the cube: nothing was embedded again, nothing waits
    assert dst.jobs.pending() == 0
    # and every item says where it came from
    page = dst.pages.list_pages(limit=1)[0]
    origin = dst.cubes.origin("page", page.id)
    assert origin is not None and origin.cube_id == cube.cube_id and origin.file_name == "all.mnemocube"


def test_the_same_cube_twice_adds_nothing(source, open_tok, tmp_path):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    dst.cubes.import_cube(path)
    before = dump(dst)
    second = dst.cubes.import_cube(path)
    assert second.status == "done"
    assert second.counts.added == 0 and second.counts.pages["present"] == src.pages.count_pages()
    after = dump(dst)
    for table in ("page", "segment", "chain", "conversation", "trait", "knowledge", "item_version", "derivation"):
        assert after[table] == before[table], table
    # a dry run of it says so too
    plan = dst.cubes.plan(path)
    assert plan.counts.added == 0 and plan.earlier_imports == [1, 2]


def test_a_merge_follows_the_persona_and_an_undo_puts_everything_back(source, open_tok, tmp_path, clock):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    cid = dst.conversations.create_conversation("mine")
    dst.intake.add_page(cid, "I collect vinyl records.", "Which genres?")
    clock.t -= 86400 * 400  # what this memory knew before the cube's were written
    dst.persona.add_knowledge("user", "I live in Madrid")  # older than the cube's "I live in Lyon now": updated
    dst.persona.add_knowledge("user", "I am allergic to shellfish", pinned=True)
    dst.persona.add_trait("hobby", "plays the violin")  # the cube's "plays the cello" changes it
    clock.t += 86400 * 800
    dst.persona.add_knowledge("user", "I own a bicycle")  # already held word for word: skipped
    before_counts, before_text, before_dump = counts(dst), persona_text(dst), dump(dst)

    plan = dst.cubes.plan(path)
    record = dst.cubes.import_cube(path)
    assert record.counts.facts["merged"] == plan.counts.facts["merged"] >= 1
    assert record.counts.facts["present"] == plan.counts.facts["present"] >= 1
    lyon = [k for k in dst.persona.list_knowledge() if "Lyon" in k.text]
    assert len(lyon) == 1
    history = [v.text for v in dst.persona.item_versions("knowledge", lyon[0].id)]
    assert history[0] == "I live in Madrid" and history[-1] == "I live in Lyon now"  # the older text stays a version
    assert "memory cube all.mnemocube" in lyon[0].model
    assert dst.cubes.origin("knowledge", lyon[0].id).action == "merged"
    assert dst.check_integrity() == []

    report = dst.cubes.undo(record.id)
    assert report.restored == record.counts.facts["merged"] + record.counts.traits["merged"]
    assert counts(dst) == before_counts
    assert persona_text(dst) == before_text
    after = dump(dst)
    for table in ("page", "segment", "chain", "conversation", "trait", "knowledge", "item_version", "derivation"):
        assert after[table] == before_dump[table], table
    assert dst.check_integrity() == []
    assert dst.cubes.imports()[0].status == "undone"


def test_a_pinned_fact_is_left_and_reported(source, open_tok, tmp_path, clock):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    clock.t -= 86400 * 400
    kid = dst.persona.add_knowledge("user", "I live in Berlin", pinned=True)
    clock.t += 86400 * 400
    plan = dst.cubes.plan(path)
    assert [(c.item_id, c.why) for c in plan.counts.conflicts] == [(kid, "pinned")]
    assert "kept (it is pinned)" in plan.describe()
    record = dst.cubes.import_cube(path)
    assert [(c.item_id, c.why) for c in record.counts.conflicts] == [(kid, "pinned")]
    held = dst.persona.get_knowledge(kid)
    assert held is not None and held.text == "I live in Berlin" and held.version == 1


def test_a_dry_run_changes_nothing(source, open_tok, tmp_path):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    before = dump(dst)
    plan = dst.cubes.plan(path)
    assert plan.counts.pages["added"] == src.pages.count_pages() and not plan.reembed
    assert dump(dst) == before


def test_selections(source, open_tok, tmp_path):
    src, ids = source
    chat = src.cubes.export(tmp_path / "chat.mnemocube", CubeSelection(chat_id=ids["imported"]))
    assert chat.counts["pages"] == src.pages.count_pages(conversation_id=ids["imported"]) and chat.counts["chats"] == 1
    seg = src.segments.list_segments(order_by="id", descending=False)[0]
    one = src.cubes.export(tmp_path / "seg.mnemocube", CubeSelection(segment_id=seg.id))
    assert one.counts["pages"] == seg.page_count and one.counts["segments"] == 1
    pages = src.pages.list_pages(order_by="timestamp", descending=False, limit=100)
    since, until = pages[3].timestamp, pages[8].timestamp
    span = src.cubes.export(tmp_path / "span.mnemocube", CubeSelection(since=since, until=until))
    assert span.counts["pages"] == sum(1 for p in pages if since <= p.timestamp < until)
    persona_only = src.cubes.export(tmp_path / "persona.mnemocube", CubeSelection(persona_only=True))
    assert persona_only.counts["pages"] == 0
    assert persona_only.counts["facts"] == src.persona.count_knowledge(include_archived=True)
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    dst.cubes.import_cube(persona_only.path)
    assert [t[1:3] for t in persona_text(dst)] == [t[1:3] for t in persona_text(src)]
    # one chat's cube: its pages, in a chat of its own that keeps its title and source
    dst.cubes.import_cube(chat.path)
    convs = [c for c in dst.conversations.list_conversations() if c.title == "Bread"]
    assert len(convs) == 1 and convs[0].source == "chatgpt"
    assert dst.pages.count_pages(conversation_id=convs[0].id) == chat.counts["pages"]
    assert dst.check_integrity() == []


def test_another_model_embeds_in_the_background_resumably(source, open_tok, tmp_path):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", model_id="another-model", **PARAMS)
    dst.cubes.importer.BATCH = 4
    plan = dst.cubes.plan(path)
    assert plan.reembed
    iid = dst.cubes.start_import(path)
    assert dst.pages.count_pages() == 0 and dst.jobs.pending(kinds=["cube_import"]) == 1  # queued, nothing visible
    assert dst.jobs.run_pending(max_jobs=1) == 1
    assert dst.pages.count_pages() == 4 and dst.check_integrity() == []  # one batch, whole
    dst.close()
    again = open_tok(tmp_path / "dst.db", model_id="another-model", **PARAMS)  # the app closed and opened again
    again.jobs.run_pending()
    record = again.cubes.get_import(iid)
    assert record is not None and record.status == "done"
    assert again.pages.count_pages() == src.pages.count_pages() and again.check_integrity() == []
    assert persona(again) == persona(src)
    assert again.stats()["pages_word_indexed"] == again.pages.count_pages()  # its words were read here too


def test_cancelling_an_import_keeps_nothing(source, open_tok, tmp_path):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    dst.cubes.importer.BATCH = 3
    before = counts(dst)
    seen: list[int] = []

    def cancelled() -> bool:
        return dst.pages.count_pages() > 0 and bool(seen.append(1) or True)

    with pytest.raises(CubeCancelled):
        dst.cubes.import_cube(path, cancelled=cancelled)
    assert counts(dst) == before and dst.cubes.imports()[0].status == "undone"


def test_an_import_cut_short_resumes_from_the_same_file_or_is_undone(source, open_tok, tmp_path):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    dst.cubes.importer.BATCH = 5
    iid = dst.cubes.start_import(path)
    assert dst.jobs.run_pending(max_jobs=1) == 1 and dst.pages.count_pages() == 5  # then the app closed, say
    assert dst.cubes.start_import(path) == iid  # importing the same file again finds it
    record = dst.cubes.run_import(iid)
    assert record.status == "done" and dst.pages.count_pages() == src.pages.count_pages()
    assert persona(dst) == persona(src) and [r.id for r in dst.cubes.imports()] == [iid]
    # one undone before its jobs ran writes nothing afterwards
    other = open_tok(tmp_path / "other.db", **PARAMS)
    before = counts(other)
    jid = other.cubes.start_import(path)
    other.cubes.undo(jid)
    assert other.jobs.run_pending() == 0 and counts(other) == before
    assert other.db.scalar("SELECT count(*) FROM cube_stage") == 0


def test_what_an_import_records_keeps_no_text_of_memory(source, open_tok, tmp_path, clock):
    src, _ = source
    path = src.cubes.export(tmp_path / "all.mnemocube").path
    dst = open_tok(tmp_path / "dst.db", **PARAMS)
    clock.t -= 86400 * 400
    madrid = dst.persona.add_knowledge("user", "I live in Madrid")
    clock.t += 86400 * 400
    dst.cubes.import_cube(path)
    record = " ".join(str(r) for r in dst.db.rows("SELECT * FROM cube_import_item"))
    assert "Madrid" not in record and "Lyon" not in record  # merged items are put back from their versions
    dst.curation.forget("knowledge", [madrid])  # forgetting the merged fact leaves its undo nothing to put back
    assert dst.cubes.undo(1).restored == 0
    dst.cubes.import_cube(path)
    dst.curation.wipe_memory()
    assert [dst.db.scalar(f"SELECT count(*) FROM {t}") for t in ("cube_import", "cube_import_item", "cube_stage")] == [
        0,
        0,
        0,
    ]


def test_facts_about_other_people_travel_with_their_names(open_tok, tmp_path, clock):
    """A fact about a person of an imported dialogue (owner 'person', `subject` names them) is exported,
    validated and imported as theirs, not as the user's."""
    src = open_tok(tmp_path / "people.db", stm_capacity=0, tau=0.5)
    cid = src.conversations.create_conversation()
    people = {"people": {"user_side": "Caroline", "assistant_side": "Melanie", "me": None}}
    src.intake.add_page(
        cid,
        "Caroline: I moved to Sweden four years ago with my family.",
        "Melanie: I ran a charity race for mental health last Saturday.",
        meta=people,
    )
    src.jobs.run_pending(allow_llm=False)
    theirs = {(k.subject, k.text) for k in src.persona.list_knowledge("person")}
    assert theirs and all(subject in ("Caroline", "Melanie") for subject, _ in theirs)
    cube = src.cubes.export(tmp_path / "people.mnemocube")
    dst = open_tok(tmp_path / "dst.db", stm_capacity=0)
    assert dst.cubes.import_cube(cube.path).status == "done"
    assert {(k.subject, k.text) for k in dst.persona.list_knowledge("person")} == theirs
    assert not dst.persona.list_knowledge("user")
