"""Show user and model text as text in widgets that guess whether a string is HTML.

A QLabel, a tooltip or a QMessageBox takes a string that looks like markup ("Use the <div>
element") as rich text: the tag vanishes and, for an unknown tag, the words after it too. Chat
titles, speaker names, errors from a server (which may be an HTML page), facts and page texts
all reach such widgets, so they go through here.
"""

from __future__ import annotations

import html
from typing import TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox

W = TypeVar("W", QLabel, QMessageBox)


def label(widget: W) -> W:
    """Make a label (or a message box) show its text as plain text, whatever it holds."""
    widget.setTextFormat(Qt.TextFormat.PlainText)
    return widget


def tip(text: str | None) -> str:
    """A tooltip that shows `text` as written (escaped, line breaks kept; rich text also wraps long
    tooltips instead of drawing one line across the screen)."""
    if not text:
        return text or ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text, quote=False) + "</p>"
