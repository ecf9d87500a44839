"""Parsing and validation of the import formats (no store involved)."""

import json
from pathlib import Path

import pytest

from app.importers import ImportFatalError, load, parse_chatgpt, parse_claude, parse_locomo, parse_text
from app.importers.claude import parse_iso
from app.importers.locomo import parse_locomo_datetime
from app.importers.pages import MAX_SIDE_CHARS, cap_text, page_items, plan_pages

FIXTURES = Path(__file__).parent / "fixtures"


# -- ChatGPT ---------------------------------------------------------------------------
def test_chatgpt_export_keeps_current_branch_with_original_timestamps():
    r = load(FIXTURES / "chatgpt_conversations.json")
    assert r.format == "chatgpt" and r.records_seen == 5
    lisbon, sourdough, broken = r.conversations
    assert lisbon.external_id == "6f1e0a52-0c3b-4d0e-9a57-lisbon000001"
    assert lisbon.title == "Trip to Lisbon" and lisbon.created_at == 1700000050.25
    # the edited prompt (u-1b) and the regenerated reply (a-1c) are on the current branch;
    # system, hidden context, the tool call and the tool output are not
    assert [t.turn_id for t in lisbon.turns] == ["u-1b", "a-1c", "u-2", "a-2", "u-3", "a-3"]
    assert [t.role for t in lisbon.turns] == ["user", "assistant"] * 3
    assert [t.timestamp for t in lisbon.turns] == [
        1700000200.0,
        1700000260.0,
        1700000300.0,
        1700000320.0,
        1700000400.0,
        1700000410.0,
    ]
    assert "daughter Ana" in lisbon.turns[0].text
    assert all("Porto" not in t.text and "first draft" not in t.text for t in lisbon.turns)
    assert lisbon.turns[1].meta["model"] == "gpt-4o"


def test_chatgpt_custom_instructions_as_last_used():
    """ChatGPT's custom instructions ride, hidden, in every conversation that used them: the newest
    version is what the user says about themselves now."""

    def conv(cid, when, about, style, *, metadata=True):
        ctx = {
            "author": {"role": "user"},
            "create_time": None,
            "content": {
                "content_type": "user_editable_context",
                "user_profile": f"The user provided the following information about themselves: {about}",
                "user_instructions": "The user provided the additional info about how they would like "
                f"you to respond: {style}",
            },
            "metadata": {"is_visually_hidden_from_conversation": True},
        }
        if metadata:
            ctx["metadata"]["user_context_message_data"] = {"about_user_message": about, "about_model_message": style}
        return {
            "id": cid,
            "title": cid,
            "create_time": when,
            "current_node": "u",
            "mapping": {
                "c": {"message": ctx, "parent": None, "children": ["u"]},
                "u": {
                    "message": {"author": {"role": "user"}, "create_time": when, "content": {"parts": ["hi"]}},
                    "parent": "c",
                    "children": [],
                },
            },
        }

    r = parse_chatgpt(
        [
            conv("new", 300, "I live in Lisbon now. I teach maths.", "Be brief.", metadata=False),
            conv("old", 100, "I live in Porto.", "Answer in French."),
            conv("mid", 200, "I live in Porto.", "Be brief."),
        ]
    )
    assert r.about_user == ["I live in Lisbon now. I teach maths."] and r.reply_style == ["Be brief."]
    assert r.profile_source == "ChatGPT custom instructions"
    assert [t.text for c in r.conversations for t in c.turns] == ["hi", "hi", "hi"]  # never a message
    assert parse_chatgpt([conv("x", 1, "", "")]).about_user == []


def test_chatgpt_multimodal_thoughts_empty_and_missing_times():
    r = load(FIXTURES / "chatgpt_conversations.json")
    sourdough = r.conversations[1]
    assert [t.turn_id for t in sourdough.turns] == ["s2-u1", "s2-a1", "s2-u2", "s2-a2"]
    assert sourdough.turns[0].text == "[image]\nWhy is my starter not rising?"
    # a message without create_time inherits the previous one
    assert sourdough.turns[2].timestamp == sourdough.turns[1].timestamp == 1710000030.0


def test_chatgpt_malformed_records_are_skipped_with_positions():
    r = load(FIXTURES / "chatgpt_conversations.json")
    messages = [str(i) for i in r.issues]
    assert (
        "chatgpt_conversations.json: conversation 3 ('Broken export sample'), node b-a1: "
        "message has no content.parts — skipped"
    ) in messages
    assert any("conversation 4: not an object" in m for m in messages)
    assert any("conversation 5 ('Lost mapping'): has no 'mapping'" in m for m in messages)
    assert r.skipped_records == 3
    broken = r.conversations[2]
    # the two user messages around the dropped reply merge into one page side
    plans = plan_pages(broken.turns)
    assert len(plans) == 1 and plans[0].user == [0, 1] and plans[0].assistant == [2]


