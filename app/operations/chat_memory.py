"""Forget what memory learned from one chat, whether the chat itself stays or is deleted.

Deleting a chat keeps its memory (memory is forgotten only when the user says so), and once it is gone its
pages no longer name it. So the window's Delete dialog offers to forget first, the chat list and
the Chat menu offer "Forget what Mnemo learned from this chat…", and `mnemo chats forget` /
`mnemo chats delete --forget` do the same from the command line.

What goes: every page of the chat in every tier (pinned ones too), its replies still waiting to
become pages, the persona items drawn only from those pages (items other chats also support stay,
losing these sources), and the facts its "Remember that …" messages added, unless something has
confirmed or changed them since. A fact such a message *updated* goes back to its earlier text.
Facts the user added in the inspector or the CLI are not tied to a chat and stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.wording import count
from memory_core import ConversationMemory
from memory_core.types import Knowledge

if TYPE_CHECKING:
    from memory_core import MemoryStore


@dataclass
class RememberedHere:
    """A fact a "Remember that …" message of the chat added or updated, still as that message left it."""

    kind: str  # "knowledge" | "trait"
    id: int
    outcome: str  # "added" (forgotten with the chat's memory) | "updated" (reverted)
    version: int
    text: str


@dataclass
class ChatMemory:
    """What forgetting one chat's memory removes (before), or removed (after)."""

    conversation_id: int
    memory: ConversationMemory
    remembered: list[RememberedHere] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.memory.empty and not self.remembered

    def describe(self) -> str:
        """'12 pages (2 pinned), 3 persona items drawn only from them and 1 fact it asked to remember'."""
        m = self.memory
        pages = count(len(m.page_ids) + m.pending_pages, "page")
        if m.pinned_pages:
            pages += f" ({m.pinned_pages:,} pinned)"
        parts = [pages]
        if m.items:
            parts.append(f"{count(len(m.items), 'persona item')} drawn only from them")
        added = sum(1 for r in self.remembered if r.outcome == "added")
        updated = len(self.remembered) - added
        if added:
            parts.append(f"{count(added, 'fact')} it asked to remember")
        if updated:
            parts.append(
                f"{count(updated, 'fact')} it changed (back to {'its' if updated == 1 else 'their'} earlier text)"
            )
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    def to_json(self) -> dict:
        m = self.memory
        return {
            "conversation_id": self.conversation_id,
            "pages": m.page_ids,
            "pinned_pages": m.pinned_pages,
            "pending_pages": m.pending_pages,
            "items": [{"kind": k, "id": i} for k, i in m.items],
            "remembered": [
                {"kind": r.kind, "id": r.id, "outcome": r.outcome, "version": r.version, "text": r.text}
                for r in self.remembered
            ],
        }


def chat_memory(store: MemoryStore, cid: int) -> ChatMemory:
    """What memory holds from chat `cid` (read-only; for a confirmation that names it)."""
    return ChatMemory(cid, store.curation.conversation_memory(cid), _remembered_here(store, cid))


def forget_chat_memory(store: MemoryStore, cid: int) -> ChatMemory:
    """Forget what memory learned from chat `cid`, in one transaction; the chat is not touched.
    Returns what was removed."""
    with store.transaction():
        remembered = _remembered_here(store, cid)
        gone = store.curation.forget_conversation(cid)
        for r in remembered:
            if r.outcome == "added":
                store.curation.forget(r.kind, r.id)
            else:
                store.curation.undo_version(r.kind, r.id, r.version)
        return ChatMemory(cid, gone, remembered)


def _remembered_here(store: MemoryStore, cid: int) -> list[RememberedHere]:
    """Facts the chat's "Remember that …" messages added or updated that still read as they left them
    (a later confirmation or edit raises the version: then the fact is no longer this chat's alone)."""
    out: dict[tuple[str, int], RememberedHere] = {}
    for msg in store.conversations.all_messages(cid):
        kept = (msg.meta or {}).get("stats", {}).get("remembered") if msg.role == "assistant" else None
        if not isinstance(kept, dict) or kept.get("outcome") not in ("added", "updated"):
            continue
        kind, iid = kept.get("kind"), kept.get("id")
        if kind not in ("knowledge", "trait") or not isinstance(iid, int):
            continue
        item = store.persona.get_knowledge(iid) if kind == "knowledge" else store.persona.get_trait(iid)
        version = kept.get("version", 1 if kept["outcome"] == "added" else None)
        if item is None or version is None or item.version != version:
            continue
        text = item.text if isinstance(item, Knowledge) else f"{item.dimension}: {item.value}"
        out[(kind, iid)] = RememberedHere(kind, iid, kept["outcome"], version, text)
    return list(out.values())
