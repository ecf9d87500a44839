"""Chat ▸ Import conversations…: before the file chooser, how to get an export out of ChatGPT or Claude
(and what else Mnemo reads), so a person who has no file yet knows where to find one."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFileDialog, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from ui.import_dialog import FILE_FILTER

EXPORT_HELP = """
<h3 style='margin:0 0 6px 0'>Bring your other chats into Mnemo's memory</h3>
<p>Mnemo reads the export file other chat apps give you. Nothing is uploaded: the file is read on this
computer, and its conversations become chats and memory pages here.</p>
<p><b>ChatGPT</b>: in ChatGPT, open <i>Settings ▸ Data controls ▸ Export data</i> and confirm. OpenAI emails
you a link (it can take a few minutes); download the <b>.zip</b> file and choose it here as it is: there is
no need to unpack it. Your ChatGPT custom instructions come along: “about you” becomes facts Mnemo knows,
“how to respond” becomes your custom instructions in Settings ▸ Replies when you have none.</p>
<p><b>Claude</b>: in Claude, open <i>Settings ▸ Privacy ▸ Export data</i>. Anthropic emails a link to a
<b>.zip</b> file; choose it here.</p>
<p><b>Other files</b>: a <b>conversations.json</b> taken out of either export, a <b>LoCoMo</b> JSON file, or a
plain <b>.txt</b> or <b>.md</b> transcript with lines such as “User: …” and “Assistant: …” (Mnemo's own chat
export reads back the same way).</p>
<p>A <b>LoCoMo</b> file is a conversation between two named people, not your chat with an assistant: Mnemo
asks whether you are one of them. If you are neither, what they said is remembered as theirs, and your own
chats come first when you ask about yourself.</p>
<p>A large export takes a few minutes; you can keep chatting meanwhile, and importing the same file again
adds only what is missing.</p>
"""


class ImportHelpDialog(QDialog):
    """Says how to get an export, then lets the user choose the file (`chosen(path)`)."""

    chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import conversations")
        self.resize(560, 480)
        lay = QVBoxLayout(self)
        self.text = QTextBrowser(self)
        self.text.setOpenExternalLinks(False)
        self.text.setHtml(EXPORT_HELP)
        self.text.setAccessibleName("How to get an export")
        lay.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.choose_button = QPushButton("Choose a file…", self)
        self.choose_button.setDefault(True)
        buttons.addButton(self.choose_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.choose_button.clicked.connect(self.choose)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)

    def choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import conversations", str(Path.home()), FILE_FILTER)
        if path:
            self.accept()
            self.chosen.emit(path)

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.choose()
            return
        super().keyPressEvent(event)
