"""`mnemo memory …`: list / show / add / forget / pin / wipe / pause / events / stats / export / import / imports /
undo-import / backup / backups / restore / activation."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.commands import adapters as adapter_commands
from app.commands import spaces as space_commands
from app.commands._common import fail, print_json
from app.operations import chats as operations
from app.operations import memory as memory_verbs
from app.wording import heat
from memory_core.text import one_line
from memory_core.types import Knowledge, Page, Segment, Trait

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext
    from memory_core import MemoryStore

KINDS = ("page", "segment", "trait", "knowledge")
MemoryItem = Page | Segment | Trait | Knowledge  # one of each of KINDS


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "?"


def _row(item: MemoryItem) -> str:
    if isinstance(item, Page):
        return f"page {item.id:>6} [{item.tier}] {_when(item.timestamp)} {'📌' if item.pinned else ' '} {one_line(item.user_text + ' | ' + item.assistant_text, 90)}"
    if isinstance(item, Segment):
        return (
            f"segment {item.id:>5} [{item.tier}] heat {heat(item.heat):>6} visits {item.n_visit:>3} "
            f"pages {item.page_count:>3} {'📌' if item.pinned else ' '} {one_line(item.summary, 70)}"
        )
    if isinstance(item, Trait):
        return f"trait {item.id:>5} {item.dimension}: {one_line(item.value, 70)} (conf {item.confidence:.2f}, v{item.version})"
    return f"knowledge {item.id:>5} ({item.owner}) {one_line(item.text, 80)} (v{item.version})"


def _list(store: MemoryStore, args: argparse.Namespace) -> Sequence[MemoryItem]:
    if args.kind == "page":
        return store.pages.list_pages(
            tier=args.tier,
            conversation_id=args.conversation,
            text=args.text,
            deleted_chats=args.deleted_chats,
            limit=args.limit,
            offset=args.offset,
        )
    if args.kind == "segment":
        return store.segments.list_segments(tier=args.tier, limit=args.limit, offset=args.offset)
    if args.kind == "trait":
        return store.persona.list_traits(limit=args.limit, offset=args.offset)
    return store.persona.list_knowledge(limit=args.limit, offset=args.offset)


def _get(store: MemoryStore, kind: str, item_id: int) -> MemoryItem | None:
    getter: Callable[[int], MemoryItem | None] = {
        "page": store.pages.get,
        "segment": store.segments.get,
        "trait": store.persona.get_trait,
        "knowledge": store.persona.get_knowledge,
    }[kind]
    return getter(item_id)


def _print_record(data: dict, as_json: bool) -> None:
    if as_json:
        print_json(data)
    else:
        for key, value in data.items():
            print(f"{key}: {value}")


def _add(store: MemoryStore, args: argparse.Namespace) -> int:
    """`mnemo memory add fact TEXT…` / `add trait DIMENSION VALUE…`: remember something directly."""
    words = [w for w in args.words if w.strip()]
    try:
        if args.what == "fact":
            done = operations.remember(store, " ".join(words), about=args.about, pin=args.pin)
        else:
            if len(words) < 2:
                return fail("a trait needs a dimension and a value, e.g. `mnemo memory add trait likes jazz`")
            done = operations.remember_a_trait(store, words[0], " ".join(words[1:]), pin=args.pin)
    except ValueError as exc:
        return fail(f"nothing remembered: {exc}")
    if args.json:
        print_json(dataclasses.asdict(done))
    else:
        print(done.describe())
    return 0


def _export(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    if args.cube:
        return _export_cube(ctx, store, args)
    if args.file is None:
        return fail("give the file to write (.json or .md), or --cube FILE for a memory cube")
    if args.chat is not None or args.segment is not None or args.since or args.until or args.persona_only:
        return fail(
            "--chat, --segment, --since, --until and --persona-only choose what goes into a cube: add --cube FILE"
        )
    shown = {"at": 0.0}

    def progress(done: int, total: int) -> None:
        import time

        now = time.monotonic()
        if now - shown["at"] > 0.5 or done == total:
            shown["at"] = now
            print(f"\rexporting… {done:,}/{total:,}", end="", file=sys.stderr, flush=True)

    try:
        result = operations.export_memory(
            store, args.file, fmt=args.format, on_progress=progress if sys.stderr.isatty() else None
        )
    except OSError as exc:
        return fail(f"could not write {args.file}: {exc.strerror or exc} (nothing was written)", 1)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"exported {operations.describe_memory_export(result)} to {result.path} ({result.bytes / 1e6:.1f} MB)")
    return 0


def _progress_line(what: str, done: int, total: int, shown: dict) -> None:
    import time

    now = time.monotonic()
    if sys.stderr.isatty() and (now - shown.get("at", 0.0) > 0.5 or done == total):
        shown["at"] = now
        print(f"\r{what}… {done:,}/{total:,}   ", end="", file=sys.stderr, flush=True)
        shown["said"] = True


def _end_progress(shown: dict) -> None:
    if shown.get("said"):
        print(file=sys.stderr)


def _export_cube(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    from app.operations.cubes import export_cube, parse_when
    from memory_core.cubes import CubeError, CubeSelection

    if args.file is not None:
        return fail("give the cube's file once: --cube FILE")
    if args.persona_only and (args.chat is not None or args.segment is not None or args.since or args.until):
        return fail("--persona-only takes the whole persona: leave out --chat, --segment, --since and --until")
    try:
        selection = CubeSelection(
            chat_id=args.chat,
            segment_id=args.segment,
            since=parse_when(args.since) if args.since else None,
            until=parse_when(args.until, end=True) if args.until else None,
            persona_only=args.persona_only,
            space_id=store.spaces.resolve(args.space) if args.space else None,
        )
    except ValueError as exc:
        return fail(str(exc))
    shown: dict = {}
    try:
        result = export_cube(
            ctx,
            store,
            args.cube,
            selection,
            on_progress=lambda d, t: _progress_line("exporting", d, t, shown),
            extras=adapter_commands.cube_extras(ctx, args.adapters),
        )
    except CubeError as exc:
        return fail(f"nothing exported: {exc}", 1)
    except OSError as exc:
        return fail(f"could not write {args.cube}: {exc.strerror or exc} (nothing was written)", 1)
    finally:
        _end_progress(shown)
    vectors = "with vectors" if result.vectors else "without vectors (an import embeds its pages again)"
    print(
        f"exported {selection.describe()} as a memory cube: {result.describe()}, {vectors}, to {result.path} "
        f"({result.bytes / 1e6:.1f} MB)"
    )
    return 0


def _import_cube(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    from memory_core.cubes import CubeError

    path = Path(args.file)
    shown: dict = {}
    try:
        if args.dry_run:
            plan = store.cubes.plan(path)
            if args.json:
                print_json(plan.to_json())
            else:
                print(plan.describe())
                print("(a dry run: nothing was imported)")
            return 0
        if args.space:
            from app.operations.spaces import import_as_space

            record, _sid = import_as_space(
                store, path, args.space, on_progress=lambda w, d, t: _progress_line(w, d, t, shown)
            )
        else:
            record = store.cubes.import_cube(path, on_progress=lambda w, d, t: _progress_line(w, d, t, shown))
    except CubeError as exc:
        _end_progress(shown)
        return fail(f"not imported: {exc}; memory was not changed", 1)
    except space_commands.ops.SpaceError as exc:
        return fail(f"not imported: {exc}")
    except KeyboardInterrupt:
        _end_progress(shown)
        return fail(
            "interrupted: what was written is kept and listed by `mnemo memory imports`; run the same command again "
            "to finish, or undo it with `mnemo memory undo-import ID`",
            130,
        )
    _end_progress(shown)
    if args.json:
        print_json(record.to_json())
    else:
        print(f"{record.describe()}")
        for line in record.counts.lines(done=True):
            print(f"  {line}")
    if record.status == "done":
        adapter_commands.import_from_cube(ctx, path, quiet=args.json)  # the adapters it carries (parametric/)
    if record.status != "done":
        return fail(
            f"import {record.id} stopped before it was finished ({record.error or 'see the log'}); run the same "
            f"command again to finish it, or undo it with `mnemo memory undo-import {record.id}`",
            1,
        )
    return 0


def _imports(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    records = store.cubes.imports()
    if args.json:
        print_json([r.to_json() for r in records])
    elif not records:
        print("no memory cube was imported into this memory")
    for r in [] if args.json else records:
        print(r.describe())
    return 0


def _undo_import(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    from memory_core.cubes import CubeError

    try:
        report = store.cubes.undo(args.id)
    except CubeError as exc:
        return fail(f"nothing undone: {exc}", 1)
    print(report.describe())
    after_forget(ctx, store)
    return 0


def _list_backups(ctx: AppContext, args: argparse.Namespace) -> int:
    from app.operations import backups
    from memory_core import read_forgotten_spans

    if args.drop_forgotten:
        store = ctx.open_store()
        try:
            if not backups.holding_forgotten(ctx.paths, store.db.purge.spans()):
                print("no backup holds forgotten memory")
            else:
                _drop_backups(ctx, store, sys.stdout)
        finally:
            store.close()
        return 0
    found = backups.list_backups(ctx.paths)
    holding = set(backups.holding_forgotten(ctx.paths, read_forgotten_spans(ctx.paths.db_file)))
    rows: list[dict[str, Any]] = [
        {"path": str(p), "bytes": p.stat().st_size, "made": backups.made_at(p), "holds_forgotten": p in holding}
        for p in found
    ]
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"no backups yet in {backups.backup_dir(ctx.paths)}")
    for r in [] if args.json else rows:
        note = "  (may hold forgotten memory)" if r["holds_forgotten"] else ""
        print(f"{r['made']}  {r['bytes'] / 1e6:8.1f} MB  {r['path']}{note}")
    if holding and not args.json:
        print("delete the backups that may hold forgotten memory with: mnemo memory backups --drop-forgotten")
    return 0


def after_forget(ctx: AppContext, store: MemoryStore, out: TextIO | None = None) -> None:
    """After a forget (or a wipe, or a deleted chat): name the backups that may still hold what went and,
    at a terminal, offer to delete them (a new backup of memory as it is now is made first)."""
    from app.operations import backups

    out = out or sys.stdout
    held = backups.holding_forgotten(ctx.paths, store.db.purge.spans())
    if not held:
        return
    said = f"{backups.describe_holding(held)} may still hold what was forgotten"
    if not (sys.stdin.isatty() and out.isatty()):
        print(f"{said}; delete them with: mnemo memory backups --drop-forgotten", file=out)
        return
    if input(f"{said}. Delete them and back up memory as it is now? [y/N] ").strip().lower() in ("y", "yes"):
        _drop_backups(ctx, store, out)


def _drop_backups(ctx: AppContext, store: MemoryStore, out: TextIO) -> None:
    from app.operations import backups

    gone, fresh = backups.drop_forgotten(store, ctx.paths, keep=ctx.settings.backup_keep)
    print(
        f"deleted {backups.describe_holding(gone)}" + (f"; memory backed up to {fresh}" if fresh is not None else ""),
        file=out,
    )


def _restore(ctx: AppContext, args: argparse.Namespace) -> int:
    """Without opening the current database: it may be the damaged one."""
    from app.operations import backups

    src = Path(args.file)
    if not src.is_file():
        return fail(f"no such backup: {src}", 1)
    from app.runtime.instance_lock import app_is_running, held_message

    if app_is_running(ctx.paths.data_dir):
        return fail(held_message(ctx.paths.data_dir, "restore swaps the database file"), 1)
    if not args.yes:
        if not sys.stdin.isatty():
            return fail(
                "restore replaces the memory database (the current one is kept aside); close Mnemo, "
                "then pass --yes to confirm"
            )
        if input("Close Mnemo first. Type 'restore' to put this backup back: ").strip() != "restore":
            return fail("not restored", 1)
    try:
        aside = backups.restore(ctx.paths, src)
    except backups.UnusableBackupError as exc:
        return fail(f"not restored: {exc}; the memory was left as it was", 1)
    print(f"restored {src} as {ctx.paths.db_file}; the database it replaced is kept as {aside}")
    return 0


def _backup(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    from app.operations import backups

    path = (
        store.backup(args.file)
        if args.file
        else backups.make_backup(store, ctx.paths, keep=max(ctx.settings.backup_keep, 1))
    )
    print(f"memory backed up to {path} ({Path(path).stat().st_size / 1e6:.1f} MB)")
    return 0


def _list_items(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    items = _list(store, args)
    if args.json:
        print_json([dataclasses.asdict(i) for i in items])
    else:
        for item in items:
            print(_row(item))
    return 0


def _show(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    item = _get(store, args.kind, args.id)
    if item is None:
        return fail(f"no {args.kind} with id {args.id}", 1)
    data = dataclasses.asdict(item)
    if args.kind in ("trait", "knowledge"):
        data["versions"] = [dataclasses.asdict(v) for v in store.persona.item_versions(args.kind, args.id)]
    origin = store.cubes.origin(args.kind, args.id)
    if origin is not None:  # it came with a memory cube
        data["imported"] = origin.describe()
    _print_record(data, args.json)
    return 0


def _forget(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    print(memory_verbs.forget(store, args.kind, args.ids).describe())
    after_forget(ctx, store)
    return 0


def _pin(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    done = memory_verbs.pin(store, args.kind, args.id, not args.unpin)
    print(done.describe())
    return 0 if done.found else 1


def _wipe(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            return fail("wipe deletes all memory; pass --yes to confirm")
        if input("Type 'wipe' to delete all memory: ").strip() != "wipe":
            return fail("not wiped", 1)
    store.curation.wipe_memory()
    print("all memory wiped (conversations are kept)")
    after_forget(ctx, store)
    return 0


def _pause(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    on = args.state == "on"
    operations.set_memory_paused(store, on, cid=args.conversation or None)
    print(
        f"memory {'paused' if on else 'resumed'}"
        + (f" for conversation {args.conversation}" if args.conversation else "")
    )
    return 0


def _events(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    if args.segment is not None:
        events = store.event_log.segment_events(args.segment)[-args.limit :]
    else:
        kinds = args.kind or None
        events = store.event_log.events(
            since_id=args.since or 0, limit=args.limit, kinds=kinds, newest=args.since is None
        )
    if args.json:
        print_json([dataclasses.asdict(e) for e in events])
    else:
        for e in events:
            print(f"{e.id:>6} {_when(e.at)} {e.kind:<18} {e.summary}")
    return 0


def _stats(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    _print_record(store.stats(), args.json)
    return 0


def _activation(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    """`activation [list|clear]`: the chat model's saved prompt states (app.chat.activation_cache)."""
    from app.chat import activation_cache as ac

    cache = ac.open_cache(ctx.paths.data_dir)
    if args.what == "clear":
        n, size = ac.clear(cache)
        print(f"Deleted {n} saved state{'' if n == 1 else 's'} ({ac.human_bytes(size)}).")
        return 0
    got = ac.summary(cache, store)
    if args.json:
        print_json(got.to_dict())
        return 0
    print(f"Activation memory: {got.headline()}")
    for r in got.rows:
        hit = _when(r.last_hit) if r.last_hit else "never"
        print(
            f"  {one_line(r.chat, 32):<32} {r.tokens:>6,} tokens {ac.human_bytes(r.size):>10}  built {_when(r.built_at)}"
            f"  last hit {hit:<16} {r.model}" + (f" (n_ctx {r.n_ctx})" if r.n_ctx else "")
        )
    return 0


