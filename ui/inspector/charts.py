"""QtCharts views of topic (segment) heat: the busiest topics (stacked by heat component) with the threshold
(τ) at which a topic is read for the profile, and one topic's heat over time, reconstructed from the memory
event log. The charts draw in the theme's colours (`apply_theme`), dark mode included.

What the event log lets us recover: pages joining a segment (`page_moved` with
`detail.segment_id`; +1 L_interaction, resets last access), its creation, visits of replies that quoted
its pages (`segment_visited`: +1 N_visit, resets last access), promotions (L_interaction and N_visit → 0), archiving
(the event records the exact heat), restoring. `store.event_log.segment_events(sid)` reads them in
SQL. Events older than the log's retention (`MemoryParams.jobs.events_keep`), and visits made by a
database older than the `segment_visited` event, are not there: the view then says so (the
replayed L_interaction or N_visit does not match the segment's) and draws the current heat at
"now" from the segment itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCharts import (
    QBarCategoryAxis,
    QBarSet,
    QChart,
    QChartView,
    QDateTimeAxis,
    QHorizontalStackedBarSeries,
    QLineSeries,
    QScatterSeries,
    QValueAxis,
)
from PySide6.QtCore import QDateTime, QMargins, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen

from app.wording import count, heat
from ui import theme

VISIT_EVENTS = {"segment_visited", "visited"}
C_VISIT = QColor("#8e24aa")
C_INTER = QColor("#fb8c00")
C_RECENCY = QColor("#42a5f5")
C_TAU = QColor("#c62828")
LEGEND_MIN_WIDTH = 300


# ====================================================================== reconstruction (pure, testable)
@dataclass
class HeatHistory:
    points: list[tuple[float, float]] = field(default_factory=list)  # (unix time, heat) replayed from events
    marks: list[tuple[float, float, str]] = field(default_factory=list)  # (time, heat, label) of notable events
    now: tuple[float, float] | None = None  # (now, the segment's current heat, visits included)
    complete: bool = True
    notes: list[str] = field(default_factory=list)


def segment_events(events: Sequence, sid: int) -> list:
    """The events of one segment, oldest first (its own events and pages moved into it)."""
    out = []
    for e in events:
        if e.item_kind == "segment" and e.item_id == sid:
            out.append(e)
        elif e.kind == "page_moved" and (e.detail or {}).get("segment_id") == sid:
            out.append(e)
    out.sort(key=lambda e: (e.at, e.id))
    return out


@dataclass
class _HeatReplay:
    """A topic's heat counters as its logged events are replayed, and the history drawn from them."""

    alpha: float
    beta: float
    gamma: float
    mu: float
    samples: int
    h: HeatHistory = field(default_factory=HeatHistory)
    n: int = 0  # visits (uses in a reply) since the topic was last read
    l_int: int = 0  # new messages since the topic was last read
    last: float | None = None  # the last time it was touched
    t_prev: float | None = None  # the time of the previous point

    def heat_at(self, t: float) -> float:
        rec = math.exp(-max(t - self.last, 0.0) / self.mu) if self.last is not None else 0.0
        return self.alpha * self.n + self.beta * self.l_int + self.gamma * rec

    def decay_to(self, t: float) -> None:
        # sample the recency decay between the previous point and t (visible only over long gaps)
        if self.t_prev is None or self.last is None or t <= self.t_prev:
            return
        span = t - self.t_prev
        if span > self.mu / 500:
            for i in range(1, self.samples):
                ti = self.t_prev + span * i / self.samples
                self.h.points.append((ti, self.heat_at(ti)))
        self.h.points.append((t, self.heat_at(t)))

    def apply(self, e, t: float) -> bool:
        """Count one event at time t; False for an event that does not change the heat."""
        d = e.detail or {}
        h = self.h
        if e.kind == "page_moved":
            if d.get("how") == "created":
                self.l_int = max(self.l_int, 1) if self.last is None else self.l_int + 1
            else:
                self.l_int += 1
            self.last = t
        elif e.kind == "segment_created":
            self.last = t
            self.l_int = max(self.l_int, 0)
        elif e.kind == "promoted":
            before = self.heat_at(t)
            h.marks.append((t, before, "promoted"))
            self.l_int = 0
            self.n = 0  # both counts start again once the topic is read (memory_core.segments.promotion)
        elif e.kind in VISIT_EVENTS:
            self.n += int(d.get("count", 1))
            self.last = t
        elif e.kind == "segment_archived":
            if d.get("heat") is not None:
                h.marks.append((t, float(d["heat"]), "archived"))
            else:
                h.marks.append((t, self.heat_at(t), "archived"))
        elif e.kind == "segment_restored":
            self.last = t
            h.marks.append((t, self.heat_at(t), "restored"))
        elif e.kind in ("pinned", "unpinned"):
            h.marks.append((t, self.heat_at(t), e.kind))
        else:
            return False
        return True

    def finish(self, segment, now: float) -> None:
        """Up to now, against what the topic itself counts (the log may not hold every visit)."""
        h = self.h
        if self.last is not None:
            self.decay_to(now)
            if h.points and h.points[-1][0] == now:
                h.points.pop()
        # the visits the log does not hold, and anything pruned from it
        if self.l_int != segment.l_interaction:
            h.complete = False
            h.notes.append(
                f"the log holds {count(self.l_int, 'new message')} of this topic, the topic counts "
                f"{segment.l_interaction} (older entries of the log were cleared)"
            )
        if segment.n_visit and self.n != segment.n_visit:
            h.notes.append(
                f"used in {count(segment.n_visit, 'reply')}, which the log does not hold: the line shows new "
                "messages and recent use; the purple square “now” is the whole heat, uses included"
            )
            if not h.points or h.points[-1][0] != now:
                h.points.append((now, self.heat_at(now) if self.last is not None else 0.0))
        else:
            h.points.append((now, float(segment.heat)))
        h.now = (now, float(segment.heat))


