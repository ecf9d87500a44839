"""The chat-list operations room: rename, delete, forget what a chat taught, and export a chat.

A room of the main window (`MainWindow.chats`), reached from the chat list's context menu and the
Chat menu. Each operation asks the user here (`ask_delete` and `ask_forget` are hooks that tests
replace), then runs its `app.operations` call on the database thread (`Backend.db`); a delete or a
forget of the chat whose reply is streaming waits until the stopped reply is saved
(`TurnController.after_turn_in`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QCheckBox, QInputDialog, QMainWindow, QMessageBox

from app.operations import chats as operations
from app.wording import count
from ui import plain
from ui.window.host import ChatWindow

log = logging.getLogger(__name__)


class ChatListOps:
    """What can be done to a whole chat, asked on the UI thread and done on the database thread."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent

    def rename_conversation(self, cid: int | None) -> None:
        w = self.window
        if cid is None:
            return
        old = w.sidebar.title_of(cid) or (w.current_title if cid == w.current_id else "")
        title, ok = QInputDialog.getText(self.parent, "Rename chat", "Title:", text=old)
        title = " ".join(title.split())
        if not ok or not title:
            return

        def done(_):
            if cid == w.current_id:
                w.current_title = title
                w.update_header()
            w.refresh_conversations()

        w.backend.db(lambda s: operations.rename_chat(s, cid, title), done, w.show_db_error)

    def export_conversation(self, cid: int | None, path: str | None = None, fmt: str | None = None) -> None:
        """Chat ▸ Export chat… and the sidebar's Export…: the branch on screen (another chat: its newest
        branch) as a Markdown transcript that Mnemo imports again, or as JSON with every field. Written
        on the database thread, atomically (app.operations.chat_export)."""
        w = self.window
        if cid is None:
            w.statusBar().showMessage("Open a chat to export it", 4000)
            return
        if path is None:
            chosen = self._ask_export_path(w.sidebar.title_of(cid) or w.current_title or "chat")
            if chosen is None:
                return
            path, fmt = chosen
        shown = [m.message_id for m in w.chat_view.messages() if m.message_id is not None]
        leaf = shown[-1] if cid == w.current_id and shown else None

        def work(store):
            return operations.export_chat(store, cid, path, fmt=fmt, leaf_id=leaf)

        def done(result):
            w.statusBar().showMessage(
                f"Exported “{result.title}” ({count(result.messages, 'message')}) to {result.path}", 8000
            )

        def failed(exc):
            from memory_core import is_storage_full

            log.error("exporting chat %s failed: %s", cid, exc)
            why = "the disk is full" if is_storage_full(exc) else str(exc)
            w.statusBar().showMessage(f"The chat was not exported ({why}); nothing was written.", 10000)

        w.backend.db(work, done, failed)

    def _ask_export_path(self, title: str) -> tuple[str, str] | None:
        """The file to export chat `title` to and its format ("markdown" or "json"); None: cancelled."""
        from PySide6.QtWidgets import QFileDialog

        name = re.sub(r'[\\/:*?"<>|\s]+', " ", title).strip()[:80] or "chat"
        path, chosen = QFileDialog.getSaveFileName(
            self.parent,
            "Export chat",
            str(Path.home() / f"{name}.md"),
            "Markdown transcript (*.md);;JSON, every field (*.json)",
        )
        if not path:
            return None
        fmt = "json" if chosen.startswith("JSON") else "markdown"
        if not Path(path).suffix:
            path += ".json" if fmt == "json" else ".md"
        return path, fmt

    # ------------------------------------------------------------------ questions
    def _question(self, title: str, text: str, detail: str, yes: str, tick: str | None = None) -> tuple[bool, bool]:
        """A question whose yes-button names the act ("Delete", "Forget"), Cancel by default, with an
        optional tick box. Returns (yes, ticked)."""
        box = QMessageBox(
            QMessageBox.Icon.Question,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self.parent,
        )
        plain.label(box).button(QMessageBox.StandardButton.Yes).setText(yes)  # chat names are text
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setInformativeText(detail)
        check = None
        if tick:
            check = QCheckBox(tick, box)
            box.setCheckBox(check)
        ok = box.exec() == QMessageBox.StandardButton.Yes
        return ok, bool(ok and check is not None and check.isChecked())

    def tell(self, title: str, text: str) -> None:
        """A message to acknowledge, its text shown as written (it may quote a chat's name)."""
        plain.label(
            QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Close, self.parent)
        ).exec()

    def ask_delete(self, name: str, held) -> tuple[bool, bool]:
        """Ask whether to delete chat `name`, offering to forget what memory learned from it (`held`,
        an app.operations.chat_memory.ChatMemory). Returns (delete, forget too). Tests replace this hook."""
        if held.empty:
            return self._question(
                "Delete chat", f"Delete “{name}” and its messages?", "Memory holds nothing from it.", "Delete"
            )
        return self._question(
            "Delete chat",
            f"Delete “{name}” and its messages?",
            "Unticked, what Mnemo learned from it stays in memory (the inspector can forget it later, page by page).",
            "Delete",
            tick=f"Also forget what Mnemo learned from it: {held.describe()}",
        )

    def ask_forget(self, name: str, held) -> bool:
        """Ask whether to forget what memory learned from chat `name` (`held` says what). Tests replace it."""
        return self._question(
            "Forget what Mnemo learned",
            f"Forget what Mnemo learned from “{name}”?",
            f"This forgets {held.describe()}, for good.\n\nThe chat and its messages stay; what "
            "you say in it from now on is remembered again, unless you make it incognito.",
            "Forget",
        )[0]

    # ------------------------------------------------------------------ delete and forget
    def _with_chat_memory(self, cid: int, then: Callable[[str, Any], None]) -> None:
        """`then(name, held)` on the UI thread, once the database thread has read what memory holds from
        chat `cid` (app.operations.chat_memory.chat_memory), for a question that names it."""
        w = self.window
        name = w.sidebar.title_of(cid) or w.current_title
        w.backend.db(lambda s: operations.chat_taught(s, cid), lambda held: then(name, held), w.show_db_error)

    def delete_conversation(self, cid: int | None) -> None:
        if cid is None:
            return

        def ask(name, held) -> None:
            yes, forget = self.ask_delete(name, held)
            if yes:
                self.window.turns.after_turn_in(cid, lambda: self._delete_now(cid, forget=forget))

        self._with_chat_memory(cid, ask)

    def forget_conversation_memory(self, cid: int | None) -> None:
        """Forget what memory learned from a chat (app.operations.chat_memory); the chat and its messages stay."""
        if cid is None:
            return

        def ask(name, held) -> None:
            if held.empty:
                self.tell("Forget what Mnemo learned", f"Memory holds nothing from “{name}”.")
            elif self.ask_forget(name, held):
                self.window.turns.after_turn_in(cid, lambda: self._forget_now(cid, name))

        self._with_chat_memory(cid, ask)

    def _forget_now(self, cid: int, name: str) -> None:
        w = self.window

        def done(gone):
            w.refresh_conversations()
            w.statusBar().showMessage(f"Forgot what Mnemo learned from “{name}”: {gone.describe()}", 8000)
            w.backups.offer_to_drop_forgotten()

        w.backend.db(lambda s: operations.forget_chat(s, cid), done, w.show_db_error)

    def _delete_now(self, cid: int, *, forget: bool = False) -> None:
        w = self.window

        def done(gone):
            if cid == w.current_id:
                w.new_chat()
            w.refresh_conversations()
            w.statusBar().showMessage(
                "Chat deleted"
                if gone is None or gone.empty
                else f"Chat deleted, and what Mnemo learned from it forgotten: {gone.describe()}",
                8000,
            )
            w.backups.offer_to_drop_forgotten()

        w.backend.db(lambda s: operations.delete_chat(s, cid, forget=forget), done, w.show_db_error)
