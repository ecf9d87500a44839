"""One piece of Mnemo's work, run in a child process for `tests.reliability.faults` to kill.

`python -m tests.reliability.fault_worker SCENARIO` (MNEMO_DATA_DIR and MNEMO_CONFIG_DIR name the
profile). It prints a marker line, flushed, each time something is durably stored, so the parent
knows what must survive the kill: `POSTED <id>` (a user message), `SAVED <id>` (a reply and its
memory job), `QUEUED <id>` (an exchange queued for memory), `JOB` (a memory job done), `TURN` (an
imported turn), `BACKUP`, `EXPORTED`, `RESTORED`; `TOKEN` while a reply streams.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

FIXTURE = Path(__file__).resolve().parents[1] / "app" / "fixtures" / "chatgpt_conversations.json"
TOPICS = ("the tides", "sailing at night", "lighthouses", "the moon", "whales", "storms")


def mark(line: str) -> None:
    print(line, flush=True)


def turn(ctx) -> None:
    """Chat turns as the desktop app runs them: the message stored before the model loads, then the reply."""
    from app.chat.session import ChatOptions, ChatSession
    from app.operations import chats as operations

    store = ctx.open_store()
    session = ChatSession(options=ChatOptions.from_settings(ctx.settings))
    model = None
    for topic in TOPICS[:3]:
        uid = operations.post(session, store, f"[{uuid.uuid4().hex[:8]}] Tell me something about {topic}.")
        mark(f"POSTED {uid}")
        model = model or ctx.chat_model()
        result = operations.reply(session, store, model, uid, on_token=lambda _chunk: mark("TOKEN"))
        mark(f"SAVED {result.assistant_message_id}")


def jobs(ctx) -> None:
    """Exchanges queued for memory, then the memory jobs they start (the LLM-free ones, as the
    memory thread runs them, and the LLM's segment promotion when one is due)."""
    from app.chat.agent import post_message
    from app.chat.turn_memory import queue_exchange_page

    model = ctx.chat_model()
    store = ctx.open_store(llm=lambda messages, schema: model.complete_json(messages, schema, max_tokens=128))
    cid = store.conversations.create_conversation("Fault injection")
    for topic in TOPICS:
        uid = post_message(store, cid, f"[{uuid.uuid4().hex[:8]}] I spent the weekend reading about {topic}.")
        with store.transaction():
            aid = store.conversations.add_message(
                cid, "assistant", f"Reading about {topic} sounds restful.", parent_id=uid
            )
            store.conversations.update_message(uid, status="complete")
            queue_exchange_page(
                store, cid, store.conversations.get_message(uid), aid, f"Reading about {topic} sounds restful."
            )
        mark(f"QUEUED {aid}")
    while store.jobs.run_pending(max_jobs=1, allow_llm=True):
        mark("JOB")


def import_(ctx) -> None:
    from app.importers.job import ImportJob, run_import

    class Marked(ImportJob):
        def update(self, n: int = 1) -> None:
            super().update(n)
            mark("TURN")

    job = run_import(ctx, Marked(FIXTURE))
    mark(f"IMPORT {job.phase} {job.error or ''}")


def backup(ctx) -> None:
    from app.operations.backups import make_backup

    store = ctx.open_store()
    for _ in range(3):
        make_backup(store, ctx.paths, keep=2)
        mark("BACKUP")


def export(ctx) -> None:
    store = ctx.open_store()
    for i in range(3):
        store.export(ctx.paths.data_dir / f"export-{i}.json")
        mark("EXPORTED")


def restore(ctx) -> None:
    from app.operations.backups import list_backups, restore

    for _ in range(3):
        restore(ctx.paths, list_backups(ctx.paths)[-1])
        mark("RESTORED")


SCENARIOS = {"turn": turn, "jobs": jobs, "import": import_, "backup": backup, "export": export, "restore": restore}


def main(argv: list[str]) -> int:
    from app.context import AppContext

    ctx = AppContext.create()
    mark("READY")
    SCENARIOS[argv[0]](ctx)
    mark("FINISHED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
