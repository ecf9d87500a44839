"""The `mnemo` entry point: --version, doctor, --self-test (offscreen), settings round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app import __version__
from app.settings import Paths, Settings, load_settings, save_settings


def _run(args, env_dirs, timeout=180):
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        MNEMO_DATA_DIR=str(env_dirs["data"]),
        MNEMO_CONFIG_DIR=str(env_dirs["config"]),
    )
    return subprocess.run(
        [sys.executable, "-m", "ui.launcher", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_version(mnemo_dirs):
    out = _run(["--version"], mnemo_dirs)
    assert out.returncode == 0
    assert __version__ in out.stdout


def test_self_test_offscreen(mnemo_dirs):
    out = _run(["--self-test", "--timings"], mnemo_dirs)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "self-test: OK" in out.stdout
    assert "first paint:" in out.stdout


def test_doctor_json(mnemo_dirs):
    out = _run(["doctor", "--json"], mnemo_dirs)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["embedding dim"] == 384
    assert report["generated tokens"] >= 1
    assert report["data dir"] == str(mnemo_dirs["data"])
    for key in ("python", "sqlite (apsw)", "sqlite-vec", "onnxruntime", "llama-cpp-python"):
        assert report[key] and report[key] != "not installed"


def test_data_dir_flag_overrides_env(mnemo_dirs, tmp_path):
    portable = tmp_path / "portable"
    out = _run(["--data-dir", str(portable), "doctor", "--json", "--no-models"], mnemo_dirs)
    assert json.loads(out.stdout)["data dir"] == str(portable)


def test_settings_round_trip(tmp_path):
    paths = Paths(tmp_path / "c", tmp_path / "d")
    settings = Settings()
    settings.chat.temperature = 0.2
    settings.chat.backend = "openai"
    settings.memory["stm_capacity"] = 4
    save_settings(paths, settings)
    loaded = load_settings(paths)
    assert loaded == settings


def test_the_settings_and_the_model_agree_on_the_sampling_defaults():
    # each defines them (models must not import app); the benchmark chose them once (README)
    from app.settings import ChatModelSettings
    from models.llama_cpp_backend import LlamaCppConfig
    from models.openai_http import OpenAIConfig

    for config in (LlamaCppConfig(), OpenAIConfig()):
        for name in ("temperature", "top_p", "min_p", "repeat_penalty", "max_tokens", "n_ctx"):
            assert getattr(ChatModelSettings(), name) == getattr(config, name), (type(config).__name__, name)


def test_broken_settings_file_gives_defaults_keeps_the_file_and_says_so(mnemo_dirs):
    paths = Paths(mnemo_dirs["config"], mnemo_dirs["data"])
    paths.config_dir.mkdir(parents=True)
    paths.settings_file.write_text('{"chat": {"temperature": 0.2,')
    notes: list[str] = []
    assert load_settings(paths, notes) == Settings()
    broken = paths.settings_file.with_suffix(".json.broken")
    assert broken.read_text() == '{"chat": {"temperature": 0.2,'  # the user's edits are kept
    assert len(notes) == 1 and str(broken) in notes[0] and "default settings are used" in notes[0]
    paths.settings_file.write_text('{"chat": {"temperature": 0.2,')
    out = _run(["doctor", "--json", "--no-models"], mnemo_dirs)  # the CLI tells the user
    assert out.returncode == 0 and "mnemo: warning:" in out.stderr and "settings.json.broken" in out.stderr


def test_wrongly_typed_settings_keep_their_defaults_and_say_which(tmp_path):
    paths = Paths(tmp_path / "c", tmp_path / "d")
    paths.config_dir.mkdir(parents=True)
    paths.settings_file.write_text(
        json.dumps(
            {
                "chat": {"n_ctx": "lots", "temperature": 0.3, "max_tokens": 256.0, "gguf_path": 5},
                "ui": {"enter_sends": "no"},
            }
        )
    )
    notes: list[str] = []
    s = load_settings(paths, notes)
    assert s.chat.n_ctx == Settings().chat.n_ctx and s.chat.temperature == 0.3
    assert s.chat.max_tokens == 256 and isinstance(s.chat.max_tokens, int)
    assert s.chat.gguf_path == "" and s.ui.enter_sends is True
    assert sorted(n.split(" = ")[0] for n in notes) == [
        "settings: chat.gguf_path",
        "settings: chat.n_ctx",
        "settings: ui.enter_sends",
    ]
    assert 'chat.n_ctx = "lots" is not a number; the default 4096 is used' in notes[1]


def test_a_damaged_memory_database_is_named_left_untouched_and_explained(mnemo_dirs):
    mnemo_dirs["data"].mkdir(parents=True)
    db = mnemo_dirs["data"] / "mnemo.sqlite3"
    junk = b"not a database \xff\xfe" * 500
    db.write_bytes(junk)
    out = _run(["search", "hello"], mnemo_dirs)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert str(db) in out.stderr and "is damaged or is not a Mnemo memory database" in out.stderr
    assert "mnemo memory restore" in out.stderr and "move the file away" in out.stderr
    assert db.read_bytes() == junk


def test_bad_model_path_in_settings_gives_clear_error(mnemo_dirs):
    paths = Paths(mnemo_dirs["config"], mnemo_dirs["data"])
    settings = Settings()
    settings.chat.gguf_path = str(mnemo_dirs["data"] / "nowhere.gguf")
    save_settings(paths, settings)
    out = _run(["doctor", "--json"], mnemo_dirs)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert "nowhere.gguf" in report["chat model error"]


def test_mnemo_bench_knows_every_benchmark_in_tests_bench():
    from pathlib import Path

    from app.commands.bench import BENCHMARKS

    here = Path(__file__).resolve().parents[1] / "bench"
    assert sorted(BENCHMARKS) == sorted(p.stem for p in here.glob("*.py") if p.stem != "__init__")
