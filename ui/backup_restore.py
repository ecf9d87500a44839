"""The main window's memory-file safety: backups, restoring one, and the damaged-file dialog.

A component the window holds (`MainWindow.backups`), kept apart because it is one flow of its
own: check a copy in the background, stop the workers, swap the file, and reopen the window on it.
What it needs of the window is named by `BackupHost`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenuBar, QMessageBox, QPushButton, QStatusBar, QWidget

from app.messages import DAMAGED_DB_ADVICE
from ui.tasks import UiWorker

if TYPE_CHECKING:
    from app.context import AppContext
    from ui.bridge import Backend
    from ui.restore_dialog import RestoreDialog
    from ui.window.host import Menus, Status

log = logging.getLogger("ui.main_window")

# (icon, text, informative text): a message for the window that replaces this one after a restore
Notice = tuple[QMessageBox.Icon, str, str]
T = TypeVar("T")


class BackupHost(Protocol):
    """What the component uses of the main window: its context, workers, actions and chrome."""

    ctx: AppContext
    backend: Backend

    @property
    def menus(self) -> Menus: ...  # its backup_action and restore_action
    @property
    def status(self) -> Status: ...  # its jobs_label

    def statusBar(self) -> QStatusBar: ...
    def centralWidget(self) -> QWidget | None: ...
    def menuBar(self) -> QMenuBar: ...
    def close(self) -> bool: ...
    def show_db_error(self, exc: BaseException) -> None: ...


class BackupRestore:
    """Backups, restores and the damaged-file dialog of one window; `parent` owns its dialogs."""

    def __init__(self, host: BackupHost, parent: QWidget) -> None:
        self.host = host
        self.parent = parent
        self.last_backup: Path | None = None  # where Memory ▸ Back up memory now last wrote
        self.restored_from: Path | None = None  # the backup last put back
        self.reopen_notice: Notice | None = None  # set when the window closes to reopen (restore)
        self.store_error_box: QMessageBox | None = None
        self.restore_button: QPushButton | None = None
        self.restore_dialog: RestoreDialog | None = None
        self.restore_refused_box: QMessageBox | None = None
        self.notice_box: QMessageBox | None = None
        self.forgotten_box: QMessageBox | None = None  # "backups still hold what you forgot"
        self._forgotten_answered: tuple | None = None  # (backups, spans) the user last answered about

    def backup_now(self) -> None:
        """Memory ▸ Back up memory now: a copy in <data dir>/backups on the database thread."""
        from app.operations import backups

        host = self.host
        host.menus.backup_action.setEnabled(False)
        host.statusBar().showMessage("Backing up memory…", 0)
        keep = max(1, host.ctx.settings.backup_keep)

        def done(path: Path) -> None:
            host.menus.backup_action.setEnabled(True)
            self.last_backup = path
            host.statusBar().showMessage(f"Memory backed up to {path}", 10000)

        def failed(exc: BaseException) -> None:
            host.menus.backup_action.setEnabled(True)
            host.show_db_error(exc)

        host.backend.db(lambda store: backups.make_backup(store, host.ctx.paths, keep=keep), done, failed)

    def offer_to_drop_forgotten(self) -> None:
        """After a forget: when backups made before it may still hold what went, say which and offer
        to delete them, a new backup being made first (app.operations.backups.drop_forgotten). Asked once for
        the same backups and the same forgets; not modal."""
        from app.operations import backups

        host = self.host
        if not host.backend.started or self.forgotten_box is not None:
            return

        def found(got: tuple[list[Path], list]) -> None:
            held, spans = got
            key = (tuple(held), tuple(spans))
            if not held or key == self._forgotten_answered:
                return
            box = QMessageBox(
                QMessageBox.Icon.Question,
                "Mnemo — backups",
                f"{backups.describe_holding(held)} may still hold what you forgot.",
                QMessageBox.StandardButton.NoButton,
                self.parent,
            )
            box.setInformativeText(
                "They were made before you forgot it. Delete them? A new backup of your memory as it is "
                "now is made first, so one is always kept."
            )
            drop = box.addButton("Delete them", QMessageBox.ButtonRole.DestructiveRole)
            box.addButton("Keep them", QMessageBox.ButtonRole.RejectRole)
            box.setDetailedText("\n".join(str(b) for b in held))

            def answered(_button) -> None:
                self._forgotten_answered = key
                self.forgotten_box = None
                if box.clickedButton() is drop:
                    self._drop_forgotten()

            box.buttonClicked.connect(answered)
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.forgotten_box = box
            box.open()

        def look(store) -> tuple[list[Path], list]:
            spans = store.db.purge.spans()
            return backups.holding_forgotten(host.ctx.paths, spans), spans

        host.backend.db(look, found, host.show_db_error)

    def _drop_forgotten(self) -> None:
        from app.operations import backups

        host = self.host
        keep = host.ctx.settings.backup_keep

        def done(got: tuple[list[Path], Path | None]) -> None:
            gone, fresh = got
            host.statusBar().showMessage(
                f"Deleted {backups.describe_holding(gone)}" + (f"; memory backed up to {fresh}" if fresh else ""),
                10000,
            )

        host.backend.db(
            lambda store: backups.drop_forgotten(store, host.ctx.paths, keep=keep), done, host.show_db_error
        )

    def store_failed(self, message: str) -> None:
        """The store could not be opened: say so, and offer the latest backup if the file is damaged."""
        host = self.host
        host.statusBar().showMessage("The memory database could not be opened", 0)
        host.status.jobs_label.setText("Memory: unavailable")
        if self.store_error_box is not None:
            return  # both workers report the same failure; one dialog is enough
        from app.operations import backups
        from memory_core import DamagedDatabaseError

        self.restore_button = None
        paths = host.ctx.paths
        if isinstance(host.backend.store_error, DamagedDatabaseError):
            found = backups.list_backups(paths)
            box = self._box(
                QMessageBox.Icon.Critical,
                "Mnemo — memory database",
                "The memory file is damaged, or is not a Mnemo memory.",
            )
            what_now = (
                "Restore the latest backup (below), or move the file away to start with an empty memory "
                "(Mnemo creates a new one)."
                if found
                else "There is no backup yet. Move the file away to start with an empty memory (Mnemo creates "
                "a new one), or put back a copy you keep elsewhere."
            )
            box.setInformativeText(f"{paths.db_file}\n\nIt was left exactly as it was. {what_now}")
            box.setDetailedText(f"{message}\n\nData folder: {paths.data_dir}\n{DAMAGED_DB_ADVICE}.")
            if found:
                # Nothing holds the damaged file open (every worker failed to open it): safe to swap now.
                made = backups.made_at(found[0])
                button = box.addButton(f"Restore the backup of {made}", QMessageBox.ButtonRole.ActionRole)
                button.clicked.connect(lambda: self.restore_backup(found[0]))
                self.restore_button = button
        else:
            box = self._box(
                QMessageBox.Icon.Critical, "Mnemo — memory database", "The memory database could not be opened."
            )
            box.setInformativeText(f"{message}\n\nData folder: {paths.data_dir}")
        self.store_error_box = box
        box.open()  # not modal: the window stays responsive

    def restore_from_backup(self) -> None:
        """Memory ▸ Restore from a backup…: choose a copy; `restore_backup` checks and swaps it in."""
        from app.operations import backups
        from ui.restore_dialog import RestoreDialog

        paths = self.host.ctx.paths
        dialog = RestoreDialog(backups.list_backups(paths), paths.db_file, self.parent)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(self.restore_backup)
        self.restore_dialog = dialog
        dialog.open()

    def _box(self, icon: QMessageBox.Icon, title: str, text: str) -> QMessageBox:
        return QMessageBox(icon, title, text, QMessageBox.StandardButton.Close, self.parent)

    def _in_background(
        self, fn: Callable[[], T], on_done: Callable[[T], None], on_error: Callable[[BaseException], None]
    ) -> None:
        """Run `fn()` on a worker of its own (ui.tasks.UiWorker: file copies and checks take seconds for a big
        memory, and the window's database worker is stopped during a restore); the outcome comes back here on
        the UI thread."""
        worker = UiWorker(None, name="mnemo-restore")
        worker.submit(lambda _: fn(), on_done, on_error=on_error, label="restore")
        worker.stop(0, drop_pending=False, deliver_late=True)  # its thread ends with the task

    def restore_backup(self, backup: Path) -> None:
        """Put `backup` back as the memory, then reopen the window on it.

        First the file is checked while everything keeps running (a file that is not a sound Mnemo
        memory is refused and nothing changes). Then the workers stop (closing every connection to
        the current file), the copy is swapped in with the current file kept aside, and the window
        closes with `reopen_notice` set: `ui.app.run_gui` opens a fresh window on the restored
        memory (the models stay loaded)."""
        from app.operations import backups

        host = self.host
        host.menus.restore_action.setEnabled(False)
        host.statusBar().showMessage(f"Checking {backup.name}…", 0)

        def refused(exc: BaseException) -> None:
            host.menus.restore_action.setEnabled(True)
            host.statusBar().showMessage("The backup was not restored", 10000)
            box = self._box(QMessageBox.Icon.Warning, "Mnemo — restore", "This file cannot be restored.")
            box.setInformativeText(f"{exc}\n\nYour memory was left as it was.")
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.restore_refused_box = box
            box.open()

        def swap(_checked: Any) -> None:
            made = backups.made_at(backup)
            host.statusBar().showMessage(f"Restoring the backup of {made}…", 0)
            central = host.centralWidget()
            assert central is not None  # the window sets its central widget when it is built
            central.setEnabled(False)  # nothing to send to while the memory is swapped
            host.menuBar().setEnabled(False)

            def stop_then_restore() -> Path:
                # a reply and both workers stop (joining them can take a moment: not on the UI thread);
                # then no connection holds the file
                host.backend.shutdown()
                return backups.restore(host.ctx.paths, backup)

            def done(aside: Path) -> None:
                self.restored_from = backup
                self.reopen_notice = (
                    QMessageBox.Icon.Information,
                    f"The backup of {made} was restored.",
                    f"Restored: {backup}\nThe memory it replaced is kept as {aside}.",
                )
                host.close()

            def failed(exc: BaseException) -> None:
                log.error("restoring %s failed: %s", backup, exc)
                self.reopen_notice = (
                    QMessageBox.Icon.Warning,
                    "The backup could not be restored.",
                    f"{exc}\n\nThe memory file was not replaced, or is kept beside it as "
                    f"{host.ctx.paths.db_file.name}.before-restore-….",
                )
                host.close()

            self._in_background(stop_then_restore, done, failed)

        self._in_background(lambda: backups.check(backup), swap, refused)

    def show_notice(self, notice: Notice) -> None:
        """A message carried over from the window this one replaced (after a restore); not modal."""
        icon, text, info = notice
        box = self._box(icon, "Mnemo — restore", text)
        box.setInformativeText(info)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.notice_box = box
        box.open()
