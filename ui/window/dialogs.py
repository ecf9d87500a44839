"""The dialogs room: settings, importing conversations and memory cubes, memory spaces, help and about.

A room of the main window (`MainWindow.dialogs`). Each dialog is opened non-modally (or, for the
small ones, deleted on close) and kept on this room while open (`settings_dialog`, `import_window`…)
so tests and the window can reach it; its outcome (settings saved, an import finished) is applied
here, and the slow part of each runs in the background in the dialog itself.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMainWindow, QMessageBox

from ui.window.host import ChatWindow


class WindowDialogs:
    """Opens the window's dialogs and applies what they change."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent
        self.settings_dialog: Any = None
        self.settings_notes_box: QMessageBox | None = None
        self.import_help: Any = None
        self.import_window: Any = None
        self.help_dialog: Any = None
        self.shortcuts_dialog: Any = None

    # ------------------------------------------------------------------ settings
    def open_settings(self) -> None:
        from ui.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.window.ctx, self.parent)
        self.settings_dialog = dlg
        dlg.accepted.connect(lambda: self.apply_settings(dlg))
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.open()

    def apply_settings(self, dlg) -> set[str]:
        changed = dlg.apply()
        self.window.ctx.save()
        self.settings_changed(changed)
        return changed

    def settings_changed(self, changed: set[str]) -> None:
        w = self.window
        s = w.ctx.settings
        if "ui" in changed:
            w.composer.set_enter_sends(s.ui.enter_sends)
            if s.ui.theme != w.themes.mode:
                w.menus.set_theme(s.ui.theme, save=False)
        if "chat" in changed and w.backend.started:
            w.backend.reload_model()
        if "chat" in changed and not w.uses_bundled_model():
            w.chat_view.empty.show_models_hint([])
        if "ui" in changed and w.inspector is not None:
            w.inspector.set_details(s.ui.developer)
        if "custom_instructions" in changed:
            w.warm()  # the instructions are part of every prompt's cached beginning
        notes = []
        if "embedding" in changed:
            notes.append("the embedding model")
        if "memory" in changed:
            notes.append("the memory parameters")
        if notes:
            w.statusBar().showMessage(f"Saved. {' and '.join(notes).capitalize()} apply at the next start.", 8000)
        elif "custom_instructions" in changed:
            w.statusBar().showMessage("Saved. Your custom instructions apply from the next reply.", 5000)
        elif changed:
            w.statusBar().showMessage("Settings saved", 3000)

    def show_settings_notes(self) -> None:
        """settings.json had something Mnemo could not use: say what, once, without blocking."""
        ctx = self.window.ctx
        notes, ctx.settings_notes = ctx.settings_notes, []
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Mnemo — settings",
            "Some settings could not be read; defaults are used for them.",
            QMessageBox.StandardButton.Close,
            self.parent,
        )
        box.setInformativeText("\n\n".join(notes) + "\n\nSaving from Settings writes a new settings.json.")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.settings_notes_box = box
        box.open()

    # ------------------------------------------------------------------ importing conversations
    def import_dialog(self) -> None:
        """Chat ▸ Import conversations…: how to get an export from ChatGPT or Claude, then the file, imported
        in the background with progress."""
        from ui.import_help import ImportHelpDialog

        dlg = ImportHelpDialog(self.parent)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.chosen.connect(self.import_file)
        self.import_help = dlg
        dlg.open()

    def import_file(self, path: str):
        from ui.import_dialog import ImportDialog

        w = self.window
        dlg = ImportDialog(w.ctx, path, self.parent)

        def imported(_job) -> None:
            w.refresh_conversations()
            w.backend.notify_jobs()

        dlg.finished_import.connect(imported)
        dlg.instructions_found.connect(self.imported_instructions)
        self.import_window = dlg
        dlg.open()
        dlg.start()
        return dlg

    def imported_instructions(self, text: str) -> None:
        """An import brought the user's custom instructions (ChatGPT's "how to respond"): they become Mnemo's
        when the user has none; otherwise the user is told where they can take them from."""
        w = self.window
        s = w.ctx.settings
        text = text.strip()
        if not text or text == s.custom_instructions.strip():
            return
        if not s.custom_instructions.strip():
            s.custom_instructions = text
            w.ctx.save()
            w.warm()
            w.statusBar().showMessage("Your ChatGPT custom instructions are now Mnemo's (Settings ▸ Replies)", 10000)
        else:
            w.statusBar().showMessage(
                "The export's custom instructions differ from yours; yours in Settings ▸ Replies were kept", 10000
            )

    # ------------------------------------------------------------------ memory cubes and spaces
    def import_memory(self, path: str | None = None):
        """Memory ▸ Import memory…: a memory cube, shown first as what it would add, merge and skip."""
        from ui import cube_dialog

        return cube_dialog.import_cube(self.parent, path) if path else cube_dialog.open_import(self.parent)

    def show_memory_imports(self):
        """Memory ▸ Memory imports…: every cube imported, and Undo."""
        from ui import cube_dialog

        return cube_dialog.open_imports(self.parent)

    def manage_spaces(self):
        """Memory ▸ Memory spaces… and the space picker's "Spaces…": create, rename, merge and delete
        spaces (ui/spaces_dialog.py), each change on the database thread; the picker follows."""
        from ui.spaces_dialog import SpacesDialog

        w = self.window
        if not w.backend.started:
            return None
        dlg = SpacesDialog(w.backend.db, self.parent)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.changed.connect(w.refresh_spaces)
        dlg.show()
        return dlg

    # ------------------------------------------------------------------ help
    def show_help(self) -> None:
        """Help ▸ How Mnemo remembers: what pages, topics, heat and the profile are."""
        from ui.help_dialog import MemoryHelpDialog

        dlg = MemoryHelpDialog(self.parent)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.shortcuts_requested.connect(self.show_shortcuts)
        self.help_dialog = dlg
        dlg.open()

    def show_shortcuts(self) -> None:
        from ui.help_dialog import ShortcutsDialog

        dlg = ShortcutsDialog(self.parent)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.shortcuts_dialog = dlg
        dlg.open()

    def show_about(self) -> None:
        from app import __version__

        QMessageBox.about(
            self.parent,
            "About Mnemo",
            f"<b>Mnemo {__version__}</b><p>A local-first chat assistant with long-term memory.</p>"
            f"<p>Data folder: {self.window.ctx.paths.data_dir}</p>",
        )
