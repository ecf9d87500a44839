"""Whose memory an import is (issue 35): a dialogue between two named people is told (`mnemo ingest
--as-user NAME | --others`) or asks which speaker is the user, and every one of its pages records it in
`meta["people"]`; the user's own ChatGPT/Claude exports carry no "people" and reach the persona as chats
in the app do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.importers import ImportFatalError, load, write_all
from app.importers.job import ImportJob, run_import
from app.importers.people import People, assign

FIXTURES = Path(__file__).parent / "fixtures"


def dialogue(sample_id: str = "d-1", a: str = "Caroline", b: str = "Melanie", sessions: int = 2) -> dict:
    conv: dict = {"speaker_a": a, "speaker_b": b}
    for s in range(1, sessions + 1):
        conv[f"session_{s}_date_time"] = f"1:56 pm on {s} May, 2023"
        conv[f"session_{s}"] = [
            {"speaker": a, "dia_id": f"D{s}:1", "text": f"I went to the support group, session {s}."},
            {"speaker": b, "dia_id": f"D{s}:2", "text": "I painted a lake at sunrise."},
            {"speaker": a, "dia_id": f"D{s}:3", "text": "I moved to a flat near the park."},
            {"speaker": b, "dia_id": f"D{s}:4", "text": "My kids loved the camping trip."},
        ]
    return {"sample_id": sample_id, "qa": [], "conversation": conv}


@pytest.fixture
def dialogue_file(tmp_path) -> Path:
    path = tmp_path / "dialogue.json"
    path.write_text(json.dumps([dialogue()]))
    return path


def _open(dirs, embedder):
    from memory_core import MemoryStore

    return MemoryStore.open(
        dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )


def _pages(dirs, embedder):
    s = _open(dirs, embedder)
    try:
        return s.pages.list_pages(limit=10_000), s.stats()["conversations"]
    finally:
        s.close()


def test_as_user_names_the_second_speaker_and_every_page_records_it(dialogue_file, mnemo_dirs, embedder, capsys):
    """`--as-user` naming speaker_b: the sides stay as imported (speaker_a on the user side), `me` names
    Melanie, on every page; the names match ignoring case."""
    assert main(["ingest", str(dialogue_file), "--as-user", "melanie", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "note:" not in err
    pages, _ = _pages(mnemo_dirs, embedder)
    assert len(pages) == 4
    for p in pages:
        assert p.meta["people"] == {"user_side": "Caroline", "assistant_side": "Melanie", "me": "Melanie"}
        assert p.user_text.startswith("Caroline: ") and p.assistant_text.startswith("Melanie: ")


def test_others_and_the_default_record_a_conversation_of_other_people(
    dialogue_file, tmp_path, mnemo_dirs, embedder, capsys
):
    """`--others`: me is None, quietly. Told nothing, the same, with a one-line note that says so and how
    to claim a speaker."""
    assert main(["ingest", str(dialogue_file), "--others", "--no-progress"]) == 0
    assert "note:" not in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps([dialogue("d-2", "Jon", "Gina", sessions=1)]))
    assert main(["ingest", str(other), "--no-progress"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "Jon and Gina" in notes[0] and "other people's" in notes[0] and "--as-user NAME" in notes[0]
    pages, _ = _pages(mnemo_dirs, embedder)
    assert len(pages) == 6
    assert all(p.meta["people"]["me"] is None for p in pages)
    assert {p.meta["people"]["user_side"] for p in pages} == {"Caroline", "Jon"}


def test_an_unknown_name_is_one_line_and_nothing_is_imported(dialogue_file, mnemo_dirs, embedder, capsys):
    assert main(["ingest", str(dialogue_file), "--as-user", "Carol", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "mnemo ingest: error: 'Carol' is not a speaker in dialogue.json; its speakers are 'Caroline' and "
        "'Melanie' (or use --others if you are neither)"
    ]
    assert _pages(mnemo_dirs, embedder) == ([], 0)


def test_the_flags_are_refused_for_the_users_own_chats(mnemo_dirs, embedder, capsys):
    """A ChatGPT export is the user's own chats: --as-user/--others there is a mistake, said in one line."""
    rc = main(["ingest", str(FIXTURES / "chatgpt_conversations.json"), "--others", "--no-progress"])
    assert rc == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "holds no dialogue between two named people" in line
    assert _pages(mnemo_dirs, embedder) == ([], 0)
    with pytest.raises(SystemExit):  # one or the other
        main(["ingest", str(FIXTURES / "transcript.md"), "--others", "--as-user", "Ann"])
    capsys.readouterr()


