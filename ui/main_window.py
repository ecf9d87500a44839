"""The main window (minimal for now: the chat window comes with the chat agent)."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMainWindow


class MainWindow(QMainWindow):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle("Mnemo")
        self.resize(1100, 720)
        self.setCentralWidget(QLabel("Mnemo"))

    def start_background_loading(self) -> None:
        pass
