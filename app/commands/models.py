"""`mnemo models`: the GGUF chat models other local-LLM apps keep on this computer, and the OpenAI-compatible
servers answering here; `--use N` chats with one of the files."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._common import fail, print_json

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from app.commands._common import SubParsers
    from app.context import AppContext
    from models.discover import FoundServer


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    from models.discover import find_models, find_servers, format_size, model_folders, ollama_folders
    from models.errors import ModelFileError
    from models.resolve import check_gguf

    found = find_models()
    current = ctx.settings.chat.gguf_path if ctx.settings.chat.backend == "llama" else None
    current_path = Path(current) if current else None  # the GGUF file in use, if one is
    if args.use:
        choice = args.use
        if choice.isdigit() and 1 <= int(choice) <= len(found):
            path = found[int(choice) - 1].path
        elif choice.isdigit():
            return fail(f"there is no model {choice}: `mnemo models` lists {len(found)}")
        else:
            path = str(Path(choice).expanduser().absolute())
        try:
            check_gguf(path)
        except ModelFileError as exc:
            return fail(str(exc))
        ctx.settings.chat.backend = "llama"
        ctx.settings.chat.gguf_path = path
        ctx.save()
        print(f"Mnemo now chats with {path}")
        print(f"(settings: {ctx.paths.settings_file}; the window picks it up at its next start, or in Settings)")
        return 0
    chat = ctx.settings.chat
    servers = find_servers([(chat.server_url, chat.api_key)])
    if args.json:
        print_json(
            {
                "files": [dict(asdict(m), in_use=current_path == Path(m.path)) for m in found],
                "servers": [dict(asdict(s), models=list(s.models)) for s in servers],
            }
        )
        return 0
    if not found:
        print("No GGUF chat models found. Searched:")
        for source, folder in model_folders():
            print(f"  {source}: {folder}")
        for folder in ollama_folders():
            print(f"  Ollama: {folder}")
        print("Choose any GGUF file with `mnemo models --use PATH` or in Settings ▸ Model.\n")
    else:
        width = max(len(m.name) for m in found)
        for i, m in enumerate(found, 1):
            mark = "*" if current_path == Path(m.path) else " "
            ctx_txt = f"ctx {m.context_length:>7,}" if m.context_length else " " * 11
            print(f"{mark}{i:3}  {m.name:<{width}}  {format_size(m.size_bytes):>9}  {ctx_txt}  {m.source}")
            print(f"      {m.path}")
        print()
    _print_servers(servers)
    now = current or (
        "the bundled SmolLM2-135M"
        if chat.backend == "llama"
        else f"the server at {chat.server_url}" + (f" ({chat.server_model})" if chat.server_model else "")
    )
    print(f"Mnemo chats with {now}." + (" `mnemo models --use N` chats with file N instead." if found else ""))
    return 0


def _print_servers(servers: Sequence[FoundServer]) -> None:
    if not servers:
        return
    print(
        "OpenAI-compatible servers answering here (Settings ▸ Model ▸ Running here, or settings.json's "
        "chat.server_url / chat.server_model):"
    )
    for s in servers:
        who = "" if s.app == "configured" else f"{s.app}, "
        print(f"  {who}{s.url}: {', '.join(s.models) if s.models else 'no models listed'}")
    print()


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "models",
        help="list GGUF chat models other apps keep here (LM Studio, Ollama, Hugging "
        "Face, llama.cpp, GPT4All, Jan, ~/models, ~/Downloads) and the servers "
        "answering on their usual ports; --use N picks a file",
    )
    p.add_argument("--use", metavar="N|PATH", help="chat with model N of the list, or with this GGUF file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)
