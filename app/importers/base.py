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


OTHERS = None  # `People.me` of a conversation between other people


@dataclass(frozen=True)
class People:
    """Who is who in a dialogue between two named people (see app.importers.people)."""

    user_side: str  # the speaker on the page's user side (LoCoMo's speaker_a)
    assistant_side: str  # the speaker on the page's assistant side (speaker_b)
    me: str | None = OTHERS  # which of them is the app's user; None: other people

    def meta(self) -> dict[str, str | None]:
        """The `page.meta["people"]` value (the contract the persona code reads)."""
        return {"user_side": self.user_side, "assistant_side": self.assistant_side, "me": self.me}

    def with_me(self, me: str | None) -> People:
        if me is not None and me not in (self.user_side, self.assistant_side):
            raise ValueError(f"{me!r} is neither {self.user_side!r} nor {self.assistant_side!r}")
        return People(self.user_side, self.assistant_side, me)

    @classmethod
    def from_meta(cls, meta: object) -> People | None:
        """The People a page's meta records, or None (a page of the user's own chats)."""
        if not isinstance(meta, dict):
            return None
        p = meta.get("people")
        if not (
            isinstance(p, dict) and isinstance(p.get("user_side"), str) and isinstance(p.get("assistant_side"), str)
        ):
            return None
        me = p.get("me")
        return cls(p["user_side"], p["assistant_side"], me if isinstance(me, str) else OTHERS)


@dataclass
class ParsedConversation:
    source: str  # "chatgpt", "locomo", "text"
    external_id: str  # with `source`, identifies the conversation for resuming
    title: str
    created_at: float
    turns: list[Turn]
    position: str = ""  # where it is in the file, for messages
    # a dialogue between two named people: who is on each side and which, if any, is the user
    # (app.importers.people); None for the user's own chats with an assistant
    people: People | None = None

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
