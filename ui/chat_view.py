"""The chat view: one widget per message, Markdown bodies, message actions, and the empty state."""

from __future__ import annotations

import datetime as dt
import html
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import wording
from app.operations.remember import footnote, forget_note
from ui import markdown, plain, theme

if TYPE_CHECKING:
    from models.discover import FoundModel, FoundServer

MAX_RENDERED = 60  # messages rendered at once; older ones behind "Show earlier messages"
FIRST_RENDER = 4  # of those, built before the chat shows (the newest: what is on screen) ...
RENDER_BATCH = 2  # ... the older ones follow, this many per turn of the event loop
RENDER_PAUSE_MS = 1
COLUMN_MAX_WIDTH = 860  # the chat column's width on a wide window
USER_SHARE = 0.8  # a user bubble takes at most this share of the column

STATUS_TEXT = {
    "stopped": "Stopped",
    "interrupted": "Interrupted (the app closed while this reply was being written)",
    "streaming": "Being written…",
}


class MessageBody(QTextBrowser):
    """A read-only Markdown view that is exactly as tall as its text (no scroll bars of its own)."""

    def __init__(self, parent: QWidget | None = None, *, shrink: bool = False):
        super().__init__(parent)
        self.setObjectName("messageBody")
        self.setOpenExternalLinks(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.document().setDocumentMargin(2)
        self.viewport().setAutoFillBackground(False)
        self._shrink = shrink  # user bubbles hug their text
        self._natural_width = 0
        policy = QSizePolicy.Policy.Maximum if shrink else QSizePolicy.Policy.Expanding
        self.setSizePolicy(policy, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)

    def set_content(self, text: str, *, markdown_on: bool = True) -> None:
        markdown.render(self.document(), text, markdown=markdown_on)
        if self._shrink:  # measure the unwrapped width on a scratch copy (the widget owns the real layout)
            scratch = self.document().clone()
            scratch.setDefaultFont(self.font())
            scratch.setTextWidth(-1)
            self._natural_width = int(scratch.idealWidth()) + 2 * self.frameWidth() + 6
            self.updateGeometry()
        self._fit_height()

    def sizeHint(self) -> QSize:
        base = super().sizeHint()
        if self._shrink:
            return QSize(max(40, self._natural_width), base.height())
        return base

    def minimumSizeHint(self) -> QSize:
        return QSize(40, 10)

    def _fit_height(self, *_args) -> None:
        h = int(self.document().size().height()) + 2 * self.frameWidth() + 2
        if h != self.height():
            self.setFixedHeight(h)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_height()

    def wheelEvent(self, event) -> None:
        event.ignore()


# how a complete reply ended, when the reader should know (GenerationStats.finish_reason, ChatAgent)
_ENDINGS = {
    "repetition": "stopped: the model began repeating itself",
    "length": "cut off at the reply length limit (Settings ▸ Model)",
}


def _rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:.1f}" if tokens_per_s < 10 else f"{tokens_per_s:.0f}"


def _tool_button(icon_name: str, name: str, tip: str, parent: QWidget) -> QToolButton:
    """An icon-only button with an accessible name and a tooltip."""
    b = QToolButton(parent)
    b.setIcon(theme.icon(icon_name, theme.colors().muted, 16))
    b.setIconSize(QSize(16, 16))
    b.setAccessibleName(name)
    b.setToolTip(tip)
    b.setAutoRaise(True)
    b.setProperty("iconName", icon_name)
    return b


