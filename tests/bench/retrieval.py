"""Retrieval / add-page benchmark of memory_core: `python -m tests.bench.retrieval [--sizes 1000,10000,100000]`.

Fills one store incrementally to each size (the first 1,000 pages embedded for real, later pages
carry clustered random unit vectors and random 4-bit token rows, as the issue allows), then measures:
- retrieve() latency p50/p95 at each size, including the real embedding of the query;
- the median time of add_page() without an LLM, both including the real page embedding and with a
  precomputed embedding (the store's own cost: STM insert, FIFO move, segmenting, eviction).
Prints one JSON object, and per size a line of per-stage medians with the ratio of the retrieval p50 to
the query-embedding p50 (the same query embedded on its own, beside each retrieval) and the dense recall (the page matrix's top-k against an exact scan) (the target as a ratio that holds on any machine: <= 2.5 at 100k pages).
Targets on a 2-core machine: p95 <= 50 ms at 100k pages, add <= 20 ms. Filling 100k pages takes a
while: `--cache` keeps the store in /tmp (CACHE_DB) and a later run fills it up only as far as needed.
`--bulk` fills with tests.bench.million_pages instead (the same kind of pages written straight into the
store's tables: minutes for a million, where add_pages takes an hour); `python -m tests.bench.million_pages`
is `--bulk --sizes 1000000`.
Wall-clock figures depend on what else runs: the JSON also gives process CPU time per call and
the load average, so a run on a busy machine can be read for what it is.
"""

from __future__ import annotations

import os

# One BLAS thread: `X @ q` is memory-bound, and a multi-threaded OpenBLAS that spins on a busy
# 2-core machine (next to ONNX Runtime's own threads) is several times slower. The app should set
# the same before numpy is imported; an explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_core import MemoryParams, MemoryStore, RetrievalBudget
from memory_core.pages import token_match
from memory_core.storage.vecindex import MatrixCache

TOPICS = [
    "hiking mountains trail boots summit",
    "cooking pasta sauce garlic tomato",
    "guitar chords practice band song",
    "marathon running training miles pace",
    "garden tomatoes basil soil compost",
    "python code bug test deploy",
    "dog puppy walk park leash",
    "cat kitten litter toy nap",
    "travel flight hotel passport luggage",
    "movie cinema actor director sequel",
    "book novel chapter author library",
    "coffee espresso beans grinder cafe",
    "work meeting deadline report manager",
    "family sister brother parents dinner",
    "school exam homework teacher grade",
    "money budget savings rent salary",
    "health doctor appointment medicine sleep",
    "car engine tires repair garage",
    "painting canvas colors brush gallery",
    "chess opening tactics tournament rating",
    "photography camera lens light",
    "baking bread sourdough oven flour",
    "swimming pool laps goggles coach",
    "birthday party cake gifts friends",
    "weather rain snow forecast umbrella",
    "music concert tickets festival stage",
    "yoga stretching breathing mat class",
    "video games console level boss",
    "wedding dress venue guests ceremony",
    "moving apartment boxes lease neighbors",
]
QUERIES = [
    "What did I say about my marathon training?",
    "Which pasta sauce recipe did I like?",
    "When is my doctor appointment?",
    "What is my dog's name?",
    "Where did I travel last summer?",
    "What book was I reading?",
    "How is my sourdough bread going?",
    "What chess opening do I play?",
    "Tell me about my sister's wedding",
    "What guitar songs was I practicing?",
    "How much rent do I pay?",
    "What camera lens did I buy?",
    "Did I fix the car engine?",
    "What games am I playing?",
    "How was the concert?",
    "What did the manager say about the report?",
    "When is the birthday party?",
    "What did I plant in the garden?",
    "How is my yoga class?",
    "What did I think of the movie sequel?",
]
FILLER = (
    "today yesterday really think maybe later great idea plan weekend morning evening friend "
    "new old little big favorite nice busy tired happy excited"
).split()


def page_texts(rng: random.Random, i: int) -> tuple[str, str]:
    topic = TOPICS[i % len(TOPICS)].split()
    words = rng.sample(topic, 3) + rng.sample(FILLER, 4) + [f"item{rng.randrange(20000)}"]
    rng.shuffle(words)
    u = "I " + " ".join(words[:5]) + "."
    a = "That sounds " + " ".join(words[5:]) + ", tell me more."
    return u, a


def clustered_vectors(rng: np.random.Generator, n: int, dim: int, centers: np.ndarray, start: int) -> np.ndarray:
    idx = np.arange(start, start + n) % len(centers)
    v = centers[idx] + 0.9 * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


