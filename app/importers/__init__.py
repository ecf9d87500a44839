"""Importers: ChatGPT and Claude exports, LoCoMo JSON, plain-text/Markdown transcripts.

`load(path, fmt)` reads and validates a file without touching any store (every fatal
problem raises `ImportFatalError` here, before anything is written); `write_all(store,
parsed)` then writes it, one transaction per conversation, resumably. `mnemo ingest` and
the LoCoMo evaluation both go through these two calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.importers.base import ImportFatalError, ImportIssue, ParsedConversation, ParseResult, Turn
from app.importers.chatgpt import looks_like_chatgpt, parse_chatgpt
from app.importers.claude import looks_like_claude, parse_claude
from app.importers.locomo import looks_like_locomo, parse_locomo
from app.importers.reading import decode_text, parse_json, read_bytes
from app.importers.text import looks_like_transcript, parse_text
from app.importers.writer import ImportReport, write_all, write_conversation

FORMATS = ("auto", "chatgpt", "claude", "locomo", "text")
_TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ".log"}

__all__ = [
    "FORMATS",
    "ImportFatalError",
    "ImportIssue",
    "ImportReport",
    "ParseResult",
    "ParsedConversation",
    "Turn",
    "load",
    "parse_chatgpt",
    "parse_claude",
    "parse_locomo",
    "parse_text",
    "write_all",
    "write_conversation",
]


def load(path: str | os.PathLike, fmt: str = "auto") -> ParseResult:
    """Read, decode, detect and parse `path`. Raises ImportFatalError for unusable files."""
    if fmt not in FORMATS:
        raise ImportFatalError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    path = Path(path)
    data, name = read_bytes(path)
    text = decode_text(data, name)
    if not text.strip():
        raise ImportFatalError(f"{name}: the file is empty")
    obj = None
    if fmt == "auto":
        fmt, obj = _detect(path, text, name)
    if fmt == "text":
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = 0.0
        title = path.stem if path.suffix.lower() in _TEXT_SUFFIXES else path.name
        result = parse_text(text, name, base_time=mtime, title=None)
        for c in result.conversations:
            if c.title == name:
                c.title = title
        return result
    if obj is None:
        obj = parse_json(text, name)
    if fmt == "chatgpt":
        return parse_chatgpt(obj, name)
    if fmt == "claude":
        return parse_claude(obj, name)
    return parse_locomo(obj, name)


def _detect(path: Path, text: str, name: str) -> tuple[str, Any]:
    """(format, parsed JSON or None)."""
    head = text.lstrip()[:1]
    if head not in ("[", "{"):
        return "text", None
    if path.suffix.lower() in _TEXT_SUFFIXES and looks_like_transcript(text):
        return "text", None
    try:
        obj = parse_json(text, name)
    except ImportFatalError:
        if looks_like_transcript(text):  # e.g. "[2024-03-01 14:05] User: ..." without a .txt name
            return "text", None
        raise
    if looks_like_chatgpt(obj) or (isinstance(obj, dict) and isinstance(obj.get("mapping"), dict)):
        return "chatgpt", obj
    if looks_like_claude(obj):
        return "claude", obj
    if looks_like_locomo(obj):
        return "locomo", obj
    if isinstance(obj, list) and not obj:
        raise ImportFatalError(f"{name}: an empty JSON list: nothing to import")
    raise ImportFatalError(
        f"{name}: unrecognised JSON: not a ChatGPT export (a list of conversations with a 'mapping' tree), "
        f"a Claude export (conversations with 'chat_messages') or LoCoMo data (samples with a 'conversation' "
        f"object); use --format to force one"
    )
