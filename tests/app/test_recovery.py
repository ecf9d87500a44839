"""One crash-recovery routine for the desktop app and the terminal (`app.chat.recovery`): every
exchange a crash cut short is kept and queued for memory, once."""

from __future__ import annotations

import pytest

from app.chat.agent import post_message
from app.chat.recovery import NOT_STARTED, recover_interrupted
from app.chat.session import ChatSession
from app.chat.writer_lease import release as restart_here  # this process's turns now count as a dead one's
from app.operations import chats as operations


def _cut_short(store, text="I keep bees on my roof.", reply="Bees on a roof, how", status="streaming"):
    """A user message and a reply left as a crash leaves them (the reply's row, never finished)."""
    cid = store.conversations.create_conversation("Bees")
    uid = store.conversations.add_message(cid, "user", text)
    aid = store.conversations.add_message(cid, "assistant", reply, parent_id=uid, status=status)
    return cid, uid, aid


def test_a_reply_cut_short_is_kept_and_its_exchange_queued_once(store):
    cid, _uid, aid = _cut_short(store)
    done = recover_interrupted(store)
    assert (done.replies, done.queued, done.unanswered) == (1, 1, 0)
    assert store.conversations.get_message(aid).status == "interrupted"
    assert store.conversations.get_message(aid).content == "Bees on a roof, how"
    assert not recover_interrupted(store)  # idempotent: nothing found the second time
    assert store.jobs.run_pending(allow_llm=False) >= 1
    pages = store.pages.list_pages(assistant_message_id=aid)
    assert len(pages) == 1 and "bees" in pages[0].user_text
    assert not recover_interrupted(store)
    assert store.pages.count_pages(conversation_id=cid) == 1


def test_replies_recovered_long_ago_never_hide_a_new_one(store):
    """Recovered replies stay 'interrupted' (their text is kept, they can be regenerated); more of them
    than one listing returns must not keep recovery from the newest crash."""
    cid = store.conversations.create_conversation("Many crashes")
    with store.transaction():
        for i in range(1001):
            uid = store.conversations.add_message(cid, "user", f"message {i}")
            store.conversations.add_message(
                cid, "assistant", "cut", parent_id=uid, status="interrupted", meta={"recovered": True}
            )
    _cid, _uid, aid = _cut_short(store, status="interrupted")  # as an older Mnemo left it
    assert recover_interrupted(store).replies == 1
    assert store.conversations.get_message(aid).meta.get("recovered")


def test_a_reply_an_older_mnemo_marked_interrupted_is_queued_too(store):
    """The desktop app used to mark such replies 'interrupted' without queueing their memory."""
    _cid, _uid, aid = _cut_short(store, status="interrupted")
    assert recover_interrupted(store).queued == 1
    store.jobs.run_pending(allow_llm=False)
    assert len(store.pages.list_pages(assistant_message_id=aid)) == 1
    assert not recover_interrupted(store)


def test_an_exchange_already_in_memory_is_not_queued_again(store):
    cid, uid, aid = _cut_short(store, status="interrupted")
    store.intake.add_page(
        cid, "I keep bees on my roof.", "Bees on a roof, how", user_message_id=uid, assistant_message_id=aid
    )
    store.jobs.run_pending(allow_llm=False)
    assert recover_interrupted(store).queued == 0
    assert store.jobs.pending() == 0


def test_a_paused_chat_keeps_the_reply_but_learns_nothing(store):
    cid, _uid, aid = _cut_short(store)
    store.conversations.set_conversation_flags(cid, memory_paused=True)
    assert recover_interrupted(store).queued == 0
    assert store.conversations.get_message(aid).status == "interrupted" and store.jobs.pending() == 0


def test_a_message_stored_before_its_reply_began_gets_an_interrupted_reply(store):
    """The app stores what was typed before the model loads; a crash then leaves it 'pending'."""
    cid = store.conversations.create_conversation()
    uid = post_message(store, cid, "Are you there?")
    assert store.conversations.get_message(uid).status == "pending"
    assert not recover_interrupted(store)  # this process is still writing it
    restart_here()
    done = recover_interrupted(store)
    assert done.unanswered == 1 and done.queued == 0
    user, reply = store.conversations.list_messages(cid)
    assert user.id == uid and user.status == "complete" and user.content == "Are you there?"
    assert reply.role == "assistant" and reply.status == "interrupted" and reply.meta["error"] == NOT_STARTED
    assert not recover_interrupted(store)


def test_a_reply_that_begins_marks_its_message_answered(agent, store):
    result = agent.send(agent.new_conversation(), "Say hello.")
    assert store.conversations.get_message(result.user_message_id).status == "complete"
    assert not recover_interrupted(store)


def test_post_then_reply_is_one_turn(store, chat_model):
    session = ChatSession()
    uid = operations.post(session, store, "My bike is green.")
    result = operations.reply(session, store, chat_model, uid)
    assert result.user_message_id == uid and result.conversation_id == session.conversation_id
    assert result.status in ("complete", "stopped")
    assert store.jobs.pending() == 1  # its page, queued with the reply


def test_record_failed_reply_answers_the_stored_message(store):
    cid = store.conversations.create_conversation()
    uid = post_message(store, cid, "Hello?")
    aid = operations.reply_failed(store, uid, "the model file is damaged")
    user, reply = store.conversations.list_messages(cid)
    assert user.status == "complete" and reply.id == aid and reply.status == "failed"
    assert reply.meta["error"] == "the model file is damaged"
    assert not recover_interrupted(store)


@pytest.mark.parametrize("status", ["complete", "stopped", "failed"])
def test_finished_replies_are_left_alone(store, status):
    _cut_short(store, status=status)
    assert not recover_interrupted(store)


CHILD = """
import sys
from app.chat.agent import post_message
from memory_core import MemoryStore
from models.embedder import OnnxEmbedder
e = OnnxEmbedder()
store = MemoryStore.open(sys.argv[1], e.embed, embed_model_id=e.model_id, dim=e.dim)
cid = store.conversations.create_conversation("Another process")
print(post_message(store, cid, "Written by a live process."), flush=True)
sys.stdin.read()  # alive until the test closes its stdin, or kills it
"""


def test_what_a_live_process_is_writing_is_left_to_it(store):
    """A window and a terminal on one memory: recovery takes only what a dead process left."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, store.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        uid = int(child.stdout.readline())
        assert store.conversations.get_message(uid).status == "pending"
        assert not recover_interrupted(store)  # the child holds its writer lock: its turn, not a crash
        assert store.conversations.get_message(uid).status == "pending"
    finally:
        child.kill()
        child.wait(timeout=30)
    assert recover_interrupted(store).unanswered == 1  # the lock went with the process
    assert store.conversations.get_message(uid).status == "complete"
    writers = Path(store.path).parent / "writers"
    assert not (
        writers / f"{store.conversations.get_message(uid).meta['writer']}.lock"
    ).exists()  # a dead writer's file is swept
    assert os.path.isdir(writers)
