"""The chat agent's tests share one setup: a real store file (STM of 3 pages) and the agent
driving the session's bundled GGUF."""

from __future__ import annotations

import pytest

from app.chat.agent import ChatAgent
from memory_core import MemoryParams, MemoryStore


@pytest.fixture
def store(tmp_path, embedder):
    s = MemoryStore.open(
        tmp_path / "mnemo.sqlite3",
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        params=MemoryParams.from_flat(stm_capacity=3),
    )
    yield s
    s.close()


@pytest.fixture
def agent(store, chat_model):
    return ChatAgent(store, chat_model, reply_reserve=256, max_tokens=24)