def test_chatgpt_missing_current_node_follows_latest_leaf():
    conv = {
        "title": "t",
        "id": "x",
        "mapping": {
            "r": {"message": None, "parent": None, "children": ["a", "b"]},
            "a": {
                "message": {"author": {"role": "user"}, "create_time": 5, "content": {"parts": ["old"]}},
                "parent": "r",
                "children": [],
            },
            "b": {
                "message": {"author": {"role": "user"}, "create_time": 9, "content": {"parts": ["new"]}},
                "parent": "r",
                "children": [],
            },
        },
    }
    r = parse_chatgpt([conv])
    assert [t.text for t in r.conversations[0].turns] == ["new"]
    assert any("current_node" in str(i) and not i.skipped for i in r.issues)


def test_chatgpt_parent_cycle_is_cut():
    conv = {
        "title": "loop",
        "id": "c",
        "current_node": "b",
        "mapping": {
            "a": {
                "message": {"author": {"role": "user"}, "create_time": 1, "content": {"parts": ["hi"]}},
                "parent": "b",
                "children": ["b"],
            },
            "b": {
                "message": {"author": {"role": "assistant"}, "create_time": 2, "content": {"parts": ["yo"]}},
                "parent": "a",
                "children": ["a"],
            },
        },
    }
    r = parse_chatgpt([conv])
    assert [t.text for t in r.conversations[0].turns] == ["hi", "yo"]
    assert any("cycle" in str(i) for i in r.issues)


def test_chatgpt_wrong_schema_is_fatal():
    with pytest.raises(ImportFatalError, match="not a ChatGPT export"):
        parse_chatgpt({"conversations": []})
    with pytest.raises(ImportFatalError, match="no conversation has a 'mapping'"):
        parse_chatgpt([{"title": "x"}, 3])


# -- Claude ----------------------------------------------------------------------------
def test_claude_export_keeps_the_latest_branch_with_its_text_and_attachments():
    r = load(FIXTURES / "claude_conversations.json")
    assert r.format == "claude" and r.records_seen == 5
    garden, cover, odd = r.conversations
    assert garden.external_id == "a3c1f0e2-5b1d-4c7e-9f10-garden000001" and garden.source == "claude"
    assert garden.title == "Planning a vegetable garden"
    assert garden.created_at == parse_iso("2024-04-02T08:15:30.512345Z") == 1712045730.512345
    # the edited prompt (m3b) and the retried reply (m4c) are kept; m3a/m4a/m4b are older branches
    assert [t.turn_id for t in garden.turns] == ["m1", "m2", "m3b", "m4c", "m5", "m6"]
    assert [t.role for t in garden.turns] == ["user", "assistant"] * 3
    assert garden.turns[1].timestamp == parse_iso("2024-04-02T08:15:40Z")
    text = "\n".join(t.text for t in garden.turns)
    assert "tomatoes" not in text.lower() and "A pH of 6.8 is fine." not in text
    # thinking, tool calls and tool results are not conversation text
    assert "North-facing" not in text and "web_search" not in text and "prefers pH" not in text
    assert garden.turns[1].text.startswith("With three hours of sun")
    # a pasted file keeps its text; an image is named
    assert garden.turns[2].text == (
        "[attached: soil-test.txt]\npH 6.8, nitrogen low\n[attached: balcony.jpg]\n"
        "Here is my soil test. Is it fine for spinach?"
    )


def test_claude_older_export_flat_text_list_order_and_missing_times():
    cover = load(FIXTURES / "claude_conversations.json").conversations[1]
    assert [t.turn_id for t in cover.turns] == ["c1", "c2", "c3", "c4"]
    assert cover.turns[0].text == "Help me write a cover letter for a librarian job in Ghent."
    # a message without created_at inherits the previous one
    assert cover.turns[2].timestamp == cover.turns[1].timestamp == parse_iso("2023-11-20T17:40:12+00:00")


def test_claude_malformed_records_are_skipped_with_positions():
    r = load(FIXTURES / "claude_conversations.json")
    messages = [str(i) for i in r.issues]
    assert messages == [
        "claude_conversations.json: conversation 3 ('Untitled'): is empty — skipped",
        "claude_conversations.json: conversation 4: not an object but a JSON int — skipped",
        "claude_conversations.json: conversation 5 ('Odd records'), message 1: is a JSON str, not an object — skipped",
        "claude_conversations.json: conversation 5 ('Odd records'), message 2: has an unknown sender 'system' — skipped",
    ]
    odd = r.conversations[2]
    assert [t.text for t in odd.turns] == [
        "Remind me: my passport expires in June 2026.",
        "Noted: your passport expires in June 2026.",
    ]


