"""The history of persona items (traits and facts): archived versions, the pages each version was drawn
from (derivations), reverting to an earlier version, and removing an item with its history."""

from __future__ import annotations

from ..pages.embedding import Embedding
from ..storage.codec import from_json, to_json, vec_blob
from ..storage.database import Database
from ..storage.fts import fts_del, fts_put


class Versions:
    def __init__(self, db: Database, embedding: Embedding):
        self.db = db
        self.embedding = embedding

    def archive(
        self, kind: str, iid: int, text: str, created_at: float, reason: str, detail: dict, version: int
    ) -> None:
        self.db.execute(
            "INSERT INTO item_version(item_kind, item_id, version, text, created_at, archived_at, reason, detail) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (kind, iid, version, text, created_at, self.db.clock(), reason, to_json(detail)),
        )

    def derive(self, kind: str, iid: int, version: int, page_ids) -> None:
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
        if kind == "knowledge":
            self.db.execute(
                "UPDATE knowledge SET text = ?, version = ?, confidence = ?, updated_at = ?, reason = ? WHERE id = ?",
                (text, version, float(detail.get("confidence", 0.5)), now, reason, iid),
            )
            self.db.execute("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (iid,))
            self.db.execute("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (iid, vec_blob(vec)))
            fts_put(self.db, "knowledge_fts", "knowledge_tri", iid, text)
        else:
            self.db.execute(
                "UPDATE trait SET value = ?, version = ?, confidence = ?, evidence = ?, embedding = ?, "
                "updated_at = ?, reason = ? WHERE id = ?",
                (
                    text,
                    version,
                    float(detail.get("confidence", 0.5)),
                    detail.get("evidence", ""),
                    vec_blob(vec),
                    now,
                    reason,
                    iid,
                ),
            )
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
        self.db.execute(f"DELETE FROM {kind} WHERE id = ?", (iid,))

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
