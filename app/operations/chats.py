"""What a user can do to their chats and memory, as small functions both front ends call.

The desktop app (ui.main_window, ui.inspector) runs these on its background workers and the
terminal commands (app.commands) run them directly: each is written once, here, in the way
Anki's `aqt/operations` gathers the collection's user-level actions. They take the store (and,
for a chat turn, the `ChatSession` and the chat model) of the calling thread; what to ask
first, and how to show the outcome, stays with each front end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.chat.agent import TokenCallback, TurnResult, post_edit, post_message, record_failed_reply
from app.chat.recovery import Recovered
from app.chat.recovery import recover_interrupted as _recover_interrupted
from app.chat.session import ChatSession
from app.operations.chat_export import ChatExport
from app.operations.chat_export import export_chat as _export_chat
from app.operations.chat_memory import ChatMemory, chat_memory, forget_chat_memory
from app.operations.remember import Remembered, remember_fact, remember_trait
from app.wording import count
from models.chat import CancelToken

if TYPE_CHECKING:
    from collections.abc import Callable

    from memory_core import MemoryStore
    from memory_core.readable_export import ExportResult
    from models.chat import ChatModel

# -- chat turns (on the thread that owns the chat model) ------------------------------


def send(
    session: ChatSession,
    store: MemoryStore,
    model: ChatModel,
    text: str,
    *,
    parent_id: int | None = None,
    on_token: TokenCallback | None = None,
    cancel: CancelToken | None = None,
) -> TurnResult:
    """`text` as the next user message of the session's chat (created by its first message), and the reply."""
    cid = session.open(store)
    return session.agent(store, model).send(cid, text, parent_id=parent_id, on_token=on_token, cancel=cancel)


def post(session: ChatSession, store: MemoryStore, text: str, *, parent_id: int | None = None) -> int:
    """Store `text` as the next user message of the session's chat (created by its first message),
    without the model: the desktop app stores what was typed before the model has loaded, then asks
    for the reply with `reply`."""
    return post_message(store, session.open(store), text, parent_id=parent_id)


def post_edited(store: MemoryStore, user_message_id: int, text: str) -> int:
    """Store `text` in place of user message `user_message_id` (a new branch), without the model."""
    return post_edit(store, user_message_id, text)


def reply(
    session: ChatSession,
    store: MemoryStore,
    model: ChatModel,
    user_message_id: int,
    *,
    on_token: TokenCallback | None = None,
    cancel: CancelToken | None = None,
    sent_at: float | None = None,
) -> TurnResult:
    """The reply to a user message stored by `post` or `post_edited`; `sent_at` (`time.perf_counter()`
    when the user sent it) makes its time to first token count the wait for the model."""
    return session.agent(store, model).reply_to(user_message_id, on_token=on_token, cancel=cancel, sent_at=sent_at)


def reply_failed(store: MemoryStore, user_message_id: int, error: str) -> int:
    """The reply could not begin (the model did not load): a failed reply that says why, which the
    user can regenerate. Returns its id."""
    return record_failed_reply(store, user_message_id, error)


def regenerate(
    session: ChatSession,
    store: MemoryStore,
    model: ChatModel,
    assistant_message_id: int,
    *,
    on_token: TokenCallback | None = None,
    cancel: CancelToken | None = None,
    sent_at: float | None = None,
) -> TurnResult:
    """A new reply in place of `assistant_message_id` (the rejected one's memory is forgotten)."""
    return session.agent(store, model).regenerate(
        assistant_message_id, on_token=on_token, cancel=cancel, sent_at=sent_at
    )


def edit(
    session: ChatSession,
    store: MemoryStore,
    model: ChatModel,
    user_message_id: int,
    text: str,
    *,
    on_token: TokenCallback | None = None,
    cancel: CancelToken | None = None,
) -> TurnResult:
    """`text` in place of user message `user_message_id` (a new branch), and its reply."""
    return session.agent(store, model).edit_and_resend(user_message_id, text, on_token=on_token, cancel=cancel)


