"""Memory cubes in the window: Memory ▸ Import memory… (what the cube would add, merge and skip, then the
import with progress and Cancel, then Undo), Memory ▸ Memory imports… (every import, and Undo), and the
inspector's Export… as a cube (the whole memory, a chat, a segment, a span of time or the persona).

The work runs on a worker of the dialog's own (`ui.tasks.UiWorker`), each task on a store connection of
its own (`app.operations.cubes`, `ui.tasks.on_own_store`); the dialogs poll its progress on a timer and hear of outcomes on the UI thread, so
the window and its chats go on meanwhile. Cancelling an import undoes what it wrote.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QDate, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.operations import cubes as cube_job
from ui.tasks import UiWorker, on_own_store

log = logging.getLogger(__name__)

POLL_MS = 100
ERROR_STYLE = "color: #c62828;"


def _dialog_worker(name: str) -> UiWorker:
    """A dialog's own worker (ui.tasks.UiWorker): no store of its own, each task opens what it needs."""
    return UiWorker(None, name=name)


def _let_go(worker: UiWorker) -> None:
    """The dialog closes: its worker ends once the task running is done, and that task's outcome still
    reaches the dialog (an undo finishing after Close still tells the window)."""
    worker.stop(0, drop_pending=False, deliver_late=True)


