"""The persona's rows: traits and facts, their vectors and full-text rows, their history (archived
versions, the pages each version was drawn from: derivations), reverting to an earlier version, and
removing an item with its history.

This module owns the tables `trait`, `knowledge`, `knowledge_vec`, `knowledge_fts`, `knowledge_tri`,
`item_version` and `derivation` (memory_core.storage.tables): the persona's rules (persona.merge), the
user's edits (persona.component), spaces and memory cubes write them through the operations here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..pages.embedding import Embedding
from ..storage.codec import from_json, to_json, vec_blob
from ..storage.database import Database
from ..storage.fts import fts_del, fts_put

KINDS = ("trait", "knowledge")


def _kind(kind: str) -> str:
    """`kind` checked: it names a table in SQL."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    return kind


class Versions:
    def __init__(self, db: Database, embedding: Embedding):
        self.db = db
        self.embedding = embedding

    # ------------------------------------------------------------------ the items' rows
    def insert(self, kind: str, row: dict[str, Any], vec: np.ndarray) -> int:
        """A new trait or fact of these columns, its vector `vec` (a trait keeps it in its row, a fact in
        knowledge_vec) and a fact's words. Returns its id."""
        table = _kind(kind)
        if table == "trait":
            row = {**row, "embedding": vec_blob(vec)}
        cols = list(row)
        self.db.execute(
            f"INSERT INTO {table}({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})", [row[c] for c in cols]
        )
        iid = self.db.last_insert_rowid()
        if table == "knowledge":
            self.db.execute("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (iid, vec_blob(vec)))
            fts_put(self.db, "knowledge_fts", "knowledge_tri", iid, row["text"])
        return iid

    def update(self, kind: str, iid: int, values: dict[str, Any], vec: np.ndarray | None = None) -> None:
        """Set these columns of item `iid`; `vec`, its new vector. A fact's new text is indexed (the words of
        the old one leave the index when the caller notes it: `db.purge.note_fts`)."""
        table = _kind(kind)
        if vec is not None and table == "trait":
            values = {**values, "embedding": vec_blob(vec)}
        if values:
            sets = ", ".join(f"{c} = ?" for c in values)
            self.db.execute(f"UPDATE {table} SET {sets} WHERE id = ?", [*values.values(), iid])
        if vec is not None and table == "knowledge":
            self.set_vector(kind, iid, vec)
        if table == "knowledge" and "text" in values:
            fts_put(self.db, "knowledge_fts", "knowledge_tri", iid, values["text"])

    def set_vector(self, kind: str, iid: int, vec: np.ndarray) -> None:
        """Item `iid`'s vector (a re-embedding, a new text)."""
        if _kind(kind) == "trait":
            self.db.execute("UPDATE trait SET embedding = ? WHERE id = ?", (vec_blob(vec), iid))
            return
        self.db.execute("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (iid,))
        self.db.execute("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (iid, vec_blob(vec)))

    def set_pinned(self, kind: str, iid: int, pinned: bool) -> bool:
        """Pin or unpin item `iid`; whether it exists."""
        table = _kind(kind)
        self.db.execute(f"UPDATE {table} SET pinned = ? WHERE id = ?", (int(pinned), iid))
        return self.db.changes() > 0

    def move_space(self, kind: str, ids: Sequence[int], space_id: int) -> None:
        """These items now belong to space `space_id`."""
        table = _kind(kind)
        for iid in ids:
            self.db.execute(f"UPDATE {table} SET space_id = ? WHERE id = ?", (space_id, iid))

    def copy(self, kind: str, old: int, space_id: int) -> int:
        """A copy of item `old` in space `space_id`: the same text, vector and current sources, as its first
        version. Returns its id."""
        table = _kind(kind)
        cols = [r[1] for r in self.db.rows(f"PRAGMA table_info({table})") if r[1] not in ("id", "space_id")]
        self.db.execute(
            f"INSERT INTO {table}({', '.join(cols)}, space_id) SELECT {', '.join(cols)}, ? FROM {table} WHERE id = ?",
            (space_id, old),
        )
        nid = self.db.last_insert_rowid()
        self.db.execute(f"UPDATE {table} SET version = 1, reason = ? WHERE id = ?", (f"copied from {kind} {old}", nid))
        self.db.execute(
            "INSERT OR IGNORE INTO derivation(item_kind, item_id, version, page_id) SELECT item_kind, ?, 1, "
            f"page_id FROM derivation WHERE item_kind = ? AND item_id = ? AND version = "
            f"(SELECT version FROM {table} WHERE id = ?)",
            (nid, kind, old, old),
        )
        if table == "knowledge":
            vec = self.db.scalar("SELECT embedding FROM knowledge_vec WHERE knowledge_id = ?", (old,))
            if vec is not None:
                self.db.execute("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (nid, vec))
            text = str(self.db.scalar("SELECT text FROM knowledge WHERE id = ?", (nid,)))
            fts_put(self.db, "knowledge_fts", "knowledge_tri", nid, text)
        return nid

    def drop_conversation(self, cid: int) -> None:
        """No item names conversation `cid` as a source any more (its memory was forgotten)."""
        for table in KINDS:
            for iid, cids in self.db.execute(
                f"SELECT id, conversation_ids FROM {table} WHERE EXISTS "
                "(SELECT 1 FROM json_each(conversation_ids) WHERE value = ?)",
                (cid,),
            ).fetchall():
                self.db.execute(
                    f"UPDATE {table} SET conversation_ids = ? WHERE id = ?",
                    (to_json([c for c in from_json(cids, []) if c != cid]), iid),
                )

    # ------------------------------------------------------------------ history
    def archive(
        self, kind: str, iid: int, text: str, created_at: float, reason: str, detail: dict, version: int
    ) -> None:
        self.put_version(kind, iid, version, text, created_at, self.db.clock(), reason, detail)

    def put_version(
        self,
        kind: str,
        iid: int,
        version: int,
        text: str,
        created_at: float,
        archived_at: float,
        reason: str,
        detail: dict,
    ) -> None:
        """An archived version of item `iid` (`archive` for the current one as it leaves; a cube's history)."""
        self.db.execute(
            "INSERT INTO item_version(item_kind, item_id, version, text, created_at, archived_at, reason, detail) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (kind, iid, version, text, created_at, archived_at, reason, to_json(detail)),
        )

    def drop_history_from(self, kind: str, iid: int, version: int) -> None:
        """Item `iid`'s archived versions from `version` on go, and the sources of the versions after it."""
        self.db.execute(
            "DELETE FROM item_version WHERE item_kind = ? AND item_id = ? AND version >= ?", (kind, iid, version)
        )
        self.db.execute(
            "DELETE FROM derivation WHERE item_kind = ? AND item_id = ? AND version > ?", (kind, iid, version)
        )

    def move_derivations(self, pairs: Iterable[tuple[int, int]]) -> None:
        """For each (dropped, kept) page pair: what was drawn from the dropped page is drawn from the kept one."""
        for dropped, kept in pairs:
            self.db.execute("UPDATE OR IGNORE derivation SET page_id = ? WHERE page_id = ?", (kept, dropped))
            self.db.execute("DELETE FROM derivation WHERE page_id = ?", (dropped,))

    def derive(self, kind: str, iid: int, version: int, page_ids: Iterable[int]) -> None:
        for p in sorted(set(page_ids)):
            self.db.execute(
                "INSERT OR IGNORE INTO derivation(item_kind, item_id, version, page_id) VALUES (?,?,?,?)",
                (kind, iid, version, p),
            )

    def sources(self, kind: str, iid: int, version: int) -> list[int]:
        return [
            r[0]
            for r in self.db.execute(
                "SELECT page_id FROM derivation WHERE item_kind = ? AND item_id = ? AND version = ?",
                (kind, iid, version),
            ).fetchall()
        ]

    def revert(self, kind: str, iid: int, *, reason: str = "reverted: newer version's sources were forgotten") -> None:
        """Make the newest archived version current again (its source pages survive)."""
        row = self.db.execute(
            "SELECT version, text, detail FROM item_version WHERE item_kind = ? AND item_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (kind, iid),
        ).fetchone()
        if row is None:
            self.delete_item(kind, iid)
            return
        version, text, detail_s = row
        detail = from_json(detail_s, {})
        # the text it had goes: traces that quoted it drop it, and the full-text index its words
        made = self.db.execute(f"SELECT created_at FROM {kind} WHERE id = ?", (iid,)).fetchone()
        self.db.purge.note(kind, [iid], made[0] if made else None)
        if kind == "knowledge":
            self.db.purge.note_fts(("knowledge_fts", "knowledge_tri"))
        vec_text = text if kind == "knowledge" else f"{detail.get('dimension', '')}: {text}"
        vec = self.embedding.embed([vec_text])[0]
        now = self.db.clock()
        confidence = float(detail.get("confidence", 0.5))
        if kind == "knowledge":
            values = {"text": text, "version": version, "confidence": confidence, "updated_at": now, "reason": reason}
        else:
            values = {
                "value": text,
                "version": version,
                "confidence": confidence,
                "evidence": detail.get("evidence", ""),
                "updated_at": now,
                "reason": reason,
            }
        self.update(kind, iid, values, vec)
        self.db.execute(
            "DELETE FROM item_version WHERE item_kind = ? AND item_id = ? AND version = ?", (kind, iid, version)
        )
        self.db.execute(
            "DELETE FROM derivation WHERE item_kind = ? AND item_id = ? AND version > ?", (kind, iid, version)
        )

    def delete_item(self, kind: str, iid: int) -> None:
        """Remove a trait or fact with its versions, vector and full-text rows (replies' traces drop its
        text when the transaction commits: memory_core.storage.purge)."""
        row = self.db.execute(f"SELECT created_at FROM {kind} WHERE id = ?", (iid,)).fetchone()
        if row is not None:
            self.db.purge.note(kind, [iid], row[0])
        self.db.execute("DELETE FROM derivation WHERE item_kind = ? AND item_id = ?", (kind, iid))
        self.db.execute("DELETE FROM item_version WHERE item_kind = ? AND item_id = ?", (kind, iid))
        if kind == "knowledge":
            self.db.execute("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (iid,))
            fts_del(self.db, "knowledge_fts", "knowledge_tri", iid)
        table = _kind(kind)
        self.db.execute(f"DELETE FROM {table} WHERE id = ?", (iid,))

    def sources_touching(self, pages: set[int]) -> dict[tuple[str, int], dict[int, set[int]]]:
        """For every trait or knowledge item drawn from any of `pages`: its source pages by version
        (all of them, not only those in `pages`), in one query."""
        if not pages:
            return {}
        ids = sorted(pages)
        marks = ",".join("?" * len(ids))
        out: dict[tuple[str, int], dict[int, set[int]]] = {}
        for kind, iid, version, page in self.db.execute(
            "SELECT d.item_kind, d.item_id, d.version, d.page_id FROM derivation d JOIN "
            f"(SELECT DISTINCT item_kind, item_id FROM derivation WHERE page_id IN ({marks})) t "
            "ON d.item_kind = t.item_kind AND d.item_id = t.item_id ORDER BY d.item_kind, d.item_id",
            ids,
        ).fetchall():
            out.setdefault((kind, iid), {}).setdefault(version, set()).add(page)
        return out

    def derived_only_from(self, gone: set[int]) -> list[tuple[str, int]]:
        """The traits and knowledge items whose every source page is in `gone`."""
        return [
            item
            for item, by_version in self.sources_touching(gone).items()
            if set().union(*by_version.values()) <= gone
        ]

    def forget_derived(self, gone: set[int]) -> None:
        ids = sorted(gone)
        marks = ",".join("?" * len(ids))
        for (kind, iid), by_version in self.sources_touching(gone).items():
            all_pages = set().union(*by_version.values())
            if not (all_pages - gone):
                self.delete_item(kind, iid)
                self.db.emit("forgotten", kind, iid, f"{kind} {iid} forgotten with its source pages")
                continue
            self.db.execute(
                f"DELETE FROM derivation WHERE item_kind = ? AND item_id = ? AND page_id IN ({marks})",
                [kind, iid, *ids],
            )
            dead = {v for v, ps in by_version.items() if ps and ps <= gone}
            cur = self.db.execute(f"SELECT version FROM {kind} WHERE id = ?", (iid,)).fetchone()[0]
            for v in dead - {cur}:
                self.db.execute(
                    "DELETE FROM item_version WHERE item_kind = ? AND item_id = ? AND version = ?", (kind, iid, v)
                )
            if cur in dead:
                self.revert(kind, iid)
