"""Import past conversations (a ChatGPT or Claude export, LoCoMo JSON, a text transcript) from the app.

The import runs as a task on the dialog's own worker (`ui.tasks.UiWorker`; `app.importers.job`
opens its own database connection); this dialog polls its progress on a timer and hears of
the outcome on the UI thread, so the window stays responsive and the chat can be used meanwhile. Cancel keeps what was written; importing the file again finishes it.

A dialogue between two named people (LoCoMo JSON) is not the user's chat with an assistant: once the
file is read, the dialog asks "Who are you?" (one of the speakers, or neither: other people) before
anything is written, and the pages record the answer (app.importers.people).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractButton,
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QGroupBox,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.importers.job import ImportJob, run_import
from ui.tasks import UiWorker

log = logging.getLogger(__name__)

FILE_FILTER = "Conversations (*.json *.zip *.txt *.md *.markdown);;All files (*)"
POLL_MS = 100


class ImportDialog(QDialog):
    finished_import = Signal(object)  # the ImportJob, when it is done, failed or was cancelled
    instructions_found = Signal(str)  # the export's custom instructions ("how to respond"), for Settings

    def __init__(self, ctx, path: str | Path, parent: QWidget | None = None):
        super().__init__(parent)
        self._ctx = ctx
        self._worker = UiWorker(None, name="mnemo-import")  # the import opens its own store (app.importers)
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
        self.who = WhoAreYou(self)
        self.who.hide()
        lay.addWidget(self.who)
        lay.addStretch(1)  # the room the question leaves, below the result
        self.buttons = QDialogButtonBox(self)
        self.import_button = QPushButton("Import", self)
        self.import_button.setEnabled(False)
        self.import_button.clicked.connect(self.answer)
        self.import_button.hide()
        self.buttons.addButton(self.import_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.who.chosen.connect(lambda: self.import_button.setEnabled(True))
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        self.buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.close_button.clicked.connect(self.accept)
        self.close_button.hide()
        lay.addWidget(self.buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    def start(self) -> None:
        """Read the file (and, unless it needs asking who the user is, write it) in the background."""
        ctx, job = self._ctx, self.job
        self._worker.submit(
            lambda _resource: run_import(ctx, job), self._finished, on_error=self._failed, label="import"
        )
        self._timer.start()

    def answer(self) -> None:
        """The "Who are you?" step answered: write the file as read, with that answer."""
        if self.job.phase != "asking" or not self.who.answered:
            return
        self.job.answer(self.who.me)
        self.who.hide()
        self.import_button.setEnabled(False)
        self.bar.setRange(0, 0)
        self.bar.show()
        self.status.setText("Importing…")
        self.start()

    def cancel(self) -> None:
        if self.job.finished:
            self.reject()
            return
        asking = self.job.phase == "asking"
        self.job.cancel()
        if asking:  # nothing runs and nothing was written
            self._show_result()
            return
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
        if self.job.phase == "asking":
            self._ask()
            return
        self._poll()  # the last progress
        self._show_result()

    def _whose_note(self) -> str:
        """What the answer to "Who are you?" made of the file, for the result."""
        job = self.job
        if not job.told:
            return ""
        if job.me is None:
            return " Remembered as other people's conversation."
        return f" You are {job.me} in it." if job.dialogues == 1 else f" You are {job.me} where {job.me} speaks."

    def _ask(self) -> None:
        """The file holds a dialogue between named people: ask who the user is before writing it."""
        job = self.job
        self.bar.hide()  # nothing runs while the user answers
        self.who.ask(job.speakers, job.dialogues)
        self.who.show()
        self.import_button.show()
        self.import_button.setDefault(True)
        self.status.setText("The file is read. Nothing is imported until you answer.")

    def _failed(self, exc: BaseException) -> None:
        # run_import reports its own failures in the job: an exception here is a bug in it
        log.error("the import of %s failed: %s", self.job.path, exc)
        self.job.error, self.job.phase = f"{type(exc).__name__}: {exc}", "failed"
        self._finished(self.job)

    def _show_result(self) -> None:
        self._worker.stop(0, drop_pending=False, deliver_late=True)  # nothing more to run: its thread ends
        job = self.job
        self.import_button.hide()
        self.who.hide()
        self.bar.show()
        self.cancel_button.hide()
        self.close_button.show()
        self.bar.setRange(0, 1)
        self.bar.setValue(1 if job.phase == "done" else 0)
        if job.phase == "done":
            r = job.report
            self.status.setText(
                f"{r.count('imported')} conversation(s) imported, {r.count('resumed')} finished, "
                f"{r.count('already imported')} already there: {r.turns_written:,} turns became "
                f"{r.pages_written:,} memory pages in {r.seconds:.1f} s.{r.profile_note()}{self._whose_note()}"
            )
            if r.issues:
                self.details.setPlainText("\n".join(str(i) for i in r.issues))
                self.details.show()
            if getattr(r, "instructions", ""):
                self.instructions_found.emit(r.instructions)
        elif job.phase == "cancelled" and not job.told and job.speakers:
            self.status.setText("Cancelled. Nothing was imported.")
        elif job.phase == "cancelled":
            self.status.setText(
                "Cancelled. The conversations written before are kept; import the same file again to finish the rest."
            )
        else:
            self.status.setText(f"The import failed: {job.error}")
            self.status.setStyleSheet("color: #c62828;")
        self.finished_import.emit(job)


class WhoAreYou(QGroupBox):
    """The "Who are you?" step: one of a dialogue's named speakers, or "Neither — these are other people".
    `chosen` is emitted at the first answer; `me` is the name chosen (None: neither)."""

    chosen = Signal()
    NEITHER = "Neither — these are other people"

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Who are you?", parent)
        self.setAccessibleName("Who are you?")
        lay = QVBoxLayout(self)
        self.question = QLabel(self)
        self.question.setWordWrap(True)
        lay.addWidget(self.question)
        self._grid = QGridLayout()
        lay.addLayout(self._grid)
        self.group = QButtonGroup(self)
        self.group.buttonClicked.connect(lambda _b: self.chosen.emit())
        self.options: list[QAbstractButton] = []
        self._names: list[str | None] = []

    def ask(self, speakers: list[str], dialogues: int = 1) -> None:
        """One choice per speaker (two columns) and "Neither", none chosen yet."""
        for b in self.options:
            self.group.removeButton(b)
            b.deleteLater()
        self.options, self._names = [], []
        names = " and ".join(speakers) if len(speakers) == 2 else ", ".join(speakers)
        self.question.setText(
            f"This file is a conversation between {names}, not a chat of yours with an assistant. "
            "Are you one of them? What you said there becomes what Mnemo knows about you; what the "
            "others said is remembered as theirs."
            if dialogues == 1
            else f"This file holds {dialogues} conversations between named people ({names}). Are you one of "
            "them? The conversations you are not in are remembered as other people's."
        )
        choices: list[tuple[str, str | None]] = [(f"I am {n}", n) for n in speakers] + [(self.NEITHER, None)]
        for i, (label, name) in enumerate(choices):
            b = QRadioButton(label, self)
            self.group.addButton(b)
            self.options.append(b)
            self._names.append(name)
            if name is None:
                self._grid.addWidget(b, (len(speakers) + 1) // 2, 0, 1, 2)
            else:
                self._grid.addWidget(b, i // 2, i % 2)

    @property
    def answered(self) -> bool:
        return self.group.checkedButton() is not None

    @property
    def me(self) -> str | None:
        b = self.group.checkedButton()
        return self._names[self.options.index(b)] if b is not None else None
