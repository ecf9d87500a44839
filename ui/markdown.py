"""Markdown rendering for chat messages: QTextDocument's GitHub dialect, plus code-block styling."""

from __future__ import annotations

import re

from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from ui import theme

ELIDE_CHARS = 6000  # a message longer than this shows its beginning and a "Show all" button


def mono_font() -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    return font


def render(doc: QTextDocument, text: str, *, markdown: bool = True) -> None:
    """Fill `doc` with `text` as Markdown (or plain text), with code blocks and inline code shaded."""
    if not markdown:
        doc.setPlainText(text)
        return
    doc.setMarkdown(escape_html(text), QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    style_code(doc)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])(?![a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>]*>)")  # not an autolink <https://…>


def escape_html(text: str) -> str:
    """Make HTML in a message show as text. Qt's Markdown reader takes `<div>` or `<memory>` as HTML
    and drops it, and every word after an unknown tag with it ("use the <div> element" showed as
    "use the "). A backslash before `<` is Markdown for a literal `<`; code blocks and code spans
    keep theirs as written (a backslash there would show). Indented code blocks are not told
    apart: chat models fence their code."""
    out: list[str] = []
    prose: list[str] = []  # lines outside fences, escaped together (a code span may cross lines)
    fence: str | None = None  # the marker of the open code fence
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m is None:
            prose.append(line)
            continue
        if prose:
            out.append(_escape_outside_spans("\n".join(prose)))
            prose = []
        if m is not None and fence is None:
            fence = m.group(1)
        elif m is not None and fence is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            fence = None
        out.append(line)
    if prose:
        out.append(_escape_outside_spans("\n".join(prose)))
    return "\n".join(out)


def _escape_outside_spans(text: str) -> str:
    parts, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        parts.append(_TAG_START.sub(r"\\<", text[last : m.start()]))
        parts.append(m.group(0))
        last = m.end()
    parts.append(_TAG_START.sub(r"\\<", text[last:]))
    return "".join(parts)


def _is_code_block(fmt: QTextBlockFormat) -> bool:
    return (
        fmt.hasProperty(QTextFormat.Property.BlockCodeFence)
        or fmt.hasProperty(QTextFormat.Property.BlockCodeLanguage)
        or fmt.nonBreakableLines()
    )


def style_code(doc: QTextDocument) -> None:
    """Shade fenced/indented code blocks and inline code spans with the theme's code colours."""
    c = theme.colors()
    code_bg, inline_bg = QColor(c.code_bg), QColor(c.inline_code_bg)
    mono = mono_font()
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if _is_code_block(fmt):
            prev_code = block.previous().isValid() and _is_code_block(block.previous().blockFormat())
            next_code = block.next().isValid() and _is_code_block(block.next().blockFormat())
            bf = QTextBlockFormat()
            bf.setBackground(code_bg)
            bf.setNonBreakableLines(False)  # wrap long code lines instead of cutting them off
            bf.setLeftMargin(6)
            bf.setRightMargin(6)
            bf.setTopMargin(0 if prev_code else 6)
            bf.setBottomMargin(0 if next_code else 8)
            cursor.setPosition(block.position())
            cursor.mergeBlockFormat(bf)
            cf = QTextCharFormat()
            cf.setFont(mono)
            cursor.setPosition(block.position())
            cursor.setPosition(block.position() + max(0, block.length() - 1), QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(cf)
        else:
            if block.textList() is None and block.next().isValid() and fmt.headingLevel() == 0:
                bf = QTextBlockFormat()
                bf.setBottomMargin(6)  # air between paragraphs
                cursor.setPosition(block.position())
                cursor.mergeBlockFormat(bf)
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.isValid() and frag.charFormat().fontFixedPitch():
                    cf = QTextCharFormat()
                    cf.setBackground(inline_bg)
                    cf.setFont(mono)
                    cursor.setPosition(frag.position())
                    cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                    cursor.mergeCharFormat(cf)
                it += 1
        block = block.next()
    cursor.endEditBlock()


def elide(text: str, limit: int = ELIDE_CHARS) -> tuple[str, bool]:
    """The beginning of a very long message (cut at a line break when one is near) and whether it was cut."""
    if len(text) <= limit:
        return text, False
    cut = text.rfind("\n", limit - 800, limit)
    cut = cut if cut > 0 else limit
    head = text[:cut]
    if head.count("```") % 2 == 1:  # do not leave a code fence open
        head += "\n```"
    return head, True


def human_size(n_chars: int) -> str:
    if n_chars < 10_000:
        return f"{n_chars:,} characters"
    if n_chars < 1_000_000:
        return f"{n_chars / 1000:.0f}k characters"
    return f"{n_chars / 1_000_000:.1f}M characters"