class CubeImportDialog(QDialog):
    """Memory ▸ Import memory…: the plan first (nothing written), then the import on the user's word."""

    finished_import = Signal(object)  # the CubeImportJob, once it is done, failed or was cancelled

    def __init__(self, ctx, path: str | Path, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import memory")
        self.setMinimumWidth(560)
        self.job = cube_job.CubeImportJob(Path(path))
        self.undo_report: Any = None
        lay = QVBoxLayout(self)
        self.title = QLabel(f"Memory cube <b>{Path(path).name}</b>", self)
        lay.addWidget(self.title)
        self.status = QLabel("Checking the cube…", self)
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.details = QPlainTextEdit(self)
        self.details.setReadOnly(True)
        self.details.setAccessibleName("What the import adds, merges and skips")
        self.details.setMinimumHeight(150)
        lay.addWidget(self.details)
        space_row = QHBoxLayout()  # MemOS's "a cube imported as a new space": what it adds stays apart
        self.as_space = QCheckBox("Keep what it adds in a new memory space:", self)
        self.space_name = QLineEdit(Path(path).stem, self)
        self.space_name.setAccessibleName("Name of the new memory space")
        self.space_name.setEnabled(False)
        self.as_space.toggled.connect(self.space_name.setEnabled)
        space_row.addWidget(self.as_space)
        space_row.addWidget(self.space_name, 1)
        lay.addLayout(space_row)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)
        self.bar.setAccessibleName("Import progress")
        lay.addWidget(self.bar)
        row = QHBoxLayout()  # buttons come and go as the import goes on: a plain row keeps them in place
        self.undo_button = QPushButton("Undo this import", self)
        self.undo_button.setToolTip("Remove what this import added and put back what it changed")
        self.undo_button.clicked.connect(self.undo)
        row.addWidget(self.undo_button)
        row.addStretch(1)
        self.import_button = QPushButton("Import", self)
        self.import_button.setEnabled(False)
        self.import_button.clicked.connect(self.start_import)
        row.addWidget(self.import_button)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        row.addWidget(self.cancel_button)
        self.close_button = QPushButton("Close", self)
        self.close_button.clicked.connect(self.accept)
        row.addWidget(self.close_button)
        lay.addLayout(row)
        self.undo_button.hide()
        self.close_button.hide()
        self._ctx = ctx
        self._worker = _dialog_worker("mnemo-cube-import")
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    # -- the plan ---------------------------------------------------------------------
    def start(self) -> None:
        """Check the cube and say what importing it would do (nothing is written yet)."""
        ctx, job = self._ctx, self.job
        self._worker.submit(lambda _: cube_job.run_plan(ctx, job), self._planned, on_error=self._failed)

    def _planned(self, job) -> None:
        self.bar.hide()  # until there is something to show progress of
        if job.phase != "planned":
            self._show_failure(job.error or "the cube could not be read")
            return
        plan = job.plan
        self.details.setPlainText(plan.describe())
        new = plan.counts.added + plan.counts.facts["merged"] + plan.counts.traits["merged"]
        if new:
            self.status.setText("Nothing has been imported yet. Import it?")
            self.import_button.setEnabled(True)
            self.import_button.setDefault(True)
        else:
            self.status.setText("Everything this cube holds is in memory already: there is nothing to import.")
            self._finish_buttons()

    # -- the import -------------------------------------------------------------------
    def start_import(self) -> None:
        ctx, job = self._ctx, self.job
        if self.as_space.isChecked():
            name = " ".join(self.space_name.text().split())
            if not name:
                self.status.setText("Give the new memory space a name, or untick the box.")
                return
            job.space_name = name
        self.as_space.setEnabled(False)
        self.space_name.setEnabled(False)
        self.import_button.setEnabled(False)
        job.phase = "importing"  # from now on Cancel cancels it (the task may not have begun)
        self.status.setText("Importing…")
        self.bar.setRange(0, 0)
        self.bar.show()
        self._worker.submit(lambda _: cube_job.run_import(ctx, job), self._imported, on_error=self._failed)
        self._timer.start()

    def cancel(self) -> None:
        job = self.job
        if job.phase == "importing" and not job.finished:
            job.cancel()
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling… (what was written is taken back)")
            return
        self.reject()

    def reject(self) -> None:  # Esc or the window's close button: an import running is cancelled first
        if self.job.phase == "importing" and not self.job.finished:
            self.cancel()
            return
        _let_go(self._worker)
        super().reject()

    def accept(self) -> None:
        _let_go(self._worker)
        super().accept()

    def _poll(self) -> None:
        phase, what, done, total = self.job.snapshot()
        if phase == "importing" and total and not self.job.cancelled:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))
            self.status.setText(f"{what.capitalize()}: {done:,} of {total:,}")

    def _imported(self, job) -> None:
        self._timer.stop()
        self.bar.setRange(0, 1)
        if job.phase == "done":
            self.bar.setValue(1)
            record = job.record
            into = f" What it added is in the memory space “{job.space_name}”." if job.space_name else ""
            self.status.setText(
                f"Imported as import {record.id}. Every item remembers that it came from {record.file_name}.{into}"
            )
            self.details.setPlainText("\n".join(record.counts.lines(done=True)))
            self.undo_button.show()
        elif job.phase == "cancelled":
            self.bar.setValue(0)
            self.status.setText("Cancelled: nothing of the cube was kept.")
        else:
            self._show_failure(job.error or "the import stopped")
        self._finish_buttons()
        self.finished_import.emit(job)

    def _failed(self, exc: BaseException) -> None:  # the job reports its own failures: this is a bug
        log.error("the cube import of %s failed: %s", self.job.path, exc)
        self.job.error, self.job.phase = f"{type(exc).__name__}: {exc}", "failed"
        self._timer.stop()
        self._show_failure(self.job.error)
        self._finish_buttons()
        self.finished_import.emit(self.job)

    def _show_failure(self, why: str) -> None:
        self.bar.hide()
        self.details.hide()
        self.status.setText(f"Not imported: {why}")
        self.status.setStyleSheet(ERROR_STYLE)
        self._finish_buttons()

    def _finish_buttons(self) -> None:
        self.import_button.hide()
        self.cancel_button.hide()
        self.close_button.show()

    # -- undo -------------------------------------------------------------------------
    def undo(self) -> None:
        record = self.job.record
        if record is None:
            return
        self.undo_button.setEnabled(False)
        self.status.setText("Undoing the import…")

        def undone(report) -> None:
            self.undo_report = report
            self.status.setText(f"Import {record.id} undone: memory is as it was before it.")
            self.details.setPlainText(report.describe().capitalize() + ".")
            self.bar.hide()
            self.undo_button.hide()
            self.finished_import.emit(self.job)

        def failed(exc: BaseException) -> None:
            self.undo_button.setEnabled(True)
            self.status.setText(f"Not undone: {exc}")
            self.status.setStyleSheet(ERROR_STYLE)

        self._worker.submit(
            on_own_store(self._ctx.open_store, lambda s: s.cubes.undo(record.id)), undone, on_error=failed
        )


