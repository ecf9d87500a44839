"""Saved memories: what Mnemo knows about the user, as a list of plain sentences (ChatGPT's "Manage
memories"), each with where it came from and Edit, Pin and Forget.

The facts about the user and the profile's traits are read through the memory core's persona API
(`list_knowledge`, `list_traits`) on the panel's worker, and changed with its curation API (`edit_*`,
`pin`, `forget`) through `panel.act`, which refreshes every view afterwards. The Profile tab shows the
same items with their confidence, versions and source pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import wording
from app.operations import memory as memory_verbs
from ui import plain
from ui.inspector import fmt
from ui.inspector.host import PanelHost

SHOWN_MAX = 400  # rows built at once; a search narrows the rest


@dataclass
class SavedMemory:
    """One fact or trait about the user, as the list shows it."""

    kind: str  # "knowledge" | "trait"
    id: int
    text: str  # the plain sentence
    edit_text: str  # what the Edit dialog starts from (a fact's text, a trait's value)
    label: str  # what the Edit dialog calls it ("Fact", a trait's kind: "Reply style")
    pinned: bool
    origin: str  # "You added this", "Learned from your chat “Trip”", …
    href: str  # a link to where it came from ("page:12"), or ""
    updated_at: float


def trait_name(dimension: str) -> str:
    """A trait's kind as a person reads it: "reply_style" → "Reply style"."""
    name = " ".join(dimension.replace("_", " ").split()) or "Trait"
    return f"{name[:1].upper()}{name[1:]}"


def trait_sentence(dimension: str, value: str) -> str:
    """A trait as a line a person reads: ("reply_style", "Be brief.") → "Reply style: Be brief."."""
    return f"{trait_name(dimension)}: {value}"


def saved_memories(store) -> list[SavedMemory]:
    """The active facts about the user and traits, pinned first, then the newest (runs on the worker)."""
    titles: dict[int, str | None] = {}

    def chat_title(cids: list[int]) -> str | None:
        if not cids:
            return None
        cid = cids[0]
        if cid not in titles:
            conv = store.conversations.get_conversation(cid)
            titles[cid] = conv.title if conv is not None else None
        return titles[cid]

    out = []
    for k in store.persona.list_knowledge(owner="user", limit=5000):
        out.append(_entry("knowledge", k, k.text, k.text, "Fact", chat_title(k.conversation_ids)))
    for t in store.persona.list_traits(limit=5000):
        sentence = trait_sentence(t.dimension, t.value)
        out.append(_entry("trait", t, sentence, t.value, trait_name(t.dimension), chat_title(t.conversation_ids)))
    out.sort(key=lambda m: (not m.pinned, -m.updated_at, m.kind, m.id))
    return out


def _entry(kind: str, rec, text: str, edit_text: str, label: str, chat: str | None) -> SavedMemory:
    pages = list(rec.source_page_ids or [])
    return SavedMemory(
        kind,
        rec.id,
        text,
        edit_text,
        label,
        bool(rec.pinned),
        wording.origin(rec.model, len(pages), chat),
        f"page:{pages[0]}" if pages else "",
        float(rec.updated_at or 0),
    )


class MemoryRow(QFrame):
    """One saved memory: its sentence (never cut: it wraps), where it came from, and its actions."""

    def __init__(self, memory: SavedMemory, view: SavedMemoriesView):
        super().__init__()
        self.memory = memory
        self.setObjectName("memoryRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # the sentence on a line of its own, the whole width (beside three buttons, a docked panel left it
        # a narrow column); where it came from and the actions under it
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 6, 4)
        lay.setSpacing(2)
        self.text = plain.label(QLabel(memory.text))
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.text.setAccessibleName(memory.text)
        lay.addWidget(self.text)
        origin = fmt.esc(memory.origin)
        if memory.href:
            origin = f"<a href='{memory.href}'>{origin}</a>"
        bits = [origin, fmt.esc(wording.when(memory.updated_at))] + (["<b>pinned</b>"] if memory.pinned else [])
        self.origin = QLabel(" · ".join(bits))
        self.origin.setObjectName("memoryOrigin")
        self.origin.setTextFormat(Qt.TextFormat.RichText)
        self.origin.setWordWrap(True)
        self.origin.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.origin.setToolTip("Where it came from: click to see the page it was learned from" if memory.href else "")
        self.origin.linkActivated.connect(view.panel.follow_link)
        below = QHBoxLayout()
        below.addWidget(self.origin, 1)
        self.edit_btn = self._button("Edit…", "Correct it (the old text is kept as an earlier version)", view.edit)
        self.pin_btn = self._button(
            "Unpin" if memory.pinned else "Pin", "Mnemo never changes or drops a pinned memory by itself", view.pin
        )
        self.forget_btn = self._button("Forget…", "Forget it for good", view.forget)
        width = max(b.sizeHint().width() for b in (self.edit_btn, self.forget_btn))
        for b in (self.edit_btn, self.pin_btn, self.forget_btn):
            b.setFixedWidth(width)  # the same places on every row, "Pin" or "Unpin"
            below.addWidget(b, 0, Qt.AlignmentFlag.AlignBottom)
        lay.addLayout(below)

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAccessibleName(f"{text.rstrip('…')}: {self.memory.text[:60]}")
        b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        b.clicked.connect(lambda: slot(self.memory))
        return b


