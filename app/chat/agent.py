"""`ChatAgent`: one chat turn end to end (docs/architecture.md, "The path of one chat turn").

persist the user message → retrieve → compose within the token budget → stream the
reply → store it with its trace and token counts → enqueue the memory update. The
agent drives the chat model from the calling thread; the scheduler makes sure that is
always the one thread that owns the model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.chat.activation_cache import slots_to_keep
from app.chat.prompting import ComposedPrompt, MarkupFilter, QuoteFloor, compose_prompt
from app.chat.quoted_turns import QuotedPage, QuotedTurnFilter, asks_for_dialogue
from app.chat.recovery import recover_interrupted
from app.chat.repetition import RepetitionGuard
from app.chat.turn_memory import memory_mode, queue_exchange_page
from app.chat.writer_lease import token as writer_token
from app.operations.remember import forget_request, forget_statement, remember_fact, remember_request
from memory_core import RetrievalBudget, is_storage_full
from memory_core.text import valid_text
from models.chat import CancelToken
from models.errors import ModelError

if TYPE_CHECKING:
    from memory_core import MemoryStore, Retrieval
    from models.chat import ChatModel

log = logging.getLogger(__name__)

TokenCallback = Callable[[str], None]
STATUS_COMPLETE, STATUS_STOPPED, STATUS_STREAMING, STATUS_FAILED, STATUS_INTERRUPTED, STATUS_PENDING = (
    "complete",
    "stopped",
    "streaming",
    "failed",
    "interrupted",
    "pending",  # a user message whose reply has not begun (app.chat.recovery)
)
PARTIAL_FLUSH_S = 1.0  # how often a streaming reply is saved, so a crash loses at most this much

MESSAGE_NOT_SAVED = "The disk is full: your message could not be saved. Free some disk space and send it again."
REPLY_NOT_STARTED = (
    "The disk is full: your message was saved, but there is no room for a reply. "
    "Free some disk space and regenerate it."
)
REPLY_NOT_SAVED = (
    "The disk is full: this reply is shown but could not be saved. Free some disk space; "
    "the part saved before the disk filled is kept."
)


class DiskFullError(RuntimeError):
    """The database could not be written because the disk is full. Everything saved before is kept;
    the message says what was and was not saved."""


@contextmanager
def _disk_full_means(message: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if is_storage_full(exc):
            raise DiskFullError(message) from exc
        raise


@dataclass
class TurnResult:
    conversation_id: int
    user_message_id: int
    assistant_message_id: int
    text: str
    status: str
    prompt: ComposedPrompt | None = None
    trace: dict = field(default_factory=dict)
    error: str | None = None
    stats: dict = field(default_factory=dict)


@dataclass
class _Turn:
    """One reply being made: what `ChatAgent._reply`'s steps hand each other."""

    conversation_id: int
    user_id: int
    query: str
    history: list = field(default_factory=list)
    retrieval: Any = None
    floor: Any = None
    budget: int = 0
    prompt: Any = None
    exact: int = 0
    trace: dict = field(default_factory=dict)
    remembered: dict | None = None
    forgot: dict | None = None
    retrieve_s: float = 0.0
    compose_s: float = 0.0
    # perf_counter times: when the user sent (None: not known, the model's own clock is reported), when
    # this reply began (after waiting for the model's thread) and when its generation was asked for
    sent_at: float | None = None
    began_at: float = 0.0
    stream_at: float = 0.0


@dataclass
class _Streamed:
    """What the model streamed, and the filters that shaped it (they say why it ended)."""

    turns: QuotedTurnFilter
    guard: RepetitionGuard | None = None
    markup: MarkupFilter = field(default_factory=MarkupFilter)
    parts: list[str] = field(default_factory=list)
    status: str = STATUS_COMPLETE
    error: str | None = None


