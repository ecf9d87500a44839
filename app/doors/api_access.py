"""Who may use Mnemo's HTTP doors (`mnemo serve`, `mnemo mcp --http`): a bearer token and an address.

A memory holds what someone told an assistant in confidence, and any program on the machine can
open a port on 127.0.0.1, a web page in a browser included; so both servers want a token in every
request, one kept owner-only in the config folder (made at the first use; each start says where it
is, so the user can paste it into their client's settings). Binding anywhere but the loopback
interface would put the memory on the network: that takes an explicit flag and a token
(`check_bind`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from app.private_files import ensure_private_dir, make_private_file

TOKEN_FILE = "api-token"
TOKEN_ENV = "MNEMO_API_TOKEN"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def load_token(config_dir: Path) -> str:
    """The token: $MNEMO_API_TOKEN when set, else `<config dir>/api-token`, made (0600) the first time."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        return given
    path = Path(config_dir) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    ensure_private_dir(path.parent)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    make_private_file(path)
    return token


def token_hint(config_dir: Path) -> str:
    """Where the user finds the token, for the ready line (the token itself is not printed)."""
    return f"${TOKEN_ENV}" if os.environ.get(TOKEN_ENV, "").strip() else str(Path(config_dir) / TOKEN_FILE)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or "localhost"; any other name or address is not (a name could resolve anywhere)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, allow_remote: bool, token: str | None) -> str | None:
    """Why the server must not listen on `host`, or None when it may: a non-loopback address needs
    both the explicit flag and a token."""
    if is_loopback(host):
        return None
    if not allow_remote:
        return (
            f"{host} is not a loopback address: the memory would be reachable from the network. "
            "Pass --allow-remote (with a token) if that is what you want."
        )
    if not token:
        return f"listening on {host} (not loopback) needs a token; drop --no-token"
    return None


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `token` (compared in constant time)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


def require_token(app: ASGIApp, token: str | None, *, error_body: Callable[[str], dict] | None = None) -> ASGIApp:
    """`app` behind the bearer token (None: open, `--no-token`). Only HTTP requests are checked; the
    lifespan events pass through. A request without the token gets 401 and a JSON error."""
    if token is None:
        return app
    body_of = error_body or (lambda message: {"error": message})

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if bearer_ok(headers.get("authorization"), token):
            await app(scope, receive, send)
            return
        payload = json.dumps(body_of("a valid bearer token is required (Authorization: Bearer <token>)")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="mnemo"'),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return guarded
