"""After a crash: every exchange cut short is kept and queued for memory, once.

One routine for every front end (the desktop app runs it when it opens the database, `mnemo chat`
and `mnemo ask` before their first turn), so an exchange interrupted under one is recovered by the
other. What a crash can leave:

- a reply still marked 'streaming' (the process died while it was written): it becomes
  'interrupted', keeps the text flushed so far, and its exchange is queued for memory as if the
  turn had finished;
- a reply marked 'interrupted' by an older Mnemo, which did not queue its memory: queued now;
- a user message still 'pending' (stored, then the process died before its reply began, e.g.
  while the model loaded): it gets an empty 'interrupted' reply, so the chat shows what happened
  and offers to regenerate it.

Rows a live process is still writing are left alone: each turn marks them with its process's
writer token (`app.chat.writer_lease`), so a window, `mnemo chat` and `mnemo serve` on one memory
recover only what a dead one left.

A reply that recovery handled carries `meta["recovered"]`, so running it again changes nothing
(the memory job of a reply is also keyed by the reply's id, and a page already made from the reply
is never queued again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.chat.turn_memory import memory_mode, queue_exchange_page
from app.chat.writer_lease import is_alive
from app.operations.remember import forget_request

if TYPE_CHECKING:
    from memory_core import MemoryStore
    from memory_core.types import Message

STREAMING, INTERRUPTED, PENDING, COMPLETE = "streaming", "interrupted", "pending", "complete"
NOT_STARTED = "Mnemo closed before this reply began. Regenerate it to get an answer."


@dataclass(frozen=True)
class Recovered:
    """What one recovery run did."""

    replies: int = 0  # replies cut short, now 'interrupted'
    queued: int = 0  # of them, exchanges queued for memory
    unanswered: int = 0  # user messages left waiting for a reply, now with an interrupted one

    def __bool__(self) -> bool:
        return bool(self.replies or self.unanswered)


def recover_interrupted(store: MemoryStore, memory_enabled: Callable[[], bool] = lambda: True) -> Recovered:
    """Keep what a crash cut short and queue its memory; idempotent (see the module docstring)."""
    replies = queued = unanswered = 0
    for msg in store.conversations.list_messages_with_status(
        STREAMING, unrecovered=True
    ) + store.conversations.list_messages_with_status(INTERRUPTED, unrecovered=True):
        meta = msg.meta or {}
        if meta.get("recovered") or (msg.status == STREAMING and is_alive(store, meta.get("writer"))):
            continue
        with store.transaction():
            replies += 1
            queued += _recover_reply(store, msg, memory_enabled)
    for msg in store.conversations.list_messages_with_status(PENDING):
        if msg.role != "user" or is_alive(store, (msg.meta or {}).get("writer")):
            continue
        with store.transaction():
            store.conversations.add_message(
                msg.conversation_id,
                "assistant",
                "",
                parent_id=msg.id,
                status=INTERRUPTED,
                meta={"recovered": True, "error": NOT_STARTED},
            )
            store.conversations.update_message(msg.id, status=COMPLETE)
            unanswered += 1
    return Recovered(replies, queued, unanswered)


def _recover_reply(store: MemoryStore, msg: Message, memory_enabled: Callable[[], bool]) -> int:
    """One reply cut short: marked interrupted and recovered; its exchange queued when memory may
    learn it. Returns 1 when a page job was queued."""
    store.conversations.update_message(msg.id, status=INTERRUPTED, meta={"recovered": True})
    user = store.conversations.get_message(msg.parent_id) if msg.parent_id else None
    if user is None or not msg.content.strip() or forget_request(user.content) is not None:
        return 0
    _, write = memory_mode(store, msg.conversation_id, memory_enabled)
    if not write or store.pages.list_pages(assistant_message_id=msg.id, limit=1):
        return 0
    queue_exchange_page(store, msg.conversation_id, user, msg.id, msg.content)
    return 1
