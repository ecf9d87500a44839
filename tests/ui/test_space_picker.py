"""The chat header's space picker (ui/space_picker.py) in the real window: hidden while the memory has
one space; a new chat takes the space shown; choosing another space or 'all spaces' changes the open
chat's and is kept in the memory file. Real window, store, embedder and bundled model; a grab of the
picker is saved as /tmp/spaces/space-picker.png."""

from __future__ import annotations

from pathlib import Path

SHOTS = Path("/tmp/spaces")


def _choose(box, text):
    i = box.findText(text)
    assert i >= 0, text
    box.setCurrentIndex(i)
    box.activated.emit(i)


def test_the_picker_sets_a_chats_space_and_it_persists(make_window, chat, qtbot):
    win = make_window(max_tokens=4)
    picker = win.space_picker
    chat.wait_db(win)
    assert not picker.isVisible()  # one space: nothing to choose
    work = win.backend.db(lambda s: s.spaces.create("Work"))
    qtbot.waitUntil(work.done, timeout=30_000)
    win.refresh_spaces()
    qtbot.waitUntil(picker.isVisible, timeout=30_000)
    _choose(picker.space_box, "Work")
    chat.send(win, "The Porto client wants the dashboard in blue.")
    cid = win.current_id
    assert cid is not None
    got = win.backend.db(lambda s: s.spaces.chat_space(cid))
    qtbot.waitUntil(got.done, timeout=30_000)
    assert got.result() == (work.result(), "own")
    _choose(picker.read_box, "Reads: all spaces")
    chat.wait_db(win)
    got = win.backend.db(lambda s: (s.spaces.chat_space(cid), s.spaces.read_set(cid)))
    qtbot.waitUntil(got.done, timeout=30_000)
    assert got.result() == ((work.result(), "all"), None)
    _choose(picker.space_box, "Personal")
    chat.wait_db(win)
    # another chat shows its own space; going back shows this one's again, read from the file
    win.new_chat()
    chat.send(win, "Hello again.")
    other = win.current_id
    assert other != cid
    got = win.backend.db(lambda s: s.spaces.chat_space(other))
    qtbot.waitUntil(got.done, timeout=30_000)
    assert got.result() == (1, "all")  # a new chat takes the space and reading shown
    _choose(picker.read_box, "Reads: this space")
    chat.wait_db(win)
    win.open_conversation(cid)
    qtbot.waitUntil(lambda: win.title_label.text() != "Hello again." and picker.read_all(), timeout=30_000)
    assert picker.space_box.currentText() == "Personal"
    win.open_conversation(other)
    qtbot.waitUntil(lambda: win.title_label.text() == "Hello again." and not picker.read_all(), timeout=30_000)
    win.open_conversation(cid)
    qtbot.waitUntil(lambda: picker.read_all(), timeout=30_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert picker.grab().save(str(SHOTS / "space-picker.png"))
    assert win.grab().save(str(SHOTS / "window-with-space-picker.png"))
