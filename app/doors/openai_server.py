"""`mnemo serve`: an OpenAI-compatible chat endpoint with Mnemo's memory behind it.

Any OpenAI client (the `openai` package, LM Studio, an editor plugin) can chat with Mnemo's
configured model through `/v1/chat/completions` (streamed or not) and list it at `/v1/models`. The
request's last user message is answered as a chat turn of the app is (`app.operations.chats.send`: the
message stored first, "Remember that …" and "Forget that …" carried out, recall, the prompt, the
streamed reply, the exchange queued as memory); its earlier messages are not read: Mnemo keeps the
dialogue itself, one conversation per client id (the `X-Mnemo-Client` header, else the request's
`user` field, else "default"), listed in the window's chats as "<id> (via OpenAI API)". A request
with `X-Mnemo-Incognito: 1` (or `"incognito": true`) talks in that client's incognito chat, which
neither reads nor writes memory; a paused memory is read only, as in the app.

One thread (`TurnRunner`, an `app.runtime.tasks.TaskQueue`) holds the store connection and drives the chat
model, which llama.cpp needs: turns from several clients wait their turn. After each turn it runs the
LLM-free memory jobs (`run_pending(allow_llm=False)`, as `mnemo chat` does), so the exchange is a page
at once; promotion to the persona is left to the app. HTTP is Starlette on uvicorn (decision 0016),
behind the bearer token of `app.doors.api_access`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.chat.session import ChatOptions, ChatSession
from app.operations import chats as operations
from app.runtime.tasks import TaskQueue
from models.chat import CancelToken

if TYPE_CHECKING:
    from app.chat.agent import TokenCallback, TurnResult
    from app.context import AppContext
    from memory_core import MemoryStore

log = logging.getLogger(__name__)

MODEL_ID = "mnemo"
CLIENT_HEADER = "x-mnemo-client"
INCOGNITO_HEADER = "x-mnemo-incognito"
DEFAULT_CLIENT = "default"
EXTERNAL_ID = "openai-api:{}"  # the conversation of a client id (source NULL: Mnemo's own replies)
INCOGNITO_EXTERNAL_ID = "openai-api-incognito:{}"
_END = object()


class BadRequest(ValueError):
    """A request this endpoint cannot answer; its message goes back in OpenAI's error shape (400)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    """What a /v1/chat/completions request asks of Mnemo."""

    text: str
    client: str = DEFAULT_CLIENT
    incognito: bool = False
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None


def _text_of(content: Any) -> str:
    """A message's content: a string, or a list of parts of which only text parts are read."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise BadRequest("only text content parts are understood", "messages")
            texts.append(part["text"])
        return "\n".join(texts)
    raise BadRequest("a message's content must be a string or a list of text parts", "messages")


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"))


def client_id(value: Any) -> str:
    """A client id on one line, at most 100 characters; "default" when none was given."""
    text = " ".join(str(value).split())[:100] if isinstance(value, str) else ""
    return text or DEFAULT_CLIENT


def parse_request(body: Any, headers: Mapping[str, str]) -> ChatRequest:
    """The request's last user message and how to answer it. BadRequest says what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise BadRequest("the last message must be the user's: Mnemo answers it as the next turn", "messages")
    text = _text_of(last.get("content"))
    if not text.strip():
        raise BadRequest("the last user message is empty", "messages")
    if body.get("n", 1) != 1:
        raise BadRequest("n must be 1", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false", "stream")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise BadRequest("max_tokens must be a positive integer", "max_tokens")
    options = body.get("stream_options") or {}
    return ChatRequest(
        text=text,
        client=client_id(headers.get(CLIENT_HEADER) or body.get("user")),
        incognito=_truthy(headers.get(INCOGNITO_HEADER)) or body.get("incognito") is True,
        stream=stream,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        max_tokens=limit,
    )


class TurnRunner:
    """The thread that owns the store and the chat model; one `ChatSession` per client id (and mode)."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.queue = TaskQueue("mnemo-serve", open_resource=ctx.open_store)
        self._sessions: dict[str, ChatSession] = {}  # touched on the worker thread only

    def start(self) -> Future:
        """Open the store, keep what a crash cut short, load the model: before the first request. What
        a live window or terminal is writing now is theirs, not a crash's (`app.chat.writer_lease`)."""

        def prepare(store: MemoryStore) -> str:
            operations.recover_interrupted(store)
            self._settle(store)
            return self.ctx.chat_model().model_id

        return self.queue.submit(prepare, label="prepare")

    def stop(self) -> None:
        self.queue.stop(timeout=10.0)

    def turn(self, req: ChatRequest, on_token: TokenCallback | None, cancel: CancelToken) -> Future:
        """Answer `req` on the worker thread; the future's value is the `TurnResult`."""

        def run(store: MemoryStore) -> TurnResult:
            session = self._session(store, req)
            result = operations.send(session, store, self.ctx.chat_model(), req.text, on_token=on_token, cancel=cancel)
            self.queue.submit(self._settle, priority=5, label="memory jobs")
            return result

        return self.queue.submit(run, label=f"turn of {req.client}")

    def _session(self, store: MemoryStore, req: ChatRequest) -> ChatSession:
        key = (INCOGNITO_EXTERNAL_ID if req.incognito else EXTERNAL_ID).format(req.client)
        session = self._sessions.get(key)
        if (
            session is None
            or session.conversation_id is None
            or store.conversations.get_conversation(session.conversation_id) is None
        ):  # deleted in the app
            # an external id of no source (`source IS NULL`; memory_core's annotation says str)
            conv = store.conversations.find_conversation(None, key)  # type: ignore[arg-type]
            cid = conv.id if conv is not None else None
            if cid is None:
                title = f"{req.client} (via OpenAI API{', incognito' if req.incognito else ''})"
                cid = store.conversations.create_conversation(title, external_id=key, incognito=req.incognito)
            session = self._sessions[key] = ChatSession(cid)
        chat = self.ctx.settings.chat
        limit = chat.max_tokens if req.max_tokens is None else min(req.max_tokens, chat.max_tokens)
        session.options = ChatOptions(reply_reserve=chat.reply_reserve, max_tokens=limit)
        return session

    @staticmethod
    def _settle(store: MemoryStore) -> None:
        """The LLM-free memory jobs a turn queued: the exchange becomes a page now."""
        try:
            store.jobs.run_pending(allow_llm=False)
        except Exception:  # a full disk: they stay queued and run at a later start
            log.warning("memory jobs postponed", exc_info=True)


# ---------------------------------------------------------------------- OpenAI's shapes
def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None) -> dict:
    code = "invalid_api_key" if kind == "authentication_error" else None
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _finish_reason(result: TurnResult) -> str:
    return "length" if (result.stats or {}).get("finish_reason") == "length" else "stop"


