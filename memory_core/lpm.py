"""Long-term persona memory: promotion of hot segments into traits and knowledge, versions, edits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import extract as X
from .codec import from_json as _pj
from .codec import to_json as _j
from .codec import vec_blob as _blob
from .text import materially_different, normalize, same_attribute


def _pages_label(ids: list[int]) -> str:
    ids = sorted(ids)
    head = ", ".join(str(i) for i in ids[:5])
    return f"page{'s' if len(ids) != 1 else ''} {head}{'…' if len(ids) > 5 else ''}"


def _origin(verb: str, page_ids: list[int], source: str) -> str:
    """Why an item exists or has a new version: "extracted from pages 3, 4", "confirmed by pages 5", or,
    without source pages, who wrote it: "added by the user", "updated from ChatGPT custom instructions"."""
    if page_ids:
        return f"{verb} {'by' if verb == 'confirmed' else 'from'} {_pages_label(page_ids)}"
    return f"{verb} by the user" if source == "user" else f"{verb} from {source}"


# A model whose persona answers were rejected this many promotions in a row (nothing it said was stated
# by the conversation, or no valid JSON: the bundled 135M model, every time) is not asked again for its
# model id until LLM_RETRY_AFTER_S have passed since its last rejection: each try cost seconds of
# generation for nothing. The count lives in the store's meta table, so a restart does not pay the
# three tries again; another model (another id) is asked at once.
LLM_REJECTIONS_BEFORE_SKIP = 3
LLM_RETRY_AFTER_S = 7 * 86400
_REJECTIONS_KEY = "llm_rejections"


class LpmMixin:
    # ------------------------------------------------------------------ promotion job
    def _job_promote_segment(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        sid = int(payload["segment_id"])
        rows = self._rows(
            "SELECT id, user_text, assistant_text, timestamp, conversation_id FROM page "
            "WHERE segment_id = ? AND analyzed = 0 ORDER BY id",
            (sid,),
        )
        if not rows:

            def nothing() -> None:
                self._x("UPDATE segment SET l_interaction = 0 WHERE id = ?", (sid,))

            return nothing
        pages = [X.PageText(r[0], r[1], r[2], r[3]) for r in rows]
        conv_of = {r[0]: r[4] for r in rows}
        model_id = self.llm_model_id
        rejected = self._llm_rejections_in_a_row(model_id)
        llm = self.llm if allow_llm and rejected < LLM_REJECTIONS_BEFORE_SKIP else None
        ext = X.extract(pages, llm=llm, llm_model_id=model_id)
        if llm is not None:
            rejected = rejected + 1 if ext.fallback_reason else 0
        texts = [f"{t.dimension}: {t.value}" for t in ext.traits] + [f.text for f in ext.facts]
        vecs = self._embed(texts) if texts else np.zeros((0, self.dim), np.float32)
        tvecs, fvecs = vecs[: len(ext.traits)], vecs[len(ext.traits) :]
        page_ids = [p.id for p in pages]

        def apply() -> None:
            if llm is not None:
                self._record_llm_rejections(model_id, rejected)
            if not self._x("SELECT 1 FROM segment WHERE id = ?", (sid,)).fetchone():
                return
            marks = ",".join("?" * len(page_ids))
            alive = {r[0] for r in self._x(f"SELECT id FROM page WHERE id IN ({marks})", page_ids).fetchall()}
            n_t = n_k = 0
            for item, vec in zip(ext.traits, tvecs):
                srcs = [p for p in item.page_ids if p in alive]
                if srcs and self._upsert_trait(
                    item.dimension,
                    item.value,
                    item.evidence,
                    item.confidence,
                    srcs,
                    vec,
                    {conv_of[p] for p in srcs},
                    ext.model,
                ):
                    n_t += 1
            _checkpoint_hook("promote:between_items")
            for fact, vec in zip(ext.facts, fvecs):
                srcs = [p for p in fact.page_ids if p in alive]
                if srcs and self._upsert_knowledge(
                    fact.owner, fact.text, fact.confidence, srcs, vec, {conv_of[p] for p in srcs}, ext.model
                ):
                    n_k += 1
            if alive:
                m2 = ",".join("?" * len(alive))
                self._x(f"UPDATE page SET analyzed = 1 WHERE id IN ({m2})", sorted(alive))
            self._x("UPDATE segment SET l_interaction = 0, promotions = promotions + 1 WHERE id = ?", (sid,))
            if ext.fallback_reason:
                summary = f"LLM output for segment {sid} was rejected; used the extractive path"
                if rejected == LLM_REJECTIONS_BEFORE_SKIP:
                    summary += (
                        f" (rejected {rejected} times in a row: the model is not asked again for "
                        f"{LLM_RETRY_AFTER_S // 86400} days, or until another model is chosen)"
                    )
                self._emit(
                    "llm_fallback",
                    "segment",
                    sid,
                    summary,
                    {"reason": ext.fallback_reason, "model": model_id, "in_a_row": rejected},
                )
            self._emit(
                "promoted",
                "segment",
                sid,
                f"segment {sid} promoted to long-term memory ({n_t} traits, {n_k} facts changed)",
                {"traits": n_t, "knowledge": n_k, "pages": sorted(alive), "model": ext.model},
            )

        return apply

    def _llm_rejections_in_a_row(self, model_id: str | None) -> int:
        """How many promotions in a row rejected this model's answer. Once LLM_RETRY_AFTER_S have passed
        since the last rejection, one short of the limit: the model is asked once more, and another
        rejection skips it for another week."""
        entry = self._llm_rejection_state().get(str(model_id))
        if not isinstance(entry, dict):
            return 0
        try:
            n, at = int(entry.get("in_a_row", 0)), float(entry.get("at", 0.0))
        except (TypeError, ValueError):
            return 0
        if n >= LLM_REJECTIONS_BEFORE_SKIP and self.clock() - at >= LLM_RETRY_AFTER_S:
            return LLM_REJECTIONS_BEFORE_SKIP - 1
        return n

    def _llm_rejection_state(self) -> dict:
        state = _pj(self._get_meta(_REJECTIONS_KEY), {})
        return state if isinstance(state, dict) else {}

    def _record_llm_rejections(self, model_id: str | None, in_a_row: int) -> None:
        state = self._llm_rejection_state()
        if in_a_row:
            state[str(model_id)] = {"in_a_row": in_a_row, "at": self.clock()}
        else:
            state.pop(str(model_id), None)
        self._set_meta(_REJECTIONS_KEY, _j(state))

    # ------------------------------------------------------------------ knowledge
    def _archive_version(
        self, kind: str, iid: int, text: str, created_at: float, reason: str, detail: dict, version: int
    ) -> None:
        self._x(
            "INSERT INTO item_version(item_kind, item_id, version, text, created_at, archived_at, reason, detail) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (kind, iid, version, text, created_at, self.clock(), reason, _j(detail)),
        )

    def _derive(self, kind: str, iid: int, version: int, page_ids) -> None:
        for p in sorted(set(page_ids)):
            self._x(
                "INSERT OR IGNORE INTO derivation(item_kind, item_id, version, page_id) VALUES (?,?,?,?)",
                (kind, iid, version, p),
            )

    def _sources(self, kind: str, iid: int, version: int) -> list[int]:
        return [
            r[0]
            for r in self._x(
                "SELECT page_id FROM derivation WHERE item_kind = ? AND item_id = ? AND version = ?",
                (kind, iid, version),
            ).fetchall()
        ]

    def _upsert_knowledge(
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
        p = self.params
        now = self.clock()
        knn = self._x(
            "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = 8", (_blob(vec),)
        ).fetchall()
        rows = {
            r[0]: r[1:]
            for r in self._x(
                "SELECT id, owner, status, pinned, text, version, confidence, conversation_ids, model, updated_at, reason "
                "FROM knowledge WHERE id IN (SELECT value FROM json_each(?))",
                (_j([k for k, _ in knn]),),
            )
        }
        # the nearest active facts of this owner, nearest first
        near = [
            (kid, 1.0 - float(dist), rows[kid])
            for kid, dist in knn
            if kid in rows and rows[kid][0] == owner and rows[kid][1] == "active"
        ]
        best = near[0] if near else None
        cids = sorted(c for c in conversation_ids if c is not None)
        # duplicate: near-identical and not materially different; update (a contradiction or a newer
        # state of the same fact): similar enough, or the same attribute with a new value ("I live in
        # Porto" → "I live in Lyon now", similarity 0.5). The extractive path quotes events, which it
        # cannot tell from updates, so it only ever confirms duplicates.
        duplicate = update = False
        if best is not None:
            old_text = best[2][3]
            same = normalize(old_text) == normalize(text)
            differs = not same and materially_different(old_text, text)
            duplicate = same or (best[1] >= p.duplicate_threshold and not differs)
            update = not duplicate and model != "extractive" and best[1] >= p.update_threshold
            if not duplicate and not update and model != "extractive":
                match = next((c for c in near if same_attribute(c[2][3], text)), None)
                if match is not None:
                    best, update = match, True
        if duplicate or update:
            kid, cos, row = best
            _, _, pinned, old_text, version, old_conf, old_cids, old_model, old_updated, old_reason = row
            if pinned and not duplicate:
                self._emit(
                    "update_skipped",
                    "knowledge",
                    kid,
                    f"knowledge {kid} is pinned; a conflicting fact was not applied",
                    {"similarity": round(cos, 4), "pages": sorted(page_ids)},
                )
                return False
            old_srcs = self._sources("knowledge", kid, version)
            self._archive_version(
                "knowledge",
                kid,
                old_text,
                old_updated,
                old_reason,
                {"confidence": old_conf, "model": old_model, "source_page_ids": old_srcs},
                version,
            )
            new_version = version + 1
            all_cids = sorted(set(_pj(old_cids, [])) | set(cids))
            if duplicate:
                self._confirm(
                    "knowledge",
                    kid,
                    f"knowledge {kid}",
                    new_version,
                    max(old_conf, confidence),
                    all_cids,
                    f"{_origin('confirmed', page_ids, model)} (similarity {cos:.2f})",
                    now,
                    [*old_srcs, *page_ids],
                    {"similarity": round(cos, 4)},
                    page_ids,
                )
            else:
                reason = f"{_origin('updated', page_ids, model)} (similarity {cos:.2f} to v{version})"
                self._x(
                    "UPDATE knowledge SET text = ?, version = ?, confidence = ?, conversation_ids = ?, "
                    "model = ?, updated_at = ?, reason = ? WHERE id = ?",
                    (text, new_version, confidence, _j(all_cids), model, now, reason, kid),
                )
                self._x("UPDATE knowledge_vec SET embedding = ? WHERE knowledge_id = ?", (_blob(vec), kid))
                self._fts_put("knowledge_fts", "knowledge_tri", kid, text)
                self._derive("knowledge", kid, new_version, page_ids)
                self._emit(
                    "knowledge_updated",
                    "knowledge",
                    kid,
                    f"knowledge {kid} updated (v{new_version})",
                    {"version": new_version, "similarity": round(cos, 4), "pages": sorted(page_ids)},
                )
            return True
        reason = _origin("extracted" if page_ids else "added", page_ids, model)
        self._x(
            "INSERT INTO knowledge(owner, text, confidence, status, version, created_at, updated_at, "
            "conversation_ids, model, reason) VALUES (?,?,?, 'active', 1, ?,?,?,?,?)",
            (owner, text, confidence, now, now, _j(cids), model, reason),
        )
        kid = self._conn.last_insert_rowid()
        self._x("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (kid, _blob(vec)))
        self._fts_put("knowledge_fts", "knowledge_tri", kid, text)
        self._derive("knowledge", kid, 1, page_ids)
        self._emit(
            "knowledge_added",
            "knowledge",
            kid,
            f"{owner} knowledge {kid} added",
            {"owner": owner, "pages": sorted(page_ids), "model": model},
        )
        return True

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
        self._x(
            f"UPDATE {kind} SET version = ?, confidence = ?, conversation_ids = ?, updated_at = ?, reason = ? "
            "WHERE id = ?",
            (version, min(0.99, confidence + 0.1), _j(cids), now, reason, item_id),
        )
        self._derive(kind, item_id, version, sources)
        self._emit(
            f"{kind}_confirmed",
            kind,
            item_id,
            f"{label} confirmed (v{version})",
            {"version": version, **data, "pages": sorted(page_ids)},
        )

    # ------------------------------------------------------------------ traits
    def _upsert_trait(
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
        p = self.params
        now = self.clock()
        rows = self._x(
            "SELECT id, dimension, value, embedding, version, pinned, confidence, evidence, "
            "conversation_ids, model, updated_at, reason FROM trait WHERE status = 'active'"
        ).fetchall()
        target, cos, duplicate = None, 0.0, False
        if rows:
            mat = np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
            sims = mat @ vec
            same = [i for i, r in enumerate(rows) if r[1] == dimension]
            exact = [i for i in same if normalize(rows[i][2]) == normalize(value)]
            near = [i for i in same if sims[i] >= p.duplicate_threshold and not materially_different(rows[i][2], value)]
            if exact:
                target, cos, duplicate = rows[exact[0]], float(sims[exact[0]]), True
            elif near:
                j = max(near, key=lambda i: sims[i])
                target, cos, duplicate = rows[j], float(sims[j]), True
            elif same:
                j = max(same, key=lambda i: sims[i])
                if dimension in X.SINGLE_VALUED or sims[j] >= p.trait_update_threshold:
                    target, cos, duplicate = rows[j], float(sims[j]), False
        cids = sorted(c for c in conversation_ids if c is not None)
        if target is not None:
            tid, tdim, old_value, _, version, pinned, old_conf, old_ev, old_cids, old_model, old_updated, old_reason = (
                target
            )
            if pinned and not duplicate:
                self._emit(
                    "update_skipped",
                    "trait",
                    tid,
                    f"trait {tid} is pinned; a conflicting value was not applied",
                    {"similarity": round(cos, 4), "pages": sorted(page_ids)},
                )
                return False
            old_srcs = self._sources("trait", tid, version)
            self._archive_version(
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
            all_cids = sorted(set(_pj(old_cids, [])) | set(cids))
            if duplicate:
                self._confirm(
                    "trait",
                    tid,
                    f"trait {tid} ({tdim})",
                    new_version,
                    max(old_conf, confidence),
                    all_cids,
                    _origin("confirmed", page_ids, model),
                    now,
                    [*old_srcs, *page_ids],
                    {},
                    page_ids,
                )
            else:
                reason = f"{_origin('updated', page_ids, model)} (was v{version})"
                self._x(
                    "UPDATE trait SET value = ?, evidence = ?, confidence = ?, version = ?, conversation_ids = ?, "
                    "model = ?, updated_at = ?, reason = ?, embedding = ? WHERE id = ?",
                    (value, evidence, confidence, new_version, _j(all_cids), model, now, reason, _blob(vec), tid),
                )
                self._derive("trait", tid, new_version, page_ids)
                self._emit(
                    "trait_updated",
                    "trait",
                    tid,
                    f"trait {tid} ({tdim}) updated (v{new_version})",
                    {"version": new_version, "similarity": round(cos, 4), "pages": sorted(page_ids)},
                )
            return True
        # cap the persona: archive the least confident unpinned trait when full
        n = self._x("SELECT count(*) FROM trait WHERE status = 'active'").fetchone()[0]
        if n >= p.max_traits:
            old = self._x(
                "SELECT id FROM trait WHERE status = 'active' AND pinned = 0 ORDER BY confidence, updated_at LIMIT 1"
            ).fetchone()
            if old is None:
                return False
            self._x("UPDATE trait SET status = 'archived', updated_at = ? WHERE id = ?", (now, old[0]))
            self._emit("trait_archived", "trait", old[0], f"trait {old[0]} archived (persona full)")
        reason = _origin("extracted" if page_ids else "added", page_ids, model)
        self._x(
            "INSERT INTO trait(dimension, value, evidence, confidence, status, version, created_at, updated_at, "
            "conversation_ids, model, reason, embedding) VALUES (?,?,?,?, 'active', 1, ?,?,?,?,?,?)",
            (dimension, value, evidence, confidence, now, now, _j(cids), model, reason, _blob(vec)),
        )
        tid = self._conn.last_insert_rowid()
        self._derive("trait", tid, 1, page_ids)
        self._emit("trait_added", "trait", tid, f"trait {tid} ({dimension}) added", {"pages": sorted(page_ids)})
        return True

    # ------------------------------------------------------------------ user-authored items and edits
    def add_knowledge(
        self, owner: str, text: str, *, pinned: bool = False, source: str = "user", skip_existing: bool = False
    ) -> int | None:
        """Add a fact written by the user (no source pages). A near-duplicate updates the existing item.
        `source` names where the user wrote it (an import); with `skip_existing`, a fact already held
        word for word is left as it is (None): importing the same file again confirms nothing."""
        if owner not in ("user", "assistant"):
            raise ValueError("owner must be 'user' or 'assistant'")
        text = X.clean_item(text)
        if not text:
            raise ValueError("not a usable fact")
        if (
            skip_existing
            and self._x(
                "SELECT 1 FROM knowledge WHERE owner = ? AND status = 'active' AND lower(text) = lower(?)",
                (owner, text),
            ).fetchone()
        ):
            return None
        vec = self._embed([text])[0]
        with self.transaction():
            mark = len(self._pending_events)
            self._upsert_knowledge(owner, text, 0.9, [], vec, set(), source)
            kid = self._affected("knowledge", mark)
            if pinned:
                self._x("UPDATE knowledge SET pinned = 1 WHERE id = ?", (kid,))
            return kid

    def add_trait(
        self, dimension: str, value: str, *, pinned: bool = False, source: str = "user", skip_existing: bool = False
    ) -> int | None:
        """Add a trait written by the user; `source` and `skip_existing` as for `add_knowledge`."""
        dim = X._clean_dimension(dimension)
        val = X.clean_item(value, 200)
        if not dim or not val:
            raise ValueError("not a usable trait")
        if (
            skip_existing
            and self._x(
                "SELECT 1 FROM trait WHERE dimension = ? AND value = ? AND status = 'active'", (dim, val)
            ).fetchone()
        ):
            return None
        vec = self._embed([f"{dim}: {val}"])[0]
        with self.transaction():
            mark = len(self._pending_events)
            self._upsert_trait(dim, val, "", 0.9, [], vec, set(), source)
            tid = self._affected("trait", mark)
            if tid is None:  # the persona is full of pinned traits: nothing was added
                raise ValueError("the persona is full and every trait in it is pinned")
            if pinned:
                self._x("UPDATE trait SET pinned = 1 WHERE id = ?", (tid,))
            return tid

    def _affected(self, kind: str, mark: int) -> int | None:
        """The item an upsert added, confirmed, updated or (pinned) left as it was: the last event it
        logged for an item of `kind` after `mark` (the nearest vector is not always that item)."""
        for e in reversed(self._pending_events[mark:]):
            if e.item_kind == kind:
                return e.item_id
        return None

    def edit_knowledge(self, kid: int, text: str) -> None:
        """Correct a fact: the old text becomes an archived version; re-embeds and re-indexes."""
        clean = X.clean_item(text)
        if not clean:
            raise ValueError("not a usable fact")
        vec = self._embed([clean])[0]
        with self.transaction():
            row = self._x(
                "SELECT text, version, confidence, model, updated_at, reason FROM knowledge WHERE id = ?", (kid,)
            ).fetchone()
            if row is None:
                raise KeyError(f"no knowledge {kid}")
            old_text, version, conf, model, updated, reason = row
            self._archive_version(
                "knowledge",
                kid,
                old_text,
                updated,
                reason,
                {"confidence": conf, "model": model, "source_page_ids": self._sources("knowledge", kid, version)},
                version,
            )
            self._x(
                "UPDATE knowledge SET text = ?, version = ?, confidence = 0.95, model = 'user', updated_at = ?, "
                "reason = 'edited by the user' WHERE id = ?",
                (clean, version + 1, self.clock(), kid),
            )
            self._x("UPDATE knowledge_vec SET embedding = ? WHERE knowledge_id = ?", (_blob(vec), kid))
            self._fts_put("knowledge_fts", "knowledge_tri", kid, clean)
            self._emit("edited", "knowledge", kid, f"knowledge {kid} edited by the user (v{version + 1})")

    def edit_trait(self, tid: int, value: str, *, dimension: str | None = None) -> None:
        val = X.clean_item(value, 200)
        if not val:
            raise ValueError("not a usable trait value")
        with self._lock:
            row = self._one("SELECT dimension FROM trait WHERE id = ?", (tid,))
            if row is None:
                raise KeyError(f"no trait {tid}")
            dim = X._clean_dimension(dimension) if dimension else row[0]
        vec = self._embed([f"{dim}: {val}"])[0]
        with self.transaction():
            r = self._x(
                "SELECT dimension, value, evidence, version, confidence, model, updated_at, reason FROM trait "
                "WHERE id = ?",
                (tid,),
            ).fetchone()
            odim, old_value, ev, version, conf, model, updated, reason = r
            self._archive_version(
                "trait",
                tid,
                old_value,
                updated,
                reason,
                {
                    "dimension": odim,
                    "confidence": conf,
                    "evidence": ev,
                    "model": model,
                    "source_page_ids": self._sources("trait", tid, version),
                },
                version,
            )
            self._x(
                "UPDATE trait SET dimension = ?, value = ?, version = ?, confidence = 0.95, model = 'user', "
                "updated_at = ?, reason = 'edited by the user', embedding = ? WHERE id = ?",
                (dim, val, version + 1, self.clock(), _blob(vec), tid),
            )
            self._emit("edited", "trait", tid, f"trait {tid} edited by the user (v{version + 1})")

    def set_item_status(self, kind: str, iid: int, status: str) -> None:
        """Archive ('archived') or re-activate ('active') a trait or knowledge item without deleting it."""
        if kind not in ("trait", "knowledge") or status not in ("active", "archived"):
            raise ValueError("kind must be trait/knowledge and status active/archived")
        with self.transaction():
            self._x(f"UPDATE {kind} SET status = ?, updated_at = ? WHERE id = ?", (status, self.clock(), iid))
            self._emit(f"{kind}_{status}", kind, iid, f"{kind} {iid} {status}")


def _checkpoint_hook(name: str) -> None:
    from .store import _checkpoint

    _checkpoint(name)
