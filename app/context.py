"""`AppContext`: paths + settings + lazily built models and stores, shared by the CLI and the GUI."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.chat.activation_cache import attach as attach_activation
from app.errors import cannot_open_database, database_open_error
from app.parametric.adapters import attach as attach_adapters
from app.private_files import ensure_private_dir, secure_folder
from app.runtime.backends import build_chat_model, build_embedder
from app.runtime.instance_lock import LOCK_NAME
from app.settings import SETTINGS_FILE, Paths, Settings, load_settings, save_settings
from app.settings_schema import memory_overrides

if TYPE_CHECKING:
    from memory_core import MemoryParams, MemoryStore
    from memory_core.types import CompleteJsonFn
    from models.chat import ChatModel
    from models.embedder import OnnxEmbedder


@dataclass
class AppContext:
    paths: Paths
    settings: Settings
    settings_notes: list[str] = field(default_factory=list)  # what was wrong in settings.json, for the user
    _embedder: Any = field(default=None, repr=False)
    _chat_model: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, config_dir: str | Path | None = None, data_dir: str | Path | None = None) -> AppContext:
        paths = Paths.resolve(config_dir, data_dir)
        # owner-only, also what an older Mnemo made 0755/0644 ("backups": app.operations.backups.BACKUP_DIR, not
        # imported here, as it loads memory_core before the window paints)
        secure_folder(paths.data_dir, folders=("backups",), files=(LOCK_NAME,))
        secure_folder(paths.config_dir, files=(SETTINGS_FILE,))
        notes: list[str] = []
        return cls(paths=paths, settings=load_settings(paths, notes), settings_notes=notes)

    def save(self) -> None:
        save_settings(self.paths, self.settings)

    def embedder(self) -> OnnxEmbedder:
        """The configured embedder, loaded on first use (thread-safe)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = build_embedder(self.settings.embedding, self.paths.settings_file)
            return self._embedder

    def chat_model(self) -> ChatModel:
        """The configured chat model, loaded on first use. Drive it from one thread only."""
        with self._lock:
            if self._chat_model is None:
                self._chat_model = build_chat_model(self.settings.chat, self.paths.settings_file)
                # its saved prompt states, in <data dir>/activation/ (llama.cpp in-process only)
                attach_activation(self._chat_model, self.paths.data_dir)
                attach_adapters(self._chat_model, self.paths.data_dir)  # its LoRA adapters (app.parametric.adapters)
            return self._chat_model

    def reset_chat_model(self) -> None:
        with self._lock:
            if self._chat_model is not None:
                self._chat_model.close()
            self._chat_model = None

    def memory_params(self) -> MemoryParams:
        from memory_core import MemoryParams

        # the schema's check again: the window and tests change `settings.memory` after loading
        return MemoryParams.from_flat(memory_overrides(self.settings.memory, None))

    def open_store(self, *, llm: CompleteJsonFn | None = None) -> MemoryStore:
        """Open the profile's memory store on a new connection (one per thread)."""
        from memory_core import MemoryStore

        emb = self.embedder()
        params = self.memory_params()
        try:
            ensure_private_dir(self.paths.data_dir)
            store = MemoryStore.open(
                self.paths.db_file,
                emb.embed,
                embed_model_id=emb.model_id,
                dim=emb.dim,
                params=params,
                llm=llm,
                # the word-by-word match needs each page's token vectors; w_tokens 0 keeps none (a smaller file)
                embed_tokens=emb.embed_with_tokens if params.ranking.w_tokens > 0 else None,
            )
        except Exception as exc:
            if cannot_open_database(exc):  # a read-only or missing folder: say which, and what to do
                raise database_open_error(self.paths.db_file, exc) from exc
            raise
        if self.settings.memory_paused:  # an old settings file: the pause switch moves to the store
            store.set_paused(True)
            self.settings.memory_paused = False
            self.save()
        return store
