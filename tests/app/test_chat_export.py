"""Exporting one chat (app.operations.chat_export, `mnemo chats`): the branch asked for, a Markdown transcript
that the text importer reads back unchanged, JSON with every field, nothing half-written."""

import json

import pytest

from app.cli import main
from app.importers import load
from app.importers.writer import write_conversation
from app.operations.chat_export import export_chat, format_for

T0 = 1_712_045_731.0  # 2024-04-02T08:15:31Z


def _chat(store):
    """A chat whose second reply was regenerated: two branches, the newest one last."""
    cid = store.conversations.create_conversation("Balcony garden: plans", created_at=T0)
    u1 = store.conversations.add_message(cid, "user", "My balcony faces north. What can I grow?", created_at=T0)
    a1 = store.conversations.add_message(
        cid, "assistant", "Leafy greens:\n\n- lettuce\n- spinach", parent_id=u1, created_at=T0 + 9
    )
    u2 = store.conversations.add_message(cid, "user", "And herbs?", parent_id=a1, created_at=T0 + 60)
    first = store.conversations.add_message(
        cid, "assistant", "Mint and parsley.", parent_id=u2, created_at=T0 + 70, meta={"model": "smollm2"}
    )
    store.conversations.add_message(
        cid, "assistant", "Parsley, mint and chives.", parent_id=u2, created_at=T0 + 80, status="stopped"
    )
    return cid, first


def test_markdown_export_reimports_unchanged(store, embedder, tmp_path):
    cid, _ = _chat(store)
    out = export_chat(store, cid, tmp_path / "garden.md")
    assert out.messages == 4 and out.title == "Balcony garden: plans" and out.bytes == out.path.stat().st_size
    text = out.path.read_text(encoding="utf-8")
    assert text.startswith("# Balcony garden: plans\n\n[2024-04-02T08:15:31Z] **User:** My balcony faces north.")
    # the newest branch; its reply was stopped, and says so
    assert "**Assistant (stopped):** Parsley, mint and chives." in text and "Mint and parsley." not in text
    parsed = load(out.path)
    assert parsed.format == "text" and not parsed.issues
    (conv,) = parsed.conversations
    assert conv.title == "Balcony garden: plans"
    assert [(t.role, t.text, t.timestamp, t.status) for t in conv.turns] == [
        (m.role, m.content, m.created_at, m.status) for m in store.conversations.list_messages(cid)
    ]
    # into another memory and out again: the same file
    from memory_core import MemoryStore

    other = MemoryStore.open(
        tmp_path / "other.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )
    try:
        write_conversation(other, conv)
        (copy,) = other.conversations.list_conversations()
        assert export_chat(other, copy.id, tmp_path / "again.md").path.read_text(encoding="utf-8") == text
    finally:
        other.close()


def test_a_message_quoting_speaker_lines_reads_back_whole(store, tmp_path):
    """A pasted transcript inside a message ("User: …" lines) is text, not new messages."""
    cid = store.conversations.create_conversation("Pasted dialogue", created_at=T0)
    pasted = "Summarise this:\nUser: where is my passport?\n**Assistant:** In the drawer.\n> Human: thanks"
    u = store.conversations.add_message(cid, "user", pasted, created_at=T0)
    store.conversations.add_message(
        cid, "assistant", "Assistant: it is in the drawer.\nUser: asked where.", parent_id=u, created_at=T0 + 5
    )
    out = export_chat(store, cid, tmp_path / "pasted.md")
    (conv,) = load(out.path).conversations
    assert [(t.role, t.text) for t in conv.turns] == [
        (m.role, m.content) for m in store.conversations.list_messages(cid)
    ]


def test_json_export_of_another_branch_keeps_every_field(store, tmp_path):
    cid, first = _chat(store)
    out = export_chat(store, cid, tmp_path / "garden.json", leaf_id=first)
    doc = json.loads(out.path.read_text(encoding="utf-8"))
    assert doc["format"] == "mnemo-chat-export" and doc["title"] == "Balcony garden: plans"
    assert doc["created_at"] == "2024-04-02T08:15:31Z"
    assert [m["content"] for m in doc["messages"]] == [
        "My balcony faces north. What can I grow?",
        "Leafy greens:\n\n- lettuce\n- spinach",
        "And herbs?",
        "Mint and parsley.",
    ]
    assert doc["messages"][3]["meta"] == {"model": "smollm2"} and doc["messages"][3]["status"] == "complete"
    assert doc["messages"][1]["parent_id"] == doc["messages"][0]["id"]
    assert format_for("x.JSON") == "json" and format_for("x.txt") == "markdown" and format_for("x", "md") == "markdown"
    with pytest.raises(ValueError, match="unknown export format"):
        format_for("x.md", "pdf")
    with pytest.raises(LookupError):
        export_chat(store, 999, tmp_path / "none.md")


def test_a_full_disk_leaves_the_old_file(store, tmp_path, monkeypatch):
    cid, _ = _chat(store)
    target = tmp_path / "garden.md"
    target.write_text("an earlier export", encoding="utf-8")
    import app.operations.chat_export as ce

    real = ce.atomic_file

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def write(self, text):
            self.fh.write(text[:10])
            raise OSError(28, "No space left on device")

    from contextlib import contextmanager

    @contextmanager
    def full(path):
        with real(path) as fh:
            yield FullDisk(fh)

    monkeypatch.setattr(ce, "atomic_file", full)
    with pytest.raises(OSError, match="No space"):
        export_chat(store, cid, target)
    assert target.read_text(encoding="utf-8") == "an earlier export"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".garden")] == []  # no partial file left