CACHE_DB = Path(tempfile.gettempdir()) / "mnemo-bench-retrieval.db"
RATIO_TARGET = 2.5  # retrieval p50 / query-embedding p50 at 100k pages


def open_store(path, emb) -> MemoryStore:
    """A store on `path` with the bundled embedder `emb` and its token vectors, as the app opens one."""
    return MemoryStore.open(
        path,
        emb.embed,
        embed_model_id=emb.model_id,
        dim=emb.dim,
        params=MemoryParams(),
        embed_tokens=emb.embed_with_tokens,
    )


def percentile(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def dense_recall(cache: MatrixCache, vecs: np.ndarray, k: int, conn=None) -> tuple[float, float]:
    """Mean and least share of the exact top-k pages (every row in use scanned) that the page matrix's
    search returns for these query vectors: what the sign-sketch prefilter above PREFILTER_MIN_ROWS costs
    (1.0 below it). A cheaper prefilter must not lower it. A compact matrix (int8 rows) is judged against
    the float32 vectors the database holds (`conn`), read once for all the queries."""
    shares = []
    truth = exact_top(conn, vecs, k) if cache.compact and conn is not None else None
    with cache.lock:
        live = cache.ids[: cache.n] >= 0
        for i, q in enumerate(vecs):
            got, _ = cache.search(q, k)
            if truth is not None:
                exact = truth[i]
            else:
                scores = np.where(live, cache.exact_scores(q), -np.inf)
                exact = cache.ids[: cache.n][np.argsort(-scores, kind="stable")[:k]]
            shares.append(len(set(got.tolist()) & set(exact.tolist())) / max(1, len(exact)))
    return float(np.mean(shares)), float(np.min(shares))


def exact_top(conn, vecs: np.ndarray, k: int, chunk: int = 50_000) -> list[np.ndarray]:
    """The ids of each query's top-k pages by cosine to the float32 vectors of `page_vec`, in one pass."""
    best_ids = [np.zeros(0, dtype=np.int64) for _ in vecs]
    best = [np.zeros(0, dtype=np.float32) for _ in vecs]
    ids: list[int] = []
    blobs: list[bytes] = []

    def flush() -> None:
        if not ids:
            return
        m = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), vecs.shape[1])
        scores = m @ vecs.T  # (rows, queries)
        arr = np.asarray(ids, dtype=np.int64)
        for j in range(len(vecs)):
            cand_ids = np.concatenate([best_ids[j], arr])
            cand = np.concatenate([best[j], scores[:, j]])
            top = np.argsort(-cand, kind="stable")[:k]
            best_ids[j], best[j] = cand_ids[top], cand[top]
        ids.clear()
        blobs.clear()

    for pid, blob in conn.execute("SELECT page_id, embedding FROM page_vec"):
        ids.append(pid)
        blobs.append(blob)
        if len(ids) >= chunk:
            flush()
    flush()
    return best_ids


