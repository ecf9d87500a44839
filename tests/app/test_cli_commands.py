"""The CLI mirrors the library: ask, search, memory list/show/pin/forget/pause/wipe (real models, real store)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


def mnemo(dirs, *args, input_text=None, check=True):
    env = dict(
        os.environ, MNEMO_DATA_DIR=str(dirs["data"]), MNEMO_CONFIG_DIR=str(dirs["config"]), QT_QPA_PLATFORM="offscreen"
    )
    out = subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, input=input_text, timeout=300
    )
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture
def filled(mnemo_dirs):
    settings = {"chat": {"max_tokens": 16}, "memory": {"stm_capacity": 2}}
    mnemo_dirs["config"].mkdir(parents=True, exist_ok=True)
    (mnemo_dirs["config"] / "settings.json").write_text(json.dumps(settings))
    for text in [
        "My cat Miso is afraid of thunderstorms.",
        "I bake sourdough bread on Sundays.",
        "I am learning Portuguese for a trip to Porto.",
    ]:
        result = json.loads(mnemo(mnemo_dirs, "ask", text, "--json").stdout)
        assert result["status"] == "complete"
    return mnemo_dirs


def test_search_json_finds_the_page(filled):
    trace = json.loads(mnemo(filled, "search", "what is my cat afraid of", "--json").stdout)
    texts = [p["user_text"] for p in trace["pages"]]
    assert any("Miso" in t for t in texts)
    assert all("reason" in p and "score" in p for p in trace["pages"])
    # the pages' turns ranked one by one: every recalled page's sides are there, best first
    assert {u["page_id"] for u in trace["sides"]} == {p["page_id"] for p in trace["pages"]}
    assert [u["score"] for u in trace["sides"]] == sorted((u["score"] for u in trace["sides"]), reverse=True)
    text = mnemo(filled, "search", "what is my cat afraid of").stdout
    assert re.search(r"#1 (User|Assistant): ", text) and "place among the recalled turns" in text


def test_memory_list_pin_forget_wipe(filled):
    pages = json.loads(mnemo(filled, "memory", "list", "page", "--json").stdout)
    assert len(pages) == 3
    cat = next(p for p in pages if "Miso" in p["user_text"])
    every = json.loads(mnemo(filled, "memory", "events", "--json").stdout)
    kind = every[0]["kind"]
    only = json.loads(mnemo(filled, "memory", "events", "--kind", kind, "--json").stdout)
    assert only and {e["kind"] for e in only} == {kind}
    assert len(only) == sum(e["kind"] == kind for e in every)
    assert mnemo(filled, "memory", "pin", "page", str(cat["id"])).stdout.strip() == f"Page {cat['id']} pinned."
    shown = json.loads(mnemo(filled, "memory", "show", "page", str(cat["id"]), "--json").stdout)
    assert shown["pinned"] is True
    assert mnemo(filled, "memory", "forget", "page", str(cat["id"])).stdout.strip() == f"Page {cat['id']} forgotten."
    trace = json.loads(mnemo(filled, "search", "what is my cat afraid of", "--json").stdout)
    assert all("Miso" not in p["user_text"] for p in trace["pages"])
    events = json.loads(mnemo(filled, "memory", "events", "--json").stdout)
    assert any(e["kind"].startswith("page_forgotten") or "forg" in e["kind"] for e in events)
    newest = json.loads(mnemo(filled, "memory", "events", "--limit", "1", "--json").stdout)
    assert len(newest) == 1 and newest[0]["id"] == max(e["id"] for e in events)  # newest by default
    refused = mnemo(filled, "memory", "wipe", check=False)
    assert refused.returncode != 0 and "--yes" in refused.stderr
    mnemo(filled, "memory", "wipe", "--yes")
    stats = json.loads(mnemo(filled, "memory", "stats", "--json").stdout)
    assert stats["pages_total"] == 0
    assert stats["conversations"] == 3  # conversations stay


def test_pause_stops_memory_writes(filled):
    before = json.loads(mnemo(filled, "memory", "stats", "--json").stdout)["pages_total"]
    mnemo(filled, "memory", "pause", "on")
    mnemo(filled, "ask", "Remember my bike is red.")
    assert json.loads(mnemo(filled, "memory", "stats", "--json").stdout)["pages_total"] == before
    mnemo(filled, "memory", "pause", "off")
    mnemo(filled, "ask", "Remember my bike is blue.")
    assert json.loads(mnemo(filled, "memory", "stats", "--json").stdout)["pages_total"] == before + 1


def test_chat_repl(filled):
    out = mnemo(
        filled,
        "chat",
        input_text="Hello!\n/memory\n/remember I keep bees on my roof\n/remember\n"
        "Remember that my dentist is Dr Okafor.\n/forget\nno\n/forget\nforget\n"
        "/forget\n/new\n/quit\n",
    )
    assert re.search(r"Remembered as fact \d+: I keep bees on my roof", out.stdout)
    assert re.search(r"\[remembered as fact \d+: my dentist is Dr Okafor\]", out.stdout)
    # /forget asks, then takes the chat's two pages and the fact its message asked to remember
    assert "Forget 2 pages and 1 fact it asked to remember? Type 'forget': nothing forgotten" in out.stdout
    assert "forgot 2 pages and 1 fact it asked to remember; what you say from now on is remembered again" in out.stdout
    assert "memory holds nothing from this chat" in out.stdout
    facts = json.loads(mnemo(filled, "memory", "list", "knowledge", "--json").stdout)
    assert "I keep bees on my roof" in [k["text"] for k in facts]  # /remember is not this chat's
    assert not any("Okafor" in k["text"] for k in facts)
    assert "usage: /remember TEXT" in out.stdout
    assert "mnemo> " in out.stdout
    assert "pages_total" in out.stdout
    assert "conversation" in out.stdout
    # "Forget that …" takes the fact /remember kept
    out = mnemo(filled, "ask", "Forget that I keep bees on my roof.")
    assert "[forgot 1 fact: “I keep bees on my roof”]" in out.stdout
    facts = json.loads(mnemo(filled, "memory", "list", "knowledge", "--json").stdout)
    assert not any("bees" in k["text"] for k in facts)


def test_memory_add_fact_and_trait(mnemo_dirs):
    """`mnemo memory add`: kept at once, recalled for a question; repeats confirm; a pinned trait holds."""
    out = mnemo(mnemo_dirs, "memory", "add", "fact", "I", "am", "allergic", "to", "peanuts.", "--pin").stdout
    assert out.strip() == "Remembered as fact 1: I am allergic to peanuts."
    again = json.loads(mnemo(mnemo_dirs, "memory", "add", "fact", "I am allergic to peanuts", "--json").stdout)
    assert again == {
        "kind": "knowledge",
        "id": 1,
        "text": "I am allergic to peanuts.",
        "version": 1,  # a confirmation counts, it is no new version (issue 31)
        "outcome": "confirmed",
        "before": None,
    }
    trace = json.loads(mnemo(mnemo_dirs, "search", "Can I eat satay with peanut sauce?", "--json").stdout)
    assert [k["text"] for k in trace["knowledge"]] == ["I am allergic to peanuts."]
    shown = json.loads(mnemo(mnemo_dirs, "memory", "show", "knowledge", "1", "--json").stdout)
    assert shown["pinned"] and shown["versions"][-1]["reason"].startswith("confirmed by the user")
    assert (
        "Remembered as trait 1: occupation: nurse"
        in mnemo(mnemo_dirs, "memory", "add", "trait", "occupation", "nurse", "--pin").stdout
    )
    kept = mnemo(mnemo_dirs, "memory", "add", "trait", "occupation", "teacher").stdout
    assert kept.strip() == "Trait 1 is pinned and was not changed: occupation: nurse"
    mnemo(mnemo_dirs, "memory", "add", "fact", "The assistant promised a bread recipe.", "--about", "assistant")
    listed = mnemo(mnemo_dirs, "memory", "list", "knowledge").stdout
    assert "(assistant) The assistant promised a bread recipe." in listed
    bad = mnemo(mnemo_dirs, "memory", "add", "trait", "likes", check=False)
    assert bad.returncode == 2 and "a trait needs a dimension and a value" in bad.stderr
    empty = mnemo(mnemo_dirs, "memory", "add", "fact", " ", check=False)
    assert empty.returncode == 2 and "nothing remembered" in empty.stderr


def test_memory_export_json_and_markdown(filled, tmp_path):
    out = tmp_path / "export" / "memory.json"
    result = mnemo(filled, "memory", "export", str(out))
    assert "exported 3 pages" in result.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == "mnemo-memory-export" and len(doc["pages"]) == 3
    assert any("Miso" in p["user_text"] for p in doc["pages"])
    md = tmp_path / "memory.md"
    mnemo(filled, "memory", "export", str(md))
    assert md.read_text(encoding="utf-8").startswith("# What the assistant remembers")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    bad = mnemo(filled, "memory", "export", str(blocker / "memory.json"), check=False)
    assert bad.returncode != 0 and "could not write" in bad.stderr and "Traceback" not in bad.stderr


def test_ask_after_an_embedding_model_change_re_embeds_with_a_progress_bar(mnemo_dirs, embedder):
    from memory_core import MemoryStore

    mnemo_dirs["data"].mkdir(parents=True, exist_ok=True)
    mnemo_dirs["config"].mkdir(parents=True, exist_ok=True)
    (mnemo_dirs["config"] / "settings.json").write_text(json.dumps({"chat": {"max_tokens": 4}}))
    old = MemoryStore.open(
        mnemo_dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id="an-older-model", dim=embedder.dim
    )
    old.intake.add_pages(
        old.conversations.create_conversation(),
        [{"user_text": f"note {i}", "assistant_text": "ok"} for i in range(300)],
    )
    old.close()
    out = mnemo(mnemo_dirs, "ask", "Hello")
    assert "re-embedding memory |" in out.stderr and "300/300 pages" in out.stderr
    stats = mnemo(mnemo_dirs, "memory", "stats", "--json")
    assert json.loads(stats.stdout)["embed_model_id"] == embedder.model_id


def test_an_older_memory_is_embedded_again_with_its_words_and_a_progress_bar(mnemo_dirs, embedder):
    """A memory stored without token vectors (before the word-by-word match, and before pages were read in
    context) is embedded again, word rows and all, by the background job at the next command, with a progress
    bar; `mnemo search` then shows the match in each page's reason."""
    from memory_core import MemoryStore

    mnemo_dirs["data"].mkdir(parents=True, exist_ok=True)
    mnemo_dirs["config"].mkdir(parents=True, exist_ok=True)
    (mnemo_dirs["config"] / "settings.json").write_text(json.dumps({"chat": {"max_tokens": 4}}))
    old = MemoryStore.open(
        mnemo_dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )
    old.intake.add_pages(
        old.conversations.create_conversation(),
        [{"user_text": f"note {i}: the basil needs sun", "assistant_text": "ok"} for i in range(300)],
    )
    old.close()
    before = json.loads(mnemo(mnemo_dirs, "search", "Does the basil need sun?", "--json").stdout)
    assert before["pages"] and not any("word by word" in p["reason"] for p in before["pages"])
    out = mnemo(mnemo_dirs, "ask", "Hello")
    assert "re-embedding memory |" in out.stderr and "300/300 pages" in out.stderr
    after = json.loads(mnemo(mnemo_dirs, "search", "Does the basil need sun?", "--json").stdout)
    assert after["pages"] and all("word by word" in p["reason"] for p in after["pages"])


