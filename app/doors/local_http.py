"""Serving an ASGI app on one socket with uvicorn: shared by `mnemo serve` and `mnemo mcp --http`.

The socket is bound (and listening) before the server runs, so the address printed in the ready
line is the one really bound (port 0 picks a free port, which tests use) and a client that connects
after that line is queued, not refused.
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); OSError when the port is taken or the address not ours."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # a response's header and body go out as separate writes; with Nagle's algorithm the body would
        # wait for the client's delayed ACK (~40 ms a request). Accepted sockets inherit this (Linux).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, path: str = "") -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def serve(app: Any, sock: socket.socket, *, ready_line: str) -> None:
    """Run `app` on `sock` until Ctrl+C or SIGTERM; `ready_line` goes to stderr once it can be reached."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    print(ready_line, file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
