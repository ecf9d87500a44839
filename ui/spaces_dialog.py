"""Memory ▸ Memory spaces… (and the space picker's "Manage…"): create, rename, merge and delete the
memory's spaces (memory_core.spaces.component) through app.operations.spaces, the functions `mnemo memory spaces`
calls. Each change runs on the window's database thread (`run`, ui.bridge's `db`), so a merge or the
deletion of a space of many pages never blocks the window; the buttons wait while it runs.

A space that holds memory is deleted only when the user confirms that its memory is forgotten with it,
as `delete --forget` on the command line; a merge says what it would do before it runs (a dry run: what
moves, what is held already, what confirms or updates the target's facts, what conflicts with a pinned
one), and what it did after. The questions go
through `ask_name`, `ask_target` and `confirm`, which tests replace.

`SpaceActions` puts "Move to space…" and "Copy to space…" on the inspector's pages (their context menu):
the selected pages go to, or are copied into, another space (app.operations.spaces move_items/copy_items).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QPoint, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.operations import spaces as ops
from app.wording import count

Run = Callable[..., Any]  # run(fn(store), on_done(value), on_error(exc)): the database thread


class SpacesDialog(QDialog):
    """The list of spaces with what each holds, and buttons to change them. `changed` is emitted after
    each change that went through (the window then reads the spaces into its picker again)."""

    changed = Signal()

    def __init__(self, run: Run, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Memory spaces")
        self.setObjectName("spacesDialog")
        self._run = run
        self.busy = False
        self.infos: list[ops.SpaceInfo] = []
        lay = QVBoxLayout(self)
        intro = QLabel(
            "A memory space keeps part of what Mnemo remembers apart (Personal, Work). Each chat remembers "
            "in one space, and recalls from it or from every space.",
            self,
        )
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.list = QListWidget(self)
        self.list.setObjectName("spacesList")
        self.list.setAccessibleName("Memory spaces")
        self.list.currentRowChanged.connect(lambda _row: self._enable())
        lay.addWidget(self.list)
        row = QHBoxLayout()
        self.new_button = self._button("New space…", self.new_space, row)
        self.rename_button = self._button("Rename…", self.rename_space, row)
        self.merge_button = self._button("Merge into…", self.merge_space, row)
        self.delete_button = self._button("Delete…", self.delete_space, row)
        lay.addLayout(row)
        self.status = QLabel("", self)
        self.status.setObjectName("spacesStatus")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        box.rejected.connect(self.reject)
        lay.addWidget(box)
        self.resize(520, 360)
        self.reload()

    def _button(self, text: str, slot: Callable[[], None], row: QHBoxLayout) -> QPushButton:
        b = QPushButton(text, self)
        b.clicked.connect(slot)
        row.addWidget(b)
        return b

    # ------------------------------------------------------------------ reading
    def reload(self) -> None:
        self._start("", ops.spaces, self._show)

    def _show(self, infos: list[ops.SpaceInfo]) -> None:
        keep = self.selected()
        self.infos = list(infos)
        self.list.clear()
        for info in self.infos:
            item = QListWidgetItem(f"{info.name} — {ops.describe_space(info)}")
            item.setData(Qt.ItemDataRole.UserRole, info.id)
            self.list.addItem(item)
        ids = [i.id for i in self.infos]
        self.list.setCurrentRow(ids.index(keep.id) if keep is not None and keep.id in ids else 0)
        self._enable()

    def selected(self) -> ops.SpaceInfo | None:
        row = self.list.currentRow()
        return self.infos[row] if 0 <= row < len(self.infos) else None

    def select(self, name: str) -> None:
        """Select the space named `name` (tests, and after creating one)."""
        for row, info in enumerate(self.infos):
            if info.name == name:
                self.list.setCurrentRow(row)

    # ------------------------------------------------------------------ changing
    def new_space(self) -> None:
        name = self.ask_name("New space", "Name of the new space:", "")
        if name:
            self._change(
                "Creating the space…", lambda s: ops.create_space(s, name), lambda _sid: f"Space “{name}” created."
            )

    def rename_space(self) -> None:
        info = self.selected()
        if info is None:
            return
        name = self.ask_name("Rename space", f"New name for “{info.name}”:", info.name)
        if name and name != info.name:
            self._change("Renaming…", lambda s: ops.rename_space(s, info.id, name), lambda new: f"Renamed to “{new}”.")

    def merge_space(self) -> None:
        """Merge into…: the space to merge into, then what the merge would do (a dry run on the database
        thread: what moves, what is held already, what confirms or updates the target's facts, what is
        left beside a pinned one) as the question, then the merge, whose result the status line says."""
        info = self.selected()
        others = [i for i in self.infos if info is not None and i.id != info.id]
        if info is None or not others:
            return
        target = self.ask_target(f"Merge “{info.name}” into which space?", [i.name for i in others])
        if target is None:
            return
        into = others[target]
        self._start(
            "Working out what the merge would do…",
            lambda s: ops.merge_spaces(s, info.id, into.id, dry_run=True),
            lambda plan: self._confirm_merge(info, into, plan),
        )

    def _confirm_merge(self, info: ops.SpaceInfo, into: ops.SpaceInfo, plan: ops.SpaceMerge) -> None:
        self.status.setText("")
        text = merge_question(info.name, into.name, plan)
        if self.confirm("Merge spaces", text, "Merge"):
            self._change(
                "Merging… (a large space takes a while)",
                lambda s: ops.merge_spaces(s, info.id, into.id),
                lambda done: "\n".join(ops.merge_lines(done)),
            )

    def delete_space(self) -> None:
        info = self.selected()
        if info is None:
            return
        if len(self.infos) < 2:
            self.status.setText("The last space cannot be deleted.")
            return
        if info.empty:
            if self.confirm("Delete space", f"Delete the empty space “{info.name}”?", "Delete"):
                self._change("Deleting…", lambda s: ops.delete_space(s, info.id), str)
            return
        text = (
            f"“{info.name}” holds {ops.describe_space(info)}. Deleting it forgets that memory for good (move or "
            "merge it into another space first to keep it). Its chats then remember in another space."
        )
        if self.confirm("Delete space and forget its memory", text, "Forget and delete"):
            self._change("Forgetting and deleting…", lambda s: ops.delete_space(s, info.id, forget=True), str)

    def _change(self, doing: str, fn: Callable[[Any], Any], said: Callable[[Any], str]) -> None:
        def done(value: Any) -> None:
            self.status.setText(said(value))
            self.changed.emit()
            self.reload()

        self._start(doing, fn, done)

    def _start(self, doing: str, fn: Callable[[Any], Any], done: Callable[[Any], None]) -> None:
        self.busy = True
        self._enable()
        if doing:
            self.status.setText(doing)

        def finish(value: Any) -> None:
            self.busy = False
            done(value)
            self._enable()

        def failed(exc: BaseException) -> None:
            self.busy = False
            self.status.setText(str(exc) if isinstance(exc, ops.SpaceError) else f"That did not work: {exc}")
            self._enable()

        self._run(fn, finish, failed)

    def _enable(self) -> None:
        chosen = self.selected() is not None and not self.busy
        self.new_button.setEnabled(not self.busy)
        self.rename_button.setEnabled(chosen)
        self.merge_button.setEnabled(chosen and len(self.infos) > 1)
        self.delete_button.setEnabled(chosen and len(self.infos) > 1)

    # ------------------------------------------------------------------ questions (tests replace these)
    def ask_name(self, title: str, label: str, text: str) -> str | None:
        name, ok = QInputDialog.getText(self, title, label, text=text)
        return name.strip() if ok and name.strip() else None

    def ask_target(self, title: str, names: list[str]) -> int | None:
        name, ok = QInputDialog.getItem(self, "Merge spaces", title, names, 0, False)
        return names.index(name) if ok and name in names else None

    def confirm(self, title: str, text: str, action: str) -> bool:
        box, yes = self.question_box(title, text, action)
        box.exec()
        return box.clickedButton() is yes

    def question_box(self, title: str, text: str, action: str) -> tuple[QMessageBox, QPushButton]:
        """The confirmation `confirm` shows (Cancel the default), and its `action` button."""
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Cancel, self)
        yes = box.addButton(action, QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        return box, yes


def merge_question(name: str, into: str, plan: ops.SpaceMerge) -> str:
    """The Merge into… question: what the merge would do (`plan`, a dry run), then what it means."""
    head, *rest = ops.merge_lines(plan)
    details = "".join(f"\n• {line}" for line in rest)
    return (
        f"{head}{details}\n\nA fact or trait close to one “{into}” holds confirms or updates it, as Mnemo does "
        f"when you say something again; one that would change a pinned item is left beside it. Chats of “{name}” "
        f"then remember in “{into}”, and “{name}” is removed. This cannot be undone."
    )


class SpaceActions(QObject):
    """ "Move to space…" and "Copy to space…" for what is selected in inspector lists (pages; facts and
    traits), in the context menu of each of `widgets`. `selected(callback)` hands the selection to
    `callback` as (kind, id) pairs, kind 'page', 'knowledge' or 'trait'; `panel` is the inspector's
    (ui.inspector.host.PanelHost: worker, act, status). The spaces are read when an action starts."""

    WHAT = {"page": "page", "knowledge": "fact", "trait": "trait"}

    def __init__(self, panel: Any, widgets: list[Any], selected: Callable[[Callable[[list], None]], None]):
        super().__init__(widgets[0])
        self.panel, self.selected = panel, selected
        self.move_action = QAction("Move to space…", widgets[0])
        self.move_action.setToolTip("Put the selected items in another memory space")
        self.move_action.triggered.connect(lambda: self.start("move"))
        self.copy_action = QAction("Copy to space…", widgets[0])
        self.copy_action.setToolTip("Keep the selected items here and put a copy in another memory space")
        self.copy_action.triggered.connect(lambda: self.start("copy"))
        for w in widgets:
            w.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            w.customContextMenuRequested.connect(lambda pos, w=w: self._menu(w, pos))

    def _menu(self, widget: Any, pos: QPoint) -> None:
        menu = QMenu(widget)
        menu.addAction(self.move_action)
        menu.addAction(self.copy_action)
        menu.exec(widget.viewport().mapToGlobal(pos))

    def start(self, how: str) -> None:
        """Move or copy ('move' | 'copy') the selection: its ids, the spaces, then the space to put it in."""

        def with_items(items: list) -> None:
            items = sorted({(str(k), int(i)) for k, i in items if i is not None})
            if items:
                self.panel.worker.submit(
                    lambda s: [(sp.id, sp.name) for sp in ops.spaces(s)], lambda sp: self._to_space(how, items, sp)
                )

        self.selected(with_items)

    def _to_space(self, how: str, items: list[tuple[str, int]], spaces: list[tuple[int, str]]) -> None:
        if len(spaces) < 2:
            self.panel.status("There is only one memory space: make another in Memory ▸ Memory spaces…")
            return
        kinds = sorted({k for k, _ in items})
        what = count(len(items), self.WHAT[kinds[0]]) if len(kinds) == 1 else count(len(items), "item")
        pick = self.ask_space(f"{'Move' if how == 'move' else 'Copy'} {what} to which space?", [n for _, n in spaces])
        if pick is None:
            return
        sid, name = spaces[pick]
        by_kind = {k: [i for kk, i in items if kk == k] for k in kinds}

        def fn(s) -> int:
            do = ops.move_items if how == "move" else (lambda *a: len(ops.copy_items(*a)))
            return sum(do(s, kind, ids, sid) for kind, ids in by_kind.items())

        verb = "moved" if how == "move" else "copied"
        noun = self.WHAT[kinds[0]] if len(kinds) == 1 else "item"
        self.panel.act(fn, lambda n: f"{count(n, noun)} {verb} to “{name}”.")

    def ask_space(self, title: str, names: list[str]) -> int | None:
        """Which space (an index into `names`); tests replace this."""
        name, ok = QInputDialog.getItem(None, "Memory spaces", title, names, 0, False)
        return names.index(name) if ok and name in names else None
