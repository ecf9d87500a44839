"""How a new trait or fact joins the persona: a duplicate confirms the item it repeats, a newer value of the
same thing updates it (the old text becomes an archived version), anything else is added."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..storage.codec import from_json, to_json, vec_blob
from ..storage.database import Database
from ..text import materially_different, normalize, same_attribute
from . import extract as X
from .third_person import as_first_person
from .versions import Versions

# the memory space of a new fact or trait (memory_core.spaces.component): its first source page's, else its first
# chat's, else the default; parameters: the page ids and the chat ids as JSON lists
SPACE_OF = (
    "coalesce((SELECT p.space_id FROM page p WHERE p.id IN (SELECT value FROM json_each(?)) ORDER BY p.id LIMIT 1), "
    "(SELECT c.space_id FROM conversation c WHERE c.id IN (SELECT value FROM json_each(?)) ORDER BY c.id LIMIT 1), 1)"
)


def space_args(page_ids: Iterable[int], cids: Iterable[int]) -> tuple[str, str]:
    """The parameters of SPACE_OF."""
    return to_json(sorted(page_ids)), to_json(sorted(cids))


def space_of(db: Database, page_ids: Iterable[int], cids: Iterable[int], space_id: int | None = None) -> int:
    """The space a new fact or trait goes to: `space_id` when given (a fact the user asked a chat to
    keep: that chat's space), else SPACE_OF of its pages and chats. A new item is matched only against
    items of this space, so a Work fact never updates a Personal one."""
    if space_id is not None:
        return int(space_id)
    return int(db.scalar(f"SELECT {SPACE_OF}", space_args(page_ids, cids)))


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


@dataclass
class Held:
    """An active trait or fact a new one repeats or changes, by the persona's rules (`PersonaMerge.match`):
    a restatement (`duplicate`: it confirms) or a newer value of the same thing (it updates)."""

    kind: str  # 'knowledge' | 'trait'
    id: int
    cos: float
    duplicate: bool
    same_words: bool  # word for word the same (after `normalize`): already held, nothing to confirm
    pinned: bool
    text: str
    updated_at: float
    row: tuple  # the row `_revise_knowledge` / `_revise_trait` take


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
        space_id: int | None = None,
    ) -> bool:
        """Add a fact, or update the existing one it duplicates/contradicts (archiving the old version).
        Returns True when something changed. A fact about a named person (owner 'person') is matched only
        with facts about the same person (`subject`, read from its source pages: `_subject`). A
        confirmation counts (`confirmations`), it adds no version. Past `max_knowledge` facts of the
        owner, the least recently confirmed or changed is set aside (`cap_knowledge`). Only facts of the
        new fact's memory space (`space_of`) are matched."""
        now = self.db.clock()
        subject = self._subject(owner, text, page_ids)
        cids = sorted(c for c in conversation_ids if c is not None)
        space = space_of(self.db, page_ids, cids, space_id)
        best, duplicate, update = self._knowledge_match(owner, text, vec, model, subject=subject, space=space)
        if best is not None and (duplicate or update):
            return self._revise_knowledge(
                best, duplicate, text, confidence, page_ids, vec, cids, model, now, count_only=True
            )
        self._insert_knowledge(owner, text, confidence, page_ids, vec, cids, model, now, subject, space)
        self.cap_knowledge(owner)
        return True

    def _subject(self, owner: str, text: str, page_ids: list[int]) -> str | None:
        """The person a 'person' fact is about: the speaker of its source pages (page.meta people) whose
        name the fact opens with; None for the user's and the assistant's facts."""
        if owner != "person" or not page_ids:
            return None
        names: set[str] = set()
        for (people,) in self.db.execute(
            "SELECT json_extract(meta, '$.people') FROM page WHERE id IN (SELECT value FROM json_each(?))",
            (to_json(sorted(page_ids)),),
        ).fetchall():
            got = from_json(people, {})
            if isinstance(got, dict):
                names |= {n for n in (got.get("user_side"), got.get("assistant_side")) if isinstance(n, str)}
        opening = [n for n in names if text.startswith(n)]
        return max(opening, key=len) if opening else (sorted(names)[0] if len(names) == 1 else None)

    def cap_knowledge(self, owner: str) -> None:
        """Keep at most `max_knowledge` active facts of `owner` (MemoryOS keeps 100 of each kind, first in,
        first out): the facts over it confirmed or changed least recently are archived, with an event,
        never deleted. A pinned fact, or one the user wrote (no source pages), is never set aside."""
        cap = self.db.params.persona.max_knowledge
        n = self.db.scalar("SELECT count(*) FROM knowledge WHERE owner = ? AND status = 'active'", (owner,))
        if n <= cap:
            return
        for (kid,) in self.db.execute(
            "SELECT id FROM knowledge k WHERE owner = ? AND status = 'active' AND pinned = 0 AND model != 'user' "
            "AND EXISTS (SELECT 1 FROM derivation d WHERE d.item_kind = 'knowledge' AND d.item_id = k.id) "
            "ORDER BY updated_at, id LIMIT ?",
            (owner, n - cap),
        ).fetchall():
            reason = f"set aside: more than {cap} facts, and this one was the longest unused"
            self.versions.update(
                "knowledge", kid, {"status": "archived", "updated_at": self.db.clock(), "reason": reason}
            )
            self.db.emit(
                "knowledge_archived",
                "knowledge",
                kid,
                f"knowledge {kid} set aside: more than {cap} facts, and this one was the longest unused",
                {"owner": owner, "cap": cap},
            )

    def _knowledge_match(
        self,
        owner: str,
        text: str,
        vec: np.ndarray,
        model: str,
        *,
        subject: str | None = None,
        space: int | None = None,
        k: int = 8,
    ) -> tuple[tuple[int, float, tuple] | None, bool, bool]:
        """The active fact of `owner` (and `subject`, for a person) in space `space` (None: any, as a cube
        import matches) that `text` repeats or updates, if any: (its id, cosine and row), whether it is a
        duplicate, whether an update. The `k` nearest facts of every space are the candidates."""
        p = self.db.params
        knn = self.db.execute(
            "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = ?", (vec_blob(vec), k)
        ).fetchall()
        rows = {
            r[0]: r[1:]
            for r in self.db.execute(
                "SELECT id, owner, status, pinned, text, version, confidence, conversation_ids, model, updated_at, reason "
                "FROM knowledge WHERE id IN (SELECT value FROM json_each(?)) AND subject IS ? "
                "AND (? IS NULL OR space_id = ?)",
                (to_json([k for k, _ in knn]), subject, space, space),
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
        # Porto" → "I live in Lyon now", similarity 0.5; compared as said, in the first person:
        # memory_core.persona.third_person). The extractive path states events, which a cosine cannot tell from
        # updates ("The user went hiking" twice, different hikes), so only the same attribute updates there.
        duplicate = update = False
        if best is not None:
            old_text = best[2][3]
            same = normalize(old_text) == normalize(text)
            differs = not same and materially_different(old_text, text)
            duplicate = same or (best[1] >= p.persona.duplicate_threshold and not differs)
            update = not duplicate and model != "extractive" and best[1] >= p.persona.update_threshold
            if not duplicate and not update:
                who = subject or f"The {owner}"
                said = as_first_person(text, who)
                match = next((c for c in near if same_attribute(as_first_person(c[2][3], who), said)), None)
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
        *,
        count_only: bool = False,
    ) -> bool:
        """Confirm (a duplicate) or update the fact `best`; a pinned fact is not updated (False). With
        `count_only` a confirmation counts and adds the pages to the current version's sources; without
        (a memory cube's merge, which an undo puts back from the version it archived) it is a new version."""
        kid, cos, row = best
        _, _, pinned, old_text, version, old_conf, old_cids, old_model, old_updated, old_reason = row
        if pinned and not duplicate:
            return self._skip_pinned("knowledge", kid, "fact", cos, page_ids)
        old_srcs = self.versions.sources("knowledge", kid, version)
        all_cids = sorted(set(from_json(old_cids, [])) | set(cids))
        if duplicate and count_only:
            why = f"{origin('confirmed', page_ids, model)} (similarity {cos:.2f})"
            conf = max(old_conf, confidence)
            self._count_confirmation(
                "knowledge", kid, version, conf, all_cids, page_ids, why, {"similarity": round(cos, 4)}
            )
            return True
        meta = {"confidence": old_conf, "model": old_model, "source_page_ids": old_srcs}
        self.versions.archive("knowledge", kid, old_text, old_updated, old_reason, meta, version)
        new_version = version + 1
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
            values = {"text": text, "version": new_version, "confidence": confidence}
            values |= {"conversation_ids": to_json(all_cids), "model": model, "updated_at": now, "reason": reason}
            self.versions.update("knowledge", kid, values, vec)
            self.versions.derive("knowledge", kid, new_version, page_ids)
            self.db.emit(
                "knowledge_updated",
                "knowledge",
                kid,
                f"knowledge {kid} updated (v{new_version})",
                {"version": new_version, "similarity": round(cos, 4), "pages": sorted(page_ids)},
            )
        return True

    def _skip_pinned(self, kind: str, item_id: int, what: str, cos: float, page_ids: list[int]) -> bool:
        """A pinned item is never changed by what is learnt: the conflicting `what` is left, with an
        `update_skipped` event the user can see. False: nothing changed."""
        self.db.emit(
            "update_skipped",
            kind,
            item_id,
            f"{kind} {item_id} is pinned; a conflicting {what} was not applied",
            {"similarity": round(cos, 4), "pages": sorted(page_ids)},
        )
        return False

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
        subject: str | None = None,
        space: int | None = None,
    ) -> None:
        reason = origin("extracted" if page_ids else "added", page_ids, model)
        row = {"owner": owner, "text": text, "confidence": confidence, "status": "active", "version": 1}
        row |= {"created_at": now, "updated_at": now, "conversation_ids": to_json(cids), "model": model}
        row |= {"reason": reason, "subject": subject, "space_id": space_of(self.db, page_ids, cids, space)}
        kid = self.versions.insert("knowledge", row, vec)
        self.versions.derive("knowledge", kid, 1, page_ids)
        self.db.emit(
            "knowledge_added",
            "knowledge",
            kid,
            f"{owner} knowledge {kid} added",
            {"owner": owner, "pages": sorted(page_ids), "model": model},
        )

    def _count_confirmation(
        self,
        kind: str,
        item_id: int,
        version: int,
        confidence: float,
        cids: list[int],
        page_ids: list[int],
        reason: str,
        data: dict | None = None,
    ) -> None:
        """A restated item (trait or fact) is confirmed in place: one more confirmation, more confidence
        (+0.1, at most 0.99), the union of conversations, the pages among its current version's sources,
        the confirmation as its reason; no new version (an identical text would only repeat the history)."""
        n = self.db.scalar(f"SELECT confirmations FROM {kind} WHERE id = ?", (item_id,)) + 1
        values = {"confirmations": n, "confidence": min(0.99, confidence + 0.1), "conversation_ids": to_json(cids)}
        self.versions.update(kind, item_id, {**values, "updated_at": self.db.clock(), "reason": reason})
        self.versions.derive(kind, item_id, version, page_ids)
        self.db.emit(
            f"{kind}_confirmed",
            kind,
            item_id,
            f"{kind} {item_id} confirmed ({n} time{'s' if n != 1 else ''})",
            {"version": version, "confirmations": n, **(data or {}), "pages": sorted(page_ids)},
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
        values = {"version": version, "confidence": min(0.99, confidence + 0.1), "conversation_ids": to_json(cids)}
        self.versions.update(kind, item_id, {**values, "updated_at": now, "reason": reason})
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
        space_id: int | None = None,
    ) -> bool:
        """Add a trait, or confirm/update the active one of its dimension (in its space: `space_of`) it
        repeats or changes. Returns True when something changed."""
        now = self.db.clock()
        cids = sorted(c for c in conversation_ids if c is not None)
        space = space_of(self.db, page_ids, cids, space_id)
        target, cos, duplicate = self._trait_match(dimension, value, vec, space)
        if target is not None:
            return self._revise_trait(
                target, cos, duplicate, value, evidence, confidence, page_ids, vec, cids, model, now, count_only=True
            )
        return self._insert_trait(dimension, value, evidence, confidence, page_ids, vec, cids, model, now, space)

    def _trait_match(
        self, dimension: str, value: str, vec: np.ndarray, space: int | None = None
    ) -> tuple[tuple | None, float, bool]:
        """The active trait of space `space` (None: any) that `value` repeats (a duplicate) or changes, if
        any: (its row, cosine, duplicate)."""
        p = self.db.params
        rows = self.db.execute(
            "SELECT id, dimension, value, embedding, version, pinned, confidence, evidence, "
            "conversation_ids, model, updated_at, reason FROM trait WHERE status = 'active' "
            "AND (? IS NULL OR space_id = ?)",
            (space, space),
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
        *,
        count_only: bool = False,
    ) -> bool:
        """Confirm (a duplicate) or update trait `target`; a pinned trait is not updated (False).
        `count_only` as for `_revise_knowledge`."""
        tid, tdim, old_value, _, version, pinned, old_conf, old_ev, old_cids, old_model, old_updated, old_reason = (
            target
        )
        if pinned and not duplicate:
            return self._skip_pinned("trait", tid, "value", cos, page_ids)
        old_srcs = self.versions.sources("trait", tid, version)
        all_cids = sorted(set(from_json(old_cids, [])) | set(cids))
        if duplicate and count_only:
            conf = max(old_conf, confidence)
            self._count_confirmation(
                "trait", tid, version, conf, all_cids, page_ids, origin("confirmed", page_ids, model)
            )
            return True
        meta = {"confidence": old_conf, "evidence": old_ev, "model": old_model, "source_page_ids": old_srcs}
        self.versions.archive("trait", tid, old_value, old_updated, old_reason, {"dimension": tdim, **meta}, version)
        new_version = version + 1
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
            values = {"value": value, "evidence": evidence, "confidence": confidence, "version": new_version}
            values |= {"conversation_ids": to_json(all_cids), "model": model, "updated_at": now, "reason": reason}
            self.versions.update("trait", tid, values, vec)
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
        space: int | None = None,
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
            self.versions.update("trait", old[0], {"status": "archived", "updated_at": now})
            self.db.emit("trait_archived", "trait", old[0], f"trait {old[0]} archived (persona full)")
        reason = origin("extracted" if page_ids else "added", page_ids, model)
        row = {"dimension": dimension, "value": value, "evidence": evidence, "confidence": confidence}
        row |= {"status": "active", "version": 1, "created_at": now, "updated_at": now}
        row |= {"conversation_ids": to_json(cids), "model": model, "reason": reason}
        tid = self.versions.insert("trait", {**row, "space_id": space_of(self.db, page_ids, cids, space)}, vec)
        self.versions.derive("trait", tid, 1, page_ids)
        self.db.emit("trait_added", "trait", tid, f"trait {tid} ({dimension}) added", {"pages": sorted(page_ids)})
        return True

    # ------------------------------------------------------------------ the rules for a whole item (fusion)
    def match(
        self,
        kind: str,
        key: str,
        text: str,
        vec: np.ndarray,
        *,
        model: str = "",
        subject: str | None = None,
        space: int | None = None,
        k: int = 8,
    ) -> Held | None:
        """The active item of space `space` that a trait (`key` its dimension, `text` its value) or a fact
        (`key` its owner) repeats or changes, by the rules of `upsert_trait` / `upsert_knowledge`; None when
        it is new there. Two spaces merged (memory_core.spaces.fusion) join their persona by these rules."""
        if kind == "trait":
            row, cos, duplicate = self._trait_match(key, text, vec, space)
            if row is None:
                return None
            held, pinned, updated = row[2], row[5], row[10]
            return Held(
                kind, row[0], cos, duplicate, normalize(held) == normalize(text), bool(pinned), held, updated, row
            )
        best, duplicate, update = self._knowledge_match(key, text, vec, model, subject=subject, space=space, k=k)
        if best is None or not (duplicate or update):
            return None
        kid, cos, row = best
        held, pinned, updated = row[3], row[2], row[8]
        return Held(kind, kid, cos, duplicate, normalize(held) == normalize(text), bool(pinned), held, updated, row)

    def fuse(
        self,
        held: Held,
        text: str,
        confidence: float,
        page_ids: list[int],
        vec: np.ndarray,
        cids: list[int],
        model: str,
        *,
        evidence: str = "",
    ) -> bool:
        """Join an item to `held` as the persona does: a restatement confirms it (one more confirmation, its
        pages among the sources, no new version), a newer value updates it (the older text stays a version).
        False, with an `update_skipped` event, when `held` is pinned and would change."""
        now = self.db.clock()
        if held.kind == "trait":
            return self._revise_trait(
                held.row,
                held.cos,
                held.duplicate,
                text,
                evidence,
                confidence,
                page_ids,
                vec,
                cids,
                model,
                now,
                count_only=True,
            )
        best = (held.id, held.cos, held.row)
        return self._revise_knowledge(
            best, held.duplicate, text, confidence, page_ids, vec, cids, model, now, count_only=True
        )
