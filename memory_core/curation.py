"""What the user does to memory directly: correct a page, pin an item, forget items or everything one
conversation taught (with what was drawn only from them), undo a version, wipe memory."""

from __future__ import annotations

from collections.abc import Sequence

from . import text as T
from .pages.component import Pages
from .pages.embedding import Embedding
from .persona.versions import Versions
from .segments.component import Segments
from .storage import tables
from .storage.codec import from_json
from .storage.database import Database
from .storage.jobs import Jobs
from .types import ITEM_KINDS, ConversationMemory, page_text

# a reply of conversation ? waiting to become a page (agents queue {"cid": …}; imports and older jobs
# {"conversation_id": …}); _PAGE_JOB_OF: also one that failed, which keeps the exchange's text
_PAGE_JOB_OF = (
    "kind = 'add_page' AND coalesce(json_extract(payload, '$.cid'), json_extract(payload, '$.conversation_id')) = ?"
)
_PENDING_PAGE_OF = "status = 'pending' AND " + _PAGE_JOB_OF


def _exchange_text(payload: dict) -> str:
    return f"{payload.get('user_text') or ''}\n{payload.get('assistant_text') or ''}"


class Curation:
    def __init__(
        self, db: Database, embedding: Embedding, pages: Pages, segments: Segments, versions: Versions, jobs: Jobs
    ):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        self.versions = versions
        self.jobs = jobs

    def edit_page(self, pid: int, user_text: str | None = None, assistant_text: str | None = None) -> None:
        """Correct a page's text: re-embeds, re-indexes, refreshes its segment and chain."""
        page = self.pages.get(pid)
        if page is None:
            raise KeyError(f"no page {pid}")
        u = page.user_text if user_text is None else user_text
        a = page.assistant_text if assistant_text is None else assistant_text
        body = page_text(u, a)
        if not body.strip():
            raise ValueError("a page needs some text")
        with self.db.lock:
            ctx = self.pages.context_before(page.conversation_id, pid, page.timestamp)
        vec = self.embedding.embed_pages([(u, a)], [ctx])[0]
        with self.db.transaction():
            self.pages.set_text(pid, u, a, T.keywords(body, self.db.params.segments.page_keywords), vec)
            if page.segment_id is not None:
                self.segments.rebuild(page.segment_id)
            if page.chain_id is not None:
                self.segments.refresh_chain(page.chain_id)
            self.segments.recontext(self.pages.pages_after([pid]))  # the next page was read after the old words
            self.db.emit("edited", "page", pid, f"page {pid} edited by the user")

    def pin(self, kind: str, item_id: int, pinned: bool = True) -> bool:
        """Pin (protect from eviction and automatic updates) or unpin a page, segment, knowledge item or trait.
        Returns whether memory holds the item."""
        if kind not in ITEM_KINDS:
            raise ValueError(f"kind must be one of {ITEM_KINDS}")
        with self.db.transaction():
            if kind == "page":
                found = self.pages.set_pinned(item_id, pinned)
            elif kind == "segment":
                found = self.segments.set_pinned(item_id, pinned)
            else:
                found = self.versions.set_pinned(kind, item_id, pinned)
            if found:
                self.db.emit(
                    "pinned" if pinned else "unpinned",
                    kind,
                    item_id,
                    f"{kind} {item_id} {'pinned' if pinned else 'unpinned'}",
                )
        return found

    def forget(self, kind: str, ids: int | Sequence[int]) -> int:
        """Remove items for good: base rows, vectors, FTS entries, and what was derived only from them.

        Forgetting a segment forgets its pages. Forgetting pages removes traits/knowledge whose every
        source page is gone, drops their versions that came only from those pages, and reverts an
        item to its newest surviving version when its current one came only from them. Returns the
        number of items removed.
        """
        if kind not in ITEM_KINDS:
            raise ValueError(f"kind must be one of {ITEM_KINDS}")
        id_list = [ids] if isinstance(ids, int) else list(ids)
        if not id_list:
            return 0
        with self.db.transaction():
            marks = ",".join("?" * len(id_list))
            if kind == "page":
                found = [
                    r[0] for r in self.db.execute(f"SELECT id FROM page WHERE id IN ({marks})", id_list).fetchall()
                ]
                self._forget_pages(found)
            elif kind == "segment":
                found = [
                    r[0] for r in self.db.execute(f"SELECT id FROM segment WHERE id IN ({marks})", id_list).fetchall()
                ]
                if found:
                    m2 = ",".join("?" * len(found))
                    pids = [
                        r[0]
                        for r in self.db.execute(f"SELECT id FROM page WHERE segment_id IN ({m2})", found).fetchall()
                    ]
                    self._forget_pages(pids)
                    for sid in found:  # (already gone when it lost its last page)
                        self.segments.delete(sid)
            else:
                found = [
                    r[0] for r in self.db.execute(f"SELECT id FROM {kind} WHERE id IN ({marks})", id_list).fetchall()
                ]
                for iid in found:
                    self.versions.delete_item(kind, iid)
            for iid in found:
                self.db.emit("forgotten", kind, iid, f"{kind} {iid} forgotten by the user")
            return len(found)

    def conversation_memory(self, cid: int) -> ConversationMemory:
        """What memory holds from one conversation: its pages (every tier), how many are pinned, and
        the persona items that would go with them (every source page among them). Read-only: what
        `forget_conversation` would remove, for a confirmation that names it."""
        with self.db.lock:
            rows = self.db.execute(
                "SELECT id, pinned FROM page WHERE conversation_id = ? ORDER BY id", (cid,)
            ).fetchall()
            ids = [r[0] for r in rows]
            return ConversationMemory(
                cid,
                ids,
                sum(1 for r in rows if r[1]),
                self.versions.derived_only_from(set(ids)),
                self._pending_pages_of(cid),
            )

    def forget_conversation(self, cid: int) -> ConversationMemory:
        """Forget what memory learned from one conversation: every page of it in every tier (pinned
        ones too: the user asked for this chat's memory to go), the persona items drawn only from
        those pages, and its replies still waiting to become pages. Items other pages also support
        stay, losing these sources (see `forget`). The conversation and its messages are not touched;
        user-written facts have no source pages and stay. Returns what was removed."""
        with self.db.transaction():
            gone = self.conversation_memory(cid)
            self.jobs.delete([r[0] for r in self.db.execute("SELECT id FROM job WHERE " + _PAGE_JOB_OF, (cid,))])
            self._forget_pages(gone.page_ids)
            self.versions.drop_conversation(cid)  # items that stay no longer name it as a source
            if gone.page_ids or gone.pending_pages:
                self.db.emit(
                    "forgotten",
                    "conversation",
                    cid,
                    f"memory of conversation {cid} forgotten by the user: {len(gone.page_ids)} pages",
                    {
                        "pages": len(gone.page_ids),
                        "pending": gone.pending_pages,
                        "items": [f"{k} {i}" for k, i in gone.items],
                    },
                )
            return gone

    def forget_waiting_pages(self, statement: str) -> int:
        """Drop the replies still waiting to become pages (pending "add_page" jobs) whose exchange holds
        every content word of `statement`, two at least, as `memory_saying` asks of pages: what a
        request to forget names must not come back as a page when its job runs. Returns how many."""
        words = set(T.content_words(statement))
        if len(words) < 2:
            return 0
        with self.db.transaction():
            waiting = [
                jid
                for jid, payload in self.db.execute(
                    "SELECT id, payload FROM job WHERE status = 'pending' AND kind = 'add_page'"
                ).fetchall()
                if words <= set(T.content_words(_exchange_text(from_json(payload, {}))))
            ]
            self.jobs.delete(waiting)
            return len(waiting)

    def _pending_pages_of(self, cid: int) -> int:
        return self.db.execute("SELECT count(*) FROM job WHERE " + _PENDING_PAGE_OF, (cid,)).fetchone()[0]

    def _forget_pages(self, ids: Sequence[int]) -> None:
        ids = sorted(set(ids))
        if not ids:
            return
        self.versions.forget_derived(set(ids))
        marks = ",".join("?" * len(ids))
        info = self.db.named(f"SELECT segment_id, chain_id FROM page WHERE id IN ({marks})", ids)
        since = self.db.execute(f"SELECT min(created_at) FROM page WHERE id IN ({marks})", ids).fetchone()[0]
        self.db.purge.note("page", ids, since)  # replies' traces drop them; backups from since hold them
        after = self.pages.pages_after(ids)  # they were read after a forgotten page
        self.pages.delete(ids)  # (chains relinked across them)
        for sid in sorted({r["segment_id"] for r in info if r["segment_id"] is not None}):
            self.segments.rebuild(sid)
        for chain_id in sorted({r["chain_id"] for r in info if r["chain_id"] is not None}):
            self.segments.refresh_chain(chain_id)
        self.segments.recontext(after)

    def undo_version(self, kind: str, iid: int, version: int) -> bool:
        """Make a trait's or fact's previous version current again, if `version` is still its current
        one (nothing has confirmed or changed it since). Returns whether it was reverted; an item
        without an earlier version is left as it is (forget it instead)."""
        if kind not in ("trait", "knowledge"):
            raise ValueError("kind must be 'trait' or 'knowledge'")
        with self.db.transaction():
            row = self.db.execute(f"SELECT version FROM {kind} WHERE id = ?", (iid,)).fetchone()
            earlier = self.db.execute(
                "SELECT 1 FROM item_version WHERE item_kind = ? AND item_id = ? AND version < ?", (kind, iid, version)
            ).fetchone()
            if row is None or row[0] != version or earlier is None:
                return False
            self.versions.revert(kind, iid, reason="reverted by the user: the chat that changed it was forgotten")
            self.db.emit(
                "edited",
                kind,
                iid,
                f"{kind} {iid} reverted to its previous version by the user",
                {"from_version": version},
            )
            return True

    def wipe_memory(self) -> None:
        """Delete every memory row (pages, segments, chains, traits, knowledge, versions, vectors, FTS,
        pending memory jobs, events) and what replies' traces quoted of it. Conversations and messages
        stay. Once it commits the file is vacuumed (memory_core.storage.purge): no text of memory is left in it."""
        with self.db.transaction():
            since = self.db.execute(
                "SELECT min(t) FROM (SELECT min(created_at) AS t FROM page UNION ALL "
                "SELECT min(created_at) FROM knowledge UNION ALL SELECT min(created_at) FROM trait)"
            ).fetchone()[0]
            self.db.purge.note_wipe(since)
            self.pages.unlink_all()  # no page points at another: the pages go in one statement
            for t in tables.wiped():  # every table of memory, and the bookkeeping that holds or points at it
                tables.clear(self.db, t)
            self.db.log_vec_reset()
            self.db.emit("wiped", None, None, "all memory wiped by the user")
