"""Import past conversations (a ChatGPT or Claude export, LoCoMo JSON, a text transcript) from the app.

The import runs as a task on a queue of its own (`app.tasks.TaskQueue`; `app.importers.job`
opens its own database connection); this dialog polls its progress on a timer and hears of
the outcome on the UI thread (`ui.tasks.MainThread`), so the window stays responsive and the
chat can be used meanwhile. Cancel keeps what was written; importing the file again finishes it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.importers.job import ImportJob, run_import
from app.tasks import TaskQueue
from ui.tasks import MainThread

log = logging.getLogger(__name__)

FILE_FILTER = "Conversations (*.json *.zip *.txt *.md *.markdown);;All files (*)"
POLL_MS = 100


class ImportDialog(QDialog):
    finished_import = Signal(object)  # the ImportJob, when it is done, failed or was cancelled
    instructions_found = Signal(str)  # the export's custom instructions ("how to respond"), for Settings

    def __init__(self, ctx, path: str | Path, parent: QWidget | None = None):
        super().__init__(parent)
        self._ctx = ctx
        self.setWindowTitle("Import conversations")
        self.setMinimumWidth(520)
        self.job = ImportJob(Path(path))
        lay = QVBoxLayout(self)
        self.title = QLabel(f"Importing <b>{Path(path).name}</b>", self)
        lay.addWidget(self.title)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)  # busy until the file is read and the turns counted
        self.bar.setAccessibleName("Import progress")
        lay.addWidget(self.bar)
        self.status = QLabel("Reading the file…", self)
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.details = QPlainTextEdit(self)
        self.details.setReadOnly(True)
        self.details.setAccessibleName("Import warnings")
        self.details.hide()
        lay.addWidget(self.details)
        self.buttons = QDialogButtonBox(self)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        self.buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.close_button.clicked.connect(self.accept)
        self.close_button.hide()
        lay.addWidget(self.buttons)
        self._tasks = TaskQueue("mnemo-import", deliver=MainThread(self))
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    def start(self) -> None:
        ctx, job = self._ctx, self.job
        self._tasks.submit(lambda _resource: run_import(ctx, job), self._finished, self._failed, label="import")
        self._tasks.stop(timeout=0)  # no more tasks: its thread ends once the import is done
        self._timer.start()

    def cancel(self) -> None:
        if self.job.finished:
            self.reject()
            return
        self.job.cancel()
        self.cancel_button.setEnabled(False)
        self.status.setText("Cancelling… (the conversation being written is rolled back)")

    def reject(self) -> None:  # Esc or the window's close button: cancel first, close when done
        if not self.job.finished:
            self.cancel()
            return
        super().reject()

    def _poll(self) -> None:
        phase, done, total, note = self.job.snapshot()
        if phase == "writing" and total:
            self.bar.setRange(0, total)
            self.bar.setValue(done)
            elapsed = time.monotonic() - self.job.started
            rate = done / elapsed if elapsed > 0 else 0
            eta = f", about {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
            if not self.job.cancelled:
                self.status.setText(f"{done:,} of {total:,} turns{eta}" + (f" — {note}" if note else ""))

    def _finished(self, _job: ImportJob) -> None:
        self._timer.stop()
        self._poll()  # the last progress
        self._show_result()

    def _failed(self, exc: BaseException) -> None:
        # run_import reports its own failures in the job: an exception here is a bug in it
        log.error("the import of %s failed: %s", self.job.path, exc)
        self.job.error, self.job.phase = f"{type(exc).__name__}: {exc}", "failed"
        self._finished(self.job)

    def _show_result(self) -> None:
        job = self.job
        self.cancel_button.hide()
        self.close_button.show()
        self.bar.setRange(0, 1)
        self.bar.setValue(1 if job.phase == "done" else 0)
        if job.phase == "done":
            r = job.report
            self.status.setText(
                f"{r.count('imported')} conversation(s) imported, {r.count('resumed')} finished, "
                f"{r.count('already imported')} already there: {r.turns_written:,} turns became "
                f"{r.pages_written:,} memory pages in {r.seconds:.1f} s.{r.profile_note()}"
            )
            if r.issues:
                self.details.setPlainText("\n".join(str(i) for i in r.issues))
                self.details.show()
            if getattr(r, "instructions", ""):
                self.instructions_found.emit(r.instructions)
        elif job.phase == "cancelled":
            self.status.setText(
                "Cancelled. The conversations written before are kept; import the same file again to finish the rest."
            )
        else:
            self.status.setText(f"The import failed: {job.error}")
            self.status.setStyleSheet("color: #c62828;")
        self.finished_import.emit(job)
