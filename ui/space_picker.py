"""The chat header's memory-space picker: which space the open chat writes to, and whether it recalls
from that space only or from every space (memory_core.spaces.component). A new chat takes the space shown."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QToolButton, QWidget

READ_OWN, READ_ALL = "Reads: this space", "Reads: all spaces"


class SpacePicker(QWidget):
    """Two small boxes: the space, and what the chat reads, and a "Spaces…" button. `changed(space_id,
    read_all)` is emitted only for the user's choices, never when the window shows another chat's space;
    `manage_requested` when the user asks to create, rename, merge or delete spaces (ui/spaces_dialog.py)."""

    changed = Signal(int, bool)
    manage_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.space_box = QComboBox(self)
        self.space_box.setObjectName("spaceBox")
        self.space_box.setToolTip("The memory space this chat remembers in (Personal, Work…)")
        self.space_box.setAccessibleName("Memory space")
        self.read_box = QComboBox(self)
        self.read_box.setObjectName("spaceReadBox")
        self.read_box.addItems([READ_OWN, READ_ALL])
        self.read_box.setToolTip("Recall from this chat's space only, or from every space")
        self.read_box.setAccessibleName("Recall from")
        self.manage_button = QToolButton(self)
        self.manage_button.setObjectName("spaceManage")
        self.manage_button.setText("Spaces…")
        self.manage_button.setToolTip("Create, rename, merge or delete memory spaces")
        self.manage_button.clicked.connect(self.manage_requested.emit)
        lay.addWidget(self.space_box)
        lay.addWidget(self.read_box)
        lay.addWidget(self.manage_button)
        self.space_box.activated.connect(self._chosen)
        self.read_box.activated.connect(self._chosen)
        self.setVisible(False)  # shown once the memory holds more than one space

    def set_spaces(self, spaces: list[tuple[int, str]]) -> None:
        """The spaces to choose from, (id, name); the one shown stays when it still exists."""
        keep = self.space_id()
        self.space_box.blockSignals(True)
        self.space_box.clear()
        for sid, name in spaces:
            self.space_box.addItem(name, sid)
        index = self.space_box.findData(keep) if keep is not None else -1
        self.space_box.setCurrentIndex(max(index, 0))
        self.space_box.blockSignals(False)
        self.setVisible(len(spaces) > 1)

    def show_chat(self, space_id: int, read_all: bool) -> None:
        """Show what a chat uses (no signal)."""
        for box in (self.space_box, self.read_box):
            box.blockSignals(True)
        index = self.space_box.findData(space_id)
        if index >= 0:
            self.space_box.setCurrentIndex(index)
        self.read_box.setCurrentIndex(1 if read_all else 0)
        for box in (self.space_box, self.read_box):
            box.blockSignals(False)

    def space_id(self) -> int | None:
        data = self.space_box.currentData()
        return int(data) if data is not None else None

    def read_all(self) -> bool:
        return self.read_box.currentIndex() == 1

    def _chosen(self, _index: int) -> None:
        sid = self.space_id()
        if sid is not None:
            self.changed.emit(sid, self.read_all())
