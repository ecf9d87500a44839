"""`mnemo memory spaces …`: the memory's named spaces (memory_core.spaces.component). list, create, rename,
delete, move (pages, facts or a whole chat), copy (pages, facts, traits), merge, and `chat` (the space a
chat writes to and reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.commands._common import fail, print_json
from app.operations import spaces as ops

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext
    from memory_core import MemoryStore


def add_parser(acts: SubParsers) -> None:
    """The `spaces` action of `mnemo memory` (its own sub-actions)."""
    p = acts.add_parser(
        "spaces",
        help="named parts of the memory (Personal, Work): list, create, rename, delete, move, copy, merge, "
        "a chat's space",
        description="A chat writes to one space and recalls from its own space, or from every space. "
        "Forgetting in one space never touches another.",
    )
    sa = p.add_subparsers(dest="space_action")
    a = sa.add_parser("list", help="every space with its pages, facts, traits and chats")
    a.add_argument("--json", action="store_true")
    a = sa.add_parser("create", help="a new, empty space")
    a.add_argument("name")
    a = sa.add_parser("rename", help="rename a space")
    a.add_argument("space", help="its name or id")
    a.add_argument("name", help="the new name")
    a = sa.add_parser("delete", help="delete a space (one holding memory only with --forget)")
    a.add_argument("space", help="its name or id")
    a.add_argument("--forget", action="store_true", help="forget the memory it holds with it")
    a = sa.add_parser("move", help="move pages, facts or a chat's pages to another space")
    a.add_argument("kind", choices=("page", "knowledge", "trait", "chat"))
    a.add_argument("ids", type=int, nargs="+")
    a.add_argument("--to", required=True, help="the space's name or id")
    a = sa.add_parser("copy", help="copy pages, facts or traits to another space (the originals stay)")
    a.add_argument("kind", choices=("page", "knowledge", "trait"))
    a.add_argument("ids", type=int, nargs="+")
    a.add_argument("--to", required=True, help="the space's name or id")
    a = sa.add_parser(
        "merge",
        help="merge space A into space B: what B holds already is kept once, a fact close to one of B's "
        "confirms or updates it (a pinned one is left and reported)",
    )
    a.add_argument("source")
    a.add_argument("target")
    a.add_argument("--dry-run", action="store_true", help="say what the merge would do, change nothing")
    a.add_argument("--json", action="store_true", help="the counts and conflicts as JSON")
    a = sa.add_parser("chat", help="the space a chat writes to, and whether it reads every space")
    a.add_argument("chat", type=int, help="the chat's id (see `mnemo chats list`)")
    a.add_argument("space", nargs="?", help="the space it writes to from now on (default: unchanged)")
    a.add_argument("--read", choices=("own", "all"), help="recall from its own space only, or from all")


def run(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    action = getattr(args, "space_action", None) or "list"
    try:
        return _ACTIONS[action](store, args)
    except ops.SpaceError as exc:
        return fail(str(exc))


def _list(store: MemoryStore, args: argparse.Namespace) -> int:
    rows = ops.spaces(store)
    if getattr(args, "json", False):
        print_json([vars(s) for s in rows])
        return 0
    for s in rows:
        print(f"{s.id:>3}  {s.name:<24} {s.pages:>7} pages {s.facts:>5} facts {s.traits:>4} traits {s.chats:>5} chats")
    return 0


def _create(store: MemoryStore, args: argparse.Namespace) -> int:
    sid = ops.create_space(store, args.name)
    print(f"space {sid} {store.spaces.name_of(sid)!r} created")
    return 0


def _rename(store: MemoryStore, args: argparse.Namespace) -> int:
    sid = store.spaces.resolve(args.space)
    store.spaces.rename(sid, args.name)
    print(f"space {sid} is now {store.spaces.name_of(sid)!r}")
    return 0


def _delete(store: MemoryStore, args: argparse.Namespace) -> int:
    sid = store.spaces.resolve(args.space)
    name = store.spaces.name_of(sid)
    n = store.spaces.delete(sid, forget=args.forget)
    print(f"space {name!r} deleted" + (f", {n} items forgotten with it" if n else ""))
    return 0


def _move(store: MemoryStore, args: argparse.Namespace) -> int:
    to = store.spaces.resolve(args.to)
    if args.kind == "page":
        n = store.spaces.move_pages(args.ids, to)
    elif args.kind == "chat":
        n = sum(store.spaces.move_chat(cid, to) for cid in args.ids)
    else:
        n = store.spaces.move_facts(args.kind, args.ids, to)
    what = "pages" if args.kind in ("page", "chat") else ("facts" if args.kind == "knowledge" else "traits")
    print(f"{n} {what} moved to {store.spaces.name_of(to)!r}")
    return 0


def _copy(store: MemoryStore, args: argparse.Namespace) -> int:
    new = ops.copy_items(store, args.kind, args.ids, args.to)
    what = {"page": "pages", "knowledge": "facts", "trait": "traits"}[args.kind]
    to = store.spaces.name_of(store.spaces.resolve(args.to))
    print(f"{len(new)} {what} copied to {to!r}" + (f" (new ids {', '.join(map(str, new))})" if new else ""))
    return 0


def _merge(store: MemoryStore, args: argparse.Namespace) -> int:
    result = ops.merge_spaces(store, args.source, args.target, dry_run=args.dry_run)
    if args.json:
        print_json(result.to_json())
    else:
        print(ops.describe_merge(result))
    return 0


def _chat(store: MemoryStore, args: argparse.Namespace) -> int:
    if store.conversations.get_conversation(args.chat) is None:
        return fail(f"no chat {args.chat}")
    if args.space is not None or args.read is not None:
        ops.set_chat_space(store, args.chat, args.space, read_all=None if args.read is None else args.read == "all")
    sid, name, read_all = ops.chat_space(store, args.chat)
    print(f"chat {args.chat} writes to {name!r} and reads {'every space' if read_all else 'that space only'}")
    return 0


_ACTIONS = {
    "list": _list,
    "create": _create,
    "rename": _rename,
    "delete": _delete,
    "move": _move,
    "copy": _copy,
    "merge": _merge,
    "chat": _chat,
}
