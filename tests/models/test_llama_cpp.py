"""The bundled SmolLM2 GGUF through llama.cpp: streaming, cancellation, JSON schema, bad files."""

from __future__ import annotations

import threading
import time

import jsonschema
import pytest

from models.chat import CancelToken, ChatModel
from models.errors import ModelFileError
from models.llama_cpp_backend import LlamaCppChatModel


def test_is_a_chat_model(chat_model):
    assert isinstance(chat_model, ChatModel)
    assert chat_model.n_ctx == 2048


def test_streams_tokens(chat_model):
    chunks = list(chat_model.stream([{"role": "user", "content": "Tell me about cats."}], max_tokens=16))
    assert len(chunks) >= 5
    assert all(isinstance(c, str) for c in chunks)
    assert chat_model.last_stats.completion_tokens >= 5
    assert chat_model.last_stats.time_to_first_token_s > 0


def test_count_tokens_uses_model_tokenizer(chat_model):
    assert chat_model.count_tokens("hello") >= 1
    assert chat_model.count_tokens("hello " * 100) > chat_model.count_tokens("hello " * 10)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    # the template adds role markers around the text
    assert chat_model.count_messages_tokens(msgs) > chat_model.count_tokens("Be brief.Hi")


def test_cancel_from_another_thread_within_200ms(chat_model):
    cancel = CancelToken()
    chunks: list[str] = []
    stopped_at: list[float] = []

    def consume():
        for chunk in chat_model.stream(
            [{"role": "user", "content": "Write a very long story about a dragon."}],
            max_tokens=1000,
            cancel=cancel,
        ):
            chunks.append(chunk)
        stopped_at.append(time.perf_counter())

    worker = threading.Thread(target=consume)
    worker.start()
    while len(chunks) < 3:
        time.sleep(0.005)
    cancelled_at = time.perf_counter()
    cancel.cancel()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert stopped_at[0] - cancelled_at < 0.2
    assert chat_model.last_stats.stopped
    assert len(chunks) < 1000


PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "hobbies": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age", "hobbies"],
}

PROMPTS = [
    "Describe a person who likes hiking.",
    "Invent a character for a novel.",
    "Who is your best friend?",
    "Make up a chess player.",
    "Tell me about a chef in Paris.",
    "Describe a retired teacher.",
    "A student who loves math.",
    "Someone who collects stamps.",
    "A musician from Brazil.",
    "Describe yourself.",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_json_schema_output_validates(chat_model, prompt):
    value = chat_model.complete_json(
        [{"role": "system", "content": "Answer with JSON only."}, {"role": "user", "content": prompt}],
        PERSON_SCHEMA,
        max_tokens=128,
    )
    jsonschema.validate(value, PERSON_SCHEMA)


def test_missing_gguf_names_file(tmp_path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(ModelFileError) as info:
        LlamaCppChatModel(model_path=str(missing))
    assert str(missing) in str(info.value)
    assert "not found" in str(info.value)


def test_not_a_gguf_names_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 this is a zip, not a model")
    with pytest.raises(ModelFileError, match="not a GGUF") as info:
        LlamaCppChatModel(model_path=str(bad))
    assert str(bad) in str(info.value)


def test_corrupt_gguf_names_file(tmp_path):
    from models.resolve import default_gguf_path

    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(default_gguf_path().read_bytes()[:100_000])
    with pytest.raises(ModelFileError, match="failed to load") as info:
        LlamaCppChatModel(model_path=str(bad))
    assert str(bad) in str(info.value)


def _long_chat(n: int = 5) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(n):
        msgs += [
            {"role": "user", "content": f"Question {i}: how do gardens handle drought in region {i}?"},
            {"role": "assistant", "content": "Mulch, deep watering, native plants and shade. " * 4},
        ]
    return msgs


class _CancelAfter(CancelToken):
    """Reads as cancelled from its `n`-th check on (prefill checks once per chunk)."""

    def __init__(self, n: int):
        super().__init__()
        self.checks, self.n = 0, n

    @property
    def cancelled(self) -> bool:
        self.checks += 1
        return self.checks > self.n


def test_prefill_caches_the_prompt_beginning_and_never_changes_the_reply(chat_model):
    chat = _long_chat()
    question = [{"role": "user", "content": "What keeps the soil moist?"}]
    chat_model._llm.reset()  # nothing cached: a fresh start
    cold = "".join(chat_model.stream(chat + question, max_tokens=12, temperature=0.0))
    assert chat_model.last_stats.cached_prompt_tokens == 0
    chat_model._llm.reset()
    n = chat_model.prefill(chat, chunk_tokens=32)
    assert n > 300 and chat_model._llm.n_tokens == n
    warm = "".join(chat_model.stream(chat + question, max_tokens=12, temperature=0.0))
    stats = chat_model.last_stats
    assert stats.cached_prompt_tokens == n and stats.prompt_tokens > n  # only the question was left
    assert warm == cold
    assert chat_model.prefill(chat) == n  # already cached: nothing to do


def test_prefill_stops_between_chunks_and_what_it_did_still_counts(chat_model):
    chat = _long_chat()
    chat_model._llm.reset()
    assert chat_model.prefill(chat, chunk_tokens=32, cancel=_CancelAfter(3)) == 96  # three chunks
    assert chat_model.prefill(chat, chunk_tokens=32, cancel=_CancelAfter(0)) == 96  # nothing more
    full = chat_model.prefill(chat, chunk_tokens=32)
    assert full > 96
    list(chat_model.stream(chat + [{"role": "user", "content": "Hi"}], max_tokens=2))
    assert chat_model.last_stats.cached_prompt_tokens == full
