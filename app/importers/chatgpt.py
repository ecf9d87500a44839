"""ChatGPT data export (`conversations.json`): the nested `mapping` tree of each conversation.

Each conversation is a tree of nodes `{id, message, parent, children}`; regenerations and
edited prompts are sibling branches. We keep the branch the user last saw: start at
`current_node` and follow `parent` up to the root, then reverse. On that branch we keep user
and assistant messages with visible text and their original `create_time`; we drop null
messages (the root), system and tool messages, hidden ones (custom instructions, memory
context), assistant tool calls (`recipient` other than "all"), and non-text content
(reasoning "thoughts", browsing displays, code sent to a tool). Malformed records are
skipped with a warning that names the conversation and node.
"""

from __future__ import annotations

import hashlib
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

SOURCE = "chatgpt"
_SKIP_ROLES = {"system", "tool"}
_KEEP_ROLES = {"user", "assistant"}
_TEXT_TYPES = {"text", "multimodal_text", "code"}
# Content types that are not conversation text: silently skipped.
_QUIET_TYPES = {
    "thoughts",
    "reasoning_recap",
    "tether_browsing_display",
    "tether_quote",
    "execution_output",
    "system_error",
    "user_editable_context",
    "model_editable_context",
    "sonic_webpage",
    "computer_output",
    "super_widget",
}


def looks_like_chatgpt(data: Any) -> bool:
    return isinstance(data, list) and any(isinstance(c, dict) and "mapping" in c for c in data[:50])


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (an export's optional parts vary)."""
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def parse_chatgpt(data: Any, name: str = "conversations.json") -> ParseResult:
    if isinstance(data, dict) and isinstance(data.get("mapping"), dict):
        data = [data]  # a single conversation object
    if not isinstance(data, list):
        raise ImportFatalError(
            f"{name}: not a ChatGPT export: expected a JSON list of conversations, found a JSON {type(data).__name__}"
        )
    if data and not looks_like_chatgpt(data):
        raise ImportFatalError(f"{name}: not a ChatGPT export: no conversation has a 'mapping' message tree")
    result = parse_each(data, name, SOURCE, _parse_conversation)
    result.about_user, result.reply_style = custom_instructions(data)
    result.profile_source = "ChatGPT custom instructions"
    return result


_ABOUT_PREFIX = "The user provided the following information about themselves:"
_STYLE_PREFIX = "The user provided the additional info about how they would like you to respond:"


def custom_instructions(data: list) -> tuple[list[str], list[str]]:
    """What the user wrote in ChatGPT's custom instructions, as last used: (["about me"], ["how to
    respond"]), each list empty or one text, from the newest conversation that ran with them (ChatGPT
    keeps them, hidden, at the start of every such conversation: a `user_editable_context` message).
    Older versions are left out: they are what the user has since changed."""
    newest: list[tuple[float, str] | None] = [None, None]  # ("about me", "how to respond"): (when, text)
    for record in data:
        mapping = record.get("mapping") if isinstance(record, dict) else None
        if not isinstance(mapping, dict):
            continue
        when = _num(record.get("create_time")) or 0.0
        for node in mapping.values():
            msg = _object(node.get("message") if isinstance(node, dict) else None)
            content = msg.get("content")
            if not isinstance(content, dict) or content.get("content_type") != "user_editable_context":
                continue
            meta = _object(msg.get("metadata"))
            given = _object(meta.get("user_context_message_data"))
            for kind, key, field_, prefix in (
                (0, "about_user_message", "user_profile", _ABOUT_PREFIX),
                (1, "about_model_message", "user_instructions", _STYLE_PREFIX),
            ):
                text = given.get(key)
                if not (isinstance(text, str) and text.strip()):
                    text = content.get(field_)
                    text = text.strip() if isinstance(text, str) else ""
                    text = text[len(prefix) :] if text.startswith(prefix) else text
                text = text.strip()
                best = newest[kind]
                if text and (best is None or (when, text) > best):
                    newest[kind] = (when, text)
    about, style = ([found[1]] if found else [] for found in newest)
    return about, style


def _parse_conversation(record: Any, index: int, name: str, issues: list[ImportIssue]) -> ParsedConversation | None:
    header = conversation_header(record, index, name, "title", issues)
    if header is None:
        return None
    title, where = header
    mapping = record.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        issues.append(ImportIssue(where, "has no 'mapping' message tree"))
        return None
    created = _num(record.get("create_time"))

    branch = _current_branch(record, mapping, where, issues)
    turns = timed_turns(
        (_node_turn(node_id, node, f"{where}, node {node_id}", issues) for node_id, node in branch), created
    )
    if not turns:
        issues.append(ImportIssue(where, "no user or assistant messages on the current branch"))
        return None
    if created is None:
        created = turns[0].timestamp
    ext = record.get("conversation_id") or record.get("id")
    if not isinstance(ext, str) or not ext:
        basis = f"{title}|{created}|{turns[0].turn_id}"
        ext = "sha1:" + hashlib.sha1(basis.encode("utf-8")).hexdigest()[:20]
        issues.append(ImportIssue(where, "has no conversation id; using a hash of its title and start", skipped=False))
    return ParsedConversation(SOURCE, ext, title, created, turns, position=where)


def _current_branch(record: dict, mapping: dict, where: str, issues: list[ImportIssue]) -> list[tuple[str, dict]]:
    current = record.get("current_node")
    if not isinstance(current, str) or current not in mapping:
        current = _latest_leaf(mapping)
        issues.append(
            ImportIssue(
                where, f"current_node is missing or unknown; following the latest leaf {current}", skipped=False
            )
        )
    chain: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id: str | None = current
    while node_id is not None:
        if node_id in seen:
            issues.append(
                ImportIssue(f"{where}, node {node_id}", "the parent links form a cycle; branch cut here", skipped=False)
            )
            break
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            issues.append(
                ImportIssue(
                    f"{where}, node {node_id}",
                    "parent node is missing from the mapping; older messages of this branch are lost",
                )
            )
            break
        chain.append((node_id, node))
        parent = node.get("parent")
        node_id = parent if isinstance(parent, str) else None
    chain.reverse()
    return chain


def _latest_leaf(mapping: dict) -> str:
    leaves = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("children")]
    if not leaves:
        return next(iter(mapping))

    def when(k: str) -> float:
        msg = mapping[k].get("message")
        t = _num(msg.get("create_time")) if isinstance(msg, dict) else None
        return t if t is not None else float("-inf")

    return max(leaves, key=when)


