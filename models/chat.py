"""The `ChatModel` protocol every chat backend implements, and helpers shared by backends."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from models.errors import ModelError

Message = Mapping[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


@dataclass
class GenerationStats:
    """Figures about the last generation: what the status bar and benchmarks show."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, how many llama.cpp's KV cache already held
    restored_prompt_tokens: int = 0  # of those, how many a saved state loaded from disk had brought
    completion_tokens: int = 0
    time_to_first_token_s: float = 0.0
    total_s: float = 0.0
    stopped: bool = False
    finish_reason: str = ""

    @property
    def tokens_per_s(self) -> float:
        gen = self.total_s - self.time_to_first_token_s
        return self.completion_tokens / gen if gen > 0 and self.completion_tokens > 1 else 0.0


@dataclass
class CancelToken:
    """Set from any thread to stop a generation; backends check it between tokens."""

    _event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@runtime_checkable
class ChatModel(Protocol):
    """Streaming chat with cancellation, token counting and schema-constrained JSON output."""

    model_id: str
    n_ctx: int
    last_stats: GenerationStats

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancel: CancelToken | None = None,
    ) -> Generator[str, None, None]:
        """Yield text chunks of the assistant reply; stop within one token of `cancel`."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under this model's own tokenizer."""
        ...

    def count_messages_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of a whole chat prompt, template included."""
        ...

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        cancel: CancelToken | None = None,
    ) -> Any:
        """Return a parsed JSON value whose decoding was constrained by `schema`."""
        ...

    def close(self) -> None: ...


def parse_json_reply(text: str) -> Any:
    """Parse a model's JSON reply, or raise ModelError quoting the start of what came back."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text[:200].replace("\n", " ")
        raise ModelError(f"model returned invalid JSON ({exc.msg} at {exc.pos}): {snippet!r}") from exc


def collect(chunks: Iterator[str]) -> str:
    return "".join(chunks)