# The actions that work on an open store: action -> handler(ctx, store, args), returning the exit code.
_STORE_ACTIONS: dict[str, Callable[[Any, Any, Any], int]] = {
    "backup": _backup,
    "list": _list_items,
    "show": _show,
    "add": lambda ctx, store, args: _add(store, args),
    "forget": _forget,
    "pin": _pin,
    "wipe": _wipe,
    "pause": _pause,
    "events": _events,
    "export": _export,
    "import": _import_cube,
    "imports": _imports,
    "undo-import": _undo_import,
    "stats": _stats,
    "activation": _activation,
    "spaces": space_commands.run,
}


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    if args.action == "backups":
        return _list_backups(ctx, args)
    if args.action == "restore":
        return _restore(ctx, args)  # without opening the store: it may be the damaged one
    handler = _STORE_ACTIONS.get(args.action)
    store = ctx.open_store()
    try:
        if handler is None:
            return fail(f"unknown action {args.action}")
        return handler(ctx, store, args)
    finally:
        store.close()


def register(sub: SubParsers) -> None:
    p = sub.add_parser("memory", help="inspect and manage what Mnemo remembers")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_item_commands(acts)
    _add_cube_commands(acts)
    _add_upkeep_commands(acts)
    for parser in acts.choices.values():
        parser.set_defaults(func=run)
    p.set_defaults(func=run)
    adapter_commands.register(acts)  # `adapters` and `distill` (parametric memory)


