"""`mnemo search "…"`: run retrieval without chatting; print what would be recalled and why."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from app.commands._common import print_json

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    from memory_core import RetrievalBudget
    from memory_core.types import Trait

    store = ctx.open_store()
    try:
        retrieval = store.retrieve(
            args.query, args.conversation, RetrievalBudget(pages=args.limit, knowledge=args.limit), record_visits=False
        )
        if args.json:
            trace = retrieval.to_trace()
            for hit, row in zip(retrieval.pages, trace["pages"]):
                row["user_text"], row["assistant_text"] = hit.page.user_text, hit.page.assistant_text
            print_json(trace)
            return 0
        for title, hits in (("Persona", retrieval.traits), ("Knowledge", retrieval.knowledge)):
            if hits:
                print(f"== {title}")
                for ranked in hits:
                    item = ranked.item
                    text = f"{item.dimension}: {item.value}" if isinstance(item, Trait) else item.text
                    print(f"  {ranked.score:6.3f}  {text}   ({ranked.reason})")
        print(
            f"== Pages ({len(retrieval.pages)}; each side with its place among the recalled turns, which a "
            f"reply quotes best first)"
        )
        place = {}
        for i, u in enumerate(retrieval.sides, 1):
            for side in ("user", "assistant") if u.side == "page" else (u.side,):
                place[(u.hit.page.id, side)] = i
        for h in retrieval.pages:
            p = h.page
            when = dt.datetime.fromtimestamp(p.timestamp).strftime("%Y-%m-%d %H:%M") if p.timestamp else "?"
            print(f"  {h.score:6.3f}  page {p.id} [{h.tier}] {when}  — {h.reason}")
            for who, side, text in (("User", "user", p.user_text), ("Assistant", "assistant", p.assistant_text)):
                if text:
                    short = " ".join(text.split())
                    turn = f"#{place[(p.id, side)]} " if (p.id, side) in place else ""
                    print(f"          {turn}{who}: {short[:160]}{'…' if len(short) > 160 else ''}")
        for h in retrieval.skipped:
            print(f"  skipped page {h.page.id}: {h.reason}")
        if retrieval.common_words:
            print(f"(on most pages, so half left out of the query's meaning: {', '.join(retrieval.common_words)})")
        timings = ", ".join(f"{k} {v:.1f} ms" for k, v in retrieval.timings_ms.items())
        print(f"({timings})")
        return 0
    finally:
        store.close()


def register(sub: SubParsers) -> None:
    p = sub.add_parser("search", help="show what memory recalls for a query, with scores and reasons")
    p.add_argument("query")
    p.add_argument("--conversation", type=int, help="include this conversation's short-term memory")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)
