"""The memory inspector panel, its stand-alone window, and `attach(main_window)` for the dock."""

from __future__ import annotations

import inspect
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QRect, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QMainWindow,
    QPushButton,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.operations import chats as operations
from ui import theme
from ui.elided_label import ShrinkingLabel
from ui.inspector import dialogs
from ui.inspector.activation import TIP as ACTIVATION_TIP
from ui.inspector.activation import ActivationView
from ui.inspector.adapters import TIP as ADAPTERS_TIP
from ui.inspector.adapters import AdaptersView
from ui.inspector.memories import SavedMemoriesView
from ui.inspector.prompt_view import PromptView
from ui.inspector.tabs.overview import OverviewView
from ui.inspector.tabs.pages import PagesView
from ui.inspector.tabs.persona import PersonaView
from ui.inspector.tabs.segments import SegmentsView
from ui.inspector.tabs.trace import TraceView
from ui.tasks import UiWorker

log = logging.getLogger(__name__)
SWITCH_INTERVAL_S = 0.001

POLL_MS = 1500  # how often the event log is checked for changes made elsewhere
REFRESH_DEBOUNCE_MS = 250  # coalesce bursts of memory events into one refresh
OVERVIEW_EVENTS = 300


class _Progress(QObject):
    changed = Signal(int, int)  # (done, total)


