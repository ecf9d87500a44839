"""The settings dialog: which chat model answers (a GGUF file or an OpenAI-compatible server), custom
instructions, memory (backups; pausing), the interface and the data folder: a handful of choices a person
understands. The tuning knobs (generation, context, embedding model, every memory parameter, each with a
tooltip) are behind the "Developer settings" switch. `apply()` writes into `ctx.settings`; the caller saves."""

from __future__ import annotations

import copy
from typing import TypeVar

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.settings import Settings
from app.settings_schema import about
from models.discover import find_models, find_servers
from ui.model_finder import ModelFinder
from ui.settings_fields import MemoryParamsForm, float_knob, int_knob, setting_check, setting_label

_W = TypeVar("_W", bound=QWidget)

THEME_LABELS = [("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")]
# settings.topic_titles (app.topic_titles, decision 0026)
TOPIC_TITLE_LABELS = [
    ("auto", "The chat model, when it is capable"),
    ("on", "The chat model"),
    ("off", "Their keywords"),
]


def _file_row(parent: QWidget, edit: QLineEdit, caption: str, filter_: str, name: str) -> QWidget:
    row = QWidget(parent)
    lay = QHBoxLayout(row)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(edit, 1)
    browse = QPushButton("Browse…", row)
    browse.setAccessibleName(f"Choose {name}")

    def pick() -> None:
        path, _ = QFileDialog.getOpenFileName(parent, caption, edit.text() or "", filter_)
        if path:
            edit.setText(path)

    browse.clicked.connect(pick)
    lay.addWidget(browse)
    return row