def warm(
    session: ChatSession,
    store: MemoryStore,
    model: ChatModel,
    *,
    leaf_id: int | None = None,
    cancel: CancelToken | None = None,
) -> int:
    """Let the model process the chat's prompt prefix before the next message (`ChatAgent.warm`)."""
    return session.agent(store, model).warm(session.conversation_id, leaf_id=leaf_id, cancel=cancel)


def recover_interrupted(store: MemoryStore) -> Recovered:
    """At start, before the first turn: keep what a crash cut short and queue its memory, once
    (`app.chat.recovery`; the desktop app and the terminal commands both run it)."""
    return _recover_interrupted(store)


# -- chats ------------------------------------------------------------------------------


def rename_chat(store: MemoryStore, cid: int, title: str) -> str:
    """Give chat `cid` a new title (its spaces tidied); returns it. LookupError: no such chat;
    ValueError: a title of nothing but spaces."""
    title = " ".join(title.split())
    if store.conversations.get_conversation(cid) is None:
        raise LookupError(f"no chat with id {cid}")
    if not title:
        raise ValueError("a title needs some text")
    store.conversations.rename_conversation(cid, title)
    return title


def chat_taught(store: MemoryStore, cid: int) -> ChatMemory:
    """What memory learned from chat `cid` (read-only: for the question that asks to forget it)."""
    return chat_memory(store, cid)


def forget_chat(store: MemoryStore, cid: int) -> ChatMemory:
    """Forget what memory learned from chat `cid`; the chat stays. Returns what went."""
    return forget_chat_memory(store, cid)


def delete_chat(store: MemoryStore, cid: int, *, forget: bool = False) -> ChatMemory | None:
    """Delete chat `cid` and its messages, and with `forget` what memory learned from it, in one
    transaction. Returns what was forgotten (None: memory was left as it was)."""
    with store.transaction():
        gone = forget_chat_memory(store, cid) if forget else None
        store.conversations.delete_conversation(cid)
    return gone


def set_incognito(store: MemoryStore, cid: int, on: bool) -> None:
    """An incognito chat neither reads nor writes memory."""
    store.conversations.set_conversation_flags(cid, incognito=on)


def export_chat(
    store: MemoryStore, cid: int, path: str | Path, *, fmt: str | None = None, leaf_id: int | None = None
) -> ChatExport:
    """Write chat `cid` (the branch ending at `leaf_id`, default its newest) to `path` (app.operations.chat_export)."""
    return _export_chat(store, cid, path, fmt=fmt, leaf_id=leaf_id)


# -- memory -------------------------------------------------------------------------------


def remember(
    store: MemoryStore, text: str, *, about: str = "user", pin: bool = False, space_id: int | None = None
) -> Remembered:
    """Keep `text` as a fact at once (app.operations.remember), in memory space `space_id` (default Personal).
    ValueError: nothing to keep."""
    return remember_fact(store, text, about=about, pin=pin, space_id=space_id)


def remember_a_trait(
    store: MemoryStore, dimension: str, value: str, *, pin: bool = False, space_id: int | None = None
) -> Remembered:
    """Keep a trait (`likes: jazz`) at once, in memory space `space_id` (default Personal). ValueError: a
    part is empty."""
    return remember_trait(store, dimension, value, pin=pin, space_id=space_id)


def set_memory_paused(store: MemoryStore, paused: bool, *, cid: int | None = None) -> None:
    """Pause (or resume) learning: for every chat, or for chat `cid` only."""
    if cid is None:
        store.set_paused(paused)
    else:
        store.conversations.set_conversation_flags(cid, memory_paused=paused)


def export_memory(
    store: MemoryStore,
    path: str | Path,
    *,
    fmt: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ExportResult:
    """Write all of memory to `path` (JSON or Markdown, `MemoryStore.export`); `on_progress(done, total)`."""
    return store.export(path, fmt=fmt, on_progress=on_progress)


def describe_memory_export(result: ExportResult) -> str:
    """What a memory export holds, in words ("12 pages, 3 segments, 2 traits and 5 facts")."""
    return (
        f"{count(result.pages, 'page')}, {count(result.segments, 'segment')}, "
        f"{count(result.traits, 'trait')} and {count(result.knowledge, 'fact')}"
    )
