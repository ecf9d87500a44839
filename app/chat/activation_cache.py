"""Activation memory: where the chat model's saved prompt states live, which ones a warm keeps, and
what the user is shown of them (the inspector's view and `mnemo memory activation`).

The states themselves are the backend's (models.llama_state) in a `KVCacheStore`
(models.kv_cache_store) under `<data dir>/activation/`. Two kinds of entry: one per chat (its stable
prompt beginning: system prompt, persona, the dialogue so far) and one shared by every new chat (the
system prompt with the persona), replaced whenever a warm finds it changed.

A saved state holds the text it was made from (its tokens, and the model's reading of them), so
forgetting reaches it too: an entry built while memory since forgotten existed (the store's
`forgotten_spans`, as for backups) is deleted before the next warm and before it is listed.
Incognito chats keep none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.private_files import ensure_private_dir
from app.wording import count
from models.kv_cache_store import KVCacheStore, KVEntry

if TYPE_CHECKING:
    from memory_core import MemoryStore
    from models.chat import ChatModel

ACTIVATION_DIR = "activation"
# 1 GiB: the bundled model's state takes 23 KB a token, so this holds ~46k tokens (some 25 chats of
# 2k tokens, with the new-chat entry); a 7-8B model with grouped-query attention takes ~128 KB a token,
# i.e. the few most recent long chats, which are the ones reopened after a restart. Small beside the
# model files themselves (0.1-5 GB), and the least recently used entry goes first.
DEFAULT_CAP_BYTES = 1 << 30
NEW_CHAT = "new-chat"
_CHAT = "chat:"


def activation_dir(data_dir: str | os.PathLike) -> Path:
    return Path(data_dir) / ACTIVATION_DIR


def open_cache(data_dir: str | os.PathLike, cap_bytes: int = DEFAULT_CAP_BYTES) -> KVCacheStore:
    """The profile's cache (its folder made owner-only when it exists; the first save creates it)."""
    folder = activation_dir(data_dir)
    if folder.exists():
        ensure_private_dir(folder)
    return KVCacheStore(folder, cap_bytes)


def attach(model: ChatModel, data_dir: str | os.PathLike) -> None:
    """Give a chat model that can save its prompt states (llama.cpp in-process) the profile's cache."""
    use = getattr(model, "use_activation_cache", None)
    if use is not None:
        use(open_cache(data_dir))


def chat_slot(conversation_id: int) -> str:
    return f"{_CHAT}{int(conversation_id)}"


def slot_chat(slot: str) -> int | None:
    """The chat id of a chat's slot (None: the new-chat entry, or a slot of another kind)."""
    if slot.startswith(_CHAT) and slot[len(_CHAT) :].isdigit():
        return int(slot[len(_CHAT) :])
    return None


def slots_to_keep(
    store: MemoryStore, model: ChatModel, conversation_id: int | None, n_messages: int, *, read: bool
) -> list[tuple[str, int]]:
    """What a warm of `n_messages` prompt messages (system prompt first) saves: the new-chat entry
    (the first message) and the chat's own (all of them). None for an incognito chat (`read` off) or
    a model without a cache; entries that may hold forgotten memory are deleted first."""
    cache = getattr(model, "activation", None)
    if cache is None or not read:
        return []
    purge_forgotten(cache, store.db.purge.spans())
    keep = [(NEW_CHAT, 1)]
    if conversation_id is not None and n_messages > 1:  # a chat with no dialogue yet: the new-chat entry
        keep.append((chat_slot(conversation_id), n_messages))
    return keep


def purge_forgotten(cache: KVCacheStore, spans: Sequence[tuple[float, float]]) -> int:
    """Delete the entries built while something since forgotten existed; returns how many went."""
    gone = 0
    for entry in cache.entries():
        if any(start <= entry.built_at <= end for start, end in spans) and cache.remove(entry):
            gone += 1
    return gone


@dataclass(frozen=True)
class ActivationRow:
    """One saved state, as the user is shown it."""

    slot: str
    chat_id: int | None  # None: the entry every new chat starts with
    chat: str  # the chat's title, "New chats" or "(deleted chat)"
    tokens: int
    size: int
    built_at: float
    last_hit: float | None
    hits: int
    model: str  # the model file's name
    n_ctx: int | None


@dataclass
class ActivationSummary:
    rows: list[ActivationRow] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    total_bytes: int = 0
    cap_bytes: int = DEFAULT_CAP_BYTES

    @property
    def bytes_per_token(self) -> float | None:
        tokens = sum(r.tokens for r in self.rows)
        return sum(r.size for r in self.rows) / tokens if tokens else None

    def headline(self) -> str:
        """One line: how many, how big against the cap, hits and misses."""
        return (
            f"{count(len(self.rows), 'saved state')}, {human_bytes(self.total_bytes)} of "
            f"{human_bytes(self.cap_bytes)}; {count(self.hits, 'hit')}, {count(self.misses, 'miss', 'misses')}"
        )

    def to_dict(self) -> dict:
        return {
            "entries": [r.__dict__ for r in self.rows],
            "hits": self.hits,
            "misses": self.misses,
            "total_bytes": self.total_bytes,
            "cap_bytes": self.cap_bytes,
        }


def summary(cache: KVCacheStore, store: MemoryStore | None = None) -> ActivationSummary:
    """Every entry with its chat's title (`store`: the memory, for the titles and to drop entries
    holding forgotten memory first; None: ids only), the hits and misses, the size against the cap."""
    if store is not None:
        purge_forgotten(cache, store.db.purge.spans())
    stats = cache.stats()
    rows = [_row(entry, stats.of(entry), store) for entry in cache.entries()]
    return ActivationSummary(rows, stats.hits, stats.misses, sum(r.size for r in rows), cache.cap_bytes)


def _row(entry: KVEntry, hit: tuple[int, float | None], store: MemoryStore | None) -> ActivationRow:
    cid = slot_chat(entry.slot)
    if cid is None:
        title = "New chats" if entry.slot == NEW_CHAT else entry.slot
    elif store is None:
        title = f"chat {cid}"
    else:
        conv = store.conversations.get_conversation(cid)
        title = conv.title if conv is not None else "(deleted chat)"
    n_ctx = entry.key.get("n_ctx")
    return ActivationRow(
        slot=entry.slot,
        chat_id=cid,
        chat=title,
        tokens=entry.n_tokens,
        size=entry.size,
        built_at=entry.built_at,
        last_hit=hit[1],
        hits=hit[0],
        model=Path(str(entry.key.get("model", "?"))).name,
        n_ctx=int(n_ctx) if isinstance(n_ctx, int) else None,
    )


def human_bytes(n: int) -> str:
    """1536 -> "1.5 KiB" (binary units, as the cap is set)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def clear(cache: KVCacheStore) -> tuple[int, int]:
    """Delete every saved state and the counts: (entries, bytes)."""
    return cache.clear()
