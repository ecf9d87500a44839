"""`MemoryStore.cubes`: memory that moves. Export a cube, say what importing one would do, import it
(resumably, in batches), list the imports, undo one, and say where an imported item came from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..conversations import Conversations
from ..pages.component import Pages
from ..pages.embedding import Embedding
from ..persona.merge import PersonaMerge
from ..persona.versions import Versions
from ..segments.component import Segments
from ..storage.codec import from_json
from ..storage.database import Database
from ..storage.jobs import Jobs
from .export import CubeExport, CubeSelection, export_cube
from .format import CubeCancelled, CubeLimits
from .importer import Importer
from .records import ImportCounts, ImportPlan, ImportRecord, ItemOrigin, UndoReport
from .undo import UndoOwners, undo_import

Progress = Callable[[str, int, int], None]
_TABLE = {"chat": "conversation", "page": "page", "segment": "segment", "trait": "trait", "knowledge": "knowledge"}


class Cubes:
    def __init__(
        self,
        db: Database,
        embedding: Embedding,
        pages: Pages,
        segments: Segments,
        versions: Versions,
        merge: PersonaMerge,
        jobs: Jobs,
        conversations: Conversations,
        forget_pages: Callable[[Sequence[int]], None],
    ):
        self.db = db
        self.embedding = embedding
        self.jobs = jobs
        self.versions = versions
        self.segments = segments
        self.conversations = conversations
        self.importer = Importer(db, embedding, pages, segments, versions, merge, jobs, conversations)
        self._forget_pages = forget_pages

    def export(
        self,
        path: str | Path,
        selection: CubeSelection | None = None,
        *,
        app_version: str = "unknown",
        chat_model_id: str | None = None,
        vectors: bool = True,
        on_progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        extras: Sequence[tuple[str, bytes | Path]] = (),
    ) -> CubeExport:
        """Write what `selection` takes (default: the whole memory) as a memory cube at `path`;
        `extras`: optional members (the app's adapters under parametric/)."""
        return export_cube(
            self.db,
            path,
            selection,
            embed_model_id=self.embedding.model_id,
            app_version=app_version,
            chat_model_id=chat_model_id,
            vectors=vectors,
            on_progress=on_progress,
            cancelled=cancelled,
            extras=extras,
        )

    def plan(self, path: str | Path, limits: CubeLimits | None = None) -> ImportPlan:
        """What importing the cube at `path` would add, merge and skip (a dry run: nothing is written).
        Raises CubeError for a cube that cannot be imported."""
        return self.importer.plan(path, limits)

    def start_import(
        self,
        path: str | Path,
        limits: CubeLimits | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
        on_progress: Progress | None = None,
    ) -> int:
        """Check and stage the cube, queue its writing (the "cube_import" jobs); returns the import's id.
        The memory thread of the app runs the jobs, or `run_import` here and now."""
        return self.importer.start(path, limits, cancelled=cancelled, on_progress=on_progress)

    def run_import(
        self, iid: int, *, cancelled: Callable[[], bool] | None = None, on_progress: Progress | None = None
    ) -> ImportRecord:
        """Write the rest of import `iid` now, batch after batch. A cancel undoes what it wrote and raises
        CubeCancelled. Returns the import's record: "done", or "running" with the error that stopped it."""
        before = self.jobs.on_progress
        if on_progress is not None:
            self.jobs.on_progress = on_progress
        try:
            while True:
                rec = self.get_import(iid)
                if rec is None or rec.status != "running":
                    assert rec is not None
                    return rec
                if cancelled is not None and cancelled():
                    self.undo(iid)
                    raise CubeCancelled("import cancelled: nothing of it was kept")
                if not self.importer._pending_job(iid):
                    return rec
                self.jobs.run_pending(max_jobs=1, kinds=["cube_import"])
        finally:
            self.jobs.on_progress = before

    def import_cube(
        self,
        path: str | Path,
        limits: CubeLimits | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
        on_progress: Progress | None = None,
    ) -> ImportRecord:
        """`start_import` then `run_import`: the whole import, here and now."""
        iid = self.start_import(path, limits, cancelled=cancelled, on_progress=on_progress)
        return self.run_import(iid, cancelled=cancelled, on_progress=on_progress)

    def undo(self, iid: int) -> UndoReport:
        """Remove what import `iid` added and put back what it changed (see memory_core.cubes.undo)."""
        owners = UndoOwners(self.versions, self.segments, self.conversations, self.jobs)
        return undo_import(self.db, self.importer.persona, owners, self._forget_pages, iid)

    # ------------------------------------------------------------------ reading the records
    _COLS = "id, cube_id, file_name, status, started_at, finished_at, undone_at, summary, manifest"

    def _record(self, r: tuple) -> ImportRecord:
        from .importer import _selection_text

        manifest = from_json(r[8], {})
        left = self.db.scalar("SELECT count(*) FROM cube_stage WHERE import_id = ? AND member = 'page'", (r[0],))
        error = self.db.scalar(
            "SELECT error FROM job WHERE kind = 'cube_import' AND status = 'failed' "
            "AND json_extract(payload, '$.import_id') = ? ORDER BY id DESC LIMIT 1",
            (r[0],),
        )
        return ImportRecord(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            ImportCounts.from_json(from_json(r[7], {})),
            _selection_text(manifest.get("selection", {})),
            int(left or 0),
            error,
        )

    def imports(self) -> list[ImportRecord]:
        """Every import of a cube into this memory, the newest first."""
        return [self._record(r) for r in self.db.rows(f"SELECT {self._COLS} FROM cube_import ORDER BY id DESC")]

    def get_import(self, iid: int) -> ImportRecord | None:
        r = self.db.one(f"SELECT {self._COLS} FROM cube_import WHERE id = ?", (iid,))
        return self._record(r) if r else None

    def origin(self, kind: str, item_id: int) -> ItemOrigin | None:
        """Where an item came from when an import (not undone) added it or merged into it: the cube's id, its
        file's name and when. Kinds: "page", "segment", "trait", "knowledge", "chat"."""
        table = _TABLE.get(kind)
        if table is None:
            raise ValueError(f"kind must be one of {sorted(_TABLE)}")
        made = self.db.scalar(f"SELECT created_at FROM {table} WHERE id = ?", (item_id,))
        for iid, cube_id, name, at, action, stamp in self.db.rows(
            "SELECT i.import_id, c.cube_id, c.file_name, c.started_at, i.action, i.stamp FROM cube_import_item i "
            "JOIN cube_import c ON c.id = i.import_id WHERE i.kind = ? AND i.item_id = ? "
            "AND i.action IN ('added', 'merged') AND c.status != 'undone' ORDER BY i.import_id DESC",
            (kind, item_id),
        ):
            if made is not None and stamp == made:
                return ItemOrigin(iid, cube_id, name, at, action)
        return None
