"""Records every importer produces, and the errors and warnings they report.

An importer turns a file into `ParsedConversation`s (a list of `Turn`s, already on the
branch that should be kept, with timestamps), reporting problems as `ImportIssue`s that
name their position in the file. Writing them into a store is `app.importers.writer`'s job,
so every format goes through the same, transactional, resumable write path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_core.text import valid_text


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

    def __post_init__(self) -> None:
        self.text = valid_text(self.text)   # a JSON "\ud800" escape must not fail the whole import


@dataclass
class ParsedConversation:
    source: str  # "chatgpt", "locomo", "text"
    external_id: str  # with `source`, identifies the conversation for resuming
    title: str
    created_at: float
    turns: list[Turn]
    position: str = ""  # where it is in the file, for messages

    @property
    def n_turns(self) -> int:
        return len(self.turns)


@dataclass
class ParseResult:
    format: str
    conversations: list[ParsedConversation]
    issues: list[ImportIssue] = field(default_factory=list)
    records_seen: int = 0  # conversations found in the file, including skipped ones

    @property
    def skipped_records(self) -> int:
        return sum(1 for i in self.issues if i.skipped)
