"""`mnemo chat` (terminal REPL with streaming) and `mnemo ask "…"` (one shot)."""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING

from app.chat.agent import DiskFullError
from app.chat.session import ChatOptions, ChatSession
from app.commands._common import fail, print_json
from app.importers.progress import ProgressBar
from app.operations import chats as operations
from app.operations.remember import footnote, forget_note
from memory_core import is_storage_full
from models.chat import CancelToken
from models.errors import ModelError

if TYPE_CHECKING:
    import argparse

    from app.chat.agent import TurnResult
    from app.commands._common import SubParsers
    from app.context import AppContext
    from memory_core import MemoryStore
    from models.chat import ChatModel

NUL = "\x00"
HELP = (
    "/new  new conversation   /memory  what is remembered   /remember TEXT  keep a fact about you   "
    "/forget  forget what this chat taught   /stop or Ctrl+C  stop a reply   /quit"
)


def _open_session(ctx: AppContext, store: MemoryStore, conversation_id: int | None) -> tuple[ChatSession, ChatModel]:
    """The chat model and the session of the chat to talk in (a new one: created now)."""
    if operations.recover_interrupted(store):  # what a crash cut short: kept, its memory queued
        _settle(store)
    model = ctx.chat_model()
    session = ChatSession(conversation_id, options=ChatOptions.from_settings(ctx.settings))
    session.open(store)
    return session, model


def _stream_turn(
    session: ChatSession, store: MemoryStore, model: ChatModel, text: str, *, quiet: bool = False
) -> TurnResult | None:
    """Stream one reply to stdout; None when the disk is full (the error is printed)."""
    cancel = CancelToken()
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda *_: cancel.cancel())

    def on_token(chunk: str) -> None:
        if not quiet:
            sys.stdout.write(chunk)
            sys.stdout.flush()

    try:
        result = operations.send(session, store, model, text, on_token=on_token, cancel=cancel)
    except DiskFullError as exc:
        print(f"\n[error: {exc}]", file=sys.stderr)
        return None
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)
    if not quiet:
        sys.stdout.write("\n")
        if result.status == "stopped":
            print("[stopped]")
        elif (result.stats or {}).get("finish_reason") == "repetition":
            print("[stopped: the model began repeating itself; the saved reply ends before the loop]")
        elif result.error:
            print(f"[error: {result.error}]", file=sys.stderr)
        kept, forgot = (result.stats or {}).get("remembered"), (result.stats or {}).get("forgot")
        if kept:
            print(f"[{footnote(kept)}: {kept['text']}]")
        if forgot:
            print(f"[{forget_note(forgot)}: “{forgot['what']}”]")
    return result


def _settle(store: MemoryStore) -> None:
    """Run the LLM-free memory jobs this turn queued, so the next command sees the page (and a
    re-embedding after an embedding-model change, with a progress bar). On a full disk they stay
    queued and run at a later start."""
    bars: dict[str, ProgressBar] = {}

    def progress(what: str, done: int, total: int) -> None:
        bar = bars.get(what)
        if bar is None:
            bar = bars[what] = ProgressBar(total, label=what, unit="pages")
        bar.update(done - bar.done)

    store.jobs.on_progress = progress
    try:
        store.jobs.run_pending(allow_llm=False)
    except Exception as exc:
        if not is_storage_full(exc):
            raise
        print("[memory update postponed: the disk is full]", file=sys.stderr)
    finally:
        store.jobs.on_progress = None
        for bar in bars.values():
            bar.close()


def _message_of(text: str) -> tuple[str | None, str]:
    """(the message to ask, or None, and why not): `-` reads it from standard input, all of it, as
    UTF-8, before any model loads, so a bad pipe fails at once."""
    if text != "-":
        return (text, "") if text.strip() else (None, "nothing to ask: the message is empty")
    data = sys.stdin.buffer.read()
    try:
        message = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, (
            f"standard input is not UTF-8 text (byte 0x{data[exc.start]:02x} at byte {exc.start}); "
            "convert it first, e.g. with iconv -t UTF-8"
        )
    message = message.removeprefix("\ufeff").rstrip("\r\n")
    if NUL in message:
        return None, f"standard input holds a NUL byte (character {message.index(NUL) + 1}), so it is not text"
    if not message.strip():
        return None, "nothing to ask: standard input is empty (e.g. echo 'Hello' | mnemo ask -)"
    return message, ""