def _add_item_commands(acts: SubParsers) -> None:
    """list, show, add, forget, pin, wipe, pause, events: what memory holds, and what changed in it."""
    a = acts.add_parser("list", help="list pages, segments, traits or knowledge")
    a.add_argument("kind", choices=KINDS)
    a.add_argument("--tier", choices=("stm", "mtm", "archive"))
    a.add_argument("--conversation", type=int)
    a.add_argument(
        "--deleted-chats",
        action="store_true",
        help="only pages of chats deleted without forgetting them (forget them by id)",
    )
    a.add_argument("--text", help="only items containing this text (pages)")
    a.add_argument("--limit", type=int, default=50)
    a.add_argument("--offset", type=int, default=0)
    a.add_argument("--json", action="store_true")
    a = acts.add_parser("show", help="one item in full, with its versions")
    a.add_argument("kind", choices=KINDS)
    a.add_argument("id", type=int)
    a.add_argument("--json", action="store_true")
    a = acts.add_parser(
        "add",
        help="remember something directly: a fact about you (or the assistant), or a trait",
        description="Remember a fact (`add fact I am allergic to peanuts`) or a trait (`add trait "
        "likes jazz`). A repeat confirms what is held; a close fact updates it and keeps "
        "the old text as a version; a pinned item is not changed.",
    )
    a.add_argument("what", choices=("fact", "trait"))
    a.add_argument("words", nargs="+", help="the fact; for a trait, its dimension then its value")
    a.add_argument("--about", choices=("user", "assistant"), default="user", help="whom a fact is about")
    a.add_argument("--pin", action="store_true", help="pin it: automatic updates never change it")
    a.add_argument("--json", action="store_true")
    a = acts.add_parser("forget", help="forget items (and what was derived only from them)")
    a.add_argument("kind", choices=KINDS)
    a.add_argument("ids", type=int, nargs="+")
    a = acts.add_parser("pin", help="pin an item so it is never evicted")
    a.add_argument("kind", choices=KINDS)
    a.add_argument("id", type=int)
    a.add_argument("--unpin", action="store_true")
    a = acts.add_parser("wipe", help="delete all memory (conversations stay)")
    a.add_argument("--yes", action="store_true", help="do not ask")
    a = acts.add_parser("pause", help="pause or resume memory writing")
    a.add_argument("state", choices=("on", "off"))
    a.add_argument("--conversation", type=int, help="only for this conversation")
    a = acts.add_parser("events", help="what changed in memory, when and why")
    a.add_argument("--since", type=int, help="events after this id, oldest first (default: the newest ones)")
    a.add_argument("--limit", type=int, default=50)
    a.add_argument("--kind", action="append", help="only this kind (repeatable), e.g. page_moved, segment_visited")
    a.add_argument("--segment", type=int, help="one segment's history: its events and the pages that joined it")
    a.add_argument("--json", action="store_true")


