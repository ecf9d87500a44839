"""`ModelFinder`: looks for chat models on this computer (`models.discover`) off the UI thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from ui.tasks import UiWorker


class ModelFinder(QObject):
    """Runs a search (`models.discover.find_models`: GGUF files in other apps' folders; `find_servers`)
    on a worker of its own (ui.tasks.UiWorker) — it walks folders or asks servers, which can take a
    moment — and emits `done` on the UI thread with the result, or with the exception the search raised."""

    done = Signal(object)

    def __init__(self, parent: QObject | None, search: Callable[[], Any]):
        super().__init__(parent)
        self._search = search

    def start(self) -> None:
        worker = UiWorker(None, name="mnemo-find-models")
        worker.submit(lambda _: self._search(), self._report, on_error=self._report, label="find models")
        worker.stop(0, drop_pending=False, deliver_late=True)  # its thread ends with the search

    def _report(self, result: object) -> None:
        """On the UI thread: the models found, or the exception (a folder we may not read, a strange file
        system: the caller says so)."""
        try:
            self.done.emit(result)
        except RuntimeError:  # the window or dialog closed (and this object was deleted) meanwhile
            pass