class InspectorPanel(QWidget):
    """Everything the assistant remembers, and the controls to correct it."""

    message_requested = Signal(int, int)  # (conversation_id, message_id): "show this message in the chat"
    memory_changed = Signal()  # the panel changed memory (edit, pin, forget, pause, wipe)
    paused_changed = Signal(bool)  # the panel's pause switch changed the store
    exported = Signal(str)  # an export finished: the file's path

    TABS = ("overview", "memories", "segments", "pages", "persona", "trace", "prompt")
    # (title, what the tab shows): the titles are whole, never elided (a tab bar too narrow scrolls)
    TAB_TITLES = {
        "overview": ("Overview", "How much Mnemo remembers, and what changed lately"),
        "memories": ("Saved memories", "What Mnemo knows about you, in plain sentences: edit, pin or forget each"),
        "segments": ("Topics", "Your pages grouped by subject, and how much each topic is in use (its heat)"),
        "pages": ("Pages", "Every exchange Mnemo keeps: your message and the reply"),
        "persona": ("Profile", "Your profile in detail: traits and facts, how sure Mnemo is, their versions"),
        "trace": ("Recall", "What a reply recalled from memory, and why"),
        "prompt": ("Prompt", "The whole prompt of a reply, and how many tokens each part took"),
    }

    def __init__(self, ctx, parent=None, *, poll_ms: int = POLL_MS):
        super().__init__(parent)
        self.ctx = ctx
        self.params = ctx.memory_params()
        # A Python-busy worker thread makes the UI thread wait for the GIL at every Qt → Python call
        # (data(), paint...), up to the switch interval each time (5 ms by default): keep that wait
        # short so the tables stay fluid while the worker runs.
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.worker = UiWorker(lambda: ctx.open_store(), name="mnemo-inspector-db")
        self.worker.on_error = lambda label, exc: self.status_error(f"{label}: {exc}")
        self.worker.busy_changed = self._on_busy
        self._last_event_id: int | None = None
        self._dirty: set[str] = set()
        self._status_until = 0.0
        self._shut = False
        self.paused = False
        # () -> the id of the newest reply in the chat on screen, or None (set by `attach`): the trace tab,
        # opened with nothing selected, shows what that reply recalled instead of an empty table
        self.latest_reply: Callable[[], int | None] | None = None
        # (message id) -> the whole prompt of a recent reply, or None (set by `attach`: the window keeps them)
        self.prompt_of: Callable[[int], Any] | None = None
        self.add_memory: Callable[[], None] = lambda: self.persona.add_item()
        self.details = bool(getattr(getattr(ctx.settings, "ui", None), "developer", False))
        self.setObjectName("MemoryInspector")
        self.setMinimumWidth(MIN_WIDTH)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self._build_controls(lay)
        self._build_tabs(ctx)
        lay.addWidget(self.tabs, 1)

        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_DEBOUNCE_MS)
        self._refresh_timer.timeout.connect(self.refresh_all)
        self._poll_timer = QTimer(self)
        self._poll_timer.setInterval(poll_ms)
        self._poll_timer.timeout.connect(self.poll_events)
        self._poll_soon = QTimer(self)
        self._poll_soon.setSingleShot(True)
        self._poll_soon.setInterval(100)
        self._poll_soon.timeout.connect(self.poll_events)

        worker = self.worker
        self.destroyed.connect(lambda *_: worker.stop(2.0))
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self.load_overview()
        self.poll_events()
        self._poll_timer.start()

    def _build_controls(self, lay: QVBoxLayout) -> None:
        """The two rows above the tabs: Pause and Details; the status line, Refresh, Export… and Wipe all…"""
        top = QHBoxLayout()  # no title of its own: the dock's title bar says "Memory"
        # the controls first, at fixed places: a status line beside them grew and shrank with its text and
        # moved "Pause memory" under the cursor; it has a line of its own below them
        self.pause_box = QCheckBox("Pause memory")
        self.pause_box.setToolTip("While paused, nothing new is remembered (what is kept stays as it is)")
        self.pause_box.toggled.connect(self._on_pause_toggled)
        top.addWidget(self.pause_box)
        top.addStretch(1)
        self.details_btn = QToolButton()
        self.details_btn.setText("Details ▸")
        self.details_btn.setCheckable(True)
        self.details_btn.setChecked(self.details)
        self.details_btn.setToolTip(
            "Show the technical details too: the memory's own terms, scores and formulas, and the log's entries"
        )
        self.details_btn.toggled.connect(self.set_details)
        top.addWidget(self.details_btn)
        lay.addLayout(top)
        top = QHBoxLayout()  # the second row: the status line (elided, never pushing) and the buttons
        # plain text (it quotes facts the user wrote), elided to its room: it never pushes the buttons about
        self.status_label = ShrinkingLabel("")
        self.status_label.setObjectName("inspectorStatus")
        top.addWidget(self.status_label, 1)
        self.refresh_btn = QPushButton("Refresh")
        self.refresh_btn.clicked.connect(lambda: self.refresh_all(force=True))
        top.addWidget(self.refresh_btn)
        self.export_btn = QPushButton("Export…")
        self.export_btn.setToolTip("Save everything remembered to a file: JSON (complete) or Markdown (readable)")
        self.export_btn.clicked.connect(self.export_dialog)
        top.addWidget(self.export_btn)
        self.wipe_btn = QPushButton("Wipe all…")
        self.wipe_btn.setToolTip("Forget everything the assistant remembers (conversations stay)")
        self.wipe_btn.setObjectName("dangerButton")
        self.wipe_btn.clicked.connect(self.wipe_all)
        top.addWidget(self.wipe_btn)
        lay.addLayout(top)
        self._export_progress = _Progress()  # emitted from the worker thread, delivered in this one
        self._export_progress.changed.connect(self._on_export_progress)

    def _build_tabs(self, ctx) -> None:
        """One tab per view (TABS, in that order), then Activation memory and Adapters."""
        self.tabs = QTabWidget()
        self.tabs.setObjectName("inspectorTabs")
        self.tabs.setElideMode(Qt.TextElideMode.ElideNone)  # "Overview" read "w" in a docked panel
        self.tabs.setUsesScrollButtons(True)
        self.tabs.setDocumentMode(True)
        self.overview = OverviewView(self)
        self.memories = SavedMemoriesView(self)
        self.segments = SegmentsView(self)
        self.pages = PagesView(self)
        self.persona = PersonaView(self)
        self.trace = TraceView(self)
        self.prompt = PromptView(self)
        for name in self.TABS:
            title, tip = self.TAB_TITLES[name]
            i = self.tabs.addTab(self._view(name), title)
            self.tabs.setTabToolTip(i, tip)
        self.activation = ActivationView(self, ctx.paths.data_dir)  # refreshes itself when shown
        self.tabs.setTabToolTip(self.tabs.addTab(self.activation, "Activation memory"), ACTIVATION_TIP)
        self.adapters = AdaptersView(self, ctx)  # parametric memory; refreshes itself when shown
        self.tabs.setTabToolTip(self.tabs.addTab(self.adapters, "Adapters"), ADAPTERS_TIP)
        self.tabs.currentChanged.connect(self._on_tab)

    # ------------------------------------------------------------------ worker plumbing
    def act(
        self,
        fn: Callable[[Any], Any],
        message: str | Callable[[Any], str] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        """Change memory on the worker, then refresh every view (selection and scroll are kept). `message`
        is the status line, or a function that writes it from what `fn` returned; by default it is what that
        says of itself (a memory verb's record, app.operations: `describe()`)."""
        label = message if isinstance(message, str) else "changing memory"

        def said(result: Any) -> str:
            if isinstance(message, str):
                return message
            return message(result) if message is not None else str(result.describe())

        def done(result):
            self.status(said(result))
            if after is not None:
                after()
            self.memory_changed.emit()
            self.refresh_all(force=True)

        self.worker.submit(
            fn, done, label=label, on_error=lambda exc: self.status_error(f"{label.rstrip('.')} failed: {exc}")
        )

    def resolve_keys(self, model, rows: list[int], callback: Callable[[list], None]) -> None:
        """Ids of the given rows of a lazy model (fetching those whose block is not loaded)."""
        keys: list = []
        missing: list[int] = []
        for r in rows:
            rec = model.peek(r) if hasattr(model, "peek") else model.record(r)
            if rec is None:
                missing.append(r)
            else:
                keys.append(model.key_of(rec))
        if not missing:
            callback(keys)
            return
        ranges: list[list[int]] = []
        for r in missing:
            if ranges and r == ranges[-1][1] + 1:
                ranges[-1][1] = r
            else:
                ranges.append([r, r])
        filters, (order_by, desc) = model.filters, model.order

        def fetch(store):
            out = []
            for a, b in ranges:
                out += [model.key_of(x) for x in model._fetch_fn(store, filters, order_by, desc, a, b - a + 1)]
            return out

        self.worker.submit(fetch, lambda more: callback(keys + more), label="resolve selection")

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Process events until the worker has delivered everything (tests and benchmarks)."""
        return self.worker.wait_idle(timeout)

    def shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        for t in (self._poll_timer, self._refresh_timer, self._poll_soon):
            try:
                t.stop()
            except RuntimeError:
                pass
        self.worker.stop()

    def closeEvent(self, event) -> None:
        if self.isWindow():
            self.shutdown()
        super().closeEvent(event)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if getattr(self, "_hidden_since_poll", False) and not self._shut:
            self._hidden_since_poll = False
            self._poll_soon.start()

    # ------------------------------------------------------------------ user feedback (overridable in tests)
    def confirm(self, title: str, text: str, action: str = "Forget") -> bool:
        return dialogs.ask_confirm(self, title, text, action)

    def confirm_typed(self, title: str, text: str, phrase: str = dialogs.WIPE_PHRASE) -> bool:
        return dialogs.ask_typed(self, title, text, phrase)

    def edit_texts(self, title: str, fields: list[tuple[str, str]], note: str = "") -> list[str] | None:
        return dialogs.ask_edit(self, title, fields, note)

    def ask_new_item(self, dimensions: list[str]) -> dict | None:
        return dialogs.ask_new_item(self, dimensions)

    def status(self, text: str, error: bool = False) -> None:
        c = theme.colors()
        self.status_label.setStyleSheet(f"color: {c.error};" if error else f"color: {c.accent};")
        self.status_label.setText(text)
        self._status_until = time.monotonic() + (8 if error else 4)

    def status_error(self, text: str) -> None:
        self.status(text, error=True)

    def _on_busy(self, busy: bool) -> None:
        if time.monotonic() < self._status_until:
            return
        self.status_label.setStyleSheet(f"color: {theme.colors().muted};")
        self.status_label.setText("loading…" if busy else "")

    # ------------------------------------------------------------------ tabs and loading
    def _on_tab(self, index: int) -> None:
        name = self.TABS[index] if 0 <= index < len(self.TABS) else ""
        view = self._view(name)
        if view is None:
            return
        if hasattr(view, "ensure_loaded"):
            view.ensure_loaded()
        if name in ("trace", "prompt") and view.data is None and view.loading is None and self.latest_reply is not None:
            mid = self.latest_reply()  # opened empty: the newest reply on screen
            if mid is not None:
                view.show_message(int(mid))
        if name in self._dirty:
            self._dirty.discard(name)
            if hasattr(view, "refresh"):
                view.refresh()

    def _view(self, name: str):
        return {
            "overview": self.overview,
            "memories": self.memories,
            "segments": self.segments,
            "pages": self.pages,
            "persona": self.persona,
            "trace": self.trace,
            "prompt": self.prompt,
        }.get(name)

    def current_tab(self) -> str:
        i = self.tabs.currentIndex()
        return self.TABS[i] if 0 <= i < len(self.TABS) else ""

    def show_tab(self, name: str) -> None:
        i = self.TABS.index(name)
        if self.tabs.currentIndex() != i:
            self.tabs.setCurrentIndex(i)
        else:
            self._on_tab(i)

    def load_overview(self) -> None:
        def fetch(store):
            stats = store.stats()
            # recalls (segment_visited) would flood the list: it shows what changed in memory
            evs = store.event_log.events(limit=OVERVIEW_EVENTS, newest=True, exclude_kinds=("segment_visited",))
            return stats, evs

        def done(result):
            stats, evs = result
            self.overview.apply(stats, evs, self.params)
            self.paused = bool(stats.get("paused"))
            self.pause_box.blockSignals(True)
            self.pause_box.setChecked(self.paused)
            self.pause_box.blockSignals(False)

        self.worker.submit(fetch, done, label="overview")

    def refresh_all(self, force: bool = False) -> None:
        """Re-read what is on screen now; other tabs refresh when they are next shown."""
        if self._shut:
            return
        self.load_overview()
        current = self.current_tab()
        for name in ("memories", "segments", "pages", "persona"):
            view = self._view(name)
            loaded = getattr(view, "loaded", False) or getattr(getattr(view, "model", None), "ready", False)
            if not loaded:
                continue
            if name == current:
                view.refresh()
            else:
                self._dirty.add(name)

    # ------------------------------------------------------------------ live updates
    def notify_memory_event(self, event=None) -> None:
        """Slot for the main window's `memory_event` signal (any arguments): check the log soon."""
        if not self._shut:
            self._poll_soon.start()

    def poll_events(self) -> None:
        if self._shut or self._poll_busy():
            return
        if self._last_event_id is not None and not self.isVisible():
            self._hidden_since_poll = True  # a closed dock: check again when it is shown
            return
        last = self._last_event_id

        def fetch(store):
            if last is None:
                return "init", store.event_log.latest_event_id()
            if last:
                chk = store.event_log.events(last - 1, 1)
                if not chk or chk[0].id != last:
                    return "reset", store.event_log.latest_event_id()
            evs = store.event_log.events(last, 1000)
            newest = evs[-1].id if evs else last
            if len(evs) == 1000:
                newest = store.event_log.latest_event_id()
            return ("new" if evs else "same"), newest

        def done(result):
            what, newest = result
            self._last_event_id = newest
            if what in ("new", "reset"):
                self._refresh_timer.start()

        def polled(result) -> None:
            self._polling = False
            done(result)

        def poll_failed(_exc: BaseException) -> None:
            self._polling = False

        self._polling = True
        self.worker.submit(fetch, polled, label="poll events", on_error=poll_failed)

    def _poll_busy(self) -> bool:
        return getattr(self, "_polling", False)

    # ------------------------------------------------------------------ navigation (also used by links)
    def follow_link(self, href: str) -> None:
        kind, _, rest = href.partition(":")
        try:
            if kind == "page":
                self.show_page(int(rest))
            elif kind == "segment":
                self.show_segment(int(rest))
            elif kind == "segpages":
                self.show_segment_pages(int(rest))
            elif kind == "message":
                cid, _, mid = rest.partition(":")
                self.open_message(int(cid), int(mid))
        except ValueError:
            log.debug("bad inspector link %r", href)

    def show_page(self, page_id: int) -> None:
        self.show_tab("pages")
        self.pages.load_page(int(page_id))

    def show_segment(self, segment_id: int) -> None:
        self.show_tab("segments")
        self.segments.show_segment(int(segment_id))

    def show_segment_pages(self, segment_id: int) -> None:
        self.show_tab("pages")
        self.pages.set_segment_filter(int(segment_id))

    def show_chat_pages(self, conversation_id: int | None, title: str = "", *, deleted: bool = False) -> None:
        """The Pages tab, filtered to what memory holds from one chat (or, `deleted`, from chats that
        were deleted without forgetting it)."""
        self.show_tab("pages")
        self.pages.set_chat_filter(None if conversation_id is None else int(conversation_id), title, deleted=deleted)

    def show_persona_item(self, kind: str, item_id: int) -> None:
        self.show_tab("persona")
        self.persona.load_item(kind, int(item_id), select=True)

    def show_memory(self, kind: str, item_id: int) -> None:
        """A fact or trait about the user in Saved memories (loaded first if need be)."""
        self.show_tab("memories")

        def reveal(_=None) -> None:  # after the list's load, which the tab asked for first
            self.memories.reveal(kind, int(item_id))

        if self.memories.loaded:
            reveal()
        else:
            self.worker.submit(lambda s: None, reveal, label="saved memories")

    def show_event(self, event) -> None:
        """Open the inspector where a memory event happened ("Memory updated" in the status bar): a fact or
        trait in Saved memories (or the Profile, for Mnemo's own), a topic, a page; else the Overview with
        the event selected in the list of changes."""
        kind, iid = getattr(event, "item_kind", None), getattr(event, "item_id", None)
        owner = (getattr(event, "detail", None) or {}).get("owner", "user")
        if kind in ("trait", "knowledge") and iid and owner == "user":
            self.show_memory(kind, iid)
        elif kind in ("trait", "knowledge") and iid:
            self.show_persona_item(kind, iid)
        elif kind == "segment" and iid:
            self.show_segment(iid)
        elif kind == "page" and iid and getattr(event, "kind", "") == "page_moved":
            self.show_page(iid)
        else:
            self.show_tab("overview")
            eid = getattr(event, "id", None)

            def select(_=None) -> None:  # after the overview's reload, which the tab asked for first
                if eid is not None:
                    self.overview.select_event(int(eid))

            if eid is not None:
                self.worker.submit(lambda s: None, select, label="overview")

    def set_details(self, on: bool) -> None:
        """The Details switch: the memory core's own terms and figures, shown beside the plain words."""
        self.details = bool(on)
        if self.details_btn.isChecked() != self.details:
            self.details_btn.setChecked(self.details)
        self.details_btn.setText("Details ▾" if self.details else "Details ▸")
        for name in self.TABS:
            view = self._view(name)
            if hasattr(view, "set_details"):
                view.set_details(self.details)

    def restyle(self) -> None:
        """The theme changed: the charts and the coloured texts take its colours."""
        self.segments.chart.restyle()
        self.segments.history.restyle()
        self.status_label.setStyleSheet(f"color: {theme.colors().muted};")

    def open_message(self, conversation_id: int, message_id: int | None) -> None:
        if message_id is None:
            return
        self.message_requested.emit(int(conversation_id), int(message_id))
        self.status(f"Message {message_id} of conversation {conversation_id}")

    def show_trace_for_message(self, message_id: int) -> None:
        """Show what was recalled for an assistant reply (called when the chat selects a message)."""
        self.trace.show_message(int(message_id))  # first: the tab then does not open on the newest reply
        self.prompt.show_message(int(message_id))
        self.show_tab("trace")

    def show_prompt_for_message(self, message_id: int) -> None:
        """The whole prompt of a reply, with the tokens of each part."""
        self.prompt.show_message(int(message_id))
        self.show_tab("prompt")

    # ------------------------------------------------------------------ global controls
    def _on_pause_toggled(self, paused: bool) -> None:
        self.set_paused(paused)

    def set_paused(self, paused: bool) -> None:
        """The global pause switch (in the store: the main window's Memory menu and the CLI share it)."""
        self.paused = paused
        self.act(
            lambda s: operations.set_memory_paused(s, paused),
            "Memory paused: nothing new is remembered." if paused else "Memory resumed.",
            after=lambda: self.paused_changed.emit(paused),
        )

    def export_dialog(self) -> None:
        """Ask where to save, then export on the worker (see `export_to`)."""
        default = Path.home() / f"mnemo-memory-{time.strftime('%Y-%m-%d')}.json"
        path, chosen = QFileDialog.getSaveFileName(
            self,
            "Export memory",
            str(default),
            "JSON, complete (*.json);;Markdown, readable (*.md);;Memory cube, for another memory (*.mnemocube)",
        )
        if path and chosen.startswith("Memory cube"):
            self.export_cube(path)
        elif path:
            self.export_to(path, "markdown" if chosen.startswith("Markdown") else "json")

    def export_cube(self, path: str | None = None):
        """Export… as a memory cube: what goes in (the whole memory, a chat, a segment, a span of time, the
        persona) is chosen in its dialog (ui/cube_dialog.py)."""
        from ui.cube_dialog import CubeExportDialog

        if path and not path.endswith(".mnemocube"):
            path = str(Path(path).with_suffix(".mnemocube"))
        dlg = CubeExportDialog(self.ctx, path, self)
        dlg.exported.connect(lambda result: self.status(f"Exported a memory cube: {result.describe()}"))
        self.cube_export_window = dlg
        dlg.open()
        return dlg

    def export_to(self, path: str, fmt: str | None = None) -> None:
        """Export on the worker thread; progress and the outcome show in the status line."""
        self.export_btn.setEnabled(False)
        progress = self._export_progress

        def work(store):
            return operations.export_memory(store, path, fmt=fmt, on_progress=progress.changed.emit)

        def done(result):
            self.export_btn.setEnabled(True)
            self.status(f"Exported {operations.describe_memory_export(result)} to {result.path}")
            self.exported.emit(str(result.path))

        def failed(exc):
            self.export_btn.setEnabled(True)
            self.status_error(f"Export failed, nothing was written: {exc}")

        self.status("Exporting…")
        self.worker.submit(work, done, label="export", on_error=failed)

    def _on_export_progress(self, done: int, total: int) -> None:
        if not self.export_btn.isEnabled():
            self.status(f"Exporting… {done:,} of {total:,} items")

    def wipe_all(self) -> None:
        if not self.confirm_typed(
            "Wipe all memory",
            "This forgets everything Mnemo remembers: every page, topic, trait and fact, their earlier versions "
            "and the log of changes. Your chats stay, but Mnemo will not remember them. This cannot be undone.",
        ):
            return

        def wipe(store):
            store.curation.wipe_memory()

        def done(_):
            self.status("All memory wiped.")
            self.memory_changed.emit()
            self.pages.set_segment_filter(None) if self.pages.segment_filter is not None else None
            for m in (self.pages.model, self.segments.model):
                if m.ready:
                    m.reload()
            self.segments.load_chart()
            self.persona.refresh()
            self.memories.refresh()
            self.trace.set_data(None)
            self.pages._show_page(None)
            self.segments._show_segment(None)
            self.load_overview()

        self.worker.submit(wipe, done, label="wipe", on_error=lambda exc: self.status_error(f"wipe failed: {exc}"))


class InspectorWindow(QMainWindow):
    """The inspector as a window of its own (e.g. `mnemo` → Memory → Open in window, or tests)."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Mnemo — Memory inspector")
        self.panel = InspectorPanel(ctx, self)
        self.setCentralWidget(self.panel)
        self.resize(1280, 860)

    def closeEvent(self, event) -> None:
        self.panel.shutdown()
        super().closeEvent(event)


DOCK_ATTR = "_mnemo_inspector_dock"
DOCK_WIDTH = 560  # the inspector's tables and charts need about this much to show their columns and labels
MIN_WIDTH = 420  # the narrowest the panel gets docked (its buttons and cards still whole)


def room_for_dock(window: QRect, screen: QRect, want: int = DOCK_WIDTH) -> QRect:
    """The window's geometry after making room for a `want`-wide dock: wider by up to `want`, as far as
    the screen allows, and moved left when its right edge would leave the screen. The chat keeps its
    width when there is room (a 1100-px window would otherwise leave the chat and the dock ~430 px each)."""
    width = max(window.width(), min(screen.width(), window.width() + want))
    x = min(window.x(), screen.x() + screen.width() - width)
    return QRect(max(screen.x(), x), window.y(), width, window.height())


def _connect_message_target(panel: InspectorPanel, main_window) -> None:
    for name in ("show_message", "open_message", "reveal_message", "select_message", "go_to_message"):
        fn = getattr(main_window, name, None)
        if not callable(fn):
            continue
        try:
            n = len(
                [
                    p
                    for p in inspect.signature(fn).parameters.values()
                    if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
            )
        except (TypeError, ValueError):
            n = 2
        if n >= 2:
            panel.message_requested.connect(lambda cid, mid, f=fn: f(cid, mid))
        else:
            panel.message_requested.connect(lambda cid, mid, f=fn: f(mid))
        return


def attach(main_window) -> InspectorPanel:
    """Create (once) the "Memory" dock on the right of `main_window`, show and raise it; return its panel.

    Connects, when they exist: `main_window.memory_event` or `main_window.backend.memoryEvent`
    (Qt signals re-emitting scheduler events) → live refresh; `panel.message_requested(cid, mid)` → `main_window.show_message`
    (or open_message / reveal_message / select_message / go_to_message).
    """
    dock = getattr(main_window, DOCK_ATTR, None)
    panel = None
    if dock is not None:
        try:
            panel = dock.widget()
        except RuntimeError:  # deleted
            dock = None
    if dock is None or not isinstance(panel, InspectorPanel):
        panel = InspectorPanel(main_window.ctx)
        dock = QDockWidget("Memory", main_window)
        dock.setObjectName("MemoryInspectorDock")
        dock.setAllowedAreas(Qt.DockWidgetArea.LeftDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)
        dock.setWidget(panel)
        main_window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        setattr(main_window, DOCK_ATTR, dock)
        for sig in (
            getattr(main_window, "memory_event", None),
            getattr(getattr(main_window, "backend", None), "memoryEvent", None),
        ):
            if sig is not None and hasattr(sig, "connect"):
                try:
                    sig.connect(panel.notify_memory_event)
                except (RuntimeError, TypeError) as exc:  # pragma: no cover - defensive
                    log.warning("could not connect to memory events: %s", exc)
        _connect_message_target(panel, main_window)
        offer = getattr(getattr(main_window, "backups", None), "offer_to_drop_forgotten", None)
        if callable(offer):  # after a forget or a wipe: the backups that still hold it
            panel.memory_changed.connect(offer)
        if callable(getattr(main_window, "latest_reply_id", None)):
            panel.latest_reply = main_window.latest_reply_id
        prompt_of = getattr(getattr(main_window, "backend", None), "prompt_of", None)
        if callable(prompt_of):
            panel.prompt_of = prompt_of
        if callable(getattr(main_window, "show_memory_paused", None)):
            panel.paused_changed.connect(main_window.show_memory_paused)
        if isinstance(main_window, QObject):
            worker = panel.worker
            main_window.destroyed.connect(lambda *_: worker.stop(2.0))
        screen = main_window.screen() if hasattr(main_window, "screen") else None
        if screen is not None and not (main_window.isMaximized() or main_window.isFullScreen()):
            geo = room_for_dock(main_window.geometry(), screen.availableGeometry())
            if geo != main_window.geometry():
                main_window.setGeometry(geo)
        try:
            main_window.resizeDocks([dock], [DOCK_WIDTH], Qt.Orientation.Horizontal)
        except Exception:  # pragma: no cover - older Qt
            pass
        if callable(getattr(main_window, "inspector_attached", None)):
            main_window.inspector_attached(dock)
    dock.show()
    dock.raise_()
    if callable(getattr(main_window, "fit_layout", None)):
        main_window.fit_layout()  # on a small window: the chat list gives way, or the inspector floats
    panel.setFocus()
    return panel