def heat_history(events: Sequence, segment, params, now: float | None = None, samples: int = 16) -> HeatHistory:
    """Replay a segment's events into heat(t) = α·N_visit + β·L_interaction + γ·exp(−Δt/μ)."""
    now = time.time() if now is None else now
    p = params.heat
    replay = _HeatReplay(p.alpha, p.beta, p.gamma, max(p.mu, 1e-9), samples)
    h = replay.h
    for e in segment_events(events, segment.id if hasattr(segment, "id") else int(segment)):
        t = float(e.at)
        replay.decay_to(t)
        if not replay.apply(e, t):
            continue
        h.points.append((t, replay.heat_at(t)))
        replay.t_prev = t
    if segment is not None and hasattr(segment, "heat"):
        replay.finish(segment, now)
    if not h.points:
        h.complete = False
        h.notes.append("the log holds nothing of this topic any more")
    return h


# ====================================================================== charts
def fit_to_width(chart: QChart, width: int) -> None:
    """Keep a chart readable in a narrow dock: a date axis gets one tick per ~110 px (its labels are
    elided to "1…" when crowded), and below 420 px the legend's font shrinks so its labels still fit."""
    for axis in chart.axes(Qt.Orientation.Horizontal):
        if isinstance(axis, QDateTimeAxis):
            axis.setTickCount(max(2, min(5, width // 110)))
    legend = chart.legend()
    f = QFont()
    if width < 420:
        f.setPointSizeF(max(6.5, f.pointSizeF() * 0.8))
    legend.setFont(f)
    legend.setVisible(width >= LEGEND_MIN_WIDTH)  # squeezed, its labels read "u… n… r…"; the tooltip says it


class _FittingChartView(QChartView):
    """A chart view that refits its chart (`fit_to_width`) when resized or given a new chart."""

    def setChart(self, chart: QChart) -> None:
        fit_to_width(chart, self.width())
        apply_theme(chart)
        super().setChart(chart)
        self.setBackgroundBrush(QColor(theme.colors().base))

    def restyle(self) -> None:
        """The theme changed: redraw the chart in its colours."""
        apply_theme(self.chart())
        self.setBackgroundBrush(QColor(theme.colors().base))

    def resizeEvent(self, event) -> None:
        fit_to_width(self.chart(), event.size().width())
        super().resizeEvent(event)


def apply_theme(chart: QChart) -> None:
    """Draw `chart` in the theme's colours: a QChart paints white with black labels whatever the palette,
    which left the charts white in dark mode."""
    c = theme.colors()
    text, muted, grid = QColor(c.text), QColor(c.muted), QColor(c.border)
    chart.setBackgroundBrush(QColor(c.base))
    chart.setBackgroundPen(QPen(Qt.PenStyle.NoPen))
    chart.setTitleBrush(text)
    chart.legend().setLabelColor(text)
    for axis in chart.axes():
        axis.setLabelsColor(muted)
        axis.setTitleBrush(muted)
        axis.setGridLineColor(grid)
        axis.setLinePenColor(grid)


def _chart(title: str) -> QChart:
    c = QChart()
    c.setTitle(title)
    f = QFont()
    f.setBold(True)
    c.setTitleFont(f)
    c.setAnimationOptions(QChart.AnimationOption.NoAnimation)
    c.setMargins(QMargins(4, 4, 4, 4))
    c.legend().setAlignment(Qt.AlignmentFlag.AlignBottom)
    return c


class SegmentsHeatChart(_FittingChartView):
    """Horizontal stacked bars of the busiest topics (mid-term segments): α·N_visit + β·L_interaction +
    γ·recency, with the threshold τ as a vertical line. Clicking a bar emits `segment_clicked(id)`."""

    segment_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setChart(_chart("Busiest topics"))
        self.setToolTip(
            "Each topic's heat, in parts: uses (purple), new messages (orange) and recent use (blue); "
            "the dashed line is the threshold at which it is read for your profile. Click a bar to open it."
        )
        self.segment_ids: list[int] = []
        self.setMinimumHeight(220)

    def set_segments(self, segments: Sequence, params, total: int | None = None) -> None:
        segs = list(segments)[::-1]  # hottest at the top of a horizontal bar chart
        self.segment_ids = [s.id for s in segs]
        chart = _chart("Busiest topics")
        if not segs:
            chart.setTitle("No topics yet")
            self.setChart(chart)
            return
        sets = []
        for name, color, fn in (
            ("uses", C_VISIT, lambda s: params.heat.alpha * s.n_visit),
            ("new", C_INTER, lambda s: params.heat.beta * s.l_interaction),
            ("recent", C_RECENCY, lambda s: params.heat.gamma * s.recency),
        ):
            bs = QBarSet(name)
            bs.setColor(color)
            bs.setBorderColor(color.darker(120))
            for s in segs:
                bs.append(float(fn(s)))
            bs.clicked.connect(lambda i, ids=self.segment_ids: self.segment_clicked.emit(ids[i]))
            sets.append(bs)
        series = QHorizontalStackedBarSeries()
        series.setBarWidth(0.75)
        for bs in sets:
            series.append(bs)
        chart.addSeries(series)
        cats = [f"#{s.id} {', '.join(s.keywords[:2])}"[:28] for s in segs]
        ay = QBarCategoryAxis()
        ay.append(cats)
        small = QFont()
        small.setPointSizeF(max(6.5, small.pointSizeF() * 0.8))
        ay.setLabelsFont(small)
        ax = QValueAxis()
        top = max([s.heat for s in segs] + [params.heat.tau]) * 1.1
        ax.setRange(0, top)
        ax.setLabelFormat("%.1f")
        ax.setTitleText("heat")
        chart.addAxis(ay, Qt.AlignmentFlag.AlignLeft)
        chart.addAxis(ax, Qt.AlignmentFlag.AlignBottom)
        series.attachAxis(ay)
        series.attachAxis(ax)
        tau = QLineSeries()
        tau.setName(f"threshold {params.heat.tau:g}")
        pen = QPen(C_TAU)
        pen.setWidthF(2.0)
        pen.setStyle(Qt.PenStyle.DashLine)
        tau.setPen(pen)
        tau.append(QPointF(params.heat.tau, -0.5))
        tau.append(QPointF(params.heat.tau, len(segs) - 0.5))
        chart.addSeries(tau)
        tau.attachAxis(ax)
        tau.attachAxis(ay)
        self.setChart(chart)


class SegmentHistoryChart(_FittingChartView):
    """One topic's heat over time (from the event log) with the threshold line (τ) and event marks."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setChart(_chart("Select a topic to see its heat over time"))
        self.history: HeatHistory | None = None
        self.setMinimumHeight(200)

    def clear(self, text: str = "Select a topic to see its heat over time") -> None:
        self.history = None
        self.setChart(_chart(text))

    def set_history(self, segment, history: HeatHistory, params) -> None:
        self.history = history
        chart = _chart(f"Topic {segment.id}: heat {heat(segment.heat)}")
        pts = history.points
        if not pts:
            chart.setTitle(f"Topic {segment.id}: no heat history in the event log")
            self.setChart(chart)
            return
        t0, t1 = pts[0][0], pts[-1][0]
        if t1 - t0 < 1:
            t0 -= 30
            t1 += 30
        pad = (t1 - t0) * 0.03
        t0, t1 = t0 - pad, t1 + pad
        line = QLineSeries()
        line.setName("heat")
        pen = QPen(C_INTER.darker(110))
        pen.setWidthF(2.2)
        line.setPen(pen)
        for t, hval in pts:
            line.append(QPointF(t * 1000.0, hval))
        chart.addSeries(line)
        tau = QLineSeries()
        tau.setName(f"threshold {params.heat.tau:g}")
        tp = QPen(C_TAU)
        tp.setWidthF(1.8)
        tp.setStyle(Qt.PenStyle.DashLine)
        tau.setPen(tp)
        tau.append(QPointF(t0 * 1000.0, params.heat.tau))
        tau.append(QPointF(t1 * 1000.0, params.heat.tau))
        chart.addSeries(tau)
        extra = []
        if history.marks:
            marks = QScatterSeries()
            marks.setName("read for profile" if all(m[2] == "promoted" for m in history.marks) else "events")
            marks.setMarkerSize(9)
            marks.setColor(C_TAU)
            for t, hval, _ in history.marks:
                marks.append(QPointF(t * 1000.0, hval))
            chart.addSeries(marks)
            extra.append(marks)
        if history.now is not None and abs(history.now[1] - pts[-1][1]) > 1e-6:
            nowp = QScatterSeries()
            nowp.setName("now")
            nowp.setMarkerShape(QScatterSeries.MarkerShape.MarkerShapeRectangle)
            nowp.setMarkerSize(10)
            nowp.setColor(C_VISIT)
            nowp.append(QPointF(history.now[0] * 1000.0, history.now[1]))
            chart.addSeries(nowp)
            extra.append(nowp)
        ax = QDateTimeAxis()
        span = t1 - t0
        ax.setFormat("HH:mm:ss" if span < 3600 else ("MM-dd HH:mm" if span < 3 * 86400 else "yyyy-MM-dd"))
        ax.setRange(QDateTime.fromMSecsSinceEpoch(int(t0 * 1000)), QDateTime.fromMSecsSinceEpoch(int(t1 * 1000)))
        ay = QValueAxis()
        top = max([hval for _, hval in pts] + [params.heat.tau] + ([history.now[1]] if history.now else [])) * 1.15
        ay.setRange(0, top)
        ay.setLabelFormat("%.1f")
        ay.setTitleText("heat")
        chart.addAxis(ax, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(ay, Qt.AlignmentFlag.AlignLeft)
        for s in [line, tau] + extra:
            s.attachAxis(ax)
            s.attachAxis(ay)
        self.setChart(chart)


def history_note(history: HeatHistory | None) -> str:
    if history is None:
        return ""
    return "; ".join(history.notes)


__all__ = ["HeatHistory", "heat_history", "segment_events", "SegmentsHeatChart", "SegmentHistoryChart", "history_note"]