class SavedMemoriesView(QWidget):
    """The Saved memories tab."""

    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.loaded = False
        self.memories: list[SavedMemory] = []
        self.rows: list[MemoryRow] = []
        lay = QVBoxLayout(self)
        intro = QLabel(
            "What Mnemo knows about you, learned from your chats or added by you. It uses these in its replies. "
            "Edit what is wrong, forget what should go, pin what must stay."
        )
        intro.setWordWrap(True)
        intro.setObjectName("hintLabel")
        lay.addWidget(intro)
        bar = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search saved memories…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _t: self._fill())
        bar.addWidget(self.search, 1)
        self.add_btn = QPushButton("Add…")
        self.add_btn.setToolTip("Tell Mnemo something to remember about you")
        self.add_btn.clicked.connect(self._add)
        bar.addWidget(self.add_btn)
        lay.addLayout(bar)
        self.count = QLabel("")
        self.count.setObjectName("hintLabel")
        lay.addWidget(self.count)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list = QWidget()
        self.list_layout = QVBoxLayout(self.list)
        self.list_layout.setContentsMargins(0, 0, 0, 0)
        self.list_layout.setSpacing(6)
        self.list_layout.addStretch(1)
        self.scroll_area.setWidget(self.list)
        lay.addWidget(self.scroll_area, 1)

    # -------------------------------------------------------------- loading
    def ensure_loaded(self) -> None:
        if not self.loaded:
            self.refresh()

    def refresh(self) -> None:
        self.panel.worker.submit(saved_memories, self._apply, label="saved memories")

    def _apply(self, memories: list[SavedMemory]) -> None:
        self.loaded = True
        self.memories = memories
        self._fill()

    def shown(self) -> list[SavedMemory]:
        """The memories the search lets through, in the list's order."""
        words = self.search.text().strip().lower().split()
        return [m for m in self.memories if all(w in m.text.lower() for w in words)]

    def _fill(self) -> None:
        for row in self.rows:
            row.setParent(None)
            row.deleteLater()
        self.rows = []
        shown = self.shown()
        for m in shown[:SHOWN_MAX]:
            row = MemoryRow(m, self)
            self.list_layout.insertWidget(self.list_layout.count() - 1, row)
            self.rows.append(row)
        total = len(self.memories)
        if not total:
            self.count.setText("Nothing saved about you yet. Chat a little, or use Add… to tell Mnemo something.")
        elif len(shown) == total:
            self.count.setText(f"{wording.count(total, 'memory')} about you")
        else:
            more = f" (the first {SHOWN_MAX} listed)" if len(shown) > SHOWN_MAX else ""
            self.count.setText(f"{len(shown):,} of {wording.count(total, 'memory')} match{more}")

    def row_of(self, kind: str, item_id: int) -> MemoryRow | None:
        for row in self.rows:
            if (row.memory.kind, row.memory.id) == (kind, item_id):
                return row
        return None

    def reveal(self, kind: str, item_id: int) -> MemoryRow | None:
        """Scroll to one memory and mark it (the chat's "remembered as fact N" and "Memory updated")."""
        row = self.row_of(kind, item_id)
        if row is not None:
            self.scroll_area.ensureWidgetVisible(row)
            row.setProperty("highlight", "true")
            row.style().unpolish(row)
            row.style().polish(row)
        return row

    # -------------------------------------------------------------- actions
    def edit(self, m: SavedMemory) -> None:
        vals = self.panel.edit_texts(
            "Edit a memory", [(m.label, m.edit_text)], "The old text is kept as an earlier version."
        )
        if not vals or not vals[0].strip():
            return
        new = vals[0].strip()
        if m.kind == "knowledge":
            self.panel.act(lambda s: s.persona.edit_knowledge(m.id, new), "Memory edited.")
        else:
            self.panel.act(lambda s: s.persona.edit_trait(m.id, new), "Memory edited.")

    def pin(self, m: SavedMemory) -> None:
        new = not m.pinned
        self.panel.act(lambda s: memory_verbs.pin(s, m.kind, m.id, new))

    def forget(self, m: SavedMemory) -> None:
        if not self.panel.confirm(
            "Forget a memory",
            f"Forget “{m.text}” for good, with its earlier versions? The chats it came from stay. "
            "This cannot be undone.",
            "Forget",
        ):
            return
        self.panel.act(lambda s: memory_verbs.forget(s, m.kind, m.id))

    def _add(self) -> None:
        add = getattr(self.panel, "add_memory", None)
        if callable(add):
            add()
