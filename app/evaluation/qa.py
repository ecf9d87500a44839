"""Answering LoCoMo questions with a chat model: three prompts for the same model.

- "memory": the question with what the memory retrieved, composed by the chat agent's own
  `app.chat.prompting.compose_prompt` (pages quoted as data with their dates) under an
  eval-specific system prompt that asks for a short answer.
- "no-memory": the question alone (what the model guesses).
- "full-context": the conversation itself, session by session with dates, truncated from
  the start so that it fits the context window (the newest turns are kept; LoCoMo's
  "truncated full context" baseline). The context is built once per conversation and put
  before the question, so llama.cpp reuses its KV cache across that conversation's
  questions.

All three ask the model to reply exactly "Not mentioned in the conversation" when the
answer is not there: that is the phrase the official category-5 rule looks for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.chat.prompting import QuoteFloor
    from memory_core import Retrieval
    from models.chat import ChatModel

NOT_MENTIONED = "Not mentioned in the conversation"

SYSTEM_MEMORY = (
    "You answer questions about past conversations between {a} and {b}, using only the memory "
    "below. Answer with a short phrase (a few words, a name, a date), not a sentence. For "
    "questions about when something happened, use the dates of the memory. If the memory does not "
    f"contain the answer, reply exactly: {NOT_MENTIONED}."
)
SYSTEM_NO_MEMORY = (
    "You answer questions about past conversations between {a} and {b}. Answer with a short "
    f"phrase (a few words, a name, a date), not a sentence. If you do not know, reply exactly: {NOT_MENTIONED}."
)
SYSTEM_FULL = (
    "You answer questions about the conversation between {a} and {b} quoted below (the oldest part "
    "may be cut). Answer with a short phrase (a few words, a name, a date), not a sentence. If the "
    f"conversation does not contain the answer, reply exactly: {NOT_MENTIONED}."
)
QUESTION = "Question: {q}\nShort answer:"


def fmt_date(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%-d %B %Y, %H:%M")


@dataclass
class Answer:
    mode: str
    prediction: str
    prompt_tokens: int
    seconds: float
    detail: dict


class QAAnswerer:
    def __init__(
        self,
        model: ChatModel,
        *,
        n_ctx: int | None = None,
        max_answer_tokens: int = 32,
        memory_turns: int | None = None,
        floor: QuoteFloor | None = None,
    ) -> None:
        from memory_core import MemoryParams

        self.model = model
        self.n_ctx = int(n_ctx) if n_ctx else int(getattr(model, "n_ctx", 4096))
        self.max_answer_tokens = max_answer_tokens
        # recalled turns quoted: the chat agent's budget unless told (MemoryParams.quoting.recall_turns)
        self.memory_turns = memory_turns or MemoryParams().quoting.recall_turns
        self.floor = (
            floor  # as the chat agent: app.chat.prompting.QuoteFloor.from_params(MemoryParams); None: every page
        )
        self.budget = self.n_ctx - max_answer_tokens - 16
        self._full_cache: dict[str, str] = {}

    # -- generation -----------------------------------------------------------------------
    def _generate(self, mode: str, messages: list[dict], detail: dict) -> Answer:
        tokens = self.model.count_messages_tokens(messages)
        t0 = time.perf_counter()
        text = "".join(self.model.stream(messages, max_tokens=self.max_answer_tokens, temperature=0.0))
        seconds = time.perf_counter() - t0
        prediction = clean_prediction(text)
        return Answer(mode, prediction, tokens, seconds, detail)

    # -- prompts ----------------------------------------------------------------------------
    def memory_messages(
        self, question: str, retrieval: Retrieval, speakers: tuple[str, str]
    ) -> tuple[list[dict], dict]:
        from app.chat.prompting import compose_prompt

        system = SYSTEM_MEMORY.format(a=speakers[0], b=speakers[1])
        retrieval = _top_pages(retrieval, self.memory_turns)
        composed = compose_prompt(
            QUESTION.format(q=question),
            retrieval=retrieval,
            history=(),
            count_tokens=self.model.count_tokens,
            budget_tokens=self.budget,
            system_prompt=system,
            floor=self.floor,
            max_turns=self.memory_turns,
        )
        return composed.messages, {
            "pages": composed.included.get("pages", []),
            "dropped_pages": composed.dropped.get("pages", 0),
        }

    def no_memory_messages(self, question: str, speakers: tuple[str, str]) -> list[dict]:
        return [
            {"role": "system", "content": SYSTEM_NO_MEMORY.format(a=speakers[0], b=speakers[1])},
            {"role": "user", "content": QUESTION.format(q=question)},
        ]

    def full_context(
        self,
        key: str,
        sessions: Sequence[tuple[float, Sequence[str]]],
        speakers: tuple[str, str],
        question_reserve: int = 96,
    ) -> str:
        """The newest part of the conversation that fits, built once per conversation (cached)."""
        if key in self._full_cache:
            return self._full_cache[key]
        system = SYSTEM_FULL.format(a=speakers[0], b=speakers[1])
        room = self.budget - self.model.count_tokens(system) - question_reserve - 32
        flat: list[tuple[str, str]] = []  # (line, its session's header), oldest first
        for start, lines in sessions:
            header = f"[Session of {fmt_date(start)}]"
            flat.append((header, header))
            flat.extend((line, header) for line in lines)
        room -= 24  # for the header re-added when the cut falls inside a session
        kept: list[tuple[str, str]] = []
        used = 0
        for line, header in reversed(flat):
            c = self.model.count_tokens(line) + 1
            if used + c > room:
                break
            kept.append((line, header))
            used += c
        kept.reverse()

        def render() -> str:
            lines = [line for line, _ in kept]
            if kept and kept[0][0] != kept[0][1]:  # cut inside a session: keep its date visible
                lines.insert(0, f"{kept[0][1]} (earlier turns cut)")
            return "\n".join(lines)

        text = render()
        # per-line counts can undercount the joined text: drop the oldest lines until it fits
        while kept and self.model.count_tokens(text) > room + 24:
            kept.pop(0)
            text = render()
        self._full_cache[key] = text
        return text

    def full_messages(self, question: str, context: str, speakers: tuple[str, str]) -> list[dict]:
        system = SYSTEM_FULL.format(a=speakers[0], b=speakers[1])
        return [
            {"role": "system", "content": f"{system}\n\n<conversation>\n{context}\n</conversation>"},
            {"role": "user", "content": QUESTION.format(q=question)},
        ]

    # -- answering ----------------------------------------------------------------------------
    def answer_memory(self, question: str, retrieval: Retrieval, speakers: tuple[str, str]) -> Answer:
        messages, detail = self.memory_messages(question, retrieval, speakers)
        return self._generate("memory", messages, detail)

    def answer_no_memory(self, question: str, speakers: tuple[str, str]) -> Answer:
        return self._generate("no-memory", self.no_memory_messages(question, speakers), {})

    def answer_full(self, question: str, context: str, speakers: tuple[str, str]) -> Answer:
        return self._generate(
            "full-context", self.full_messages(question, context, speakers), {"context_chars": len(context)}
        )


def _top_pages(retrieval: Retrieval, n: int) -> Retrieval:
    """A shallow copy of `retrieval` keeping its `n` best pages, whose turns the prompt quotes (`memory_turns`,
    as the chat agent does with `MemoryParams.quoting.recall_turns`; the sides of pages left out are not quoted)."""
    import copy

    r = copy.copy(retrieval)
    r.pages = list(retrieval.pages)[:n]
    return r


def clean_prediction(text: str) -> str:
    """First non-empty line, without a leading 'Answer:' and surrounding quotes."""
    text = text.strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            text = line
            break
    for prefix in ("short answer:", "answer:"):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :].strip()
    return text.strip().strip('"').strip()