def _add_cube_commands(acts: SubParsers) -> None:
    """export, import, the spaces, imports, undo-import: memory written out and read in."""
    a = acts.add_parser(
        "export",
        help="write what is remembered to a JSON or Markdown file, or as a memory cube another memory imports",
        description="`export FILE` writes everything to a JSON (complete) or Markdown (readable) file. "
        "`export --cube FILE` writes a memory cube (docs/memcube.md): the whole memory, or what --chat, "
        "--segment, --since and --until choose (all that are given must hold), or --persona-only.",
    )
    a.add_argument("file", nargs="?", help="the file to write (.json: complete; .md: a readable account)")
    a.add_argument("--format", choices=("json", "markdown"), help="default: from the file's suffix")
    a.add_argument("--cube", metavar="FILE", help="write a memory cube (.mnemocube) instead")
    a.add_argument("--chat", type=int, metavar="ID", help="only this chat's memory (see `mnemo chats list`)")
    a.add_argument("--segment", type=int, metavar="ID", help="only this segment's pages")
    a.add_argument("--since", metavar="DATE", help="only pages from this date on (2024-05-01, local time)")
    a.add_argument("--until", metavar="DATE", help="only pages up to this date, that day included")
    a.add_argument("--persona-only", action="store_true", help="only the persona: traits and facts, every version")
    a.add_argument("--space", metavar="NAME", help="only this memory space (with --cube)")
    a.add_argument("--adapters", action="store_true", help="also carry the model adapters in the cube (parametric/)")
    a = acts.add_parser(
        "import",
        help="import a memory cube: what is new is added, what is held is skipped, close facts merged",
        description="Import a memory cube (.mnemocube). Pages and facts already held are recognised and "
        "skipped; a fact close to one held updates it as the persona does (the older text stays a version), "
        "unless it is pinned; every item remembers the cube it came from. `mnemo memory undo-import ID` "
        "takes an import back.",
    )
    a.add_argument("file", help="the .mnemocube file")
    a.add_argument("--dry-run", action="store_true", help="say what would be added, merged and skipped; change nothing")
    a.add_argument("--space", metavar="NAME", help="import it as a new memory space of this name")
    a.add_argument("--json", action="store_true")
    space_commands.add_parser(acts)
    a = acts.add_parser("imports", help="the memory cubes imported into this memory")
    a.add_argument("--json", action="store_true")
    a = acts.add_parser("undo-import", help="undo an import: remove what it added, put back what it changed")
    a.add_argument("id", type=int, help="the import's id (see `mnemo memory imports`)")