def test_search_says_which_words_are_on_most_pages(mnemo_dirs, tmp_path):
    """An imported dialogue between two named people has both names on every page; `mnemo search` says
    the name a query asks about was weighed half in its meaning (MemoryParams.ranking.common_word_mix)."""
    said = [
        "I baked a lemon tart for the fair.",
        "My brother moved to Oslo.",
        "We adopted a grey cat.",
        "I run five kilometres before work.",
        "The roof leaked in the storm.",
        "I read a novel about a lighthouse.",
    ]
    turns = []
    for i in range(24):
        turns += [
            {"speaker": "Ana", "dia_id": f"D1:{2 * i + 1}", "text": said[i % 6]},
            {"speaker": "Ben", "dia_id": f"D1:{2 * i + 2}", "text": f"Nice, tell me more ({i})."},
        ]
    sample = {
        "sample_id": "t-1",
        "qa": [],
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
    }
    path = tmp_path / "dialogue.json"
    path.write_text(json.dumps([sample]))
    mnemo(mnemo_dirs, "ingest", str(path), "--no-progress")
    out = mnemo(mnemo_dirs, "search", "What did Ana bake?").stdout
    assert "(on most pages, so half left out of the query's meaning: ana)" in out
    assert json.loads(mnemo(mnemo_dirs, "search", "What did Ana bake?", "--json").stdout)["common_words"] == ["ana"]
    assert json.loads(mnemo(mnemo_dirs, "search", "Where did her brother move?", "--json").stdout)["common_words"] == []
