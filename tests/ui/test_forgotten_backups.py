"""After a forget the window names the backups that still hold it and offers to delete them (a new
backup made first): a real window, store, embedder and bundled GGUF, offscreen."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QMessageBox

from app.operations import backups


def test_forgetting_a_chat_offers_to_delete_the_backups_that_hold_it(make_window, chat, qtbot, monkeypatch):
    win = make_window(max_tokens=8)
    a = chat.send(win, "Remember that my locker code is 4312.").result
    assert a.stats["remembered"]["outcome"] == "added"
    assert win.backend.scheduler.wait_idle(timeout=60)
    paths = win.ctx.paths
    old = win.backend.db(lambda s: backups.make_backup(s, paths, now=time.time() - 60)).result(timeout=60)
    assert b"4312" in old.read_bytes()
    monkeypatch.setattr(win.chats, "ask_forget", lambda name, held: True)
    win.sidebar.forgetRequested.emit(a.conversation_id)
    qtbot.waitUntil(
        lambda: win.backups.forgotten_box is not None and win.backups.forgotten_box.isVisible(), timeout=30_000
    )
    box = win.backups.forgotten_box
    assert box.text() == f"1 backup (of {backups.made_at(old)}) may still hold what you forgot."
    assert str(old) in box.detailedText()
    drop = next(b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole)
    drop.click()
    qtbot.waitUntil(lambda: not old.exists() and len(backups.list_backups(paths)) == 1, timeout=30_000)
    (fresh,) = backups.list_backups(paths)
    assert (
        fresh != old and backups.holding_forgotten(paths, win.backend.db(lambda s: s.db.purge.spans()).result()) == []
    )
    qtbot.waitUntil(lambda: "Deleted 1 backup" in win.statusBar().currentMessage(), timeout=30_000)
    # asked once: the same backups and the same forgets are not asked about again
    win.backups.offer_to_drop_forgotten()
    chat.wait_db(win)
    assert win.backups.forgotten_box is None
