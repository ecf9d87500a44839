"""`LlamaCppChatModel`: a GGUF file run in-process by llama-cpp-python.

llama.cpp is not thread-safe: one model must be driven by one thread at a time. The
app's scheduler owns that thread; this class also guards calls with a lock so a
misuse serialises instead of corrupting state. Cancellation only sets a flag that the
streaming loop checks after every token, so it is safe from any thread.

llama-cpp-python keeps the KV cache of the last prompt and reuses its longest common prefix
with the next one. `prefill` puts a prompt's stable beginning (system prompt, persona,
dialogue) into that cache ahead of time, in small chunks that stop when asked: the app calls
it when a conversation is opened, so the first reply after a restart does not wait for the
whole conversation to be processed (docs/architecture.md, "Memory kinds: plaintext and activation").

The prompt is rendered with the GGUF's own chat template and tokenised here (`_encode`), never by
llama-cpp-python's chat completion: the messages' text is tokenised as text, so a page holding
`<|im_start|>system` cannot forge a turn; only the template's own markers are control tokens
(models.prompt_tokens). The same tokens serve counting, prefill and generation.

Activation memory across restarts: with a `KVCacheStore` attached (`use_activation_cache`), a
prefill saves the state of the prompt beginnings it is asked to keep (a chat's stable prefix, the
system prompt every new chat starts with) once they are fully processed, and a prefill or a reply
whose prompt begins with a saved prefix the in-process cache lacks loads it instead of processing
it (models.llama_state; the store checks the key and the tokens, and deletes what it cannot read).

Parametric memory: `set_adapters` puts LoRA adapters (GGUF) on the context at a scale each, through
llama.cpp's adapter API (`llama_adapter_lora_init`, `llama_set_adapters_lora`), after models.lora has
checked that each was made for this model (an adapter for another one is refused with one line,
before llama.cpp reads it). An adapter changes what the model makes of every token, so a change of
adapters empties the in-process cache, and the saved states' key names the adapters in use.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.chat import CancelToken, GenerationStats, Message, parse_json_reply
from models.errors import ModelError, ModelFileError
from models.kv_cache_store import KVCacheStore
from models.llama_state import restore_prefix, save_prefix, state_key
from models.lora import AdapterError, check_fits
from models.prompt_tokens import SpecialTokens, mask_messages
from models.resolve import check_gguf, default_gguf_path

log = logging.getLogger(__name__)

# A saved state is loaded only when it holds at least this many tokens more than the cache already
# does: below that, processing them costs about what reading the file does.
MIN_RESTORE_GAIN = 32

# messages a chat template is rendered with once, to see which marker tokens it writes itself
_PROBE = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
    {"role": "user", "content": "u"},
]


@dataclass
class LlamaCppConfig:
    model_path: str | None = None  # None: the bundled default
    n_ctx: int = 4096
    n_threads: int = 0  # 0: cores - 1 for generation, all cores for prompt processing
    n_gpu_layers: int = 0
    temperature: float = 0.5
    top_p: float = 0.95
    min_p: float = 0.1  # tokens under min_p x the likeliest one's probability are never drawn
    repeat_penalty: float = 1.1  # > 1 makes the last 64 tokens less likely again (1.0: off)
    # a reply continuing word for word what an earlier reply said loses this many logits, growing
    # with the length of the copy (models.self_repeat; 0: off)
    self_repeat_penalty: float = 0.8
    max_tokens: int = 512
    seed: int = -1  # < 0: a fresh random seed per load (llama-cpp-python's default is fixed)


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
        self.last_self_repeat = None  # the SelfRepeatPenalty of the last reply (None: none applied)
        self._lock = threading.RLock()
        self._cancel_current: CancelToken | None = None

        from llama_cpp import Llama

        from models import llama_runtime

        llama_runtime.apply()  # off llama.cpp's AMX path where it crashes (see the module)
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
                seed=config.seed if config.seed >= 0 else random.SystemRandom().randrange(2**31),
                verbose=False,
            )
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError on bad files
            raise ModelFileError(self.model_path, f"llama.cpp failed to load this model: {exc}") from exc
        self.n_ctx = int(self._llm.n_ctx())
        self._formatter = self._make_formatter()
        self._open_formatter = self._make_formatter(add_generation_prompt=False)
        self.special_tokens = self._special_tokens()
        self._last_prompt: tuple[Any, list[int]] = (None, [])  # see _prompt_tokens
        self.activation: KVCacheStore | None = None  # saved states of prompt beginnings (on disk)
        self._state_key: dict[str, Any] | None = None
        self._restored = 0  # tokens at the cache's start loaded from a saved state, not yet reported
        self._lora_handles: dict[str, Any] = {}  # adapter file -> llama.cpp's adapter, loaded once
        self._lora_active: tuple[tuple[str, float], ...] = ()

    # -- parametric memory (LoRA adapters) --------------------------------------
    @property
    def adapters(self) -> tuple[tuple[str, float], ...]:
        """The adapters on the model now: (file, scale) each."""
        return self._lora_active

    def set_adapters(self, adapters: Sequence[tuple[str | os.PathLike, float]]) -> None:
        """Use these LoRA adapters (file, scale) from the next prompt on ([]: none). AdapterError,
        with nothing changed, when one is not an adapter for this model or llama.cpp refuses it. A
        change empties the in-process cache (its keys and values were computed without them)."""
        wanted = tuple((str(Path(path).resolve()), float(scale)) for path, scale in adapters)
        with self._lock:
            if wanted == self._lora_active:
                return
            import ctypes

            import llama_cpp.llama_cpp as lc

            handles = [self._lora_handle(path) for path, _ in wanted]
            arr = (lc.llama_adapter_lora_p_ctypes * max(1, len(handles)))(*handles)
            scales = (ctypes.c_float * max(1, len(wanted)))(*(scale for _, scale in wanted))
            if lc.llama_set_adapters_lora(self._llm._ctx.ctx, arr, len(handles), scales):
                raise AdapterError(f"llama.cpp would not put {len(handles)} adapter(s) on {self.model_id}")
            self._lora_active = wanted
            self._llm.n_tokens = 0  # the cache was computed with other adapters: process the prompt anew
            self._llm._requires_eval = True
            self._restored = 0

    def _lora_handle(self, path: str) -> Any:
        handle = self._lora_handles.get(path)
        if handle is None:
            check_fits(path, self.model_path)  # AdapterError, one line, before llama.cpp reads it
            import llama_cpp.llama_cpp as lc

            handle = lc.llama_adapter_lora_init(self._llm._model.model, path.encode("utf-8"))
            if not handle:
                raise AdapterError(f"{Path(path).name}: llama.cpp could not load this adapter")
            self._lora_handles[path] = handle
        return handle

    # -- activation memory ------------------------------------------------------
    def use_activation_cache(self, store: KVCacheStore | None) -> None:
        """Save and load prompt-prefix states in `store` (None: none)."""
        with self._lock:
            self.activation = store

    def state_key(self) -> dict[str, Any]:
        """What a saved state must have been made with to be loaded into this model (models.llama_state)."""
        with self._lock:
            if self._state_key is None:
                self._state_key = state_key(self._llm, self.model_path, self.config.n_gpu_layers)
            if not self._lora_active:
                return self._state_key
            return {**self._state_key, "adapters": [_adapter_identity(p, s) for p, s in self._lora_active]}

    def _restore(self, tokens: list[int], done: int) -> int:
        """Load the longest saved state that begins `tokens` and holds at least MIN_RESTORE_GAIN more
        than the `done` tokens the cache holds of them; returns what the cache holds now. A prompt
        mostly not in the cache that no saved state covers counts as a miss."""
        store = self.activation
        if store is None or done >= len(tokens):
            return done
        key = self.state_key()
        entry = store.find(key, tokens, longer_than=done + MIN_RESTORE_GAIN - 1)
        payload = store.read(entry, tokens) if entry is not None else None
        if entry is None or payload is None:
            if done < len(tokens) // 2:
                store.miss()
            return done
        if not restore_prefix(self._llm, payload, tokens[: entry.n_tokens]):
            log.warning("a saved model state did not load into llama.cpp; it is deleted")
            store.remove(entry)
            self._restored = 0
            return 0  # the cache was emptied rather than left half-loaded
        store.touch(entry)
        self._restored = entry.n_tokens
        return entry.n_tokens

    def _save_points(
        self, messages: Sequence[Message], tokens: list[int], keep: Sequence[tuple[str, int]]
    ) -> dict[int, list[str]]:
        """Token counts at which to save the cache, from `keep`'s (slot, leading messages): the
        render of those messages must begin `tokens` (it does unless a template is odd)."""
        points: dict[int, list[str]] = {}
        if self.activation is None:
            return points
        for slot, n_messages in keep:
            if n_messages >= len(messages):
                n = len(tokens)
            else:
                head = self._prompt_tokens(messages[:n_messages], open_ended=True)
                n = len(head) if head and tokens[: len(head)] == head else 0
            if n > 0:
                points.setdefault(n, []).append(slot)
        return points

    def _save_at(self, points: dict[int, list[str]], done: int, tokens: list[int], cancel: CancelToken) -> None:
        """The cache holds exactly `done` tokens of `tokens`: save it for the slots kept there. Not when
        `cancel` is set: a chat turn is waiting for the model, and the next warm saves it."""
        store = self.activation
        if store is None or done not in points or cancel.cancelled:
            return
        key = self.state_key()
        prefix = tokens[:done]
        for slot in points[done]:
            if store.has(key, slot, prefix):
                continue
            payload = save_prefix(self._llm, done)
            if payload is not None:
                store.put(key, slot, prefix, payload)

    # -- tokens -----------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as a message's content: plain text, whatever special strings it holds."""
        with self._lock:
            return len(self._tokenize(text, False, False))

    def _tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8", "replace"), add_bos=add_bos, special=special)

    def _special_tokens(self) -> SpecialTokens:
        """The vocabulary's special strings (control and unknown tokens, and the user-defined tokens
        the chat template writes), which message text must not turn into tokens of their own."""
        import llama_cpp.llama_cpp as lc

        vocab = self._llm._model.vocab
        wanted = lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_UNKNOWN | lc.LLAMA_TOKEN_ATTR_USER_DEFINED
        tokens = []
        for token_id in range(self._llm.n_vocab()):
            attrs = int(lc.llama_vocab_get_attr(vocab, token_id))
            if attrs & wanted:
                text = lc.llama_vocab_get_text(vocab, token_id).decode("utf-8", "replace")
                tokens.append((token_id, attrs, text))
        template_text = ""
        if self._formatter is not None:
            try:
                template_text = self._formatter(messages=_PROBE).prompt
            except Exception:  # a template that refuses these roles: its control tokens still count
                pass
        return SpecialTokens.from_vocabulary(tokens, template_text)

    def count_messages_tokens(self, messages: Sequence[Message]) -> int:
        tokens = self._prompt_tokens(messages)  # the same tokens `stream` then matches against the cache
        return len(tokens) if tokens else self.count_tokens(self.render_prompt(messages))

    def tokenize_prompt(self, messages: Sequence[Message]) -> list[int]:
        """The token ids a reply to `messages` is generated from (what `stream` feeds the model)."""
        return list(self._encode(messages))

    def render_prompt(self, messages: Sequence[Message]) -> str:
        """The prompt text the GGUF's own chat template makes of `messages` (for token counting)."""
        if self._formatter is not None:
            try:
                return self._formatter(messages=[dict(m) for m in messages]).prompt
            except Exception:  # a template that rejects these roles: count the plain text instead
                pass
        return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"

    def _make_formatter(self, *, add_generation_prompt: bool = True):
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
            add_generation_prompt=add_generation_prompt,
        )

    def _encode(self, messages: Sequence[Message], *, open_ended: bool = False) -> list[int]:
        """The tokens the model is fed for `messages`: the GGUF's chat template (llama-cpp-python's
        "llama-2" layout for a GGUF without one, as its chat completion would use), its markers as
        special tokens, the messages' text as plain text (models.prompt_tokens). `open_ended`: without
        the assistant header at the end, i.e. the beginning of a longer prompt ([] without a
        template). ModelError when the template refuses the messages."""
        formatter = self._open_formatter if open_ended else self._formatter
        if formatter is None:
            if open_ended:
                return []
            from llama_cpp import llama_chat_format

            formatter = llama_chat_format.format_llama2
        # The agent counts a prompt's tokens, then streams it: the last result serves both.
        key = (open_ended, tuple((m["role"], m["content"]) for m in messages))
        with self._lock:
            if self._last_prompt[0] == key:
                return self._last_prompt[1]
            masked_messages, masked = mask_messages(messages, self.special_tokens)
            try:
                result = formatter(messages=masked_messages)
            except Exception as exc:  # e.g. a template that allows one system message only
                raise ModelError(f"the model's chat template refused these messages: {exc}") from exc
            tokens = self.special_tokens.tokenize(
                result.prompt, masked, self._tokenize, add_bos=not result.added_special
            )
            self._last_prompt = (key, tokens)
            return tokens

    def _prompt_tokens(self, messages: Sequence[Message], *, open_ended: bool = False) -> list[int]:
        """`_encode`, or [] when the template refuses the messages (for counting and prefill)."""
        try:
            return self._encode(messages, open_ended=open_ended)
        except ModelError:
            return []

    def prefill(
        self,
        messages: Sequence[Message],
        *,
        cancel: CancelToken | None = None,
        chunk_tokens: int = 64,
        keep: Sequence[tuple[str, int]] = (),
    ) -> int:
        """Evaluate the beginning of a prompt that starts with `messages` into the KV cache, so the next
        `stream` whose prompt starts the same way processes only the rest. What the cache already holds
        of it is kept, and a saved state that holds more is loaded (activation memory); the rest is
        evaluated `chunk_tokens` at a time, stopping between chunks when `cancel` is set (a chat turn
        goes first; what was evaluated stays useful). `keep`: (slot, n) to save the state of the first
        n messages under `slot` once they are processed (n >= len(messages): all of them). Returns how
        many tokens of that beginning the cache now holds. Never changes what a reply says: generation
        matches its own prompt against the cache."""
        cancel = cancel or CancelToken()
        with self._lock:
            tokens = self._prompt_tokens(messages, open_ended=True)
            llm = self._llm
            if not tokens or len(tokens) >= self.n_ctx:
                return 0
            points = self._save_points(messages, tokens, keep)
            done = llm.longest_token_prefix(llm._input_ids.tolist(), tokens)
            if llm.n_tokens > done:
                llm.n_tokens = done  # eval() and generate() drop the cache past n_tokens
                llm._requires_eval = True  # the last logits are not of token `done`
            self._restored = min(self._restored, done)
            done = self._restore(tokens, done)
            self._save_at(points, done, tokens, cancel)
            # Every core, as for a reply's prompt: unlike generation (Python between tokens, holding
            # the GIL), one eval() call per chunk leaves the UI thread free; tests.bench.ui_latency
            # measured a 5.5 ms longest stall while warming (one thread took 1.7x as long).
            while done < len(tokens) and not cancel.cancelled:
                stop = min([n for n in points if n > done] + [len(tokens), done + max(1, chunk_tokens)])
                step = tokens[done:stop]
                llm.eval(step)
                done += len(step)
                self._save_at(points, done, tokens, cancel)
            return done

    # -- generation -------------------------------------------------------------
    def set_seed(self, seed: int) -> None:
        """Make the next replies reproducible (benchmarks, tests); each reply still draws the next seed."""
        with self._lock:
            self._llm.set_seed(seed)

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
    ) -> Generator[str, None, None]:
        cancel = cancel or CancelToken()
        with self._lock:
            self._cancel_current = cancel
            stats = GenerationStats()
            self.last_stats = stats
            start = time.perf_counter()
            prompt = self._encode(messages)
            kwargs: dict[str, Any] = dict(
                prompt=prompt,
                max_tokens=max_tokens or self.config.max_tokens,
                temperature=self.config.temperature if temperature is None else temperature,
                top_p=self.config.top_p,
                min_p=self.config.min_p,
                repeat_penalty=self.config.repeat_penalty,
                stream=True,
                **self._stop_at_end_of_turn(),
            )
            self.last_self_repeat = None
            if response_format is not None:
                kwargs["grammar"] = _json_grammar(response_format)
                kwargs["repeat_penalty"] = 1.0  # JSON repeats quotes and braces by nature
            else:
                self.last_self_repeat = self._self_repeat_penalty(messages)
                if self.last_self_repeat is not None:
                    from llama_cpp import LogitsProcessorList

                    kwargs["logits_processor"] = LogitsProcessorList([self.last_self_repeat])
            stats.prompt_tokens = len(prompt)
            cached = self._llm.longest_token_prefix(self._llm._input_ids.tolist(), prompt)
            if response_format is None and cached < len(prompt) - MIN_RESTORE_GAIN:
                cached = self._restore(prompt, cached)  # a reply, not memory work: a saved state may help
            stats.cached_prompt_tokens = cached
            stats.restored_prompt_tokens = min(self._restored, cached)
            self._restored = 0  # reported once: later replies reuse the cache as they always do
            # stream=True: an iterator of chunks (llama-cpp-python's types say either shape); a prompt
            # longer than the context raises ValueError at the first chunk
            gen: Any = self._llm.create_completion(**kwargs)
            try:
                for chunk in _model_errors(gen):
                    if cancel.cancelled:
                        stats.stopped = True
                        break
                    choice = chunk["choices"][0]
                    text = choice.get("text") or ""
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

    def _stop_at_end_of_turn(self) -> dict[str, Any]:
        """What ends a reply, as llama-cpp-python's chat completion for a GGUF template sets it: the
        end-of-sequence token, and its text should the model spell it out."""
        eos = self._llm.token_eos()
        if eos == -1 or self._formatter is None:
            return {}
        from llama_cpp import StoppingCriteriaList

        def at_eos(tokens, logits) -> bool:
            return bool(tokens[-1] == eos)

        return {
            "stop": [self._llm._model.token_get_text(eos)],
            "stopping_criteria": StoppingCriteriaList([at_eos]),
        }

    def _self_repeat_penalty(self, messages: Sequence[Message]):
        """The processor that keeps this reply from reciting the earlier replies in `messages`."""
        if self.config.self_repeat_penalty <= 0:
            return None
        earlier = [
            self._llm.tokenize(m["content"].encode("utf-8", "replace"), add_bos=False, special=False)
            for m in messages
            if m.get("role") == "assistant" and m.get("content")
        ]
        if not earlier:
            return None
        from models.self_repeat import SelfRepeatPenalty

        return SelfRepeatPenalty(earlier, multiplier=self.config.self_repeat_penalty)

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

    def _free_adapters(self) -> None:
        import llama_cpp.llama_cpp as lc

        if self._lora_active:
            lc.llama_set_adapters_lora(self._llm._ctx.ctx, None, 0, None)
            self._lora_active = ()
        for handle in self._lora_handles.values():
            lc.llama_adapter_lora_free(handle)
        self._lora_handles.clear()

    def close(self) -> None:
        with self._lock:
            llm = getattr(self, "_llm", None)
            if llm is not None:
                self._free_adapters()
                llm.close()
                self._llm = None  # type: ignore[assignment]  # closed: no model until a new backend


def _adapter_identity(path: str, scale: float) -> list[Any]:
    """What names an adapter in a saved state's key: its file, size, mtime and the scale it is used at."""
    try:
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns, scale]
    except OSError:
        return [path, None, None, scale]


def _json_grammar(response_format: dict[str, Any]):
    """The grammar that constrains a reply to `response_format`'s JSON schema (any JSON when the
    schema cannot be turned into one), as llama-cpp-python's chat completion builds it."""
    from llama_cpp import llama_grammar

    schema = response_format.get("schema")
    if schema is not None:
        try:
            return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception:  # a schema feature the converter lacks: any JSON, parsed and checked after
            pass
    return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)


def _model_errors(chunks: Iterator[Any]) -> Iterator[Any]:
    """`chunks`, with llama-cpp-python's ValueError (e.g. a prompt longer than the context) as ModelError."""
    try:
        yield from chunks
    except ValueError as exc:
        raise ModelError(str(exc)) from exc