def test_claude_branch_edge_cases():
    root = "00000000-0000-4000-8000-000000000000"

    def msg(uid, parent, sender, text, t):
        return {
            "uuid": uid,
            "parent_message_uuid": parent,
            "sender": sender,
            "text": text,
            "created_at": f"2024-05-01T10:00:{t:02d}Z",
        }

    # a lost parent: the branch is cut there, with a warning
    conv = {
        "uuid": "x",
        "name": "n",
        "chat_messages": [msg("a", root, "human", "first", 1), msg("b", "gone", "assistant", "second", 2)],
    }
    r = parse_claude([conv], "c.json")
    assert [t.text for t in r.conversations[0].turns] == ["second"]
    assert "message 2: its parent message is missing" in str(r.issues[0])
    # a cycle is cut, not followed forever
    conv["chat_messages"] = [
        msg("a", "b", "human", "one", 1),
        msg("b", "a", "assistant", "two", 2),
        msg("c", "b", "human", "three", 3),
    ]
    r = parse_claude(conv, "c.json")  # a single conversation object
    assert [t.text for t in r.conversations[0].turns] == ["one", "two", "three"]
    assert "cycle" in str(r.issues[0])
    # the wrapped form {"conversations": [...]} and a missing uuid
    del conv["uuid"]
    r = parse_claude({"conversations": [conv]}, "c.json")
    assert r.conversations[0].external_id.startswith("sha1:") and "has no uuid" in str(r.issues[-1])
    assert parse_iso("2024-05-01T10:00:00") == parse_iso("2024-05-01T10:00:00Z")  # no zone: UTC
    assert parse_iso("yesterday") is None and parse_iso(None) is None


def test_claude_wrong_schema_is_fatal(tmp_path):
    p = tmp_path / "data.json"
    p.write_text(json.dumps([{"uuid": "u", "messages": []}]), encoding="utf-8")
    with pytest.raises(ImportFatalError, match="not a Claude export: no conversation has a 'chat_messages'"):
        load(p, "claude")
    with pytest.raises(ImportFatalError, match="a Claude export"):
        load(p)


# -- LoCoMo ----------------------------------------------------------------------------
def _sample(**conv):
    base = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"},
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Look at this.",
                "blip_caption": "a photo of a cat",
                "img_url": ["http://x/cat.jpg"],
            },
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Cute."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "Back again."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Welcome."},
            {"speaker": "Bob", "dia_id": "D2:3", "text": "Thanks."},
        ],
        "session_3_date_time": "9:00 am on 1 July, 2023",
    }
    base.update(conv)
    return {"sample_id": "s-1", "conversation": base, "qa": []}


def test_locomo_date_parsing():
    assert parse_locomo_datetime("1:56 pm on 8 May, 2023") == 1683554160.0  # 2023-05-08 13:56 UTC
    assert parse_locomo_datetime("12:09 am on 13 September, 2023") == 1694563740.0
    assert parse_locomo_datetime("yesterday") is None


def test_locomo_roles_times_captions_and_pages():
    r = parse_locomo([_sample()])
    conv = r.conversations[0]
    assert conv.external_id == "s-1" and conv.source == "locomo"
    assert [t.role for t in conv.turns] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert conv.turns[0].text == "Ann: Hi Bob!"
    assert conv.turns[1].text == "Bob: Look at this. [shares a photo: a photo of a cat]"
    t0 = 1683554160.0
    assert [t.timestamp for t in conv.turns[:3]] == [t0, t0 + 10, t0 + 20]
    assert conv.turns[3].timestamp == parse_locomo_datetime("10:37 am on 27 June, 2023")
    assert r.issues == []  # session_3_date_time without session_3 is not an error
    plans = plan_pages(conv.turns)
    ids = [[conv.turns[i].turn_id for i in p.indices] for p in plans]
    # pages never span sessions: D1:3 ends session 1 alone, D2:1 opens session 2 alone
    assert ids == [["D1:1", "D1:2"], ["D1:3"], ["D2:1"], ["D2:2", "D2:3"]]