def _usage(result: TurnResult) -> dict:
    stats = result.stats or {}
    prompt, completion = int(stats.get("prompt_tokens") or 0), int(stats.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(cid: str, created: int, delta: dict, finish: str | None = None) -> str:
    body = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _failure(result: TurnResult) -> str | None:
    """Why a turn gave no reply to send, or None when it did."""
    if result.status == "failed" or (result.error and not result.text):
        return result.error or "the reply failed"
    return None


# ---------------------------------------------------------------------- the app
def build_app(runner: TurnRunner, *, token: str | None) -> Any:
    """The ASGI app: the two routes, behind the token (None: open); `runner` (started) stops with it."""
    from contextlib import asynccontextmanager

    from app.doors.api_access import require_token

    async def models(_request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "mnemo"}]}
        )

    async def chat_completions(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse(error_body("the body is not JSON"), status_code=400)
        try:
            req = parse_request(body, request.headers)
        except BadRequest as exc:
            return JSONResponse(error_body(str(exc), param=exc.param), status_code=400)
        return await (_streamed(runner, req) if req.stream else _whole(runner, req))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            runner.stop()

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return require_token(app, token, error_body=lambda m: error_body(m, "authentication_error"))


async def _whole(runner: TurnRunner, req: ChatRequest) -> Response:
    try:
        result = await asyncio.wrap_future(runner.turn(req, None, CancelToken()))
    except Exception as exc:
        return JSONResponse(error_body(str(exc), "server_error"), status_code=500)
    failure = _failure(result)
    if failure:
        return JSONResponse(error_body(failure, "server_error"), status_code=500)
    return JSONResponse(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_ID,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.text},
                    "finish_reason": _finish_reason(result),
                }
            ],
            "usage": _usage(result),
        }
    )


async def _streamed(runner: TurnRunner, req: ChatRequest) -> Response:
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue = asyncio.Queue()
    cancel = CancelToken()

    def on_token(chunk: str) -> None:
        loop.call_soon_threadsafe(tokens.put_nowait, chunk)

    future = runner.turn(req, on_token, cancel)
    future.add_done_callback(lambda _f: loop.call_soon_threadsafe(tokens.put_nowait, _END))
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    async def events() -> AsyncIterator[str]:
        try:
            yield _chunk(cid, created, {"role": "assistant", "content": ""})
            while (item := await tokens.get()) is not _END:
                yield _chunk(cid, created, {"content": item})
            try:
                result = future.result()
                failure = _failure(result)
            except Exception as exc:
                result, failure = None, str(exc)
            if failure or result is None:
                yield f"data: {json.dumps(error_body(failure or 'the reply failed', 'server_error'))}\n\n"
            else:
                yield _chunk(cid, created, {}, _finish_reason(result))
                if req.include_usage:
                    usage = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_ID}
                    usage.update(choices=[], usage=_usage(result))
                    yield f"data: {json.dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            if not future.done():  # the client went away: stop the reply (it is kept as "stopped")
                cancel.cancel()

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
