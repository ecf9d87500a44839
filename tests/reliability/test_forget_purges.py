"""Forget means gone: a unique sentence held as a page, a fact and a reply's trace, forgotten each way
the user can (an item, a chat's memory, a chat deleted with --forget, "Forget that …" in a chat, a
wipe), is then in none of the file's bytes (the database, its -wal and -shm read raw, not through SQL),
the job table, the full-text indexes' shadow tables (their terms decoded from the raw blocks), the
replies' traces, nor, once the user has dropped the backups Mnemo names, the backups.

A chat the user kept still holds its own messages: what they say stays, in them and nowhere else.
Real store (sqlite-vec, the bundled ONNX embedder), the chat agent on the bundled GGUF, the CLI run
in-process."""

from __future__ import annotations

import json
import time

import pytest

from app.chat.agent import ChatAgent
from app.cli import main as cli
from app.operations import backups
from app.operations import chats as operations
from app.operations.remember import remember_fact
from app.settings import Paths
from memory_core import MemoryParams, MemoryStore
from models.chat import CancelToken
from tests.reliability.fts_blocks import fts_terms

TOKEN = "qzvwuxkyjph"  # a word no text has; its letters make trigrams no other text has either
SENTENCE = f"{TOKEN.capitalize()}: the spare key is under the blue heron statue"
NEEDLE = TOKEN[1:]  # the capital is left out: the sentence holds it as "Qzv…", the indexes as "qzv…"
ASK_KEY = "Where is the spare key hidden?"
FORGET_IT = "Forget that the spare key is under the blue heron statue."
FTS_TABLES = ("page_fts", "page_tri", "knowledge_fts", "knowledge_tri", "message_fts")
WAYS = ("forget_item", "forget_chat", "delete_chat_forget", "forget_request", "wipe")


def test_the_term_decoder_sees_a_deleted_row_until_the_index_is_optimized(tmp_path):
    import apsw

    conn = apsw.Connection(str(tmp_path / "t.db"))
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body, content='', contentless_delete=1)")
    for i in range(300):
        conn.execute("INSERT INTO f(rowid, body) VALUES (?, ?)", (i + 1, f"word{i} plain text here"))
    conn.execute("INSERT INTO f(rowid, body) VALUES (999, ?)", (SENTENCE,))
    conn.execute("DELETE FROM f WHERE rowid = 999")
    assert not conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (TOKEN,)).fetchall()
    assert b"0" + TOKEN.encode() in fts_terms(conn, "f")  # gone for SQL, still in the index
    conn.execute("INSERT INTO f(f) VALUES ('optimize')")
    terms = fts_terms(conn, "f")
    assert b"0" + TOKEN.encode() not in terms and b"0word7" in terms


# ---------------------------------------------------------------------------------------- the setting
@pytest.fixture
def paths(mnemo_dirs) -> Paths:
    return Paths.resolve()


@pytest.fixture
def store(paths, embedder):
    """The memory the CLI opens too (the data folder's own file); STM of 3 pages, so pages reach MTM."""
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    params = MemoryParams.from_flat(stm_capacity=3)
    with MemoryStore.open(
        paths.db_file, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim, params=params
    ) as s:
        yield s


@pytest.fixture
def agent(store, chat_model):
    return ChatAgent(store, chat_model, reply_reserve=256, max_tokens=24)


def _held_by_a_chat(store) -> int:
    """How often the sentence's word is in what the user's chats keep: messages, titles, and the
    question each reply's trace repeats (the message it answered)."""
    n = sum(t.count(NEEDLE) for (t,) in store.db.rows("SELECT title FROM conversation"))
    for content, meta_s in store.db.rows("SELECT content, meta FROM message"):
        trace = json.loads(meta_s).get("trace") or {}
        n += content.count(NEEDLE) + str(trace.get("query", "")).count(NEEDLE)
    return n


