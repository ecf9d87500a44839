"""Markdown rendering for chat messages: QTextDocument's GitHub dialect, plus code-block styling."""
from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat

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
    doc.setMarkdown(text, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    style_code(doc)


def _is_code_block(fmt: QTextBlockFormat) -> bool:
    return (fmt.hasProperty(QTextFormat.Property.BlockCodeFence)
            or fmt.hasProperty(QTextFormat.Property.BlockCodeLanguage)
            or fmt.nonBreakableLines())


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
