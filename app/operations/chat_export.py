"""Export one chat — the branch on screen — as Markdown or JSON.

Markdown is a transcript that Mnemo's own importer reads back: a `# Title` line, then one
`[2024-04-02T08:15:31Z] **User:** …` / `**Assistant:** …` line per message, times in UTC, so a
chat can be kept as a readable file, edited by hand and imported into another memory. The importer
splits such a file only at lines of that timed, bold form, so a message that quotes a "User: …"
line reads back whole. A reply that is not whole says so, `**Assistant (interrupted):**` (or
`stopped`, `failed`), and reads back with that status. JSON keeps every field: roles, times, the
status of a stopped or interrupted reply, and the message meta (the model that answered, import ids).

Both are written through memory_core's atomic file: a full disk or a crash leaves any earlier
file of that name as it was, never half a file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.importers.text import CUT_SHORT
from memory_core.readable_export import atomic_file

if TYPE_CHECKING:
    from memory_core import MemoryStore

FORMAT = "mnemo-chat-export"
VERSION = 1
FORMATS = ("markdown", "json")
_SPEAKER = {"user": "User", "assistant": "Assistant", "system": "System"}


@dataclasses.dataclass
class ChatExport:
    path: Path
    title: str
    messages: int
    bytes: int


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_for(path: str | Path, fmt: str | None = None) -> str:
    """The format asked for, else the one the file name says (.json → JSON, anything else Markdown)."""
    if fmt is not None:
        fmt = {"md": "markdown"}.get(fmt, fmt)
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}; use markdown or json")
        return fmt
    return "json" if Path(path).suffix.lower() == ".json" else "markdown"


def _cut_short(message: Any) -> str:
    """' (interrupted)' after the speaker of a reply that is not whole, else ''. A reply still being
    written when the file is made ends there in the file: interrupted too."""
    status = "interrupted" if message.status == "streaming" else message.status
    return f" ({status})" if message.role == "assistant" and status in CUT_SHORT else ""


def chat_markdown(conversation: Any, messages: list) -> str:
    lines = [f"# {' '.join(conversation.title.split()) or 'Untitled'}", ""]
    for m in messages:
        who = _SPEAKER.get(m.role, m.role.capitalize()) + _cut_short(m)
        lines.append(f"[{_iso(m.created_at)}] **{who}:** {m.content.rstrip()}")
        lines.append("")
    return "\n".join(lines)


def chat_json(conversation: Any, messages: list) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": conversation.title,
        "created_at": _iso(conversation.created_at),
        "source": conversation.source,
        "external_id": conversation.external_id,
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role,
                "content": m.content,
                "created_at": _iso(m.created_at),
                "status": m.status,
                "meta": m.meta,
            }
            for m in messages
        ],
    }


def render_chat(
    store: MemoryStore, conversation_id: int, fmt: str, *, leaf_id: int | None = None
) -> tuple[str, int, str]:
    """(title, number of messages, text) of the chat's branch ending at `leaf_id` (default: its newest
    message) in `fmt`; LookupError when there is no such chat."""
    conversation = store.conversations.get_conversation(conversation_id)
    if conversation is None:
        raise LookupError(f"no chat with id {conversation_id}")
    messages = store.conversations.list_messages(conversation_id, leaf_id=leaf_id)
    text = (
        json.dumps(chat_json(conversation, messages), ensure_ascii=False, indent=1)
        if fmt == "json"
        else chat_markdown(conversation, messages)
    )
    return conversation.title, len(messages), text + "\n"


def export_chat(
    store: MemoryStore, conversation_id: int, path: str | Path, *, fmt: str | None = None, leaf_id: int | None = None
) -> ChatExport:
    """Write the chat (see `render_chat`) to `path`, atomically."""
    title, count, text = render_chat(store, conversation_id, format_for(path, fmt), leaf_id=leaf_id)
    path = Path(path)
    with atomic_file(path) as fh:
        fh.write(text)
    return ChatExport(path, title, count, path.stat().st_size)
