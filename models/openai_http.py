"""`OpenAIChatModel`: any OpenAI-compatible chat server (llama-server, Ollama, vLLM, LM Studio).

Uses only the standard library (urllib) so the app has no HTTP dependency. Replies stream
over server-sent events; `cancel` closes the connection, which stops the server too.

Sampling: besides OpenAI's `temperature` and `top_p`, the request carries llama.cpp's `min_p`
and `repeat_penalty` (llama-server, llama-cpp-python's server and LM Studio read them; Ollama
and vLLM ignore what they do not know). A server that rejects unknown fields (OpenAI's own API
answers HTTP 400 "Unrecognized request argument") is asked again without them, and this model
object stops sending them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from models.chat import CancelToken, GenerationStats, Message, parse_json_reply
from models.errors import ModelError


@dataclass
class OpenAIConfig:
    base_url: str = "http://127.0.0.1:8080/v1"
    model: str = ""
    api_key: str = ""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0  # longest wait for the next streamed chunk
    n_ctx: int = 4096
    temperature: float = 0.5
    top_p: float = 0.95
    min_p: float = 0.1  # llama.cpp's samplers; left out for servers that reject them
    repeat_penalty: float = 1.1
    max_tokens: int = 512


# the request fields that are not OpenAI's own (see the module docstring)
LLAMA_SAMPLING_FIELDS = ("min_p", "repeat_penalty")


class OpenAIChatModel:
    def __init__(self, config: OpenAIConfig | None = None, **overrides: Any):
        config = config or OpenAIConfig()
        for key, value in overrides.items():
            setattr(config, key, value)
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self.model_id = config.model or self.base_url
        self.n_ctx = config.n_ctx
        self.last_stats = GenerationStats()
        self.send_llama_sampling = True  # False once the server rejected min_p / repeat_penalty

    # -- HTTP ---------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _open(self, path: str, payload: dict[str, Any] | None, timeout: float):
        url = f"{self.base_url}{path}"
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        request = urllib.request.Request(url, data=data, headers=self._headers(), method="POST" if data else "GET")
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            body = exc.read()[:500].decode("utf-8", "replace")
            raise ModelError(f"{url}: server answered HTTP {exc.code}: {body}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ModelError(f"{url}: cannot reach the server ({reason})") from exc

    def list_models(self) -> list[str]:
        with self._open("/models", None, self.config.connect_timeout_s) as resp:
            data = json.load(resp)
        return [m.get("id", "") for m in data.get("data", [])]

    # -- tokens -------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Ask the server's tokenizer (llama.cpp servers have one); else estimate ~4 chars/token."""
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        for url, payload in (
            (f"{root}/extras/tokenize", {"input": text, "model": self.config.model or None}),
            (f"{root}/tokenize", {"content": text}),
        ):
            try:
                req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=self._headers())
                with urllib.request.urlopen(req, timeout=self.config.connect_timeout_s) as resp:
                    data = json.load(resp)
                tokens = data.get("tokens")
                if isinstance(tokens, list):
                    return len(tokens)
            except (urllib.error.URLError, OSError, ValueError):
                continue
        return max(1, (len(text.encode("utf-8")) + 3) // 4)

    def count_messages_tokens(self, messages: Sequence[Message]) -> int:
        # Each message costs its text plus a few template tokens.
        return sum(self.count_tokens(m["content"]) + 4 for m in messages) + 2

    # -- generation ---------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancel: CancelToken | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Generator[str, None, None]:
        cancel = cancel or CancelToken()
        payload = self._payload(messages, max_tokens, temperature, response_format)
        stats = GenerationStats()
        self.last_stats = stats
        start = time.perf_counter()
        resp = self._open_stream(payload)
        try:
            self._set_read_timeout(resp)
            for raw in resp:
                if cancel.cancelled:
                    stats.stopped = True
                    break
                data = _sse_data(raw)
                if data == "[DONE]":
                    break
                text = self._delta_text(data, stats) if data is not None else ""
                if not text:
                    continue
                if stats.completion_tokens == 0:
                    stats.time_to_first_token_s = time.perf_counter() - start
                stats.completion_tokens += 1
                yield text
                if cancel.cancelled:
                    stats.stopped = True
                    break
        except TimeoutError as exc:
            raise ModelError(
                f"{self.base_url}: no data from the server for {self.config.read_timeout_s:.0f} s"
            ) from exc
        finally:
            resp.close()
            stats.total_s = time.perf_counter() - start
            if stats.stopped:
                stats.finish_reason = "stopped"

    def _payload(
        self,
        messages: Sequence[Message],
        max_tokens: int | None,
        temperature: float | None,
        response_format: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The body of a streamed /chat/completions request."""
        payload: dict[str, Any] = {
            "model": self.config.model or "default",
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens or self.config.max_tokens,
            "temperature": self.config.temperature if temperature is None else temperature,
            "top_p": self.config.top_p,
            "stream": True,
        }
        if self.send_llama_sampling:
            payload["min_p"] = self.config.min_p
            # a JSON reply repeats braces and quotes by design (as in LlamaCppChatModel)
            payload["repeat_penalty"] = 1.0 if response_format is not None else self.config.repeat_penalty
        if response_format is not None:
            payload["response_format"] = response_format
        return payload

    def _open_stream(self, payload: dict[str, Any]) -> Any:
        """The streamed response; a server that refuses llama.cpp's sampling fields is asked again without
        them (and never sent them after)."""
        try:
            return self._open("/chat/completions", payload, self.config.connect_timeout_s)
        except ModelError as exc:
            if not (self.send_llama_sampling and _rejects_llama_sampling(exc)):
                raise
            self.send_llama_sampling = False
            for key in LLAMA_SAMPLING_FIELDS:
                payload.pop(key, None)
            return self._open("/chat/completions", payload, self.config.connect_timeout_s)

    def _set_read_timeout(self, resp: Any) -> None:
        """Wait at most `read_timeout_s` for each piece of the stream (the connect timeout was shorter)."""
        if hasattr(resp, "fp") and getattr(resp.fp, "raw", None) is not None:
            try:
                resp.fp.raw._sock.settimeout(self.config.read_timeout_s)
            except AttributeError:
                pass

    def _delta_text(self, data: str, stats: GenerationStats) -> str:
        """The text one streamed event adds ("" for none, or unreadable JSON), noting its finish reason in
        `stats`; ModelError for an event that reports an error."""
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            return ""
        if "error" in event:
            raise ModelError(f"{self.base_url}: server error: {event['error']}")
        choices = event.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            stats.finish_reason = choice["finish_reason"]
        return (choice.get("delta") or {}).get("content") or ""

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        cancel: CancelToken | None = None,
    ) -> Any:
        # `json_object` + `schema` is what llama.cpp-based servers understand; OpenAI's own
        # `json_schema` form is tried when the server rejects the first.
        formats = (
            {"type": "json_object", "schema": schema},
            {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}},
        )
        last_error: Exception | None = None
        for fmt in formats:
            try:
                text = "".join(
                    self.stream(messages, max_tokens=max_tokens, temperature=0.0, cancel=cancel, response_format=fmt)
                )
                return parse_json_reply(text)
            except ModelError as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    def close(self) -> None:
        pass


def _sse_data(raw: bytes) -> str | None:
    """The data of one server-sent-events line ("data: {...}"); None for any other line."""
    line = raw.decode("utf-8", "replace").strip()
    return line[5:].strip() if line.startswith("data:") else None


def _rejects_llama_sampling(exc: ModelError) -> bool:
    """An HTTP 400/422 whose message names one of llama.cpp's sampling fields: the server does not
    know them (OpenAI: 'Unrecognized request argument supplied: min_p')."""
    text = str(exc)
    return any(f"HTTP {code}" in text for code in (400, 422)) and any(f in text for f in LLAMA_SAMPLING_FIELDS)
