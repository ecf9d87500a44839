"""Writing parsed conversations into a memory store: one transaction per conversation,
resumable by (source, external_id), pages through the store's LLM-free bulk path.

Resuming: a conversation already in the store is matched by (source, external_id); its
messages carry the importer's `turn_id` in their meta. If every parsed turn is already
there the conversation is skipped; otherwise only the missing turns are added (with their
pages), chained after the last stored message, so a conversation that was cut short (or
that grew since the last export) is completed, never duplicated. Because each
conversation's messages and pages are written in one transaction, a crash leaves either
the whole conversation or none of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.importers.base import ImportIssue, ParsedConversation, ParseResult
from app.importers.claim import import_claim
from app.importers.pages import MAX_SIDE_CHARS, page_items, plan_pages

if TYPE_CHECKING:
    from app.importers.base import Turn
    from app.importers.pages import PagePlan
    from memory_core import MemoryStore
    from memory_core.types import Conversation

PAGE_CHUNK = 64  # pages per add_pages call (one embedding batch each)


class ImportProgress(Protocol):
    """What `write_all` reports to: a ProgressBar (the CLI) or an ImportJob (the window)."""

    note: str  # the conversation being written

    def update(self, n: int = 1) -> None: ...


@dataclass
class ConversationOutcome:
    position: str
    external_id: str
    conversation_id: int | None
    status: str  # "imported", "resumed", "already imported"
    turns_written: int = 0
    pages_written: int = 0
    # a dialogue imported before with another answer to "who are you": that earlier answer is kept
    # (its pages already say it), and this is the answer they keep
    people_kept: dict[str, str | None] | None = None


@dataclass
class ImportReport:
    path: str
    format: str
    outcomes: list[ConversationOutcome] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)
    records_seen: int = 0
    seconds: float = 0.0
    profile_added: int = 0  # persona facts and traits from what the user wrote about themselves
    profile_source: str = ""
    instructions: str = ""  # how the user asked to be answered (ChatGPT's custom instructions), for Settings

    def profile_note(self) -> str:
        """' 2 persona item(s) from ChatGPT custom instructions.' when there were any, else ''."""
        return f" {self.profile_added} persona item(s) from {self.profile_source}." if self.profile_added else ""

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def turns_written(self) -> int:
        return sum(o.turns_written for o in self.outcomes)

    @property
    def pages_written(self) -> int:
        return sum(o.pages_written for o in self.outcomes)

    @property
    def skipped_records(self) -> int:
        return sum(1 for i in self.issues if i.skipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "conversations_in_file": self.records_seen,
            "imported": self.count("imported"),
            "resumed": self.count("resumed"),
            "already_imported": self.count("already imported"),
            "turns_written": self.turns_written,
            "pages_written": self.pages_written,
            "skipped_records": self.skipped_records,
            "persona_items_added": self.profile_added,
            "warnings": [str(i) for i in self.issues],
            "seconds": round(self.seconds, 3),
            "conversations": [o.__dict__ for o in self.outcomes],
        }


def _meta_of(message: Any) -> dict:
    meta = getattr(message, "meta", None)
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    return meta if isinstance(meta, dict) else {}


def _stored_turn_ids(store: MemoryStore, cid: int) -> set:
    return {_meta_of(m).get("turn_id") for m in store.conversations.list_messages(cid)}


def write_conversation(
    store: MemoryStore,
    conv: ParsedConversation,
    *,
    issues: list[ImportIssue] | None = None,
    on_turns: Callable[[int], None] | None = None,
    max_side_chars: int = MAX_SIDE_CHARS,
) -> ConversationOutcome:
    """Write (or finish) one conversation in one transaction."""
    issues = issues if issues is not None else []
    existing = store.conversations.find_conversation(conv.source, conv.external_id)
    parent_id = None
    turns = conv.turns
    status = "imported"
    kept = None
    if existing is not None:
        kept = _earlier_people(store, existing.id, conv)
        messages = store.conversations.list_messages(existing.id)
        done = {_meta_of(m).get("turn_id") for m in messages}
        turns = [t for t in conv.turns if t.turn_id not in done]
        if not turns:
            if on_turns:
                on_turns(len(conv.turns))
            return ConversationOutcome(
                conv.position, conv.external_id, existing.id, "already imported", people_kept=kept
            )
        status = "resumed"
        parent_id = messages[-1].id if messages else None
        if on_turns:
            on_turns(len(conv.turns) - len(turns))

    # Embed first, outside the transaction (the slow part: the write lock is held only for the
    # SQL below, so a chat reply never waits behind an import). The message ids are not known
    # yet; the texts, and so the embeddings, do not depend on them.
    plans = plan_pages(turns)
    people = conv.people.meta() if conv.people is not None else None
    draft, _ = page_items(turns, [0] * len(turns), plans, source=conv.source, limit=max_side_chars, people=people)
    for start in range(0, len(draft), PAGE_CHUNK):  # in chunks, so the progress bar moves
        chunk = draft[start : start + PAGE_CHUNK]
        store.intake.embed_pages(
            chunk,
            conversation_id=existing.id if existing is not None else None,
            before=draft[start - 1] if start else None,
        )
        if on_turns:
            on_turns(sum(len(it["meta"]["turn_ids"]) for it in chunk))
    written_turns = sum(len(it["meta"]["turn_ids"]) for it in draft)
    try:
        with store.transaction():
            cid = _write_turns(store, conv, existing, turns, parent_id, plans, draft, issues, max_side_chars)
    except _WrittenMeanwhile:  # another import (of an overlapping file) wrote it while this one embedded
        return write_conversation(store, conv, issues=issues, max_side_chars=max_side_chars)
    if on_turns and written_turns < len(turns):
        on_turns(len(turns) - written_turns)
    return ConversationOutcome(conv.position, conv.external_id, cid, status, len(turns), len(draft), kept)


def _earlier_people(store: MemoryStore, cid: int, conv: ParsedConversation) -> dict[str, str | None] | None:
    """When a dialogue stored before says another "who is who" than `conv` (imported again with another
    answer), that earlier one: `conv` takes it, so the pages of one conversation never disagree."""
    from app.importers.people import People

    if conv.people is None:
        return None
    for page in store.pages.list_pages(conversation_id=cid, limit=1):
        earlier = People.from_meta(page.meta)
        if earlier is not None and earlier != conv.people:
            conv.people = earlier
            return earlier.meta()
    return None


class _WrittenMeanwhile(Exception):
    """Raised inside the transaction (rolling it back) when the conversation appeared since it was looked up."""


def _write_turns(
    store: MemoryStore,
    conv: ParsedConversation,
    existing: Conversation | None,
    turns: list[Turn],
    parent_id: int | None,
    plans: list[PagePlan],
    draft: list[dict[str, Any]],
    issues: list[ImportIssue],
    max_side_chars: int,
) -> int:
    """The SQL part of `write_conversation`, inside its transaction; returns the conversation id."""
    # the write lock is held now: what another import wrote while this one embedded is there to see
    if existing is None:
        if store.conversations.find_conversation(conv.source, conv.external_id) is not None:
            raise _WrittenMeanwhile
        cid = store.conversations.create_conversation(
            conv.title, created_at=conv.created_at, source=conv.source, external_id=conv.external_id
        )
    else:
        cid = existing.id
        if _stored_turn_ids(store, cid) & {t.turn_id for t in turns}:
            raise _WrittenMeanwhile
    ids: list[int] = []
    for t in turns:
        meta = {"turn_id": t.turn_id, "import_source": conv.source, **t.meta}
        mid = store.conversations.add_message(
            cid, t.role, t.text, parent_id=parent_id, created_at=t.timestamp, status=t.status, meta=meta
        )
        ids.append(mid)
        parent_id = mid
    people = conv.people.meta() if conv.people is not None else None
    items, capped = page_items(turns, ids, plans, source=conv.source, limit=max_side_chars, people=people)
    for it, drafted in zip(items, draft):
        it["embedding"] = drafted["embedding"]
    for n in capped:
        first = turns[plans[n].indices[0]]
        issues.append(
            ImportIssue(
                f"{conv.position}, turn {first.turn_id}",
                f"message of {max(len(turns[i].text) for i in plans[n].indices):,} characters: imported in full, "
                f"but its memory page keeps only the first {max_side_chars:,}",
                skipped=False,
            )
        )
    store.intake.add_pages(cid, items)
    return cid


def write_all(
    store: MemoryStore,
    parsed: ParseResult,
    *,
    path: str = "",
    progress: ImportProgress | None = None,
    conversations: Sequence[ParsedConversation] | None = None,
) -> ImportReport:
    convs = list(conversations if conversations is not None else parsed.conversations)
    report = ImportReport(path=path, format=parsed.format, issues=list(parsed.issues), records_seen=parsed.records_seen)
    start = time.monotonic()
    with import_claim(store, convs, Path(path).name if path else "this file"):  # a second import fails here
        for conv in convs:
            if progress is not None:
                progress.note = conv.title[:40]
            outcome = write_conversation(
                store,
                conv,
                issues=report.issues,
                on_turns=(lambda n: progress.update(n)) if progress is not None else None,
            )
            report.outcomes.append(outcome)
        report.profile_added, report.profile_source = write_profile(store, parsed), parsed.profile_source
        report.instructions = "\n".join(parsed.reply_style)
    report.seconds = time.monotonic() - start
    return report


def write_profile(store: MemoryStore, parsed: ParseResult) -> int:
    """What the user wrote about themselves in the exporting app, into the persona: each sentence of an
    "about me" text a fact about the user, each sentence of a "how to respond" text a "reply style"
    trait (a changed text updates the earlier item, which keeps its history). What is held word for word
    already is left alone, so importing the file again adds nothing. Returns how many items changed."""
    from memory_core.text import sentences

    src = parsed.profile_source
    adders = (
        (parsed.about_user, lambda s: store.persona.add_knowledge("user", s, source=src, skip_existing=True)),
        (parsed.reply_style, lambda s: store.persona.add_trait("reply style", s, source=src, skip_existing=True)),
    )
    added = 0
    for texts, add in adders:
        for sentence in (s for text in texts for s in sentences(text)):
            try:
                added += add(sentence) is not None
            except ValueError:  # not a usable fact (a fragment, a placeholder)
                continue
    return added