def run_ask(args: argparse.Namespace, ctx: AppContext) -> int:
    text, problem = _message_of(args.text)
    if text is None:
        print(f"mnemo ask: error: {problem}", file=sys.stderr)
        return 2
    try:
        store = ctx.open_store()
        session, model = _open_session(ctx, store, args.conversation or None)
    except ModelError as exc:
        return fail(str(exc), 1)  # a model that does not load: a failure, not bad input
    try:
        cid = session.conversation_id
        result = _stream_turn(session, store, model, text, quiet=args.json)
        if result is None:  # the disk is full: nothing to print but the error
            return 1
        _settle(store)
        if args.json:
            print_json(
                {
                    "conversation_id": cid,
                    "message_id": result.assistant_message_id,
                    "text": result.text,
                    "status": result.status,
                    "stats": result.stats,
                    "trace": result.trace,
                    "error": result.error,
                }
            )
        return 1 if result.error else 0
    finally:
        store.close()


def _remember(store: MemoryStore, text: str) -> None:
    if not text.strip():
        print("usage: /remember TEXT  (e.g. /remember I am allergic to peanuts)")
        return
    try:
        print(operations.remember(store, text).describe())
    except ValueError as exc:
        print(f"nothing remembered: {exc}")


def _forget(store: MemoryStore, cid: int) -> None:
    """/forget: what memory learned from this chat goes (asked first); the chat goes on."""
    held = operations.chat_taught(store, cid)
    if held.empty:
        print("memory holds nothing from this chat")
        return
    answer = input(f"Forget {held.describe()}? Type 'forget': ").strip()
    if answer != "forget":
        print("nothing forgotten")
        return
    print(f"forgot {operations.forget_chat(store, cid).describe()}; what you say from now on is remembered again")


def run_chat(args: argparse.Namespace, ctx: AppContext) -> int:
    try:
        store = ctx.open_store()
        session, model = _open_session(ctx, store, args.conversation or None)
    except ModelError as exc:
        return fail(str(exc), 1)  # a model that does not load: a failure, not bad input
    cid = session.open(store)  # opened by _open_session: its id
    print(f"Mnemo chat — conversation {cid}. {HELP}")
    try:
        while True:
            try:
                line = input("you> ")
            except EOFError:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text == "/new":
                session = ChatSession(options=session.options)
                cid = session.open(store)
                print(f"conversation {cid}")
                continue
            if text == "/stop":
                print("nothing is generating")
                continue
            if text == "/forget":
                try:
                    _forget(store, cid)
                except EOFError:
                    break
                continue
            if text == "/remember" or text.startswith("/remember "):
                _remember(store, text[len("/remember") :])
                continue
            if text == "/memory":
                stats = store.stats()
                for key, value in stats.items():
                    print(f"  {key}: {value}")
                continue
            sys.stdout.write("mnemo> ")
            _stream_turn(session, store, model, line)
            _settle(store)
    finally:
        store.close()
    return 0


def register(sub: SubParsers) -> None:
    p = sub.add_parser("chat", help="chat in the terminal (streaming; /new /memory /remember /forget /stop /quit)")
    p.add_argument("--conversation", type=int, help="continue this conversation id")
    p.set_defaults(func=run_chat)
    p = sub.add_parser("ask", help="ask one question and print the reply")
    p.add_argument("text", help="the message; - reads it from standard input (e.g. a file: mnemo ask - < notes.txt)")
    p.add_argument("--conversation", type=int, help="ask inside this conversation id")
    p.add_argument("--json", action="store_true", help="print the reply, its stats and retrieval trace as JSON")
    p.set_defaults(func=run_ask)
