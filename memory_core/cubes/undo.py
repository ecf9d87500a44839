"""Undoing an import: what it added goes (its pages with what memory drew from them since, its traits and
facts, the segments, chains and chats it made that nothing else came to use), and what it merged is put
back as it was, unless it changed again since (then it is left, and said). One transaction: an undo is
done whole or not at all. An item is only taken for the import's when it is the one the import wrote
(the same id and the same time of making), since SQLite may give a forgotten item's id to a new one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..conversations import Conversations
from ..persona.versions import Versions
from ..segments.component import Segments
from ..storage.codec import from_json
from ..storage.database import Database
from ..storage.jobs import Jobs
from . import staging
from .format import CubeError
from .persona_merge import PersonaImport
from .records import UndoReport

ForgetPages = Callable[[Sequence[int]], None]


@dataclass
class UndoOwners:
    """The owners of the tables an undo writes besides the import's record (memory_core.storage.tables)."""

    versions: Versions
    segments: Segments
    conversations: Conversations
    jobs: Jobs


def undo_import(
    db: Database, persona: PersonaImport, owners: UndoOwners, forget_pages: ForgetPages, iid: int
) -> UndoReport:
    with db.transaction():
        row = db.execute("SELECT status, file_name FROM cube_import WHERE id = ?", (iid,)).fetchone()
        if row is None:
            raise CubeError(f"no import {iid} (see `mnemo memory imports`)")
        if row[0] == "undone":
            raise CubeError(f"import {iid} was undone already")
        owners.jobs.delete(
            [
                r[0]
                for r in db.execute(
                    "SELECT id FROM job WHERE kind = 'cube_import' AND status = 'pending' "
                    "AND json_extract(payload, '$.import_id') = ?",
                    (iid,),
                ).fetchall()
            ]
        )
        items = db.execute(
            "SELECT kind, item_id, action, before, after_version, stamp FROM cube_import_item WHERE import_id = ? "
            "AND item_id IS NOT NULL AND action IN ('added', 'merged')",
            (iid,),
        ).fetchall()
        report = UndoReport(iid)
        _put_back(db, persona, items, report)
        for kind in ("trait", "knowledge"):
            for iid_ in _still_ours(db, kind, items):
                owners.versions.delete_item(kind, iid_)
                if kind == "trait":
                    report.traits += 1
                else:
                    report.facts += 1
        pages = _still_ours(db, "page", items)
        forget_pages(pages)
        report.pages = len(pages)
        _drop_empty(db, owners, items, report)
        staging.mark_undone(db, iid)
        db.emit(
            "cube_import_undone",
            None,
            None,
            f"import {iid} of memory cube {row[1]} undone: {report.pages:,} pages, "
            f"{report.traits + report.facts:,} persona items removed, {report.restored:,} put back",
            {"import_id": iid, "removed": report.pages, "restored": report.restored, "left": len(report.left)},
        )
        return report


def _made_at(db: Database, kind: str, item_id: int) -> float | None:
    table = "conversation" if kind == "chat" else kind
    row = db.execute(f"SELECT created_at FROM {table} WHERE id = ?", (item_id,)).fetchone()
    return None if row is None else row[0]


def _still_ours(db: Database, kind: str, items: list[Any]) -> list[int]:
    """The items of `kind` the import added that are still the ones it wrote."""
    return sorted(
        item_id
        for k, item_id, action, _b, _a, stamp in items
        if k == kind and action == "added" and _made_at(db, kind, item_id) == stamp
    )


def _put_back(db: Database, persona: PersonaImport, items: list[Any], report: UndoReport) -> None:
    """Merged items as they were before the import's first merge into each, when nothing changed them since
    its last."""
    merged: dict[tuple[str, int], list[tuple[dict, int, float]]] = {}
    for kind, item_id, action, before, after, stamp in items:
        if action == "merged" and before:
            merged.setdefault((kind, item_id), []).append((from_json(before, {}), after, stamp))
    for (kind, item_id), group in sorted(merged.items()):
        row = db.execute(f"SELECT version, created_at FROM {kind} WHERE id = ?", (item_id,)).fetchone()
        first = min(group, key=lambda g: int(g[0]["version"]))
        last = max(g[1] for g in group)
        label = "trait" if kind == "trait" else "fact"
        if row is None:
            continue  # forgotten since: nothing to put back
        if row[0] != last or row[1] != first[2]:
            report.left.append(f"{label} {item_id}")
            continue
        if not persona.restore(kind, item_id, first[0]):
            report.left.append(f"{label} {item_id}")
            continue
        db.emit("edited", kind, item_id, f"{kind} {item_id} put back as it was before a memory cube import")
        report.restored += 1


def _drop_empty(db: Database, owners: UndoOwners, items: list[Any], report: UndoReport) -> None:
    """Segments, chains and chats the import made that hold nothing now."""
    for kind, item_id, action, _b, _a, stamp in items:
        if action != "added":
            continue
        if kind == "segment" and _made_at(db, "segment", item_id) == stamp:
            if not db.execute("SELECT 1 FROM page WHERE segment_id = ?", (item_id,)).fetchone():
                owners.segments.delete(item_id)
        elif kind == "chain":
            if not db.execute("SELECT 1 FROM page WHERE chain_id = ?", (item_id,)).fetchone():
                owners.segments.delete_chain(item_id)
        elif kind == "chat" and _made_at(db, "chat", item_id) == stamp:
            used = db.execute(
                "SELECT EXISTS (SELECT 1 FROM page WHERE conversation_id = ?) OR "
                "EXISTS (SELECT 1 FROM message WHERE conversation_id = ?)",
                (item_id, item_id),
            ).fetchone()[0]
            if not used:
                owners.conversations.drop_unused(item_id)
                report.chats += 1
