"""Memory export: complete, valid JSON that matches the store; readable Markdown; atomic writes."""

from __future__ import annotations

import json

import pytest

from memory_core.readable_export import FORMAT, export_json, export_memory

from .conftest import mix

TOPICS = "violin marathon sourdough chess kayak orchids telescope pottery salsa origami beekeeping fencing".split()


def _fill(store, n=60):
    cid = store.conversations.create_conversation("exported")
    store.intake.add_pages(
        cid,
        [
            {
                "user_text": f"{TOPICS[i % 12]} {i} — “quotes” 日本語",
                "assistant_text": "",
                "timestamp": 1000.0 + i,
                "embedding": mix(store.dim, i % 12, 50 + i % 3, 0.9),
            }
            for i in range(n)
        ],
    )
    k = store.persona.add_knowledge("user", "Has a cat called Miso")
    store.persona.edit_knowledge(k, "Has a cat called Miso, afraid of storms")
    store.persona.add_trait("interests", "hiking | climbing")
    store.persona.add_knowledge("assistant", "Recommended a book about tea")
    return cid


def test_json_export_matches_the_store(open_store, tmp_path):
    s = open_store(stm_capacity=5, mtm_capacity=4)
    _fill(s)
    seen = []
    out = tmp_path / "memory.json"
    res = export_json(s, out, on_progress=lambda d, t: seen.append((d, t)))
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["format"] == FORMAT and doc["version"] == 1
    assert doc["embedding_model"] == s.embedding.model_id and doc["embedding_dim"] == s.dim
    assert [p["id"] for p in doc["pages"]] == [
        p.id for p in s.pages.list_pages(order_by="id", descending=False, limit=10_000)
    ]
    assert len(doc["pages"]) == s.pages.count_pages() == res.pages == doc["counts"]["pages"] == 60
    assert {p["tier"] for p in doc["pages"]} == {"stm", "mtm", "archive"}
    assert len(doc["segments"]) == s.segments.count_segments() == res.segments
    assert any("日本語" in p["user_text"] and "“quotes”" in p["user_text"] for p in doc["pages"])
    assert [t["value"] for t in doc["traits"]] == ["hiking | climbing"]
    miso = next(k for k in doc["knowledge"] if "Miso" in k["text"])
    assert miso["versions"] and miso["versions"][-1]["text"] == miso["text"]
    assert doc["conversations"][0]["title"] == "exported"
    assert "embedding" not in json.dumps(doc["pages"][0])
    assert seen and seen[-1][0] == seen[-1][1] == len(doc["pages"]) + len(doc["segments"]) + 1 + 2


def test_markdown_export_reads_like_a_document(open_store, tmp_path):
    s = open_store(stm_capacity=5)
    _fill(s)
    out = export_memory(s, tmp_path / "memory.md").path
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# What the assistant remembers")
    assert "### interests" in text and "hiking \\| climbing" in text
    assert "Miso" in text and "Recommended a book about tea" in text
    hottest = s.segments.list_segments(order_by="heat", limit=1)[0]
    assert f"| {hottest.id} | {hottest.tier} |" in text


def test_a_failed_export_leaves_the_old_file_and_no_debris(open_store, tmp_path):
    s = open_store(stm_capacity=5)
    _fill(s)
    out = tmp_path / "memory.json"
    out.write_text("previous export")

    def cancel(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_json(s, out, on_progress=cancel)
    assert out.read_text() == "previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db", "memory.db-shm", "memory.db-wal", "memory.json"]
    with pytest.raises(ValueError):
        export_memory(s, tmp_path / "x.json", fmt="xml")


def test_keyset_paging_walks_every_page_once(open_store):
    s = open_store(stm_capacity=5)
    _fill(s, 130)
    seen, after = [], 0
    while True:
        batch = s.pages.list_pages(order_by="id", descending=False, limit=50, after_id=after)
        seen += [p.id for p in batch]
        if len(batch) < 50:
            break
        after = batch[-1].id
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 130
    segs = s.segments.list_segments(order_by="id", descending=False, limit=1000, after_id=0)
    assert [
        x.id for x in s.segments.list_segments(order_by="id", descending=False, after_id=segs[0].id, limit=1000)
    ] == [x.id for x in segs[1:]]
