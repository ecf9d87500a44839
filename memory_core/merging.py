"""How a new trait or fact joins the persona: a duplicate confirms the item it repeats, a newer value of the
same thing updates it (the old text becomes an archived version), anything else is added."""

from __future__ import annotations

import numpy as np

from . import extract as X
from .codec import from_json, to_json, vec_blob
from .database import Database
from .fts import fts_put
from .text import materially_different, normalize, same_attribute
from .versions import Versions


def pages_label(ids: list[int]) -> str:
    ids = sorted(ids)
    head = ", ".join(str(i) for i in ids[:5])
    return f"page{'s' if len(ids) != 1 else ''} {head}{'…' if len(ids) > 5 else ''}"


def origin(verb: str, page_ids: list[int], source: str) -> str:
    """Why an item exists or has a new version: "extracted from pages 3, 4", "confirmed by pages 5", or,
    without source pages, who wrote it: "added by the user", "updated from ChatGPT custom instructions",
    "added via MCP: Claude Desktop" (a source that says its own preposition keeps it)."""
    if page_ids:
        return f"{verb} {'by' if verb == 'confirmed' else 'from'} {pages_label(page_ids)}"
    if source == "user":
        return f"{verb} by the user"
    return f"{verb} {source}" if source.startswith("via ") else f"{verb} from {source}"


