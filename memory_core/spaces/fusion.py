"""Two memory spaces fused into one (`Spaces.merge`, MemOS's cube fusion) with the dedup of a cube import.

- A page the target holds already (said at the same time in the same words on both sides, as the cube
  importer recognises a page) is dropped from the source; what was drawn from the source's copy is then
  drawn from the target's, so dropping it takes no fact with it, and a pin on it pins the target's.
- A fact or trait joins the target's persona by the persona's own rules (`PersonaMerge.match` / `fuse`):
  one the target holds word for word is dropped; a restatement confirms the target's (one more
  confirmation, no new version); a newer value of the same thing updates it (its older text stays a
  version); either way the source's copy goes, so no second active copy is left. One that would change a
  pinned item is left beside it, and the conflict is reported. One older than the target's item it would
  change is kept, archived: the target's is the newer state.
- Each source item is matched against the target as it stands (the source's items move only at the end),
  so two items of the source never merge into each other: they stood side by side where they came from.
  Whether a source item is older is judged against the target item's time before the merge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..pages.component import Pages
from ..persona.merge import Held, PersonaMerge
from ..persona.versions import Versions
from ..storage.codec import from_json
from ..storage.database import Database

# the nearest facts of every space a source fact is compared with: the source's own facts are among
# them (they move only at the end), so more than the persona's 8
FUSION_K = 64


@dataclass
class Fused:
    """What became of one kind of item (pages, facts or traits) of the source space."""

    moved: int = 0  # now in the target as they were
    duplicates: int = 0  # held by the target word for word: dropped
    confirmed: int = 0  # a restatement: confirmed the target's item, then dropped
    updated: int = 0  # a newer value: updated the target's item (its older text a version), then dropped
    pinned: int = 0  # would change a pinned item: left beside it (a conflict, reported)
    older: int = 0  # older than the target's item it would change: moved, archived

    @property
    def merged(self) -> int:
        return self.confirmed + self.updated

    def add(self, how: str) -> None:
        """One more source item that was `how` ('held', 'confirmed', 'updated' or 'older')."""
        name = "duplicates" if how == "held" else how
        setattr(self, name, getattr(self, name) + 1)


@dataclass
class MergeConflict:
    """A source item left beside the pinned target item it would have changed."""

    kind: str  # 'knowledge' | 'trait'
    held_id: int
    held: str
    kept_id: int  # the source's item, now in the target space too
    offered: str


@dataclass
class Fusion:
    """A source item joined to one of the target's (or, `older`, set aside behind it)."""

    kind: str  # 'knowledge' | 'trait'
    how: str  # 'held' (word for word), 'confirmed', 'updated' or 'older'
    into: int  # the target's item
    held: str  # its text before the merge
    offered: str  # the source item's text


@dataclass
class SpaceMerge:
    """What merging space `source` into `target` did (or, with `dry_run`, would do)."""

    source: str
    target: str
    pages: Fused = field(default_factory=Fused)
    facts: Fused = field(default_factory=Fused)
    traits: Fused = field(default_factory=Fused)
    conflicts: list[MergeConflict] = field(default_factory=list)
    fused: list[Fusion] = field(default_factory=list)
    dry_run: bool = False

    def to_json(self) -> dict:
        def kind(f: Fused) -> dict:
            return {**vars(f), "merged": f.merged}

        return {
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            "pages": kind(self.pages),
            "facts": kind(self.facts),
            "traits": kind(self.traits),
            "conflicts": [vars(c) for c in self.conflicts],
            "fused": [vars(f) for f in self.fused],
        }


@dataclass
class _Item:
    """A source fact or trait with what the persona's rules need of it."""

    id: int
    key: str  # a fact's owner, a trait's dimension
    text: str
    subject: str | None
    model: str
    confidence: float
    evidence: str
    cids: list[int]
    updated_at: float
    version: int
    vec: np.ndarray | None


