"""The menus room: the window's actions (Chat, Memory, View, Help menus) and their shortcuts.

A room of the main window (`MainWindow.menus`). Each action is added to the window as well as to its
menu, so its shortcut works with the menu bar hidden. The actions call into the other rooms (turns,
chat operations, the inspector dock, dialogs, status); `update_enabled` turns off those that need an
open chat or a message in it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QToolButton

from ui import theme
from ui.window.host import ChatWindow

THEMES = (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark"))


class WindowMenus:
    """The menu bar's actions, built once the window's widgets and rooms exist."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent
        self.theme_actions: dict[str, QAction] = {}

    def _action(
        self,
        text: str,
        slot: Callable,
        shortcut: str | None = None,
        *,
        icon: str | None = None,
        checkable: bool = False,
        menu: QMenu | None = None,
    ) -> QAction:
        act = QAction(text, self.parent)
        if icon:
            act.setIcon(theme.icon(icon))
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.setCheckable(checkable)
        act.triggered.connect(slot)
        self.parent.addAction(act)  # shortcuts work even with the menu bar hidden
        if menu is not None:
            menu.addAction(act)
        return act

    def build(self) -> None:
        mb = self.parent.menuBar()
        self._chat_menu(mb.addMenu("&Chat"))
        self._memory_menu(mb.addMenu("&Memory"))
        self._view_menu(mb.addMenu("&View"))
        ext = mb.findChild(QToolButton, "qt_menubar_ext_button")
        if ext is not None:
            ext.setAccessibleName("More menus")
        self._help_menu(mb.addMenu("&Help"))

    def _chat_menu(self, chat: QMenu) -> None:
        w, turns, ops = self.window, self.window.turns, self.window.chats
        self.new_action = self._action("&New chat", w.new_chat, "Ctrl+N", icon="plus", menu=chat)
        self.search_action = self._action("&Search chats", w.sidebar.focus_search, "Ctrl+K", icon="search", menu=chat)
        self.focus_action = self._action("Go to the message box", w.composer.focus, "Ctrl+L", menu=chat)
        chat.addSeparator()
        self.stop_action = self._action("S&top reply", turns.escape, "Esc", icon="stop", menu=chat)
        self.regenerate_action = self._action(
            "&Regenerate last reply", turns.regenerate_last, "Ctrl+R", icon="regenerate", menu=chat
        )
        self.edit_last_action = self._action("&Edit last message", turns.edit_last, "Ctrl+E", icon="edit", menu=chat)
        self.copy_action = self._action("&Copy last reply", turns.copy_last, "Ctrl+Shift+C", icon="copy", menu=chat)
        chat.addSeparator()
        self.incognito_action = self._action(
            "&Incognito",
            lambda on: w.incognito_button.setChecked(on),
            "Ctrl+Shift+I",
            icon="incognito",
            checkable=True,
            menu=chat,
        )
        self.rename_action = self._action(
            "Rena&me chat…", lambda: ops.rename_conversation(w.current_id), "F2", icon="edit", menu=chat
        )
        self.export_chat_action = self._action(
            "E&xport chat…", lambda: ops.export_conversation(w.current_id), "Ctrl+Shift+E", menu=chat
        )
        self.chat_memory_action = self._action(
            "Show &what Mnemo remembers from this chat", lambda: w.dock.show_chat_memory(w.current_id), menu=chat
        )
        self.forget_chat_action = self._action(
            "&Forget what Mnemo learned from this chat…",
            lambda: ops.forget_conversation_memory(w.current_id),
            menu=chat,
        )
        self.delete_action = self._action(
            "&Delete chat…", lambda: ops.delete_conversation(w.current_id), None, icon="trash", menu=chat
        )
        chat.addSeparator()
        self.import_action = self._action("Im&port conversations…", w.dialogs.import_dialog, "Ctrl+I", menu=chat)
        self.settings_action = self._action("Settin&gs…", w.dialogs.open_settings, "Ctrl+,", icon="settings", menu=chat)
        self.quit_action = self._action("&Quit", w.close, "Ctrl+Q", menu=chat)

    def _memory_menu(self, memory: QMenu) -> None:
        w, dock, dialogs = self.window, self.window.dock, self.window.dialogs
        self.inspector_action = self._action(
            "Memory &inspector",
            lambda on: dock.toggle_inspector(on),
            "Ctrl+M",
            icon="memory",
            checkable=True,
            menu=memory,
        )
        self.saved_memories_action = self._action("&Saved memories", dock.show_saved_memories, menu=memory)
        self.prompt_action = self._action("The &last reply's prompt", dock.show_last_prompt, menu=memory)
        self.pause_action = self._action(
            "&Pause memory (remember nothing new)", w.status.set_memory_paused, checkable=True, menu=memory
        )
        self.pause_action.setEnabled(False)  # until the store says whether memory is paused
        self.remember_action = self._action(
            "&Remember something…", dock.remember_something, "Ctrl+Shift+R", menu=memory
        )
        self.deleted_memory_action = self._action(
            "Memory from &deleted chats", dock.show_deleted_chats_memory, menu=memory
        )
        self.spaces_action = self._action("Memory spa&ces…", dialogs.manage_spaces, menu=memory)  # ui/spaces_dialog.py
        memory.addSeparator()
        self.export_action = self._action("&Export memory…", dock.export_memory, menu=memory)
        # memory cubes (ui/cube_dialog.py): import one, and the list of imports with Undo
        self.import_memory_action = self._action("Import &memory…", dialogs.import_memory, menu=memory)
        self.memory_imports_action = self._action("Memory imp&orts…", dialogs.show_memory_imports, menu=memory)
        memory.addSeparator()
        self.backup_action = self._action("&Back up memory now", w.backups.backup_now, menu=memory)
        self.restore_action = self._action("Res&tore from a backup…", w.backups.restore_from_backup, menu=memory)

    def _view_menu(self, view: QMenu) -> None:
        w = self.window
        themes = view.addMenu("&Theme")
        group = QActionGroup(self.parent)
        for key, label in THEMES:
            act = QAction(label, self.parent, checkable=True)
            act.setChecked(w.ctx.settings.ui.theme == key)
            act.triggered.connect(lambda _c=False, k=key: self.set_theme(k))
            group.addAction(act)
            themes.addAction(act)
            self.theme_actions[key] = act
        self.sidebar_action = self._action(
            "Chat &list", lambda on: w.set_sidebar_visible(on), "Ctrl+Shift+S", checkable=True, menu=view
        )
        self.sidebar_action.setChecked(True)

    def _help_menu(self, helpm: QMenu) -> None:
        dialogs = self.window.dialogs
        self.memory_help_action = self._action("How Mnemo &remembers", dialogs.show_help, menu=helpm)
        self.help_action = self._action("&Keyboard shortcuts", dialogs.show_shortcuts, "F1", icon="help", menu=helpm)
        self._action("&About Mnemo", dialogs.show_about, menu=helpm)

    def set_theme(self, mode: str, *, save: bool = True) -> None:
        """View ▸ Theme (and Settings): follow the system, or light, or dark."""
        w = self.window
        w.ctx.settings.ui.theme = mode
        act = self.theme_actions.get(mode)
        if act is not None:
            act.setChecked(True)
        w.themes.set_mode(mode)
        if save:
            w.ctx.save()

    def update_enabled(self) -> None:
        """Chat-menu actions that need an open chat, or a message in it, are off without one."""
        w = self.window
        has_chat = w.current_id is not None
        idle = not w.backend.busy
        last_reply = w.chat_view.last("assistant")
        last_user = w.chat_view.last("user")
        for act in (self.rename_action, self.export_chat_action, self.chat_memory_action, self.forget_chat_action):
            act.setEnabled(has_chat)
        self.delete_action.setEnabled(has_chat)
        self.regenerate_action.setEnabled(
            idle and last_reply is not None and last_reply.message_id is not None and last_reply.can_regenerate
        )
        self.edit_last_action.setEnabled(
            idle and last_user is not None and last_user.message_id is not None and last_user.can_edit
        )
        self.copy_action.setEnabled(last_reply is not None and bool(last_reply.text))
        self.prompt_action.setEnabled(last_reply is not None and last_reply.message_id is not None)
