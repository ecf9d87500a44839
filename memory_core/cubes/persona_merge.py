"""A cube's traits and facts joining the persona by its own rules (memory_core.persona.merge): one already held
is recognised and skipped; one close to an item held confirms or updates it, the older text staying a
version, unless the item is pinned (left, and reported) or the cube's is older; anything else comes in as
it was, with every version and the pages it was drawn from.

Every decision is taken against the persona as it was before the import (`decide`), so two items of one
cube never merge into each other: they stood side by side where they came from, and do here too."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pages.embedding import Embedding
from ..persona.merge import PersonaMerge
from ..persona.versions import Versions
from ..storage.codec import from_json, to_json
from ..storage.database import Database
from .format import content_key
from .records import Conflict

# what an undo puts back of a merged item from its snapshot: no text (the item's earlier text is its archived
# version, which a forget takes with it; a snapshot that kept it would outlive the forget)
_SNAPSHOT = ("status", "version", "pinned", "conversation_ids", "created_at")


@dataclass
class Decision:
    action: str  # "add", "merge", "present" or "skipped"
    target: int | None = None  # the item held that it is, merges into, or was not applied to
    duplicate: bool = False  # a merge that confirms (the same fact) rather than updates
    conflict: Conflict | None = None


def item_kind(member_kind: str) -> str:
    """The persona table of a cube record kind ("fact" records are the "knowledge" table's)."""
    return "trait" if member_kind == "trait" else "knowledge"


def key_of(kind: str, rec: dict[str, Any]) -> str:
    if kind == "trait":
        return content_key("trait", rec["dimension"], rec["value"])
    return content_key("knowledge", rec["owner"], rec["text"])


def stored_key(key: str) -> str:
    """What the import's record keeps of an item's words: their digest (the words would outlive a forget)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class PersonaImport:
    """Decisions and writes for the persona items of one import (inside the import's transaction)."""

    def __init__(self, db: Database, embedding: Embedding, versions: Versions, merge: PersonaMerge):
        self.db = db
        self.embedding = embedding
        self.versions = versions
        self.merge = merge

    # ------------------------------------------------------------------ deciding
    def held_keys(self) -> dict[str, int]:
        """Every trait and fact held, by `key_of` (whatever its status)."""
        out: dict[str, int] = {}
        for iid, dim, value in self.db.execute("SELECT id, dimension, value FROM trait").fetchall():
            out.setdefault(content_key("trait", dim, value), iid)
        for iid, owner, text in self.db.execute("SELECT id, owner, text FROM knowledge").fetchall():
            out.setdefault(content_key("knowledge", owner, text), iid)
        return out

    def merged_before(self, kind: str, key: str) -> int | None:
        """The item an import not undone merged this same item into, if it is still held."""
        for (iid,) in self.db.execute(
            "SELECT i.item_id FROM cube_import_item i JOIN cube_import c ON c.id = i.import_id "
            "WHERE i.kind = ? AND i.key = ? AND i.action = 'merged' AND c.status != 'undone'",
            (kind, key),
        ).fetchall():
            if self.db.execute(f"SELECT 1 FROM {kind} WHERE id = ?", (iid,)).fetchone():
                return iid
        return None

    def decide(self, kind: str, rec: dict[str, Any], vec: np.ndarray, held: dict[str, int]) -> Decision:
        key = key_of(kind, rec)
        if key in held:
            return Decision("present", held[key])
        before = self.merged_before(kind, stored_key(key))
        if before is not None:
            return Decision("present", before)
        if rec["status"] != "active":
            return Decision("add")
        offered = rec["value"] if kind == "trait" else rec["text"]
        held_item = self.merge.match(
            kind,
            rec["dimension"] if kind == "trait" else rec["owner"],
            offered,
            vec,
            model=rec["model"],
            subject=rec.get("subject"),
        )
        if held_item is None:
            return Decision("add")
        tid, duplicate = held_item.id, held_item.duplicate
        if not duplicate and held_item.pinned:
            return Decision("skipped", tid, conflict=Conflict(kind, tid, held_item.text, offered, "pinned"))
        if not duplicate and rec["updated_at"] <= held_item.updated_at:
            return Decision("skipped", tid, conflict=Conflict(kind, tid, held_item.text, offered, "older"))
        return Decision("merge", tid, duplicate)

    # ------------------------------------------------------------------ writing
    def snapshot(self, kind: str, iid: int) -> dict[str, Any]:
        """What an undo needs to put the item back besides its archived version (see `restore`)."""
        row = self.db.execute(f"SELECT {', '.join(_SNAPSHOT)} FROM {kind} WHERE id = ?", (iid,)).fetchone()
        return dict(zip(_SNAPSHOT, row))

    def apply_merge(
        self,
        kind: str,
        rec: dict[str, Any],
        vec: np.ndarray,
        d: Decision,
        pages: list[int],
        chats: list[int],
        label: str,
    ) -> int:
        """Confirm or update item `d.target` with the cube's item as the persona does; returns its new version."""
        assert d.target is not None
        now = self.db.clock()
        if kind == "trait":
            target = self.db.execute(
                "SELECT id, dimension, value, embedding, version, pinned, confidence, evidence, "
                "conversation_ids, model, updated_at, reason FROM trait WHERE id = ?",
                (d.target,),
            ).fetchone()
            cos = float(np.frombuffer(target[3], dtype=np.float32) @ vec)
            self.merge._revise_trait(
                target,
                cos,
                d.duplicate,
                rec["value"],
                rec["evidence"],
                rec["confidence"],
                pages,
                vec,
                chats,
                label,
                now,
            )
        else:
            row = self.db.execute(
                "SELECT owner, status, pinned, text, version, confidence, conversation_ids, model, updated_at, reason "
                "FROM knowledge WHERE id = ?",
                (d.target,),
            ).fetchone()
            held = self.db.execute("SELECT embedding FROM knowledge_vec WHERE knowledge_id = ?", (d.target,)).fetchone()
            cos = float(np.frombuffer(held[0], dtype=np.float32) @ vec) if held else 0.0
            best = (d.target, cos, tuple(row))
            self.merge._revise_knowledge(
                best, d.duplicate, rec["text"], rec["confidence"], pages, vec, chats, label, now
            )
        return int(self.db.execute(f"SELECT version FROM {kind} WHERE id = ?", (d.target,)).fetchone()[0])

    def add(
        self,
        kind: str,
        rec: dict[str, Any],
        vec: np.ndarray,
        page_ids: dict[int, int],
        chat_ids: dict[int, int],
        import_id: int,
    ) -> int:
        """The cube's item as it was (its version, confidence, provenance and history), its pages and chats
        those of this memory they became; links to pages the import did not bring are dropped."""
        chats = to_json([chat_ids[c] for c in rec["chats"] if c in chat_ids])
        row = {c: rec[c] for c in ("confidence", "status", "version", "created_at", "updated_at", "model", "reason")}
        row |= {"pinned": int(rec["pinned"]), "conversation_ids": chats}
        if kind == "trait":
            row |= {c: rec[c] for c in ("dimension", "value", "evidence")}
            iid = self.versions.insert("trait", row, vec)
            summary = f"trait {iid} ({rec['dimension']}) added from a memory cube"
        else:
            row |= {"owner": rec["owner"], "text": rec["text"], "subject": rec.get("subject")}
            iid = self.versions.insert("knowledge", row, vec)
            summary = f"{rec['owner']} knowledge {iid} added from a memory cube"
        for v in rec["versions"]:
            detail = dict(v["detail"])
            if isinstance(detail.get("source_page_ids"), list):
                detail["source_page_ids"] = [page_ids[p] for p in detail["source_page_ids"] if p in page_ids]
            self.versions.put_version(
                kind, iid, v["version"], v["text"], v["created_at"], v["archived_at"], v["reason"], detail
            )
            self.versions.derive(kind, iid, v["version"], [page_ids[p] for p in v["sources"] if p in page_ids])
        self.versions.derive(kind, iid, rec["version"], [page_ids[p] for p in rec["sources"] if p in page_ids])
        self.db.emit(f"{kind}_added", kind, iid, summary, {"import_id": import_id})
        return iid

    def restore(self, kind: str, iid: int, snap: dict[str, Any]) -> bool:
        """Put a merged item back as it was before the merge: the version the merge archived becomes current
        again (its text, time, reason, confidence and model), with the status, pin and chats of `snap`, and the
        versions and sources the merge gave it go. False when that version is gone (forgotten since)."""
        version = int(snap["version"])
        row = self.db.execute(
            "SELECT text, created_at, reason, detail FROM item_version WHERE item_kind = ? AND item_id = ? "
            "AND version = ?",
            (kind, iid, version),
        ).fetchone()
        if row is None:
            return False
        text, updated, reason, detail_s = row
        detail = from_json(detail_s, {})
        self.db.purge.note(kind, [iid], snap.get("created_at"))  # the merged text goes: traces that quoted it drop it
        self.versions.drop_history_from(kind, iid, version)
        values = {
            "confidence": float(detail.get("confidence", 0.5)),
            "status": snap["status"],
            "version": version,
            "pinned": snap["pinned"],
            "updated_at": updated,
            "conversation_ids": snap["conversation_ids"],
            "model": str(detail.get("model", "")),
            "reason": reason,
        }
        if kind == "trait":
            dim = str(
                detail.get("dimension")
                or self.db.execute("SELECT dimension FROM trait WHERE id = ?", (iid,)).fetchone()[0]
            )
            vec = self.embedding.embed([f"{dim}: {text}"])[0]
            values |= {"dimension": dim, "value": text, "evidence": str(detail.get("evidence", ""))}
            self.versions.update("trait", iid, values, vec)
            return True
        vec = self.embedding.embed([text])[0]
        self.db.purge.note_fts(("knowledge_fts", "knowledge_tri"))
        self.versions.update("knowledge", iid, {"text": text, **values}, vec)
        return True


def chats_of(rec: dict[str, Any], chat_ids: dict[int, int]) -> list[int]:
    return [chat_ids[c] for c in rec["chats"] if c in chat_ids]


def pages_of(rec: dict[str, Any], page_ids: dict[int, int]) -> list[int]:
    return [page_ids[p] for p in rec["sources"] if p in page_ids]
