"""`mnemo serve`: an OpenAI-compatible endpoint on 127.0.0.1 that chats with memory (app.doors.openai_server)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.commands._common import fail

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext

DEFAULT_PORT = 8766


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    from app.doors.api_access import check_bind, load_token, token_hint

    token = None if args.no_token else load_token(ctx.paths.config_dir)
    refused = check_bind(args.host, allow_remote=args.allow_remote, token=token)
    if refused:
        return fail(f"serve: {refused}")
    from app.doors.local_http import bind, serve, url_of
    from app.doors.openai_server import TurnRunner, build_app
    from models.errors import ModelError

    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return fail(f"serve: cannot listen on {args.host}:{args.port}: {exc}", 1)
    access = (
        "no token (--no-token): any program that reaches it can use the memory"
        if token is None
        else f"bearer token required: the one in {token_hint(ctx.paths.config_dir)}"
    )
    runner = TurnRunner(ctx)
    try:
        runner.start().result()  # the store opens and the model loads before the ready line
    except ModelError as exc:
        runner.stop()
        sock.close()
        return fail(f"serve: {exc}", 1)
    except BaseException:
        runner.stop()
        sock.close()
        raise
    app = build_app(runner, token=token)
    serve(app, sock, ready_line=f"mnemo serve: listening on {url_of(sock, '/v1')} ({access})")
    return 0


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "serve",
        help="an OpenAI-compatible chat endpoint (/v1/chat/completions, /v1/models) that answers with memory",
        description="Any OpenAI client chats with Mnemo's model and memory: the last user message of a request is "
        "answered like a chat turn in the app, in one conversation per client id (header X-Mnemo-Client, else "
        "the request's `user`); X-Mnemo-Incognito: 1 reads and writes no memory. Every request needs the "
        "bearer token of <config dir>/api-token (or $MNEMO_API_TOKEN) unless --no-token.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--no-token", action="store_true", help="accept requests without the token (loopback only)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (the memory is then on the network; a token is required)",
    )
    p.set_defaults(func=run)
