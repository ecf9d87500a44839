"""Activation memory with the bundled GGUF: a prompt prefix's state saved by one model instance and
loaded by the next (a restart), checked against a cold prompt and llama.cpp's own counters."""

from __future__ import annotations

import os
import shutil

import pytest

from models.chat import CancelToken, GenerationStats
from models.kv_cache_store import KVCacheStore
from models.llama_cpp_backend import LlamaCppChatModel
from models.llama_state import state_key, tokens_evaluated
from models.resolve import default_gguf_path

SYSTEM = {"role": "system", "content": "You are Mnemo, a kind assistant. The user grows tomatoes and beans."}
CHAT = [SYSTEM] + [
    m
    for i in range(3)
    for m in (
        {"role": "user", "content": f"What should I plant in row {i} of the garden this spring?"},
        {"role": "assistant", "content": f"Row {i} would suit beans next to the tomatoes, mulched with straw."},
    )
]
QUESTION = [{"role": "user", "content": "What keeps the soil moist?"}]


def _model(store: KVCacheStore | None = None, **kw) -> LlamaCppChatModel:
    """A fresh instance: an empty KV cache, as after a restart."""
    model = LlamaCppChatModel(**{"n_ctx": 2048, "max_tokens": 16, "seed": 1, "temperature": 0.0, **kw})
    model.use_activation_cache(store)
    return model


def _reply(model: LlamaCppChatModel, messages) -> tuple[str, int]:
    """The greedy reply and how many tokens llama.cpp evaluated for it (prompt and reply)."""
    before = tokens_evaluated(model._llm)
    text = "".join(model.stream(messages, max_tokens=16, temperature=0.0))
    return text, tokens_evaluated(model._llm) - before


def _first_reply(store: KVCacheStore | None, messages, **kw) -> tuple[str, int, GenerationStats]:
    """The first reply of a fresh instance (after a restart): `_reply`, and its stats."""
    model = _model(store, **kw)
    try:
        text, evaluated = _reply(model, messages)
        return text, evaluated, model.last_stats
    finally:
        model.close()


@pytest.fixture(scope="module")
def _saved_once(tmp_path_factory):
    """The state of CHAT (and of its system prompt, the new-chat entry), saved once."""
    folder = tmp_path_factory.mktemp("activation")
    store = KVCacheStore(folder, 1 << 30)
    model = _model(store)
    try:
        n = model.prefill(CHAT, keep=[("new-chat", 1), ("chat:1", len(CHAT))])
    finally:
        model.close()
    assert sorted(e.slot for e in store.entries()) == ["chat:1", "new-chat"]
    return folder, n


@pytest.fixture
def saved(_saved_once, tmp_path):
    """A store of its own (tests damage it) holding `_saved_once`'s states."""
    folder, n = _saved_once
    shutil.copytree(folder, tmp_path / "activation")
    return KVCacheStore(tmp_path / "activation", 1 << 30), n


def test_a_restored_state_gives_the_cold_prompts_greedy_reply_and_skips_its_prefill(saved):
    store, n = saved
    cold, cold_evaluated, cold_stats = _first_reply(None, CHAT + QUESTION)
    prompt = cold_stats.prompt_tokens
    restored, evaluated, stats = _first_reply(store, CHAT + QUESTION)
    assert restored == cold and cold.strip()
    assert stats.restored_prompt_tokens == n == stats.cached_prompt_tokens and n > 100
    # measured, not assumed: llama.cpp evaluated only the question (and the reply) after the restore
    replied = stats.completion_tokens + 4  # tokens of the reply (chunks are about tokens) and the end
    assert cold_evaluated >= prompt
    assert evaluated <= prompt - n + replied
    assert store.stats().hits == 1


def test_a_warm_after_a_restart_loads_the_state_instead_of_processing_it(saved):
    store, n = saved
    model = _model(store)
    try:
        before = tokens_evaluated(model._llm)
        assert model.prefill(CHAT, keep=[("chat:1", len(CHAT))]) == n
        assert tokens_evaluated(model._llm) - before == 0
        assert model._llm.n_tokens == n
        list(model.stream(CHAT + QUESTION, max_tokens=2))
        assert model.last_stats.restored_prompt_tokens == n  # the first reply says it began from disk
        list(model.stream(CHAT + QUESTION, max_tokens=2))
        assert model.last_stats.restored_prompt_tokens == 0  # reported once
    finally:
        model.close()


