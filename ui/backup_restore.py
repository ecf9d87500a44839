"""The main window's memory-file safety: backups, restoring one, and the damaged-file dialog.

A mixin of `ui.main_window.MainWindow` (it uses the window's backend, settings, status bar and
actions), kept apart because it is one flow of its own: check a copy in the background, stop the
workers, swap the file, and reopen the window on it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QMessageBox

from app.messages import DAMAGED_DB_ADVICE

log = logging.getLogger("ui.main_window")


class BackupRestoreMixin:
    def backup_now(self) -> None:
        """Memory ▸ Back up memory now: a copy in <data dir>/backups on the database thread."""
        from app import backups

        self.backup_action.setEnabled(False)
        self.statusBar().showMessage("Backing up memory…", 0)
        keep = max(1, self.ctx.settings.backup_keep)

        def done(path) -> None:
            self.backup_action.setEnabled(True)
            self.last_backup = path
            self.statusBar().showMessage(f"Memory backed up to {path}", 10000)

        def failed(exc) -> None:
            self.backup_action.setEnabled(True)
            self._db_error(exc)

        self.backend.db(lambda store: backups.make_backup(store, self.ctx.paths, keep=keep), done, failed)

    def _store_failed(self, message: str) -> None:
        self.statusBar().showMessage("The memory database could not be opened", 0)
        self.jobs_label.setText("Memory: unavailable")
        if getattr(self, "store_error_box", None) is not None:
            return  # both workers report the same failure; one dialog is enough
        from app import backups
        from memory_core import DamagedDatabaseError

        self.restore_button = None
        db = self.ctx.paths.db_file
        if isinstance(self.backend.store_error, DamagedDatabaseError):
            found = backups.list_backups(self.ctx.paths)
            box = QMessageBox(
                QMessageBox.Icon.Critical,
                "Mnemo — memory database",
                "The memory file is damaged, or is not a Mnemo memory.",
                QMessageBox.StandardButton.Close,
                self,
            )
            what_now = (
                "Restore the latest backup (below), or move the file away to start with an empty memory "
                "(Mnemo creates a new one)."
                if found
                else "There is no backup yet. Move the file away to start with an empty memory (Mnemo creates "
                "a new one), or put back a copy you keep elsewhere."
            )
            box.setInformativeText(f"{db}\n\nIt was left exactly as it was. {what_now}")
            box.setDetailedText(f"{message}\n\nData folder: {self.ctx.paths.data_dir}\n{DAMAGED_DB_ADVICE}.")
            if found:
                # Nothing holds the damaged file open (every worker failed to open it): safe to swap now.
                made = backups.made_at(found[0])
                self.restore_button = box.addButton(f"Restore the backup of {made}", QMessageBox.ButtonRole.ActionRole)
                self.restore_button.clicked.connect(lambda: self._restore_backup(found[0]))
        else:
            box = QMessageBox(
                QMessageBox.Icon.Critical,
                "Mnemo — memory database",
                "The memory database could not be opened.",
                QMessageBox.StandardButton.Close,
                self,
            )
            box.setInformativeText(f"{message}\n\nData folder: {self.ctx.paths.data_dir}")
        self.store_error_box = box
        box.open()  # not modal: the window stays responsive

    def restore_from_backup(self) -> None:
        """Memory ▸ Restore from a backup…: choose a copy; `_restore_backup` checks and swaps it in."""
        from app import backups
        from ui.restore_dialog import RestoreDialog

        dialog = RestoreDialog(backups.list_backups(self.ctx.paths), self.ctx.paths.db_file, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(self._restore_backup)
        self.restore_dialog = dialog
        dialog.open()

    def _in_background(self, fn, on_done, on_error) -> None:
        """Run `fn()` on a thread of its own (file copies and checks take seconds for a big memory);
        the outcome comes back here on the UI thread (the window polls for it)."""
        import concurrent.futures

        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mnemo-restore")
        future = pool.submit(fn)
        pool.shutdown(wait=False)
        timer = QTimer(self)
        timer.setInterval(50)

        def check() -> None:
            if not future.done():
                return
            timer.stop()
            timer.deleteLater()
            exc = future.exception()
            if exc is not None:
                on_error(exc)
            else:
                on_done(future.result())

        timer.timeout.connect(check)
        timer.start()

    def _restore_backup(self, backup: Path) -> None:
        """Put `backup` back as the memory, then reopen the window on it.

        First the file is checked while everything keeps running (a file that is not a sound Mnemo
        memory is refused and nothing changes). Then the workers stop (closing every connection to
        the current file), the copy is swapped in with the current file kept aside, and the window
        closes with `reopen_notice` set: `ui.app.run_gui` opens a fresh window on the restored
        memory (the models stay loaded)."""
        from app import backups

        self.restore_action.setEnabled(False)
        self.statusBar().showMessage(f"Checking {backup.name}…", 0)

        def refused(exc: BaseException) -> None:
            self.restore_action.setEnabled(True)
            self.statusBar().showMessage("The backup was not restored", 10000)
            box = QMessageBox(
                QMessageBox.Icon.Warning,
                "Mnemo — restore",
                "This file cannot be restored.",
                QMessageBox.StandardButton.Close,
                self,
            )
            box.setInformativeText(f"{exc}\n\nYour memory was left as it was.")
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.restore_refused_box = box
            box.open()

        def swap(_checked) -> None:
            made = backups.made_at(backup)
            self.statusBar().showMessage(f"Restoring the backup of {made}…", 0)
            self.centralWidget().setEnabled(False)  # nothing to send to while the memory is swapped
            self.menuBar().setEnabled(False)

            def stop_then_restore() -> Path:
                # a reply and both workers stop (joining them can take a moment: not on the UI thread);
                # then no connection holds the file
                self.backend.shutdown()
                return backups.restore(self.ctx.paths, backup)

            def done(aside: Path) -> None:
                self.restored_from = backup
                self.reopen_notice = (
                    QMessageBox.Icon.Information,
                    f"The backup of {made} was restored.",
                    f"Restored: {backup}\nThe memory it replaced is kept as {aside}.",
                )
                self.close()

            def failed(exc: BaseException) -> None:
                log.error("restoring %s failed: %s", backup, exc)
                self.reopen_notice = (
                    QMessageBox.Icon.Warning,
                    "The backup could not be restored.",
                    f"{exc}\n\nThe memory file was not replaced, or is kept beside it as "
                    f"{self.ctx.paths.db_file.name}.before-restore-….",
                )
                self.close()

            self._in_background(stop_then_restore, done, failed)

        self._in_background(lambda: backups.check(backup), swap, refused)

    def show_notice(self, notice: tuple) -> None:
        """A message carried over from the window this one replaced (after a restore); not modal."""
        icon, text, info = notice
        box = QMessageBox(icon, "Mnemo — restore", text, QMessageBox.StandardButton.Close, self)
        box.setInformativeText(info)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.notice_box = box
        box.open()
