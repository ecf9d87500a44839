"""What each memory parameter (memory_core.MemoryParams) does, for Settings ▸ Memory with Developer settings on:
a label in words and a tooltip that says what the knob changes and which way, in the dialog's groups.

Nothing is written here: each parameter declares its group, label and help on its own field
(memory_core.types.param), read through app.settings_schema.memory_settings, so a new parameter cannot
be left without help or land in a group of its own."""

from __future__ import annotations

from app.settings_schema import memory_settings


def _groups() -> dict[str, dict[str, tuple[str, str]]]:
    """group title -> {flat parameter name: (label, tooltip)}, groups and rows in the dialog's order."""
    groups: dict[str, dict[str, tuple[str, str]]] = {}
    for s in memory_settings():
        groups.setdefault(s.group, {})[s.name] = (s.label, s.help)
    return groups


# group title -> {flat parameter name: (label, tooltip)}
PARAM_GROUPS: dict[str, dict[str, tuple[str, str]]] = _groups()


def param_help(name: str) -> tuple[str, str]:
    """(label, tooltip) of a parameter; KeyError for a name that is no memory parameter."""
    for params in PARAM_GROUPS.values():
        if name in params:
            return params[name]
    raise KeyError(f"no memory parameter {name!r}")