def test_own_exports_and_transcripts_carry_no_people(mnemo_dirs, embedder, capsys):
    for name in ("chatgpt_conversations.json", "claude_conversations.json", "transcript.md"):
        assert main(["ingest", str(FIXTURES / name), "--no-progress"]) == 0
    assert "note:" not in capsys.readouterr().err
    pages, convs = _pages(mnemo_dirs, embedder)
    assert convs >= 7 and pages
    assert all("people" not in p.meta for p in pages)


def test_a_second_import_with_another_answer_keeps_the_first(dialogue_file, tmp_path, mnemo_dirs, embedder, capsys):
    """The pages of one conversation never disagree: a dialogue imported as other people's, then again with
    --as-user (and a session more), keeps "other people" on every page, and a note says how to change it."""
    assert main(["ingest", str(dialogue_file), "--others", "--no-progress"]) == 0
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps([dialogue(sessions=3)]))
    capsys.readouterr()
    assert main(["ingest", str(longer), "--as-user", "Caroline", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "was imported before as other people's conversation; that is kept" in err
    assert "mnemo chats delete 1 --forget" in err
    pages, _ = _pages(mnemo_dirs, embedder)
    assert len(pages) == 6 and all(p.meta["people"]["me"] is None for p in pages)


def test_a_file_of_several_dialogues_claims_only_those_the_user_is_in(tmp_path, embedder):
    from memory_core import MemoryStore

    path = tmp_path / "two.json"
    path.write_text(json.dumps([dialogue("d-1"), dialogue("d-2", "Jon", "Gina")]))
    parsed = load(path)
    done = assign(parsed.conversations, "Gina")
    assert [c.external_id for c in done.mine] == ["d-2"] and [c.external_id for c in done.others] == ["d-1"]
    with pytest.raises(ImportFatalError, match="'Zed' is not a speaker"):
        assign(parsed.conversations, "Zed")
    s = MemoryStore.open(tmp_path / "m.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        write_all(s, parsed, path=str(path))
        me = {p.meta["people"]["user_side"]: p.meta["people"]["me"] for p in s.pages.list_pages(limit=100)}
    finally:
        s.close()
    assert me == {"Caroline": None, "Jon": "Gina"}


def test_a_dialogue_written_without_an_answer_is_other_peoples(tmp_path, embedder, dialogue_file):
    """A caller that never asked (write_conversation straight from the parser) writes other people's
    pages, never "the user's"."""
    from app.importers.writer import write_conversation
    from memory_core import MemoryStore

    (conv,) = load(dialogue_file).conversations
    assert conv.people == People("Caroline", "Melanie", None)
    s = MemoryStore.open(tmp_path / "m.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        write_conversation(s, conv)
        assert {People.from_meta(p.meta) for p in s.pages.list_pages(limit=100)} == {People("Caroline", "Melanie")}
    finally:
        s.close()


def test_the_locomo_evaluation_imports_speaker_a_as_the_user(locomo_path):
    """The eval's protocol: speaker_a is the user, so its dialogues are the user's and rank as before."""
    from app.evaluation.locomo import load_samples

    samples, _ = load_samples(locomo_path)
    assert samples
    for sample in samples:
        p = sample.conversation.people
        assert p is not None and p.me == p.user_side == sample.speakers[0]


class _Ctx:
    def __init__(self, path: Path, embedder):
        self.path, self.embedder = path, embedder

    def open_store(self):
        from memory_core import MemoryStore

        e = self.embedder
        return MemoryStore.open(self.path, e.embed, embed_model_id=e.model_id, dim=e.dim)


def test_the_background_import_stops_to_ask_who_the_user_is(tmp_path, embedder, dialogue_file):
    """The app's import (app.importers.job): after reading, phase "asking" with the speakers and nothing
    written; the answer, then the same job again, writes the pages with it. A cancel while asking writes
    nothing."""
    ctx = _Ctx(tmp_path / "m.sqlite3", embedder)
    job = run_import(ctx, ImportJob(dialogue_file))
    assert job.phase == "asking" and job.speakers == ["Caroline", "Melanie"] and job.dialogues == 1
    assert not ctx.path.exists() or ctx.open_store().stats()["conversations"] == 0
    with pytest.raises(ValueError):
        job.answer("Carol")
    job.answer("Melanie")
    assert run_import(ctx, job).phase == "done" and job.report.pages_written == 4
    s = ctx.open_store()
    try:
        assert {p.meta["people"]["me"] for p in s.pages.list_pages(limit=100)} == {"Melanie"}
    finally:
        s.close()
    other = tmp_path / "other.json"
    other.write_text(json.dumps([dialogue("d-9", "Jon", "Gina")]))
    job = run_import(ctx, ImportJob(other))
    assert job.phase == "asking"
    job.cancel()
    assert job.phase == "cancelled" and job.finished and job.parsed is None
    # a ChatGPT export is the user's own: no question
    own = run_import(ctx, ImportJob(FIXTURES / "chatgpt_conversations.json"))
    assert own.phase == "done" and not own.speakers


# what the user tells an assistant about themselves, in the app or in ChatGPT alike
OWN_EXCHANGES = [
    ("I work as a pharmacist at a hospital in Porto.", "That's a demanding job."),
    ("My favourite film is Spirited Away.", "A beautiful film."),
    ("I live in Lisbon with my partner Sam.", "Lisbon is lovely."),
    ("I'm training for the Berlin marathon.", "Good luck with the training!"),
    ("My dog is a greyhound called Biscuit.", "Greyhounds are gentle dogs."),
    ("I have been vegetarian for five years.", "Good to know for recipes."),
]


def _chatgpt_export(exchanges, start: float) -> list[dict]:
    """A ChatGPT conversations.json of one conversation: root → user → assistant → …"""
    mapping: dict = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for i, (said, reply) in enumerate(exchanges):
        for role, text, k in (("user", said, 0), ("assistant", reply, 1)):
            nid = f"{role[0]}-{i}"
            mapping[nid] = {
                "id": nid,
                "message": {
                    "id": nid,
                    "author": {"role": role},
                    "create_time": start + i * 120 + k * 5,
                    "content": {"content_type": "text", "parts": [text]},
                    "recipient": "all",
                    "metadata": {},
                },
                "parent": parent,
                "children": [],
            }
            mapping[parent]["children"].append(nid)
            parent = nid
    return [{"title": "About me", "create_time": start, "current_node": parent, "mapping": mapping, "id": "own-1"}]


def _persona_of(store) -> tuple[list[str], list[str]]:
    store.jobs.run_pending(allow_llm=False)
    facts = sorted(k.text for k in store.persona.list_knowledge("user"))
    traits = sorted(f"{t.dimension}: {t.value}" for t in store.persona.list_traits())
    return facts, traits


def test_the_users_own_chatgpt_export_reaches_the_persona_as_chats_in_the_app_do(tmp_path, embedder):
    """The same exchanges, said in a chat of the app (its messages and `add_page` jobs) or imported from
    the user's ChatGPT export: the pages of the export carry no "people", and promotion (the extractive
    path, as without a model) learns the same facts and traits about the user from both."""
    from app.chat.turn_memory import queue_exchange_page
    from memory_core import MemoryParams, MemoryStore

    params = MemoryParams.from_flat(stm_capacity=1, tau=0.9)  # every segment of one new page is hot

    def open_(name):
        e = embedder
        return MemoryStore.open(tmp_path / name, e.embed, embed_model_id=e.model_id, dim=e.dim, params=params)

    start = 1_700_000_000.0
    app = open_("app.db")
    try:
        cid = app.conversations.create_conversation("About me", created_at=start)
        parent = None
        for i, (said, reply) in enumerate(OWN_EXCHANGES):
            uid = app.conversations.add_message(cid, "user", said, parent_id=parent, created_at=start + i * 120)
            parent = app.conversations.add_message(
                cid, "assistant", reply, parent_id=uid, created_at=start + i * 120 + 5
            )
            user = next(m for m in app.conversations.list_messages(cid) if m.id == uid)
            queue_exchange_page(app, cid, user, parent, reply)
        in_app = _persona_of(app)
    finally:
        app.close()
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(_chatgpt_export(OWN_EXCHANGES, start)))
    imported = open_("import.db")
    try:
        parsed = load(export)
        assert parsed.format == "chatgpt" and parsed.conversations[0].people is None
        write_all(imported, parsed, path=str(export))
        pages = imported.pages.list_pages(limit=100)
        assert len(pages) == len(OWN_EXCHANGES) and all("people" not in p.meta for p in pages)
        from_export = _persona_of(imported)
    finally:
        imported.close()
    assert in_app[0], "the app's chat taught the persona nothing: the comparison would say nothing"
    assert any("Lisbon" in f for f in in_app[0])
    assert from_export == in_app
