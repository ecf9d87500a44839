"""`LlamaCppChatModel`: a GGUF file run in-process by llama-cpp-python.

llama.cpp is not thread-safe: one model must be driven by one thread at a time. The
app's scheduler owns that thread; this class also guards calls with a lock so a
misuse serialises instead of corrupting state. Cancellation only sets a flag that the
streaming loop checks after every token, so it is safe from any thread.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from models.chat import CancelToken, GenerationStats, Message, parse_json_reply
from models.errors import ModelError, ModelFileError
from models.resolve import check_gguf, default_gguf_path


@dataclass
class LlamaCppConfig:
    model_path: str | None = None  # None: the bundled default
    n_ctx: int = 4096
    n_threads: int = 0  # 0: cores - 1 for generation, all cores for prompt processing
    n_gpu_layers: int = 0
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    seed: int = -1


class LlamaCppChatModel:
    def __init__(self, config: LlamaCppConfig | None = None, **overrides: Any):
        config = config or LlamaCppConfig()
        for key, value in overrides.items():
            setattr(config, key, value)
        self.config = config
        path = Path(config.model_path).expanduser() if config.model_path else default_gguf_path()
        self.model_path = check_gguf(path)
        self.model_id = self.model_path.name
        self.last_stats = GenerationStats()
        self._lock = threading.RLock()
        self._cancel_current: CancelToken | None = None

        from llama_cpp import Llama

        cores = os.cpu_count() or 2
        # Generation leaves one core free so the UI thread and memory work are not starved (on 2 cores,
        # 2 generating threads made the UI stall >120 ms); prompt processing, the long wait before the
        # first token, uses every core.
        threads = config.n_threads or max(1, cores - 1)
        threads_batch = config.n_threads or cores
        try:
            self._llm = Llama(
                model_path=str(self.model_path),
                n_ctx=config.n_ctx,
                n_threads=threads,
                n_threads_batch=threads_batch,
                n_gpu_layers=config.n_gpu_layers,
                seed=config.seed if config.seed >= 0 else 0xFFFFFFFF,
                verbose=False,
            )
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError on bad files
            raise ModelFileError(self.model_path, f"llama.cpp failed to load this model: {exc}") from exc
        self.n_ctx = int(self._llm.n_ctx())
        self._formatter = self._make_formatter()

    # -- tokens -----------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=True))

    def count_messages_tokens(self, messages: Sequence[Message]) -> int:
        return self.count_tokens(self.render_prompt(messages))

    def render_prompt(self, messages: Sequence[Message]) -> str:
        """The prompt text the GGUF's own chat template makes of `messages` (for token counting)."""
        if self._formatter is not None:
            try:
                return self._formatter(messages=[dict(m) for m in messages]).prompt
            except Exception:  # a template that rejects these roles: count the plain text instead
                pass
        return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"

    def _make_formatter(self):
        from llama_cpp import llama_chat_format

        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            return None
        model = self._llm._model
        eos, bos = self._llm.token_eos(), self._llm.token_bos()
        return llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos) if eos != -1 else "",
            bos_token=model.token_get_text(bos) if bos != -1 else "",
        )

    # -- generation -------------------------------------------------------------
    def cancel(self) -> None:
        token = self._cancel_current
        if token is not None:
            token.cancel()

    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancel: CancelToken | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Iterator[str]:
        cancel = cancel or CancelToken()
        with self._lock:
            self._cancel_current = cancel
            stats = GenerationStats()
            self.last_stats = stats
            start = time.perf_counter()
            kwargs: dict[str, Any] = dict(
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens or self.config.max_tokens,
                temperature=self.config.temperature if temperature is None else temperature,
                top_p=self.config.top_p,
                stream=True,
            )
            if response_format is not None:
                kwargs["response_format"] = response_format
            try:
                gen = self._llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. prompt longer than the context
                raise ModelError(str(exc)) from exc
            try:
                for chunk in gen:
                    if cancel.cancelled:
                        stats.stopped = True
                        break
                    choice = chunk["choices"][0]
                    text = choice.get("delta", {}).get("content") or ""
                    if choice.get("finish_reason"):
                        stats.finish_reason = choice["finish_reason"]
                    if not text:
                        continue
                    if stats.completion_tokens == 0:
                        stats.time_to_first_token_s = time.perf_counter() - start
                    stats.completion_tokens += 1
                    yield text
                    if cancel.cancelled:
                        stats.stopped = True
                        break
            finally:
                gen.close()
                stats.total_s = time.perf_counter() - start
                if stats.stopped:
                    stats.finish_reason = "stopped"
                self._cancel_current = None

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        cancel: CancelToken | None = None,
    ) -> Any:
        text = "".join(
            self.stream(
                messages,
                max_tokens=max_tokens,
                temperature=0.0,
                cancel=cancel,
                response_format={"type": "json_object", "schema": schema},
            )
        )
        return parse_json_reply(text)

    def close(self) -> None:
        with self._lock:
            llm = getattr(self, "_llm", None)
            if llm is not None:
                llm.close()
                self._llm = None