def _kept_role(msg: dict, where: str, issues: list[ImportIssue]) -> str | None:
    """The message's author role when its kind is imported; None for one skipped (noted when unknown)."""
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role in _SKIP_ROLES:
        return None
    if role not in _KEEP_ROLES:
        issues.append(ImportIssue(where, f"message has an unknown author role {role!r}"))
        return None
    return role


def _part_text(part: object) -> str | None:
    """One of a message's content.parts as text: an image, audio or other attachment as a placeholder
    ("[image]"), unless it carries text; None for a null part."""
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        kind = str(part.get("content_type", ""))
        if "image" in kind:
            return "[image]"
        if "audio" in kind:
            text = part.get("text")
            return text if isinstance(text, str) and text else "[audio]"
        if isinstance(part.get("text"), str):
            return part["text"]
        return "[attachment]"
    return None if part is None else str(part)


def _content_text(content: dict, ctype: str, where: str, issues: list[ImportIssue]) -> str | None:
    """A code message's text, or the text of a message's parts joined; None (noted) when it has neither."""
    if ctype == "code":
        text = content.get("text")
        if not isinstance(text, str):
            issues.append(ImportIssue(where, "code message has no content.text"))
            return None
        return text
    parts = content.get("parts")
    if not isinstance(parts, list):
        issues.append(ImportIssue(where, "message has no content.parts"))
        return None
    pieces = [_part_text(part) for part in parts]
    return "\n".join(p for p in pieces if p)


def _node_turn(node_id: str, node: dict, where: str, issues: list[ImportIssue]) -> Turn | None:
    msg = node.get("message")
    if msg is None:
        return None  # the root, or a placeholder: normal
    if not isinstance(msg, dict):
        issues.append(ImportIssue(where, f"message is a JSON {type(msg).__name__}, not an object"))
        return None
    role = _kept_role(msg, where, issues)
    if role is None:
        return None
    meta = _object(msg.get("metadata"))
    if meta.get("is_visually_hidden_from_conversation"):
        return None
    recipient = msg.get("recipient")
    if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        return None  # a tool call, not a reply
    content = msg.get("content")
    if not isinstance(content, dict):
        issues.append(ImportIssue(where, "message has no content"))
        return None
    ctype = content.get("content_type", "text")
    if ctype in _QUIET_TYPES:
        return None
    if ctype not in _TEXT_TYPES:
        issues.append(ImportIssue(where, f"message has unsupported content type {ctype!r}"))
        return None
    text = _content_text(content, ctype, where, issues)
    if text is None:
        return None
    if not text.strip():
        return None  # empty (often the stub before a tool call)
    ts = _num(msg.get("create_time"))
    turn_meta: dict[str, Any] = {}
    slug = meta.get("model_slug")
    if role == "assistant" and isinstance(slug, str):
        turn_meta["model"] = slug
    return Turn(role, text, ts if ts is not None else float("nan"), node_id, meta=turn_meta)
