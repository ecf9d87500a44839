"""The unsent message, kept on disk so quitting, a crash or a power cut while typing never loses it.

Saved to `draft.txt` in the data folder 0.7 s after the last change (and at once on send and on
close), by writing a temp file and renaming it over the old one, so the file is always either the
old draft or the new one. An empty composer removes the file.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

log = logging.getLogger(__name__)

SAVE_DELAY_MS = 700


class DraftKeeper(QObject):
    def __init__(self, path: Path, get_text: Callable[[], str], parent: QObject | None = None):
        super().__init__(parent)
        self.path = Path(path)
        self._get_text = get_text
        self._saved: str | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.save_now)

    def changed(self) -> None:
        """The composer changed: save a moment after the typing pauses."""
        self._timer.start()

    def load(self) -> str:
        """The draft left by the last session ('' when none). Undecodable bytes become U+FFFD."""
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            log.warning("could not read the unsent message %s: %s", self.path, exc)
            text = ""
        self._saved = text
        return text

    def save_now(self) -> None:
        self._timer.stop()
        text = self._get_text()
        if not text.strip():
            text = ""
        if text == self._saved:
            return
        try:
            if text:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".draft-", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
                        f.write(text)
                    os.replace(tmp, self.path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            else:
                self.path.unlink(missing_ok=True)
            self._saved = text
        except OSError as exc:  # a full disk: the text is still in the composer
            log.warning("could not save the unsent message: %s", exc)
