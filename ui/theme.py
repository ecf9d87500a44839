"""Light and dark themes: palettes, the style sheet, and icons recoloured for the theme.

The theme follows the system colour scheme (`QStyleHints.colorScheme`) unless the user
picks "light" or "dark" in the settings. The Fusion style is used on every platform so
the palettes look the same everywhere. Widgets read the current colours from `colors()`
and listen to `ThemeManager.changed` to restyle what the style sheet cannot reach
(Markdown documents, recoloured icons).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QObject, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPalette, QPixmap

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
ICONS = RESOURCES / "icons"
STYLES = RESOURCES / "styles"
THEMES = ("system", "light", "dark")


@dataclass(frozen=True)
class Colors:
    name: str
    window: str
    base: str
    alt_base: str
    sidebar: str
    text: str
    muted: str
    border: str
    accent: str
    accent_text: str
    user_bubble: str
    code_bg: str
    inline_code_bg: str
    warning_bg: str
    warning_text: str
    error: str
    button: str
    hover: str


LIGHT = Colors(
    name="light",
    window="#f6f7f9",
    base="#ffffff",
    alt_base="#f3f4f6",
    sidebar="#eef0f4",
    text="#1f2328",
    muted="#636c76",
    border="#d6d9de",
    accent="#3b6fd8",
    accent_text="#ffffff",
    user_bubble="#e7effd",
    code_bg="#f1f3f6",
    inline_code_bg="#eceef1",
    warning_bg="#fff4d6",
    warning_text="#5c4400",
    error="#c62828",
    button="#ffffff",
    hover="#e2e6ec",
)
DARK = Colors(
    name="dark",
    window="#1d1f23",
    base="#23252a",
    alt_base="#2a2d33",
    sidebar="#191b1e",
    text="#e4e6ea",
    muted="#9aa1ab",
    border="#3a3e45",
    accent="#5b8def",
    accent_text="#ffffff",
    user_bubble="#2c3a55",
    code_bg="#16181b",
    inline_code_bg="#33363d",
    warning_bg="#4a3b12",
    warning_text="#ffe3a3",
    error="#ff6b6b",
    button="#2c2f35",
    hover="#353941",
)

_current: Colors = LIGHT


def colors() -> Colors:
    return _current


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def resolve(mode: str) -> Colors:
    if mode == "dark":
        return DARK
    if mode == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


def palette_for(c: Colors) -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    p.setColor(role.Window, QColor(c.window))
    p.setColor(role.WindowText, QColor(c.text))
    p.setColor(role.Base, QColor(c.base))
    p.setColor(role.AlternateBase, QColor(c.alt_base))
    p.setColor(role.ToolTipBase, QColor(c.base))
    p.setColor(role.ToolTipText, QColor(c.text))
    p.setColor(role.PlaceholderText, QColor(c.muted))
    p.setColor(role.Text, QColor(c.text))
    p.setColor(role.Button, QColor(c.button))
    p.setColor(role.ButtonText, QColor(c.text))
    p.setColor(role.BrightText, QColor(c.error))
    p.setColor(role.Highlight, QColor(c.accent))
    p.setColor(role.HighlightedText, QColor(c.accent_text))
    p.setColor(role.Link, QColor(c.accent))
    p.setColor(role.LinkVisited, QColor(c.accent))
    p.setColor(role.Mid, QColor(c.border))
    p.setColor(role.Midlight, QColor(c.hover))
    p.setColor(role.Dark, QColor(c.border))
    p.setColor(role.Light, QColor(c.base))
    disabled = QColor(c.muted)
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, disabled)
    return p


def style_sheet(c: Colors) -> str:
    text = (STYLES / "app.qss").read_text(encoding="utf-8")
    for key, value in c.__dict__.items():
        text = text.replace("{{" + key + "}}", value)
    return text


@lru_cache(maxsize=256)
def _icon(name: str, color: str, size: int) -> QIcon:
    from PySide6.QtSvg import QSvgRenderer

    svg = (ICONS / f"{name}.svg").read_text(encoding="utf-8").replace("currentColor", color)
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    icon = QIcon()
    for scale in (1, 2):
        pm = QPixmap(size * scale, size * scale)
        pm.fill(Qt.GlobalColor.transparent)
        pm.setDevicePixelRatio(scale)
        painter = QPainter(pm)
        renderer.render(painter, QRectF(0, 0, size, size))
        painter.end()
        icon.addPixmap(pm)
    return icon


def icon(name: str, color: str | None = None, size: int = 18) -> QIcon:
    """A line icon from resources/icons, drawn in `color` (default: the theme's text colour)."""
    return _icon(name, color or _current.text, size)


def app_icon() -> QIcon:
    return QIcon(str(ICONS / "mnemo.svg"))


class ThemeManager(QObject):
    """Applies a theme to the application and re-applies it when the system scheme changes."""

    changed = Signal(object)  # Colors

    def __init__(self, mode: str = "system", parent: QObject | None = None):
        super().__init__(parent)
        self.mode = mode if mode in THEMES else "system"
        hints = QGuiApplication.styleHints()
        hints.colorSchemeChanged.connect(self._system_changed)

    def _system_changed(self, _scheme) -> None:
        if self.mode == "system":
            self.apply()

    def set_mode(self, mode: str) -> None:
        self.mode = mode if mode in THEMES else "system"
        self.apply()

    def apply(self) -> Colors:
        global _current
        from PySide6.QtWidgets import QApplication

        c = resolve(self.mode)
        _current = c
        app = QApplication.instance()
        if isinstance(app, QApplication):  # a widget application (instance() is typed QCoreApplication)
            if app.style().name().lower() != "fusion":
                app.setStyle("Fusion")
            app.setPalette(palette_for(c))
            app.setStyleSheet(style_sheet(c))
        self.changed.emit(c)
        return c
