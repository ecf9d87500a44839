"""What the cube import says: its plan (a dry run), the record of an import, what an undo did, and where an
imported item came from."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..text import one_line

PERSONA_ACTIONS = ("added", "merged", "present", "skipped")


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "?"


@dataclass
class Conflict:
    """A trait or fact of the cube that was not applied to the one memory holds: pinned, or older."""

    kind: str  # "trait" or "knowledge"
    item_id: int  # the item memory holds
    held: str
    offered: str
    why: str  # "pinned" or "older"

    def describe(self) -> str:
        what = "trait" if self.kind == "trait" else "fact"
        reason = "it is pinned" if self.why == "pinned" else "the cube's is older"
        return f"{what} {self.item_id} “{one_line(self.held, 70)}” kept ({reason}); the cube says “{one_line(self.offered, 70)}”"


@dataclass
class ImportCounts:
    """Per kind of item: how many are added, merged into what memory holds, already present, or skipped."""

    pages: Counter = field(default_factory=Counter)
    chats: Counter = field(default_factory=Counter)
    segments: Counter = field(default_factory=Counter)
    traits: Counter = field(default_factory=Counter)
    facts: Counter = field(default_factory=Counter)
    conflicts: list[Conflict] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "pages": dict(self.pages),
            "chats": dict(self.chats),
            "segments": dict(self.segments),
            "traits": dict(self.traits),
            "facts": dict(self.facts),
            "conflicts": [c.__dict__ for c in self.conflicts],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImportCounts:
        return cls(
            Counter(data.get("pages", {})),
            Counter(data.get("chats", {})),
            Counter(data.get("segments", {})),
            Counter(data.get("traits", {})),
            Counter(data.get("facts", {})),
            [Conflict(**c) for c in data.get("conflicts", [])],
        )

    @property
    def added(self) -> int:
        return sum(c["added"] for c in (self.pages, self.traits, self.facts))

    def lines(self, *, done: bool = False) -> list[str]:
        """What it does (`done`: what it did), a line per kind: "pages: 120 to add, 4 already present"."""
        words = (
            {"added": "added", "merged": "merged", "present": "already present", "skipped": "skipped"}
            if done
            else {"added": "to add", "merged": "to merge", "present": "already present", "skipped": "to leave"}
        )
        out = []
        for label, c in (("pages", self.pages), ("traits", self.traits), ("facts", self.facts)):
            parts = [f"{c[a]:,} {words[a]}" for a in PERSONA_ACTIONS if c[a]]
            out.append(f"{label}: {', '.join(parts) if parts else 'none'}")
        if self.chats["added"] or self.segments["added"]:
            out.append(f"new chats: {self.chats['added']:,}; new segments: {self.segments['added']:,}")
        out += [c.describe() for c in self.conflicts]
        return out


@dataclass
class ImportPlan:
    """What importing a cube would do (a dry run: nothing is written)."""

    file_name: str
    cube_id: str
    made_at: float
    app_version: str
    selection: str
    counts: ImportCounts
    reembed: bool  # another embedding model's cube: its vectors are left and the items embedded here
    earlier_imports: list[int]  # imports of this same cube still in memory

    def to_json(self) -> dict[str, Any]:
        return {
            "file_name": self.file_name,
            "cube_id": self.cube_id,
            "made_at": self.made_at,
            "app_version": self.app_version,
            "selection": self.selection,
            "reembed": self.reembed,
            "earlier_imports": self.earlier_imports,
            "would": self.counts.to_json(),
        }

    def describe(self) -> str:
        head = f"{self.file_name}: a memory cube of {self.selection}, made {_when(self.made_at)} by Mnemo {self.app_version}"
        lines = [head, *("  " + line for line in self.counts.lines())]
        if self.reembed:
            lines.append("  made with another embedding model: its pages will be embedded here in the background")
        if self.earlier_imports:
            lines.append(f"  already imported as import {', '.join(map(str, self.earlier_imports))}")
        return "\n".join(lines)


@dataclass
class ImportRecord:
    """One import of a cube into this memory."""

    id: int
    cube_id: str
    file_name: str
    status: str  # "staging" (being read in), "running" (being written), "done", "undone"
    started_at: float
    finished_at: float | None
    undone_at: float | None
    counts: ImportCounts
    selection: str
    pages_left: int = 0  # pages still to write while it runs
    error: str | None = None  # why its writing stopped, when it did

    @property
    def finished(self) -> bool:
        return self.status in ("done", "undone")

    def to_json(self) -> dict[str, Any]:
        names = ("id", "cube_id", "file_name", "status", "started_at", "finished_at", "undone_at", "selection")
        return {
            **{n: getattr(self, n) for n in names},
            "pages_left": self.pages_left,
            "error": self.error,
            "counts": self.counts.to_json(),
        }

    def describe(self) -> str:
        when = _when(self.started_at)
        state = {
            "done": "imported",
            "undone": f"undone {_when(self.undone_at)}",
            "running": f"not finished ({self.pages_left:,} pages to write)",
            "staging": "interrupted while being read",
        }.get(self.status, self.status)
        c = self.counts
        what = f"{c.pages['added']:,} pages, {c.traits['added'] + c.facts['added']:,} persona items added"
        merged = c.traits["merged"] + c.facts["merged"]
        if merged:
            what += f", {merged:,} merged"
        line = f"import {self.id:>4}  {when}  {self.file_name}  {state}: {what}"
        if self.error and not self.finished:
            line += f" — stopped: {self.error}"
        return line


@dataclass
class UndoReport:
    """What undoing an import removed and put back, and what it left because it changed since."""

    import_id: int
    pages: int = 0
    traits: int = 0
    facts: int = 0
    restored: int = 0  # merged items put back as they were
    chats: int = 0
    left: list[str] = field(default_factory=list)

    def describe(self) -> str:
        text = (
            f"import {self.import_id} undone: {self.pages:,} pages, {self.traits:,} traits and {self.facts:,} facts "
            f"removed, {self.restored:,} merged items put back"
        )
        if self.chats:
            text += f", {self.chats:,} chats removed"
        if self.left:
            text += f"; left as they are (changed since): {'; '.join(self.left[:5])}"
            if len(self.left) > 5:
                text += f" and {len(self.left) - 5} more"
        return text


@dataclass
class ItemOrigin:
    """Where an imported item came from."""

    import_id: int
    cube_id: str
    file_name: str
    imported_at: float
    action: str  # "added" or "merged"

    def describe(self) -> str:
        verb = "imported" if self.action == "added" else "merged"
        return f"{verb} from memory cube {self.file_name} ({self.cube_id[:8]}) on {_when(self.imported_at)}"