def _raw(path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _where_it_is(store, paths) -> dict[str, int]:
    """Each place the sentence's word is found, with how often (read while the store is open: closing
    the last connection would fold the -wal into the file and delete it)."""
    db = paths.db_file
    found = {
        name: _raw(db.with_name(db.name + suffix)).count(NEEDLE.encode())
        for name, suffix in (("database file", ""), ("-wal", "-wal"), ("-shm", "-shm"))
    }
    found["database file"] -= _held_by_a_chat(store)  # a kept chat holds its own messages
    found["job table"] = sum(
        (payload + (error or "")).lower().count(TOKEN)
        for payload, error in store.db.rows("SELECT payload, error FROM job")
    )
    chat_keeps_it = _held_by_a_chat(store) > 0
    for table in FTS_TABLES:
        terms = fts_terms(store.db.conn, table)
        found[f"{table} terms"] = sum(TOKEN in t.decode(errors="replace") for t in terms)
        if table == "message_fts" and not chat_keeps_it:  # trigrams: a kept chat's messages are indexed
            found[f"{table} trigrams"] = sum(b"0" + TOKEN[i : i + 3].encode() in terms for i in range(len(TOKEN) - 2))
    for mid, meta_s in store.db.rows("SELECT id, meta FROM message"):
        meta = json.loads(meta_s)
        (meta.get("trace") or {}).pop("query", None)
        found[f"message {mid} meta"] = json.dumps(meta, ensure_ascii=False).lower().count(TOKEN)
    held = _held_by_a_chat(store)
    for b in backups.list_backups(paths):
        found[f"backup {b.name}"] = b.read_bytes().count(NEEDLE.encode()) - held  # a copy of the memory now
    found["found by search"] = store.pages.count_pages(text=TOKEN) + sum(
        TOKEN in k.text.lower() for k in store.persona.list_knowledge(limit=1000)
    )
    return {k: v for k, v in found.items() if v}


def _told_and_dropped(capsys, paths) -> list[str]:
    """What the CLI said of the backups; then the user drops them as it says."""
    said = capsys.readouterr().out
    assert "may still hold what was forgotten" in said and "mnemo memory backups --drop-forgotten" in said, said
    assert cli(["memory", "backups", "--drop-forgotten"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("deleted 1 backup"), out
    return [said, out]


# ---------------------------------------------------------------------------------------- the test
@pytest.mark.parametrize("way", WAYS)
def test_forgotten_text_is_nowhere_in_the_files(way, store, agent, paths, capsys):
    chat = None
    if way in ("forget_chat", "delete_chat_forget"):
        # the chat's "Remember that …" keeps the fact, its exchange becomes a page; a later message's
        # exchange still waits as a job when it is forgotten
        chat = agent.new_conversation()
        assert agent.send(chat, f"Remember that {SENTENCE}.").stats["remembered"]["outcome"] == "added"
        store.jobs.run_pending(allow_llm=False)
        agent.send(chat, f"By the way, the {TOKEN.capitalize()} cabin has a red door.")
    else:
        store.intake.add_page(None, f"{SENTENCE}.", "Noted: the spare key is under the heron statue.")
        remember_fact(store, SENTENCE)
    # another chat's reply recalls it (its chat reads memory but writes none: a paused chat); the reply
    # is stopped at its first token, so what it says cannot repeat the word: only its trace holds it
    other = agent.new_conversation()
    store.conversations.set_conversation_flags(other, memory_paused=True)
    stop = CancelToken()
    agent.max_tokens, max_tokens = 1, agent.max_tokens
    recalled = agent.send(other, ASK_KEY, on_token=lambda _: stop.cancel(), cancel=stop)
    agent.max_tokens = max_tokens
    assert any(TOKEN in k["text"].lower() for k in recalled.trace["knowledge"]), recalled.trace["knowledge"]
    # one token: a longer first chunk can be a whole recitation ("You said: “Qzv…”": app.chat.quoted_turns writes a
    # quoted page back as one chunk), and the chat's own reply would then rightly keep the word
    assert TOKEN not in recalled.text.lower(), recalled.text
    assert store.pages.count_pages(text=TOKEN) >= 1
    before = backups.make_backup(store, paths, now=time.time() - 3600)  # named apart from the new one
    assert NEEDLE.encode() in before.read_bytes()
    assert _where_it_is(store, paths), "the sentence must be somewhere before it is forgotten"

    if way == "forget_item":
        store.curation.forget("page", [p.id for p in store.pages.list_pages(text=TOKEN)])
        store.curation.forget(
            "knowledge", [k.id for k in store.persona.list_knowledge(limit=100) if TOKEN in k.text.lower()]
        )
    elif way == "forget_chat":
        assert chat is not None
        assert not operations.forget_chat(store, chat).empty
    elif way == "delete_chat_forget":
        assert cli(["chats", "delete", str(chat), "--forget", "--yes"]) == 0
    elif way == "forget_request":
        result = agent.send(agent.new_conversation(), FORGET_IT)
        assert result.stats["forgot"]["facts"] and result.stats["forgot"]["pages"] >= 1, result.stats["forgot"]
    else:
        assert cli(["memory", "wipe", "--yes"]) == 0

    if way in ("delete_chat_forget", "wipe"):
        _told_and_dropped(capsys, paths)
    else:  # the store's own calls: the app names the backups, and the user drops them
        assert backups.holding_forgotten(paths, store.db.purge.spans()) == [before]
        gone, fresh = backups.drop_forgotten(store, paths, keep=2)
        assert gone == [before] and fresh is not None and not before.exists()
    assert backups.holding_forgotten(paths, store.db.purge.spans()) == []

    assert _where_it_is(store, paths) == {}
    assert store.check_integrity() == []