class MessageWidget(QFrame):
    """One message: role, body, status, actions (copy; edit for user messages; regenerate for replies)."""

    regenerateRequested = Signal(int)
    editRequested = Signal(int, str)
    traceRequested = Signal(int)
    rememberedRequested = Signal(str, int)  # show this persona item ("knowledge" | "trait", id)
    showAllRequested = Signal(str)
    copied = Signal(str)
    branchRequested = Signal(int)  # show the alternative message with this id (and its branch)

    def __init__(
        self,
        role: str,
        text: str = "",
        *,
        message_id: int | None = None,
        status: str = "complete",
        meta: dict | None = None,
        parent: QWidget | None = None,
        created_at: float | None = None,
    ):
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.status = status
        self.meta = meta or {}
        self.created_at = created_at
        self._text = text
        self._elided = False
        self._pending = False
        self.pending_label = ""  # what a reply being waited for says it is doing
        # what the chat column lays out: this widget, or a row that right-aligns it (ChatView._build)
        self.holder: QWidget = self
        self.setObjectName("userBubble" if role == "user" else "assistantBubble")
        self.setAccessibleName("Your message" if role == "user" else "Assistant reply")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 6) if role == "user" else lay.setContentsMargins(4, 6, 4, 4)
        lay.setSpacing(3)

        self._build_head(lay)
        self.body = MessageBody(self, shrink=(role == "user"))
        lay.addWidget(self.body)

        self._build_notes(lay)
        self._build_actions(lay, role)
        self._render()
        self._update_state()

    def _build_head(self, lay: QVBoxLayout) -> None:
        """The first line: who wrote it, the progress and status of a reply, and the date."""
        head = QHBoxLayout()
        head.setSpacing(6)
        self.role_label = plain.label(QLabel("You" if self.role == "user" else "Mnemo", self))
        self.role_label.setObjectName("roleLabel")
        head.addWidget(self.role_label)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 0)
        self.progress.setFixedWidth(70)
        self.progress.setTextVisible(False)
        self.progress.setAccessibleName("Working")
        self.progress.hide()
        head.addWidget(self.progress)
        self.status_label = plain.label(QLabel("", self))
        self.status_label.setObjectName("statusLabel")
        self.status_label.setWordWrap(True)  # a narrow chat wraps it instead of cutting the message
        self.status_label.hide()
        head.addWidget(self.status_label, 1)
        head.addStretch(0)
        self.date_label = QLabel("", self)
        self.date_label.setObjectName("dateLabel")
        head.addWidget(self.date_label)
        lay.addLayout(head)

    def _build_notes(self, lay: QVBoxLayout) -> None:
        """Under the body: the error of a failed reply, and "Show all" for a message too long to show whole."""
        self.error_label = plain.label(QLabel("", self))
        self.error_label.setObjectName("errorLabel")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        lay.addWidget(self.error_label)

        self.elide_row = QWidget(self)
        er = QHBoxLayout(self.elide_row)
        er.setContentsMargins(0, 0, 0, 0)
        self.elide_note = plain.label(QLabel("", self.elide_row))
        self.elide_note.setObjectName("elideNote")
        er.addWidget(self.elide_note)
        self.show_all_button = QPushButton("Show all", self.elide_row)
        self.show_all_button.setObjectName("showAllButton")
        self.show_all_button.setAccessibleName("Show the whole message")
        self.show_all_button.clicked.connect(lambda: self.showAllRequested.emit(self._text))
        er.addWidget(self.show_all_button)
        er.addStretch(1)
        self.elide_row.hide()
        lay.addWidget(self.elide_row)

    def _build_actions(self, lay: QVBoxLayout, role: str) -> None:
        """The last line: the ‹ i/n › versions, copy, and edit (yours) or regenerate and recall (Mnemo's)."""
        actions = QHBoxLayout()
        actions.setSpacing(2)
        if role == "user":
            actions.addStretch(1)
        # ‹ 2/3 ›: this message has alternatives (regenerated replies, edited messages)
        self.siblings: list[int] = []
        self.prev_branch = _tool_button("chevron-left", "Previous version", "Show the previous version", self)
        self.prev_branch.clicked.connect(lambda: self._go_branch(-1))
        self.branch_label = QLabel("", self)
        self.branch_label.setObjectName("statusLabel")
        self.next_branch = _tool_button("chevron-right", "Next version", "Show the next version", self)
        self.next_branch.clicked.connect(lambda: self._go_branch(+1))
        for w in (self.prev_branch, self.branch_label, self.next_branch):
            actions.addWidget(w)
            w.hide()
        self.copy_button = _tool_button("copy", "Copy message", "Copy this message", self)
        self.copy_button.clicked.connect(self.copy)
        actions.addWidget(self.copy_button)
        self.edit_button = self.regenerate_button = self.trace_button = None
        if role == "user":
            self.edit_button = _tool_button("edit", "Edit and resend", "Edit this message and send it again", self)
            self.edit_button.clicked.connect(self._edit)
            actions.addWidget(self.edit_button)
        else:
            self.regenerate_button = _tool_button("regenerate", "Regenerate reply", "Write this reply again", self)
            self.regenerate_button.clicked.connect(self._regenerate)
            actions.addWidget(self.regenerate_button)
            self.trace_button = _tool_button(
                "memory", "What this reply recalled", "Show the memories this reply used (memory inspector)", self
            )
            self.trace_button.clicked.connect(self._trace)
            actions.addWidget(self.trace_button)
            self.stats_label = QLabel("", self)
            self.stats_label.setObjectName("statusLabel")
            self.stats_label.setTextFormat(Qt.TextFormat.RichText)
            self.stats_label.setWordWrap(True)
            self.stats_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            self.stats_label.linkActivated.connect(self._remembered_link)
            actions.addWidget(self.stats_label, 1)
        lay.addLayout(actions)

    def reset(
        self, text: str, *, message_id: int | None, status: str, meta: dict | None, created_at: float | None = None
    ) -> None:
        """Reuse a prebuilt widget for another message."""
        self.message_id = message_id
        self.status = status
        self.meta = meta or {}
        self.created_at = created_at
        self._text = text
        self._pending = False
        self.progress.hide()
        self.set_siblings([])
        self._render()
        self._update_state()

    def set_siblings(self, ids: list[int]) -> None:
        """The ids of this message and its alternatives, oldest first (shows ‹ i/n › when n > 1)."""
        self.siblings = list(ids)
        mid = self.message_id
        i = self.siblings.index(mid) if mid is not None and mid in self.siblings else -1
        shown = len(self.siblings) > 1 and i >= 0
        for w in (self.prev_branch, self.branch_label, self.next_branch):
            w.setVisible(shown)
        if shown:
            self.branch_label.setText(f"{i + 1}/{len(self.siblings)}")
            self.branch_label.setAccessibleName(f"Version {i + 1} of {len(self.siblings)}")
            self.prev_branch.setEnabled(i > 0)
            self.next_branch.setEnabled(i < len(self.siblings) - 1)

    def _go_branch(self, step: int) -> None:
        if self.message_id in self.siblings:
            i = self.siblings.index(self.message_id) + step
            if 0 <= i < len(self.siblings):
                self.branchRequested.emit(self.siblings[i])

    # -- content --------------------------------------------------------------------
    @property
    def text(self) -> str:
        return self._text

    def shown_text(self) -> str:
        return self.body.toPlainText()

    def set_text(self, text: str) -> None:
        self._text = text
        self._render()

    def append_text(self, chunk: str) -> None:
        if not chunk:
            return
        self._text += chunk
        if self._pending:
            self.set_pending(None)
        self._render()

    def _speaker(self) -> str | None:
        """The speaker of an imported dialogue between two named people (LoCoMo), whose messages are
        stored as "Name: text" (the name helps recall): shown as the author instead of You / Mnemo."""
        name = self.meta.get("speaker")
        return name if isinstance(name, str) and name and self._text.startswith(f"{name}: ") else None

    @property
    def imported(self) -> bool:
        """Imported from another app (a ChatGPT export, a transcript): no trace, nothing to regenerate."""
        return "import_source" in self.meta

    @property
    def can_regenerate(self) -> bool:
        return self.role == "assistant" and not self.imported

    @property
    def can_edit(self) -> bool:
        return self.role == "user" and not self.imported

    def _render(self) -> None:
        speaker = self._speaker()
        self.role_label.setText(speaker or ("You" if self.role == "user" else "Mnemo"))
        when = wording.when(self.created_at)
        self.date_label.setText(when)
        self.date_label.setToolTip(
            dt.datetime.fromtimestamp(self.created_at).strftime("%A %d %B %Y, %H:%M:%S")
            if when and self.created_at
            else ""
        )
        self.date_label.setVisible(bool(when))
        shown, self._elided = markdown.elide(self._text[len(speaker) + 2 :] if speaker else self._text)
        self.body.set_content(shown)
        self.body.setVisible(bool(shown) or not self._pending)
        if self._elided:
            self.elide_note.setText(
                f"Showing the beginning of a long message ({markdown.human_size(len(self._text))})."
            )
        self.elide_row.setVisible(self._elided)

    def restyle(self) -> None:
        for b in (self.copy_button, self.edit_button, self.regenerate_button, self.trace_button):
            if b is not None:
                b.setIcon(theme.icon(b.property("iconName"), theme.colors().muted, 16))
        self._render()

    # -- state ----------------------------------------------------------------------
    def set_pending(self, label: str | None) -> None:
        """Show a working state ("Waiting for memory work…") until the first token arrives; None clears it."""
        self._pending = label is not None
        self.pending_label = label or ""
        self.progress.setVisible(self._pending)
        self.status_label.setText(label or "")
        self.status_label.setVisible(self._pending)
        self.body.setVisible(bool(self._text) or not self._pending)
        self._update_state()

    @property
    def pending(self) -> bool:
        return self._pending

    def show_pending_time(self, text: str) -> None:
        """The working state with how long the user has waited ("… 12 s"), its state unchanged."""
        if self._pending and self.status_label.text() != text:
            self.status_label.setText(text)

    def set_final(
        self, status: str, *, message_id: int | None = None, error: str | None = None, stats: dict | None = None
    ) -> None:
        self.set_pending(None)
        self.status = status
        if message_id is not None:
            self.message_id = message_id
        if stats:
            self.meta = {**self.meta, "stats": stats}
        if error:
            self.meta = {**self.meta, "error": error}
        self._update_state()

    def set_message_id(self, message_id: int | None) -> None:
        self.message_id = message_id
        self._update_state()

    def set_actions_enabled(self, enabled: bool) -> None:
        if self.trace_button is not None:
            self.trace_button.setEnabled(self.message_id is not None)
        for b in (self.edit_button, self.regenerate_button):
            if b is not None:
                b.setEnabled(enabled and self.message_id is not None)

    def _update_state(self) -> None:
        label = STATUS_TEXT.get(self.status)
        if not self._pending:
            self.status_label.setText(label or "")
            self.status_label.setVisible(bool(label))
        error = self.meta.get("error")
        if self.status == "failed" or error:
            self.error_label.setText(f"The reply failed: {error or 'unknown error'}")
            self.error_label.show()
        elif self.role == "assistant" and self.status == "complete" and not self._pending and not self._text.strip():
            # small models sometimes end at once: say so instead of showing an empty bubble
            self.error_label.setText(
                "The model returned an empty reply (nothing was remembered from it). Try Regenerate."
            )
            self.error_label.show()
        else:
            self.error_label.hide()
        stats = self.meta.get("stats") or {}
        if self.role == "assistant":
            bits = []
            if stats.get("completion_tokens"):
                bits.append(f"{stats['completion_tokens']} tokens")
            if stats.get("tokens_per_s"):
                bits.append(f"{_rate(stats['tokens_per_s'])} tok/s")
            if stats.get("time_to_first_token_s"):
                bits.append(f"first token {stats['time_to_first_token_s']:.1f} s")
            if (stats.get("queued_s") or 0) >= 0.5:  # of which waiting for memory work or the model
                bits.append(f"waited {stats['queued_s']:.1f} s")
            ending = _ENDINGS.get(stats.get("finish_reason", ""))
            if ending and self.status == "complete":
                bits.append(ending)
            bits = [html.escape(b) for b in bits]
            kept, forgot = stats.get("remembered"), stats.get("forgot")
            if forgot:
                bits.insert(0, html.escape(forget_note(forgot)))
            if kept:
                bits.insert(
                    0, f"<a href='remembered:{kept.get('kind')}:{kept.get('id')}'>{html.escape(footnote(kept))}</a>"
                )
            self.stats_label.setText(" · ".join(bits))
            tip = (
                f"Kept in memory: {kept.get('text')}"
                if kept
                else f"Forgotten on request: “{forgot.get('what')}”"
                if forgot
                else ""
            )
            self.stats_label.setToolTip(plain.tip(tip))
            self.stats_label.setVisible(bool(bits) and not self._pending)
        live = self._pending or self.status == "streaming"
        for b in (self.copy_button, self.edit_button, self.regenerate_button, self.trace_button):
            if b is not None:
                # an imported line has no trace, and nothing of Mnemo's to regenerate or resend
                b.setVisible(not live and (b is self.copy_button or not self.imported))
        self.set_actions_enabled(True)

    # -- actions --------------------------------------------------------------------
    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self._text)
        self.copied.emit(self._text)

    def _edit(self) -> None:
        if self.message_id is not None:
            self.editRequested.emit(self.message_id, self._text)

    def _regenerate(self) -> None:
        if self.message_id is not None:
            self.regenerateRequested.emit(self.message_id)

    def _remembered_link(self, href: str) -> None:
        _, kind, item_id = href.split(":", 2)
        if item_id.isdigit():
            self.rememberedRequested.emit(kind, int(item_id))

    def _trace(self) -> None:
        if self.message_id is not None:
            self.traceRequested.emit(self.message_id)

    def flash(self) -> None:
        """Highlight this message for a moment (after "go to message")."""
        self.setProperty("highlight", "true")
        self.style().unpolish(self)
        self.style().polish(self)

        def off() -> None:
            self.setProperty("highlight", "false")
            self.style().unpolish(self)
            self.style().polish(self)

        QTimer.singleShot(1600, self, off)  # with `self` as context: cancelled if the widget is deleted first


