"""Conversations and their messages (a tree: regenerated replies and edits are branches)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import text as T
from . import traces
from .segments.component import Segments
from .storage.codec import from_json, to_json
from .storage.database import Database, like_pattern
from .storage.purge import Forgetting
from .types import Conversation, Message

CONV_COLS = "id, title, created_at, updated_at, source, external_id, memory_paused, incognito, space_id, read_spaces"
MSG_COLS = "id, conversation_id, parent_id, role, content, created_at, status, meta"
AUTO: Any = object()  # default parent of add_message: the conversation's current leaf


class Conversations:
    def __init__(self, db: Database, segments: Segments):
        self.db = db
        self.segments = segments
        db.purge.at_seal(self._scrub_traces)

    def _scrub_traces(self, forgetting: Forgetting) -> None:
        """Before a forgetting transaction commits, replies' traces lose the text of what it forgot
        (memory_core.traces): every recalled item's after a wipe, else only a reply written since the
        oldest forgotten item was made can name one."""
        if forgetting.wiped:
            rows = self.db.execute("SELECT id, meta FROM message WHERE role = 'assistant' AND meta != '{}'").fetchall()
            rewritten = [(mid, traces.scrubbed_all(meta)) for mid, meta in rows]
        elif forgetting.items:
            gone = {(kind, int(iid)) for kind, iid in forgetting.items}
            since = float("-inf") if forgetting.since is None else forgetting.since
            rows = self.db.execute(
                "SELECT id, meta FROM message WHERE role = 'assistant' AND created_at >= ? AND meta != '{}'", (since,)
            ).fetchall()
            rewritten = [(mid, traces.scrubbed(meta, gone)) for mid, meta in rows]
        else:
            return
        for mid, meta in rewritten:
            if meta is not None:
                self.db.execute("UPDATE message SET meta = ? WHERE id = ?", (meta, mid))

    def _conv(self, r: tuple) -> Conversation:
        reads = r[9]
        if reads is not None and reads != "all":
            reads = [int(x) for x in from_json(reads, [])]
        return Conversation(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]), r[8], reads)

    def create_conversation(
        self,
        title: str = "New chat",
        *,
        created_at: float | None = None,
        source: str | None = None,
        external_id: str | None = None,
        incognito: bool = False,
        space_id: int = 1,
    ) -> int:
        """A new chat; `space_id`: the memory space it writes to (memory_core.spaces.component), reading only it."""
        now = self.db.clock() if created_at is None else float(created_at)
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO conversation(title, created_at, updated_at, source, external_id, incognito, space_id) "
                "VALUES (?,?,?,?,?,?,?)",
                (title, now, now, source, external_id, int(incognito), int(space_id)),
            )
            return self.db.last_insert_rowid()

    def insert_imported(self, title: str, created_at: float, updated_at: float, source: str | None) -> int:
        """A chat read from a memory cube (memory_core.cubes): its title, times and source, no messages."""
        self.db.execute(
            "INSERT INTO conversation(title, created_at, updated_at, source) VALUES (?,?,?,?)",
            (title, created_at, updated_at, source),
        )
        return self.db.last_insert_rowid()

    def drop_unused(self, cid: int) -> None:
        """Delete chat `cid`, which holds no message and no page (an undone import's): nothing of it to purge."""
        self.db.execute("DELETE FROM conversation WHERE id = ?", (cid,))

    def set_space(self, cid: int, space_id: int) -> None:
        """Chat `cid` writes to space `space_id` from now (memory_core.spaces checks the space)."""
        self.db.execute("UPDATE conversation SET space_id = ? WHERE id = ?", (space_id, cid))

    def set_read_spaces(self, cid: int, value: str | None) -> None:
        """What chat `cid` recalls from: None its own space, 'all', or a JSON list of space ids."""
        self.db.execute("UPDATE conversation SET read_spaces = ? WHERE id = ?", (value, cid))

    def move_space(self, ids: Sequence[int], space_id: int) -> None:
        for cid in ids:
            self.set_space(cid, space_id)

    def leave_space(self, space_id: int, to: int) -> None:
        """Every chat of space `space_id` writes to space `to` (the space goes)."""
        self.db.execute("UPDATE conversation SET space_id = ? WHERE space_id = ?", (to, space_id))

    def rename_conversation(self, cid: int, title: str) -> None:
        with self.db.transaction():
            self.db.execute("UPDATE conversation SET title = ? WHERE id = ?", (title, cid))

    def delete_conversation(self, cid: int) -> None:
        """Delete a conversation and its messages.

        Memory derived from it stays (the user forgets memory explicitly): its STM pages move to
        MTM first, and the pages' `conversation_id` becomes NULL. The messages leave no text in the
        file: their full-text entries are purged once this commits, and the span of time they
        existed is recorded for the backups that still hold them (memory_core.storage.purge).
        """
        with self.db.transaction():
            made = self.db.execute("SELECT created_at FROM conversation WHERE id = ?", (cid,)).fetchone()
            if made is None:
                return
            for (pid,) in self.db.execute(
                "SELECT id FROM page WHERE tier = 'stm' AND conversation_id = ? ORDER BY id", (cid,)
            ).fetchall():
                self.segments.move_to_mtm(pid)
            first = self.db.execute("SELECT min(created_at) FROM message WHERE conversation_id = ?", (cid,)).fetchone()
            self.db.execute("DELETE FROM conversation WHERE id = ?", (cid,))
            self.db.purge.note_fts(("message_fts",))
            self.db.purge.note_span(min(made[0], first[0]) if first[0] is not None else made[0])

    def get_conversation(self, cid: int) -> Conversation | None:
        r = self.db.one(f"SELECT {CONV_COLS} FROM conversation WHERE id = ?", (cid,))
        return self._conv(r) if r else None

    def list_conversations(self, limit: int = 100, offset: int = 0) -> list[Conversation]:
        rows = self.db.rows(
            f"SELECT {CONV_COLS} FROM conversation ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?", (limit, offset)
        )
        return [self._conv(r) for r in rows]

    def find_conversation(self, source: str, external_id: str) -> Conversation | None:
        r = self.db.one(
            f"SELECT {CONV_COLS} FROM conversation WHERE source IS ? AND external_id = ?", (source, external_id)
        )
        return self._conv(r) if r else None

    def search_conversations(self, text: str, limit: int = 50) -> list[tuple[Conversation, str]]:
        """Conversations whose title or messages contain `text` (case-insensitive, any language).

        Returns (conversation, snippet) pairs: title hits first (snippet = title), then message hits
        by relevance (snippet around the match, '…' where cut).
        """
        text = (text or "").strip()
        if not text:
            return []
        out: list[tuple[Conversation, str]] = []
        seen: set[int] = set()
        like = like_pattern(text)
        for r in self.db.rows(
            f"SELECT {CONV_COLS} FROM conversation WHERE title LIKE ? ESCAPE '\\' ORDER BY updated_at DESC LIMIT ?",
            (like, limit),
        ):
            out.append((self._conv(r), r[1]))
            seen.add(r[0])
        q = T.fts_and_query(text)
        if q is not None:
            rows = self.db.rows(
                "SELECT m.conversation_id, snippet(message_fts, 0, '', '', '…', 16) FROM message_fts "
                "JOIN message m ON m.id = message_fts.rowid WHERE message_fts MATCH ? ORDER BY rank LIMIT ?",
                (q, limit * 5),
            )
        else:
            rows = [
                (cid, T.truncate(content, 120))
                for cid, content in self.db.rows(
                    "SELECT conversation_id, content FROM message WHERE content LIKE ? ESCAPE '\\' "
                    "ORDER BY id DESC LIMIT ?",
                    (like, limit * 5),
                )
            ]
        for cid, snip in rows:
            if cid in seen or len(out) >= limit:
                continue
            conv = self.get_conversation(cid)
            if conv:
                seen.add(cid)
                out.append((conv, snip))
        return out[:limit]

    def set_conversation_flags(
        self, cid: int, *, memory_paused: bool | None = None, incognito: bool | None = None
    ) -> None:
        """memory_paused: pages of this conversation are not stored. incognito: same, and the UI may hide it."""
        with self.db.transaction():
            if memory_paused is not None:
                self.db.execute("UPDATE conversation SET memory_paused = ? WHERE id = ?", (int(memory_paused), cid))
            if incognito is not None:
                self.db.execute("UPDATE conversation SET incognito = ? WHERE id = ?", (int(incognito), cid))

    def _touch_conversation(self, cid: int, at: float) -> None:
        self.db.execute("UPDATE conversation SET updated_at = max(updated_at, ?) WHERE id = ?", (at, cid))

    # ------------------------------------------------------------------ messages
    def _msg(self, r: tuple) -> Message:
        return Message(r[0], r[1], r[2], r[3], r[4], r[5], r[6], from_json(r[7], {}))

    def add_message(
        self,
        cid: int,
        role: str,
        content: str,
        *,
        parent_id: Any = AUTO,
        created_at: float | None = None,
        status: str = "complete",
        meta: dict | None = None,
    ) -> int:
        """Append a message. Without `parent_id` it follows the conversation's current leaf (the newest
        message); pass `parent_id=<id>` to branch (regenerate / edit), or `parent_id=None` for a new root."""
        now = self.db.clock() if created_at is None else float(created_at)
        with self.db.transaction():
            if parent_id is AUTO:
                row = self.db.execute(
                    "SELECT id FROM message WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)
                ).fetchone()
                parent_id = row[0] if row else None
            elif parent_id is not None:
                prow = self.db.execute("SELECT conversation_id FROM message WHERE id = ?", (parent_id,)).fetchone()
                if not prow or prow[0] != cid:
                    raise ValueError(f"parent message {parent_id} is not in conversation {cid}")
            self.db.execute(
                "INSERT INTO message(conversation_id, parent_id, role, content, created_at, status, meta) "
                "VALUES (?,?,?,?,?,?,?)",
                (cid, parent_id, role, content, now, status, to_json(meta or {})),
            )
            mid = self.db.last_insert_rowid()
            self._touch_conversation(cid, now)
            return mid

    def update_message(
        self,
        mid: int,
        *,
        content: str | None = None,
        status: str | None = None,
        meta: dict | None = None,
        replace_meta: bool = False,
    ) -> None:
        """Update a message; `meta` is merged into the stored dict (or replaces it with replace_meta=True)."""
        with self.db.transaction():
            row = self.db.execute("SELECT meta, conversation_id FROM message WHERE id = ?", (mid,)).fetchone()
            if not row:
                raise KeyError(f"no message {mid}")
            if content is not None:
                self.db.execute("UPDATE message SET content = ? WHERE id = ?", (content, mid))
            if status is not None:
                self.db.execute("UPDATE message SET status = ? WHERE id = ?", (status, mid))
            if meta is not None:
                new = dict(meta) if replace_meta else {**from_json(row[0], {}), **meta}
                self.db.execute("UPDATE message SET meta = ? WHERE id = ?", (to_json(new), mid))
            self._touch_conversation(row[1], self.db.clock())

    def delete_message(self, mid: int) -> None:
        """Delete one message (its children re-attach to its parent)."""
        with self.db.transaction():
            row = self.db.execute("SELECT parent_id FROM message WHERE id = ?", (mid,)).fetchone()
            if row:
                self.db.execute("UPDATE message SET parent_id = ? WHERE parent_id = ?", (row[0], mid))
                self.db.execute("DELETE FROM message WHERE id = ?", (mid,))

    def get_message(self, mid: int) -> Message | None:
        r = self.db.one(f"SELECT {MSG_COLS} FROM message WHERE id = ?", (mid,))
        return self._msg(r) if r else None

    def list_messages(self, cid: int, leaf_id: int | None = None) -> list[Message]:
        """The current branch, root -> leaf. The leaf is the newest message unless `leaf_id` is given."""
        with self.db.lock:
            if leaf_id is None:
                leaf_id = self.db.scalar(
                    "SELECT id FROM message WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)
                )
            if leaf_id is None:
                return []
            rows = self.db.rows(
                f"""WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL
                       SELECT m.parent_id, up.depth + 1 FROM message m JOIN up ON m.id = up.id
                       WHERE m.parent_id IS NOT NULL AND up.depth < 100000)
                    SELECT {", ".join("m." + c.strip() for c in MSG_COLS.split(","))}
                    FROM up JOIN message m ON m.id = up.id WHERE m.conversation_id = ? ORDER BY up.depth DESC""",
                (leaf_id, cid),
            )
            return [self._msg(r) for r in rows]

    def list_messages_to(self, mid: int) -> list[Message]:
        """The branch from the root to message `mid` (inclusive), root first."""
        msg = self.get_message(mid)
        return [] if msg is None else self.list_messages(msg.conversation_id, leaf_id=mid)

    def all_messages(self, cid: int) -> list[Message]:
        """Every message of a conversation, every branch (regenerated replies, edits), oldest first."""
        rows = self.db.rows(f"SELECT {MSG_COLS} FROM message WHERE conversation_id = ? ORDER BY id", (cid,))
        return [self._msg(r) for r in rows]

    def list_messages_with_status(self, status: str, limit: int = 1000, *, unrecovered: bool = False) -> list[Message]:
        """Messages in `status` (e.g. replies left 'streaming' by a crash), oldest first; `unrecovered`:
        only those crash recovery has not handled yet (no `meta.recovered`), so the ones it handled
        long ago can never hide a new one behind `limit`."""
        skip = " AND NOT (json_valid(meta) AND coalesce(json_extract(meta, '$.recovered'), 0))" if unrecovered else ""
        rows = self.db.rows(
            f"SELECT {MSG_COLS} FROM message WHERE status = ?{skip} ORDER BY id LIMIT ?", (status, limit)
        )
        return [self._msg(r) for r in rows]

    def mark_interrupted_messages(self, from_status: str = "streaming", to_status: str = "interrupted") -> int:
        """After a crash: replies still marked `from_status` become `to_status` (their text is kept)."""
        with self.db.transaction():
            self.db.execute("UPDATE message SET status = ? WHERE status = ?", (to_status, from_status))
            return self.db.changes()

    def message_siblings(self, cid: int) -> dict[int, list[int]]:
        """For every message of a conversation that has alternatives (regenerated replies, edited
        messages), the ids of it and its alternatives, oldest first: message id -> sibling ids."""
        groups: dict[Any, list[int]] = {}
        for mid, parent in self.db.rows(
            "SELECT id, parent_id FROM message WHERE conversation_id = ? ORDER BY id", (cid,)
        ):
            groups.setdefault(parent, []).append(mid)
        return {mid: ids for ids in groups.values() if len(ids) > 1 for mid in ids}

    def message_children(self, mid: int) -> list[Message]:
        rows = self.db.rows(f"SELECT {MSG_COLS} FROM message WHERE parent_id = ? ORDER BY id", (mid,))
        return [self._msg(r) for r in rows]
