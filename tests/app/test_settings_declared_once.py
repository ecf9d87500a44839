"""A setting is declared once, on its dataclass field (default, bounds, group, label, help): the schema
check, the settings dialog and docs/settings.md read it there. These tests hold every field to it, so a
new setting cannot come without a label and help, land under no group, or leave the docs behind."""

from __future__ import annotations

import math

from app.settings import Settings
from app.settings_doc import DOC_PATH, bounds, main, render
from app.settings_schema import MEMORY_RULES, Rule, memory_rule, memory_settings, settings_of
from memory_core import MemoryParams
from memory_core.types import PARAM, PARAM_SECTIONS, ParamInfo


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_every_memory_parameter_declares_its_group_label_help_and_bounds():
    for _, f in MemoryParams.flat_fields():
        info = f.metadata.get(PARAM)
        assert isinstance(info, ParamInfo), f"{f.name}: declare it with memory_core.types.param"
        assert info.group in PARAM_SECTIONS, f.name
        assert info.label.strip() and info.help.strip(), f"{f.name}: a label and a help"
        assert _is_number(f.default), f.name
        assert Rule(info.low, info.high).problem(f.default) is None, f"{f.name}: its default is out of its bounds"
        assert MemoryParams.info(f.name) is info


def test_memory_settings_list_every_parameter_once_in_the_dialogs_groups():
    rows = memory_settings()
    assert sorted(s.name for s in rows) == sorted(MemoryParams().flat())
    groups = [s.group for s in rows]
    assert sorted(set(groups), key=groups.index) == list(PARAM_SECTIONS)  # each group once, in order
    assert groups == sorted(groups, key=PARAM_SECTIONS.index)  # a group's rows together
    for group in PARAM_SECTIONS:  # two rows of a group never read the same
        labels = [s.label for s in rows if s.group == group]
        assert len(labels) == len(set(labels)), group
    knowledge = next(s for s in rows if s.name == "max_knowledge")  # once without help, under "Other"
    assert knowledge.group == "Your profile" and knowledge.default == 100 and knowledge.rule == Rule(low=0)


def test_the_schema_reads_the_bounds_from_the_fields():
    assert set(MEMORY_RULES) == set(MemoryParams().flat())
    for s in memory_settings():
        info = MemoryParams.info(s.name)
        assert memory_rule(s.name) == Rule(info.low, info.high) == s.rule
    assert memory_rule("stm_capacity").problem(0) == "is less than 1"
    assert memory_rule("duplicate_threshold").problem(1.5) == "is not between -1 and 1"
    assert memory_rule("recall_min_score").problem(-5.0) is None  # a ranking score: any finite number


def test_every_setting_of_the_file_declares_its_label_help_and_bounds():
    rows = settings_of(Settings)
    assert {s.name for s in rows} >= {"chat.n_ctx", "ui.theme", "backup_keep", "topic_titles"}
    assert "memory" not in {s.name for s in rows}  # the memory parameters are listed on their own
    for s in rows:
        assert s.label.strip() and s.help.strip(), f"{s.name}: a label and a help"
        assert s.rule.problem(s.default) is None, s.name
        if _is_number(s.default):
            assert s.rule.low is not None, f"{s.name}: a number without a lower bound"


def test_docs_settings_md_is_what_the_generator_writes():
    assert DOC_PATH.read_text(encoding="utf-8") == render(), "docs/settings.md is stale: python -m app.settings_doc"
    assert main(["--check"]) == 0
    text = render()
    for s in (*memory_settings(), *settings_of(Settings)):
        assert f"| `{s.name}` | " in text and s.help in text, s.name


def test_the_docs_say_the_bounds_in_words():
    assert bounds(4096, Rule(256, 1_048_576)) == "256 to 1048576"
    assert bounds(10, Rule(low=1)) == "at least 1"
    assert bounds(0.4, Rule()) == "any number"
    assert bounds("system", Rule(choices=("system", "dark"))) == 'one of `"system"`, `"dark"`'
    assert bounds(True, Rule()) == "true or false" and bounds("", Rule()) == "text"
    assert all(math.isfinite(s.default) for s in memory_settings())