def _hint(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("hintLabel")
    label.setWordWrap(True)
    return label


class SettingsDialog(QDialog):
    def __init__(self, ctx, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("Settings")
        self.setMinimumSize(620, 560)
        s = ctx.settings
        self.developer_only: list[QWidget] = []  # shown with the Developer settings switch
        lay = QVBoxLayout(self)
        self.tabs = QTabWidget(self)
        lay.addWidget(self.tabs)
        self.tabs.addTab(self._model_tab(s), "Model")
        self.tabs.addTab(self._replies_tab(s), "Replies")
        self.tabs.addTab(self._memory_tab(s), "Memory")
        self.tabs.addTab(self._interface_tab(s), "Interface")
        self.tabs.addTab(self._data_tab(), "Data")
        self.embedding_tab = self._embedding_tab(s)
        self.tabs.addTab(self.embedding_tab, "Embeddings")
        bottom = QHBoxLayout()
        self.developer_check = setting_check(s.ui, "developer", self)
        self.developer_check.toggled.connect(self._show_developer)
        bottom.addWidget(self.developer_check)
        bottom.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        bottom.addWidget(buttons)
        lay.addLayout(bottom)
        self.buttons = buttons
        self._backend_changed()
        self._show_developer(s.ui.developer)

    def _show_developer(self, on: bool) -> None:
        """The tuning knobs, shown or hidden (their values are kept and saved either way)."""
        for w in self.developer_only:
            w.setVisible(on)
        self.tabs.setTabVisible(self.tabs.indexOf(self.embedding_tab), on)
        for label, w in getattr(self, "_developer_rows", []):
            label.setVisible(on)
            w.setVisible(on)

    # -- tabs -----------------------------------------------------------------------
    def _model_tab(self, s: Settings) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.addWidget(self._source_box(page, s))
        lay.addWidget(self._adapters_box(page))
        lay.addWidget(self._generation_box(page, s))
        lay.addStretch(1)
        return page

    def _source_box(self, page: QWidget, s: Settings) -> QGroupBox:
        """Which chat model answers: a GGUF file (found on disk or browsed to) or a server running here."""
        c = s.chat
        src = QGroupBox(setting_label(c, "backend"), page)
        form = QFormLayout(src)
        self.local_radio = QRadioButton("A GGUF file on this computer (llama.cpp)", src)
        self.server_radio = QRadioButton("An OpenAI-compatible server (llama-server, Ollama, vLLM, LM Studio)", src)
        group = QButtonGroup(src)
        group.addButton(self.local_radio)
        group.addButton(self.server_radio)
        (self.server_radio if c.backend == "openai" else self.local_radio).setChecked(True)
        self.local_radio.toggled.connect(self._backend_changed)
        form.addRow(self.local_radio)
        self.gguf_edit = QLineEdit(c.gguf_path, src)
        self.gguf_edit.setPlaceholderText("Empty: the bundled SmolLM2-135M")
        self.gguf_edit.setAccessibleName("GGUF model file")
        self.gguf_row = _file_row(
            src, self.gguf_edit, "Choose a GGUF model", "GGUF models (*.gguf);;All files (*)", "GGUF model file"
        )
        form.addRow(setting_label(c, "gguf_path", self.gguf_edit), self.gguf_row)
        self.found_combo, self._finder = self._search_row(
            form,
            "Found on disk",
            "Models found on this computer",
            "Looking in LM Studio, Ollama, Hugging Face and other model folders…",
            ModelFinder(self, find_models),
            self._models_found,
            self._found_chosen,
        )
        self.gpu_spin = self._developer_row(form, int_knob(form, c, "n_gpu_layers"))
        self.threads_spin = self._developer_row(form, int_knob(form, c, "n_threads", special="All cores"))
        form.addRow(self.server_radio)
        configured = [(c.server_url, c.api_key)]
        self.server_combo, self._server_finder = self._search_row(
            form,
            "Running here",
            "Servers running on this computer",
            "Looking for Ollama, LM Studio, llama-server, vLLM, Jan and GPT4All servers…",
            ModelFinder(self, lambda: find_servers(configured)),
            self._servers_found,
            self._server_chosen,
        )
        self.url_edit = QLineEdit(c.server_url, src)
        self.url_edit.setPlaceholderText("http://127.0.0.1:8080/v1")
        form.addRow(setting_label(c, "server_url", self.url_edit), self.url_edit)
        self.server_model_edit = QLineEdit(c.server_model, src)
        self.server_model_edit.setPlaceholderText("e.g. llama3.1 (empty: the server's default)")
        form.addRow(setting_label(c, "server_model", self.server_model_edit), self.server_model_edit)
        self.key_edit = QLineEdit(c.api_key, src)
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("Only if the server needs one")
        form.addRow(setting_label(c, "api_key", self.key_edit), self.key_edit)
        return src

    def _generation_box(self, page: QWidget, s: Settings) -> QGroupBox:
        """How the model generates (Developer settings on): labels, tooltips and ranges from the fields of
        app.settings.ChatModelSettings."""
        gen = QGroupBox("Generation", page)
        self.developer_only.append(gen)
        g = QFormLayout(gen)
        c = s.chat
        self.ctx_spin = int_knob(g, c, "n_ctx", step=1024)
        self.temp_spin = float_knob(g, c, "temperature", step=0.05)
        self.top_p_spin = float_knob(g, c, "top_p", step=0.01)
        self.min_p_spin = float_knob(g, c, "min_p", step=0.01)
        self.repeat_spin = float_knob(g, c, "repeat_penalty", step=0.01)
        self.self_repeat_spin = float_knob(g, c, "self_repeat_penalty", step=0.1)
        self.max_tokens_spin = int_knob(g, c, "max_tokens")
        self.reserve_spin = int_knob(g, c, "reply_reserve")
        return gen

    def _adapters_box(self, page: QWidget) -> QGroupBox:
        """The model's adapters (parametric memory, app.parametric.adapters), listed; the inspector's Adapters tab
        turns them on per chat, adds, removes and teaches."""
        from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem

        from app.chat.activation_cache import human_bytes
        from app.parametric.adapters import AdapterRegistry, rows

        box = QGroupBox("Adapters", page)
        v = QVBoxLayout(box)
        found = rows(AdapterRegistry(self.ctx.paths.data_dir), None)  # a small file: no model read here
        self.adapters_table = QTableWidget(len(found), 5, box)
        self.adapters_table.setHorizontalHeaderLabels(["Name", "Made for", "Size", "Scale", "From"])
        self.adapters_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.adapters_table.verticalHeader().setVisible(False)
        for i, r in enumerate(found):
            name = r.name + (" (new chats)" if r.new_chats else "")
            cells = (name, r.base_model, human_bytes(r.size), f"{r.scale:g}", r.source)
            for j, text in enumerate(cells):
                self.adapters_table.setItem(i, j, QTableWidgetItem(text))
        self.adapters_table.setVisible(bool(found))
        v.addWidget(self.adapters_table)
        v.addWidget(
            _hint(
                ("" if found else "No adapters yet. ")
                + "An adapter changes the model a little, e.g. one taught from your memories. Turn them on per chat, "
                "add or teach one in the memory inspector's Adapters tab, or with `mnemo memory adapters`.",
                box,
            )
        )
        return box

    def _developer_row(self, form: QFormLayout, widget: _W) -> _W:
        """`widget`'s row of `form`, shown only with Developer settings on; returns the widget."""
        self._developer_rows = getattr(self, "_developer_rows", [])
        self._developer_rows.append((form.labelForField(widget), widget))
        return widget

    def _replies_tab(self, s: Settings) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        box = QGroupBox(setting_label(s, "custom_instructions"), page)
        bl = QVBoxLayout(box)
        bl.addWidget(_hint(about(Settings, "custom_instructions").help, box))
        self.instructions_edit = QPlainTextEdit(box)
        self.instructions_edit.setPlaceholderText("For example: Answer briefly, in British English. I am a nurse.")
        self.instructions_edit.setPlainText(s.custom_instructions)
        self.instructions_edit.setAccessibleName(box.title())
        self.instructions_edit.setMinimumHeight(160)
        bl.addWidget(self.instructions_edit)
        lay.addWidget(box)
        lay.addStretch(1)
        return page

    def _embedding_tab(self, s: Settings) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        box = QGroupBox("Sentence-embedding model", page)
        form = QFormLayout(box)
        self.onnx_edit = QLineEdit(s.embedding.onnx_path, box)
        self.onnx_edit.setPlaceholderText("Empty: the bundled all-MiniLM-L6-v2 (int8)")
        form.addRow(
            setting_label(s.embedding, "onnx_path", self.onnx_edit),
            _file_row(box, self.onnx_edit, "Choose an ONNX model", "ONNX models (*.onnx)", "ONNX model file"),
        )
        self.tokenizer_edit = QLineEdit(s.embedding.tokenizer_path, box)
        self.tokenizer_edit.setPlaceholderText("Empty: the bundled tokenizer.json")
        form.addRow(
            setting_label(s.embedding, "tokenizer_path", self.tokenizer_edit),
            _file_row(
                box, self.tokenizer_edit, "Choose tokenizer.json", "Tokenizer (tokenizer.json *.json)", "tokenizer file"
            ),
        )
        lay.addWidget(box)
        lay.addWidget(
            _hint(
                "Any ONNX sentence-embedding model with inputs input_ids/attention_mask and its "
                "tokenizer.json. A new model applies at the next start; memory is then re-embedded "
                "in the background.",
                page,
            )
        )
        lay.addStretch(1)
        return page

    def _memory_tab(self, s: Settings) -> QWidget:
        outer = QWidget()
        olay = QVBoxLayout(outer)
        olay.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea(outer)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        page = QWidget()
        lay = QVBoxLayout(page)
        note = _hint(
            "Mnemo remembers your chats on this computer. To stop it remembering for a while, use Memory ▸ Pause "
            "memory; for one chat, make it incognito. Help ▸ How Mnemo remembers says how it works.",
            page,
        )
        lay.addWidget(note)
        plain = QFormLayout()
        # a year of daily copies at most in the box; settings.json may keep more (its Rule has no upper bound)
        self.backup_spin = int_knob(plain, s, "backup_keep", special="No backups", widget_high=365)
        self.titles_combo = QComboBox(page)
        for key, label in TOPIC_TITLE_LABELS:
            self.titles_combo.addItem(label, key)
        self.titles_combo.setCurrentIndex(max(0, self.titles_combo.findData(s.topic_titles)))
        titles_label = setting_label(s, "topic_titles", self.titles_combo)
        self.titles_combo.setAccessibleName(titles_label)
        plain.addRow(titles_label, self.titles_combo)
        lay.addLayout(plain)
        # every memory parameter, in its group, as its field declares it (memory_core.types.param)
        self.memory_form = MemoryParamsForm(page, s.memory)
        self.param_edits = self.memory_form.edits
        for box in self.memory_form.boxes:
            self.developer_only.append(box)
            lay.addWidget(box)
        reset = QPushButton("Restore defaults", page)
        reset.setToolTip("Every memory parameter back to its default")
        reset.clicked.connect(self.memory_form.reset)
        lay.addWidget(reset, 0, Qt.AlignmentFlag.AlignLeft)
        hint = _hint("Memory parameters apply at the next start.", page)
        self.developer_only += [reset, hint]
        lay.addWidget(hint)
        lay.addStretch(1)
        scroll.setWidget(page)
        olay.addWidget(scroll)
        return outer

    def _interface_tab(self, s: Settings) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.enter_check = setting_check(s.ui, "enter_sends", page)
        form.addRow(self.enter_check)
        self.prepare_check = setting_check(s.ui, "prepare_replies", page)
        form.addRow(self.prepare_check)
        self.theme_combo = QComboBox(page)
        for key, label in THEME_LABELS:
            self.theme_combo.addItem(label, key)
        self.theme_combo.setCurrentIndex(
            max(0, [k for k, _ in THEME_LABELS].index(s.ui.theme) if s.ui.theme in dict(THEME_LABELS) else 0)
        )
        theme_label = setting_label(s.ui, "theme", self.theme_combo)
        self.theme_combo.setAccessibleName(theme_label)
        form.addRow(theme_label, self.theme_combo)
        return page

    def _data_tab(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        form = QFormLayout()
        data = QLineEdit(str(self.ctx.paths.data_dir), page)
        data.setReadOnly(True)
        data.setAccessibleName("Data folder")
        form.addRow("Data folder", data)
        cfg = QLineEdit(str(self.ctx.paths.config_dir), page)
        cfg.setReadOnly(True)
        cfg.setAccessibleName("Settings folder")
        form.addRow("Settings folder", cfg)
        lay.addLayout(form)
        self.open_data_button = QPushButton("Open data folder", page)
        self.open_data_button.clicked.connect(self.open_data_folder)
        lay.addWidget(self.open_data_button, 0, Qt.AlignmentFlag.AlignLeft)
        lay.addWidget(
            _hint(
                "The memory database (one SQLite file) lives in the data folder. To use another "
                "folder, start Mnemo with --data-dir DIR or set MNEMO_DATA_DIR.",
                page,
            )
        )
        lay.addStretch(1)
        return page

    # -- behaviour --------------------------------------------------------------------
    def _search_row(
        self, form: QFormLayout, label: str, name: str, waiting: str, finder: ModelFinder, on_found, on_chosen
    ) -> tuple[QComboBox, ModelFinder]:
        """A row whose list a background search fills (disabled, saying what it looks for, until then)."""
        combo = QComboBox(form.parentWidget())
        combo.setAccessibleName(name)
        combo.addItem(waiting)
        combo.setEnabled(False)
        combo.activated.connect(on_chosen)
        form.addRow(label, combo)
        finder.done.connect(on_found)
        finder.start()
        return combo, finder

    def _models_found(self, found) -> None:
        combo = self.found_combo
        combo.clear()
        if isinstance(found, Exception) or not found:
            why = f" ({found})" if isinstance(found, Exception) else ""
            combo.addItem(f"None found in other apps' model folders{why}: use Browse…")
            combo.setToolTip(
                "Searched: LM Studio, Ollama, the Hugging Face and llama.cpp caches, GPT4All, Jan, "
                "~/models and ~/Downloads"
            )
            combo.setEnabled(False)
            return
        combo.addItem(f"{len(found)} GGUF chat model{'s' if len(found) != 1 else ''} found: choose one", None)
        current = self.gguf_edit.text().strip()
        for m in found:
            combo.addItem(m.label(), m.path)
            combo.setItemData(combo.count() - 1, m.path, Qt.ItemDataRole.ToolTipRole)
            if current and current == m.path:
                combo.setCurrentIndex(combo.count() - 1)
        combo.setEnabled(True)

    def _servers_found(self, found) -> None:
        combo = self.server_combo
        combo.clear()
        if isinstance(found, Exception) or not found:
            combo.addItem("None answering here: start one, or type its URL below")
            combo.setToolTip(
                "Asked: the URL below and the usual ports of Ollama (11434), LM Studio (1234), "
                "llama-server (8080), vLLM (8000), Jan (1337) and GPT4All (4891) on 127.0.0.1"
            )
            combo.setEnabled(False)
            return
        pairs = [(srv, name) for srv in found for name in (srv.models or ("",))]
        combo.addItem(f"{len(pairs)} model{'s' if len(pairs) != 1 else ''} served here: choose one", None)
        for srv, name in pairs:
            where = srv.url if srv.app == "configured" else f"{srv.app}, {srv.url}"
            combo.addItem(f"{name} ({where})" if name else where, (srv.url, name))
        combo.setEnabled(True)

    def _server_chosen(self, index: int) -> None:
        choice = self.server_combo.itemData(index)
        if choice:
            self.url_edit.setText(choice[0])
            self.server_model_edit.setText(choice[1])
            self.server_radio.setChecked(True)

    def _found_chosen(self, index: int) -> None:
        path = self.found_combo.itemData(index)
        if path:
            self.gguf_edit.setText(path)
            self.local_radio.setChecked(True)

    def _backend_changed(self, *_args) -> None:
        local = self.local_radio.isChecked()
        for w in (self.gguf_row, self.gpu_spin, self.threads_spin):
            w.setEnabled(local)
        for w in (self.url_edit, self.server_model_edit, self.key_edit):
            w.setEnabled(not local)

    def open_data_folder(self) -> bool:
        path = self.ctx.paths.data_dir
        path.mkdir(parents=True, exist_ok=True)
        return QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))

    def apply(self) -> set[str]:
        """Write the dialog's values into ctx.settings; return the sections that changed."""
        s = self.ctx.settings
        before = copy.deepcopy(s)
        c = s.chat
        c.backend = "llama" if self.local_radio.isChecked() else "openai"
        c.gguf_path = self.gguf_edit.text().strip()
        c.server_url = self.url_edit.text().strip()
        c.server_model = self.server_model_edit.text().strip()
        c.api_key = self.key_edit.text()
        c.n_ctx = self.ctx_spin.value()
        c.n_threads = self.threads_spin.value()
        c.n_gpu_layers = self.gpu_spin.value()
        c.temperature = round(self.temp_spin.value(), 4)
        c.top_p = round(self.top_p_spin.value(), 4)
        c.min_p = round(self.min_p_spin.value(), 4)
        c.repeat_penalty = round(self.repeat_spin.value(), 4)
        c.self_repeat_penalty = round(self.self_repeat_spin.value(), 4)
        c.max_tokens = self.max_tokens_spin.value()
        c.reply_reserve = self.reserve_spin.value()
        s.embedding.onnx_path = self.onnx_edit.text().strip()
        s.embedding.tokenizer_path = self.tokenizer_edit.text().strip()
        s.memory = self.memory_form.overrides()
        s.ui.enter_sends = self.enter_check.isChecked()
        s.ui.prepare_replies = self.prepare_check.isChecked()
        s.ui.theme = self.theme_combo.currentData()
        s.ui.developer = self.developer_check.isChecked()
        s.custom_instructions = self.instructions_edit.toPlainText().strip()
        s.backup_keep = self.backup_spin.value()
        s.topic_titles = self.titles_combo.currentData()
        changed = set()
        for section in ("chat", "embedding", "memory", "ui", "custom_instructions", "backup_keep", "topic_titles"):
            if getattr(before, section) != getattr(s, section):
                changed.add(section)
        return changed