class SpaceFusion:
    """The dedup of a merge, inside `Spaces.merge`'s transaction."""

    def __init__(
        self,
        db: Database,
        pages: Pages,
        versions: Versions,
        persona: PersonaMerge,
        forget: Callable[[str, Sequence[int]], int],
    ):
        self.db = db
        self.pages = pages
        self.versions = versions
        self.persona = persona
        self._forget = forget

    # ------------------------------------------------------------------ pages
    def drop_held_pages(self, source: int, target: int) -> int:
        """Drop the source's pages the target holds already; returns how many."""
        pairs = [
            (x, q)
            for x, q in self.db.rows(
                "SELECT x.id, (SELECT min(q.id) FROM page q WHERE q.space_id = ? AND q.timestamp = x.timestamp "
                "AND q.user_text = x.user_text AND q.assistant_text = x.assistant_text) FROM page x "
                "WHERE x.space_id = ?",
                (target, source),
            )
            if q is not None
        ]
        for x, q in pairs:
            # what was drawn from the source's copy is drawn from the target's: dropping it takes nothing along
            self.versions.move_derivations([(x, q)])
            self.pages.keep_pin(q, x)
        if pairs:
            self._forget("page", [x for x, _ in pairs])
        return len(pairs)

    # ------------------------------------------------------------------ the persona
    def fuse_persona(self, kind: str, source: int, target: int, out: SpaceMerge, source_name: str) -> None:
        """Join the source's active facts ('knowledge') or traits ('trait') to the target's persona."""
        counts = out.facts if kind == "knowledge" else out.traits
        before = {r[0]: r[1] for r in self.db.rows(f"SELECT id, updated_at FROM {kind} WHERE space_id = ?", (target,))}
        for item in self._active(kind, source):  # oldest first: of two changes, the newer is applied last
            same = self._word_for_word(kind, item, target)
            held = None if same is not None or item.vec is None else self._match(kind, item, target)
            if same is not None:
                how, into, was = "held", same, item.text
            elif held is None:
                continue  # new to the target: it moves as it is
            elif not held.duplicate and held.pinned:
                self._fuse(kind, item, held)  # refused: an update_skipped event says so
                counts.pinned += 1
                out.conflicts.append(MergeConflict(kind, held.id, held.text, item.id, item.text))
                continue
            else:
                how, into, was = self._join(kind, item, held, before, source_name), held.id, held.text
            counts.add(how)
            out.fused.append(Fusion(kind, how, into, was, item.text))
            if how != "older":
                self._drop(kind, item, into, source_name, how)

    def _match(self, kind: str, item: _Item, target: int) -> Held | None:
        assert item.vec is not None
        return self.persona.match(
            kind, item.key, item.text, item.vec, model=item.model, subject=item.subject, space=target, k=FUSION_K
        )

    def _join(self, kind: str, item: _Item, held: Held, before: dict[int, float], source_name: str) -> str:
        """Join `item` to the target's `held` (not a pinned one it would change): 'held' (the same words),
        'older' (it would change a newer item: archived instead), else 'confirmed' or 'updated'."""
        if held.same_words:
            return "held"
        if not held.duplicate and item.updated_at <= before.get(held.id, held.updated_at):
            reason = f"set aside when space {source_name!r} was merged: {_label(kind)} {held.id} is newer"
            self.versions.update(kind, item.id, {"status": "archived", "reason": reason})
            return "older"
        self._fuse(kind, item, held)
        return "confirmed" if held.duplicate else "updated"

    def _fuse(self, kind: str, item: _Item, held: Held) -> bool:
        assert item.vec is not None
        pages = [
            r[0]
            for r in self.db.rows(
                "SELECT page_id FROM derivation WHERE item_kind = ? AND item_id = ? AND version = ?",
                (kind, item.id, item.version),
            )
        ]
        return self.persona.fuse(
            held, item.text, item.confidence, pages, item.vec, item.cids, item.model, evidence=item.evidence
        )

    def _word_for_word(self, kind: str, item: _Item, target: int) -> int | None:
        """The target's active item in the same words (case aside), as a cube import recognises one."""
        if kind == "knowledge":
            sql = (
                "SELECT min(id) FROM knowledge WHERE space_id = ? AND status = 'active' AND owner = ? "
                "AND subject IS ? AND lower(text) = lower(?)"
            )
            return self.db.scalar(sql, (target, item.key, item.subject, item.text))
        sql = "SELECT min(id) FROM trait WHERE space_id = ? AND status = 'active' AND dimension = ? AND lower(value) = lower(?)"
        return self.db.scalar(sql, (target, item.key, item.text))

    def _drop(self, kind: str, item: _Item, held_id: int, source_name: str, how: str) -> None:
        """The source's copy goes (its words live on in the target's item `held_id`, which it was held as,
        confirmed or updated: `how`); the event says where it went."""
        self.persona.versions.delete_item(kind, item.id)
        verb = "was held already as" if how == "held" else how
        self.db.emit(
            "space_fused",
            kind,
            held_id,
            f"{_label(kind)} {item.id} of space {source_name!r} {verb} {_label(kind)} {held_id}",
            {"from": item.id, "into": held_id, "how": how},
        )

    def _active(self, kind: str, space: int) -> list[_Item]:
        if kind == "knowledge":
            sql = (
                "SELECT k.id, k.owner, k.text, k.subject, k.model, k.confidence, '', k.conversation_ids, k.updated_at, "
                "k.version, v.embedding FROM knowledge k LEFT JOIN knowledge_vec v ON v.knowledge_id = k.id "
                "WHERE k.space_id = ? AND k.status = 'active' ORDER BY k.updated_at, k.id"
            )
        else:
            sql = (
                "SELECT id, dimension, value, NULL, model, confidence, evidence, conversation_ids, updated_at, "
                "version, embedding FROM trait WHERE space_id = ? AND status = 'active' ORDER BY updated_at, id"
            )
        return [
            _Item(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4] or "",
                float(r[5]),
                r[6] or "",
                [int(c) for c in from_json(r[7], []) if c is not None],
                float(r[8]),
                int(r[9]),
                None if r[10] is None else np.frombuffer(r[10], dtype=np.float32),
            )
            for r in self.db.rows(sql, (space,))
        ]


def _label(kind: str) -> str:
    return "knowledge" if kind == "knowledge" else "trait"
