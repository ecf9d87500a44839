"""User settings as dataclasses, stored as JSON in the user config dir; data paths.

Folders come from platformdirs and can be overridden for tests and portable use:
`--config-dir`/`--data-dir` on the command line, or MNEMO_CONFIG_DIR/MNEMO_DATA_DIR.
Every value is read through one schema (app.settings_schema): its default's type and the field's
`Rule` here, MemoryParams' own fields for the "memory" section.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import platformdirs

from app.runtime.private_files import ensure_private_dir
from app.settings_schema import RULE, Rule, checked, memory_overrides, setting

APP_NAME = "Mnemo"
SETTINGS_FILE = "settings.json"
DB_FILE = "mnemo.sqlite3"


@dataclass
class ChatModelSettings:
    backend: str = setting(
        "llama", choices=("llama", "openai")
    )  # "llama" (a GGUF run in-process) or "openai" (an OpenAI-compatible server)
    gguf_path: str = ""  # empty: the bundled SmolLM2-135M
    server_url: str = "http://127.0.0.1:8080/v1"
    server_model: str = ""
    api_key: str = ""
    n_ctx: int = setting(4096, low=256, high=1_048_576)
    n_threads: int = setting(0, low=0, high=256)  # 0: automatic (cores - 1 while generating, all cores for the prompt)
    n_gpu_layers: int = setting(0, low=-1, high=999)  # -1: all
    temperature: float = setting(0.5, low=0.0, high=2.0)
    top_p: float = setting(0.95, low=0.0, high=1.0)
    min_p: float = setting(
        0.1, low=0.0, high=1.0
    )  # llama.cpp: never draw a token under min_p x the likeliest one's probability
    repeat_penalty: float = setting(1.1, low=1.0, high=2.0)  # llama.cpp: > 1 discourages repeating the last 64 tokens
    self_repeat_penalty: float = setting(
        0.8, low=0.0, high=5.0
    )  # a GGUF run here: > 0 keeps a reply from reciting earlier replies
    max_tokens: int = setting(512, low=1, high=131_072)
    reply_reserve: int = setting(512, low=16, high=131_072)  # tokens kept free for the reply when composing a prompt


@dataclass
class EmbeddingSettings:
    onnx_path: str = ""  # empty: the bundled all-MiniLM-L6-v2 int8
    tokenizer_path: str = ""


@dataclass
class UISettings:
    enter_sends: bool = True
    theme: str = setting("system", choices=("system", "light", "dark"))
    # let the model process the open chat's prompt while the user reads or types (ChatAgent.warm)
    prepare_replies: bool = True
    # Settings shows the memory's tuning knobs, and the inspector its technical details, when on
    developer: bool = False


@dataclass
class Settings:
    chat: ChatModelSettings = field(default_factory=ChatModelSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    ui: UISettings = field(default_factory=UISettings)
    # What the user wants every reply to follow ("answer in French", "be brief"): after the system prompt.
    # Imported ChatGPT custom instructions ("how to respond") land here (ui.import_dialog).
    custom_instructions: str = ""
    # Overrides of memory_core.MemoryParams, by field name (only what the user changed).
    memory: dict[str, Any] = field(default_factory=dict)
    # Daily copies of the memory database kept in <data dir>/backups (app.operations.backups); 0 = none.
    backup_keep: int = setting(2, low=0)
    # Who writes the titles of memory's topics: the chat model ("on"), their keywords ("off"), or the chat
    # model when it is capable, at least 1B parameters ("auto"; app.topic_titles, decision 0026).
    topic_titles: str = setting("auto", choices=("auto", "on", "off"))
    # Legacy (≤ 0.1): the global pause switch lived here. It now lives in the memory database
    # (`MemoryStore.set_paused`), shared by the app, the inspector and the CLI; a True found here
    # is moved there when the store is next opened (AppContext.open_store).
    memory_paused: bool = False


def _from_dict(cls, data: Any, notes: list[str] | None = None, where: str = ""):
    """Build dataclass `cls` from a dict, ignoring unknown keys and keeping defaults for missing ones.
    A value of the wrong type or out of its field's range keeps the default too, and `notes` says so."""
    if not isinstance(data, dict):
        if notes is not None and data is not None:
            notes.append(f"settings: {where or 'the file'} should be an object; the defaults are used")
        return cls()
    kwargs = {}
    defaults = cls()
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        default = getattr(defaults, f.name)
        name = f"{where}.{f.name}" if where else f.name
        if is_dataclass(default):
            value = _from_dict(type(default), value, notes, name)
        elif name == "memory":
            value = memory_overrides(value, notes)
        else:
            ok, value = checked(name, default, value, f.metadata.get(RULE, Rule()), notes)
            if not ok:
                continue
        kwargs[f.name] = value
    return cls(**kwargs)


@dataclass
class Paths:
    config_dir: Path
    data_dir: Path

    @property
    def settings_file(self) -> Path:
        return self.config_dir / SETTINGS_FILE

    @property
    def db_file(self) -> Path:
        return self.data_dir / DB_FILE

    @classmethod
    def resolve(cls, config_dir: str | Path | None = None, data_dir: str | Path | None = None) -> Paths:
        config = config_dir or os.environ.get("MNEMO_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME, False)
        data = data_dir or os.environ.get("MNEMO_DATA_DIR") or platformdirs.user_data_dir(APP_NAME, False)
        return cls(Path(config).expanduser(), Path(data).expanduser())


def load_settings(paths: Paths, notes: list[str] | None = None) -> Settings:
    """Read settings; a missing or unreadable file gives defaults. A broken file is kept aside as
    settings.json.broken (the user's edits are not lost) and `notes` gets a sentence saying so."""
    path = paths.settings_file
    if not path.exists():
        return Settings()
    try:
        return _from_dict(Settings, json.loads(path.read_text(encoding="utf-8")), notes)
    except (OSError, ValueError) as exc:
        broken = path.with_suffix(".json.broken")
        try:
            path.replace(broken)
            kept = f"it was kept as {broken}"
        except OSError:
            kept = "it was left as it is"
        if notes is not None:
            notes.append(f"{path} could not be read ({exc}); {kept} and the default settings are used")
        return Settings()


def save_settings(paths: Paths, settings: Settings) -> None:
    """Write settings atomically (temp file + rename), so a crash never leaves half a file."""
    ensure_private_dir(paths.config_dir)
    text = json.dumps(asdict(settings), indent=2, sort_keys=True)  # mkstemp below: a 0600 file
    fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=paths.config_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, paths.settings_file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
