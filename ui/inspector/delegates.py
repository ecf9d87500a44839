"""In-cell bars: segment heat (with the promotion threshold τ marked) and retrieval scores."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from ui.inspector.columns import BarRole

_SELECTED = QStyle.StateFlag.State_Selected.value
_ALTERNATE = QStyleOptionViewItem.ViewItemFeature.Alternate.value
_ELIDE = Qt.TextElideMode.ElideRight

COLD = QColor("#64b5f6")
WARM = QColor("#ffb300")
HOT = QColor("#e53935")


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    t = max(0.0, min(1.0, t))
    return QColor(
        int(a.red() + (b.red() - a.red()) * t),
        int(a.green() + (b.green() - a.green()) * t),
        int(a.blue() + (b.blue() - a.blue()) * t),
    )


def heat_color(heat: float, tau: float) -> QColor:
    """Blue when cold, amber approaching τ, red at or above τ (about to be / being promoted)."""
    if tau <= 0:
        return WARM
    f = heat / tau
    if f >= 1.0:
        return HOT
    return _mix(COLD, WARM, f) if f < 0.8 else _mix(WARM, HOT, (f - 0.8) / 0.2 * 0.5)


class BarDelegate(QStyledItemDelegate):
    """Draws the cell's BarRole value as a horizontal bar behind its text.

    `scale()` gives the value of a full bar; `threshold()` (optional) is drawn as a tick (τ)
    and decides the colour via `color(value, threshold)`.
    """

    def __init__(
        self,
        scale: Callable[[], float],
        threshold: Callable[[], float | None] | None = None,
        color: Callable[[float, float | None], QColor] | None = None,
        parent=None,
    ):
        super().__init__(parent)
        self.scale = scale
        self.threshold = threshold or (lambda: None)
        self.color = color or (lambda v, t: heat_color(v, t) if t else QColor("#7986cb"))

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:
        model = index.model()
        if hasattr(model, "bar_info"):
            # fast path for the inspector's table models: no per-role data() round trips
            text, value = model.bar_info(index.row(), index.column())
            if value is None:
                FastTextDelegate.paint_cell(
                    painter, option, text, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), None, False
                )
                return
            selected = option.state.value & _SELECTED
            if selected:
                painter.fillRect(option.rect, option.palette.highlight())
            elif option.features.value & _ALTERNATE:
                painter.fillRect(option.rect, option.palette.alternateBase())
            self._bar(painter, option, text, float(value), selected)
            return
        value = index.data(BarRole)
        if value is None:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget is not None else None
        # background (selection) without the text
        text = opt.text
        opt.text = ""
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        self._bar(painter, opt, text, float(value), opt.state.value & _SELECTED)

    def _bar(self, painter: QPainter, opt: QStyleOptionViewItem, text: str, value: float, selected) -> None:
        scale = max(float(self.scale() or 1.0), 1e-9)
        thr = self.threshold()
        cell = QRectF(opt.rect)
        text_w = opt.fontMetrics.horizontalAdvance(text) + 8
        pad = max(2.0, (cell.height() - 10) / 2)
        r = QRectF(cell.left() + 3, cell.top() + pad, max(4.0, cell.width() - text_w - 6), cell.height() - 2 * pad)
        frac = max(0.0, min(1.0, float(value) / scale))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(0, 0, 0, 18))
        painter.drawRoundedRect(r, 3, 3)
        if frac > 0:
            bar = QRectF(r.left(), r.top(), max(2.0, r.width() * frac), r.height())
            painter.setBrush(self.color(float(value), thr))
            painter.drawRoundedRect(bar, 3, 3)
        if thr:
            x = r.left() + r.width() * min(1.0, thr / scale)
            pen = QPen(QColor("#b71c1c"))
            pen.setWidthF(1.5)
            painter.setPen(pen)
            painter.drawLine(int(x), int(r.top()) - 2, int(x), int(r.bottom()) + 2)
        painter.setPen(opt.palette.highlightedText().color() if selected else opt.palette.text().color())
        painter.drawText(
            QRectF(cell.right() - text_w, cell.top(), text_w - 3, cell.height()),
            int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
            text,
        )
        painter.restore()


class FastTextDelegate(QStyledItemDelegate):
    """Paints a cell from the model's cached display text in one Python call.

    QStyledItemDelegate asks the model for ~7 roles per cell (font, alignment, colours, check
    state, decoration, text, background): thousands of Qt → Python calls per repaint, each
    paying PySide's conversion cost and a GIL hand-off when the worker thread is busy. This
    delegate gets everything from `model.paint_info(row, column)` (pure Python) instead.
    """

    def __init__(self, model, parent=None):
        super().__init__(parent)
        self.model = model

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:
        text, align, color, bold = self.model.paint_info(index.row(), index.column())
        self.paint_cell(painter, option, text, align, color, bold)

    _bold: QFont | None = None

    # Elided cell texts by (text, width, font): eliding lays the whole string out, which is half the
    # cost of drawing a cell; a repaint of rows already seen (selection, hover, a refresh) reuses
    # them. (QStaticText was measured too: faster to redraw, slower the first time, i.e. on scroll.)
    _elided: dict = {}
    _CACHE_MAX = 6000

    @classmethod
    def _elide(cls, text: str, width: int, fm: QFontMetrics, bold: bool) -> str:
        key = (text, width, bold)
        e = cls._elided.get(key)
        if e is None:
            if len(cls._elided) >= cls._CACHE_MAX:
                cls._elided.clear()
            e = cls._elided[key] = fm.elidedText(text, _ELIDE, width)
        return e

    @classmethod
    def paint_cell(cls, painter: QPainter, option: QStyleOptionViewItem, text: str, align: int, color, bold) -> None:
        r: QRect = option.rect
        state = option.state.value
        selected = state & _SELECTED
        if selected:
            painter.fillRect(r, option.palette.highlight())
        elif option.features.value & _ALTERNATE:
            painter.fillRect(r, option.palette.alternateBase())
        if not text:
            return
        font = option.font
        if bold:
            if cls._bold is None or cls._bold.pointSizeF() != font.pointSizeF():
                cls._bold = QFont(font)
                cls._bold.setBold(True)
            font = cls._bold
            fm = QFontMetrics(font)
        else:
            fm = option.fontMetrics
        if selected:
            painter.setPen(option.palette.highlightedText().color())
        elif color is not None:
            painter.setPen(color)
        else:
            painter.setPen(option.palette.text().color())
        box = r.adjusted(4, 0, -4, 0)
        if bold:
            painter.setFont(font)
        painter.drawText(box, align, cls._elide(text, box.width(), fm, bool(bold)))
        if bold:
            painter.setFont(option.font)
