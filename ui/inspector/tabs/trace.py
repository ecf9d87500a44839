"""The Recall tab: what one reply recalled and why (TraceData, built by ui.inspector.tracing): the pages,
items and topics it scored, what went into the prompt and what was left out."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QSplitter, QTabWidget, QVBoxLayout, QWidget

from app.wording import count, plain_left_out, plain_reason
from ui import theme
from ui.inspector import fmt
from ui.inspector.columns import ALIGN_CENTER, ALIGN_RIGHT, TIER_COLORS, Column, toned
from ui.inspector.delegates import BarDelegate
from ui.inspector.host import PanelHost
from ui.inspector.models import ListModel, elide_tip
from ui.inspector.tables import InspectorTable
from ui.inspector.tabs.common import browser, button, heading, muted_html
from ui.inspector.tracing import TraceData, trace_for_message, trace_for_query

DETAIL_MIN_HEIGHT = (
    150  # a detail pane shows a few lines of its page, not two  # secondary text, readable in both themes
)


# ====================================================================== Retrieval trace
class TraceView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.data: TraceData | None = None
        self.loading: int | None = None  # the message whose trace is being read
        self.details = False
        lay = QVBoxLayout(self)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Test a query:"))
        self.query = QLineEdit()
        self.query.setPlaceholderText(
            "Type what you would ask, and see what memory would recall (nothing is sent to the model)"
        )
        self.query.returnPressed.connect(self.run_query)
        bar.addWidget(self.query, 1)
        self.scope = QComboBox()
        # sized for "all memory", not for its longest entry, which squeezed the query box to a letter
        self.scope.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.scope.setMinimumContentsLength(10)
        self.scope.addItem("all memory", None)
        self.scope.setToolTip("With a chat, its recent messages are recalled too")
        bar.addWidget(self.scope)
        self.run_btn = button("Recall", "See what memory would recall for this", self.run_query)
        bar.addWidget(self.run_btn)
        lay.addLayout(bar)
        self.header = QLabel("")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setStyleSheet("padding: 4px; background: palette(alternate-base);")
        lay.addWidget(self.header)

        split = QSplitter(Qt.Orientation.Vertical)
        self.tabs = QTabWidget()
        pages = QSplitter(Qt.Orientation.Vertical)
        self.in_prompt = ListModel(trace_page_columns(in_prompt=True), key=lambda r: r["page_id"])
        self.not_in_prompt = ListModel(trace_page_columns(in_prompt=False), key=lambda r: r["page_id"])
        self.stm = ListModel(trace_page_columns(in_prompt=False), key=lambda r: r["page_id"])
        # one retrieval's pages: both tables draw their score bars on the same scale (the best score)
        recalled = (self.in_prompt, self.not_in_prompt)
        self.in_prompt_view, box1, self.in_prompt_label = self._table_box(
            self.in_prompt, "Pages in the prompt", recalled
        )
        self.not_in_prompt_view, box2, self.not_in_prompt_label = self._table_box(
            self.not_in_prompt, "Recalled, not in the prompt", recalled
        )
        self.stm_view, box3, self.stm_label = self._table_box(self.stm, "Recent messages of the chat")
        for b in (box1, box2, box3):
            pages.addWidget(b)
        self.tabs.addTab(pages, "Pages")
        self.items = ListModel(trace_item_columns(), key=lambda r: r["key"])
        self.items_view, ibox, self.items_label = self._table_box(self.items, "Facts and traits recalled")
        self.tabs.addTab(ibox, "Facts && traits")
        self.segs = ListModel(trace_segment_columns(), key=lambda r: r["segment_id"])
        self.segs_view, sbox, self.segs_label = self._table_box(
            self.segs, "Topics the recalled pages came from (best page first)"
        )
        self.segs_view.doubleClicked.connect(
            lambda idx: self.panel.show_segment(self.segs.record(idx.row())["segment_id"])
        )
        self.tabs.addTab(sbox, "Topics")
        split.addWidget(self.tabs)
        self.detail = browser()
        self.detail.setMinimumHeight(DETAIL_MIN_HEIGHT)  # two lines tall, it showed no page's text
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)
        self.set_data(None)

    def _table_box(self, model: ListModel, title: str, scale_models: tuple[ListModel, ...] = ()):
        """A titled table; its score bars are scaled to the best score in `scale_models` (default:
        its own rows), so tables of one retrieval compare: a weak page recalled but left out of
        the prompt does not get a full bar because it is the best of its own table."""
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 0, 0, 0)
        lab = heading(title)
        bl.addWidget(lab)
        view = InspectorTable(model, multi=False, sortable=False)
        if "score" in [c.key for c in model.columns]:
            models = scale_models or (model,)
            view.setItemDelegateForColumn(
                model.column_index("score"),
                BarDelegate(lambda: max([r["score"] for m in models for r in m.records()] + [1e-6]), parent=view),
            )
        view.current_key_changed.connect(lambda key, v=view: self._on_row(v))
        if "page_id" in [c.key for c in model.columns]:
            view.doubleClicked.connect(lambda idx, m=model: self.panel.show_page(m.record(idx.row())["page_id"]))
        bl.addWidget(view, 1)
        return view, box, lab

    # -------------------------------------------------------------- API
    def show_message(self, message_id: int) -> None:
        self.header.setText(f"Loading the trace of message {message_id}…")
        self.loading = message_id
        self.panel.worker.submit(lambda s: trace_for_message(s, message_id), self.set_data, label="trace")

    def run_query(self) -> None:
        q = self.query.text().strip()
        if not q:
            return
        cid = self.scope.currentData()
        self.header.setText(f"Recalling for “{fmt.esc(q)}”…")
        self.run_btn.setEnabled(False)

        def done(data):
            self.run_btn.setEnabled(True)
            self.set_data(data)

        def failed(exc):
            self.run_btn.setEnabled(True)
            self.panel.status_error(f"retrieval failed: {exc}")

        self.panel.worker.submit(lambda s: trace_for_query(s, q, cid), done, label="test query", on_error=failed)

    def set_data(self, data: TraceData | None) -> None:
        self.data = data
        self.loading = None
        if data is None:
            for m in (self.in_prompt, self.not_in_prompt, self.stm, self.items, self.segs):
                m.set_rows([])
            self.header.setText(
                "Click the memory icon under a reply in the chat to see what it recalled, or test a question above."
            )
            self.detail.setHtml(
                f"<p style='color:{muted_html()}'>Each recalled page shows how well it matched and why: close "
                "in meaning, the same words, the date you named, or the topic it belongs to.</p>"
            )
            return
        if data.conversation_id is not None and self.scope.findData(data.conversation_id) < 0:
            self.scope.addItem(f"+ recent messages of chat {data.conversation_id}", data.conversation_id)
        reply = data.source == "reply"
        self.in_prompt.set_rows(data.in_prompt)
        self.not_in_prompt.set_rows(data.not_in_prompt)
        self.stm.set_rows(data.stm)
        self.items.set_rows(data.items)
        self.segs.set_rows(data.segments)
        self.in_prompt_view.parentWidget().setVisible(reply)
        self.not_in_prompt_view.setColumnHidden(self.not_in_prompt.column_index("left_out"), not reply)
        self.in_prompt_label.setText(
            f"Pages in the prompt ({len(data.in_prompt)}) — what the model read, in prompt order"
        )
        self.not_in_prompt_label.setText(
            f"Recalled but not in the prompt ({len(data.not_in_prompt)})"
            if reply
            else f"Recalled pages ({len(data.not_in_prompt)}), best first"
        )
        self.stm_label.setText(f"Recent messages of the chat ({len(data.stm)})")
        self.stm_view.parentWidget().setVisible(bool(data.stm))
        self.items_label.setText(f"Facts and traits recalled ({len(data.items)})")
        self.segs_label.setText(f"Topics the recalled pages came from ({len(data.segments)}), best page first")
        if reply:
            tok = f"; prompt {data.prompt_tokens:,} tokens" if data.prompt_tokens else ""
            if tok and data.cached_prompt_tokens is not None:
                tok += f" ({data.cached_prompt_tokens:,} already processed)"
            if tok and data.restored_prompt_tokens:  # activation memory: app.chat.activation_cache
                tok += f"; it started from a saved state ({data.restored_prompt_tokens:,} tokens not processed again)"
            dropped = ", ".join(f"{v} {k}" for k, v in (data.dropped or {}).items() if v)
            head = (
                f"<b>Reply {data.message_id}</b> to “{fmt.esc(fmt.one_line(data.query, 140))}”{tok}; "
                f"{len(data.in_prompt)} recalled page{'s' if len(data.in_prompt) != 1 else ''} in the prompt"
                + (f"; left out for room: {dropped}" if dropped else "")
            )
        else:
            head = (
                f"<b>Test query</b> “{fmt.esc(fmt.one_line(data.query, 140))}”: "
                f"{count(len(data.not_in_prompt), 'page')}, {count(len(data.items), 'fact or trait', 'facts and traits')}"
            )
        total = (data.timings_ms or {}).get("total")
        if total:
            head += f"; recalled in {total:.0f} ms"
        if data.common_words:
            head += (
                f"<br>On most pages, so half left out of the query's meaning: {fmt.esc(', '.join(data.common_words))}"
            )
        if data.note:
            head += f"<br><span style='color:{theme.colors().error}'>{fmt.esc(data.note)}</span>"
        self.header.setText(head)
        first = self.in_prompt_view if data.in_prompt else (self.not_in_prompt_view if data.not_in_prompt else None)
        if first is not None:
            first.selectRow(0)
        else:
            self.detail.setHtml(f"<p style='color:{muted_html()}'>Nothing was recalled.</p>")

    def listed_page_ids(self, which: str = "in_prompt") -> list[int]:
        model = {"in_prompt": self.in_prompt, "not_in_prompt": self.not_in_prompt, "stm": self.stm}[which]
        return [r["page_id"] for r in model.records()]

    # -------------------------------------------------------------- detail
    def _on_row(self, view: InspectorTable) -> None:
        idx = view.currentIndex()
        if not idx.isValid():
            return
        r = view.table_model().record(idx.row())
        if r is None:
            return
        grey = muted_html()
        tech = (
            f"<p style='margin:2px 0;color:{grey}'><b>Details:</b> {fmt.esc(r['reason'])}"
            + (f"; not quoted: {fmt.esc(r['left_out'])}" if r.get("left_out") else "")
            + "</p>"
            if self.details
            else ""
        )
        if "page_id" in r:
            seg = (
                f" · <a href='segment:{r['segment_id']}'>topic {r['segment_id']}</a>"
                if r.get("segment_id") is not None
                else ""
            )
            left = (
                f"<p style='margin:2px 0;color:{grey}'>Not in the prompt: {fmt.esc(plain_left_out(r['left_out']))}</p>"
                if r.get("left_out")
                else ""
            )
            topic = (
                f"<p style='margin:2px 0;color:{grey}'><b>Topic:</b> {fmt.esc(r['topic_title'])}"
                f" — {fmt.esc(fmt.one_line(r.get('topic_summary') or '', 240))}</p>"
                if r.get("topic_title")
                else ""
            )
            space = f" · space “{fmt.esc(r['space_name'])}”" if r.get("space_name") else ""  # two spaces or more
            self.detail.setHtml(
                f"<h3 style='margin:0'><a href='page:{r['page_id']}'>Page {r['page_id']}</a> "
                f"<span style='font-weight:normal;color:{grey}'>· {fmt.tier(r.get('tier'))} · "
                f"{fmt.when(r.get('timestamp'))}{seg}{space} · rank {r['rank']} · match {r['score']:.2f}</span></h3>"
                f"<p style='margin:4px 0'><b>Why:</b> {fmt.esc(plain_reason(r['reason']))}</p>{topic}{left}{tech}"
                f"<div>{fmt.paragraphs(r['text'])}</div>"
            )
        else:
            title = r.get("kind") or f"Topic {r.get('segment_id')}"
            self.detail.setHtml(
                f"<h3 style='margin:0'>{fmt.esc(title)}</h3>"
                f"<p><b>Why:</b> {fmt.esc(plain_reason(r['reason']))}"
                + (f" · in prompt: {r['in_prompt']}" if "in_prompt" in r else "")
                + f"</p>{tech}<div>{fmt.paragraphs(r.get('text') or r.get('summary', ''))}</div>"
            )

    def set_details(self, on: bool) -> None:
        self.details = on
        for view in (self.in_prompt_view, self.not_in_prompt_view, self.stm_view, self.items_view, self.segs_view):
            if view.currentIndex().isValid():
                self._on_row(view)
                break


def trace_page_columns(*, in_prompt: bool) -> list[Column]:
    cols = [
        Column("rank", "#", lambda r: r["rank"], width=34, align=ALIGN_RIGHT, header_tip="rank by score"),
        Column("page_id", "Page", lambda r: r["page_id"], width=56, align=ALIGN_RIGHT),
        Column(
            "score",
            "Score",
            lambda r: f"{r['score']:.3f}",
            width=110,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="How well it matched your message, in meaning and in words",
        ),
        Column(
            "reason",
            "Why it was recalled",
            lambda r: plain_reason(r["reason"]),
            width=500,
            tip=lambda r: plain_reason(r["reason"]),
        ),
        Column(
            "text",
            "Page",
            lambda r: fmt.one_line(r["text"], 200),
            width=330,
            tip=lambda r: elide_tip(r["text"]),
            color=lambda r: QColor("#9e9e9e") if r.get("missing") else None,
        ),
        Column("when", "When", lambda r: fmt.when(r.get("timestamp")), width=120),
        Column(
            "tier",
            "Where",
            lambda r: fmt.tier(r.get("tier")),
            width=72,
            color=lambda r: toned(TIER_COLORS.get(r.get("tier"))),
        ),
        Column(
            "segment",
            "Topic",
            lambda r: r.get("segment_id") if r.get("segment_id") is not None else "—",
            width=56,
            align=ALIGN_RIGHT,
        ),
    ]
    if in_prompt:
        # which sides of the page went in: a reply's prompt quotes a budget of turns, a page's better side first
        cols.insert(
            3,
            Column(
                "quoted",
                "Quoted",
                lambda r: r.get("quoted", ""),
                width=84,
                header_tip="What of the page the prompt quoted: both sides, or one (the other "
                "matched less well than what filled the room)",
            ),
        )
    else:
        # before the 500-px reason: after it, the docked inspector (~520 px) showed the column only
        # after a horizontal scroll, and it is what this table is for
        cols.insert(
            3,
            Column(
                "left_out",
                "Not in the prompt because",
                lambda r: plain_left_out(r.get("left_out", "")),
                width=260,
                tip=lambda r: plain_left_out(r.get("left_out", "")),
            ),
        )
    return cols


def trace_item_columns() -> list[Column]:
    # score and "in prompt" before the item's text, as in the page tables: after a 430-px text column
    # they sat outside the docked inspector's width and needed a horizontal scroll to be seen
    return [
        Column("kind", "Kind", lambda r: r["kind"], width=110),
        Column(
            "score",
            "Score",
            lambda r: f"{r['score']:.2f}",
            width=90,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="A trait: how sure Mnemo is of it; a fact: how close it is in meaning to your message",
        ),
        Column(
            "in_prompt",
            "In prompt",
            lambda r: r["in_prompt"],
            width=72,
            align=ALIGN_CENTER,
            bold=lambda r: r["in_prompt"] == "yes",
        ),
        Column("text", "Item", lambda r: fmt.one_line(r["text"], 200), width=430, tip=lambda r: elide_tip(r["text"])),
        Column(
            "reason", "Why", lambda r: plain_reason(r["reason"]), width=330, tip=lambda r: plain_reason(r["reason"])
        ),
    ]


def trace_segment_columns() -> list[Column]:
    return [
        Column("segment_id", "Topic", lambda r: r["segment_id"], width=60, align=ALIGN_RIGHT),
        Column(
            "score",
            "Match",
            lambda r: f"{r['score']:.3f}",
            width=100,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="How close the topic is to your message, in meaning and in words",
        ),
        Column("reason", "Why", lambda r: plain_reason(r["reason"]), width=240),
        Column(
            "summary",
            "Summary",
            lambda r: fmt.one_line(r.get("summary", ""), 200),
            width=360,
            tip=lambda r: elide_tip(r.get("summary", "")),
        ),
        Column("pages_used", "Pages recalled", lambda r: r.get("pages_used", 0), width=90, align=ALIGN_RIGHT),
    ]
