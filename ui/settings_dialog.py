"""The settings dialog: which chat model answers (a GGUF file or an OpenAI-compatible server), custom
instructions, memory (backups; pausing), the interface and the data folder: a handful of choices a person
understands. The tuning knobs (generation, context, embedding model, every memory parameter, each with a
tooltip) are behind the "Developer settings" switch. `apply()` writes into `ctx.settings`; the caller saves."""

from __future__ import annotations

import copy
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
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
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.settings_schema import memory_rule
from models.discover import find_models, find_servers
from ui.model_finder import ModelFinder
from ui.param_help import PARAM_GROUPS, param_help

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


def _spin(lo: int, hi: int, value: int, special: str | None = None) -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setValue(value)
    if special:
        s.setSpecialValueText(special)
    return s


def _dspin(lo: float, hi: float, value: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    s = QDoubleSpinBox()
    s.setDecimals(decimals)
    s.setRange(lo, hi)
    s.setSingleStep(step)
    s.setValue(value)
    return s


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
        self.developer_check = QCheckBox("Developer settings", self)
        self.developer_check.setToolTip(
            "Show the tuning knobs: how the model generates, its context, the embedding model, and every memory "
            "parameter (the memory inspector then shows its technical details too)"
        )
        self.developer_check.setChecked(s.ui.developer)
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
    def _model_tab(self, s) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        src = QGroupBox("Chat model", page)
        form = QFormLayout(src)
        self.local_radio = QRadioButton("A GGUF file on this computer (llama.cpp)", src)
        self.server_radio = QRadioButton("An OpenAI-compatible server (llama-server, Ollama, vLLM, LM Studio)", src)
        group = QButtonGroup(src)
        group.addButton(self.local_radio)
        group.addButton(self.server_radio)
        (self.server_radio if s.chat.backend == "openai" else self.local_radio).setChecked(True)
        self.local_radio.toggled.connect(self._backend_changed)
        form.addRow(self.local_radio)
        self.gguf_edit = QLineEdit(s.chat.gguf_path, src)
        self.gguf_edit.setPlaceholderText("Empty: the bundled SmolLM2-135M")
        self.gguf_edit.setAccessibleName("GGUF model file")
        self.gguf_row = _file_row(
            src, self.gguf_edit, "Choose a GGUF model", "GGUF models (*.gguf);;All files (*)", "GGUF model file"
        )
        form.addRow("Model file", self.gguf_row)
        self.found_combo, self._finder = self._search_row(
            form,
            "Found on disk",
            "Models found on this computer",
            "Looking in LM Studio, Ollama, Hugging Face and other model folders…",
            ModelFinder(self, find_models),
            self._models_found,
            self._found_chosen,
        )
        self.gpu_spin = _spin(-1, 999, s.chat.n_gpu_layers)
        self.gpu_spin.setToolTip("Layers offloaded to the GPU (0: CPU only, -1: all)")
        self._developer_row(form, "GPU layers", self.gpu_spin)
        self.threads_spin = _spin(0, 256, s.chat.n_threads, "All cores")
        self.threads_spin.setToolTip("CPU threads llama.cpp uses (All cores: one fewer while writing a reply)")
        self._developer_row(form, "Threads", self.threads_spin)
        form.addRow(self.server_radio)
        configured = [(s.chat.server_url, s.chat.api_key)]
        self.server_combo, self._server_finder = self._search_row(
            form,
            "Running here",
            "Servers running on this computer",
            "Looking for Ollama, LM Studio, llama-server, vLLM, Jan and GPT4All servers…",
            ModelFinder(self, lambda: find_servers(configured)),
            self._servers_found,
            self._server_chosen,
        )
        self.url_edit = QLineEdit(s.chat.server_url, src)
        self.url_edit.setPlaceholderText("http://127.0.0.1:8080/v1")
        form.addRow("Server URL", self.url_edit)
        self.server_model_edit = QLineEdit(s.chat.server_model, src)
        self.server_model_edit.setPlaceholderText("e.g. llama3.1 (empty: the server's default)")
        form.addRow("Model name", self.server_model_edit)
        self.key_edit = QLineEdit(s.chat.api_key, src)
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("Only if the server needs one")
        form.addRow("API key", self.key_edit)
        lay.addWidget(src)
        lay.addWidget(self._adapters_box(page))

        gen = QGroupBox("Generation", page)
        self.developer_only.append(gen)
        g = QFormLayout(gen)
        self.ctx_spin = _spin(256, 1_048_576, s.chat.n_ctx)
        self.ctx_spin.setSingleStep(1024)
        self.ctx_spin.setToolTip(
            "Tokens the model reads at once: the prompt (system prompt, profile, recalled memory, the chat) and "
            "the reply. More holds more of a long chat but needs more memory and time"
        )
        g.addRow("Context length (tokens)", self.ctx_spin)
        self.temp_spin = _dspin(0.0, 2.0, s.chat.temperature, 0.05)
        self.temp_spin.setToolTip("How adventurous the wording is: 0 always takes the likeliest word, 1 and more vary")
        g.addRow("Temperature", self.temp_spin)
        self.top_p_spin = _dspin(0.0, 1.0, s.chat.top_p, 0.01)
        self.top_p_spin.setToolTip("Pick only among the likeliest words that together make up this share")
        g.addRow("Top-p", self.top_p_spin)
        self.min_p_spin = _dspin(0.0, 1.0, s.chat.min_p, 0.01)
        self.min_p_spin.setToolTip(
            "Never pick a word less likely than this share of the likeliest one "
            "(keeps small models from wandering off; llama.cpp's sampler, "
            "so servers not built on llama.cpp may ignore it)"
        )
        g.addRow("Min-p", self.min_p_spin)
        self.repeat_spin = _dspin(1.0, 2.0, s.chat.repeat_penalty, 0.01)
        self.repeat_spin.setToolTip(
            "Above 1, words of the last 64 tokens are less likely to come again "
            "(1 = off; llama.cpp's sampler, so servers not built on llama.cpp "
            "may ignore it)"
        )
        g.addRow("Repeat penalty", self.repeat_spin)
        self.self_repeat_spin = _dspin(0.0, 5.0, s.chat.self_repeat_penalty, 0.1)
        self.self_repeat_spin.setToolTip(
            "Keeps a reply from copying the model's earlier replies in the chat word "
            "for word: the longer the copy, the less likely its next word (0 = off; "
            "a GGUF run here only)"
        )
        g.addRow("Self-repeat penalty", self.self_repeat_spin)
        self.max_tokens_spin = _spin(1, 131_072, s.chat.max_tokens)
        self.max_tokens_spin.setToolTip("The longest reply, in tokens (a token is about ¾ of a word)")
        g.addRow("Max reply tokens", self.max_tokens_spin)
        self.reserve_spin = _spin(16, 131_072, s.chat.reply_reserve)
        self.reserve_spin.setToolTip("Tokens of the context kept free for the reply when the prompt is composed")
        g.addRow("Reply reserve (tokens)", self.reserve_spin)
        lay.addWidget(gen)
        lay.addStretch(1)
        return page

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

    def _developer_row(self, form: QFormLayout, label: str, widget: QWidget) -> None:
        """A form row shown only with Developer settings on."""
        form.addRow(label, widget)
        self._developer_rows = getattr(self, "_developer_rows", [])
        self._developer_rows.append((form.labelForField(widget), widget))

    def _replies_tab(self, s) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        box = QGroupBox("Custom instructions", page)
        bl = QVBoxLayout(box)
        bl.addWidget(
            _hint(
                "What every reply should follow: how to answer, what to call you, what to keep in mind. Mnemo puts "
                "it after its own instructions in every prompt. Importing a ChatGPT export fills it with your "
                "ChatGPT custom instructions when it is empty.",
                box,
            )
        )
        self.instructions_edit = QPlainTextEdit(box)
        self.instructions_edit.setPlaceholderText("For example: Answer briefly, in British English. I am a nurse.")
        self.instructions_edit.setPlainText(s.custom_instructions)
        self.instructions_edit.setAccessibleName("Custom instructions")
        self.instructions_edit.setMinimumHeight(160)
        bl.addWidget(self.instructions_edit)
        lay.addWidget(box)
        lay.addStretch(1)
        return page

    def _embedding_tab(self, s) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        box = QGroupBox("Sentence-embedding model", page)
        form = QFormLayout(box)
        self.onnx_edit = QLineEdit(s.embedding.onnx_path, box)
        self.onnx_edit.setPlaceholderText("Empty: the bundled all-MiniLM-L6-v2 (int8)")
        form.addRow(
            "ONNX model",
            _file_row(box, self.onnx_edit, "Choose an ONNX model", "ONNX models (*.onnx)", "ONNX model file"),
        )
        self.tokenizer_edit = QLineEdit(s.embedding.tokenizer_path, box)
        self.tokenizer_edit.setPlaceholderText("Empty: the bundled tokenizer.json")
        form.addRow(
            "Tokenizer",
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

    def _memory_tab(self, s) -> QWidget:
        from memory_core import MemoryParams

        # flat parameter names, as settings.json's "memory" object keeps them
        self._param_defaults: dict[str, Any] = MemoryParams().flat()
        current = dict(self._param_defaults)
        current.update({k: v for k, v in s.memory.items() if k in current})
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
        self.backup_spin = _spin(0, 365, s.backup_keep, "No backups")
        self.backup_spin.setToolTip(
            "Mnemo copies its memory once a day to the backups folder; this many copies are kept"
        )
        self.backup_spin.setAccessibleName("Daily backups to keep")
        plain.addRow("Daily backups to keep", self.backup_spin)
        self.titles_combo = QComboBox(page)
        for key, label in TOPIC_TITLE_LABELS:
            self.titles_combo.addItem(label, key)
        self.titles_combo.setCurrentIndex(max(0, self.titles_combo.findData(s.topic_titles)))
        self.titles_combo.setToolTip(
            "Who names the topics your pages are grouped into (the memory inspector's Topics tab): the chat "
            'model, when it is idle, or their keywords. "When it is capable" lets a model of 1B parameters or '
            "more write them: the small bundled model's titles are often beside the point"
        )
        self.titles_combo.setAccessibleName("Topic titles")
        plain.addRow("Topic titles", self.titles_combo)
        lay.addLayout(plain)
        self.param_edits: dict[str, QSpinBox | QDoubleSpinBox] = {}
        shown = set()
        for title, params in PARAM_GROUPS.items():
            box = QGroupBox(title, page)
            form = QFormLayout(box)
            for name in params:
                if name in current:
                    self._param_row(form, name, current[name])
                    shown.add(name)
            self.developer_only.append(box)
            lay.addWidget(box)
        rest = [n for n in current if n not in shown]  # a parameter the help table does not know yet
        if rest:
            box = QGroupBox("Other", page)
            form = QFormLayout(box)
            for name in rest:
                self._param_row(form, name, current[name])
            self.developer_only.append(box)
            lay.addWidget(box)
        reset = QPushButton("Restore defaults", page)
        reset.setToolTip("Every memory parameter back to its default")
        reset.clicked.connect(self._reset_params)
        lay.addWidget(reset, 0, Qt.AlignmentFlag.AlignLeft)
        hint = _hint("Memory parameters apply at the next start.", page)
        self.developer_only += [reset, hint]
        lay.addWidget(hint)
        lay.addStretch(1)
        scroll.setWidget(page)
        olay.addWidget(scroll)
        return outer

    def _param_row(self, form: QFormLayout, name: str, value) -> None:
        label, tip = param_help(name)
        w = self._param_widget(name, value)
        w.setToolTip(f"{tip}\n({name}, default {self._param_defaults[name]:g})")
        w.setAccessibleName(label)
        form.addRow(label, w)
        form.labelForField(w).setToolTip(w.toolTip())

    def _param_widget(self, name: str, value) -> QSpinBox | QDoubleSpinBox:
        default = self._param_defaults[name]
        if isinstance(default, bool):
            raise TypeError(name)
        w: QSpinBox | QDoubleSpinBox
        rule = memory_rule(name)  # the range settings.json is checked against (app.settings_schema)
        if isinstance(default, int):
            lo = int(rule.low) if rule.low is not None else 0
            w = _spin(lo, int(rule.high) if rule.high is not None else 10_000_000, int(value))
        else:
            big = abs(float(default)) >= 1000
            lo_f = rule.low if rule.low is not None else -1000.0
            hi_f = rule.high if rule.high is not None else (1e12 if big else 1000.0)
            w = _dspin(lo_f, hi_f, float(value), 1000.0 if big else 0.05, 0 if big else 3)
        self.param_edits[name] = w
        return w

    def _reset_params(self) -> None:
        for name, w in self.param_edits.items():
            w.setValue(self._param_defaults[name])

    def _interface_tab(self, s) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.enter_check = QCheckBox("Enter sends the message (Shift+Enter adds a line)", page)
        self.enter_check.setChecked(s.ui.enter_sends)
        self.enter_check.setToolTip("Off: Ctrl+Enter sends and Enter adds a line")
        form.addRow(self.enter_check)
        self.prepare_check = QCheckBox("Prepare replies while you read or type", page)
        self.prepare_check.setChecked(s.ui.prepare_replies)
        self.prepare_check.setToolTip(
            "The local model processes the open chat in the background, so the next "
            "reply starts sooner (uses one core for a few seconds after opening a chat "
            "or after a reply)"
        )
        form.addRow(self.prepare_check)
        self.theme_combo = QComboBox(page)
        for key, label in THEME_LABELS:
            self.theme_combo.addItem(label, key)
        self.theme_combo.setCurrentIndex(
            max(0, [k for k, _ in THEME_LABELS].index(s.ui.theme) if s.ui.theme in dict(THEME_LABELS) else 0)
        )
        self.theme_combo.setAccessibleName("Theme")
        form.addRow("Theme", self.theme_combo)
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
        overrides = {}
        for name, w in self.param_edits.items():
            default = self._param_defaults[name]
            value = int(w.value()) if isinstance(default, int) else float(w.value())
            if abs(value - default) > 1e-9 * max(1.0, abs(default)):
                overrides[name] = value
        s.memory = overrides
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