def test_a_state_saved_under_another_n_ctx_is_never_loaded(saved):
    store, _ = saved
    _, _, stats = _first_reply(store, CHAT + QUESTION, n_ctx=1024)
    assert stats.restored_prompt_tokens == 0 and stats.cached_prompt_tokens == 0
    assert len(store.entries()) == 2  # still valid for the model it was made with: kept


def test_a_state_saved_with_another_model_file_is_never_loaded(saved, tmp_path):
    store, _ = saved
    copy = tmp_path / "other.gguf"
    shutil.copy2(default_gguf_path(), copy)
    _, _, stats = _first_reply(store, CHAT + QUESTION, model_path=str(copy))
    assert stats.restored_prompt_tokens == 0 and stats.cached_prompt_tokens == 0


def test_a_model_file_changed_in_place_has_another_key(chat_model, tmp_path):
    copy = tmp_path / "model.gguf"
    shutil.copy2(chat_model.model_path, copy)
    before = state_key(chat_model._llm, copy, 0)
    info = os.stat(copy)
    with open(copy, "r+b") as f:  # same size, same mtime: only the bytes differ
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 1]))
    os.utime(copy, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert state_key(chat_model._llm, copy, 0) != before
    assert state_key(chat_model._llm, copy, 0) == state_key(chat_model._llm, copy, 0)


def test_a_changed_persona_never_loads_the_old_prefix_and_rebuilds_the_new_chat_entry(saved):
    store, _ = saved
    old = next(e for e in store.entries() if e.slot == "new-chat")
    changed = [{"role": "system", "content": SYSTEM["content"].replace("beans", "peppers")}]
    model = _model(store)
    try:
        _reply(model, changed + QUESTION)
        assert model.last_stats.restored_prompt_tokens == 0 and model.last_stats.cached_prompt_tokens == 0
        n = model.prefill(changed, keep=[("new-chat", 1)])  # the warm of a new chat with the new persona
    finally:
        model.close()
    new = [e for e in store.entries() if e.slot == "new-chat"]
    assert len(new) == 1 and new[0].n_tokens == n and new[0].tokens_digest != old.tokens_digest


@pytest.mark.parametrize("damage", ["truncated", "flipped", "not a state"])
def test_a_damaged_state_file_is_ignored_and_deleted_not_a_crash(saved, damage):
    store, _ = saved
    entry = next(e for e in store.entries() if e.slot == "chat:1")
    if damage == "truncated":
        with open(entry.path, "r+b") as f:
            f.truncate(entry.size // 2)
    elif damage == "flipped":
        with open(entry.path, "r+b") as f:
            f.seek(entry.payload_offset + entry.payload_len // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    else:  # whole and checksummed, but not llama.cpp's: llama.cpp refuses it
        store.put(entry.key, "chat:1", _stored_tokens(entry), os.urandom(entry.payload_len))
    text, _, stats = _first_reply(store, CHAT + QUESTION)
    assert text.strip()
    assert stats.restored_prompt_tokens < entry.n_tokens  # at most the new-chat entry helped
    assert not any(e.slot == "chat:1" for e in store.entries())


def _stored_tokens(entry) -> list[int]:
    """The token ids stored in `entry` (what a state of CHAT was saved for)."""
    with open(entry.path, "rb") as f:
        f.seek(entry.payload_offset - 4 * entry.n_tokens)
        raw = f.read(4 * entry.n_tokens)
    return [int.from_bytes(raw[i : i + 4], "little", signed=True) for i in range(0, len(raw), 4)]


class _CancelAfter(CancelToken):
    """Set once `n` chunks were evaluated (a chat turn arriving in the middle of a warm)."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.checks = n, 0

    @property
    def cancelled(self) -> bool:
        self.checks += 1
        return self.checks > self.n


def test_a_warm_a_chat_turn_stops_saves_nothing_and_the_next_warm_saves_it(tmp_path):
    store = KVCacheStore(tmp_path / "activation", 1 << 30)
    model = _model(store)
    try:
        keep = [("chat:1", len(CHAT))]
        stopped = model.prefill(CHAT, chunk_tokens=32, cancel=_CancelAfter(2), keep=keep)
        assert 0 < stopped < len(model.tokenize_prompt(CHAT)) and store.entries() == []
        n = model.prefill(CHAT, keep=keep)
    finally:
        model.close()
    assert [(e.slot, e.n_tokens) for e in store.entries()] == [("chat:1", n)]
