"""`mnemo chats list|export|rename|delete|forget`: the conversations in this memory, one of them as a
file, a new title, or gone; what memory learned from a chat stays, as in the app, unless `forget` (or
`delete --forget`) removes it (app.operations.chat_memory says what that takes).

`export` writes the chat's newest branch as a Markdown transcript (which `mnemo ingest` reads
back) or as JSON (every field); see app.operations.chat_export.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

from app.commands._common import fail, print_json
from app.operations import chats as operations
from app.wording import count

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext
    from memory_core import MemoryStore


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _list(store: MemoryStore, args: argparse.Namespace) -> int:
    convs = store.conversations.list_conversations(limit=args.limit)
    rows: list[dict[str, Any]] = [
        {
            "id": c.id,
            "title": c.title,
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "source": c.source,
            "messages": len(store.conversations.list_messages(c.id)),
        }
        for c in convs
    ]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no chats yet")
    for r in rows:
        print(f"{r['id']:>6}  {_when(r['updated_at'])}  {r['messages']:>5} msgs  {r['title']}")
    return 0


def _export(store: MemoryStore, args: argparse.Namespace) -> int:
    from app.operations.chat_export import format_for, render_chat

    to_stdout = args.file in (None, "-")
    try:
        fmt = format_for(args.file or "-", args.format)
        if to_stdout:
            sys.stdout.write(render_chat(store, args.id, fmt)[2])
            return 0
        result = operations.export_chat(store, args.id, args.file, fmt=fmt)
    except ValueError as exc:
        return fail(str(exc))
    except LookupError:
        return fail(f"no chat with id {args.id} (mnemo chats list shows them)", 1)
    except OSError as exc:
        return fail(f"could not write {args.file}: {exc.strerror or exc} (nothing was written)", 1)
    print(f"exported “{result.title}”: {count(result.messages, 'message')} to {result.path} ({result.bytes:,} bytes)")
    return 0


def _rename(store: MemoryStore, args: argparse.Namespace) -> int:
    try:
        title = operations.rename_chat(store, args.id, args.title)
    except LookupError:
        return fail(f"no chat with id {args.id} (mnemo chats list shows them)", 1)
    except ValueError as exc:
        return fail(str(exc))
    print(f"chat {args.id} is now “{title}”")
    return 0


def _refused(args: argparse.Namespace, question: str, word: str, unasked: str, no: str) -> int | None:
    """Ask at a terminal unless --yes: None to go on, else the exit code (after saying why)."""
    if args.yes:
        return None
    if not sys.stdin.isatty():
        return fail(f"{unasked}; pass --yes to confirm")
    return None if input(f"{question} Type '{word}': ").strip() == word else fail(no, 1)


def _delete(store: MemoryStore, args: argparse.Namespace) -> int:
    conv = store.conversations.get_conversation(args.id)
    if conv is None:
        return fail(f"no chat with id {args.id} (mnemo chats list shows them)", 1)
    also = ""
    if args.forget:
        held = operations.chat_taught(store, args.id)
        also = "" if held.empty else f", and forget what memory learned from it ({held.describe()})"
    refused = _refused(
        args,
        f"Delete “{conv.title}” and its messages{also}?",
        "delete",
        f"deleting “{conv.title}” removes its messages{also}",
        "not deleted",
    )
    if refused is not None:
        return refused
    gone = operations.delete_chat(store, args.id, forget=args.forget)
    if gone is None:
        print(
            f"deleted “{conv.title}”; what memory learned from it stays (forget it in the memory inspector, "
            "or next time: mnemo chats delete ID --forget)"
        )
    else:
        print(f"deleted “{conv.title}”" + ("" if gone.empty else f" and forgot {gone.describe()}"))
    return 0


def _forget(store: MemoryStore, args: argparse.Namespace) -> int:
    conv = store.conversations.get_conversation(args.id)
    if conv is None:
        return fail(f"no chat with id {args.id} (mnemo chats list shows them)", 1)
    held = operations.chat_taught(store, args.id)
    if held.empty:
        if args.json:
            print_json(held.to_json())
        else:
            print(f"memory holds nothing from “{conv.title}”")
        return 0
    refused = _refused(
        args,
        f"Forget what memory learned from “{conv.title}”: {held.describe()}? The chat stays.",
        "forget",
        f"forgetting what memory learned from “{conv.title}” removes {held.describe()}",
        "nothing forgotten",
    )
    if refused is not None:
        return refused
    gone = operations.forget_chat(store, args.id)
    if args.json:
        print_json(gone.to_json())
    else:
        print(
            f"forgot what memory learned from “{conv.title}”: {gone.describe()}; the chat stays "
            "(its new messages are remembered again unless it is incognito)"
        )
    return 0


ACTIONS = {"list": _list, "export": _export, "rename": _rename, "delete": _delete, "forget": _forget}


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    store = ctx.open_store()
    try:
        code = ACTIONS[args.action](store, args)
        if code == 0 and args.action in ("delete", "forget"):
            from app.commands.memory import after_forget

            after_forget(ctx, store, sys.stderr if getattr(args, "json", False) else None)
        return code
    finally:
        store.close()


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "chats", help="list, export (Markdown or JSON), rename or delete chats, or forget what memory learned from one"
    )
    acts = p.add_subparsers(dest="action", required=True)
    a = acts.add_parser("list", help="the chats, most recent first: id, last change, messages, title")
    a.add_argument("--limit", type=int, default=100)
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=run)
    a = acts.add_parser("export", help="write one chat (its newest branch) as Markdown or JSON")
    a.add_argument("id", type=int, help="the chat's id (mnemo chats list)")
    a.add_argument("file", nargs="?", help="the file to write (.md or .json); omitted or -: standard output")
    a.add_argument("--format", choices=["markdown", "md", "json"], help="default: from the file name (Markdown)")
    a.set_defaults(func=run)
    a = acts.add_parser("rename", help="give a chat a new title")
    a.add_argument("id", type=int)
    a.add_argument("title")
    a.set_defaults(func=run)
    a = acts.add_parser("delete", help="delete a chat and its messages (memory learned from it stays unless --forget)")
    a.add_argument("id", type=int)
    a.add_argument("--forget", action="store_true", help="also forget what memory learned from it (see forget)")
    a.add_argument("--yes", action="store_true", help="do not ask")
    a.set_defaults(func=run)
    a = acts.add_parser(
        "forget",
        help="forget what memory learned from a chat (its pages in every tier, persona "
        "items drawn only from them, facts it asked to remember); the chat stays",
    )
    a.add_argument("id", type=int)
    a.add_argument("--yes", action="store_true", help="do not ask")
    a.add_argument("--json", action="store_true", help="what was forgotten, as JSON")
    a.set_defaults(func=run)
