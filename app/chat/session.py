"""`ChatSession`: one open chat, across all its turns, with no Qt in it.

A chat turn needs the store and the chat model of the thread that runs it (the desktop app's LLM
thread, the terminal's main thread); the session is what stays between turns: which conversation
it is (created with the first message), how replies are bounded, and the `ChatAgent` whose
learned state outlives a turn (a chat template that refused recall as a second system message is
not asked again). The desktop app and `mnemo chat` both keep one per open chat and pass it to the
turn operations in `app.operations.chats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.chat.agent import ChatAgent
from app.parametric.adapters import apply_for_chat

if TYPE_CHECKING:
    from app.settings import Settings
    from memory_core import MemoryStore
    from models.chat import ChatModel


@dataclass(frozen=True)
class ChatOptions:
    """How a reply is bounded (the `chat` settings): tokens kept free for it, and its longest length; and the
    user's custom instructions, which every prompt carries after the system prompt."""

    reply_reserve: int = 512
    max_tokens: int | None = None
    instructions: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatOptions:
        return cls(
            reply_reserve=settings.chat.reply_reserve,
            max_tokens=settings.chat.max_tokens,
            instructions=getattr(settings, "custom_instructions", ""),
        )


class ChatSession:
    """One open chat: its conversation id (None until the first message creates it) and its agent."""

    def __init__(
        self,
        conversation_id: int | None = None,
        *,
        options: ChatOptions | None = None,
        incognito: bool = False,
        space_id: int | None = None,
        read_all: bool = False,
    ) -> None:
        self.conversation_id = conversation_id
        self.options = options or ChatOptions()
        self.incognito = incognito  # only for the conversation this session creates
        # the memory space the conversation it creates writes to (None: the first), and whether it reads all
        self.space_id, self.read_all = space_id, read_all
        self._agent: ChatAgent | None = None

    def open(self, store: MemoryStore) -> int:
        """The conversation's id; the first call of a new chat creates it."""
        if self.conversation_id is None:
            self.conversation_id = store.conversations.create_conversation(
                "New chat", incognito=self.incognito, space_id=self.space_id or 1
            )
            if self.read_all:
                store.spaces.set_chat_space(self.conversation_id, reads="all")
        return self.conversation_id

    def agent(self, store: MemoryStore, model: ChatModel) -> ChatAgent:
        """The agent for this store and model: the same one turn after turn, so what it learned about
        the model stays; another model (the settings changed) or store gets a new one."""
        agent = self._agent
        if agent is None or agent.store is not store or agent.model is not model:
            agent = self._agent = ChatAgent(store, model)
        agent.reply_reserve = self.options.reply_reserve
        agent.max_tokens = self.options.max_tokens
        agent.instructions = self.options.instructions
        apply_for_chat(
            model, self.conversation_id, store
        )  # this chat's LoRA adapters on the model (app.parametric.adapters)
        return agent