def test_locomo_malformed_turns_are_skipped_with_positions():
    s = _sample()
    s["conversation"]["session_2"][1] = {"speaker": "Carol", "dia_id": "D2:2", "text": "?"}
    s["conversation"]["session_2"].append("junk")
    s["conversation"]["session_1_date_time"] = "sometime"
    r = parse_locomo([s, {"no": "conversation"}], "dev.json")
    msgs = [str(i) for i in r.issues]
    assert (
        "dev.json: sample 1 (s-1), session_2, turn D2:2: speaker 'Carol' is neither 'Ann' nor 'Bob' — skipped" in msgs
    )
    assert any("session_2, turn 4: is not an object" in m for m in msgs)
    assert any("session_1_date_time" in m and "estimated" in m for m in msgs)
    assert any(m.startswith("dev.json: sample 2: has no 'conversation'") for m in msgs)
    # the unreadable first date is estimated from the next session
    conv = r.conversations[0]
    assert conv.turns[0].timestamp == parse_locomo_datetime("10:37 am on 27 June, 2023") - 86400


def test_locomo_wrong_schema_is_fatal():
    with pytest.raises(ImportFatalError, match="not LoCoMo"):
        parse_locomo([{"qa": []}])


def test_locomo_dev_split_parses(locomo_path):
    r = load(locomo_path)
    assert r.format == "locomo"
    assert [c.external_id for c in r.conversations] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    assert sum(c.n_turns for c in r.conversations) == 2760
    assert r.issues == []
    # turns stay in order within every conversation
    for c in r.conversations:
        assert all(a.timestamp < b.timestamp for a, b in zip(c.turns, c.turns[1:]) if a.session == b.session)


# -- text ------------------------------------------------------------------------------
def test_markdown_transcript():
    r = load(FIXTURES / "transcript.md")
    conv = r.conversations[0]
    assert r.format == "text" and conv.title == "Planning the garden"
    assert [t.role for t in conv.turns] == ["user", "assistant"] * 3
    assert conv.turns[0].text == "I want to plant tomatoes this spring.\nWhen should I start the seeds?"
    assert "User: this line is inside a code fence" in conv.turns[1].text  # not a new message
    assert conv.turns[4].text == "And peppers?"
    assert conv.turns[5].text == "Peppers need even more heat than tomatoes."  # System: line skipped
    assert [str(i) for i in r.issues] == [
        "transcript.md: lines 1-4: 1 line(s) of text before the first speaker line — skipped"
    ]
    ts = [t.timestamp for t in conv.turns]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # re-reading the same file gives the same identity (resume key)
    assert load(FIXTURES / "transcript.md").conversations[0].external_id == conv.external_id


def test_plain_transcript_with_times_and_empty_message(tmp_path):
    p = tmp_path / "chat.txt"
    p.write_text(
        "[2024-03-01 14:05] User: first\nline two\n[2024-03-01 14:06] Assistant:\nUser: again\nASSISTANT: reply\n",
        encoding="utf-8",
    )
    r = load(p)
    conv = r.conversations[0]
    assert conv.title == "chat"
    assert [t.text for t in conv.turns] == ["first\nline two", "again", "reply"]
    assert conv.turns[0].timestamp == 1709301900.0
    assert conv.turns[1].timestamp == 1709301901.0
    assert [str(i) for i in r.issues] == ["chat.txt: line 3: empty assistant message — skipped"]


