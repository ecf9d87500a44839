"""The schema settings.json is read with: each value's type and range, for every section.

A value's type is its default's (a setting's dataclass field, a memory parameter's MemoryParams
field), so the schema cannot drift from the code that uses it; a range (`Rule`) says what the code can
work with. Both are declared once, on the field, with its label and help (`setting` here for a setting of
app.settings, `memory_core.types.param` for a memory parameter): this check, the settings dialog and
docs/settings.md (app.settings_doc) all read them there. A value that does not fit keeps its default and the user is told in one sentence
(`AppContext.settings_notes`: a warning in the CLI, a message box in the window), so a typo in the file
never stops Mnemo or turns into a TypeError deep in a reply.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")
RULE = "rule"  # the dataclass field metadata key that holds a setting's Rule


@dataclass(frozen=True)
class Rule:
    """What a value may be besides its type: at least `low`, at most `high`, one of `choices`."""

    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why `value` (already of the right type) is out of bounds, in words; None when it is not."""
        if self.choices and value not in self.choices:
            return "is not one of " + ", ".join(json.dumps(c) for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if not math.isfinite(value):
            return "is not a finite number"
        low, high = self.low, self.high
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                return f"is not between {_num(low)} and {_num(high)}"
            return f"is less than {_num(low)}" if low is not None else f"is more than {_num(high or 0)}"
        return None


ABOUT = "about"  # the dataclass field metadata key that holds a setting's About


@dataclass(frozen=True)
class About:
    """What a setting of settings.json is called and does: the settings dialog's label and tooltip, and
    docs/settings.md's row (written beside the field's default and Rule, so the three cannot drift)."""

    label: str
    help: str


def setting(
    default: T,
    *,
    label: str,
    help: str,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
) -> T:
    """A settings dataclass field with its `Rule` and `About` (typed as its default, as `field` is)."""
    return field(default=default, metadata={RULE: Rule(low, high, choices), ABOUT: About(label, help)})


@dataclass(frozen=True)
class SettingInfo:
    """One setting as its field declares it: what the schema check, the settings dialog and
    docs/settings.md read. `name` is its key in settings.json (`chat.n_ctx`; a memory parameter's flat
    name, under "memory"); `group` its section there, or the memory parameter's group in the dialog."""

    name: str
    group: str
    default: Any
    rule: Rule
    label: str
    help: str


def about(cls: type, name: str) -> About:
    """The label and help declared on the field `name` of the settings dataclass `cls` (`setting`)."""
    for f in fields(cls):
        if f.name == name:
            return f.metadata[ABOUT]
    raise KeyError(f"{cls.__name__} has no setting {name!r}")


def rule_of(cls: type, name: str) -> Rule:
    """The range or choices declared on the field `name` of the settings dataclass `cls`."""
    for f in fields(cls):
        if f.name == name:
            return f.metadata.get(RULE, Rule())
    raise KeyError(f"{cls.__name__} has no setting {name!r}")


def settings_of(cls: type, section: str = "") -> list[SettingInfo]:
    """Every setting of the settings dataclass `cls` (app.settings.Settings), sections walked in field
    order, by its key in settings.json. The "memory" object is left out: `memory_settings` lists it."""
    out: list[SettingInfo] = []
    defaults = cls()
    for f in fields(cls):
        default = getattr(defaults, f.name)
        name = f"{section}.{f.name}" if section else f.name
        if is_dataclass(default):
            out += settings_of(type(default), name)
        elif name != "memory":
            a = f.metadata[ABOUT]
            out.append(
                SettingInfo(name, section or "(top level)", default, f.metadata.get(RULE, Rule()), a.label, a.help)
            )
    return out


@cache
def memory_settings() -> tuple[SettingInfo, ...]:
    """Every memory parameter as its MemoryParams field declares it (memory_core.types.param), in the
    order of the dialog's groups (memory_core.types.PARAM_SECTIONS), each group in field order. Read on
    first use, so that memory_core is not loaded at start for a file that changes no parameter."""
    from memory_core.types import PARAM_SECTIONS, MemoryParams

    defaults = MemoryParams().flat()
    found = [(name, MemoryParams.info(name)) for name in defaults]
    return tuple(
        SettingInfo(name, info.group, defaults[name], Rule(info.low, info.high), info.label, info.help)
        for group in PARAM_SECTIONS
        for name, info in found
        if info.group == group
    )


def memory_rule(name: str) -> Rule:
    """The range of the memory parameter `name` (its type is its default's), as its field declares it."""
    return _memory_rules()[name]


def __getattr__(name: str) -> Any:
    """MEMORY_RULES (flat parameter name -> Rule), made from the MemoryParams fields on first use."""
    if name == "MEMORY_RULES":
        return _memory_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _memory_rules() -> dict[str, Rule]:
    return {s.name: s.rule for s in memory_settings()}


def checked(name: str, default: Any, value: Any, rule: Rule, notes: list[str] | None) -> tuple[bool, Any]:
    """(True, the value as the default's type) when `value` fits; else (False, None) and a note saying
    that `name` keeps its default and why."""
    why = _type_problem(default, value)
    typed = value
    if why is None:
        if isinstance(default, float):
            typed = float(value)
        elif isinstance(default, int) and not isinstance(default, bool):
            typed = int(value)
        why = rule.problem(typed)
    if why is None:
        return True, typed
    if notes is not None:  # the value as the file has it
        notes.append(f"settings: {name} = {_json(value)} {why}; the default {_json(default)} is used")
    return False, None


def memory_overrides(data: Any, notes: list[str] | None) -> dict[str, Any]:
    """settings.json's "memory" object as the MemoryParams overrides that fit, by flat name; each name
    that is no parameter and each value that does not fit is a note."""
    if not isinstance(data, Mapping):
        if notes is not None and data is not None:
            notes.append("settings: memory should be an object; the default memory parameters are used")
        return {}
    if not data:
        return {}
    # memory_settings loads memory_core: only for a file that changes a parameter (not at every start)
    defaults = {s.name: s.default for s in memory_settings()}
    kept: dict[str, Any] = {}
    for name, value in data.items():
        if name not in defaults:
            if notes is not None:
                notes.append(f"settings: memory.{name} is not a memory parameter; it is ignored")
            continue
        ok, value = checked(f"memory.{name}", defaults[name], value, memory_rule(name), notes)
        if ok:
            kept[name] = value
    return kept


def _type_problem(default: Any, value: Any) -> str | None:
    """Why `value` cannot stand for `default`'s type; None when it can (an integral float for an int)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "is not true or false"
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "is not a number"
        if isinstance(default, int) and isinstance(value, float) and not value.is_integer():
            return "is not a whole number" if math.isfinite(value) else "is not a finite number"
        return None
    if isinstance(default, str):
        return None if isinstance(value, str) else "is not text"
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _json(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