class CubeImportsDialog(QDialog):
    """Memory ▸ Memory imports…: every cube imported into this memory, and Undo for one."""

    changed = Signal()  # an import was undone

    COLUMNS = ("Import", "When", "Cube file", "What it added", "State")

    def __init__(self, ctx, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Memory imports")
        self.resize(760, 320)
        self.records: list[Any] = []
        lay = QVBoxLayout(self)
        self.table = QTableWidget(0, len(self.COLUMNS), self)
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        for col in (0, 1, 2, 4):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selected)
        lay.addWidget(self.table)
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        row = QHBoxLayout()
        self.undo_button = QPushButton("Undo import…", self)
        self.undo_button.setToolTip("Remove what the import added and put back what it changed")
        self.undo_button.setEnabled(False)
        self.undo_button.clicked.connect(self.undo_selected)
        row.addWidget(self.undo_button)
        row.addStretch(1)
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        row.addWidget(close)
        lay.addLayout(row)
        self._ctx = ctx
        self._worker = _dialog_worker("mnemo-cube-imports")
        self.loaded = False

    def refresh(self) -> None:
        self.loaded = False
        self._worker.submit(
            on_own_store(self._ctx.open_store, lambda s: s.cubes.imports()), self._show, on_error=self._error
        )

    def _show(self, records) -> None:
        self.records = list(records)
        self.table.setRowCount(len(self.records))
        for i, r in enumerate(self.records):
            c = r.counts
            what = f"{c.pages['added']:,} pages, {c.traits['added'] + c.facts['added']:,} persona items"
            merged = c.traits["merged"] + c.facts["merged"]
            if merged:
                what += f", {merged:,} merged"
            state = {"done": "imported", "undone": "undone", "running": f"{r.pages_left:,} pages to write"}.get(
                r.status, "interrupted"
            )
            when = dt.datetime.fromtimestamp(r.started_at).strftime("%Y-%m-%d %H:%M")
            for col, text in enumerate((str(r.id), when, r.file_name, what, state)):
                self.table.setItem(i, col, QTableWidgetItem(text))
        self.status.setText("" if self.records else "No memory cube was imported into this memory yet.")
        self._selected()
        self.loaded = True

    def _selected(self) -> None:
        rec = self.selected()
        self.undo_button.setEnabled(rec is not None and rec.status != "undone")

    def selected(self):
        rows = self.table.selectionModel().selectedRows()
        return self.records[rows[0].row()] if rows else None

    def undo_selected(self, *, confirm: bool = True) -> None:
        rec = self.selected()
        if rec is None:
            return
        if confirm:
            answer = QMessageBox.question(
                self,
                "Undo import",
                f"Undo import {rec.id} of {rec.file_name}? What it added is removed (with anything memory drew "
                "from it since) and what it merged is put back as it was.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.undo_button.setEnabled(False)
        self.status.setText(f"Undoing import {rec.id}…")

        def undone(report) -> None:
            self.status.setText(report.describe().capitalize() + ".")
            self.changed.emit()
            self._worker.submit(
                on_own_store(self._ctx.open_store, lambda s: s.cubes.imports()),
                self._show_keep_status,
                on_error=self._error,
            )

        self._worker.submit(
            on_own_store(self._ctx.open_store, lambda s: s.cubes.undo(rec.id)), undone, on_error=self._error
        )

    def _show_keep_status(self, records) -> None:
        said = self.status.text()
        self._show(records)
        self.status.setText(said)

    def _error(self, exc: BaseException) -> None:
        self.status.setText(str(exc))
        self.status.setStyleSheet(ERROR_STYLE)
        self.loaded = True
        self._selected()

    def accept(self) -> None:
        _let_go(self._worker)
        super().accept()

    def reject(self) -> None:
        _let_go(self._worker)
        super().reject()


class CubeExportDialog(QDialog):
    """The inspector's Export… as a memory cube: what goes in, and where."""

    exported = Signal(object)  # the CubeExport

    def __init__(self, ctx, path: str | Path | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Export a memory cube")
        self.setMinimumWidth(520)
        self.result_export: Any = None
        self._progress = (0, 0)
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("What goes into the cube:", self))
        grid = QGridLayout()
        self.scope = QButtonGroup(self)
        self.whole = QRadioButton("The whole memory", self)
        self.one_chat = QRadioButton("One chat's memory", self)
        self.one_segment = QRadioButton("One segment", self)
        self.span = QRadioButton("A span of time", self)
        self.persona_only = QRadioButton("The persona only", self)
        self.persona_only.setToolTip("Traits and facts with every version, without the pages they came from")
        for i, button in enumerate((self.whole, self.one_chat, self.one_segment, self.span, self.persona_only)):
            self.scope.addButton(button, i)
            grid.addWidget(button, i, 0)
        self.whole.setChecked(True)
        self.chat = QComboBox(self)
        self.chat.setAccessibleName("Chat")
        grid.addWidget(self.chat, 1, 1, 1, 3)
        self.segment = QSpinBox(self)
        self.segment.setRange(1, 2**31 - 1)
        self.segment.setAccessibleName("Segment id")
        grid.addWidget(self.segment, 2, 1)
        today = QDate.currentDate()
        self.since = QDateEdit(today.addMonths(-1), self)
        self.until = QDateEdit(today, self)
        for edit, name in ((self.since, "From"), (self.until, "To, that day included")):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd")
            edit.setAccessibleName(name)
        grid.addWidget(self.since, 3, 1)
        grid.addWidget(QLabel("to", self), 3, 2)
        grid.addWidget(self.until, 3, 3)
        lay.addLayout(grid)
        file_row = QHBoxLayout()
        self.path = QLineEdit(str(path or Path.home() / f"mnemo-memory-{dt.date.today():%Y-%m-%d}.mnemocube"), self)
        self.path.setAccessibleName("Cube file")
        file_row.addWidget(self.path, 1)
        choose = QPushButton("Choose…", self)
        choose.clicked.connect(self._choose)
        file_row.addWidget(choose)
        lay.addLayout(file_row)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.bar.hide()  # until it exports
        lay.addWidget(self.bar)
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.buttons = QDialogButtonBox(self)
        self.export_button = QPushButton("Export", self)
        self.export_button.clicked.connect(self.start_export)
        self.buttons.addButton(self.export_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.cancel_button.clicked.connect(self.reject)
        lay.addWidget(self.buttons)
        self._ctx = ctx
        self._worker = _dialog_worker("mnemo-cube-export")
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self.chats_loaded = False
        self._worker.submit(
            on_own_store(self._ctx.open_store, lambda s: s.conversations.list_conversations(limit=1000)),
            self._chats,
            on_error=self._error,
        )

    def _chats(self, convs) -> None:
        for conv in convs:
            self.chat.addItem(conv.title or f"Chat {conv.id}", conv.id)
        self.chats_loaded = True

    def _choose(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export a memory cube", self.path.text(), cube_job.FILE_FILTER)
        if path:
            self.path.setText(path if path.endswith(cube_job.SUFFIX) else path + cube_job.SUFFIX)

    def selection(self):
        from memory_core import CubeSelection

        which = self.scope.checkedButton()
        if which is self.one_chat:
            return CubeSelection(chat_id=self.chat.currentData())
        if which is self.one_segment:
            return CubeSelection(segment_id=self.segment.value())
        if which is self.span:
            since = dt.datetime.combine(self.since.date().toPython(), dt.time())
            until = dt.datetime.combine(self.until.date().toPython(), dt.time()) + dt.timedelta(days=1)
            return CubeSelection(since=since.timestamp(), until=until.timestamp())
        if which is self.persona_only:
            return CubeSelection(persona_only=True)
        return CubeSelection()

    def start_export(self) -> None:
        if self.scope.checkedButton() is self.one_chat and self.chat.currentData() is None:
            self.status.setText("There is no chat to export yet.")
            return
        selection, path, ctx = self.selection(), self.path.text().strip(), self._ctx
        self.export_button.setEnabled(False)
        self.status.setStyleSheet("")
        self.status.setText(f"Exporting {selection.describe()}…")
        self.bar.show()
        self._timer.start()

        def progress(done: int, total: int) -> None:
            with self._lock:
                self._progress = (done, total)

        def work(store):
            return cube_job.export_cube(
                ctx, store, path, selection, on_progress=progress, cancelled=self._cancel.is_set
            )

        self._worker.submit(on_own_store(self._ctx.open_store, work), self._exported, on_error=self._error)

    def _poll(self) -> None:
        with self._lock:
            done, total = self._progress
        if total:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))

    def _exported(self, result) -> None:
        self._timer.stop()
        self.result_export = result
        self.bar.setRange(0, 1)
        self.bar.setValue(1)
        vectors = "with vectors" if result.vectors else "without vectors"
        self.status.setText(f"Exported {result.describe()}, {vectors}, to {result.path}.")
        self.export_button.hide()
        self.cancel_button.setText("Close")
        self.exported.emit(result)

    def _error(self, exc: BaseException) -> None:
        self._timer.stop()
        from memory_core import CubeCancelled

        self.export_button.setEnabled(True)
        if isinstance(exc, CubeCancelled):
            self.status.setText("Cancelled: nothing was written.")
            return
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.status.setText(f"Not exported: {why}; nothing was written.")
        self.status.setStyleSheet(ERROR_STYLE)

    def reject(self) -> None:
        self._cancel.set()
        _let_go(self._worker)
        super().reject()


def open_import(window) -> CubeImportDialog | None:
    """Memory ▸ Import memory…: choose a cube, then its dialog (kept on the window while open)."""
    path, _ = QFileDialog.getOpenFileName(window, "Import memory", str(Path.home()), cube_job.FILE_FILTER)
    return import_cube(window, path) if path else None


def import_cube(window, path: str) -> CubeImportDialog:
    dlg = CubeImportDialog(window.ctx, path, window)

    def finished(_job) -> None:
        refresh = getattr(window, "refresh_conversations", None)
        if refresh is not None:
            refresh()
        backend = getattr(window, "backend", None)
        if backend is not None:
            backend.notify_jobs()

    dlg.finished_import.connect(finished)
    window.cube_import_window = dlg
    dlg.open()
    dlg.start()
    return dlg


def open_imports(window) -> CubeImportsDialog:
    """Memory ▸ Memory imports…: the list, with Undo."""
    dlg = CubeImportsDialog(window.ctx, window)
    refresh = getattr(window, "refresh_conversations", None)
    if refresh is not None:
        dlg.changed.connect(refresh)
    window.cube_imports_window = dlg
    dlg.open()
    dlg.refresh()
    return dlg
