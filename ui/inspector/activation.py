"""The Activation memory view: the chat model's saved prompt states (app.chat.activation_cache).

Each row is one saved state: the chat it is the beginning of (or "New chats", the system prompt and
profile every new chat starts with), how many tokens it holds, its size on disk, when it was built
and last loaded. Above: how many, their size against the cap, hits and misses. Clear deletes them
all (the next warm builds them again). Read on the panel's worker like the other views, and again
whenever the tab is shown.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.chat import activation_cache
from ui.inspector import fmt
from ui.inspector.host import PanelHost

TIP = "The model's saved reading of each chat's beginning, so the first reply after a restart starts at once"
COLUMNS = ("Chat", "Tokens", "Size", "Built", "Last hit", "Model")
EXPLAINED = (
    "After a restart, the model would read each chat's beginning (instructions, your profile, the dialogue) "
    "again before its first reply. Mnemo keeps what the model made of it on disk, so that reply starts at once."
)


class ActivationView(QWidget):
    def __init__(self, panel: PanelHost, data_dir):
        super().__init__()
        self.panel = panel
        self.data_dir = data_dir
        self.summary: activation_cache.ActivationSummary | None = None
        lay = QVBoxLayout(self)
        note = QLabel(EXPLAINED)
        note.setWordWrap(True)
        lay.addWidget(note)
        top = QHBoxLayout()
        self.headline = QLabel("…")
        self.headline.setAccessibleName("Activation memory: totals")
        top.addWidget(self.headline, 1)
        self.clear_btn = QPushButton("Clear")
        self.clear_btn.setToolTip("Delete every saved state (they are built again as chats are opened)")
        self.clear_btn.clicked.connect(self.clear)
        top.addWidget(self.clear_btn)
        lay.addLayout(top)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.setAccessibleName("Saved prompt states")
        lay.addWidget(self.table, 1)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        data_dir = self.data_dir
        self.panel.worker.submit(
            lambda store: activation_cache.summary(activation_cache.open_cache(data_dir), store),
            self.set_summary,
            label="activation memory",
        )

    def set_summary(self, summary: activation_cache.ActivationSummary) -> None:
        self.summary = summary
        self.headline.setText(summary.headline())
        self.clear_btn.setEnabled(bool(summary.rows))
        self.table.setRowCount(len(summary.rows))
        for i, r in enumerate(summary.rows):
            cells = (
                r.chat,
                f"{r.tokens:,}",
                activation_cache.human_bytes(r.size),
                fmt.when(r.built_at),
                fmt.ago(r.last_hit),
                r.model + (f", {r.n_ctx:,}-token context" if r.n_ctx else ""),
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j == 4 and r.hits:
                    item.setToolTip(f"loaded {r.hits:,} time{'s' if r.hits != 1 else ''}, last {fmt.when(r.last_hit)}")
                self.table.setItem(i, j, item)

    def clear(self) -> None:
        if not self.panel.confirm(
            "Clear activation memory",
            "Delete the model's saved chat beginnings? Nothing you said is lost: the first reply in each chat "
            "after the next start just takes longer, until it is saved again.",
            "Clear",
        ):
            return
        data_dir = self.data_dir

        def done(result: tuple[int, int]) -> None:
            n, size = result
            self.panel.status(
                f"Deleted {n:,} saved state{'s' if n != 1 else ''} ({activation_cache.human_bytes(size)})"
            )
            self.refresh()

        self.panel.worker.submit(
            lambda store: activation_cache.clear(activation_cache.open_cache(data_dir)),
            done,
            label="clearing activation memory",
            on_error=lambda exc: self.panel.status_error(f"Clearing activation memory failed: {exc}"),
        )
