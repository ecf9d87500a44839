"""`ModelFinder`: looks for chat models on this computer (`models.discover`) off the UI thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal


class ModelFinder(QObject):
    """Runs a search (`models.discover.find_models`: GGUF files in other apps' folders; `find_servers`)
    on a thread of its own — it walks folders or asks servers, which can take a moment — and emits
    `done` on the UI thread with the result, or with the exception the search raised."""

    done = Signal(object)

    def __init__(self, parent: QObject | None, search: Callable[[], Any]):
        super().__init__(parent)
        self._search = search

    def start(self) -> None:
        threading.Thread(target=self._run, name="mnemo-find-models", daemon=True).start()

    def _run(self) -> None:
        try:
            result: object = self._search()
        except Exception as exc:  # a folder we may not read, a strange file system: the caller says so
            result = exc
        try:
            self.done.emit(result)
        except RuntimeError:  # the window or dialog closed (and this object was deleted) meanwhile
            pass
