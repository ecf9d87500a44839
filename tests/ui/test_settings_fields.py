"""The settings dialog shows each setting as its field declares it: the label, tooltip and range of every
memory parameter (memory_core.types.param) and of the model's knobs (app.settings `setting`), each
memory parameter in its own group (none left under "Other"), and the choices settings.json accepts."""

from __future__ import annotations

import pytest

from app.settings import ChatModelSettings, Settings, UISettings
from app.settings_schema import about, memory_settings, rule_of
from memory_core.types import PARAM_SECTIONS


@pytest.fixture
def dialog(qtbot, mnemo_dirs):
    from app.context import AppContext
    from ui.settings_dialog import SettingsDialog

    ctx = AppContext.create()
    ctx.settings.memory = {"tau": 3.5, "max_knowledge": 40}
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    for combo in (dlg.found_combo, dlg.server_combo):  # the searches for models and servers end first
        qtbot.waitUntil(lambda c=combo: not c.itemText(0).startswith("Looking"), timeout=30_000)
    return dlg


def test_every_memory_parameter_shows_in_its_group_with_its_label_help_and_range(dialog):
    boxes = {box.title(): box for box in dialog.memory_form.boxes}
    assert list(boxes) == list(PARAM_SECTIONS)  # no "Other"
    for s in memory_settings():
        w = dialog.param_edits[s.name]
        label = boxes[s.group].layout().labelForField(w)
        assert label is not None and label.text() == s.label, s.name
        assert w.toolTip().startswith(s.help + "\n"), s.name
        assert w.accessibleName() == s.label
        if s.rule.low is not None:
            assert w.minimum() == s.rule.low, s.name
        if s.rule.high is not None:
            assert w.maximum() == s.rule.high, s.name
    assert dialog.param_edits["tau"].value() == 3.5 and dialog.param_edits["max_knowledge"].value() == 40
    dialog.param_edits["recall_turns"].setValue(9)
    assert dialog.apply() == {"memory"}
    assert dialog.ctx.settings.memory == {"tau": 3.5, "max_knowledge": 40, "recall_turns": 9}
    dialog.memory_form.reset()
    dialog.apply()
    assert dialog.ctx.settings.memory == {}


def test_the_models_knobs_read_their_label_help_and_range_from_their_fields(dialog):
    knobs = {
        "n_ctx": dialog.ctx_spin,
        "n_threads": dialog.threads_spin,
        "n_gpu_layers": dialog.gpu_spin,
        "temperature": dialog.temp_spin,
        "top_p": dialog.top_p_spin,
        "min_p": dialog.min_p_spin,
        "repeat_penalty": dialog.repeat_spin,
        "self_repeat_penalty": dialog.self_repeat_spin,
        "max_tokens": dialog.max_tokens_spin,
        "reply_reserve": dialog.reserve_spin,
    }
    for name, w in knobs.items():
        rule, info = rule_of(ChatModelSettings, name), about(ChatModelSettings, name)
        assert (w.minimum(), w.maximum()) == (rule.low, rule.high), name
        assert w.toolTip() == info.help and w.accessibleName() == info.label, name
        assert w.value() == getattr(ChatModelSettings(), name), name
    assert dialog.backup_spin.minimum() == rule_of(Settings, "backup_keep").low
    assert dialog.backup_spin.toolTip() == about(Settings, "backup_keep").help
    assert dialog.enter_check.text() == about(UISettings, "enter_sends").label
    assert dialog.developer_check.toolTip() == about(UISettings, "developer").help
    assert dialog.apply() == set()  # shown as stored: nothing changes


def test_the_dialogs_choices_are_the_ones_settings_json_accepts():
    from ui.settings_dialog import THEME_LABELS, TOPIC_TITLE_LABELS

    assert tuple(k for k, _ in THEME_LABELS) == rule_of(UISettings, "theme").choices
    assert tuple(k for k, _ in TOPIC_TITLE_LABELS) == rule_of(Settings, "topic_titles").choices