def resident_mb() -> tuple[float, float]:
    """The process's resident memory now and at its peak, in MB (Linux's /proc; the peak alone elsewhere)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    now = peak
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            now = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        pass
    return round(now, 1), round(peak, 1)


def stage_line(size: int, row: dict) -> str:
    """One line of per-stage medians (ms) and the p50 / embedding-p50 ratio, for the eye."""
    parts = " ".join(f"{k} {v:.1f}" for k, v in row["retrieve_parts_ms_p50"].items() if k != "total")
    return (
        f"{size:>7} pages: p50 {row['retrieve_ms_p50']:.1f} ms, p95 {row['retrieve_ms_p95']:.1f} ms, "
        f"{row['ratio_p50_to_embed_p50']:.2f} x embed p50 (target {RATIO_TARGET}), "
        f"dense recall {row['dense_recall_mean']:.3f} (least {row['dense_recall_min']:.2f}), "
        f"top-20 {row['dense_recall_top20_mean']:.3f} (page-like queries {row['dense_recall_top20_pagelike_mean']:.3f}), "
        f"vectors {row['vector_memory_mb']} MB, resident {row['rss_mb']:.0f} MB "
        f"(+{row['rss_added_by_first_retrieve_mb']:.0f} at the first retrieval) | {parts}"
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--adds", type=int, default=60)
    ap.add_argument("--real", type=int, default=1000, help="pages embedded for real (the rest: random vectors)")
    ap.add_argument("--db", default=None, help="database file (default: a temp dir, deleted afterwards)")
    ap.add_argument(
        "--embed-threads", type=int, default=0, help="ONNX Runtime threads of the embedder (0: its default)"
    )
    ap.add_argument("--cache", action="store_true", help=f"keep the filled store as {CACHE_DB} and reuse it")
    ap.add_argument(
        "--bulk",
        action="store_true",
        help="fill with tests.bench.million_pages.bulk_fill: its pages written straight into the store's tables "
        "(minutes for a million pages, where add_pages takes an hour); sizes in multiples of 50",
    )
    args = ap.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    if args.bulk and any(s % 50 for s in sizes):
        ap.error("--bulk fills whole chats of 50 pages: give sizes in multiples of 50")

    from models.embedder import OnnxEmbedder  # the benchmark (not memory_core) wires the real model in

    emb = OnnxEmbedder(threads=args.embed_threads)
    tmp = tempfile.TemporaryDirectory(prefix="mnemo-bench-")
    db = Path(args.db) if args.db else CACHE_DB if args.cache else Path(tmp.name) / "bench.db"
    store = open_store(db, emb)
    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    centers = nrng.standard_normal((3000, emb.dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    result: dict = {"machine_cpus": os.cpu_count(), "embed_model": emb.model_id, "sizes": {}}
    result["openblas_num_threads"] = os.environ.get("OPENBLAS_NUM_THREADS")
    conv = None
    n = store.pages.count_pages()  # an existing --db is filled up, not refilled
    t_fill = time.perf_counter()
    for size in sizes:
        if args.bulk and n < size:
            from tests.bench.million_pages import fill_in_child

            store.close()  # the fill runs in a process of its own (its memory is not the retrieval's)
            fill = fill_in_child(str(db), size, args.real, args.embed_threads)
            result.setdefault("bulk_fill", {})[str(size)] = fill
            store = open_store(db, emb)
            n = store.pages.count_pages()
            conv = store.db.scalar("SELECT max(id) FROM conversation")
        while n < size:
            if n % 50 == 0 or conv is None:
                conv = store.conversations.create_conversation(f"bench {n // 50}")
            batch = min(500, size - n, 50 - n % 50)
            texts = [page_texts(rng, n + k) for k in range(batch)]
            items = [
                {"user_text": u, "assistant_text": a, "timestamp": 1.6e9 + 60 * (n + k)}
                for k, (u, a) in enumerate(texts)
            ]
            if n >= args.real:
                vecs = clustered_vectors(nrng, batch, emb.dim, centers, n)
                for it, v in zip(items, vecs):
                    it["embedding"] = v
            store.intake.add_pages(conv, items)
            n += batch
        fill_s = time.perf_counter() - t_fill
        # pages with random vectors get random token rows and side vectors too (the word-by-word match reads
        # a row per candidate page, the ranking of sides one per recalled page, so their cost is measured at
        # every size): 24 content tokens, a LoCoMo page's mean
        with store.transaction():
            for (pid,) in store.db.rows("SELECT id FROM page WHERE id NOT IN (SELECT page_id FROM page_tok)"):
                store.db.execute(
                    "INSERT INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)",
                    (
                        pid,
                        nrng.integers(17, 256, size=24 * token_match.row_bytes(emb.dim), dtype=np.uint8).tobytes(),
                        nrng.integers(-127, 128, size=2 * emb.dim, dtype=np.int8).tobytes(),
                    ),
                )
            store.db.execute("DELETE FROM job WHERE kind = 'index_tokens'")
        # first retrieve after a (re)open loads the in-memory matrix from SQLite
        store.close()
        store = open_store(db, emb)
        rss_before_load, _ = resident_mb()
        t0 = time.perf_counter()
        store.retrieve("warm up the cache", None, record_visits=False)
        cold_ms = (time.perf_counter() - t0) * 1000
        rss_loaded, _ = resident_mb()
        lat, cpu, parts = [], [], {}
        qs = [QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" ({i})") for i in range(args.queries)]
        alone: list[float] = []
        for q in qs:
            t0, c0 = time.perf_counter(), time.process_time()
            r = store.retrieve(q, conv, RetrievalBudget(pages=10, knowledge=5, traits=20))
            lat.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            for k, v in r.timings_ms.items():
                parts.setdefault(k, []).append(v)
            # the ratio's denominator: the same query embedded on its own, nothing beside it (inside a
            # retrieval the embedding runs beside the keyword search, which may slow it a little)
            t0 = time.perf_counter()
            emb.embed_with_tokens([q])
            alone.append((time.perf_counter() - t0) * 1000)
        result["sizes"][str(size)] = {
            "pages": store.pages.count_pages(),
            "segments_mtm": store.segments.count_segments(tier="mtm"),
            "segments_archive": store.segments.count_segments(tier="archive"),
            "retrieve_ms_p50": round(percentile(lat, 50), 2),
            "retrieve_ms_p95": round(percentile(lat, 95), 2),
            "retrieve_cpu_ms_p50": round(percentile(cpu, 50), 2),
            "retrieve_cpu_ms_p95": round(percentile(cpu, 95), 2),
            "load_average_1min": round(os.getloadavg()[0], 2),
            "first_retrieve_after_open_ms": round(cold_ms, 1),
            "retrieve_parts_ms_p50": {k: round(percentile(v, 50), 2) for k, v in parts.items()},
            "embed_alone_ms_p50": round(percentile(alone, 50), 2),
            "fill_seconds_cumulative": round(fill_s, 1),
            "db_size_mb": round(store.stats()["db_size_bytes"] / 1e6, 1),
        }
        row = result["sizes"][str(size)]
        # the real question texts only (the numbered repeats embed alike)
        k = MemoryParams().ranking.dense_candidates
        qv = emb.embed(QUERIES)
        conn = store.db.conn
        row["dense_recall_mean"], row["dense_recall_min"] = dense_recall(store.retrieval._page_cache, qv, k, conn)
        row["dense_recall_top20_mean"], row["dense_recall_top20_min"] = dense_recall(
            store.retrieval._page_cache, qv, 20, conn
        )
        # ... and for queries like the synthetic pages (new pages on their topics, as tests.bench.vector_scale
        # asks): the real questions look for the `--real` pages, whose directions a prefilter fitted
        # to a matrix of synthetic vectors, may not hold
        like = clustered_vectors(np.random.default_rng(11), 60, emb.dim, centers, 0)
        row["dense_recall_top20_pagelike_mean"], row["dense_recall_top20_pagelike_min"] = dense_recall(
            store.retrieval._page_cache, like, 20, conn
        )
        # what the page vectors take in memory (the matrix, its sign sketch and id map; int8 from COMPACT_FROM_ROWS)
        row["vector_memory_mb"] = round(store.retrieval._page_cache.nbytes() / 2**20, 1)
        row["vector_dtype"] = str(store.retrieval._page_cache.matrix.dtype)
        row["ratio_p50_to_embed_p50"] = round(row["retrieve_ms_p50"] / row["embed_alone_ms_p50"], 2)
        row["rss_mb"], row["peak_rss_mb"] = resident_mb()  # the whole process: embedder, matrix, SQLite cache
        # what loading the page vectors (the matrix, its sketch and id map) added to it
        row["rss_added_by_first_retrieve_mb"] = round(rss_loaded - rss_before_load, 1)
        print(f"size {size}: {json.dumps(row)}", file=sys.stderr, flush=True)
        print(stage_line(size, row), file=sys.stderr, flush=True)
    # add_page without LLM at the largest size, one call per page (the chat agent's path)
    with_embed, store_only, store_cpu = [], [], []
    for i in range(args.adds):
        u, a = page_texts(rng, n + i)
        t0 = time.perf_counter()
        store.intake.add_page(conv, u, a)
        with_embed.append((time.perf_counter() - t0) * 1000)
        v = clustered_vectors(nrng, 1, emb.dim, centers, n + i)[0]
        t0, c0 = time.perf_counter(), time.process_time()
        store.intake.add_page(conv, u + " again", a, embedding=v)
        store_only.append((time.perf_counter() - t0) * 1000)
        store_cpu.append((time.process_time() - c0) * 1000)
    if args.adds > 0:
        result["add_page_ms_median"] = round(statistics.median(with_embed), 2)
        result["add_page_ms_p95"] = round(percentile(with_embed, 95), 2)
        result["add_page_store_only_ms_median"] = round(statistics.median(store_only), 2)
        result["add_page_store_only_cpu_ms_median"] = round(statistics.median(store_cpu), 2)
        result["add_page_at_pages"] = store.pages.count_pages()
    result["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    result["targets"] = {
        "retrieve_ms_p95_at_100k": 50,
        "ratio_p50_to_embed_p50_at_100k": RATIO_TARGET,
        "add_page_ms_median": 20,
    }
    store.close()
    tmp.cleanup()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
