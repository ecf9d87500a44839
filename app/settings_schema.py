"""The schema settings.json is read with: each value's type and range, for every section.

A value's type is its default's (a setting's dataclass field, a memory parameter's MemoryParams
field), so the schema cannot drift from the code that uses it; a range (`Rule`) says what the code can
work with. A value that does not fit keeps its default and the user is told in one sentence
(`AppContext.settings_notes`: a warning in the CLI, a message box in the window), so a typo in the file
never stops Mnemo or turns into a TypeError deep in a reply.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
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


def setting(default: T, *, low: float | None = None, high: float | None = None, choices: tuple[str, ...] = ()) -> T:
    """A settings dataclass field with its `Rule` (typed as its default, as `field` is)."""
    return field(default=default, metadata={RULE: Rule(low, high, choices)})


# Memory parameters: a count is at least 0 and a weight or duration at least 0, unless named here.
# (MemoryParams fields say what each means; these bounds say what the engine can compute with.)
_AT_LEAST_ONE = Rule(low=1)
_COSINE = Rule(low=-1.0, high=1.0)
_SHARE = Rule(low=0.0, high=1.0)
MEMORY_RULES: dict[str, Rule] = {
    "stm_capacity": _AT_LEAST_ONE,
    "mtm_capacity": _AT_LEAST_ONE,
    "segment_candidates": _AT_LEAST_ONE,
    "dense_candidates": _AT_LEAST_ONE,
    "keyword_candidates": _AT_LEAST_ONE,
    "job_max_attempts": _AT_LEAST_ONE,
    "import_batch": _AT_LEAST_ONE,
    "mu": Rule(low=1.0),  # seconds; heat divides by it
    "rrf_k": Rule(low=1.0),  # reciprocal rank fusion divides by k + rank
    "theta": Rule(low=-1.0, high=2.0),  # cosine + Jaccard
    "chain_theta": Rule(low=-1.0, high=2.0),
    "duplicate_threshold": _COSINE,
    "update_threshold": _COSINE,
    "trait_update_threshold": _COSINE,
    "recall_keyword_min_similarity": _COSINE,
    "recall_min_similarity": _COSINE,
    "recall_min_standout": Rule(low=-2.0, high=2.0),  # a cosine over the usual one
    "recall_min_score": Rule(),  # a ranking score: any finite number
    "common_word_df": _SHARE,
    "common_word_mix": _SHARE,
}
_DEFAULT_MEMORY_RULE = Rule(low=0)


def memory_rule(name: str) -> Rule:
    """The range of the memory parameter `name` (its type is its default's)."""
    return MEMORY_RULES.get(name, _DEFAULT_MEMORY_RULE)


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
    from memory_core import MemoryParams  # only for a file that changes a parameter (not at every start)

    defaults = MemoryParams().flat()
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