def _add_upkeep_commands(acts: SubParsers) -> None:
    """stats, activation, backup, backups, restore: the memory file, its copies, and the saved prompt states."""
    a = acts.add_parser("stats", help="counts per tier, database size, pending jobs")
    a.add_argument("--json", action="store_true")
    a = acts.add_parser(
        "activation",
        help="the chat model's saved prompt states (activation memory): list them, or clear them",
        description="Mnemo saves llama.cpp's processed state of each chat's prompt beginning (and of the one "
        "every new chat starts with) in <data dir>/activation/, so the first reply after a restart skips it.",
    )
    a.add_argument("what", nargs="?", choices=("list", "clear"), default="list")
    a.add_argument("--json", action="store_true")
    a = acts.add_parser("backup", help="copy the memory database now (default: into the backups folder)")
    a.add_argument("file", nargs="?", help="where to write the copy (default: <data dir>/backups/mnemo-<time>.sqlite3)")
    a = acts.add_parser("backups", help="list the backups Mnemo made (one a day, the newest kept)")
    a.add_argument("--json", action="store_true")
    a.add_argument(
        "--drop-forgotten",
        action="store_true",
        help="delete the backups that may still hold forgotten memory (a new backup is made first)",
    )
    a = acts.add_parser("restore", help="put a backup back as the memory database (close Mnemo first)")
    a.add_argument("file", help="a backup file (see `mnemo memory backups`)")
    a.add_argument("--yes", action="store_true", help="do not ask")
