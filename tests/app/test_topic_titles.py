"""Which chat model writes topic titles (settings.topic_titles, app.topic_titles), and the scheduler running the
"title_segment" job on the LLM thread when chat is idle (decision 0026)."""

from __future__ import annotations

import json
import threading
import types

import pytest

from app.runtime.scheduler import Scheduler
from app.settings import Paths, load_settings
from app.topic_titles import model_writes_titles, parameter_count
from memory_core import MemoryParams, MemoryStore
from tests.memory_core.conftest import mix
from tests.memory_core.test_titles import POTTERY


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", 135e6),
        ("Llama-3.2-3B-Instruct-Q4_K_M.gguf", 3e9),
        ("qwen2.5-7b-instruct-q4_k_m.gguf", 7e9),
        ("llama3.2:3b", 3e9),
        ("Qwen2.5-0.5B-Instruct", 0.5e9),
        ("8x7B", 56e9),
        ("Phi-3-mini-4k-instruct-q4.gguf", None),  # "4k" is its context, not its size
        ("gpt-4o-mini", None),
    ],
)
def test_the_parameter_count_a_name_states(name, count):
    assert parameter_count(name) == count


def test_the_bundled_model_is_not_capable_unless_forced(chat_model):
    """Its GGUF header says 135M (general.size_label)."""
    assert not model_writes_titles("auto", chat_model)
    assert model_writes_titles("on", chat_model)
    assert not model_writes_titles("off", chat_model)
    assert not model_writes_titles("on", None)


def test_a_server_or_file_that_says_no_size(tmp_path):
    served = types.SimpleNamespace(model_id="gpt-4o-mini")  # an OpenAI-compatible server's model
    assert model_writes_titles("auto", served)
    assert not model_writes_titles("auto", types.SimpleNamespace(model_id="qwen2.5:0.5b"))
    small = tmp_path / "mystery.gguf"  # no header, no size in its name: judged by its size on disk
    small.write_bytes(b"GGUF" + bytes(1020))
    assert not model_writes_titles("auto", types.SimpleNamespace(model_path=small, model_id=small.name))
    gone = types.SimpleNamespace(model_path=tmp_path / "gone.gguf", model_id="gone.gguf")
    assert not model_writes_titles("auto", gone)  # unreadable: never raises


def test_the_setting_is_read_from_settings_json(tmp_path):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    paths.config_dir.mkdir()
    assert load_settings(paths).topic_titles == "auto"
    paths.settings_file.write_text(json.dumps({"topic_titles": "on"}))
    assert load_settings(paths).topic_titles == "on"
    paths.settings_file.write_text(json.dumps({"topic_titles": "always"}))
    notes: list[str] = []
    assert load_settings(paths, notes).topic_titles == "auto"
    assert notes == ['settings: topic_titles = "always" is not one of "auto", "on", "off"; the default "auto" is used']


@pytest.mark.parametrize("writes", [True, False])
def test_the_scheduler_runs_title_jobs_on_the_llm_thread_when_idle(tmp_path, embedder, chat_model, writes):
    db = tmp_path / "titles.sqlite3"

    def open_store(llm=None):
        return MemoryStore.open(
            db,
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(stm_capacity=0, tau=1e9),
            llm=llm,
        )

    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def on_event(e):
        seen.append((e.kind, threading.current_thread().name))
        if e.kind in ("segment_titled", "title_refused"):
            done.set()

    s = Scheduler(
        open_store=open_store,
        get_model=lambda: chat_model,
        on_event=on_event,
        idle_s=0.2,
        poll_s=0.1,
        model_titles=lambda model: writes and model is chat_model,
    )
    s.start()
    try:
        with open_store() as store:
            cid = store.conversations.create_conversation()
            for i, (u, a) in enumerate(POTTERY[:3]):
                store.intake.add_page(cid, u, a, embedding=mix(384, 0, 10 + i, 0.9))
            assert [j.kind for j in store.jobs.list_jobs("pending")] == ["title_segment"]
        s.notify_jobs()
        assert s.wait_idle(timeout=300, include_llm_jobs=True)
        if writes:
            assert done.wait(60)
            assert [t for k, t in seen if k in ("segment_titled", "title_refused")] == ["mnemo-llm"]
        else:
            assert not done.is_set()  # no capable model: the keywords' title stays, nothing asked
        with open_store() as store:
            (seg,) = store.segments.list_segments(limit=10)
            assert (seg.title_by == chat_model.model_id) == any(k == "segment_titled" for k, _ in seen)
    finally:
        s.stop()
