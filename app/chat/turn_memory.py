"""What a chat turn may do with memory, and the memory update it queues: shared by the turn
(`app.chat.agent`) and the crash recovery (`app.chat.recovery`), so both decide and queue alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core import MemoryStore
    from memory_core.types import Message


def memory_mode(
    store: MemoryStore, conversation_id: int, memory_enabled: Callable[[], bool] = lambda: True
) -> tuple[bool, bool]:
    """(read, write): incognito chats neither read nor write memory; paused ones only read."""
    conv = store.conversations.get_conversation(conversation_id)
    if conv is not None and conv.incognito:
        return False, False
    paused = (conv is not None and conv.memory_paused) or not memory_enabled() or store.is_paused()
    return True, not paused


def queue_exchange_page(store: MemoryStore, conversation_id: int, user: Message, assistant_id: int, reply: str) -> int:
    """Queue the page of one exchange (user message `user`, reply `assistant_id`). The job's key is the
    reply's id, so queueing one exchange twice keeps one job."""
    return store.jobs.enqueue(
        "add_page",
        {
            "cid": conversation_id,
            "user_text": user.content,
            "assistant_text": reply,
            "user_message_id": user.id,
            "assistant_message_id": assistant_id,
            "timestamp": user.created_at,
        },
        key=f"page:{assistant_id}",
    )
