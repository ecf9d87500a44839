"""`mnemo mcp`: serve the memory to other assistants over the Model Context Protocol (app.doors.mcp_server)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.commands._common import fail

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext

DEFAULT_PORT = 8765


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    from memory_core.spaces.component import SpaceError

    try:
        return _serve(args, ctx)
    except SpaceError as exc:  # --space names no space of this memory
        return fail(f"mcp --space: {exc} (see `mnemo memory spaces list`)")


def _serve(args: argparse.Namespace, ctx: AppContext) -> int:
    from app.doors.api_access import is_loopback, load_token, token_hint

    if not args.http:
        from app.doors.mcp_server import run_stdio

        return run_stdio(ctx, args.space)
    if not is_loopback(args.host):
        return fail(f"mcp --http listens on loopback addresses only (127.0.0.1, ::1, localhost), not {args.host}")
    from app.doors.mcp_server import run_http

    config = ctx.paths.config_dir
    try:
        return run_http(ctx, args.host, args.port, load_token(config), token_hint(config), args.space)
    except OSError as exc:
        return fail(f"mcp: cannot listen on {args.host}:{args.port}: {exc}", 1)


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve the memory to other assistants (Claude Desktop, LM Studio, Cursor) over MCP",
        description="A Model Context Protocol server on stdin/stdout (what MCP clients start), or with --http "
        "its streamable HTTP transport on 127.0.0.1, every request with the token of <config dir>/api-token "
        "(or $MNEMO_API_TOKEN). Tools: search_memory, remember, forget, get_persona, recent_memory; "
        "resources mnemo://persona and mnemo://page/{id}. It runs beside an open Mnemo window.",
    )
    p.add_argument("--http", action="store_true", help="streamable HTTP on --host:--port instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http: a loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"with --http (default {DEFAULT_PORT}; 0: any)")
    p.add_argument(
        "--space",
        metavar="NAME",
        help="the memory space its tools use when a call names none: facts are kept there, searches and "
        "forgetting read it (default: facts in Personal, searches in every space)",
    )
    p.set_defaults(func=run)
