"""Memory ▸ Memory spaces… (ui/spaces_dialog.py): create, rename, merge and delete spaces through the
real dialog offscreen, on a real store read by a worker thread (ui.tasks.UiWorker, as the window's
database thread). A space holding memory is deleted only after its memory is confirmed forgotten; a
merge says what it would do first (a dry run: what moves, what is held already, what confirms or updates
the target's facts, what conflicts with a pinned one) and what it did after. A grab is saved as
/tmp/spaces/manage-spaces.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.test_inspector_fixtures import ctx, fill_store, load_all, panel_factory, settle, store  # noqa: F401  (fixtures)
from ui.spaces_dialog import SpacesDialog
from ui.tasks import UiWorker


@pytest.fixture
def worker(ctx):  # noqa: F811
    w = UiWorker(ctx.open_store, name="spaces-test")
    w.start()
    yield w
    w.stop()


def _names(dlg) -> list[str]:
    return [dlg.list.item(i).text() for i in range(dlg.list.count())]


def _done(dlg, worker):
    assert worker.wait_idle(30)
    assert not dlg.busy


def test_manage_spaces(qtbot, store, worker):  # noqa: F811
    home = store.conversations.create_conversation("home")
    store.intake.add_page(home, "I adopted a golden retriever puppy named Biscuit.", "Biscuit sounds sweet.")
    store.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    dlg = SpacesDialog(lambda fn, done, err: worker.submit(fn, done, on_error=err))
    qtbot.addWidget(dlg)
    dlg.show()
    changes: list[int] = []
    dlg.changed.connect(lambda: changes.append(1))
    qtbot.waitUntil(lambda: dlg.list.count() == 1, timeout=10_000)
    assert _names(dlg) == ["Personal — 1 page, 1 fact, 1 chat"]
    assert not dlg.delete_button.isEnabled() and not dlg.merge_button.isEnabled()  # the last space stays

    answers = iter(["Work", "Office"])
    dlg.ask_name = lambda title, label, text: next(answers)
    dlg.new_space()
    qtbot.waitUntil(lambda: dlg.list.count() == 2, timeout=10_000)
    assert dlg.status.text() == "Space “Work” created." and changes == [1]
    dlg.select("Work")
    dlg.rename_space()
    qtbot.waitUntil(lambda: "Office — empty" in _names(dlg), timeout=10_000)
    assert [s.name for s in store.spaces.list()] == ["Personal", "Office"]
    # a name taken: one line, nothing changed
    dlg.ask_name = lambda title, label, text: "personal"
    dlg.rename_space()
    qtbot.waitUntil(lambda: "exists already" in dlg.status.text(), timeout=10_000)
    _done(dlg, worker)

    # deleting Personal, which holds memory: refused unless its memory is confirmed forgotten
    asked: list[tuple[str, str, str]] = []

    def refuse(title, text, action):
        asked.append((title, text, action))
        return False

    dlg.confirm = refuse
    dlg.select("Personal")
    dlg.delete_space()
    _done(dlg, worker)
    assert asked and asked[0][2] == "Forget and delete" and "forgets that memory" in asked[0][1]
    assert store.spaces.get(1) is not None and store.pages.count_pages() == 1

    # merge Personal into Office: the confirmation says what happens, then everything moves
    dlg.ask_target = lambda title, names: names.index("Office")
    dlg.confirm = lambda title, text, action: asked.append((title, text, action)) or True
    dlg.merge_space()
    qtbot.waitUntil(lambda: dlg.list.count() == 1, timeout=30_000)
    title, text, action = asked[-1]
    assert action == "Merge" and text.startswith("Merging “Personal” into “Office” would move 1 page and 1 fact.\n\n")
    assert "“Personal” is removed" in text
    assert dlg.status.text() == "“Personal” merged into “Office”: 1 page and 1 fact moved."
    assert _names(dlg) == ["Office — 1 page, 1 fact, 1 chat"]
    assert [p.space_id for p in store.pages.list_pages(limit=5)] == [store.spaces.resolve("Office")]

    # a second space, filled, deleted with its memory after the confirmation
    dlg.ask_name = lambda title, label, text: "Scratch"
    dlg.new_space()
    qtbot.waitUntil(lambda: dlg.list.count() == 2, timeout=10_000)
    scratch = store.spaces.resolve("Scratch")
    store.persona.add_knowledge("user", "The user is testing a scratch space.", space_id=scratch)
    dlg.reload()
    qtbot.waitUntil(lambda: "Scratch — 1 fact" in _names(dlg), timeout=10_000)
    Path("/tmp/spaces").mkdir(parents=True, exist_ok=True)
    dlg.select("Scratch")
    assert dlg.grab().save("/tmp/spaces/manage-spaces.png")
    dlg.confirm = lambda title, text, action: action == "Forget and delete"
    dlg.delete_space()
    qtbot.waitUntil(lambda: dlg.list.count() == 1, timeout=30_000)
    assert dlg.status.text() == "Space “Scratch” deleted; 1 item forgotten with it."
    assert [s.name for s in store.spaces.list()] == ["Office"]
    assert not [k for k in store.persona.list_knowledge() if "scratch" in k.text]


def test_merge_into_says_what_fuses_before_and_after(qtbot, store, worker):  # noqa: F811
    work = store.spaces.create("Work")
    porto = store.persona.add_knowledge("user", "The user lives in Porto.")
    dog = store.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    pinned = store.persona.add_knowledge("user", "The user's manager is Ana.", pinned=True)
    store.persona.add_knowledge("user", "The user drinks green tea.")
    with store.transaction():  # said a day before what Work holds
        store.db.execute("UPDATE knowledge SET updated_at = updated_at - 86400, created_at = created_at - 86400")
    store.persona.add_knowledge("user", "The user lives in Lyon now.", space_id=work)
    store.persona.add_knowledge("user", "The user's dog is named Biscuit.", space_id=work)
    store.persona.add_knowledge("user", "The user's manager is Rui now.", space_id=work)
    store.persona.add_knowledge("user", "The user drinks green tea.", space_id=work)
    dlg = SpacesDialog(lambda fn, done, err: worker.submit(fn, done, on_error=err))
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.list.count() == 2, timeout=10_000)
    dlg.select("Work")
    dlg.ask_target = lambda title, names: names.index("Personal")
    asked: list[str] = []
    dlg.confirm = lambda title, text, action: asked.append(text) or False  # first: Cancel
    dlg.merge_space()
    qtbot.waitUntil(lambda: bool(asked), timeout=30_000)
    _done(dlg, worker)
    question = asked[0]
    assert question.startswith(
        "Merging “Work” into “Personal” would move 1 fact.\n"
        "• Already in “Personal”, kept once: 1 fact.\n"
        "• Said again, would confirm what “Personal” holds: 1 fact.\n"
        "• Newer, would update what “Personal” holds (the older text stays a version): 1 fact.\n"
        "• Against a pinned item, would be left beside it: “The user's manager is Rui now” "
        "(pinned: “The user's manager is Ana”).\n\n"
    )
    assert [(s.name, s.facts) for s in store.spaces.list()] == [("Personal", 4), ("Work", 4)]  # nothing changed
    dlg.confirm = lambda title, text, action: True
    dlg.merge_space()
    qtbot.waitUntil(lambda: dlg.list.count() == 1, timeout=30_000)
    assert dlg.status.text().splitlines() == [
        "“Work” merged into “Personal”: 1 fact moved.",
        "Already in “Personal”, kept once: 1 fact.",
        "Said again, confirmed what “Personal” holds: 1 fact.",
        "Newer, updated what “Personal” holds (the older text stays a version): 1 fact.",
        "Against a pinned item, left beside it: “The user's manager is Rui now” (pinned: “The user's manager is Ana”).",
    ]
    assert store.persona.get_knowledge(porto).text == "The user lives in Lyon now."
    assert store.persona.get_knowledge(dog).confirmations == 1
    assert store.persona.get_knowledge(pinned).text == "The user's manager is Ana."
    assert store.persona.count_knowledge() == 5 and store.check_integrity() == []


def test_reachable_from_the_window_and_the_picker_follows(make_window, chat, qtbot):
    win = make_window(max_tokens=4)
    chat.wait_db(win)
    assert not win.space_picker.isVisible()
    win.menus.spaces_action.trigger()
    dlg = win.findChild(SpacesDialog)
    assert dlg is not None and dlg.isVisible()
    qtbot.waitUntil(lambda: dlg.list.count() == 1, timeout=30_000)
    dlg.ask_name = lambda title, label, text: "Work"
    dlg.new_space()
    qtbot.waitUntil(win.space_picker.isVisible, timeout=30_000)  # `changed`: the picker read the spaces again
    assert [win.space_picker.space_box.itemText(i) for i in range(win.space_picker.space_box.count())] == [
        "Personal",
        "Work",
    ]
    dlg.close()
    win.space_picker.manage_button.click()  # the picker's "Spaces…" opens it too
    qtbot.waitUntil(lambda: any(d.isVisible() for d in win.findChildren(SpacesDialog)), timeout=10_000)
    # the inspector's Add… keeps a fact in the space the header shows
    panel = win.dock.show_inspector()
    try:
        win.space_picker.space_box.setCurrentIndex(1)
        assert panel.write_space() == win.space_picker.space_id() != 1
    finally:
        panel.shutdown()


def test_inspector_pages_move_and_copy_to_a_space(qtbot, store, panel_factory):  # noqa: F811
    fill_store(store)
    work = store.spaces.create("Work")
    total = store.pages.count_pages()
    panel = panel_factory("pages")
    view = panel.pages
    settle(panel)
    qtbot.waitUntil(lambda: view.space.count() == 3, timeout=10_000)
    actions = view.space_actions
    actions.ask_space = lambda title, names: names.index("Work")
    view.table.selectRow(0)
    view.table.selectionModel().select(
        view.model.index(1, 0),
        view.table.selectionModel().SelectionFlag.Select | view.table.selectionModel().SelectionFlag.Rows,
    )
    assert len(view.table.selected_rows()) == 2
    actions.copy_action.trigger()
    qtbot.waitUntil(lambda: store.pages.count_pages(space_id=work) == 2, timeout=20_000)
    settle(panel)
    assert store.pages.count_pages() == total + 2 and "copied to “Work”" in panel.status_label.text()
    load_all(view.model, panel)
    row = next(r for r in range(view.model.rowCount()) if view.model.peek(r).space_id == 1)
    view.table.selectRow(row)  # a page of Personal (the copies in Work are listed too)
    actions.move_action.trigger()
    qtbot.waitUntil(lambda: store.pages.count_pages(space_id=work) == 3, timeout=20_000)
    settle(panel)
    assert store.pages.count_pages() == total + 2 and store.check_integrity() == []


def test_the_trace_names_a_recalled_pages_space_when_there_are_two(qtbot, store, panel_factory):  # noqa: F811
    from ui.inspector.tracing import trace_for_query

    home = store.conversations.create_conversation("home")
    pid = store.intake.add_page(home, "I adopted a golden retriever puppy named Biscuit.", "Biscuit sounds sweet.")
    one = trace_for_query(store, "my puppy Biscuit")
    assert [r["page_id"] for r in one.not_in_prompt] == [pid]
    assert "space_name" not in one.not_in_prompt[0]  # one space: not named
    work = store.spaces.create("Work")
    store.spaces.move_pages([pid], work)
    data = trace_for_query(store, "my puppy Biscuit")
    [row] = data.not_in_prompt
    assert row["page_id"] == pid and row["space_name"] == "Work"
    panel = panel_factory("trace")
    view = panel.trace
    view.set_data(data)
    view.not_in_prompt_view.selectRow(0)
    qtbot.waitUntil(lambda: "space “Work”" in view.detail.toPlainText(), timeout=10_000)


def test_inspector_add_keeps_a_fact_in_the_chats_space(qtbot, store, panel_factory):  # noqa: F811
    work = store.spaces.create("Work")
    store.persona.add_knowledge("user", "The user's deadline is Friday.")  # the same words, in Personal
    panel = panel_factory("persona")
    panel.write_space = lambda: work  # the window sets this to its space picker's space
    panel.ask_new_item = lambda dims: {
        "kind": "knowledge",
        "about": "user",
        "text": "The user's deadline is Friday.",
        "pin": False,
    }
    panel.persona.add_btn.click()
    settle(panel)
    facts = [
        k for k in store.persona.list_knowledge(owner="user", limit=100) if k.text == "The user's deadline is Friday."
    ]
    assert sorted(k.space_id for k in facts) == [1, work]  # added in Work, the Personal one not confirmed
    assert panel.status_label.text().startswith("Remembered as fact")


def test_inspector_persona_move_and_copy_to_a_space(qtbot, store, panel_factory):  # noqa: F811
    work = store.spaces.create("Work")
    kid = store.persona.add_knowledge("user", "The user's deadline is Friday.")
    tid = store.persona.add_trait("likes", "jazz")
    panel = panel_factory("persona")
    pv = panel.persona
    settle(panel)
    pv.space_actions.ask_space = lambda title, names: names.index("Work")
    view = pv.kviews["user"]
    qtbot.waitUntil(lambda: view.table_model().rowCount() == 1, timeout=10_000)
    view.selectRow(0)
    pv.space_actions.copy_action.trigger()
    qtbot.waitUntil(lambda: any(k.space_id == work for k in store.persona.list_knowledge(limit=10)), timeout=20_000)
    settle(panel)
    assert panel.status_label.text() == "1 fact copied to “Work”."
    assert store.persona.get_knowledge(kid).space_id == 1  # the original stays
    pv.space_actions._to_space("move", [("trait", tid)], [(1, "Personal"), (work, "Work")])
    qtbot.waitUntil(lambda: store.persona.get_trait(tid).space_id == work, timeout=20_000)
    settle(panel)
    assert panel.status_label.text() == "1 trait moved to “Work”."
