"""The whole retrieval at a million pages, on a store filled in bulk: `python -m tests.bench.million_pages
[--pages 1000000] [--db FILE] [...]` runs `tests.bench.retrieval --bulk --sizes PAGES` (its other options pass
through). Filling a store that size through `add_pages` takes about an hour on two cores; `bulk_fill` writes the
same kind of pages straight into the store's tables, in transactions of CHATS_PER_TXN chats, in minutes.

The pages are the retrieval benchmark's kind: chats of PAGES_PER_CHAT pages a minute apart; the first `real` pages
embedded for real (through the store's own `embed_pages`: read in context, with their word rows), the others unit
vectors around TOPIC_CENTERS topics with random 4-bit token rows and side vectors. Each chat is made from its
index alone (`Synthetic`), so the same pages can go through `add_pages` too (`fill_with_add_pages`) and the two
stores be compared (tests/memory_core/test_bulk_fill.py).

What `bulk_fill` writes for a page is what `add_pages` writes (memory_core.intake, pages, segments): the page row
(its chat, timestamp, keywords, tier), its vector (page_vec, vec0) and its vec_log row, its porter row (page_fts;
page_tri for CJK text), its token rows and side vectors (page_tok). Each chat's last `stm_capacity` pages stay in
short-term memory; the earlier ones are linked into dialogue chains by the store's rule (cosine + keyword Jaccard
>= chain_theta within chain_max_gap_s, the chains' summaries by the store's own code) and grouped into segments.
What differs, and why:
- segments are made by topic and time (a topic centre's pages within SEGMENT_WINDOW pages: ~2.5 pages each), not
  by the joining rule, whose scan of mid-term memory for every page is what makes `add_pages` slow; their
  keywords, summaries and vectors come from the store's own code. Mid-term memory keeps the `mtm_capacity`
  segments of most pages, the rest are archived (with no visit, heat is a page count and a recency alike for
  all). The ranking reads no segment (decision 0014), so the ranked pages are `add_pages`' (the test above);
- no event rows (a "page_added" and a "page_moved" per page in a real store: the inspector's history) and no
  promotion job.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as tests.bench.retrieval, for the same reason

import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from memory_core import text as T
from memory_core.pages import token_match
from memory_core.storage.codec import from_json, to_json, unit, vec_blob
from memory_core.types import page_text

PAGES_PER_CHAT = 50  # as tests.bench.retrieval's chats
TOPIC_CENTERS = 3000  # topics of the synthetic vectors, as tests.bench.retrieval's
TEXT_TOPICS = 30  # len(tests.bench.retrieval.TOPICS): the real pages' segments are by text topic
# a segment holds one topic's mid-term pages among this many consecutive pages: about 2.5 pages a segment (321k
# at a million pages). add_pages makes about 1 of these pages (1,548 segments of 1,600 mid-term pages at 2,000
# pages); LoCoMo's imports get 2 (joining rule centred-1) to 8 (centred-2, docs/eval.md). The ranking reads no
# segment: the window changes how many segment rows there are, not what a retrieval costs
SEGMENT_WINDOW = 7_500
CHATS_PER_TXN = 1000  # 50,000 pages a transaction
START_TS = 1.6e9
TOKENS_PER_PAGE = 24  # content tokens of a synthetic page: a LoCoMo page's mean (tests.bench.retrieval)
BULK_META = "bench_bulk_pages"  # meta: pages this module wrote (a store with other pages is not filled up)


@dataclass
class Synthetic:
    """The synthetic pages: chat `c` holds pages c * PAGES_PER_CHAT on, each made from its index alone."""

    dim: int
    real: int = 1000  # pages embedded for real (their texts through the store's embedder)
    seed: int = 7
    centers: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        c = np.random.default_rng(self.seed).standard_normal((TOPIC_CENTERS, self.dim)).astype(np.float32)
        self.centers = c / np.linalg.norm(c, axis=1, keepdims=True)

    def chat_items(self, chat: int, total: int) -> list[dict]:
        """The chat's pages as `add_pages` items; a page from `real` on comes with its vector."""
        from tests.bench.retrieval import page_texts

        start = chat * PAGES_PER_CHAT
        n = min(PAGES_PER_CHAT, total - start)
        rng = random.Random(self.seed * 1_000_003 + chat)
        idx = np.arange(start, start + n)
        noise = np.random.default_rng([self.seed, chat]).standard_normal((n, self.dim)).astype(np.float32)
        v = self.centers[idx % TOPIC_CENTERS] + 0.9 * noise / np.sqrt(self.dim)
        v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
        items = []
        for k in range(n):
            u, a = page_texts(rng, start + k)
            it: dict = {"user_text": u, "assistant_text": a, "timestamp": START_TS + 60.0 * (start + k)}
            if start + k >= self.real:
                it["embedding"] = v[k]
            items.append(it)
        return items

    def token_rows(self, chat: int, n: int) -> list[tuple[bytes, bytes]]:
        """Random token rows and side vectors of the chat's pages (for those without real ones)."""
        rng = np.random.default_rng([self.seed, chat, 1])
        size = TOKENS_PER_PAGE * token_match.row_bytes(self.dim)
        return [
            (
                rng.integers(17, 256, size=size, dtype=np.uint8).tobytes(),
                rng.integers(-127, 128, size=2 * self.dim, dtype=np.int8).tobytes(),
            )
            for _ in range(n)
        ]

    def segment_ids(self, idx: np.ndarray) -> np.ndarray:
        """The segment of each page index (in mid-term memory): its topic within its window of pages."""
        topic = np.where(idx < self.real, TOPIC_CENTERS + idx % TEXT_TOPICS, idx % TOPIC_CENTERS)
        return (idx // SEGMENT_WINDOW) * (TOPIC_CENTERS + TEXT_TOPICS) + topic + 1


def chats(total: int) -> int:
    return -(-total // PAGES_PER_CHAT)


def fill_with_add_pages(store, synth: Synthetic, total: int) -> None:
    """The same pages through the store's own path (`embed_pages`, then `add_pages`, one chat at a time), the
    synthetic pages' token rows written afterwards as tests.bench.retrieval does: the reference `bulk_fill` is
    compared with."""
    for chat in range(chats(total)):
        cid = store.conversations.create_conversation(f"bench {chat}")
        items = synth.chat_items(chat, total)
        store.intake.embed_pages(items, conversation_id=cid)
        ids = store.intake.add_pages(cid, items)
        rows = synth.token_rows(chat, len(items))
        have = {r[0] for r in store.db.rows("SELECT page_id FROM page_tok WHERE page_id >= ?", (ids[0],))}
        with store.transaction():
            for pid, row in zip(ids, rows):
                if pid not in have:
                    store.db.execute("INSERT INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", (pid, *row))
            store.db.execute("DELETE FROM job WHERE kind = 'index_tokens'")


@dataclass
class _Block:
    """The rows of a block of chats, ready for executemany."""

    conversations: list[tuple] = field(default_factory=list)
    chains: list[tuple] = field(default_factory=list)
    pages: list[tuple] = field(default_factory=list)
    vecs: list[tuple] = field(default_factory=list)
    fts: list[tuple] = field(default_factory=list)
    tri: list[tuple] = field(default_factory=list)
    toks: list[tuple] = field(default_factory=list)


class BulkFill:
    """Fills one store (opened with a token embedder, so its pages are read in context) up to a number of
    pages; a store bulk-filled before is filled up, one with pages of its own is refused."""

    def __init__(self, store, synth: Synthetic, log: Callable[[str], None] | None = None):
        self.store = store
        self.synth = synth
        self.log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.params = store.params
        self.now = store.clock()
        self.seg_sum: dict[int, np.ndarray] = {}  # segment -> summed page vectors (its emb_sum)
        self.seg_kw: dict[int, dict] = {}  # segment -> keyword counts (its kw_counts)
        self.seg_n: dict[int, int] = {}
        self.chain_ids: list[int] = []
        self.next_chain = int(store.db.scalar("SELECT coalesce(max(id), 0) FROM chain")) + 1
        self.before: dict[int, str] = {}

    def fill(self, total: int) -> dict:
        store = self.store
        have = store.pages.count_pages()
        if have != int(store.db.get_meta(BULK_META, "0") or 0):
            raise ValueError(f"the store holds {have} pages not written by a bulk fill; fill an empty one")
        if have % PAGES_PER_CHAT or total % PAGES_PER_CHAT or total < have:
            raise ValueError(f"a bulk fill goes from {have} to a larger multiple of {PAGES_PER_CHAT} pages")
        t0 = time.perf_counter()
        mtm = self._mid_term(total)
        self.before = dict(store.db.rows("SELECT id, tier FROM segment"))  # an earlier fill's segments
        for first in range(have // PAGES_PER_CHAT, chats(total), CHATS_PER_TXN):
            block = self._block(range(first, min(chats(total), first + CHATS_PER_TXN)), total, mtm)
            self._write(block)
            self.log(f"bulk fill: {len(block.pages) + first * PAGES_PER_CHAT} pages, {time.perf_counter() - t0:.0f} s")
        with store.transaction():
            self._finish_segments(mtm)
            for ch in self.chain_ids:
                store.segments.refresh_chain(ch)
            store.db.set_meta(BULK_META, str(total))
        return {
            "pages": total - have,
            "segments": len(self.seg_n),
            "chains": len(self.chain_ids),
            "seconds": round(time.perf_counter() - t0, 1),
        }

    def _mid_term(self, total: int) -> set[int]:
        """The segments mid-term memory keeps once `total` pages are in: the `mtm_capacity` of most pages (the
        newest first among equals), as eviction leaves them when nothing was visited."""
        idx = np.arange(total)
        chat_len = np.minimum(PAGES_PER_CHAT, total - (idx // PAGES_PER_CHAT) * PAGES_PER_CHAT)
        moved = idx % PAGES_PER_CHAT < chat_len - self.params.tiers.stm_capacity
        sids, counts = np.unique(self.synth.segment_ids(idx[moved]), return_counts=True)
        order = np.lexsort((-sids, -counts))
        return {int(s) for s in sids[order[: self.params.tiers.mtm_capacity]]}

    def _block(self, block_chats: range, total: int, mtm: set[int]) -> _Block:
        out = _Block()
        for chat in block_chats:
            self._chat(chat, total, mtm, out)
        return out

    def _chat(self, chat: int, total: int, mtm: set[int], out: _Block) -> None:
        """One chat's rows: its pages embedded (the real ones), their tiers, chain links and segments."""
        store, synth = self.store, self.synth
        items = synth.chat_items(chat, total)
        if any("embedding" not in it for it in items):
            store.intake.embed_pages(items)  # read in context, and their word rows kept in the store's memo
        cid, start = chat + 1, chat * PAGES_PER_CHAT
        out.conversations.append((cid, f"bench {chat}", self.now, self.now))
        vecs = [store.embedding.check_vec(it["embedding"]) for it in items]
        bodies = [page_text(it["user_text"], it["assistant_text"]) for it in items]
        kws = [T.keywords(b, self.params.segments.page_keywords) for b in bodies]
        n_moved = max(0, len(items) - self.params.tiers.stm_capacity)
        prev_of, chain_of = self._chains(items, vecs, kws, n_moved, start, out)
        sids = synth.segment_ids(np.arange(start, start + n_moved))
        synthetic_rows = synth.token_rows(chat, len(items))
        for k, (it, vec, body) in enumerate(zip(items, vecs, bodies)):
            pid = start + k + 1
            sid = int(sids[k]) if k < n_moved else None
            tier = "stm" if sid is None else "mtm" if sid in mtm else "archive"
            out.pages.append(
                (pid, cid, it["user_text"], it["assistant_text"], it["timestamp"], tier, sid, prev_of.get(k),
                 chain_of.get(k), to_json(kws[k]), self.now, None if sid is None else self.now)
            )  # fmt: skip
            out.vecs.append((pid, vec_blob(vec)))
            out.fts.append((pid, body))
            if T.has_cjk(body):
                out.tri.append((pid, body))
            memo = store.embedding.memo_tokens(body, vec)
            out.toks.append((pid, *(memo if memo is not None else synthetic_rows[k])))
            if sid is not None:
                self._join(sid, vec, kws[k])

    def _chains(self, items, vecs, kws, n_moved: int, start: int, out: _Block) -> tuple[dict, dict]:
        """Dialogue chains of the chat's moved pages, by the store's rule (memory_core.segments.component._link_chain):
        each is linked to the page moved before it when cosine + keyword Jaccard >= chain_theta within
        chain_max_gap_s. (page -> previous page id, page -> chain id), pages by their place in the chat."""
        p = self.params.segments
        prev_of: dict[int, int] = {}
        chain_of: dict[int, int] = {}
        for k in range(1, n_moved):
            if abs(items[k]["timestamp"] - items[k - 1]["timestamp"]) > p.chain_max_gap_s:
                continue
            if float(vecs[k - 1] @ vecs[k]) + T.jaccard(kws[k], kws[k - 1]) < p.chain_theta:
                continue
            if k - 1 not in chain_of:
                chain_of[k - 1] = self.next_chain
                out.chains.append((self.next_chain, self.now))
                self.chain_ids.append(self.next_chain)
                self.next_chain += 1
            prev_of[k], chain_of[k] = start + k, chain_of[k - 1]
        return prev_of, chain_of

    def _join(self, sid: int, vec: np.ndarray, kws: list[str]) -> None:
        if sid not in self.seg_n:
            row = self.store.db.one("SELECT emb_sum, kw_counts, page_count FROM segment WHERE id = ?", (sid,))
            self.seg_sum[sid] = np.frombuffer(row[0], np.float32).copy() if row else np.zeros(len(vec), np.float32)
            self.seg_kw[sid] = from_json(row[1], {}) if row else {}
            self.seg_n[sid] = row[2] if row else 0
        self.seg_sum[sid] += vec
        self.store.segments._count_keywords(self.seg_kw[sid], kws)
        self.seg_n[sid] += 1

    def _write(self, b: _Block) -> None:
        conn = self.store.db.conn
        with self.store.transaction():
            conn.executemany(
                "INSERT INTO conversation(id, title, created_at, updated_at) VALUES (?, ?, ?, ?)", b.conversations
            )
            conn.executemany("INSERT INTO chain(id, summary, keywords, updated_at) VALUES (?, '', '[]', ?)", b.chains)
            new = sorted({r[6] for r in b.pages if r[6] is not None})
            conn.executemany(  # placeholders, their figures set at the end (`_finish_segments`)
                "INSERT OR IGNORE INTO segment(id, tier, emb_sum, last_access, created_at, updated_at) "
                "VALUES (?, 'mtm', x'', ?, ?, ?)",
                [(s, self.now, self.now, self.now) for s in new],
            )
            conn.executemany(
                "INSERT INTO page(id, conversation_id, user_text, assistant_text, timestamp, tier, segment_id, "
                "prev_page_id, chain_id, keywords, created_at, moved_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                b.pages,
            )
            conn.executemany("INSERT INTO page_vec(page_id, embedding) VALUES (?, ?)", b.vecs)
            conn.executemany(
                "INSERT INTO vec_log(kind, item_id, op) VALUES ('page', ?, 'put')", [(v[0],) for v in b.vecs]
            )
            conn.executemany("INSERT INTO page_fts(rowid, body) VALUES (?, ?)", b.fts)
            conn.executemany("INSERT INTO page_tri(rowid, body) VALUES (?, ?)", b.tri)
            conn.executemany("INSERT INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", b.toks)

    def _finish_segments(self, mtm: set[int]) -> None:
        """Every segment this fill touched gets its figures (summed vector, keyword counts and keywords, pages,
        interactions, summary, index row in its tier's partition); a segment of an earlier fill whose tier
        changes (mid-term keeps the largest) moves with its pages."""
        store, segs = self.store, self.store.segments
        # the keyword refresh counts the memory's pages once, not every COMMON_REFRESH words
        segs._common_memo = [10**12, store.pages.count_pages(), {}]
        earlier = self.before
        for sid, tier in earlier.items():
            want = "mtm" if sid in mtm else "archive"
            if sid not in self.seg_n and tier != want:
                self._retier(sid, want)
        for sid, n in self.seg_n.items():
            tier = "mtm" if sid in mtm else "archive"
            counts = self.seg_kw[sid]
            store.db.execute(
                "UPDATE segment SET tier = ?, keywords = ?, kw_counts = ?, emb_sum = ?, page_count = ?, "
                "l_interaction = ?, archived_at = ? WHERE id = ?",
                (tier, to_json(segs._top_keywords(counts)), to_json(counts), vec_blob(self.seg_sum[sid]), n, n,
                 None if tier == "mtm" else self.now, sid),
            )  # fmt: skip
            if earlier.get(sid, tier) != tier:
                store.db.execute("UPDATE page SET tier = ? WHERE segment_id = ?", (tier, sid))
            segs.vec_put(sid, tier, unit(self.seg_sum[sid]))
            segs.refresh_summary(sid)

    def _retier(self, sid: int, tier: str) -> None:
        store = self.store
        store.db.execute(
            "UPDATE segment SET tier = ?, archived_at = ? WHERE id = ?",
            (tier, None if tier == "mtm" else self.now, sid),
        )
        store.db.execute("UPDATE page SET tier = ? WHERE segment_id = ?", (tier, sid))
        vec = np.frombuffer(store.db.one("SELECT emb_sum FROM segment WHERE id = ?", (sid,))[0], np.float32)
        store.segments.vec_put(sid, tier, unit(vec))


def bulk_fill(store, synth: Synthetic, total: int, log: Callable[[str], None] | None = None) -> dict:
    """Fill `store` with the synthetic pages up to `total` (a multiple of PAGES_PER_CHAT); see the module."""
    return BulkFill(store, synth, log).fill(total)


def fill_file(path: str, total: int, real: int, embed_threads: int = 0) -> dict:
    """`bulk_fill` of the store at `path`, opened with the bundled embedder (for the real pages)."""
    from models.embedder import OnnxEmbedder
    from tests.bench.retrieval import open_store

    emb = OnnxEmbedder(threads=embed_threads)
    store = open_store(path, emb)
    try:
        return bulk_fill(store, Synthetic(emb.dim, real=real), total)
    finally:
        store.close()


def fill_in_child(path: str, total: int, real: int, embed_threads: int = 0) -> dict:
    """`fill_file` in a process of its own, so what the fill held (a transaction's rows, the segments' sums)
    is not counted in the resident memory the benchmark measures afterwards."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fill_file, (path, total, real, embed_threads))


def main(argv: list[str] | None = None) -> dict:
    import argparse

    from tests.bench import retrieval

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    ap.add_argument("--pages", type=int, default=1_000_000)
    args, rest = ap.parse_known_args(argv)
    return retrieval.main(["--bulk", "--sizes", str(args.pages), *rest])


if __name__ == "__main__":
    main()
