"""Page rows: reading them, their vector, word and full-text index rows, and what each page is read after
(its context: the page before it in its conversation)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ..storage.codec import from_json, to_json, vec_blob
from ..storage.database import Database, equals, like_pattern
from ..storage.fts import fts_del, fts_put
from ..storage.jobs import Jobs
from ..types import PAGE_CONTEXT, Page, context_side, page_text
from .embedding import Embedding

PAGE_COLS = (
    "p.id, p.conversation_id, p.user_text, p.assistant_text, p.timestamp, p.tier, p.segment_id, p.prev_page_id, "
    "(SELECT n.id FROM page n WHERE n.prev_page_id = p.id ORDER BY n.id LIMIT 1), p.chain_id, "
    "coalesce((SELECT c.summary FROM chain c WHERE c.id = p.chain_id), ''), p.keywords, p.pinned, "
    "p.user_message_id, p.assistant_message_id, p.meta, p.space_id"
)

# pages whose word rows or side vectors are still to be made (`page_tok.sides` is NULL for rows written
# before side vectors were kept: schema 5)
UNINDEXED = "id NOT IN (SELECT page_id FROM page_tok WHERE sides IS NOT NULL)"


class Pages:
    def __init__(self, db: Database, embedding: Embedding, jobs: Jobs):
        self.db = db
        self.embedding = embedding
        self.jobs = jobs

    # ------------------------------------------------------------------ reading
    def page_from_row(self, r: tuple) -> Page:
        return Page(
            id=r[0],
            conversation_id=r[1],
            user_text=r[2],
            assistant_text=r[3],
            timestamp=r[4],
            tier=r[5],
            segment_id=r[6],
            prev_page_id=r[7],
            next_page_id=r[8],
            chain_id=r[9],
            chain_summary=r[10],
            keywords=from_json(r[11], []),
            pinned=bool(r[12]),
            user_message_id=r[13],
            assistant_message_id=r[14],
            meta=from_json(r[15], {}),
            space_id=r[16] if len(r) > 16 else 1,
        )

    def by_ids(self, ids: Sequence[int]) -> dict[int, Page]:
        out: dict[int, Page] = {}
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self.db.rows(f"SELECT {PAGE_COLS} FROM page p WHERE p.id IN ({marks})", chunk):
                out[r[0]] = self.page_from_row(r)
        return out

    def get(self, pid: int) -> Page | None:
        r = self.db.one(f"SELECT {PAGE_COLS} FROM page p WHERE p.id = ?", (pid,))
        return self.page_from_row(r) if r else None

    _PAGE_ORDER = {
        "timestamp": "p.timestamp",
        "id": "p.id",
        "tier": "p.tier",
        "segment": "p.segment_id",
        "conversation": "p.conversation_id",
    }

    def _filters(
        self,
        tier: str | None,
        conversation_id: int | None,
        segment_id: int | None,
        text: str | None,
        pinned: bool | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        after_id: int | None = None,
        deleted_chats: bool = False,
        space_id: int | None = None,
    ) -> tuple[str, list]:
        where, args = equals(
            [
                ("p.user_message_id", user_message_id),
                ("p.assistant_message_id", assistant_message_id),
                ("p.tier", tier),
                ("p.conversation_id", conversation_id),
                ("p.segment_id", segment_id),
                ("p.pinned", None if pinned is None else int(pinned)),
                ("p.space_id", space_id),
            ]
        )
        if deleted_chats:  # a deleted chat's pages stay (memory is forgotten explicitly) and name no chat
            where.append("p.conversation_id IS NULL")
        if after_id is not None:
            where.append("p.id > ?")
            args.append(after_id)
        if text:
            like = like_pattern(text)
            where.append("(p.user_text LIKE ? ESCAPE '\\' OR p.assistant_text LIKE ? ESCAPE '\\')")
            args += [like, like]
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def list_pages(
        self,
        *,
        tier: str | None = None,
        conversation_id: int | None = None,
        segment_id: int | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        order_by: str = "timestamp",
        descending: bool = True,
        limit: int = 100,
        offset: int = 0,
        after_id: int | None = None,
        deleted_chats: bool = False,
        space_id: int | None = None,
    ) -> list[Page]:
        """Pages filtered, sorted and paged in SQL. `text` is a case-insensitive substring filter;
        `after_id` pages by key (ids above it; with order_by="id" ascending it walks the whole table
        in batches at a constant cost per batch, as an export does); `deleted_chats`: only pages whose
        chat was deleted."""
        if order_by not in self._PAGE_ORDER:
            raise ValueError(f"order_by must be one of {sorted(self._PAGE_ORDER)}")
        where, args = self._filters(
            tier,
            conversation_id,
            segment_id,
            text,
            pinned,
            user_message_id,
            assistant_message_id,
            after_id,
            deleted_chats,
            space_id,
        )
        d = "DESC" if descending else "ASC"
        order = f"ORDER BY {self._PAGE_ORDER[order_by]} {d}, p.id {d}"
        if offset < 1000:
            rows = self.db.rows(
                f"SELECT {PAGE_COLS} FROM page p{where} {order} LIMIT ? OFFSET ?", [*args, limit, offset]
            )
            return [self.page_from_row(r) for r in rows]
        # A deep page (a scrollbar dragged to row 50,000): step over the skipped rows in an index
        # that holds the sort key and the id, without reading the rows themselves, then fetch the
        # `limit` rows by id. Several times faster than OFFSET over full rows on a large table.
        ids = [
            r[0]
            for r in self.db.rows(f"SELECT p.id FROM page p{where} {order} LIMIT ? OFFSET ?", [*args, limit, offset])
        ]
        pages = self.by_ids(ids)
        return [pages[i] for i in ids if i in pages]

    def count_pages(
        self,
        *,
        tier: str | None = None,
        conversation_id: int | None = None,
        segment_id: int | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        deleted_chats: bool = False,
        space_id: int | None = None,
        **_: Any,
    ) -> int:
        where, args = self._filters(
            tier,
            conversation_id,
            segment_id,
            text,
            pinned,
            user_message_id,
            assistant_message_id,
            deleted_chats=deleted_chats,
            space_id=space_id,
        )
        return self.db.scalar(f"SELECT count(*) FROM page p{where}", args)

    # ------------------------------------------------------------------ index rows
    def vec_put(self, pid: int, vec: np.ndarray, body: str) -> None:
        """The page's vector, and its token vectors when `body` (the text `vec` embeds) was embedded
        with a token embedder just before (the store's memo); else its old token row goes and the
        "index_tokens" job makes a new one."""
        self.db.execute("DELETE FROM page_vec WHERE page_id = ?", (pid,))
        self.db.execute("INSERT INTO page_vec(page_id, embedding) VALUES (?, ?)", (pid, vec_blob(vec)))
        self.db.log_vec("page", [pid], "put")
        if not self.embedding.has_tokens:
            self.note_read_alone(pid)
        memo = self.embedding.memo_tokens(body, vec)
        if memo is not None:
            self.db.execute("INSERT OR REPLACE INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", (pid, *memo))
        else:
            self.db.execute("DELETE FROM page_tok WHERE page_id = ?", (pid,))
            self.queue_token_index(missing=True)

    def vec_del(self, pid: int) -> None:
        self.db.execute("DELETE FROM page_vec WHERE page_id = ?", (pid,))
        self.db.execute("DELETE FROM page_tok WHERE page_id = ?", (pid,))
        self.db.log_vec("page", [pid], "del")

    def put_tokens(self, pid: int, vecs: bytes, sides: bytes | None) -> None:
        """Page `pid`'s content-token vectors and side vectors (memory_core.pages.token_match)."""
        self.db.execute("INSERT OR REPLACE INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", (pid, vecs, sides))

    def drop_all_tokens(self) -> None:
        """Every page's token rows go (another embedding model's cannot be matched with this one's words)."""
        self.db.execute("DELETE FROM page_tok")

    def index_words(self, pid: int, body: str) -> None:
        """Page `pid`'s full-text rows: `body`, its text."""
        fts_put(self.db, "page_fts", "page_tri", pid, body)

    def page_vec(self, pid: int) -> np.ndarray:
        row = self.db.execute("SELECT embedding FROM page_vec WHERE page_id = ?", (pid,)).fetchone()
        if row is None:
            raise KeyError(f"page {pid} has no embedding")
        return np.frombuffer(row[0], dtype=np.float32).copy()

    def note_read_alone(self, pid: int) -> None:
        """Page `pid` was embedded without a token embedder (it reads no context), or must be read again after a
        page before it changed meanwhile: a memory whose pages were read in context no longer says so, and the
        first such page is kept (meta `alone_from`). When the memory is next opened with a token embedder,
        "read_in_context" starts there instead of at the first page (a user who set "w tokens" to 0 and back
        would otherwise keep the pages of that time embedded alone, or have the whole memory embedded again for
        them). A memory flagged "alone" without `alone_from` (before it was kept) starts at the first page.
        Read in the write's own transaction each time (one-row lookups), so a rolled-back write leaves no stale
        flag."""
        state = self.db.get_meta("page_context")
        if state == PAGE_CONTEXT:
            self.db.set_meta("page_context", "alone")
            self.db.set_meta("alone_from", str(pid))
        elif state == "alone":
            first = self.db.get_meta("alone_from")
            if first is not None and pid < int(first):
                self.db.set_meta("alone_from", str(pid))

    def queue_token_index(self, missing: bool | None = None) -> None:
        """Queue an "index_tokens" job when some page has no token vectors yet (a memory from before
        them, pages stored with vectors of their own, a changed embedding model); `missing` True when
        the caller knows (no scan of the pages then). Inside a transaction."""
        if not self.embedding.has_tokens or self.db.params.ranking.w_tokens <= 0:
            return
        if self.db.execute(
            "SELECT 1 FROM job WHERE status = 'pending' AND kind IN ('index_tokens', 'read_in_context', "
            "'reembed') LIMIT 1"
        ).fetchone():
            return  # "read_in_context" and "reembed" write every page's rows as they go
        if missing is None:
            missing = self.db.execute(f"SELECT 1 FROM page WHERE {UNINDEXED} LIMIT 1").fetchone()
        if missing:
            self.jobs.enqueue("index_tokens", {})

    # ------------------------------------------------------------------ what a page is read after
    def read_after(self, prev: tuple[str, str, float] | None, ts: float) -> str:
        """The context a page said at `ts` is read after, given the page before it in its conversation
        (user text, assistant text, timestamp): its `context_side` when said within `neighbor_max_gap_s`
        (a new session starts afresh). "" without a token embedder: a plain embedding function reads none."""
        if prev is None or not self.embedding.has_tokens:
            return ""
        if abs(float(ts) - float(prev[2])) > self.db.params.ranking.neighbor_max_gap_s:
            return ""
        return context_side(prev[0], prev[1])

    def context_before(self, cid: int | None, before_id: int | None, ts: float) -> str:
        """`_read_after` for a page of conversation `cid`: the page before page `before_id`, or the
        conversation's newest page (a page about to be added)."""
        if cid is None or not self.embedding.has_tokens:
            return ""
        newest = "SELECT user_text, assistant_text, timestamp FROM page WHERE conversation_id = ?"
        row = (
            self.db.execute(newest + " ORDER BY id DESC LIMIT 1", (cid,))
            if before_id is None
            else self.db.execute(newest + " AND id < ? ORDER BY id DESC LIMIT 1", (cid, before_id))
        ).fetchone()
        return self.read_after(row, ts)

    def contexts_of(self, ids: Sequence[int]) -> list[str]:
        """`_context_before` of stored pages, in the order given."""
        where = {
            r[0]: (r[1], r[2])
            for r in self.db.execute(
                "SELECT id, conversation_id, timestamp FROM page WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(ids)),),
            ).fetchall()
        }
        return [self.context_before(where[i][0], i, where[i][1]) if i in where else "" for i in ids]

    def item_contexts(self, cid: int | None, items: Sequence[dict], before: dict | None = None) -> list[str]:
        """`_read_after` of `add_pages` items about to be written in this order: each is read after the
        item before it, the first after `before` (the item before them) or else after the newest page
        of conversation `cid`."""
        now = self.db.clock()

        def at(it: dict) -> float:
            return now if it.get("timestamp") is None else float(it["timestamp"])

        out: list[str] = []
        prev = before
        for it in items:
            if prev is None:
                out.append(self.context_before(cid, None, at(it)))
            else:
                out.append(
                    self.read_after((prev.get("user_text", ""), prev.get("assistant_text", ""), at(prev)), at(it))
                )
            if page_text(it.get("user_text", ""), it.get("assistant_text", "")).strip():
                prev = it
        return out

    def embed_stored(self, rows: Sequence[tuple[int, str, str]]) -> tuple[list[int], list[str], list[str], np.ndarray]:
        """Stored pages given as (id, user text, assistant text), each embedded after the page before it,
        vectors and word rows (kept for `_vec_put_page`) from one encoder pass: (ids, bodies, contexts,
        vectors)."""
        ids = [r[0] for r in rows]
        with self.db.lock:
            contexts = self.contexts_of(ids)
        bodies = [page_text(u, a) for _, u, a in rows]
        vecs = (
            self.embedding.embed_pages([(u, a) for _, u, a in rows], contexts)
            if rows
            else np.zeros((0, self.db.dim), np.float32)
        )
        return ids, bodies, contexts, vecs

    def pages_after(self, ids: Sequence[int]) -> list[int]:
        """The page right after each of these in its conversation, passing over those among them."""
        rows = self.db.execute(
            "SELECT DISTINCT (SELECT min(q.id) FROM page q WHERE q.conversation_id = p.conversation_id "
            "AND q.id > p.id AND q.id NOT IN (SELECT value FROM json_each(?1))) FROM page p "
            "WHERE p.id IN (SELECT value FROM json_each(?1))",
            (json.dumps(sorted(set(ids))),),
        ).fetchall()
        return sorted(r[0] for r in rows if r[0] is not None)

    def memory_off(self, cid: int | None) -> str | None:
        if self.db.get_meta("paused", "0") == "1":
            return "memory paused"
        if cid is not None:
            row = self.db.execute("SELECT memory_paused, incognito FROM conversation WHERE id = ?", (cid,)).fetchone()
            if row is None:
                raise KeyError(f"no conversation {cid}")
            if row[0]:
                return "memory paused for this conversation"
            if row[1]:
                return "incognito conversation"
        return None

    # ------------------------------------------------------------------ writing rows (this module owns page)
    def insert(self, row: dict[str, Any]) -> int:
        """A new page row of these columns (storage.tables: the page table is written here alone)."""
        cols = list(row)
        self.db.execute(
            f"INSERT INTO page({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})", [row[c] for c in cols]
        )
        return self.db.last_insert_rowid()

    def add_stm(self, cid: int | None, row: dict[str, Any], vec: np.ndarray, body: str) -> int:
        """A new short-term page of conversation `cid` (in its chat's space), its vector and words indexed."""
        cols = list(row)
        self.db.execute(
            f"INSERT INTO page({', '.join(cols)}, tier, space_id) VALUES ({','.join('?' * len(cols))}, 'stm', "
            "coalesce((SELECT space_id FROM conversation WHERE id = ?), 1))",
            [*(row[c] for c in cols), cid],
        )
        pid = self.db.last_insert_rowid()
        self.vec_put(pid, vec, body)
        self.index_words(pid, body)
        return pid

    def put_imported_index(self, pid: int, vec: np.ndarray, tokens: bytes | None, sides: bytes | None) -> None:
        """A page read from a memory cube: its vector as the cube gave it, and its token rows when both the
        cube and this memory have them (else `vec_put`'s way: embedded here, or an index_tokens job)."""
        body = page_text(*self.db.execute("SELECT user_text, assistant_text FROM page WHERE id = ?", (pid,)).fetchone())
        if tokens is None:
            self.vec_put(pid, vec, body)
        else:
            self.db.execute("INSERT INTO page_vec(page_id, embedding) VALUES (?, ?)", (pid, vec_blob(vec)))
            self.db.log_vec("page", [pid], "put")
            if self.embedding.has_tokens:
                self.put_tokens(pid, tokens, sides)
        self.index_words(pid, body)

    def set_text(self, pid: int, user_text: str, assistant_text: str, keywords: list[str], vec: np.ndarray) -> None:
        """Page `pid` says something else (the user corrected it): its text, keywords, vector and words."""
        body = page_text(user_text, assistant_text)
        self.db.execute(
            "UPDATE page SET user_text = ?, assistant_text = ?, keywords = ? WHERE id = ?",
            (user_text, assistant_text, to_json(keywords), pid),
        )
        self.vec_put(pid, vec, body)
        self.index_words(pid, body)
        self.db.purge.note_fts(("page_fts", "page_tri"))  # the old words leave the index too

    def set_pinned(self, pid: int, pinned: bool) -> bool:
        """Pin or unpin page `pid`; whether it exists."""
        self.db.execute("UPDATE page SET pinned = ? WHERE id = ?", (int(pinned), pid))
        return self.db.changes() > 0

    def keep_pin(self, into: int, dropped: int) -> None:
        """Page `into` stands for page `dropped` from now: pinned when that one was."""
        self.db.execute(
            "UPDATE page SET pinned = 1 WHERE id = ? AND (SELECT pinned FROM page WHERE id = ?) = 1", (into, dropped)
        )

    def mark_analyzed(self, ids: Sequence[int]) -> None:
        """These pages' persona was extracted (a segment's promotion)."""
        marks = ",".join("?" * len(ids))
        self.db.execute(f"UPDATE page SET analyzed = 1 WHERE id IN ({marks})", list(ids))

    def link(self, pid: int, prev: int | None, chain_id: int | None) -> None:
        """Page `pid` continues page `prev` in dialogue chain `chain_id`."""
        self.db.execute("UPDATE page SET prev_page_id = ?, chain_id = ? WHERE id = ?", (prev, chain_id, pid))

    def set_chain(self, pid: int, chain_id: int) -> None:
        self.db.execute("UPDATE page SET chain_id = ? WHERE id = ?", (chain_id, pid))

    def enter_segment(self, pid: int, sid: int, moved_at: float | None) -> None:
        """Page `pid` leaves short-term memory for mid-term segment `sid` (at `moved_at`)."""
        self.db.execute("UPDATE page SET tier = 'mtm', segment_id = ?, moved_at = ? WHERE id = ?", (sid, moved_at, pid))

    def set_moved_at(self, pid: int, moved_at: float | None) -> None:
        self.db.execute("UPDATE page SET moved_at = ? WHERE id = ?", (moved_at, pid))

    def set_tier_of_segment(self, sid: int, tier: str) -> None:
        """The pages of segment `sid` follow it to `tier` ('mtm' or 'archive')."""
        self.db.execute("UPDATE page SET tier = ? WHERE segment_id = ?", (tier, sid))

    def move_segment(self, ids: Sequence[int], sid: int) -> None:
        """These pages now belong to segment `sid` (of their tier)."""
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            self.db.execute(f"UPDATE page SET segment_id = ? WHERE id IN ({','.join('?' * len(chunk))})", [sid, *chunk])

    def move_space(self, ids: Sequence[int], space_id: int) -> None:
        """These pages now belong to space `space_id` (a trigger counts the move: meta.space_epoch)."""
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            self.db.execute(f"UPDATE page SET space_id = ? WHERE id IN ({marks})", [space_id, *chunk])

    def copy(self, old: int, space_id: int, segment_id: int | None, meta: dict, skip: AbstractSet[str]) -> int:
        """A copy of page `old` in space `space_id` (in segment `segment_id`, with `meta`): the same text and
        columns but `skip`, the same vector, token rows and words. Returns its id."""
        cols = [r[1] for r in self.db.rows("PRAGMA table_info(page)") if r[1] not in skip]
        self.db.execute(
            f"INSERT INTO page({', '.join(cols)}, space_id, segment_id, meta) SELECT {', '.join(cols)}, ?, ?, ? "
            "FROM page WHERE id = ?",
            (space_id, segment_id, to_json(meta), old),
        )
        new = self.db.last_insert_rowid()
        vec = self.db.scalar("SELECT embedding FROM page_vec WHERE page_id = ?", (old,))
        if vec is not None:
            self.db.execute("INSERT INTO page_vec(page_id, embedding) VALUES (?, ?)", (new, vec))
            self.db.log_vec("page", [new], "put")
        self.db.execute(
            "INSERT OR REPLACE INTO page_tok(page_id, vecs, sides) SELECT ?, vecs, sides FROM page_tok WHERE page_id = ?",
            (new, old),
        )
        u, a = self.db.one("SELECT user_text, assistant_text FROM page WHERE id = ?", (new,))
        self.index_words(new, page_text(u, a))
        return new

    def delete(self, ids: Sequence[int]) -> None:
        """Delete these pages, their vectors, token rows and words; a page that followed one of them in its
        dialogue chain follows the nearest one kept before it. What they made (segments, chains, persona)
        is the caller's (curation)."""
        ids = sorted(set(ids))
        if not ids:
            return
        gone = set(ids)
        marks = ",".join("?" * len(ids))
        prev_of = dict(self.db.execute(f"SELECT id, prev_page_id FROM page WHERE id IN ({marks})", ids).fetchall())
        for child, prev in self.db.execute(
            f"SELECT id, prev_page_id FROM page WHERE prev_page_id IN ({marks})", ids
        ).fetchall():
            if child in gone:
                continue
            while prev in gone:
                prev = prev_of.get(prev)
            self.db.execute("UPDATE page SET prev_page_id = ? WHERE id = ?", (prev, child))
        for pid in ids:
            self.vec_del(pid)
            fts_del(self.db, "page_fts", "page_tri", pid)
        self.db.execute(f"DELETE FROM page WHERE id IN ({marks})", ids)

    def unlink_all(self) -> None:
        """No page points at the page before it any more (a wipe deletes them all in one statement then)."""
        self.db.execute("UPDATE page SET prev_page_id = NULL WHERE prev_page_id IS NOT NULL")
