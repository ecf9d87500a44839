"""Claude data export (`conversations.json`, or the export's .zip): a list of conversations,
each with `uuid`, `name`, ISO 8601 `created_at` and a `chat_messages` list.

A message is `{uuid, sender: "human"|"assistant", text, content: [blocks], created_at,
attachments, files, parent_message_uuid?}`. Its visible text is the `text` blocks of
`content` (the older flat `text` field when there are none); thinking, tool calls and tool
results are not conversation text and are dropped quietly; attachments and files become
"[attached: name]" lines, followed by the file's text where the export holds it (pasted text).

Newer exports link each message to its parent, and an edited prompt or a retried reply is a
sibling branch: we keep the branch of the latest message, as the ChatGPT importer keeps the
branch the user last saw. Exports without parent links are taken in list order. Empty
conversations (Claude exports hold many) are skipped with a warning.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

from app.importers.base import (
    ImportFatalError,
    ImportIssue,
    ParsedConversation,
    ParseResult,
    Turn,
    conversation_header,
    parse_each,
    timed_turns,
)

SOURCE = "claude"
_ROLES = {"human": "user", "user": "user", "assistant": "assistant"}
# Content blocks that are not conversation text: dropped without a warning.
_QUIET_BLOCKS = {
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "server_tool_use",
    "web_search_tool_result",
    "token_budget",
}
# Claude's parent id of a conversation's first message.
_ROOT_PARENT = "00000000-0000-4000-8000-000000000000"


def _conversations(data: Any) -> Any:
    """The list of conversations: the export's list, one conversation object, or {"conversations": [...]}."""
    if isinstance(data, dict) and "chat_messages" in data:
        return [data]
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        return data["conversations"]
    return data


def looks_like_claude(data: Any) -> bool:
    items = _conversations(data)
    return isinstance(items, list) and any(isinstance(c, dict) and "chat_messages" in c for c in items[:50])


def parse_iso(value: Any) -> float | None:
    """Seconds since the epoch for Claude's "2024-03-01T14:05:09.123456Z" (None if unreadable)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:  # no zone written: the export's times are UTC
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def parse_claude(data: Any, name: str = "conversations.json") -> ParseResult:
    data = _conversations(data)
    if not isinstance(data, list):
        raise ImportFatalError(
            f"{name}: not a Claude export: expected a JSON list of conversations, found a JSON {type(data).__name__}"
        )
    if data and not looks_like_claude(data):
        raise ImportFatalError(f"{name}: not a Claude export: no conversation has a 'chat_messages' list")
    return parse_each(data, name, SOURCE, _parse_conversation)


def _parse_conversation(record: Any, index: int, name: str, issues: list[ImportIssue]) -> ParsedConversation | None:
    header = conversation_header(record, index, name, "name", issues)
    if header is None:
        return None
    title, where = header
    messages = record.get("chat_messages")
    if not isinstance(messages, list):
        issues.append(ImportIssue(where, "has no 'chat_messages' list"))
        return None
    created = parse_iso(record.get("created_at"))
    turns = timed_turns(
        (
            _message_turn(msg, i, f"{where}, message {i + 1}", issues)
            for i, msg in _current_branch(messages, where, issues)
        ),
        created,
    )
    if not turns:
        issues.append(ImportIssue(where, "has no messages with text" if messages else "is empty"))
        return None
    if created is None:
        created = turns[0].timestamp
    ext = record.get("uuid")
    if not isinstance(ext, str) or not ext:
        ext = "sha1:" + hashlib.sha1(f"{title}|{created}|{turns[0].text}".encode()).hexdigest()[:20]
        issues.append(ImportIssue(where, "has no uuid; using a hash of its title and start", skipped=False))
    return ParsedConversation(SOURCE, ext, title, created, turns, position=where)


def _current_branch(messages: list, where: str, issues: list[ImportIssue]) -> list[tuple[int, Any]]:
    """(position in the list, message) on the branch to keep, oldest first."""
    indexed = list(enumerate(messages))
    by_id = {m["uuid"]: (i, m) for i, m in indexed if isinstance(m, dict) and isinstance(m.get("uuid"), str)}
    linked = [m for _, m in indexed if isinstance(m, dict) and isinstance(m.get("parent_message_uuid"), str)]
    if not linked or len(linked) < len(by_id):
        return indexed  # no (or partial) parent links: list order is the conversation's order
    children = {m.get("parent_message_uuid") for m in linked}
    leaves = [(i, m) for i, m in by_id.values() if m["uuid"] not in children]
    if not leaves:
        issues.append(ImportIssue(where, "every message is some message's parent; taken in list order", skipped=False))
        return indexed

    def when(item: tuple[int, dict]) -> tuple[float, int]:
        t = parse_iso(item[1].get("created_at"))
        return (t if t is not None else float("-inf"), item[0])

    chain: list[tuple[int, Any]] = []
    seen: set[str] = set()
    node: tuple[int, Any] | None = max(leaves, key=when)
    while node is not None:
        i, m = node
        if m["uuid"] in seen:
            issues.append(
                ImportIssue(
                    f"{where}, message {i + 1}", "the parent links form a cycle; branch cut here", skipped=False
                )
            )
            break
        seen.add(m["uuid"])
        chain.append(node)
        parent = m.get("parent_message_uuid")
        if parent == _ROOT_PARENT:
            break
        node = by_id.get(parent)
        if node is None:
            issues.append(
                ImportIssue(
                    f"{where}, message {i + 1}", "its parent message is missing; older messages of this branch are lost"
                )
            )
    chain.reverse()
    return chain


def _message_turn(msg: Any, position: int, where: str, issues: list[ImportIssue]) -> Turn | None:
    if not isinstance(msg, dict):
        issues.append(ImportIssue(where, f"is a JSON {type(msg).__name__}, not an object"))
        return None
    sender = msg.get("sender")
    role = _ROLES.get(sender) if isinstance(sender, str) else None
    if role is None:
        issues.append(ImportIssue(where, f"has an unknown sender {msg.get('sender')!r}"))
        return None
    pieces: list[str] = []
    content = msg.get("content")
    if isinstance(content, list) and content:
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                pieces.append(block["text"])
            elif kind not in _QUIET_BLOCKS:
                issues.append(ImportIssue(where, f"content block of unsupported type {kind!r} left out", skipped=False))
    elif isinstance(msg.get("text"), str):
        pieces.append(msg["text"])
    text = "\n\n".join(p.strip() for p in pieces if p.strip())
    attached: list[str] = []  # a pasted or uploaded text file keeps its text: the user's own words
    seen: set[str] = set()
    for key in ("attachments", "files"):
        for item in msg.get(key) or []:
            if not isinstance(item, dict):
                continue
            fname = item.get("file_name")
            fname = fname.strip() if isinstance(fname, str) and fname.strip() else "a file"
            body = item.get("extracted_content")
            body = body.strip() if isinstance(body, str) else ""
            if not body and fname in seen:
                continue  # the same file listed under both keys
            seen.add(fname)
            attached.append(f"[attached: {fname}]" + (f"\n{body}" if body else ""))
    if attached:
        text = "\n".join([*attached, text]).strip()
    if not text:
        return None  # a turn that only called tools, or an empty retry: nothing said
    ts = parse_iso(msg.get("created_at"))
    uuid = msg.get("uuid")
    turn_id = uuid if isinstance(uuid, str) and uuid else f"M{position + 1}"
    return Turn(role, text, float("nan") if ts is None else ts, turn_id)