class ChatAgent:
    def __init__(
        self,
        store: MemoryStore,
        model: ChatModel,
        *,
        reply_reserve: int = 512,
        max_tokens: int | None = None,
        memory_enabled: Callable[[], bool] = lambda: True,
        repetition_guard: bool = True,
    ) -> None:
        self.store = store
        self.model = model
        self.reply_reserve = reply_reserve
        self.max_tokens = max_tokens
        self.repetition_guard = repetition_guard  # stop a reply that loops (app.chat.repetition)
        self.memory_enabled = memory_enabled  # global pause switch (settings)
        self._recall_at_end = True  # recall as a system message before the question (see app.chat.prompting)
        self.quoting_off: frozenset[str] = frozenset()  # app.chat.prompting.QUOTING_RULES switched off (benchmarks)
        self.instructions = ""  # the user's custom instructions (Settings), after the system prompt

    # -- conversations ------------------------------------------------------------
    def new_conversation(self, title: str = "New chat") -> int:
        return self.store.conversations.create_conversation(title)

    def recover_interrupted(self) -> int:
        """After a crash: what was cut short is kept and its memory queued (`app.chat.recovery`); returns
        how many replies and unanswered messages it found."""
        done = recover_interrupted(self.store, self.memory_enabled)
        return done.replies + done.unanswered

    # -- turns --------------------------------------------------------------------
    def send(
        self,
        conversation_id: int,
        text: str,
        *,
        parent_id: int | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnResult:
        """Send `text` as the next user message (after `parent_id`, default: the current leaf)."""
        user_id = post_message(self.store, conversation_id, text, parent_id=parent_id)
        return self.reply_to(user_id, on_token=on_token, cancel=cancel)

    def reply_to(
        self,
        user_message_id: int,
        *,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        sent_at: float | None = None,
    ) -> TurnResult:
        """The reply to a user message stored by `post_message` or `post_edit` (a new message: a
        request to remember or forget in it is carried out). `sent_at`: the `time.perf_counter()` at
        which the user sent it, so the reply's time to first token counts what it waited for."""
        began = time.perf_counter()
        user = self.store.conversations.get_message(user_message_id)
        if user is None or user.role != "user":
            raise ValueError(f"message {user_message_id} is not a user message")
        return self._reply(
            user.conversation_id,
            user.id,
            user.content,
            on_token=on_token,
            cancel=cancel,
            new_message=True,
            clock=(sent_at, began),
        )

    def regenerate(
        self,
        assistant_message_id: int,
        *,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        sent_at: float | None = None,
    ) -> TurnResult:
        """A new sibling reply to the same user message; the rejected reply's page is forgotten."""
        began = time.perf_counter()
        old = self.store.conversations.get_message(assistant_message_id)
        if old is None or old.role != "assistant" or old.parent_id is None:
            raise ValueError(f"message {assistant_message_id} is not an assistant reply")
        user = self.store.conversations.get_message(old.parent_id)
        if user is None:
            raise ValueError(f"the user message of reply {assistant_message_id} is gone")
        self._forget_pages_of(assistant_message_id)
        return self._reply(
            old.conversation_id, user.id, user.content, on_token=on_token, cancel=cancel, clock=(sent_at, began)
        )

    def edit_and_resend(
        self,
        user_message_id: int,
        new_text: str,
        *,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnResult:
        """A new user message beside the edited one (a new branch); the old exchange's page is forgotten."""
        user_id = post_edit(self.store, user_message_id, new_text)
        return self.reply_to(user_id, on_token=on_token, cancel=cancel)

    def warm(
        self, conversation_id: int | None, *, leaf_id: int | None = None, cancel: CancelToken | None = None
    ) -> int:
        """Put the stable beginning of this conversation's next prompt (system prompt, persona, the
        dialogue up to `leaf_id`, default its newest message) into the model's KV cache while the user
        reads or types: the next reply then waits only for what was recalled and the new message, not
        for the whole conversation (the first reply after opening a long chat took seconds). Backends
        without a local cache (an HTTP server) have no `prefill`. Returns the tokens now cached."""
        prefill = getattr(self.model, "prefill", None)
        if prefill is None:
            return 0
        read, history = True, []
        if conversation_id is not None:
            read, _ = self._memory_mode(conversation_id)
            history = self.store.conversations.list_messages(conversation_id, leaf_id=leaf_id)
        persona = (
            self.store.retrieve("", None, RetrievalBudget(pages=0, knowledge=0), record_visits=False) if read else None
        )
        prompt = compose_prompt(
            "",
            retrieval=persona,
            history=history,
            count_tokens=self.model.count_tokens,
            budget_tokens=max(256, self.model.n_ctx - self.reply_reserve),
            recall_at_end=self._recall_at_end,
            instructions=self.instructions,
        )
        stable = prompt.messages[:-1]  # all but the (empty) new message
        # saved to disk for the next start too (app.chat.activation_cache): this chat's, and the new-chat one
        keep = slots_to_keep(self.store, self.model, conversation_id, len(stable), read=read)
        return prefill(stable, cancel=cancel, keep=keep) if keep else prefill(stable, cancel=cancel)

    # -- internals ----------------------------------------------------------------
    def _memory_mode(self, conversation_id: int) -> tuple[bool, bool]:
        return memory_mode(self.store, conversation_id, self.memory_enabled)

    def _remember_if_asked(self, text: str, conversation_id: int) -> dict | None:
        """A message that asks to be remembered ("Remember that …", "…, so remember that.") keeps its
        fact in the persona at once (before retrieval, so this very reply can see it), instead of
        waiting for its page to be promoted; in the chat's memory space."""
        fact = remember_request(text)
        if fact is None:
            return None
        try:
            done = remember_fact(self.store, fact, space_id=self.store.spaces.chat_space(conversation_id)[0])
        except ValueError:
            return None
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            log.warning("a fact to remember could not be stored: %s", exc)
            return None
        return {"kind": done.kind, "id": done.id, "text": done.text, "outcome": done.outcome, "version": done.version}

    def _forget_asked(self, what: str, conversation_id: int) -> dict | None:
        """A message that opened with "Forget that …" forgets the facts and pages that say `what` in
        the spaces the chat reads, before retrieval (so this reply cannot recall it). The caller then
        keeps no page of this exchange: the request repeats what is to be forgotten."""
        try:
            spaces = self.store.spaces.read_set(conversation_id)
            return forget_statement(self.store, what, spaces=spaces).to_stats()
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            log.warning("a request to forget could not be carried out: %s", exc)
            return None

    def _reply(
        self,
        conversation_id: int,
        user_id: int,
        query: str,
        *,
        on_token: TokenCallback | None,
        cancel: CancelToken | None,
        new_message: bool = False,
        clock: tuple[float | None, float] = (None, 0.0),
    ) -> TurnResult:
        """The reply to user message `user_id`: memory requests, recall, prompt, stream, save, queue."""
        cancel = cancel or CancelToken()
        turn = _Turn(conversation_id, user_id, query)
        turn.sent_at, turn.began_at = clock[0], clock[1] or time.perf_counter()
        read, write = self._memory_mode(conversation_id)
        write = self._carry_out_requests(turn, read, write, new_message)
        self._recall(turn, read)
        self._compose(turn)
        with _disk_full_means(REPLY_NOT_STARTED), self.store.transaction():
            assistant_id = self.store.conversations.add_message(
                conversation_id,
                "assistant",
                "",
                parent_id=user_id,
                status=STATUS_STREAMING,
                meta={"trace": turn.trace, "writer": writer_token(self.store)},
            )
            self._mark_answered(user_id)
        streamed = self._stream(turn, assistant_id, on_token, cancel)
        return self._save(turn, assistant_id, streamed, write)

    def _carry_out_requests(self, turn: _Turn, read: bool, write: bool, new_message: bool) -> bool:
        """ "Remember that …" and "Forget that …" are done before recall (so this reply sees them);
        returns whether the exchange may be remembered (a request to forget repeats what goes)."""
        if write and new_message:
            turn.remembered = self._remember_if_asked(turn.query, turn.conversation_id)
        to_forget = forget_request(turn.query)  # never also a request to remember (the two openings differ)
        if to_forget and read and new_message:
            turn.forgot = self._forget_asked(to_forget, turn.conversation_id)
        return write and not to_forget  # so does a regenerate of a request to forget

    def _recall(self, turn: _Turn, read: bool) -> None:
        """The branch up to the message, and what memory recalls for it (nothing when memory is off)."""
        t0 = time.perf_counter()
        branch = self.store.conversations.list_messages_to(turn.user_id)
        turn.history = [m for m in branch if m.id != turn.user_id]
        budget = RetrievalBudget(pages=self.store.params.quoting.recall_turns)
        spaces = self.store.spaces.read_set(turn.conversation_id)  # the memory spaces the chat reads
        turn.retrieval = self.store.retrieve(turn.query, turn.conversation_id, budget, spaces=spaces) if read else None
        turn.retrieve_s = time.perf_counter() - t0

    def _prompt(self, turn: _Turn, budget_tokens: int) -> ComposedPrompt:
        params = self.store.params
        return compose_prompt(
            turn.query,
            retrieval=turn.retrieval,
            history=turn.history,
            count_tokens=self.model.count_tokens,
            budget_tokens=budget_tokens,
            recall_at_end=self._recall_at_end,
            floor=turn.floor,
            requote_after=params.quoting.recall_own_after,
            max_turns=params.quoting.recall_turns,
            off=self.quoting_off,
            instructions=self.instructions,
        )

    def _compose(self, turn: _Turn) -> None:
        """The prompt within the token budget, counted with the model's own chat template; its trace."""
        t0 = time.perf_counter()
        budget = max(256, self.model.n_ctx - self.reply_reserve)
        turn.budget = budget
        turn.floor = QuoteFloor.from_params(self.store.params)
        prompt = self._prompt(turn, budget)
        try:
            exact = self.model.count_messages_tokens(prompt.messages)
        except Exception as exc:
            if not self._recall_at_end:
                raise
            log.info("the chat template refused a second system message (%s); recall goes first", exc)
            self._recall_at_end = False
            prompt = self._prompt(turn, budget)
            exact = self.model.count_messages_tokens(prompt.messages)
        shrink = 0
        while exact > budget and shrink < 4:  # the template cost more than estimated: tighten and redo
            shrink += 1
            prompt = self._prompt(turn, budget - (exact - budget) - 32 * shrink)
            exact = self.model.count_messages_tokens(prompt.messages)
        prompt.prompt_tokens = exact
        turn.prompt, turn.exact = prompt, exact
        turn.compose_s = time.perf_counter() - t0
        trace = turn.retrieval.to_trace() if turn.retrieval is not None else {"query": turn.query, "memory": "off"}
        trace["included"] = prompt.included
        trace["dropped"] = prompt.dropped
        trace["half_pages"] = prompt.half_pages_trace()
        trace["quote_floor"] = turn.floor.to_dict()  # the rule applied then (the inspector says why a page is out)
        trace["prompt_tokens"] = exact
        trace["prompt_sections"] = prompt.section_tokens(self.model.count_tokens)  # the window's prompt view
        trace["query_truncated"] = prompt.query_truncated
        turn.trace = trace

    def _recompose_recall_first(self, turn: _Turn) -> None:
        """A server whose chat template refuses a second system message: recall goes in the first."""
        self._recall_at_end = False
        turn.prompt = self._prompt(turn, turn.budget)
        turn.exact = self.model.count_messages_tokens(turn.prompt.messages)
        turn.trace.update(
            included=turn.prompt.included,
            dropped=turn.prompt.dropped,
            prompt_tokens=turn.exact,
            half_pages=turn.prompt.half_pages_trace(),
            prompt_sections=turn.prompt.section_tokens(self.model.count_tokens),
        )

    def _stream(self, turn: _Turn, assistant_id: int, on_token: TokenCallback | None, cancel: CancelToken) -> _Streamed:
        """Stream the reply through the filters, saving it as it grows; a refused prompt is retried once
        with recall first."""
        out = _Streamed(
            guard=RepetitionGuard() if self.repetition_guard else None,
            # the quoted pages' notation ("User: …", "[date] (page 6)") written back: app.chat.quoted_turns
            turns=QuotedTurnFilter(
                active=bool(turn.prompt.included.get("pages") or turn.prompt.included.get("knowledge"))
                and not asks_for_dialogue(turn.query),
                quoted=self._quoted_pages(turn.prompt, turn.retrieval),
            ),
        )
        for attempt in (1, 2):
            try:
                self._stream_once(turn, assistant_id, out, on_token, cancel)
                if self.model.last_stats.stopped or cancel.cancelled:
                    out.status = STATUS_STOPPED
            except ModelError as exc:
                if attempt == 1 and not out.parts and any(m["role"] == "system" for m in turn.prompt.messages[1:]):
                    log.info("the model refused the prompt (%s); retrying with recall in the first system message", exc)
                    self._recompose_recall_first(turn)
                    continue
                out.status, out.error = STATUS_FAILED, str(exc)
                log.warning("generation failed: %s", exc)
            break
        return out

    def _stream_once(
        self, turn: _Turn, assistant_id: int, out: _Streamed, on_token: TokenCallback | None, cancel: CancelToken
    ) -> None:
        guard, turns, markup = out.guard, out.turns, out.markup
        last_flush = 0.0  # the first token is saved at once, then at most every PARTIAL_FLUSH_S
        turn.stream_at = time.perf_counter()
        stream = self.model.stream(turn.prompt.messages, max_tokens=self.max_tokens, cancel=cancel)
        for chunk in stream:
            chunk = turns.feed(markup.feed(chunk))  # the prompt's <memory> tags are dropped too
            if chunk:
                out.parts.append(chunk)
                if on_token is not None:
                    on_token(chunk)
            if turns.ended:
                stream.close()  # the reply began writing a turn nobody said: it ends before it
                out.parts[:] = ["".join(out.parts).rstrip()]
                return
            if not chunk:
                continue
            if guard is not None and guard.feed(chunk):
                stream.close()  # ends the generation; the reply keeps what came before the loop
                out.parts[:] = [guard.kept()]
                return
            if time.perf_counter() - last_flush > PARTIAL_FLUSH_S:
                last_flush = self._flush_partial(assistant_id, out.parts)
        held = turns.feed(markup.rest()) + turns.rest()  # held starts that were nothing after all
        if held:
            out.parts.append(held)
            if on_token is not None:
                on_token(held)

    def _stats(self, turn: _Turn, out: _Streamed) -> dict:
        st = self.model.last_stats
        # the model's clock starts once it has the prompt; the user's when they sent: the time between
        # (waiting for memory work or the model on its thread, recall, composing) is theirs too
        first_token = st.time_to_first_token_s
        waited = {}
        if turn.sent_at is not None:
            first_token += max(0.0, turn.stream_at - turn.sent_at)
            waited = {
                "queued_s": round(max(0.0, turn.began_at - turn.sent_at), 4),
                "model_first_token_s": round(st.time_to_first_token_s, 4),
            }
        stats = {
            "prompt_tokens": turn.exact,
            "cached_prompt_tokens": st.cached_prompt_tokens,
            "completion_tokens": st.completion_tokens,
            "time_to_first_token_s": round(first_token, 4),
            **waited,
            "total_s": round(st.total_s, 4),
            "tokens_per_s": round(st.tokens_per_s, 2),
            "retrieve_ms": round(turn.retrieve_s * 1000, 2),
            "compose_ms": round(turn.compose_s * 1000, 2),
            "model": self.model.model_id,
            "finish_reason": (
                "repetition"
                if out.guard is not None and out.guard.looping
                else "invented_turn"
                if out.turns.ended
                else st.finish_reason
            ),
        }
        if getattr(st, "restored_prompt_tokens", 0):  # began from a state saved before (activation memory)
            stats["restored_prompt_tokens"] = st.restored_prompt_tokens
        if turn.remembered:
            stats["remembered"] = turn.remembered
        if turn.forgot is not None:
            stats["forgot"] = turn.forgot
        if out.markup.removed:
            stats["markup_removed"] = out.markup.removed
        if out.turns.removed:
            stats["quoting_removed"] = out.turns.removed
        return stats

    def _save(self, turn: _Turn, assistant_id: int, out: _Streamed, write: bool) -> TurnResult:
        """Store the reply with its trace and stats; queue its memory update when it may be remembered."""
        cid, user_id = turn.conversation_id, turn.user_id
        text = "".join(out.parts)
        if out.turns.removed:  # a recitation or a label line that closed the reply leaves its line break
            text = text.rstrip()
        stats = self._stats(turn, out)
        status, error = out.status, out.error
        meta: dict[str, Any] = {"trace": turn.trace, "stats": stats}
        if error:
            meta["error"] = error
        remember = write and bool(text.strip()) and status != STATUS_FAILED
        try:
            with self.store.transaction():  # the reply and its memory job commit together, or neither does
                self.store.conversations.update_message(assistant_id, content=text, status=status, meta=meta)
                if write and status != STATUS_FAILED:  # a visit is a page quoted into a reply's prompt
                    self.store.segments.record_quoted_pages(turn.prompt.included.get("pages", []))
                if remember:
                    user = self.store.conversations.get_message(user_id)
                    if user is None:
                        raise LookupError(f"message {user_id} is gone")
                    queue_exchange_page(self.store, cid, user, assistant_id, text)
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            # the row keeps what was flushed, marked 'streaming': the next start marks it interrupted
            # and queues its memory update (app.chat.recovery)
            log.warning("the reply could not be saved: %s", exc)
            return TurnResult(
                cid, user_id, assistant_id, text, STATUS_FAILED, turn.prompt, turn.trace, REPLY_NOT_SAVED, stats
            )
        return TurnResult(cid, user_id, assistant_id, text, status, turn.prompt, turn.trace, error, stats)

    def _quoted_pages(self, prompt: ComposedPrompt, retrieval: Retrieval | None) -> list[QuotedPage]:
        """The pages the prompt quotes, with their conversations' sources (who said what: a recited
        ChatGPT answer is ChatGPT's, not Mnemo's)."""
        ids = set(prompt.included.get("pages", []))
        hits = [h for h in (retrieval.pages if retrieval is not None else []) if h.page.id in ids]
        sources: dict[int | None, str | None] = {}
        for h in hits:
            cid = h.page.conversation_id
            if cid is not None and cid not in sources:
                conv = self.store.conversations.get_conversation(cid)
                sources[cid] = conv.source if conv is not None else None
        return [
            QuotedPage(h.page.user_text or "", h.page.assistant_text or "", sources.get(h.page.conversation_id))
            for h in hits
        ]

    def _flush_partial(self, assistant_id: int, parts: list[str]) -> float:
        """Save the reply so far (a crash loses at most PARTIAL_FLUSH_S of it). On a full disk the
        reply keeps streaming; the next flush tries again. Returns the time of this attempt."""
        try:
            self.store.conversations.update_message(assistant_id, content="".join(parts))
        except Exception as exc:
            if not is_storage_full(exc):
                raise
            log.warning("a partial reply could not be saved: %s", exc)
        return time.perf_counter()

    def _forget_pages_of(self, assistant_message_id: int) -> None:
        forget_pages_of(self.store, assistant_message_id)

    def _mark_answered(self, user_id: int) -> None:
        """The user message's reply has begun: no longer 'pending' (see `post_message`)."""
        user = self.store.conversations.get_message(user_id)
        if user is not None and user.status == STATUS_PENDING:
            self.store.conversations.update_message(user_id, status=STATUS_COMPLETE)


def post_message(store: MemoryStore, conversation_id: int, text: str, *, parent_id: int | None = None) -> int:
    """Store `text` as the user's next message of the chat (after `parent_id`, default its newest
    message), before anything waits on the model: a crash from here on keeps it. It stays 'pending'
    until its reply begins, so a crash in between leaves a mark `app.chat.recovery` finds. A new chat's
    first message also titles it. DiskFullError when it cannot be stored."""
    text = valid_text(text)
    if parent_id is None:
        branch = store.conversations.list_messages(conversation_id)
        parent_id = branch[-1].id if branch else None
    with _disk_full_means(MESSAGE_NOT_SAVED):
        user_id = store.conversations.add_message(
            conversation_id,
            "user",
            text,
            parent_id=parent_id,
            status=STATUS_PENDING,
            meta={"writer": writer_token(store)},
        )
    with _disk_full_means(REPLY_NOT_STARTED):
        _maybe_title(store, conversation_id, text)
    return user_id


def post_edit(store: MemoryStore, user_message_id: int, new_text: str) -> int:
    """Store `new_text` as a new user message beside `user_message_id` (a new branch, 'pending' like
    `post_message`); the memory of the old branch's replies is forgotten."""
    old = store.conversations.get_message(user_message_id)
    if old is None or old.role != "user":
        raise ValueError(f"message {user_message_id} is not a user message")
    for child in store.conversations.message_children(user_message_id):
        forget_pages_of(store, child.id)
    new_text = valid_text(new_text)
    with _disk_full_means(MESSAGE_NOT_SAVED):
        return store.conversations.add_message(
            old.conversation_id,
            "user",
            new_text,
            parent_id=old.parent_id,
            status=STATUS_PENDING,
            meta={"writer": writer_token(store)},
        )


def record_failed_reply(store: MemoryStore, user_message_id: int, error: str) -> int:
    """The turn failed before its reply began (the model could not be loaded): a 'failed' reply that
    says why, so the stored message is answered by something the user can regenerate."""
    user = store.conversations.get_message(user_message_id)
    if user is None:
        raise ValueError(f"no message {user_message_id}")
    with store.transaction():
        aid = store.conversations.add_message(
            user.conversation_id, "assistant", "", parent_id=user.id, status=STATUS_FAILED, meta={"error": error}
        )
        if user.status == STATUS_PENDING:
            store.conversations.update_message(user.id, status=STATUS_COMPLETE)
    return aid


def forget_pages_of(store: MemoryStore, assistant_message_id: int) -> None:
    """Forget the memory of a reply the user replaced (regenerated or edited away)."""
    store.jobs.cancel(key=f"page:{assistant_message_id}")
    pages = store.pages.list_pages(assistant_message_id=assistant_message_id, limit=100)
    if pages:
        store.curation.forget("page", [p.id for p in pages])


def _maybe_title(store: MemoryStore, conversation_id: int, text: str) -> None:
    conv = store.conversations.get_conversation(conversation_id)
    if conv is not None and conv.title in ("", "New chat"):
        store.conversations.rename_conversation(conversation_id, title_from(text))


def title_from(text: str, limit: int = 60) -> str:
    """A chat's title from its first message: the first `limit` characters, cut between words, with "…"
    when something was cut."""
    words = " ".join(text.split())
    if len(words) <= limit:
        return words or "New chat"
    cut = words.rfind(" ", 0, limit)
    return words[: cut if cut > limit // 2 else limit - 1].rstrip(" ,.;:-") + "…"
