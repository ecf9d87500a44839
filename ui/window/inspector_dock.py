"""The inspector dock room: opening, hiding and following the memory inspector docked on the window.

A room of the main window (`MainWindow.dock`). The inspector itself is built by
`ui.inspector.attach(window)`, which keeps its dock on the window (`INSPECTOR_DOCK_ATTR`); this room
opens it on demand (Ctrl+M, the Memory menu, the header icon, a reply's links), keeps the toggles in
step with it, and sends the menu's memory commands to the right tab.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMainWindow, QMessageBox

from ui.window.host import ChatWindow

log = logging.getLogger(__name__)

INSPECTOR_DOCK_ATTR = "_mnemo_inspector_dock"  # ui.inspector.panel.DOCK_ATTR: the dock attach() keeps here


class InspectorDock:
    """Shows the memory inspector and routes the window's memory commands to it."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent
        self.inspector: Any = None  # the panel, once opened

    def dock_widget(self):
        """The inspector's dock, or None when it was never opened (or Qt deleted it)."""
        dock = getattr(self.parent, INSPECTOR_DOCK_ATTR, None)
        try:
            return dock if dock is not None and dock.widget() is not None else None
        except RuntimeError:  # deleted
            return None

    def inspector_shown(self) -> bool:
        dock = self.dock_widget()
        return dock is not None and dock.isVisible()

    def toggle_inspector(self, on: bool | None = None) -> None:
        """Ctrl+M, Memory ▸ Memory inspector and the header's memory icon: show the inspector, or hide it
        when it is shown."""
        if on is None:
            on = not self.inspector_shown()
        dock = self.dock_widget()
        if not on and dock is not None:
            dock.hide()
        else:
            self.show_inspector()
        self.sync_toggles()

    def sync_toggles(self, *_args) -> None:
        shown = self.inspector_shown()
        for w in (self.window.memory_button, self.window.menus.inspector_action):
            w.blockSignals(True)
            w.setChecked(shown)
            w.blockSignals(False)
        QTimer.singleShot(0, self.window.fit_layout)

    def attached(self, dock) -> None:
        """ui.inspector.attach made the dock: follow its showing, hiding and floating."""
        dock.visibilityChanged.connect(self.sync_toggles)
        dock.topLevelChanged.connect(lambda _floating: QTimer.singleShot(0, self.window.fit_layout))
        dock.widget().write_space = self.window.space_picker.space_id  # Add… keeps a fact in the chat's space

    def show_inspector(self):
        """Open the memory inspector (`ui.inspector.attach(window)`) when it is part of this build;
        return its panel, or None."""
        w = self.window
        w.status.memory_notice.hide()
        try:
            module = importlib.import_module("ui.inspector")
            attach = module.attach
        except (ImportError, AttributeError):
            QMessageBox.information(
                self.parent, "Memory inspector", "The memory inspector is not part of this build yet."
            )
            return None
        try:
            self.inspector = attach(self.parent)
        except Exception as exc:
            log.exception("the memory inspector failed to open")
            QMessageBox.warning(self.parent, "Memory inspector", f"The memory inspector could not be opened:\n{exc}")
            return None
        self.sync_toggles()
        return self.inspector

    # ------------------------------------------------------------------ the memory menu's commands
    def show_saved_memories(self) -> None:
        """Memory ▸ Saved memories: what Mnemo knows about the user, as plain sentences."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_tab("memories")

    def show_last_prompt(self) -> None:
        """Memory ▸ The last reply's prompt: the whole prompt with the tokens of each part."""
        panel = self.show_inspector()
        mid = self.window.latest_reply_id()
        if panel is not None and mid is not None:
            panel.show_prompt_for_message(mid)
        elif panel is not None:
            panel.show_tab("prompt")

    def export_memory(self) -> None:
        """Memory ▸ Export memory…: the inspector's export (JSON or Markdown), with its progress line."""
        panel = self.show_inspector()
        if panel is not None:
            panel.export_dialog()

    def remember_something(self) -> None:
        """Memory ▸ Remember something…: the inspector's Persona ▸ Add… (a fact or a trait, kept at once)."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_tab("persona")
            panel.persona.add_item()

    def show_chat_memory(self, cid: int | None) -> None:
        """What memory holds from one chat: the inspector's pages, filtered to it."""
        if cid is None:
            return
        panel = self.show_inspector()
        if panel is not None:
            panel.show_chat_pages(cid, self.window.sidebar.title_of(cid) or self.window.current_title or "")

    def show_deleted_chats_memory(self) -> None:
        """The pages of chats deleted without forgetting what they taught (select them and Forget…)."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_chat_pages(None, deleted=True)

    def show_persona_item(self, kind: str, item_id: int) -> None:
        """A reply's "remembered as fact N": that item in the inspector, with its versions."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_persona_item(kind, item_id)

    def show_trace(self, assistant_message_id: int) -> None:
        """What a reply recalled, and why: the inspector's trace view for that message."""
        panel = self.show_inspector()
        show = getattr(panel, "show_trace_for_message", None)
        if callable(show):
            try:
                show(assistant_message_id)
            except Exception as exc:
                log.exception("showing the trace failed")
                self.window.statusBar().showMessage(f"Could not show what this reply recalled: {exc}", 6000)
