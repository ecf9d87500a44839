"""User settings as dataclasses, stored as JSON in the user config dir; data paths.

Folders come from platformdirs and can be overridden for tests and portable use:
`--config-dir`/`--data-dir` on the command line, or MNEMO_CONFIG_DIR/MNEMO_DATA_DIR.
Every value is read through one schema (app.settings_schema): its default's type and the field's
`Rule` here, MemoryParams' own fields for the "memory" section. Each setting is declared once, on its field
(`setting`: default, bounds, label, help), which the settings dialog and docs/settings.md read too.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import platformdirs

from app.private_files import ensure_private_dir
from app.settings_schema import RULE, Rule, checked, memory_overrides, setting

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

APP_NAME = "Mnemo"
SETTINGS_FILE = "settings.json"
DB_FILE = "mnemo.sqlite3"


@dataclass
class ChatModelSettings:
    """Which chat model answers and how it generates: each field declared once (`setting`), with the range
    settings.json is checked against and the label and tooltip of Settings ▸ Model."""

    backend: str = setting(
        "llama",
        choices=("llama", "openai"),
        label="Chat model",
        help='"llama": a GGUF file on this computer (llama.cpp); "openai": an OpenAI-compatible server',
    )
    gguf_path: str = setting("", label="Model file", help="The GGUF chat model; empty: the bundled SmolLM2-135M")
    server_url: str = setting(
        "http://127.0.0.1:8080/v1", label="Server URL", help='The OpenAI-compatible server, for "openai"'
    )
    server_model: str = setting("", label="Model name", help="The model the server runs; empty: the server's default")
    api_key: str = setting("", label="API key", help="Only if the server needs one")
    n_ctx: int = setting(
        4096,
        low=256,
        high=1_048_576,
        label="Context length (tokens)",
        help="Tokens the model reads at once: the prompt (system prompt, profile, recalled memory, the chat) and "
        "the reply. More holds more of a long chat but needs more memory and time",
    )
    n_threads: int = setting(  # 0: automatic (cores - 1 while generating, all cores for the prompt)
        0,
        low=0,
        high=256,
        label="Threads",
        help="CPU threads llama.cpp uses (All cores: one fewer while writing a reply)",
    )
    n_gpu_layers: int = setting(  # -1: all
        0, low=-1, high=999, label="GPU layers", help="Layers offloaded to the GPU (0: CPU only, -1: all)"
    )
    temperature: float = setting(
        0.5,
        low=0.0,
        high=2.0,
        label="Temperature",
        help="How adventurous the wording is: 0 always takes the likeliest word, 1 and more vary",
    )
    top_p: float = setting(
        0.95,
        low=0.0,
        high=1.0,
        label="Top-p",
        help="Pick only among the likeliest words that together make up this share",
    )
    min_p: float = setting(  # llama.cpp: never draw a token under min_p x the likeliest one's probability
        0.1,
        low=0.0,
        high=1.0,
        label="Min-p",
        help="Never pick a word less likely than this share of the likeliest one "
        "(keeps small models from wandering off; llama.cpp's sampler, "
        "so servers not built on llama.cpp may ignore it)",
    )
    repeat_penalty: float = setting(  # llama.cpp: > 1 discourages repeating the last 64 tokens
        1.1,
        low=1.0,
        high=2.0,
        label="Repeat penalty",
        help="Above 1, words of the last 64 tokens are less likely to come again "
        "(1 = off; llama.cpp's sampler, so servers not built on llama.cpp "
        "may ignore it)",
    )
    self_repeat_penalty: float = setting(  # a GGUF run here: > 0 keeps a reply from reciting earlier replies
        0.8,
        low=0.0,
        high=5.0,
        label="Self-repeat penalty",
        help="Keeps a reply from copying the model's earlier replies in the chat word "
        "for word: the longer the copy, the less likely its next word (0 = off; "
        "a GGUF run here only)",
    )
    max_tokens: int = setting(
        512,
        low=1,
        high=131_072,
        label="Max reply tokens",
        help="The longest reply, in tokens (a token is about ¾ of a word)",
    )
    reply_reserve: int = setting(  # tokens kept free for the reply when composing a prompt
        512,
        low=16,
        high=131_072,
        label="Reply reserve (tokens)",
        help="Tokens of the context kept free for the reply when the prompt is composed",
    )


@dataclass
class EmbeddingSettings:
    onnx_path: str = setting(
        "",
        label="ONNX model",
        help="Any ONNX sentence-embedding model with inputs input_ids/attention_mask; empty: the bundled "
        "all-MiniLM-L6-v2 (int8). A new model applies at the next start; memory is then re-embedded",
    )
    tokenizer_path: str = setting(
        "", label="Tokenizer", help="The embedding model's tokenizer.json; empty: the bundled tokenizer.json"
    )


@dataclass
class UISettings:
    enter_sends: bool = setting(
        True,
        label="Enter sends the message (Shift+Enter adds a line)",
        help="Off: Ctrl+Enter sends and Enter adds a line",
    )
    theme: str = setting(
        "system",
        choices=("system", "light", "dark"),
        label="Theme",
        help="The window's colours: the system's, light or dark",
    )
    # let the model process the open chat's prompt while the user reads or types (ChatAgent.warm)
    prepare_replies: bool = setting(
        True,
        label="Prepare replies while you read or type",
        help="The local model processes the open chat in the background, so the next "
        "reply starts sooner (uses one core for a few seconds after opening a chat "
        "or after a reply)",
    )
    # Settings shows the memory's tuning knobs, and the inspector its technical details, when on
    developer: bool = setting(
        False,
        label="Developer settings",
        help="Show the tuning knobs: how the model generates, its context, the embedding model, and every memory "
        "parameter (the memory inspector then shows its technical details too)",
    )


@dataclass
class Settings:
    chat: ChatModelSettings = field(default_factory=ChatModelSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    ui: UISettings = field(default_factory=UISettings)
    # What the user wants every reply to follow ("answer in French", "be brief"): after the system prompt.
    # Imported ChatGPT custom instructions ("how to respond") land here (ui.import_dialog).
    custom_instructions: str = setting(
        "",
        label="Custom instructions",
        help="What every reply should follow: how to answer, what to call you, what to keep in mind. Mnemo puts "
        "it after its own instructions in every prompt. Importing a ChatGPT export fills it with your "
        "ChatGPT custom instructions when it is empty.",
    )
    # Overrides of memory_core.MemoryParams, by field name (only what the user changed).
    memory: dict[str, Any] = field(default_factory=dict)
    # Daily copies of the memory database kept in <data dir>/backups (app.operations.backups); 0 = none.
    backup_keep: int = setting(
        2,
        low=0,
        label="Daily backups to keep",
        help="Mnemo copies its memory once a day to the backups folder; this many copies are kept",
    )
    # Who writes the titles of memory's topics: the chat model ("on"), their keywords ("off"), or the chat
    # model when it is capable, at least 1B parameters ("auto"; app.topic_titles, decision 0026).
    topic_titles: str = setting(
        "auto",
        choices=("auto", "on", "off"),
        label="Topic titles",
        help="Who names the topics your pages are grouped into (the memory inspector's Topics tab): the chat "
        'model, when it is idle, or their keywords. "When it is capable" lets a model of 1B parameters or '
        "more write them: the small bundled model's titles are often beside the point",
    )
    # Legacy (≤ 0.1): the global pause switch lived here. It now lives in the memory database
    # (`MemoryStore.set_paused`), shared by the app, the inspector and the CLI; a True found here
    # is moved there when the store is next opened (AppContext.open_store).
    memory_paused: bool = setting(
        False,
        label="Memory paused (old place)",
        help="Where the pause switch lived in older versions: true is moved into the memory database when it is next "
        "opened; Memory ▸ Pause memory sets it now",
    )


_D = TypeVar("_D", bound="DataclassInstance")  # the settings dataclass _from_dict builds


def _from_dict(cls: type[_D], data: Any, notes: list[str] | None = None, where: str = "") -> _D:
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
        if is_dataclass(default) and not isinstance(default, type):  # a nested section
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