class EmptyState(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("emptyState")
        self.setAutoFillBackground(True)
        lay = QVBoxLayout(self)
        lay.addStretch(2)
        title = QLabel("Mnemo", self)
        title.setObjectName("emptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        text = QLabel(
            "A local assistant that remembers. Everything stays on this computer.\n"
            "Type a message below to start. Use Incognito for a chat it should not remember.",
            self,
        )
        text.setObjectName("emptyText")
        text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        text.setWordWrap(True)
        lay.addWidget(text)
        keys = QLabel("Ctrl+N  new chat     Ctrl+K  search     Esc  stop a reply     F1  all shortcuts", self)
        keys.setObjectName("emptyKeys")
        keys.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addSpacing(14)
        lay.addWidget(keys)
        # shown when the bundled 135M model answers but better ones sit in other apps' folders
        self.models_hint = QLabel(self)
        self.models_hint.setObjectName("emptyText")
        self.models_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.models_hint.setWordWrap(True)
        self.models_hint.setTextFormat(Qt.TextFormat.RichText)
        self.models_hint.hide()
        lay.addSpacing(18)
        lay.addWidget(self.models_hint)
        lay.addStretch(3)

    def show_models_hint(self, found: Sequence[FoundModel], servers: Sequence[FoundServer] = ()) -> None:
        """Say that chat models were found in other apps' folders (`models.discover.FoundModel`s) or are
        served here (`FoundServer`s), and link to Settings, where they are listed ("settings" link)."""
        served = [(srv, name) for srv in servers for name in srv.models]
        if not found and not served:
            self.models_hint.hide()
            return

        def and_more(first: str, n_more: int) -> str:
            more = f" and {n_more} other{'s' if n_more > 1 else ''}" if n_more else ""
            return f"<b>{html.escape(first)}</b>{more}"

        if found:
            sources = ", ".join(dict.fromkeys(m.source for m in found))
            what = f"This computer also has {and_more(found[0].name, len(found) - 1)} ({html.escape(sources)})"
        if served:
            srv, name = served[0]
            who = html.escape(f"the server at {srv.url}" if srv.app == "configured" else srv.app)
            serves = f"{who} serves {and_more(name, len(served) - 1)}"
            what = f"{what}, and {serves}" if found else f"On this computer, {serves}"
        self.models_hint.setText(f'The bundled model is tiny. {what}: <a href="settings">choose one in Settings</a>.')
        count = len(found) + len(served)
        self.models_hint.setAccessibleName(f"{count} other chat model{'s' if count != 1 else ''} available")
        self.models_hint.show()


class ChatView(QStackedWidget):
    """The conversation as a column of MessageWidgets; the empty state when there is none."""

    regenerateRequested = Signal(int)
    editRequested = Signal(int, str)
    traceRequested = Signal(int)
    rememberedRequested = Signal(str, int)
    branchRequested = Signal(int)
    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.empty = EmptyState(self)
        self.addWidget(self.empty)

        self.scroll_area = QScrollArea(self)
        self.scroll_area.setObjectName("chatScroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer = QWidget()
        outer.setObjectName("chatColumn")
        row = QHBoxLayout(outer)
        row.setContentsMargins(16, 12, 16, 12)
        row.addStretch(1)
        self.column = QWidget(outer)
        self.column.setObjectName("chatColumn")
        self.column.setMaximumWidth(COLUMN_MAX_WIDTH)
        self.column.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        row.addWidget(self.column, 100)
        row.addStretch(1)
        self.col_layout = QVBoxLayout(self.column)
        self.col_layout.setContentsMargins(0, 0, 0, 0)
        self.col_layout.setSpacing(14)
        self.earlier_button = QPushButton("Show earlier messages", self.column)
        self.earlier_button.setObjectName("earlierButton")
        self.earlier_button.clicked.connect(self._show_earlier)
        self.earlier_button.hide()
        self.col_layout.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.col_layout.addStretch(1)
        self.scroll_area.setWidget(outer)
        self.addWidget(self.scroll_area)

        self._widgets: list[MessageWidget] = []
        self._pool: dict[str, list[MessageWidget]] = {"user": [], "assistant": []}
        self._hidden_messages: list = []
        self._pending: list = []  # older messages of the shown branch still to be built
        self._siblings: dict[int, list[int]] = {}
        self._generation = 0  # bumped by clear(): stale batches stop
        self._busy = False
        self._stick = True
        bar = self.scroll_area.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)
        self.setCurrentWidget(self.empty)

    # -- building -------------------------------------------------------------------
    def clear(self) -> None:
        for w in self._widgets:
            w.setParent(None)
            w.deleteLater()
        self._widgets.clear()
        self._hidden_messages = []
        self._pending = []
        self._generation += 1
        self.earlier_button.hide()
        self.setCurrentWidget(self.empty)

    def set_messages(self, messages: list, siblings: dict[int, list[int]] | None = None) -> None:
        """Show a conversation branch (memory_core Message records), newest last; `siblings` maps a
        message id to the ids of it and its alternatives (`store.conversations.message_siblings`)."""
        self.clear()
        if len(messages) > MAX_RENDERED:
            self._hidden_messages = list(messages[:-MAX_RENDERED])
            messages = messages[-MAX_RENDERED:]
            self.earlier_button.setText(f"Show {len(self._hidden_messages)} earlier messages")
            self.earlier_button.show()
        self._siblings = siblings or {}
        # Building a message widget costs a few ms (its text is laid out): 60 long messages froze the
        # window for 160-300 ms when a chat opened. The newest ones are built now; the older ones
        # are inserted above them a few per event-loop turn, the view staying at the bottom.
        self._pending = list(messages[:-FIRST_RENDER])
        for m in messages[-FIRST_RENDER:]:
            self._append_widget(self._make_from(m))
        self._stick = True
        self.scroll_to_bottom()
        if self._pending:
            generation = self._generation
            QTimer.singleShot(RENDER_PAUSE_MS, lambda: self._render_pending(generation))

    def _make_from(self, m) -> MessageWidget:
        w = self._make(m.role, m.content, m.id, m.status, m.meta, getattr(m, "created_at", None))
        w.set_siblings(self._siblings.get(m.id, []))
        w.set_actions_enabled(not self._busy)
        return w

    def _render_pending(self, generation: int) -> None:
        if generation != self._generation or not self._pending:
            return
        batch, self._pending = self._pending[-RENDER_BATCH:], self._pending[:-RENDER_BATCH]
        self._insert_older(batch)
        if self._pending:
            # not 0: zero-delay timers run back to back ahead of other due timers and paint
            QTimer.singleShot(RENDER_PAUSE_MS, lambda: self._render_pending(generation))

    def _flush_pending(self) -> None:
        """Build the older messages still waiting now (before showing earlier ones or revealing one)."""
        pending, self._pending = self._pending, []
        if pending:
            self._insert_older(pending)

    def _insert_older(self, messages: list) -> None:
        """Insert `messages` (oldest first) above the shown ones; the view keeps its place."""
        bar = self.scroll_area.verticalScrollBar()
        from_bottom = bar.maximum() - bar.value()
        new = [self._make_from(m) for m in messages]
        for k, w in enumerate(new):
            self._append_widget(w, index=1 + k)  # after the (hidden) button
        self._widgets[:0] = new
        if not self._stick:  # scrolled up: stay on the same message (at the bottom, _on_range follows)
            QTimer.singleShot(0, lambda: bar.setValue(bar.maximum() - from_bottom))

    def _build(self, role, text="", mid=None, status="complete", meta=None, created_at=None) -> MessageWidget:
        w = MessageWidget(
            role, text, message_id=mid, status=status, meta=meta, parent=self.column, created_at=created_at
        )
        w.regenerateRequested.connect(self.regenerateRequested)
        w.editRequested.connect(self.editRequested)
        w.traceRequested.connect(self.traceRequested)
        w.rememberedRequested.connect(self.rememberedRequested)
        w.branchRequested.connect(self.branchRequested)
        w.showAllRequested.connect(self.show_all)
        w.copied.connect(self.copied)
        if role == "user":  # right-aligned in a row of its own
            holder = QWidget(self.column)
            h = QHBoxLayout(holder)
            h.setContentsMargins(0, 0, 0, 0)
            h.addStretch(1)
            h.addWidget(w, 0)
            w.holder = holder
        return w

    def _make(self, role, text, mid, status, meta, created_at=None) -> MessageWidget:
        pool = self._pool.get(role)
        if pool:
            w = pool.pop()
            w.reset(text, message_id=mid, status=status, meta=meta, created_at=created_at)
            return w
        return self._build(role, text, mid, status, meta, created_at)

    def prepare(self) -> None:
        """Build one message widget of each kind ahead of time (call when idle), so sending a
        message only fills in ready widgets: building them costs ~20 ms of UI time, much more
        while memory jobs compete for the interpreter."""
        for role in ("user", "assistant"):
            if not self._pool[role]:
                w = self._build(role)
                w.holder.hide()
                self._pool[role].append(w)

    def _append_widget(self, w: MessageWidget, index: int | None = None) -> None:
        pos = self.col_layout.count() - 1 if index is None else index  # before the trailing stretch
        self.col_layout.insertWidget(pos, w.holder)
        w.holder.show()
        if index is None:
            self._widgets.append(w)
        self.setCurrentWidget(self.scroll_area)
        self._fit_user_width(w)

    def add_message(
        self, role: str, text: str = "", *, message_id: int | None = None, status: str = "complete"
    ) -> MessageWidget:
        w = self._make(role, text, message_id, status, {}, time.time())
        self._append_widget(w)
        self._stick = True
        self.scroll_to_bottom()
        return w

    def remove_from(self, widget: MessageWidget) -> None:
        """Remove `widget` and every message after it (a regenerate or an edit replaces them)."""
        if widget not in self._widgets:
            return
        i = self._widgets.index(widget)
        for w in self._widgets[i:]:
            w.holder.setParent(None)
            w.holder.deleteLater()
        del self._widgets[i:]
        if not self._widgets and not self._hidden_messages and not self._pending:
            self.setCurrentWidget(self.empty)

    def _show_earlier(self) -> None:
        self._flush_pending()
        hidden, self._hidden_messages = self._hidden_messages, []
        self.earlier_button.hide()
        self._stick = False
        self._insert_older(hidden)

    # -- queries ----------------------------------------------------------------------
    def messages(self) -> list[MessageWidget]:
        return list(self._widgets)

    def last(self, role: str | None = None) -> MessageWidget | None:
        for w in reversed(self._widgets):
            if role is None or w.role == role:
                return w
        return None

    def widget_of(self, message_id: int) -> MessageWidget | None:
        for w in self._widgets:
            if w.message_id == message_id:
                return w
        return None

    @property
    def is_empty(self) -> bool:
        return self.currentWidget() is self.empty

    # -- behaviour --------------------------------------------------------------------
    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        for w in self._widgets:
            w.set_actions_enabled(not busy)

    def restyle(self) -> None:
        for w in self._widgets:
            w.restyle()

    def show_all(self, text: str) -> None:
        dlg = QDialog(self)
        dlg.setWindowTitle("Whole message")
        dlg.resize(760, 560)
        lay = QVBoxLayout(dlg)
        view = QPlainTextEdit(dlg)
        view.setReadOnly(True)
        view.setPlainText(text)
        view.setFont(markdown.mono_font())
        lay.addWidget(view)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dlg)
        buttons.rejected.connect(dlg.reject)
        lay.addWidget(buttons)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.open()
        self.show_all_dialog = dlg

    def reveal(self, message_id: int) -> MessageWidget | None:
        """Scroll to a message (rendering older ones when needed) and highlight it."""
        if self.widget_of(message_id) is None and any(m.id == message_id for m in self._pending):
            self._flush_pending()
        if self.widget_of(message_id) is None and any(m.id == message_id for m in self._hidden_messages):
            self._show_earlier()
        w = self.widget_of(message_id)
        if w is None:
            return None
        self._stick = False
        QTimer.singleShot(0, lambda: self.scroll_area.ensureWidgetVisible(w.holder, 0, 40))
        w.flash()
        return w

    def scroll_to_bottom(self) -> None:
        bar = self.scroll_area.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_scrolled(self, value: int) -> None:
        bar = self.scroll_area.verticalScrollBar()
        self._stick = value >= bar.maximum() - 24

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._stick:
            self.scroll_area.verticalScrollBar().setValue(hi)

    def _fit_user_width(self, w: MessageWidget) -> None:
        if w.role == "user":
            w.setMaximumWidth(
                max(200, int(min(self.column.width() or COLUMN_MAX_WIDTH, COLUMN_MAX_WIDTH) * USER_SHARE))
            )

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        for w in self._widgets:
            self._fit_user_width(w)
