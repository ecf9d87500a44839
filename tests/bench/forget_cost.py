"""Benchmark: what forgetting costs with the purge (memory_core.storage.purge) and without it, at a realistic size.

Builds a memory of --pages pages (LoCoMo turns as text, vectors of 300 real embeddings with a little
noise, so the build needs no hour of embedding) with one message per side, and gives 5,000 replies a
real-sized trace. Then, on two copies of that file, one with the purge and one with it switched off:
forget one page, one fact, one chat's memory (20 pages), and delete one chat (40 messages). Prints JSON.

    python -m tests.bench.forget_cost [--pages 20000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo-dev.json"
PAGES_PER_CHAT = 20


def _turns() -> list[str]:
    out: list[str] = []

    def walk(o):
        if isinstance(o, dict):
            if isinstance(o.get("text"), str):
                out.append(o["text"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads(DATA.read_text()))
    return out


def _build(path: Path, n_pages: int, emb, rng: random.Random) -> dict:
    from memory_core import MemoryStore
    from memory_core.storage.codec import to_json

    turns = _turns()
    base = emb.embed([f"{rng.choice(turns)}\n{rng.choice(turns)}" for _ in range(300)])
    t0 = time.perf_counter()
    s = MemoryStore.open(path, emb.embed, embed_model_id=emb.model_id, dim=emb.dim)
    try:
        for _ in range(max(1, n_pages // PAGES_PER_CHAT)):
            cid = s.conversations.create_conversation()
            with s.transaction():
                sides = []
                for _ in range(PAGES_PER_CHAT):
                    u, a = rng.choice(turns), rng.choice(turns)
                    sides.append(
                        (
                            s.conversations.add_message(cid, "user", u),
                            s.conversations.add_message(cid, "assistant", a),
                            u,
                            a,
                        )
                    )
            items = []
            for um, am, u, a in sides:
                v = base[rng.randrange(len(base))] + np.random.default_rng(rng.randrange(1 << 30)).normal(
                    0, 0.02, emb.dim
                )
                items.append(
                    {
                        "user_text": u,
                        "assistant_text": a,
                        "user_message_id": um,
                        "assistant_message_id": am,
                        "embedding": (v / np.linalg.norm(v)).astype(np.float32),
                    }
                )
            s.intake.add_pages(cid, items)
        for _ in range(300):
            try:
                s.persona.add_knowledge("user", rng.choice(turns))
            except ValueError:  # not a usable fact
                pass
        trace = to_json({"trace": s.retrieve("what did she say about the painting?", None).to_trace()})
        replies = s.db.rows("SELECT id FROM message WHERE role = 'assistant' ORDER BY random() LIMIT 5000")
        with s.transaction():
            for (mid,) in replies:
                s.db.execute("UPDATE message SET meta = ? WHERE id = ?", (trace, mid))
        s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {
            "pages": s.pages.count_pages(),
            "messages": s.db.scalar("SELECT count(*) FROM message"),
            "replies_with_trace": len(replies),
            "trace_bytes": len(trace),
            "file_mb": round(path.stat().st_size / 1e6, 1),
            "build_s": round(time.perf_counter() - t0, 1),
        }
    finally:
        s.close()


def _forgets(path: Path, emb, purge: bool) -> dict:
    from memory_core import MemoryStore
    from memory_core.storage.purge import Purge

    finish = Purge.finish
    s = MemoryStore.open(path, emb.embed, embed_model_id=emb.model_id, dim=emb.dim)
    if not purge:
        Purge.finish = lambda self, f: None  # type: ignore[method-assign]
    out = {}
    try:

        def timed(name, fn):
            t = time.perf_counter()
            fn()
            out[name] = round(time.perf_counter() - t, 3)

        pick = random.Random(1)  # the same items in both copies
        pages = [r[0] for r in s.db.rows("SELECT id FROM page ORDER BY id")]
        facts = [r[0] for r in s.db.rows("SELECT id FROM knowledge ORDER BY id")]
        chats = [r[0] for r in s.db.rows("SELECT id FROM conversation ORDER BY id")]
        timed("forget_one_page_s", lambda: s.curation.forget("page", pick.choice(pages)))
        timed("forget_one_fact_s", lambda: s.curation.forget("knowledge", pick.choice(facts)))
        first, second = pick.sample(chats, 2)
        timed("forget_a_chats_memory_s", lambda: s.curation.forget_conversation(first))
        timed("delete_a_chat_s", lambda: s.conversations.delete_conversation(second))
    finally:
        Purge.finish = finish  # type: ignore[method-assign]
        s.close()
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=20_000)
    args = parser.parse_args(argv)
    if not DATA.is_file():
        raise SystemExit(f"no data file at {DATA} (the LoCoMo dev split lives in ../shared/data/locomo)")
    from models.embedder import OnnxEmbedder

    emb = OnnxEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "built.sqlite3"
        size = _build(built, args.pages, emb, random.Random(3))
        results = {}
        for purge in (False, True):
            copy = Path(tmp) / f"copy-{purge}.sqlite3"
            shutil.copyfile(built, copy)
            results["with_purge" if purge else "without_purge"] = _forgets(copy, emb, purge)
    out = {"benchmark": "forget_cost", **size, **results}
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
