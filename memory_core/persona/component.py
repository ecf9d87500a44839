"""The persona (long-term memory): traits and facts, reading them with their history, and the items and
edits the user writes."""

from __future__ import annotations

from ..pages.embedding import Embedding
from ..storage.codec import from_json
from ..storage.database import Database, equals
from ..types import ItemVersion, Knowledge, Trait
from . import extract as X
from .merge import PersonaMerge
from .versions import Versions

TRAIT_COLS = (
    "t.id, t.dimension, t.value, t.evidence, t.confidence, t.status, t.version, t.pinned, t.created_at, "
    "t.updated_at, t.conversation_ids, t.model, t.space_id"
)
KNOW_COLS = (
    "k.id, k.owner, k.text, k.confidence, k.status, k.version, k.pinned, k.created_at, k.updated_at, "
    "k.conversation_ids, k.model, k.subject, k.confirmations, k.space_id"
)


class Persona:
    def __init__(self, db: Database, embedding: Embedding, versions: Versions, merge: PersonaMerge):
        self.db = db
        self.embedding = embedding
        self.versions = versions
        self.merge = merge

    # ------------------------------------------------------------------ reading
    def trait_from_row(self, r: tuple) -> Trait:
        srcs = [
            x
            for (x,) in self.db.rows(
                "SELECT DISTINCT page_id FROM derivation WHERE item_kind='trait' AND "
                "item_id = ? AND version = ? ORDER BY page_id",
                (r[0], r[6]),
            )
        ]
        return Trait(
            id=r[0],
            dimension=r[1],
            value=r[2],
            evidence=r[3],
            confidence=r[4],
            status=r[5],
            version=r[6],
            pinned=bool(r[7]),
            created_at=r[8],
            updated_at=r[9],
            source_page_ids=srcs,
            conversation_ids=from_json(r[10], []),
            model=r[11],
            space_id=r[12] if len(r) > 12 else 1,
        )

    def knowledge_from_row(self, r: tuple) -> Knowledge:
        srcs = [
            x
            for (x,) in self.db.rows(
                "SELECT DISTINCT page_id FROM derivation WHERE item_kind='knowledge' AND "
                "item_id = ? AND version = ? ORDER BY page_id",
                (r[0], r[5]),
            )
        ]
        return Knowledge(
            id=r[0],
            owner=r[1],
            text=r[2],
            confidence=r[3],
            status=r[4],
            version=r[5],
            pinned=bool(r[6]),
            created_at=r[7],
            updated_at=r[8],
            source_page_ids=srcs,
            conversation_ids=from_json(r[9], []),
            model=r[10],
            subject=r[11],
            confirmations=r[12] or 0,
            space_id=r[13] if len(r) > 13 else 1,
        )

    def list_traits(
        self,
        *,
        include_archived: bool = False,
        dimension: str | None = None,
        text: str | None = None,
        order_by: str = "dimension",
        descending: bool = False,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Trait]:
        orders = {
            "dimension": "t.dimension",
            "confidence": "t.confidence",
            "updated_at": "t.updated_at",
            "created_at": "t.created_at",
            "id": "t.id",
        }
        if order_by not in orders:
            raise ValueError(f"order_by must be one of {sorted(orders)}")
        where, args = [], []
        if not include_archived:
            where.append("t.status = 'active'")
        if dimension is not None:
            where.append("t.dimension = ?")
            args.append(dimension)
        if text:
            where.append("(t.value LIKE ? OR t.dimension LIKE ?)")
            args += [f"%{text}%", f"%{text}%"]
        w = (" WHERE " + " AND ".join(where)) if where else ""
        d = "DESC" if descending else "ASC"
        rows = self.db.rows(
            f"SELECT {TRAIT_COLS} FROM trait t{w} ORDER BY {orders[order_by]} {d}, t.id {d} LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [self.trait_from_row(r) for r in rows]

    def count_traits(self, *, include_archived: bool = False) -> int:
        return self.db.scalar("SELECT count(*) FROM trait" + ("" if include_archived else " WHERE status='active'"))

    def get_trait(self, tid: int) -> Trait | None:
        r = self.db.one(f"SELECT {TRAIT_COLS} FROM trait t WHERE t.id = ?", (tid,))
        return self.trait_from_row(r) if r else None

    def list_knowledge(
        self,
        owner: str | None = None,
        include_archived: bool = False,
        *,
        text: str | None = None,
        order_by: str = "updated_at",
        descending: bool = True,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Knowledge]:
        orders = {
            "updated_at": "k.updated_at",
            "created_at": "k.created_at",
            "confidence": "k.confidence",
            "id": "k.id",
            "text": "k.text",
        }
        if order_by not in orders:
            raise ValueError(f"order_by must be one of {sorted(orders)}")
        w, args = self._knowledge_filters(owner, include_archived, text)
        d = "DESC" if descending else "ASC"
        rows = self.db.rows(
            f"SELECT {KNOW_COLS} FROM knowledge k{w} ORDER BY {orders[order_by]} {d}, k.id {d} LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [self.knowledge_from_row(r) for r in rows]

    def count_knowledge(
        self, owner: str | None = None, include_archived: bool = False, *, text: str | None = None
    ) -> int:
        w, args = self._knowledge_filters(owner, include_archived, text)
        return self.db.scalar(f"SELECT count(*) FROM knowledge k{w}", args)

    @staticmethod
    def _knowledge_filters(owner: str | None, include_archived: bool, text: str | None) -> tuple[str, list]:
        where, args = equals([("k.owner", owner)])
        if not include_archived:
            where.append("k.status = 'active'")
        if text:
            where.append("k.text LIKE ?")
            args.append(f"%{text}%")
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def get_knowledge(self, kid: int) -> Knowledge | None:
        r = self.db.one(f"SELECT {KNOW_COLS} FROM knowledge k WHERE k.id = ?", (kid,))
        return self.knowledge_from_row(r) if r else None

    def item_versions(self, kind: str, item_id: int) -> list[ItemVersion]:
        """Version history of a trait or knowledge item, oldest first; the last entry is the current one."""
        if kind not in ("trait", "knowledge"):
            raise ValueError("kind must be 'trait' or 'knowledge'")
        out = []
        for r in self.db.rows(
            "SELECT version, text, created_at, archived_at, reason, detail FROM item_version "
            "WHERE item_kind = ? AND item_id = ? ORDER BY version",
            (kind, item_id),
        ):
            out.append(ItemVersion(kind, item_id, r[0], r[1], r[2], r[3], r[4], from_json(r[5], {})))
        cur: Trait | Knowledge | None = self.get_trait(item_id) if kind == "trait" else self.get_knowledge(item_id)
        if cur is not None:
            text = cur.value if isinstance(cur, Trait) else cur.text
            detail = {"confidence": cur.confidence, "source_page_ids": cur.source_page_ids, "model": cur.model}
            if isinstance(cur, Trait):
                detail.update(dimension=cur.dimension, evidence=cur.evidence)
            reason = self.db.scalar(f"SELECT reason FROM {kind} WHERE id = ?", (item_id,)) or ""
            out.append(ItemVersion(kind, item_id, cur.version, text, cur.updated_at, None, reason, detail))
        return out

    # ------------------------------------------------------------------ user-authored items and edits
    def add_knowledge(
        self,
        owner: str,
        text: str,
        *,
        pinned: bool = False,
        source: str = "user",
        skip_existing: bool = False,
        space_id: int | None = None,
    ) -> int | None:
        """Add a fact written by the user (no source pages). A near-duplicate updates the existing item.
        `source` names where the user wrote it (an import); with `skip_existing`, a fact already held
        word for word is left as it is (None): importing the same file again confirms nothing.
        `space_id`: the memory space it goes to (a chat's, when asked there; default Personal); only
        facts of that space are matched."""
        if owner not in ("user", "assistant"):
            raise ValueError("owner must be 'user' or 'assistant'")
        clean = X.clean_item(text)
        if not clean:
            raise ValueError("not a usable fact")
        text = clean
        if (
            skip_existing
            and self.db.execute(
                "SELECT 1 FROM knowledge WHERE owner = ? AND status = 'active' AND lower(text) = lower(?)",
                (owner, text),
            ).fetchone()
        ):
            return None
        vec = self.embedding.embed([text])[0]
        with self.db.transaction():
            mark = len(self.db.pending_events)
            self.merge.upsert_knowledge(owner, text, 0.9, [], vec, set(), source, space_id)
            kid = self._affected("knowledge", mark)
            if pinned and kid is not None:
                self.versions.set_pinned("knowledge", kid, True)
            return kid

    def add_trait(
        self,
        dimension: str,
        value: str,
        *,
        pinned: bool = False,
        source: str = "user",
        skip_existing: bool = False,
        space_id: int | None = None,
    ) -> int | None:
        """Add a trait written by the user; `source`, `skip_existing` and `space_id` as for `add_knowledge`."""
        dim = X._clean_dimension(dimension)
        val = X.clean_item(value, 200)
        if not dim or not val:
            raise ValueError("not a usable trait")
        if (
            skip_existing
            and self.db.execute(
                "SELECT 1 FROM trait WHERE dimension = ? AND value = ? AND status = 'active'", (dim, val)
            ).fetchone()
        ):
            return None
        vec = self.embedding.embed([f"{dim}: {val}"])[0]
        with self.db.transaction():
            mark = len(self.db.pending_events)
            self.merge.upsert_trait(dim, val, "", 0.9, [], vec, set(), source, space_id)
            tid = self._affected("trait", mark)
            if tid is None:  # the persona is full of pinned traits: nothing was added
                raise ValueError("the persona is full and every trait in it is pinned")
            if pinned:
                self.versions.set_pinned("trait", tid, True)
            return tid

    def _affected(self, kind: str, mark: int) -> int | None:
        """The item an upsert added, confirmed, updated or (pinned) left as it was: the last event it
        logged for an item of `kind` after `mark` (the nearest vector is not always that item)."""
        for e in reversed(self.db.pending_events[mark:]):
            if e.item_kind == kind:
                return e.item_id
        return None

    def edit_knowledge(self, kid: int, text: str) -> None:
        """Correct a fact: the old text becomes an archived version; re-embeds and re-indexes."""
        clean = X.clean_item(text)
        if not clean:
            raise ValueError("not a usable fact")
        vec = self.embedding.embed([clean])[0]
        with self.db.transaction():
            row = self.db.execute(
                "SELECT text, version, confidence, model, updated_at, reason FROM knowledge WHERE id = ?", (kid,)
            ).fetchone()
            if row is None:
                raise KeyError(f"no knowledge {kid}")
            old_text, version, conf, model, updated, reason = row
            self.versions.archive(
                "knowledge",
                kid,
                old_text,
                updated,
                reason,
                {
                    "confidence": conf,
                    "model": model,
                    "source_page_ids": self.versions.sources("knowledge", kid, version),
                },
                version,
            )
            values = {"text": clean, "version": version + 1, "confidence": 0.95, "model": "user"}
            self.versions.update(
                "knowledge", kid, {**values, "updated_at": self.db.clock(), "reason": "edited by the user"}, vec
            )
            self.db.emit("edited", "knowledge", kid, f"knowledge {kid} edited by the user (v{version + 1})")

    def edit_trait(self, tid: int, value: str, *, dimension: str | None = None) -> None:
        val = X.clean_item(value, 200)
        if not val:
            raise ValueError("not a usable trait value")
        with self.db.lock:
            row = self.db.one("SELECT dimension FROM trait WHERE id = ?", (tid,))
            if row is None:
                raise KeyError(f"no trait {tid}")
            dim = X._clean_dimension(dimension) if dimension else row[0]
        vec = self.embedding.embed([f"{dim}: {val}"])[0]
        with self.db.transaction():
            r = self.db.execute(
                "SELECT dimension, value, evidence, version, confidence, model, updated_at, reason FROM trait "
                "WHERE id = ?",
                (tid,),
            ).fetchone()
            odim, old_value, ev, version, conf, model, updated, reason = r
            self.versions.archive(
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
                    "source_page_ids": self.versions.sources("trait", tid, version),
                },
                version,
            )
            values = {"dimension": dim, "value": val, "version": version + 1, "confidence": 0.95, "model": "user"}
            self.versions.update(
                "trait", tid, {**values, "updated_at": self.db.clock(), "reason": "edited by the user"}, vec
            )
            self.db.emit("edited", "trait", tid, f"trait {tid} edited by the user (v{version + 1})")

    def set_item_status(self, kind: str, iid: int, status: str) -> None:
        """Archive ('archived') or re-activate ('active') a trait or knowledge item without deleting it."""
        if kind not in ("trait", "knowledge") or status not in ("active", "archived"):
            raise ValueError("kind must be trait/knowledge and status active/archived")
        with self.db.transaction():
            self.versions.update(kind, iid, {"status": status, "updated_at": self.db.clock()})
            self.db.emit(f"{kind}_{status}", kind, iid, f"{kind} {iid} {status}")