def test_chats_command_lists_and_exports(mnemo_dirs, embedder, tmp_path, capsys):
    from app.context import AppContext

    store = AppContext.create().open_store()
    try:
        cid, _ = _chat(store)
        store.intake.add_page(cid, "My balcony faces north. What can I grow?", "Leafy greens.")
    finally:
        store.close()
    assert main(["chats", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == cid and row["title"] == "Balcony garden: plans" and row["messages"] == 4
    assert main(["chats", "list"]) == 0
    assert "Balcony garden: plans" in capsys.readouterr().out
    assert main(["chats", "export", str(cid), str(tmp_path / "g.json")]) == 0
    assert "4 messages" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["messages"]) == 4
    assert main(["chats", "export", str(cid)]) == 0  # Markdown on standard output
    assert capsys.readouterr().out.startswith("# Balcony garden: plans\n")
    assert main(["chats", "export", str(cid), "-", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "Balcony garden: plans"
    assert main(["chats", "export", "999", str(tmp_path / "x.md")]) == 1
    assert "no chat with id 999" in capsys.readouterr().err and not (tmp_path / "x.md").exists()
    # rename and delete, as in the app: memory learned from a deleted chat stays
    assert main(["chats", "rename", str(cid), "  Balcony   herbs "]) == 0
    assert "now “Balcony herbs”" in capsys.readouterr().out
    assert main(["chats", "rename", "999", "x"]) == 1 and main(["chats", "rename", str(cid), "  "]) == 2
    capsys.readouterr()
    assert main(["chats", "delete", str(cid)]) == 2  # no terminal to ask: needs --yes
    assert "pass --yes" in capsys.readouterr().err
    assert main(["chats", "delete", str(cid), "--yes"]) == 0
    assert "deleted “Balcony herbs”" in capsys.readouterr().out
    assert main(["chats", "list", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    store = AppContext.create().open_store()
    try:
        assert store.pages.count_pages() == 1 and store.conversations.get_conversation(cid) is None
    finally:
        store.close()


def test_chats_forget_and_delete_forget_take_what_memory_learned(mnemo_dirs, embedder, capsys):
    from app.context import AppContext

    store = AppContext.create().open_store()
    try:
        cid, _ = _chat(store)
        other = store.conversations.create_conversation("Elsewhere")
        for text in ("My balcony faces north.", "I grow mint in a blue pot.", "The balcony railing is rusty."):
            store.intake.add_page(cid, text, "Noted.")
        store.intake.add_page(other, "I keep bees in the garden.", "Lovely.")
        store.jobs.run_pending(allow_llm=False)
        empty = store.conversations.create_conversation("Nothing here")
    finally:
        store.close()
    assert main(["chats", "forget", str(cid)]) == 2  # no terminal to ask: needs --yes
    assert "removes 3 pages" in capsys.readouterr().err
    assert main(["chats", "forget", str(cid), "--yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["pages"]) == 3 and out["conversation_id"] == cid
    assert main(["chats", "forget", str(empty)]) == 0
    assert "memory holds nothing from “Nothing here”" in capsys.readouterr().out
    assert main(["chats", "forget", "999", "--yes"]) == 1
    store = AppContext.create().open_store()
    try:
        assert store.pages.count_pages(conversation_id=cid) == 0 and store.pages.count_pages() == 1
        assert len(store.conversations.all_messages(cid)) == 5  # the chat stays, both branches
        assert not any("balcony" in k.text.lower() for k in store.persona.list_knowledge())
    finally:
        store.close()
    capsys.readouterr()
    assert main(["chats", "delete", str(empty), "--yes"]) == 0  # nothing learned: nothing left over
    capsys.readouterr()
    assert main(["memory", "list", "page", "--deleted-chats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["chats", "delete", str(other), "--forget", "--yes"]) == 0
    assert "deleted “Elsewhere” and forgot 1 page" in capsys.readouterr().out
    store = AppContext.create().open_store()
    try:
        assert store.pages.count_pages() == 0 and store.conversations.get_conversation(other) is None
        assert store.check_integrity() == []
    finally:
        store.close()


def test_an_interrupted_reply_is_marked_in_markdown_and_reads_back_so(store, embedder, tmp_path):
    """A reply cut short by a crash (left 'streaming', marked 'interrupted' at the next start) says so
    after its speaker; a reply being written as the file is made ends there too: 'interrupted'."""
    cid = store.conversations.create_conversation("Cut short", created_at=T0)
    u1 = store.conversations.add_message(cid, "user", "Tell me about Porto.", created_at=T0)
    a1 = store.conversations.add_message(
        cid, "assistant", "Porto is a city on the Dou", parent_id=u1, created_at=T0 + 2, status="streaming"
    )
    assert store.conversations.mark_interrupted_messages() == 1  # what a start after the crash does
    u2 = store.conversations.add_message(cid, "user", "Go on.", parent_id=a1, created_at=T0 + 60)
    store.conversations.add_message(
        cid, "assistant", "It is known for", parent_id=u2, created_at=T0 + 61, status="streaming"
    )
    text = export_chat(store, cid, tmp_path / "cut.md").path.read_text(encoding="utf-8")
    assert text == (
        "# Cut short\n\n"
        "[2024-04-02T08:15:31Z] **User:** Tell me about Porto.\n\n"
        "[2024-04-02T08:15:33Z] **Assistant (interrupted):** Porto is a city on the Dou\n\n"
        "[2024-04-02T08:16:31Z] **User:** Go on.\n\n"
        "[2024-04-02T08:16:32Z] **Assistant (interrupted):** It is known for\n\n"
    )
    (conv,) = load(tmp_path / "cut.md").conversations
    assert [(t.role, t.text, t.status) for t in conv.turns] == [
        ("user", "Tell me about Porto.", "complete"),
        ("assistant", "Porto is a city on the Dou", "interrupted"),
        ("user", "Go on.", "complete"),
        ("assistant", "It is known for", "interrupted"),
    ]
    write_conversation(store, conv)  # into a memory: the replies keep their status
    copy = next(c for c in store.conversations.list_conversations() if c.source == "text")
    assert [m.status for m in store.conversations.list_messages(copy.id)] == [
        "complete",
        "interrupted",
        "complete",
        "interrupted",
    ]
