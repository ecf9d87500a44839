"""Importing into a real memory store: the `mnemo ingest` command, resuming, bad inputs,
transactions (the store is never half-written)."""

import json
from pathlib import Path

import pytest

from app.cli import main
from app.importers import load, write_all
from app.importers.writer import write_conversation

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def store(tmp_path, embedder):
    from memory_core import MemoryStore

    s = MemoryStore.open(tmp_path / "m.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    yield s
    s.close()


def _open(dirs, embedder):
    from memory_core import MemoryStore

    return MemoryStore.open(
        dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )


def _all_pages(store):
    return store.pages.list_pages(limit=100000, order_by="timestamp", descending=False)


def test_chatgpt_export_through_the_cli(mnemo_dirs, embedder, capsys):
    rc = main(["ingest", str(FIXTURES / "chatgpt_conversations.json"), "--json", "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 0
    report = json.loads(out)
    assert report["imported"] == 3 and report["skipped_records"] == 3 and report["turns_written"] == 13
    assert "node b-a1: message has no content.parts — skipped" in err
    s = _open(mnemo_dirs, embedder)
    try:
        conv = s.conversations.find_conversation("chatgpt", "6f1e0a52-0c3b-4d0e-9a57-lisbon000001")
        assert conv.title == "Trip to Lisbon" and conv.created_at == 1700000050.25
        msgs = s.conversations.list_messages(conv.id)
        assert [m.meta["turn_id"] for m in msgs] == ["u-1b", "a-1c", "u-2", "a-2", "u-3", "a-3"]
        assert [m.created_at for m in msgs] == [
            1700000200.0,
            1700000260.0,
            1700000300.0,
            1700000320.0,
            1700000400.0,
            1700000410.0,
        ]
        assert [m.role for m in msgs] == ["user", "assistant"] * 3
        pages = s.pages.list_pages(conversation_id=conv.id, order_by="timestamp", descending=False)
        assert [p.meta["turn_ids"] for p in pages] == [["u-1b", "a-1c"], ["u-2", "a-2"], ["u-3", "a-3"]]
        assert pages[0].timestamp == 1700000200.0
        assert pages[0].user_message_id == msgs[0].id and pages[0].assistant_message_id == msgs[1].id
        assert s.check_integrity() == []
        hit = s.retrieve("Where am I travelling with my daughter?", record_visits=False).pages
        assert hit and "Ana" in hit[0].page.user_text + hit[0].page.assistant_text
    finally:
        s.close()
    # the custom instructions ("I live in Porto.", "Be brief.") became the persona, with their source
    s = _open(mnemo_dirs, embedder)
    try:
        assert report["persona_items_added"] == 2
        (fact,) = s.persona.list_knowledge(owner="user")
        assert fact.text == "I live in Porto." and fact.model == "ChatGPT custom instructions"
        assert s.persona.item_versions("knowledge", fact.id)[-1].reason == "added from ChatGPT custom instructions"
        (style,) = s.persona.list_traits()
        assert (style.dimension, style.value) == ("reply_style", "Be brief.")
        assert s.retrieve("Which city do I live in?", record_visits=False).knowledge[0].item.id == fact.id
    finally:
        s.close()
    # re-running imports nothing new
    rc = main(["ingest", str(FIXTURES / "chatgpt_conversations.json"), "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["already_imported"] == 3 and report["turns_written"] == 0
    assert report["persona_items_added"] == 0
    s = _open(mnemo_dirs, embedder)
    try:
        assert s.stats()["conversations"] == 3 and s.stats()["messages"] == 13
        assert s.stats()["pages_total"] == 6
        assert [k.version for k in s.persona.list_knowledge(owner="user")] == [1]  # not confirmed again
    finally:
        s.close()


def test_claude_export_zip_through_the_cli(tmp_path, mnemo_dirs, embedder, capsys):
    import zipfile

    export = tmp_path / "data-2024-04-03-10-00-00.zip"
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr("users.json", "[]")
        zf.writestr("conversations.json", (FIXTURES / "claude_conversations.json").read_bytes())
    rc = main(["ingest", str(export), "--json", "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 0
    report = json.loads(out)
    assert report["format"] == "claude"
    assert report["imported"] == 3 and report["skipped_records"] == 4 and report["turns_written"] == 12
    assert "conversation 3 ('Untitled'): is empty — skipped" in err
    s = _open(mnemo_dirs, embedder)
    try:
        conv = s.conversations.find_conversation("claude", "a3c1f0e2-5b1d-4c7e-9f10-garden000001")
        assert conv.title == "Planning a vegetable garden" and conv.source == "claude"
        msgs = s.conversations.list_messages(conv.id)
        assert [m.meta["turn_id"] for m in msgs] == ["m1", "m2", "m3b", "m4c", "m5", "m6"]
        pages = s.pages.list_pages(conversation_id=conv.id, order_by="timestamp", descending=False)
        assert [p.meta["turn_ids"] for p in pages] == [["m1", "m2"], ["m3b", "m4c"], ["m5", "m6"]]
        assert s.check_integrity() == []
        hit = s.retrieve("What is my son called?", record_visits=False).pages
        assert hit and "Leo" in hit[0].page.user_text
    finally:
        s.close()
    # importing it again adds nothing
    rc = main(["ingest", str(export), "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["already_imported"] == 3 and report["turns_written"] == 0


def test_text_transcript_through_the_cli(mnemo_dirs, embedder, capsys):
    rc = main(["ingest", str(FIXTURES / "transcript.md"), "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 0 and "1 conversation(s) imported" in out and "6 turns → 3 pages" in out
    assert "line(s) of text before the first speaker line" in err
    s = _open(mnemo_dirs, embedder)
    try:
        (conv,) = s.conversations.list_conversations()
        assert conv.title == "Planning the garden" and conv.source == "text"
        assert len(s.conversations.list_messages(conv.id)) == 6
    finally:
        s.close()


def test_partial_conversation_is_finished_not_duplicated(store):
    parsed = load(FIXTURES / "chatgpt_conversations.json")
    lisbon = parsed.conversations[0]
    from dataclasses import replace

    first_half = replace(lisbon, turns=lisbon.turns[:3])  # as if an earlier run (or export) stopped there
    out = write_conversation(store, first_half)
    assert out.status == "imported" and out.turns_written == 3
    out = write_conversation(store, lisbon)
    assert out.status == "resumed" and out.turns_written == 3
    msgs = store.conversations.list_messages(out.conversation_id)
    assert [m.meta["turn_id"] for m in msgs] == ["u-1b", "a-1c", "u-2", "a-2", "u-3", "a-3"]
    assert msgs[3].parent_id == msgs[2].id  # chained after the stored part
    turn_ids = [t for p in _all_pages(store) for t in p.meta["turn_ids"]]
    assert sorted(turn_ids) == sorted(t.turn_id for t in lisbon.turns)  # each turn in exactly one page
    assert write_conversation(store, lisbon).status == "already imported"
    assert store.stats()["messages"] == 6 and store.check_integrity() == []


def test_failure_rolls_back_the_whole_conversation(store, monkeypatch):
    parsed = load(FIXTURES / "chatgpt_conversations.json")
    real_add_pages = store.intake.add_pages
    calls = {"n": 0}

    def failing_add_pages(cid, items):
        calls["n"] += 1
        if calls["n"] == 2:  # the second conversation fails while writing its pages
            raise RuntimeError("disk full")
        return real_add_pages(cid, items)

    monkeypatch.setattr(store.intake, "add_pages", failing_add_pages)
    with pytest.raises(RuntimeError):
        write_all(store, parsed)
    # the first conversation is complete, the failed one left nothing behind
    assert store.stats()["conversations"] == 1 and store.stats()["messages"] == 6
    assert store.conversations.find_conversation("chatgpt", "0b7d2c1e-5f44-4a8e-8c2b-sourdough002") is None
    assert store.check_integrity() == []
    monkeypatch.setattr(store.intake, "add_pages", real_add_pages)
    report = write_all(store, parsed)  # re-running finishes the job
    assert [o.status for o in report.outcomes] == ["already imported", "imported", "imported"]
    assert store.stats()["messages"] == 13


def test_an_import_does_not_hold_the_write_lock_while_it_embeds(tmp_path, embedder):
    """Embedding is the slow part of an import: a chat reply (another connection) must be able to
    write meanwhile, even with a short busy timeout."""
    import apsw

    from memory_core import MemoryStore

    path = tmp_path / "m.sqlite3"
    writes = []

    def embed_and_meanwhile_chat(texts):
        other = apsw.Connection(str(path))
        other.set_busy_timeout(50)
        try:
            other.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"chat-{len(writes)}", "x"))
            writes.append("ok")
        except apsw.BusyError:
            writes.append("blocked")
        finally:
            other.close()
        return embedder.embed(texts)

    s = MemoryStore.open(path, embed_and_meanwhile_chat, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        write_all(s, load(FIXTURES / "chatgpt_conversations.json"))
        assert writes and set(writes) == {"ok"}, writes
        assert s.stats()["messages"] == 13 and s.check_integrity() == []
    finally:
        s.close()


def _write_bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    full = (FIXTURES / "chatgpt_conversations.json").read_text(encoding="utf-8")
    cases = {}
    p = tmp_path / "truncated.json"
    p.write_text(full[: len(full) * 2 // 3], encoding="utf-8")
    cases["truncated"] = (p, "invalid JSON")
    p = tmp_path / "schema.json"
    p.write_text(json.dumps([{"user": "x", "messages": ["hi"]}]), encoding="utf-8")
    cases["schema"] = (p, "unrecognised JSON")
    p = tmp_path / "binary.json"
    p.write_bytes(bytes(range(256)) * 8)
    cases["binary"] = (p, "binary file")
    p = tmp_path / "latin1.txt"
    p.write_bytes("User: ¿qué tal?\nAssistant: bien\n".encode("latin-1"))
    cases["utf8"] = (p, "invalid UTF-8")
    return cases


@pytest.mark.parametrize("case", ["truncated", "schema", "binary", "utf8"])
def test_fatal_inputs_exit_2_and_write_nothing(case, tmp_path, mnemo_dirs, embedder, capsys):
    path, expected = _write_bad_inputs(tmp_path)[case]
    rc = main(["ingest", str(path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("error:") == 1 and expected in err and path.name in err
    assert not (mnemo_dirs["data"] / "mnemo.sqlite3").exists()  # the store was not even opened
    # with an existing store: unchanged
    assert main(["ingest", str(FIXTURES / "transcript.md"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["ingest", str(path), "--no-progress"]) == 2
    s = _open(mnemo_dirs, embedder)
    try:
        st = s.stats()
        assert st["conversations"] == 1 and st["messages"] == 6 and st["pages_total"] == 3
        assert s.check_integrity() == []
    finally:
        s.close()


def test_five_megabyte_message_is_imported_and_capped_for_memory(tmp_path, mnemo_dirs, embedder, capsys):
    big = ("All work and no play makes Jack a dull boy. " * 120_000)[: 5 * 1024 * 1024]
    export = [
        {
            "title": "Huge paste",
            "create_time": 1700000000.0,
            "id": "huge-1",
            "current_node": "a",
            "mapping": {
                "r": {"id": "r", "message": None, "parent": None, "children": ["u"]},
                "u": {
                    "id": "u",
                    "parent": "r",
                    "children": ["a"],
                    "message": {
                        "author": {"role": "user"},
                        "create_time": 1700000001.0,
                        "content": {"content_type": "text", "parts": [big]},
                        "recipient": "all",
                    },
                },
                "a": {
                    "id": "a",
                    "parent": "u",
                    "children": [],
                    "message": {
                        "author": {"role": "assistant"},
                        "create_time": 1700000002.0,
                        "content": {"content_type": "text", "parts": ["That is a long text about Jack."]},
                        "recipient": "all",
                    },
                },
            },
        }
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    rc = main(["ingest", str(path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0
    assert "turn u: message of 5,242,880 characters: imported in full" in err
    s = _open(mnemo_dirs, embedder)
    try:
        conv = s.conversations.find_conversation("chatgpt", "huge-1")
        msgs = s.conversations.list_messages(conv.id)
        assert len(msgs[0].content) == len(big)
        (page,) = s.pages.list_pages(conversation_id=conv.id)
        assert len(page.user_text) < 17_000 and "truncated" in page.user_text and page.meta["truncated"]
        assert s.check_integrity() == []
    finally:
        s.close()


def test_limit_and_paused_memory(mnemo_dirs, embedder, capsys):
    assert main(["ingest", str(FIXTURES / "chatgpt_conversations.json"), "--limit", "1", "--no-progress"]) == 0
    capsys.readouterr()
    s = _open(mnemo_dirs, embedder)
    try:
        assert s.stats()["conversations"] == 1
        s.set_paused(True)
    finally:
        s.close()
    assert main(["ingest", str(FIXTURES / "transcript.md"), "--no-progress"]) == 1
    assert "memory is paused" in capsys.readouterr().err


def test_locomo_conversation_pages_carry_turn_ids(store, locomo_path):
    parsed = load(locomo_path)
    conv = parsed.conversations[0]
    out = write_conversation(store, conv)
    assert out.turns_written == conv.n_turns
    pages = _all_pages(store)
    ids = [t for p in pages for t in p.meta["turn_ids"]]
    assert sorted(ids) == sorted(t.turn_id for t in conv.turns)
    msgs = store.conversations.list_messages(out.conversation_id)
    assert msgs[0].content.startswith("Caroline: ") and msgs[0].role == "user"
    assert msgs[0].created_at == 1683554160.0  # 1:56 pm on 8 May, 2023 (UTC)
    photo = next(m for m in msgs if m.meta["turn_id"] == "D1:5")
    assert "[shares a photo: a photo of a dog walking past a wall with a painting of a woman]" in photo.content


def test_json_escapes_of_half_surrogate_pairs_are_imported_not_fatal(store, tmp_path):
    data = [
        {
            "sample_id": "s",
            "qa": [],
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "half a pair \ud800 here"},
                    {"speaker": "Bob", "dia_id": "D1:2", "text": "a whole pair \ud83d\ude00"},
                ],
            },
        }
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="ascii")  # \ud800 and \ud83d\ude00 as JSON escapes
    assert "\\ud800" in path.read_text()
    report = write_all(store, load(path), path=str(path))
    assert report.pages_written == 1
    (page,) = _all_pages(store)
    assert page.user_text == "Ann: half a pair \ufffd here" and page.assistant_text == "Bob: a whole pair \U0001f600"


def test_an_import_reads_each_page_after_the_one_before_across_chunks_and_resumes(tmp_path, embedder, monkeypatch):
    """Late chunking through the importer: a page of a later embedding chunk, and the first page of a
    resumed import, are read after the page before them, as if the conversation had been added in one go."""
    import numpy as np

    from app.importers import writer
    from app.importers.base import ParsedConversation, Turn
    from memory_core import MemoryStore
    from memory_core.types import context_side

    said = [
        "Look how cute my two turtles are!",
        "Aww! How long have you had them?",
        "I've had them for 3 years now.",
        "They must bring you joy.",
        "They do. I walk them on Sundays.",
        "Ha, that's sweet!",
    ]
    turns = [
        Turn("user" if i % 2 == 0 else "assistant", t, 1_700_000_000.0 + 10 * i, f"D1:{i + 1}", 1)
        for i, t in enumerate(said)
    ]

    def conv(n):
        return ParsedConversation("text", "turtles", "Turtles", 1_700_000_000.0, turns[:n])

    def open_(name):
        return MemoryStore.open(
            tmp_path / name,
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            embed_tokens=embedder.embed_with_tokens,
        )

    def vectors(store):
        return [store.pages.page_vec(p.id) for p in sorted(store.pages.list_pages(), key=lambda p: p.id)]

    whole = open_("whole.db")
    writer.write_conversation(whole, conv(6))
    monkeypatch.setattr(writer, "PAGE_CHUNK", 1)  # one page per embedding chunk
    chunked = open_("chunked.db")
    writer.write_conversation(chunked, conv(6))
    resumed = open_("resumed.db")
    writer.write_conversation(resumed, conv(2))
    assert writer.write_conversation(resumed, conv(6)).status == "resumed"
    expected = embedder.embed_with_tokens([f"{said[2]}\n{said[3]}"], [context_side(said[0], said[1])])[0][0]
    for store in (whole, chunked, resumed):
        got = vectors(store)
        assert len(got) == 3
        np.testing.assert_allclose(got[1], expected, atol=1e-5)
        for mine, theirs in zip(vectors(whole), got):
            np.testing.assert_allclose(theirs, mine, atol=1e-5)
    for store in (whole, chunked, resumed):
        store.close()
