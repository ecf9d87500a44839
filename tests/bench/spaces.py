"""Recall across memory spaces: `python -m tests.bench.spaces [--queries 60]`.

One memory of 100k pages (the retrieval benchmark's store, filled first when it is not cached), copied
and split into three spaces of ~33k pages each (whole chats to a space, as the app assigns them). Then,
for the same questions, the retrieval latency p50/p95 of:
- the unsplit memory (the baseline: one 100k-page memory);
- a chat reading all three spaces, which must rank as one list: its top pages are the baseline's;
- a chat reading one space, and one reading two: every page it recalls is of those spaces, and the
  share of the baseline's top pages of those spaces that it finds ("kept") says the filter loses none.
Target (issue "Memory that moves"): p95 across the three spaces no worse than the baseline + 20 %.
Prints one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as tests.bench.retrieval, for the same reason

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_core import MemoryStore, RetrievalBudget
from tests.bench import retrieval as retrieval_bench

SIZE = 100_000
TARGET_P95_RATIO = 1.2
TOP = 10


def _measure(store: MemoryStore, conv: int, queries: list[str], spaces: frozenset[int] | None) -> dict:
    lat: list[float] = []
    tops: list[list[int]] = []
    for q in queries:
        t0 = time.perf_counter()
        r = store.retrieve(q, conv, RetrievalBudget(pages=TOP, knowledge=5, traits=20), spaces=spaces)
        lat.append((time.perf_counter() - t0) * 1000)
        tops.append([h.page.id for h in r.pages])
    return {
        "p50_ms": round(statistics.median(lat), 2),
        "p95_ms": round(float(np.percentile(lat, 95)), 2),
        "tops": tops,
    }


def _split(store: MemoryStore) -> dict[int, int]:
    """Three spaces, whole chats to each (conversation id mod 3); their page counts."""
    with store.transaction():
        for sid, name in ((2, "Work"), (3, "Travel")):
            store.db.execute(
                "INSERT OR IGNORE INTO space(id, name, created_at) VALUES (?, ?, ?)", (sid, name, store.db.clock())
            )
        store.db.execute("UPDATE page SET space_id = 1 + coalesce(conversation_id, 0) % 3")
    return dict(store.db.rows("SELECT space_id, count(*) FROM page GROUP BY space_id"))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args(argv)
    cache = retrieval_bench.CACHE_DB
    if not cache.exists():
        print("filling the retrieval benchmark's 100k-page store first", file=sys.stderr, flush=True)
        retrieval_bench.main(["--sizes", str(SIZE), "--cache", "--queries", "5", "--adds", "1"])

    from models.embedder import OnnxEmbedder  # the benchmark (not memory_core) wires the real model in

    emb = OnnxEmbedder()
    qs = [retrieval_bench.QUERIES[i % len(retrieval_bench.QUERIES)] for i in range(args.queries)]
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-spaces-") as tmp:
        path = Path(tmp) / "spaces.db"
        shutil.copyfile(cache, path)
        store = retrieval_bench.open_store(path, emb)
        try:
            conv = store.conversations.create_conversation("bench spaces")
            store.retrieve("warm up the cache", None, record_visits=False)
            base = _measure(store, conv, qs, None)
            counts = _split(store)
            runs = {
                "all three": frozenset({1, 2, 3}),
                "one (Personal)": frozenset({1}),
                "two (Personal, Work)": frozenset({1, 2}),
            }
            space_of = dict(store.db.rows("SELECT id, space_id FROM page"))
            result: dict = {"pages": sum(counts.values()), "pages_per_space": counts, "baseline": {}, "reads": {}}
            result["baseline"] = {k: v for k, v in base.items() if k != "tops"}
            for name, spaces in runs.items():
                m = _measure(store, conv, qs, spaces)
                foreign = sum(1 for top in m["tops"] for pid in top if space_of.get(pid) not in spaces)
                kept, wanted = 0, 0
                for got, want in zip(m["tops"], base["tops"]):
                    w = [pid for pid in want if space_of.get(pid) in spaces]
                    wanted += len(w)
                    kept += len(set(w) & set(got))
                same = sum(1 for got, want in zip(m["tops"], base["tops"]) if got == want)
                result["reads"][name] = {
                    "p50_ms": m["p50_ms"],
                    "p95_ms": m["p95_ms"],
                    "p95_vs_baseline": round(m["p95_ms"] / base["p95_ms"], 2),
                    "pages_of_other_spaces": foreign,
                    "baseline_top_kept": round(kept / wanted, 3) if wanted else None,
                    "same_top_as_baseline": f"{same}/{len(qs)}",
                }
            result["target_p95_ratio_all_three"] = TARGET_P95_RATIO
        finally:
            store.close()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
