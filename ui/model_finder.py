"""`ModelFinder`: looks for the GGUF chat models other apps keep (`models.discover`) off the UI thread."""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal


class ModelFinder(QObject):
    """Runs `models.discover.find_models` on a thread of its own (it walks folders, which can be slow on a
    network drive) and emits `done` on the UI thread with the list, or with the exception it raised."""

    done = Signal(object)

    def start(self) -> None:
        threading.Thread(target=self._run, name="mnemo-find-models", daemon=True).start()

    def _run(self) -> None:
        from models.discover import find_models

        try:
            result: object = find_models()
        except Exception as exc:  # a folder we may not read, a strange file system: the caller says so
            result = exc
        try:
            self.done.emit(result)
        except RuntimeError:       # the window or dialog closed (and this object was deleted) meanwhile
            pass
