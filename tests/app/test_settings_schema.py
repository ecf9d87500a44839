"""settings.json through one schema: every section's types and ranges, memory parameters included; a
value that does not fit keeps its default and is reported, and Mnemo runs on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, is_dataclass

from app.settings import Paths, Settings, load_settings
from app.settings_schema import MEMORY_RULES, RULE, Rule, memory_rule
from memory_core import MemoryParams

RECALL_TURNS_NOTE = 'settings: memory.recall_turns = "x" is not a number; the default 14 is used'


def _load(tmp_path, data) -> tuple[Settings, list[str]]:
    paths = Paths(tmp_path / "c", tmp_path / "d")
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    paths.settings_file.write_text(json.dumps(data))
    notes: list[str] = []
    return load_settings(paths, notes), notes


def test_a_memory_parameter_of_the_wrong_type_keeps_its_default_and_says_so(tmp_path):
    s, notes = _load(tmp_path, {"memory": {"recall_turns": "x", "tau": 3}})
    assert notes == [RECALL_TURNS_NOTE]
    assert s.memory == {"tau": 3.0}


def test_memory_parameters_out_of_range_unknown_or_not_an_object(tmp_path):
    _, notes = _load(
        tmp_path,
        {"memory": {"stm_capacity": 0, "recall_own_after": 2.5, "mu": -1, "duplicate_threshold": 1.5, "gone": 1}},
    )
    assert notes == [
        "settings: memory.stm_capacity = 0 is less than 1; the default 10 is used",
        "settings: memory.recall_own_after = 2.5 is not a whole number; the default 2 is used",
        f"settings: memory.mu = -1 is less than 1; the default {MemoryParams().heat.mu} is used",
        "settings: memory.duplicate_threshold = 1.5 is not between -1 and 1; the default 0.92 is used",
        "settings: memory.gone is not a memory parameter; it is ignored",
    ]
    s, notes = _load(tmp_path, {"memory": [1, 2]})
    assert s.memory == {} and notes == ["settings: memory should be an object; the default memory parameters are used"]


def test_every_section_checks_its_ranges_and_choices(tmp_path):
    s, notes = _load(
        tmp_path,
        {
            "chat": {"top_p": 1.5, "backend": "gpt", "n_ctx": 100, "temperature": float("inf")},
            "ui": {"theme": "pink", "enter_sends": 1},
            "embedding": {"onnx_path": 3},
            "backup_keep": -1,
        },
    )
    assert s == Settings()
    assert notes == [
        'settings: chat.backend = "gpt" is not one of "llama", "openai"; the default "llama" is used',
        "settings: chat.n_ctx = 100 is not between 256 and 1048576; the default 4096 is used",
        "settings: chat.temperature = Infinity is not a finite number; the default 0.5 is used",
        "settings: chat.top_p = 1.5 is not between 0 and 1; the default 0.95 is used",
        'settings: embedding.onnx_path = 3 is not text; the default "" is used',
        "settings: ui.enter_sends = 1 is not true or false; the default true is used",
        'settings: ui.theme = "pink" is not one of "system", "light", "dark"; the default "system" is used',
        "settings: backup_keep = -1 is less than 0; the default 2 is used",
    ]


def _settings_fields(cls):
    for f in fields(cls):
        default = getattr(cls(), f.name)
        if is_dataclass(default):
            yield from _settings_fields(type(default))
        else:
            yield f, default


def test_every_default_fits_its_own_rule_and_every_number_has_a_range():
    for f, default in _settings_fields(Settings):
        rule = f.metadata.get(RULE, Rule())
        assert rule.problem(default) is None, f.name
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert rule.low is not None, f"{f.name}: a number without a lower bound"
    flat = MemoryParams().flat()
    assert set(MEMORY_RULES) <= set(flat)  # no rule for a parameter that is gone
    for name, default in flat.items():
        assert isinstance(default, (int, float)) and not isinstance(default, bool), name
        assert memory_rule(name).problem(default) is None, name


def test_mnemo_ask_runs_with_a_bad_memory_parameter_and_warns(mnemo_dirs):
    mnemo_dirs["config"].mkdir(parents=True)
    (mnemo_dirs["config"] / "settings.json").write_text(
        json.dumps({"memory": {"recall_turns": "x"}, "chat": {"max_tokens": 8, "n_ctx": 1024}})
    )
    env = dict(os.environ, MNEMO_DATA_DIR=str(mnemo_dirs["data"]), MNEMO_CONFIG_DIR=str(mnemo_dirs["config"]))
    out = subprocess.run(
        [sys.executable, "-m", "ui.launcher", "ask", "--json", "Hello there!"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert f"mnemo: warning: {RECALL_TURNS_NOTE}\n" in out.stderr
    assert "Traceback" not in out.stderr and "TypeError" not in out.stderr
    reply = json.loads(out.stdout)
    assert reply["status"] == "complete" and reply["text"]
