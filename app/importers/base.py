"""Records every importer produces, and the errors and warnings they report.

An importer turns a file into `ParsedConversation`s (a list of `Turn`s, already on the
branch that should be kept, with timestamps), reporting problems as `ImportIssue`s that
name their position in the file. Writing them into a store is `app.importers.writer`'s job,
so every format goes through the same, transactional, resumable write path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memory_core.text import valid_text


def plain_text(text: str) -> str:
    """Imported text as the store keeps it: a JSON "\\ud800" escape must not fail the whole import
    (`valid_text`), and a JSON "\\u0000" escape is dropped, as a NUL byte in the file itself is
    refused (app.importers.reading): no imported text holds a NUL."""
    return valid_text(text).replace("\x00", "")


class ImportFatalError(Exception):
    """The file cannot be imported at all (truncated JSON, wrong schema, binary, bad UTF-8).

    Raised before anything is written; the CLI prints it and exits with code 2.
    """

    exit_code = 2


@dataclass
class ImportIssue:
    """A warning about one record, with where it is ("conversations.json: conversation 3 ('x'), node ab")."""

    position: str
    message: str
    skipped: bool = True  # the record was dropped (False: kept, e.g. a truncated page text)

    def __str__(self) -> str:
        return f"{self.position}: {self.message}" + (" — skipped" if self.skipped else "")


@dataclass
class Turn:
    """One utterance. `turn_id` is stable across re-imports (the ChatGPT node id, the LoCoMo
    dia_id, "L<line>" for text) and is what resuming and the page meta `turn_ids` use."""

    role: str  # "user" or "assistant"
    text: str
    timestamp: float  # Unix seconds
    turn_id: str
    session: int = 0  # pages never span sessions (LoCoMo sessions are days apart)
    meta: dict[str, Any] = field(default_factory=dict)
    # a reply cut short keeps saying so ("**Assistant (interrupted):**" in Mnemo's Markdown export)
    status: str = "complete"

    def __post_init__(self) -> None:
        self.text = plain_text(self.text)


@dataclass
class ParsedConversation:
    source: str  # "chatgpt", "locomo", "text"
    external_id: str  # with `source`, identifies the conversation for resuming
    title: str
    created_at: float
    turns: list[Turn]
    position: str = ""  # where it is in the file, for messages

    def __post_init__(self) -> None:
        self.title = plain_text(self.title)

    @property
    def n_turns(self) -> int:
        return len(self.turns)


@dataclass
class ParseResult:
    format: str
    conversations: list[ParsedConversation]
    issues: list[ImportIssue] = field(default_factory=list)
    records_seen: int = 0  # conversations found in the file, including skipped ones
    # what the user wrote about themselves in the exporting app (ChatGPT's custom instructions):
    # "about me" texts become persona facts, "how to respond" texts "reply style" traits
    about_user: list[str] = field(default_factory=list)
    reply_style: list[str] = field(default_factory=list)
    profile_source: str = ""

    @property
    def skipped_records(self) -> int:
        return sum(1 for i in self.issues if i.skipped)


def parse_each(
    records: list,
    name: str,
    fmt: str,
    parse_one: Callable[[Any, int, str, list[ImportIssue]], ParsedConversation | None],
) -> ParseResult:
    """Parse every record of an export; a record `parse_one` rejects (None) is reported and skipped."""
    result = ParseResult(format=fmt, conversations=[], records_seen=len(records))
    for index, record in enumerate(records):
        conv = parse_one(record, index, name, result.issues)
        if conv is not None:
            result.conversations.append(conv)
    return result


def conversation_header(
    record: Any, index: int, name: str, title_key: str, issues: list[ImportIssue]
) -> tuple[str, str] | None:
    """(title, position for messages) of an export's conversation record; None if it is not an object."""
    where = f"{name}: conversation {index + 1}"
    if not isinstance(record, dict):
        issues.append(ImportIssue(where, f"not an object but a JSON {type(record).__name__}"))
        return None
    title = record.get(title_key)
    title = title.strip() if isinstance(title, str) and title.strip() else "Untitled"
    short = title if len(title) <= 60 else title[:57] + "..."
    return title, f"{where} ({short!r})"


def timed_turns(candidates: Iterable[Turn | None], start: float | None) -> list[Turn]:
    """The turns in order (None left out); a turn without a time (NaN) takes the previous one's."""
    turns: list[Turn] = []
    last = start
    for turn in candidates:
        if turn is None:
            continue
        if turn.timestamp != turn.timestamp:
            turn.timestamp = last if last is not None else 0.0
        last = turn.timestamp
        turns.append(turn)
    return turns
