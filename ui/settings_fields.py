"""The settings dialog's fields, made from the settings' own declarations: a setting's label, tooltip and
range are read from its dataclass field (app.settings `setting`, memory_core.types `param`, through
app.settings_schema), so the dialog cannot show a range settings.json would refuse, nor a knob without help."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QFormLayout, QGroupBox, QSpinBox, QWidget

from app.settings_schema import about, memory_rule, memory_settings, rule_of
from ui.param_help import PARAM_GROUPS, param_help


def spin(lo: int, hi: int, value: int, special: str | None = None) -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setValue(value)
    if special:
        s.setSpecialValueText(special)
    return s


def dspin(lo: float, hi: float, value: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setDecimals(decimals)
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setValue(value)
    return s


def int_knob(
    form: QFormLayout, section: Any, name: str, *, step: int = 1, special: str | None = None, widget_high: int = 0
) -> QSpinBox:
    """A row of `form` for the whole-number setting `name` of the settings dataclass `section` (e.g.
    `s.chat`): its label, tooltip and range as the field declares them, its value as `section` holds it.
    `widget_high` caps a box whose setting has no upper bound (a spin box needs one)."""
    rule = rule_of(type(section), name)
    if rule.low is None or (rule.high is None and not widget_high):
        raise ValueError(f"{name}: a spin box needs both bounds")
    w = spin(int(rule.low), int(rule.high if rule.high is not None else widget_high), getattr(section, name), special)
    w.setSingleStep(step)
    _add_row(form, section, name, w)
    return w


def float_knob(form: QFormLayout, section: Any, name: str, *, step: float) -> QDoubleSpinBox:
    """A row of `form` for the decimal setting `name` of `section`, as `int_knob` (two decimals)."""
    rule = rule_of(type(section), name)
    if rule.low is None or rule.high is None:
        raise ValueError(f"{name}: a spin box needs both bounds")
    w = dspin(rule.low, rule.high, getattr(section, name), step)
    _add_row(form, section, name, w)
    return w


def _add_row(form: QFormLayout, section: Any, name: str, widget: QWidget) -> None:
    info = about(type(section), name)
    widget.setToolTip(info.help)
    widget.setAccessibleName(info.label)
    form.addRow(info.label, widget)


def setting_check(section: Any, name: str, parent: QWidget) -> QCheckBox:
    """A check box for the true-or-false setting `name` of `section`: its label is the box's text."""
    info = about(type(section), name)
    check = QCheckBox(info.label, parent)
    check.setChecked(getattr(section, name))
    check.setToolTip(info.help)
    return check


def setting_label(section: Any, name: str, widget: QWidget | None = None) -> str:
    """The label of the setting `name` of `section`, its help set as `widget`'s tooltip (for a row the
    dialog builds itself: a file chooser, a list of choices)."""
    info = about(type(section), name)
    if widget is not None:
        widget.setToolTip(info.help)
    return info.label


class MemoryParamsForm:
    """Settings ▸ Memory's parameter groups (shown with Developer settings on): a spin box per memory
    parameter, in the groups, with the labels, tooltips and ranges its field declares. A class of its own
    so the dialog holds it (composition) and the dialog's memory tab stays short."""

    def __init__(self, page: QWidget, overrides: Mapping[str, Any]) -> None:
        # flat parameter names, as settings.json's "memory" object keeps them
        self.defaults: dict[str, Any] = {s.name: s.default for s in memory_settings()}
        current = dict(self.defaults)
        current.update({k: v for k, v in overrides.items() if k in current})
        self.edits: dict[str, QSpinBox | QDoubleSpinBox] = {}
        self.boxes: list[QGroupBox] = []
        for title, params in PARAM_GROUPS.items():
            box = QGroupBox(title, page)
            form = QFormLayout(box)
            for name in params:
                self._row(form, name, current[name])
            self.boxes.append(box)

    def _row(self, form: QFormLayout, name: str, value: Any) -> None:
        label, tip = param_help(name)
        w = self._widget(name, value)
        w.setToolTip(f"{tip}\n({name}, default {self.defaults[name]:g})")
        w.setAccessibleName(label)
        form.addRow(label, w)
        form.labelForField(w).setToolTip(w.toolTip())

    def _widget(self, name: str, value: Any) -> QSpinBox | QDoubleSpinBox:
        default = self.defaults[name]
        if isinstance(default, bool):
            raise TypeError(name)
        w: QSpinBox | QDoubleSpinBox
        rule = memory_rule(name)  # the range settings.json is checked against (app.settings_schema)
        if isinstance(default, int):
            lo = int(rule.low) if rule.low is not None else 0
            w = spin(lo, int(rule.high) if rule.high is not None else 10_000_000, int(value))
        else:
            big = abs(float(default)) >= 1000
            lo_f = rule.low if rule.low is not None else -1000.0
            hi_f = rule.high if rule.high is not None else (1e12 if big else 1000.0)
            w = dspin(lo_f, hi_f, float(value), 1000.0 if big else 0.05, 0 if big else 3)
        self.edits[name] = w
        return w

    def reset(self) -> None:
        """Every memory parameter back to its default."""
        for name, w in self.edits.items():
            w.setValue(self.defaults[name])

    def overrides(self) -> dict[str, Any]:
        """The parameters whose value differs from the default, as settings.json's "memory" keeps them."""
        out: dict[str, Any] = {}
        for name, w in self.edits.items():
            default = self.defaults[name]
            value = int(w.value()) if isinstance(default, int) else float(w.value())
            if abs(value - default) > 1e-9 * max(1.0, abs(default)):
                out[name] = value
        return out
