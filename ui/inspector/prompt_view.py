"""The prompt view: a reply's whole prompt as the model read it, and how many tokens each part took
(system, profile, recalled memory, the dialogue, the message), the way Letta shows its context window.

The tokens of each part are in the reply's trace (`trace["prompt_sections"]`, app.chat.agent), so they show for
any reply written since they were kept. The text itself is kept in memory for the replies of this session
(`ui.bridge.Backend.prompt_of`): a prompt is mostly the chat and its memory, which are stored already.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QTextBrowser, QVBoxLayout, QWidget

from app.chat.prompting import SECTIONS
from ui.inspector import fmt
from ui.inspector.host import PanelHost

# what each part of a prompt is, for the person reading it
SECTION_NAMES = {
    "system": ("System", "Mnemo's instructions, and your custom instructions (Settings ▸ Replies)"),
    "profile": ("Profile", "What Mnemo knows about you: your traits, in every prompt"),
    "recalled": ("Recalled", "Facts and earlier conversations recalled for this message"),
    "dialogue": ("Dialogue", "The chat so far, as much of it as fits"),
    "message": ("Message", "Your message"),
}


@dataclass
class PromptData:
    """What the prompt view shows of one reply, read on the worker thread."""

    message_id: int
    query: str = ""
    tokens: dict[str, int] = field(default_factory=dict)  # SECTIONS -> tokens
    prompt_tokens: int | None = None
    note: str = ""


def prompt_for_message(store, message_id: int) -> PromptData:
    msg = store.conversations.get_message(int(message_id))
    data = PromptData(int(message_id))
    if msg is None:
        data.note = f"Message {message_id} does not exist."
        return data
    if msg.role != "assistant":
        data.note = "Select a reply of Mnemo's to see its prompt."
        return data
    trace = (msg.meta or {}).get("trace")
    if not isinstance(trace, dict):
        data.note = "This reply has no prompt on record (it was imported, or written by an older Mnemo)."
        return data
    data.query = trace.get("query", "")
    data.prompt_tokens = trace.get("prompt_tokens")
    sections = trace.get("prompt_sections")
    if isinstance(sections, dict):
        data.tokens = {name: int(sections.get(name) or 0) for name in SECTIONS}
    else:
        data.note = "This reply was written before Mnemo kept the size of each part of its prompt."
    return data


class PromptView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.data: PromptData | None = None
        self.loading: int | None = None
        lay = QVBoxLayout(self)
        self.header = QLabel("Click the memory icon under a reply, then Prompt, to see what the model read.")
        self.header.setWordWrap(True)
        lay.addWidget(self.header)
        grid = QGridLayout()
        grid.setColumnStretch(1, 1)
        self.bars: dict[str, QProgressBar] = {}
        self.labels: dict[str, QLabel] = {}
        self.figures: dict[str, QLabel] = {}
        for row, name in enumerate(SECTIONS):
            title, tip = SECTION_NAMES[name]
            label = QLabel(title)
            label.setToolTip(tip)
            bar = QProgressBar()
            bar.setTextVisible(False)  # the figures beside it: text on a thin bar was unreadable
            bar.setToolTip(tip)
            bar.setAccessibleName(f"{title}: tokens")
            figure = QLabel("—")
            figure.setMinimumWidth(130)
            grid.addWidget(label, row, 0)
            grid.addWidget(bar, row, 1)
            grid.addWidget(figure, row, 2)
            self.bars[name], self.labels[name], self.figures[name] = bar, label, figure
        lay.addLayout(grid)
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        self.text.setAccessibleName("The whole prompt")
        lay.addWidget(self.text, 1)
        self.set_data(None)

    # -------------------------------------------------------------- API
    def show_message(self, message_id: int) -> None:
        self.loading = int(message_id)
        self.header.setText(f"Reading the prompt of reply {message_id}…")
        self.panel.worker.submit(lambda s: prompt_for_message(s, message_id), self.set_data, label="prompt")

    def set_data(self, data: PromptData | None) -> None:
        self.data, self.loading = data, None
        tokens = data.tokens if data is not None else {}
        total = sum(tokens.values())
        for name, bar in self.bars.items():
            n = tokens.get(name, 0)
            bar.setRange(0, max(1, total))
            bar.setValue(n)
            self.figures[name].setText(f"{n:,} tokens · {100 * n / total:.0f} %" if total else "—")
        if data is None:
            self.text.setHtml("")
            return
        if data.note and not tokens:
            self.header.setText(data.note)
        else:
            whole = f"{data.prompt_tokens:,} tokens in all" if data.prompt_tokens else f"{total:,} tokens"
            self.header.setText(
                f"<b>Reply {data.message_id}</b> to “{fmt.esc(fmt.one_line(data.query, 120))}”: {whole} "
                "(the chat template's own markers are counted in the whole only)"
            )
        self.text.setHtml(self._whole_prompt(data))

    def section_tokens(self) -> dict[str, int]:
        return {name: bar.value() for name, bar in self.bars.items()} if self.data and self.data.tokens else {}

    # -------------------------------------------------------------- the text
    def _whole_prompt(self, data: PromptData) -> str:
        prompt_of = getattr(self.panel, "prompt_of", None)
        prompt = prompt_of(data.message_id) if callable(prompt_of) else None
        sections = getattr(prompt, "sections", None) or {}
        if not sections:
            return (
                "<p><i>The whole text is kept for the replies written since Mnemo started; this one's parts are "
                "measured above.</i></p>"
            )
        out = []
        for name in SECTIONS:
            text = sections.get(name) or ""
            title, tip = SECTION_NAMES[name]
            n = data.tokens.get(name, 0)
            out.append(
                f"<h4 style='margin:8px 0 2px 0'>{title} · {n:,} tokens</h4>"
                + (f"<div>{fmt.paragraphs(text)}</div>" if text else f"<p><i>(empty: {fmt.esc(tip.lower())})</i></p>")
            )
        return "".join(out)

    def whole_text(self) -> str:
        """The prompt's text as the view shows it (tests, copying)."""
        return self.text.toPlainText()
