"""Turning a conversation's turns into memory pages.

A page is one user side and the assistant side that follows it. Rules:

- Consecutive turns of the same speaker (in one session) merge into one side, joined by
  a blank line: in a ChatGPT export an assistant reply interrupted by a tool call is one
  reply, and two user messages in a row are one request. All their turn ids are kept.
- An assistant side with no user side before it (a session that opens with the assistant)
  makes a page with an empty user side; a user side with no reply (the end of a session or
  of the export) makes a page with an empty assistant side. Nothing is dropped.
- A page never spans two sessions (LoCoMo sessions are days apart).
- The page's timestamp is that of its first turn. Its meta holds `turn_ids` (in order: the
  user side's first, `user_turns` of them) and `message_ids` (every message the page covers).
- A dialogue between two named people gives each of its pages `people` (who is on each side and which
  of them is the app's user, app.importers.people); the user's own chats carry none.
- Each side's text is capped at `MAX_SIDE_CHARS` for the memory (it is what gets embedded,
  keyword-indexed and quoted back into prompts); the message table keeps the full text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.importers.base import Turn

MAX_SIDE_CHARS = 16_000


@dataclass
class PagePlan:
    user: list[int] = field(default_factory=list)  # indices into the turn list
    assistant: list[int] = field(default_factory=list)

    @property
    def indices(self) -> list[int]:
        return self.user + self.assistant


def plan_pages(turns: Sequence[Turn]) -> list[PagePlan]:
    """Group turn indices into pages (see the module doc for the rules)."""
    # 1. blocks of consecutive same-role turns within a session
    blocks: list[tuple[str, int, list[int]]] = []
    for i, t in enumerate(turns):
        if blocks and blocks[-1][0] == t.role and blocks[-1][1] == t.session:
            blocks[-1][2].append(i)
        else:
            blocks.append((t.role, t.session, [i]))
    # 2. pair a user block with the assistant block right after it (same session)
    pages: list[PagePlan] = []
    j = 0
    while j < len(blocks):
        role, session, idx = blocks[j]
        if role == "user":
            page = PagePlan(user=idx)
            if j + 1 < len(blocks) and blocks[j + 1][0] == "assistant" and blocks[j + 1][1] == session:
                page.assistant = blocks[j + 1][2]
                j += 1
            pages.append(page)
        else:
            pages.append(PagePlan(assistant=idx))
        j += 1
    return pages


def cap_text(text: str, limit: int = MAX_SIDE_CHARS) -> tuple[str, bool]:
    """Cut `text` to about `limit` characters at a whitespace, saying how much was cut."""
    if len(text) <= limit:
        return text, False
    cut = text.rfind(" ", int(limit * 0.9), limit)
    cut = cut if cut > 0 else limit
    return f"{text[:cut].rstrip()}\n[… truncated: the original message has {len(text):,} characters]", True


def page_items(
    turns: Sequence[Turn],
    message_ids: Sequence[int],
    plans: Sequence[PagePlan],
    *,
    source: str,
    limit: int = MAX_SIDE_CHARS,
    people: dict[str, str | None] | None = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """`store.add_pages` items for `plans`; also the indices of pages whose text was capped."""
    items: list[dict[str, Any]] = []
    capped: list[int] = []
    for n, plan in enumerate(plans):
        user_text = "\n\n".join(turns[i].text for i in plan.user)
        assistant_text = "\n\n".join(turns[i].text for i in plan.assistant)
        user_text, cut_u = cap_text(user_text, limit)
        assistant_text, cut_a = cap_text(assistant_text, limit)
        meta: dict[str, Any] = {
            "turn_ids": [turns[i].turn_id for i in plan.indices],
            "user_turns": len(plan.user),
            "message_ids": [int(message_ids[i]) for i in plan.indices],
            "import_source": source,
        }
        if people is not None:
            meta["people"] = dict(people)
        if cut_u or cut_a:
            meta["truncated"] = True
            capped.append(n)
        items.append(
            {
                "user_text": user_text,
                "assistant_text": assistant_text,
                "timestamp": turns[plan.indices[0]].timestamp,
                "user_message_id": int(message_ids[plan.user[0]]) if plan.user else None,
                "assistant_message_id": int(message_ids[plan.assistant[0]]) if plan.assistant else None,
                "meta": meta,
            }
        )
    return items, capped