def test_text_without_speakers_is_fatal(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\nno speakers here\n", encoding="utf-8")
    with pytest.raises(ImportFatalError, match="no 'User:' or 'Assistant:'"):
        load(p)


# -- fatal input problems ----------------------------------------------------------------
def test_truncated_json_is_fatal_with_position(tmp_path):
    full = (FIXTURES / "chatgpt_conversations.json").read_text(encoding="utf-8")
    p = tmp_path / "conversations.json"
    p.write_text(full[: len(full) // 2], encoding="utf-8")
    with pytest.raises(ImportFatalError) as exc:
        load(p)
    msg = str(exc.value)
    assert msg.startswith("conversations.json: line ") and "invalid JSON" in msg and "truncated" in msg
    for cut in (100, 2000, len(full) - 3):
        p.write_text(full[:cut], encoding="utf-8")
        with pytest.raises(ImportFatalError, match="truncated"):
            load(p)


def test_wrong_schema_json_is_fatal(tmp_path):
    p = tmp_path / "data.json"
    p.write_text(json.dumps({"users": [1, 2]}), encoding="utf-8")
    with pytest.raises(ImportFatalError, match="unrecognised JSON"):
        load(p)
    with pytest.raises(ImportFatalError, match="not a ChatGPT export"):
        load(p, "chatgpt")


def test_binary_file_is_fatal(tmp_path):
    p = tmp_path / "conversations.json"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(ImportFatalError, match="binary file"):
        load(p)


def test_invalid_utf8_is_fatal_with_position(tmp_path):
    p = tmp_path / "chat.txt"
    p.write_bytes(b"User: hello\nAssistant: caf\xe9 au lait\n")
    with pytest.raises(ImportFatalError) as exc:
        load(p)
    assert "chat.txt: line 2, column 15" in str(exc.value) and "invalid UTF-8" in str(exc.value)


def test_empty_and_missing_files_are_fatal(tmp_path):
    (tmp_path / "e.json").write_text("  \n", encoding="utf-8")
    with pytest.raises(ImportFatalError, match="empty"):
        load(tmp_path / "e.json")
    with pytest.raises(ImportFatalError, match="no such file"):
        load(tmp_path / "missing.json")


def test_utf8_bom_and_zip_export(tmp_path):
    import zipfile

    raw = (FIXTURES / "chatgpt_conversations.json").read_bytes()
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + raw)
    assert len(load(tmp_path / "bom.json").conversations) == 3
    with zipfile.ZipFile(tmp_path / "export.zip", "w") as zf:
        zf.writestr("conversations.json", raw)
        zf.writestr("chat.html", "<html></html>")
    r = load(tmp_path / "export.zip")
    assert r.format == "chatgpt" and len(r.conversations) == 3
    # Claude's export zip holds conversations.json beside users.json and projects.json
    with zipfile.ZipFile(tmp_path / "claude.zip", "w") as zf:
        zf.writestr("users.json", "[]")
        zf.writestr("conversations.json", (FIXTURES / "claude_conversations.json").read_bytes())
        zf.writestr("projects.json", "[]")
    r = load(tmp_path / "claude.zip")
    assert r.format == "claude" and len(r.conversations) == 3


# -- pages -------------------------------------------------------------------------------
def test_huge_message_is_capped_for_the_page_only():
    text, cut = cap_text("word " * 2_000_000)
    assert cut and len(text) < MAX_SIDE_CHARS + 100 and "10,000,000 characters" in text
    r = parse_text("User: " + "x" * 5_000_000 + "\nAssistant: ok\n")
    turns = r.conversations[0].turns
    assert len(turns[0].text) == 5_000_000  # the message keeps everything
    items, capped = page_items(turns, [1, 2], plan_pages(turns), source="text")
    assert capped == [0] and items[0]["meta"]["truncated"] is True
    assert len(items[0]["user_text"]) < MAX_SIDE_CHARS + 100
    assert items[0]["meta"]["turn_ids"] == ["L1", "L2"] and items[0]["meta"]["message_ids"] == [1, 2]
    assert items[0]["meta"]["user_turns"] == 1  # the first of the turn ids are the user side's
    assert items[0]["user_message_id"] == 1 and items[0]["assistant_message_id"] == 2


def test_page_meta_says_which_turns_are_the_user_side():
    r = parse_text("User: one\nUser: two\nAssistant: three\nAssistant: four\nUser: five\n")
    turns = r.conversations[0].turns
    items, _ = page_items(turns, list(range(1, len(turns) + 1)), plan_pages(turns), source="text")
    assert [(it["meta"]["turn_ids"], it["meta"]["user_turns"]) for it in items] == [
        (["L1", "L2", "L3", "L4"], 2),
        (["L5"], 1),
    ]


# -- progress bar ----------------------------------------------------------------------------
def test_progress_bar_on_a_pipe_prints_tenths():
    import io

    from app.importers.progress import ProgressBar

    buf = io.StringIO()
    bar = ProgressBar(100, label="ingest", unit="turns", stream=buf)
    for _ in range(100):
        bar.update(1)
    bar.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 11  # 0%..100% in tenths, no repeated final line
    assert lines[-1].startswith("ingest |" + "█" * 30 + "| 100/100 turns 100.0%")
    quiet = io.StringIO()
    bar = ProgressBar(5, stream=quiet, enabled=False)
    bar.update(5)
    bar.close()
    assert quiet.getvalue() == ""


def test_format_detection(tmp_path):
    p = tmp_path / "chat"  # no suffix, starts with '[' but is a transcript
    p.write_text("[2024-03-01 14:05] User: hi\n[2024-03-01 14:06] Assistant: hello\n", encoding="utf-8")
    assert load(p).format == "text"
    q = tmp_path / "export.txt"  # a .txt holding a ChatGPT export
    q.write_bytes((FIXTURES / "chatgpt_conversations.json").read_bytes())
    assert load(q).format == "chatgpt"
    with pytest.raises(ImportFatalError, match="unknown format"):
        load(q, "csv")
    e = tmp_path / "empty.json"
    e.write_text("[]", encoding="utf-8")
    with pytest.raises(ImportFatalError, match="nothing to import"):
        load(e)
