"""The Adapters view: parametric memory, the LoRA adapters the chat model can use (app.parametric.adapters).

Each row is one adapter: whether the chat open in the window uses it (a check box: the chat's choice,
kept), its name, the model it was made for, its size, scale and where it came from, and whether every
new chat starts with it. One that cannot go on the current model says why in its row, and its box
is off. Add… copies an adapter file in (a file that is no adapter is refused with one line), Remove
deletes one, Scale… changes how strongly it acts.

"Teach the model my memories…" runs `mnemo memory distill` (app.parametric.distill) on a worker of its own
(ui.tasks.UiWorker, the app's one background mechanism: minutes of training must not hold up the
inspector's reads), with a progress bar and Cancel, which keeps nothing. It needs the [train] extra;
without it the button says what to install.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.chat.activation_cache import human_bytes
from app.parametric import adapters as ad
from app.parametric import distill
from models.chat import CancelToken
from ui.inspector.host import PanelHost
from ui.tasks import MainThread, UiWorker

TIP = "Small add-ons to the model's weights that change what it says, such as one taught from your memories"
COLUMNS = ("In this chat", "Name", "Made for", "Size", "Scale", "From", "New chats")
EXPLAINED = (
    "An adapter changes the model itself a little, so it knows something without being reminded. "
    "Turn one on for the chat open now, or for every new chat; or teach the model what Mnemo remembers."
)


class AdaptersView(QWidget):
    def __init__(self, panel: PanelHost, ctx):
        super().__init__()
        self.panel = panel
        self.ctx = ctx
        self.registry = ad.AdapterRegistry(ctx.paths.data_dir)
        self.rows: list[ad.AdapterRow] | None = None
        self.chat_id: int | None = None
        self._filling = False
        self._main = MainThread(self)
        self._trainer: UiWorker | None = None
        self._cancel: CancelToken | None = None
        lay = QVBoxLayout(self)
        note = QLabel(EXPLAINED)
        note.setWordWrap(True)
        lay.addWidget(note)
        self.headline = QLabel("…")
        self.headline.setAccessibleName("Adapters: totals")
        lay.addWidget(self.headline)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.setAccessibleName("Adapters")
        self.table.itemChanged.connect(self._on_item_changed)
        lay.addWidget(self.table, 1)
        buttons = QHBoxLayout()
        self.add_btn = self._button(buttons, "Add…", "Copy an adapter file (.gguf) into Mnemo", self.add_file)
        self.remove_btn = self._button(buttons, "Remove", "Delete the selected adapter", self.remove_selected)
        self.scale_btn = self._button(
            buttons, "Scale…", "How strongly the selected adapter acts (1: as trained)", self.ask_scale
        )
        buttons.addStretch(1)
        lay.addLayout(buttons)
        teach = QHBoxLayout()
        self.teach_btn = self._button(teach, "Teach the model my memories…", "", self.teach)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        teach.addWidget(self.progress, 1)
        self.cancel_btn = self._button(teach, "Cancel", "Stop teaching; nothing is kept", self.cancel_teaching)
        self.cancel_btn.setVisible(False)
        lay.addLayout(teach)
        missing = distill.missing_packages()
        self.teach_btn.setToolTip(
            f"Needs {', '.join(missing)}: {distill.INSTALL_HINT}"
            if missing
            else "Train an adapter on your facts and most talked-about conversations (minutes, on this computer)"
        )

    def _button(self, lay: QHBoxLayout, text: str, tip: str, slot) -> QPushButton:
        btn = QPushButton(text)
        btn.setToolTip(tip)
        btn.clicked.connect(slot)
        lay.addWidget(btn)
        return btn

    # -- reading -------------------------------------------------------------------------
    def current_chat(self) -> int | None:
        """The chat open in the window (its `current_id`), or None."""
        cid = getattr(self.window(), "current_id", None)
        return int(cid) if isinstance(cid, int) else None

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        registry, chat = self.registry, self.current_chat()
        model_path = ad.current_model_path(self.ctx.settings)
        self.panel.worker.submit(
            lambda store: (chat, ad.rows(registry, model_path, chat, store)),
            lambda got: self.set_rows(*got),
            label="adapters",
        )

    def set_rows(self, chat_id: int | None, rows: list[ad.AdapterRow]) -> None:
        self.chat_id, self.rows = chat_id, rows
        usable = sum(1 for r in rows if r.problem is None)
        self.headline.setText(
            f"{len(rows)} adapter{'s' if len(rows) != 1 else ''}, {human_bytes(sum(r.size for r in rows))}"
            + (f"; {len(rows) - usable} not for the current model" if usable < len(rows) else "")
        )
        self._filling = True
        try:
            self.table.setRowCount(len(rows))
            for i, r in enumerate(rows):
                self.table.setItem(i, 0, self._check(r.in_chat, r.problem is None and chat_id is not None, r.problem))
                for j, text in enumerate((r.name, r.base_model, human_bytes(r.size), f"{r.scale:g}", r.source), 1):
                    item = QTableWidgetItem(text)
                    item.setToolTip(r.problem or text)
                    self.table.setItem(i, j, item)
                self.table.setItem(i, 6, self._check(r.new_chats, True, None))
        finally:
            self._filling = False
        has = bool(rows)
        self.remove_btn.setEnabled(has)
        self.scale_btn.setEnabled(has)

    def _check(self, on: bool, enabled: bool, problem: str | None) -> QTableWidgetItem:
        item = QTableWidgetItem()
        flags = Qt.ItemFlag.ItemIsSelectable | (
            Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled if enabled else Qt.ItemFlag.NoItemFlags
        )
        item.setFlags(flags)
        item.setCheckState(Qt.CheckState.Checked if on and enabled else Qt.CheckState.Unchecked)
        if problem:
            item.setToolTip(f"Cannot be used with the current model: {problem}")
        return item

    # -- changing ------------------------------------------------------------------------
    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if self._filling or self.rows is None or item.column() not in (0, 6):
            return
        name = self.rows[item.row()].name
        on = item.checkState() == Qt.CheckState.Checked
        registry, chat = self.registry, self.chat_id
        fn: Callable[[Any], object]
        if item.column() == 0 and chat is not None:
            fn = lambda store: registry.toggle(chat, name, on)  # noqa: E731
            message = f"{name} {'on' if on else 'off'} in this chat"
        else:
            fn = lambda store: registry.set_new_chats(name, on)  # noqa: E731
            message = f"{name} {'on' if on else 'off'} in new chats"
        self.panel.worker.submit(
            fn,
            lambda _: self._changed(message),
            label="adapter choice",
            on_error=lambda exc: self.panel.status_error(str(exc)),
        )

    def _changed(self, message: str) -> None:
        self.panel.status(message)
        self.refresh()

    def selected(self) -> ad.AdapterRow | None:
        row = self.table.currentRow()
        return self.rows[row] if self.rows and 0 <= row < len(self.rows) else None

    def add_file(self, path: str | None = None) -> None:
        if not path:
            path, _ = QFileDialog.getOpenFileName(self, "Add an adapter", "", "GGUF adapters (*.gguf);;All files (*)")
            if not path:
                return
        registry = self.registry
        self.panel.worker.submit(
            lambda store: registry.add(path),
            lambda rec: self._changed(f"Added adapter {rec.name}"),
            label="adding an adapter",
            on_error=lambda exc: self.panel.status_error(f"Not added: {exc}"),
        )

    def remove_selected(self) -> None:
        row = self.selected()
        if row is None or not self.panel.confirm(
            "Remove adapter", f"Delete the adapter {row.name}? Chats that use it go on without it.", "Remove"
        ):
            return
        registry = self.registry
        self.panel.worker.submit(
            lambda store: registry.remove(row.name), lambda _: self.refresh(), label="removing an adapter"
        )

    def ask_scale(self) -> None:
        row = self.selected()
        if row is None:
            return
        scale, ok = QInputDialog.getDouble(
            self, "Scale", f"How strongly {row.name} acts (1: as trained)", row.scale, ad.MIN_SCALE, ad.MAX_SCALE, 2
        )
        if ok:
            registry = self.registry
            self.panel.worker.submit(
                lambda store: registry.set_scale(row.name, scale), lambda _: self.refresh(), label="adapter scale"
            )

    # -- teaching (distill) --------------------------------------------------------------
    def teach(self, *, config: distill.DistillConfig | None = None) -> None:
        missing = distill.missing_packages()
        if missing:
            self.panel.status_error(f"Teaching the model needs {', '.join(missing)}: {distill.INSTALL_HINT}")
            return
        model_path = ad.current_model_path(self.ctx.settings)
        if self._trainer is not None:
            return
        if model_path is None:
            self.panel.status_error("Teaching trains an adapter for a model on this computer; the chat uses a server")
            return
        config = config or distill.DistillConfig()
        self._cancel = cancel = CancelToken()
        self._trainer = UiWorker(self.ctx.open_store, name="mnemo-distill")
        self._trainer.start()
        self.teach_btn.setEnabled(False)
        self.progress.setRange(0, 0)  # loading the model: busy until the first step
        self.progress.setVisible(True)
        self.cancel_btn.setVisible(True)
        registry = self.registry

        def progress(step: int, steps: int, loss: float) -> None:
            self._main(lambda: self._show_step(step, steps))

        def work(store):
            trained_at = time.time()
            pairs = distill.collect_pairs(store, config)
            with tempfile.TemporaryDirectory(prefix="mnemo-distill-") as tmp:
                out = Path(tmp) / "memory.gguf"
                distill.train_adapter(model_path, pairs, out, config, progress=progress, cancel=cancel)
                return ad.keep_distilled(registry, out, trained_at, len(pairs))

        self._trainer.submit(work, self._taught, on_error=self._teach_failed, label="teaching the model")

    def _show_step(self, step: int, steps: int) -> None:
        self.progress.setRange(0, steps)
        self.progress.setValue(step)
        self.progress.setFormat(f"step {step} of {steps}")

    def cancel_teaching(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()

    def _taught(self, record: ad.AdapterRecord) -> None:
        self._end_teaching()
        self.panel.status(f"The model learned your memories: adapter {record.name}, on in new chats")
        self.refresh()

    def _teach_failed(self, exc: BaseException) -> None:
        self._end_teaching()
        if isinstance(exc, distill.DistillCancelled):
            self.panel.status("Teaching stopped; nothing was kept")
        else:
            self.panel.status_error(f"Teaching the model failed: {exc}")

    def _end_teaching(self) -> None:
        trainer, self._trainer, self._cancel = self._trainer, None, None
        if trainer is not None:
            self._main(lambda: trainer.stop(timeout=1.0))  # after its callback returned
        self.teach_btn.setEnabled(True)
        self.progress.setVisible(False)
        self.cancel_btn.setVisible(False)

    @property
    def teaching(self) -> bool:
        return self._trainer is not None