class PersonaMerge:
    def __init__(self, db: Database, versions: Versions):
        self.db = db
        self.versions = versions

    def upsert_knowledge(
        self,
        owner: str,
        text: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        conversation_ids: set,
        model: str,
    ) -> bool:
        """Add a fact, or update the existing one it duplicates/contradicts (archiving the old version).
        Returns True when something changed."""
        now = self.db.clock()
        best, duplicate, update = self._knowledge_match(owner, text, vec, model)
        cids = sorted(c for c in conversation_ids if c is not None)
        if best is not None and (duplicate or update):
            return self._revise_knowledge(best, duplicate, text, confidence, page_ids, vec, cids, model, now)
        self._insert_knowledge(owner, text, confidence, page_ids, vec, cids, model, now)
        return True

    def _knowledge_match(
        self, owner: str, text: str, vec: np.ndarray, model: str
    ) -> tuple[tuple[int, float, tuple] | None, bool, bool]:
        """The active fact of `owner` that `text` repeats or updates, if any: (its id, cosine and row),
        whether it is a duplicate, whether an update."""
        p = self.db.params
        knn = self.db.execute(
            "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = 8", (vec_blob(vec),)
        ).fetchall()
        rows = {
            r[0]: r[1:]
            for r in self.db.execute(
                "SELECT id, owner, status, pinned, text, version, confidence, conversation_ids, model, updated_at, reason "
                "FROM knowledge WHERE id IN (SELECT value FROM json_each(?))",
                (to_json([k for k, _ in knn]),),
            )
        }
        # the nearest active facts of this owner, nearest first
        near = [
            (kid, 1.0 - float(dist), rows[kid])
            for kid, dist in knn
            if kid in rows and rows[kid][0] == owner and rows[kid][1] == "active"
        ]
        best = near[0] if near else None
        # duplicate: near-identical and not materially different; update (a contradiction or a newer
        # state of the same fact): similar enough, or the same attribute with a new value ("I live in
        # Porto" → "I live in Lyon now", similarity 0.5). The extractive path quotes events, which it
        # cannot tell from updates, so it only ever confirms duplicates.
        duplicate = update = False
        if best is not None:
            old_text = best[2][3]
            same = normalize(old_text) == normalize(text)
            differs = not same and materially_different(old_text, text)
            duplicate = same or (best[1] >= p.persona.duplicate_threshold and not differs)
            update = not duplicate and model != "extractive" and best[1] >= p.persona.update_threshold
            if not duplicate and not update and model != "extractive":
                match = next((c for c in near if same_attribute(c[2][3], text)), None)
                if match is not None:
                    best, update = match, True
        return best, duplicate, update

    def _revise_knowledge(
        self,
        best: tuple[int, float, tuple],
        duplicate: bool,
        text: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        cids: list[int],
        model: str,
        now: float,
    ) -> bool:
        """Confirm (a duplicate) or update the fact `best`; a pinned fact is not updated (False)."""
        kid, cos, row = best
        _, _, pinned, old_text, version, old_conf, old_cids, old_model, old_updated, old_reason = row
        if pinned and not duplicate:
            self.db.emit(
                "update_skipped",
                "knowledge",
                kid,
                f"knowledge {kid} is pinned; a conflicting fact was not applied",
                {"similarity": round(cos, 4), "pages": sorted(page_ids)},
            )
            return False
        old_srcs = self.versions.sources("knowledge", kid, version)
        self.versions.archive(
            "knowledge",
            kid,
            old_text,
            old_updated,
            old_reason,
            {"confidence": old_conf, "model": old_model, "source_page_ids": old_srcs},
            version,
        )
        new_version = version + 1
        all_cids = sorted(set(from_json(old_cids, [])) | set(cids))
        if duplicate:
            self._confirm(
                "knowledge",
                kid,
                f"knowledge {kid}",
                new_version,
                max(old_conf, confidence),
                all_cids,
                f"{origin('confirmed', page_ids, model)} (similarity {cos:.2f})",
                now,
                [*old_srcs, *page_ids],
                {"similarity": round(cos, 4)},
                page_ids,
            )
        else:
            reason = f"{origin('updated', page_ids, model)} (similarity {cos:.2f} to v{version})"
            self.db.execute(
                "UPDATE knowledge SET text = ?, version = ?, confidence = ?, conversation_ids = ?, "
                "model = ?, updated_at = ?, reason = ? WHERE id = ?",
                (text, new_version, confidence, to_json(all_cids), model, now, reason, kid),
            )
            self.db.execute("UPDATE knowledge_vec SET embedding = ? WHERE knowledge_id = ?", (vec_blob(vec), kid))
            fts_put(self.db, "knowledge_fts", "knowledge_tri", kid, text)
            self.versions.derive("knowledge", kid, new_version, page_ids)
            self.db.emit(
                "knowledge_updated",
                "knowledge",
                kid,
                f"knowledge {kid} updated (v{new_version})",
                {"version": new_version, "similarity": round(cos, 4), "pages": sorted(page_ids)},
            )
        return True

    def _insert_knowledge(
        self,
        owner: str,
        text: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        cids: list[int],
        model: str,
        now: float,
    ) -> None:
        reason = origin("extracted" if page_ids else "added", page_ids, model)
        self.db.execute(
            "INSERT INTO knowledge(owner, text, confidence, status, version, created_at, updated_at, "
            "conversation_ids, model, reason) VALUES (?,?,?, 'active', 1, ?,?,?,?,?)",
            (owner, text, confidence, now, now, to_json(cids), model, reason),
        )
        kid = self.db.last_insert_rowid()
        self.db.execute("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (kid, vec_blob(vec)))
        fts_put(self.db, "knowledge_fts", "knowledge_tri", kid, text)
        self.versions.derive("knowledge", kid, 1, page_ids)
        self.db.emit(
            "knowledge_added",
            "knowledge",
            kid,
            f"{owner} knowledge {kid} added",
            {"owner": owner, "pages": sorted(page_ids), "model": model},
        )

    def _confirm(
        self,
        kind: str,
        item_id: int,
        label: str,
        version: int,
        confidence: float,
        cids: list[int],
        reason: str,
        now: float,
        sources: list[int],
        data: dict,
        page_ids: list[int],
    ) -> None:
        """A duplicate of an active persona item (trait or knowledge) confirms it: a new version with the
        same text, more confidence (+0.1, at most 0.99), the union of conversations and sources."""
        self.db.execute(
            f"UPDATE {kind} SET version = ?, confidence = ?, conversation_ids = ?, updated_at = ?, reason = ? "
            "WHERE id = ?",
            (version, min(0.99, confidence + 0.1), to_json(cids), now, reason, item_id),
        )
        self.versions.derive(kind, item_id, version, sources)
        self.db.emit(
            f"{kind}_confirmed",
            kind,
            item_id,
            f"{label} confirmed (v{version})",
            {"version": version, **data, "pages": sorted(page_ids)},
        )

    def upsert_trait(
        self,
        dimension: str,
        value: str,
        evidence: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        conversation_ids: set,
        model: str,
    ) -> bool:
        """Add a trait, or confirm/update the active one of its dimension it repeats or changes. Returns True
        when something changed."""
        now = self.db.clock()
        target, cos, duplicate = self._trait_match(dimension, value, vec)
        cids = sorted(c for c in conversation_ids if c is not None)
        if target is not None:
            return self._revise_trait(
                target, cos, duplicate, value, evidence, confidence, page_ids, vec, cids, model, now
            )
        return self._insert_trait(dimension, value, evidence, confidence, page_ids, vec, cids, model, now)

    def _trait_match(self, dimension: str, value: str, vec: np.ndarray) -> tuple[tuple | None, float, bool]:
        """The active trait `value` repeats (a duplicate) or changes, if any: (its row, cosine, duplicate)."""
        p = self.db.params
        rows = self.db.execute(
            "SELECT id, dimension, value, embedding, version, pinned, confidence, evidence, "
            "conversation_ids, model, updated_at, reason FROM trait WHERE status = 'active'"
        ).fetchall()
        target, cos, duplicate = None, 0.0, False
        if rows:
            mat = np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
            sims = mat @ vec
            same = [i for i, r in enumerate(rows) if r[1] == dimension]
            exact = [i for i in same if normalize(rows[i][2]) == normalize(value)]
            near = [
                i
                for i in same
                if sims[i] >= p.persona.duplicate_threshold and not materially_different(rows[i][2], value)
            ]
            if exact:
                target, cos, duplicate = rows[exact[0]], float(sims[exact[0]]), True
            elif near:
                j = max(near, key=lambda i: sims[i])
                target, cos, duplicate = rows[j], float(sims[j]), True
            elif same:
                j = max(same, key=lambda i: sims[i])
                if dimension in X.SINGLE_VALUED or sims[j] >= p.persona.trait_update_threshold:
                    target, cos, duplicate = rows[j], float(sims[j]), False
        return target, cos, duplicate

    def _revise_trait(
        self,
        target: tuple,
        cos: float,
        duplicate: bool,
        value: str,
        evidence: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        cids: list[int],
        model: str,
        now: float,
    ) -> bool:
        """Confirm (a duplicate) or update trait `target`; a pinned trait is not updated (False)."""
        tid, tdim, old_value, _, version, pinned, old_conf, old_ev, old_cids, old_model, old_updated, old_reason = (
            target
        )
        if pinned and not duplicate:
            self.db.emit(
                "update_skipped",
                "trait",
                tid,
                f"trait {tid} is pinned; a conflicting value was not applied",
                {"similarity": round(cos, 4), "pages": sorted(page_ids)},
            )
            return False
        old_srcs = self.versions.sources("trait", tid, version)
        self.versions.archive(
            "trait",
            tid,
            old_value,
            old_updated,
            old_reason,
            {
                "dimension": tdim,
                "confidence": old_conf,
                "evidence": old_ev,
                "model": old_model,
                "source_page_ids": old_srcs,
            },
            version,
        )
        new_version = version + 1
        all_cids = sorted(set(from_json(old_cids, [])) | set(cids))
        if duplicate:
            self._confirm(
                "trait",
                tid,
                f"trait {tid} ({tdim})",
                new_version,
                max(old_conf, confidence),
                all_cids,
                origin("confirmed", page_ids, model),
                now,
                [*old_srcs, *page_ids],
                {},
                page_ids,
            )
        else:
            reason = f"{origin('updated', page_ids, model)} (was v{version})"
            self.db.execute(
                "UPDATE trait SET value = ?, evidence = ?, confidence = ?, version = ?, conversation_ids = ?, "
                "model = ?, updated_at = ?, reason = ?, embedding = ? WHERE id = ?",
                (value, evidence, confidence, new_version, to_json(all_cids), model, now, reason, vec_blob(vec), tid),
            )
            self.versions.derive("trait", tid, new_version, page_ids)
            self.db.emit(
                "trait_updated",
                "trait",
                tid,
                f"trait {tid} ({tdim}) updated (v{new_version})",
                {"version": new_version, "similarity": round(cos, 4), "pages": sorted(page_ids)},
            )
        return True

    def _insert_trait(
        self,
        dimension: str,
        value: str,
        evidence: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        cids: list[int],
        model: str,
        now: float,
    ) -> bool:
        """A new trait; a full persona archives its least confident unpinned trait first (False when
        every trait is pinned)."""
        p = self.db.params
        # cap the persona: archive the least confident unpinned trait when full
        n = self.db.execute("SELECT count(*) FROM trait WHERE status = 'active'").fetchone()[0]
        if n >= p.persona.max_traits:
            old = self.db.execute(
                "SELECT id FROM trait WHERE status = 'active' AND pinned = 0 ORDER BY confidence, updated_at LIMIT 1"
            ).fetchone()
            if old is None:
                return False
            self.db.execute("UPDATE trait SET status = 'archived', updated_at = ? WHERE id = ?", (now, old[0]))
            self.db.emit("trait_archived", "trait", old[0], f"trait {old[0]} archived (persona full)")
        reason = origin("extracted" if page_ids else "added", page_ids, model)
        self.db.execute(
            "INSERT INTO trait(dimension, value, evidence, confidence, status, version, created_at, updated_at, "
            "conversation_ids, model, reason, embedding) VALUES (?,?,?,?, 'active', 1, ?,?,?,?,?,?)",
            (dimension, value, evidence, confidence, now, now, to_json(cids), model, reason, vec_blob(vec)),
        )
        tid = self.db.last_insert_rowid()
        self.versions.derive("trait", tid, 1, page_ids)
        self.db.emit("trait_added", "trait", tid, f"trait {tid} ({dimension}) added", {"pages": sorted(page_ids)})
        return True
