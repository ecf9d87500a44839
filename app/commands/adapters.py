"""`mnemo memory adapters [list|add FILE [--scale S]|remove NAME|use NAME --chat ID|scale NAME S|new-chats NAME on|off]`
and `mnemo memory distill`: parametric memory, the LoRA adapters the chat model can use
(app.parametric.adapters), and training one from what memory holds (app.parametric.distill)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._common import fail, print_json
from app.parametric import adapters as ad
from models.chat import CancelToken
from models.lora import AdapterError

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext
    from app.parametric.distill import DistillConfig, DistillResult, QAPair
    from memory_core import MemoryStore


def _size(n: int) -> str:
    from app.chat.activation_cache import human_bytes

    return human_bytes(n)


def _list(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    registry = ad.AdapterRegistry(ctx.paths.data_dir)
    model_path = ad.current_model_path(ctx.settings)
    rows = ad.rows(registry, model_path, args.chat, store)
    if args.json:
        print_json([r.__dict__ for r in rows])
        return 0
    if not rows:
        print("No adapters. Add one with `mnemo memory adapters add FILE`, or train one: `mnemo memory distill`.")
        return 0
    for r in rows:
        flags = ", ".join(
            f for f in ("on in new chats" if r.new_chats else "", "on in this chat" if r.in_chat else "") if f
        )
        print(f"{r.name:<24} for {r.base_model:<24} {_size(r.size):>9}  scale {r.scale:g}  from {r.source}")
        if flags:
            print(f"{'':<24} {flags}")
        if r.problem:
            print(f"{'':<24} cannot be used with the current model: {r.problem}")
    return 0


def _add(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    registry = ad.AdapterRegistry(ctx.paths.data_dir)
    try:
        record = registry.add(args.file, scale=args.scale, name=args.name, new_chats=args.new_chats)
    except (AdapterError, ad.AdapterRegistryError) as exc:
        return fail(str(exc))
    problem = ad.fit_problem(registry, record, ad.current_model_path(ctx.settings))
    print(f"Added adapter {record.name} (for {record.base_model or record.architecture}, {_size(record.size)}).")
    if problem:
        print(f"Note: it cannot be used with the current model: {problem}")
    return 0


def _remove(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    try:
        record = ad.AdapterRegistry(ctx.paths.data_dir).remove(args.name)
    except ad.AdapterRegistryError as exc:
        return fail(str(exc))
    print(f"Removed adapter {record.name}.")
    return 0


def _use(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    registry = ad.AdapterRegistry(ctx.paths.data_dir)
    if store.conversations.get_conversation(args.chat) is None:
        return fail(f"no chat {args.chat} (see `mnemo chats list`)")
    try:
        if args.name == "none":
            names = registry.use(args.chat, [])
        elif not args.off and (problem := ad.fit_problem(registry, registry.get(args.name), _model(ctx))):
            return fail(problem)
        else:
            names = registry.toggle(args.chat, args.name, not args.off)
    except ad.AdapterRegistryError as exc:
        return fail(str(exc))
    print(f"Chat {args.chat} uses " + (", ".join(names) if names else "no adapter") + ".")
    return 0


def _model(ctx: AppContext) -> Path | None:
    return ad.current_model_path(ctx.settings)


def _scale(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    try:
        record = ad.AdapterRegistry(ctx.paths.data_dir).set_scale(args.name, args.scale)
    except ad.AdapterRegistryError as exc:
        return fail(str(exc))
    print(f"Adapter {record.name} now at scale {record.scale:g}.")
    return 0


def _new_chats(ctx: AppContext, store: MemoryStore, args: argparse.Namespace) -> int:
    try:
        record = ad.AdapterRegistry(ctx.paths.data_dir).set_new_chats(args.name, args.state == "on")
    except ad.AdapterRegistryError as exc:
        return fail(str(exc))
    print(f"Adapter {record.name} is {'on' if record.new_chats else 'off'} in new chats.")
    return 0


_ACTIONS = {
    "list": _list,
    "add": _add,
    "remove": _remove,
    "use": _use,
    "scale": _scale,
    "new-chats": _new_chats,
}


def run_adapters(args: argparse.Namespace, ctx: AppContext) -> int:
    store = ctx.open_store()
    try:
        return _ACTIONS[args.what](ctx, store, args)
    finally:
        store.close()


def run_distill(args: argparse.Namespace, ctx: AppContext) -> int:
    """Train an adapter from memory, showing each step; Ctrl+C cancels and keeps nothing."""
    from app.parametric import distill

    model_path = ad.current_model_path(ctx.settings)
    if model_path is None:
        return fail("distilling trains an adapter for a GGUF chat model; the chat settings use a server")
    config = distill.DistillConfig(steps=args.steps, rank=args.rank, threads=args.threads)
    cancel = CancelToken()
    store = ctx.open_store()
    try:
        pairs = distill.collect_pairs(store, config)
        print(f"Learning from {len(pairs)} questions and answers drawn from memory, {config.steps} steps…")
        record, result = _train(ctx, store, model_path, pairs, config, cancel, args)
    except KeyboardInterrupt:
        cancel.cancel()
        print(file=sys.stderr)
        return fail("cancelled; nothing was kept", 1)
    except distill.DistillError as exc:
        return fail(str(exc), 1)
    finally:
        store.close()
    if args.json:
        print_json({"adapter": record.name, "pairs": result.pairs, "steps": result.steps, "seconds": result.seconds})
    else:
        print(
            f"\nTrained adapter {record.name} in {result.seconds:.0f} s (loss {result.first_loss:.2f} → "
            f"{result.last_loss:.2f}); it is on in new chats. `mnemo memory adapters use {record.name} --chat ID` "
            "adds it to a chat."
        )
    return 0


def _train(
    ctx: AppContext,
    store: MemoryStore,
    model_path: Path,
    pairs: list[QAPair],
    config: DistillConfig,
    cancel: CancelToken,
    args: argparse.Namespace,
) -> tuple[ad.AdapterRecord, DistillResult]:
    from app.parametric import distill

    def progress(step: int, steps: int, loss: float) -> None:
        if not args.json:
            print(f"\r  step {step}/{steps}, loss {loss:.3f}", end="", flush=True)

    trained_at = time.time()
    with tempfile.TemporaryDirectory(prefix="mnemo-distill-") as tmp:
        out = Path(tmp) / "memory.gguf"
        result = distill.train_adapter(model_path, pairs, out, config, progress=progress, cancel=cancel)
        record = ad.keep_distilled(ad.AdapterRegistry(ctx.paths.data_dir), out, trained_at, len(pairs))
    return record, result


def register(acts: SubParsers) -> None:
    """Add `adapters` and `distill` to `mnemo memory`'s actions (after its own defaults are set)."""
    a = acts.add_parser(
        "adapters",
        help="the LoRA adapters the chat model can use (parametric memory): list, add, remove, use in a chat",
        description="An adapter is a small GGUF file of weights that changes what the chat model says. "
        "Mnemo keeps a copy of each in <data dir>/adapters/; each chat keeps its own choice.",
    )
    a.add_argument("what", nargs="?", choices=tuple(_ACTIONS), default="list")
    a.add_argument("name", nargs="?", help="add: the adapter file; remove/use/scale/new-chats: the adapter's name")
    a.add_argument("value", nargs="?", help="scale: the new scale; new-chats: on or off")
    a.add_argument("--scale", type=float, default=1.0, help="add: how strongly it acts (1: as trained)")
    a.add_argument("--as", dest="as_name", help="add: the name to list it under (default: from the file)")
    a.add_argument("--new-chats", action="store_true", help="add: turn it on in every new chat")
    a.add_argument("--chat", type=int, metavar="ID", help="use: the chat; list: say which are on in it")
    a.add_argument("--off", action="store_true", help="use: turn it off in the chat instead")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_adapters_entry)
    d = acts.add_parser(
        "distill",
        help="train a LoRA adapter for the chat model from what memory holds (needs mnemo[train])",
        description="Turns your facts and the most talked-about conversations into questions and answers and "
        'trains an adapter on them, on the CPU (pip install "mnemo[train]"). The adapter is then on in new chats.',
    )
    d.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    d.add_argument("--rank", type=int, default=8, help="the adapter's rank (default 8)")
    d.add_argument("--threads", type=int, default=0, help="CPU threads (default: all)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=run_distill)


def _adapters_entry(args: argparse.Namespace, ctx: AppContext) -> int:
    """Map the positional words onto each action's arguments, then run it."""
    if args.what == "add":
        if not args.name:
            return fail("give the adapter file: `mnemo memory adapters add FILE`")
        args.file, args.name = args.name, args.as_name
    elif args.what in ("remove", "use", "scale", "new-chats") and not args.name:
        return fail(f"give the adapter's name: `mnemo memory adapters {args.what} NAME`")
    if args.what == "use" and args.chat is None:
        return fail("give the chat: `mnemo memory adapters use NAME --chat ID`")
    if args.what == "scale":
        try:
            args.scale = float(args.value)
        except (TypeError, ValueError):
            return fail("give the scale: `mnemo memory adapters scale NAME 0.5`")
    if args.what == "new-chats" and args.value not in ("on", "off"):
        return fail("say on or off: `mnemo memory adapters new-chats NAME on`")
    args.state = args.value
    return run_adapters(args, ctx)


def cube_extras(ctx: AppContext, wanted: bool) -> list:
    """`memory export --cube FILE --adapters`: the cube members carrying the adapters."""
    return ad.cube_extras(ad.AdapterRegistry(ctx.paths.data_dir)) if wanted else []


def import_from_cube(ctx: AppContext, path: str | Path, *, quiet: bool = False) -> None:
    """After `memory import`: add the adapters the cube carries, saying what was added and left out."""
    from memory_core.cubes import CubeError

    try:
        added, problems = ad.adapters_from_cube(ad.AdapterRegistry(ctx.paths.data_dir), path)
    except CubeError as exc:
        added, problems = [], [str(exc)]
    if quiet:
        return
    for record in added:
        print(f"  adapter {record.name} (for {record.base_model or record.architecture}) added")
    for line in problems:
        print(f"  adapter left out: {line}", file=sys.stderr)
