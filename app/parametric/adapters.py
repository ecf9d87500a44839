"""Parametric memory: the user's LoRA adapters, which chats use them, and putting them on the model.

An adapter (models.lora) is a small file of weights that changes what the chat model says: one
downloaded for a style or a skill, or one `mnemo memory distill` trained from what memory holds
(app.parametric.distill). Mnemo keeps a copy of each in `<data dir>/adapters/` (so a file moved or deleted
later, or a cube's temporary folder, takes nothing away) and a registry beside them,
`adapters/adapters.json` (decision 0021 says why a file there and not the memory database or the
settings): each adapter's name, file, checksum, size, scale, the model it was made for and where it
came from; the adapters every new chat starts with; and each chat's own choice, kept once made.

Before each turn (`ChatSession.agent`) the chat's adapters are put on the model
(`apply_for_chat`): an adapter that does not fit the model now loaded (another base model, a file
changed since it was added) is left off with one line in the log and in the inspector, and the
reply goes on without it. A model without adapter support (an HTTP server) is left as it is.

An adapter trained from memory holds that memory in its weights, so forgetting reaches it as it
reaches backups and saved prompt states: one trained while something since forgotten existed is
deleted (`drop_forgotten`, before a chat's next turn and before a listing).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from app.private_files import ensure_private_dir
from models.lora import AdapterError, AdapterInfo, check_fits, file_digest, inspect_adapter

if TYPE_CHECKING:
    from app.settings import Settings
    from memory_core import MemoryStore
    from models.chat import ChatModel

log = logging.getLogger(__name__)

ADAPTERS_DIR = "adapters"
REGISTRY_FILE = "adapters.json"
MIN_SCALE, MAX_SCALE = -4.0, 4.0  # llama.cpp takes any float; past these a LoRA only garbles
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")


class AdapterRegistryError(ValueError):
    """A request the registry cannot carry out (unknown name, bad scale, a file that is no adapter)."""


@dataclass
class AdapterRecord:
    """One adapter the user has, as the registry keeps it."""

    name: str
    file: str  # its copy's file name inside the adapters folder
    sha256: str
    size: int
    scale: float = 1.0
    architecture: str = ""
    base_model: str = ""  # what the adapter says it was made for
    rank: int = 0
    source: str = ""  # where it came from: the file added, "distilled from memory", a cube
    added_at: float = 0.0
    trained_at: float | None = None  # distilled: when the memory it learned was read
    new_chats: bool = False  # on in every chat that has made no choice of its own

    @classmethod
    def from_dict(cls, data: dict) -> AdapterRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class _State:
    adapters: list[AdapterRecord] = field(default_factory=list)
    chats: dict[str, list[str]] = field(default_factory=dict)  # chat id -> adapter names (its own choice)


class AdapterRegistry:
    """The adapters folder and its registry file (read fresh at every call: the CLI, the app's
    threads and a distill may each change it; writes are atomic and serialised in-process)."""

    _lock = threading.RLock()

    def __init__(self, data_dir: str | os.PathLike):
        self.folder = Path(data_dir) / ADAPTERS_DIR
        self.file = self.folder / REGISTRY_FILE

    # -- reading ------------------------------------------------------------------------
    def _load(self) -> _State:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return _State()
        except (OSError, ValueError) as exc:
            log.warning("the adapter registry %s is unreadable (%s); starting an empty one", self.file, exc)
            return _State()
        adapters = [AdapterRecord.from_dict(a) for a in data.get("adapters", []) if isinstance(a, dict)]
        chats = {str(k): [str(n) for n in v] for k, v in dict(data.get("chats", {})).items() if isinstance(v, list)}
        return _State(adapters, chats)

    def _save(self, state: _State) -> None:
        ensure_private_dir(self.folder)
        data = {"version": 1, "adapters": [asdict(a) for a in state.adapters], "chats": state.chats}
        tmp = self.file.with_name(self.file.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.file)

    def records(self) -> list[AdapterRecord]:
        return self._load().adapters

    def get(self, name: str) -> AdapterRecord:
        for record in self.records():
            if record.name == name:
                return record
        raise AdapterRegistryError(f"no adapter named {name!r} (see `mnemo memory adapters list`)")

    def path(self, record: AdapterRecord) -> Path:
        return self.folder / Path(record.file).name  # a name from the file, never a path it gives

    def chosen(self, conversation_id: int | None) -> tuple[list[AdapterRecord], bool]:
        """The adapters a chat uses, and whether that is its own choice (False: the new-chat default)."""
        state = self._load()
        by_name = {a.name: a for a in state.adapters}
        own = state.chats.get(str(conversation_id)) if conversation_id is not None else None
        if own is None:
            return [a for a in state.adapters if a.new_chats], False
        return [by_name[n] for n in own if n in by_name], True

    # -- changing -----------------------------------------------------------------------
    def add(
        self,
        file: str | os.PathLike,
        *,
        scale: float = 1.0,
        source: str | None = None,
        name: str | None = None,
        trained_at: float | None = None,
        new_chats: bool = False,
    ) -> AdapterRecord:
        """Copy an adapter file in and list it. AdapterError when the file is no LoRA adapter."""
        src = Path(file).expanduser()
        info = inspect_adapter(src)  # AdapterError: not an adapter, damaged, cut short
        _check_scale(scale)
        with self._lock:
            state = self._load()
            taken = {a.name for a in state.adapters}
            base = _NAME_OK.sub("-", name or src.stem).strip("-.") or "adapter"
            unique = base
            n = 2
            while unique in taken:
                unique, n = f"{base}-{n}", n + 1
            ensure_private_dir(self.folder)
            dest = self.folder / f"{unique}.gguf"
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.copyfile(src, tmp)
            os.chmod(tmp, 0o600)
            os.replace(tmp, dest)
            record = _record(unique, dest, info, scale, source or str(src.resolve()), trained_at, new_chats)
            state.adapters.append(record)
            self._save(state)
            return record

    def remove(self, name: str) -> AdapterRecord:
        with self._lock:
            state = self._load()
            record = next((a for a in state.adapters if a.name == name), None)
            if record is None:
                raise AdapterRegistryError(f"no adapter named {name!r} (see `mnemo memory adapters list`)")
            state.adapters.remove(record)
            for names in state.chats.values():
                while name in names:
                    names.remove(name)
            self._save(state)
            self.path(record).unlink(missing_ok=True)
            return record

    def set_scale(self, name: str, scale: float) -> AdapterRecord:
        _check_scale(scale)
        return self._update(name, scale=float(scale))

    def set_new_chats(self, name: str, on: bool) -> AdapterRecord:
        return self._update(name, new_chats=bool(on))

    def _update(self, name: str, **changes: Any) -> AdapterRecord:
        with self._lock:
            state = self._load()
            for record in state.adapters:
                if record.name == name:
                    for key, value in changes.items():
                        setattr(record, key, value)
                    self._save(state)
                    return record
            raise AdapterRegistryError(f"no adapter named {name!r} (see `mnemo memory adapters list`)")

    def use(self, conversation_id: int, names: Iterable[str]) -> list[str]:
        """Make `names` (in order) the chat's own choice of adapters ([]: none), kept from now on."""
        names = list(dict.fromkeys(names))
        with self._lock:
            state = self._load()
            known = {a.name for a in state.adapters}
            unknown = [n for n in names if n not in known]
            if unknown:
                raise AdapterRegistryError(f"no adapter named {unknown[0]!r} (see `mnemo memory adapters list`)")
            state.chats[str(int(conversation_id))] = names
            self._save(state)
            return names

    def toggle(self, conversation_id: int, name: str, on: bool) -> list[str]:
        """Turn one adapter on or off in a chat (starting from what the chat uses now)."""
        current = [a.name for a in self.chosen(conversation_id)[0]]
        if on and name not in current:
            current.append(name)
        elif not on:
            current = [n for n in current if n != name]
        return self.use(conversation_id, current)


def _check_scale(scale: float) -> None:
    if not isinstance(scale, (int, float)) or not MIN_SCALE <= float(scale) <= MAX_SCALE:
        raise AdapterRegistryError(
            f"scale {scale!r}: give a number from {MIN_SCALE:g} to {MAX_SCALE:g} (1 is as trained)"
        )


def _record(
    name: str,
    dest: Path,
    info: AdapterInfo,
    scale: float,
    source: str,
    trained_at: float | None,
    new_chats: bool,
) -> AdapterRecord:
    return AdapterRecord(
        name=name,
        file=dest.name,
        sha256=file_digest(dest),
        size=dest.stat().st_size,
        scale=float(scale),
        architecture=info.architecture,
        base_model=info.base_model,
        rank=info.rank,
        source=source,
        added_at=time.time(),
        trained_at=trained_at,
        new_chats=new_chats,
    )


# -- the model ------------------------------------------------------------------------------

_registries: weakref.WeakKeyDictionary[Any, AdapterRegistry] = weakref.WeakKeyDictionary()


@runtime_checkable
class AdaptableModel(Protocol):
    """A chat model that takes LoRA adapters (llama.cpp in-process: models.llama_cpp_backend)."""

    def set_adapters(self, adapters: Sequence[tuple[str | os.PathLike, float]]) -> None: ...


def attach(model: ChatModel, data_dir: str | os.PathLike) -> None:
    """Give a chat model that can take adapters (llama.cpp in-process) the profile's registry."""
    if hasattr(model, "set_adapters"):
        _registries[model] = AdapterRegistry(data_dir)


def fit_problem(registry: AdapterRegistry, record: AdapterRecord, model_path: str | os.PathLike | None) -> str | None:
    """Why this adapter cannot go on the model at `model_path` (None: it can): a missing or changed
    file, or one made for another model. One line."""
    path = registry.path(record)
    if not path.is_file():
        return f"{record.name}: its file is missing from {registry.folder}"
    if path.stat().st_size != record.size:
        return f"{record.name}: its file changed since it was added"
    if model_path is None:
        return None
    try:
        check_fits(path, Path(model_path))
    except AdapterError as exc:
        return str(exc)
    return None


def apply_for_chat(model: ChatModel, conversation_id: int | None, store: MemoryStore | None = None) -> list[str]:
    """Put the chat's adapters on `model` (those that fit it); returns a line for each left off.
    `store`: the memory, to delete first the adapters trained from memory since forgotten."""
    registry = _registries.get(model)
    if registry is None or not isinstance(model, AdaptableModel):  # registered: it takes adapters (`attach`)
        return []
    if store is not None and registry.file.exists():
        drop_forgotten(registry, store.db.purge.spans())
    try:
        records, _own = registry.chosen(conversation_id)
    except OSError as exc:
        log.warning("adapter registry unreadable: %s", exc)
        return []
    specs: list[tuple[str, float]] = []
    problems: list[str] = []
    for record in records:
        problem = fit_problem(registry, record, getattr(model, "model_path", None))
        if problem:
            problems.append(problem)
        else:
            specs.append((str(registry.path(record)), record.scale))
    try:
        model.set_adapters(specs)
    except AdapterError as exc:
        problems.append(str(exc))
        model.set_adapters([])
    for line in problems:
        log.warning("adapter left off: %s", line)
    return problems


def drop_forgotten(registry: AdapterRegistry, spans: Sequence[tuple[float, float]]) -> list[str]:
    """Delete the adapters trained while memory since forgotten existed; returns their names."""
    gone = []
    for record in registry.records():
        at = record.trained_at
        if at is not None and any(start <= at <= end for start, end in spans):
            registry.remove(record.name)
            gone.append(record.name)
    return gone


@dataclass(frozen=True)
class AdapterRow:
    """One adapter as the inspector, Settings and `mnemo memory adapters list` show it."""

    name: str
    base_model: str
    size: int
    scale: float
    source: str
    new_chats: bool
    in_chat: bool  # on in the chat asked about
    problem: str | None  # why it cannot go on the current model (None: it can)


def rows(
    registry: AdapterRegistry,
    model_path: str | os.PathLike | None,
    conversation_id: int | None = None,
    store: MemoryStore | None = None,
) -> list[AdapterRow]:
    """Every adapter, whether the chat uses it and whether it fits the model (`store`: to drop the
    adapters holding forgotten memory first)."""
    if store is not None:
        drop_forgotten(registry, store.db.purge.spans())
    on = {a.name for a in registry.chosen(conversation_id)[0]}
    out = []
    for r in registry.records():
        base = r.base_model or (f"a {r.architecture} model" if r.architecture else "?")
        problem = fit_problem(registry, r, model_path)
        out.append(AdapterRow(r.name, base, r.size, r.scale, r.source, r.new_chats, r.name in on, problem))
    return out


def current_model_path(settings: Settings) -> Path | None:
    """The GGUF file the chat settings load (None: an HTTP server, which takes no adapters here)."""
    if getattr(settings.chat, "backend", "") == "openai":
        return None
    if settings.chat.gguf_path:
        return Path(settings.chat.gguf_path).expanduser()
    from models.errors import ModelFileError
    from models.resolve import default_gguf_path

    try:
        return default_gguf_path()
    except ModelFileError:  # the bundled model's package is missing: nothing to check against
        return None


DISTILLED = "distilled from memory"


def keep_distilled(registry: AdapterRegistry, file: str | os.PathLike, trained_at: float, pairs: int) -> AdapterRecord:
    """Add an adapter `mnemo memory distill` trained, on in new chats, in place of the ones earlier
    distills made for the same model (a distill is the memory as it is now)."""
    record = registry.add(
        file,
        source=f"{DISTILLED} ({pairs} questions and answers, {time.strftime('%Y-%m-%d %H:%M', time.localtime(trained_at))})",
        name="memory-" + time.strftime("%Y%m%d-%H%M", time.localtime(trained_at)),
        trained_at=trained_at,
        new_chats=True,
    )
    for old in registry.records():
        if old.name != record.name and old.source.startswith(DISTILLED) and old.base_model == record.base_model:
            registry.remove(old.name)
    return record


# -- memory cubes (docs/memcube.md, parametric/) -----------------------------------------------

CUBE_INDEX = "parametric/adapters.json"
MAX_CUBE_INDEX_BYTES = 256 * 1024


def cube_extras(registry: AdapterRegistry, names: Sequence[str] | None = None) -> list[tuple[str, bytes | Path]]:
    """The cube members that carry these adapters (default: all): each file as
    parametric/adapter-N.gguf, and parametric/adapters.json saying what each is."""
    chosen = [r for r in registry.records() if names is None or r.name in names]
    index = []
    extras: list[tuple[str, bytes | Path]] = []
    for n, record in enumerate(chosen, 1):
        path = registry.path(record)
        if not path.is_file():
            continue
        member = f"parametric/adapter-{n}.gguf"
        extras.append((member, path))
        index.append(
            {
                "member": member,
                "name": record.name,
                "scale": record.scale,
                "base_model": record.base_model,
                "source": record.source,
                "sha256": record.sha256,
                "trained_at": record.trained_at,
            }
        )
    if extras:
        extras.append((CUBE_INDEX, json.dumps({"adapters": index}, indent=1).encode("utf-8")))
    return extras


def adapters_from_cube(
    registry: AdapterRegistry, cube_path: str | os.PathLike
) -> tuple[list[AdapterRecord], list[str]]:
    """Add the adapters a cube carries (those not held already, by checksum); returns them and a line
    for each left out. The cube is untrusted: members are read through the cube reader's size caps and
    checksums into files Mnemo names, and each must then pass `inspect_adapter` like any file added."""
    from memory_core.cubes import CubeError
    from memory_core.cubes.reader import CubeReader
    from models.lora import MAX_ADAPTER_BYTES

    added: list[AdapterRecord] = []
    problems: list[str] = []
    held = {r.sha256 for r in registry.records()}
    with CubeReader(Path(cube_path)) as cube, tempfile.TemporaryDirectory(prefix="mnemo-cube-adapters-") as tmp:
        members = cube.optional_members("parametric/")
        if CUBE_INDEX not in members:
            return [], []
        index_file = Path(tmp) / "index.json"
        cube.extract(CUBE_INDEX, index_file, MAX_CUBE_INDEX_BYTES)
        try:
            entries = json.loads(index_file.read_text(encoding="utf-8")).get("adapters", [])
        except (ValueError, AttributeError) as exc:
            return [], [f"{cube.name}: its adapter list is not readable ({exc})"]
        for entry in entries if isinstance(entries, list) else []:
            member = entry.get("member") if isinstance(entry, dict) else None
            if member not in members or not str(member).endswith(".gguf"):
                problems.append(f"{cube.name}: an adapter entry names no adapter member of the cube")
                continue
            if entry.get("sha256") in held:
                continue
            dest = Path(tmp) / "adapter.gguf"
            try:
                cube.extract(member, dest, MAX_ADAPTER_BYTES)
                scale = entry.get("scale", 1.0)
                record = registry.add(
                    dest,
                    scale=float(scale) if isinstance(scale, (int, float)) and MIN_SCALE <= scale <= MAX_SCALE else 1.0,
                    name=str(entry.get("name") or "adapter")[:64],
                    source=f"cube {cube.name}",
                )
            except (CubeError, AdapterError) as exc:
                problems.append(str(exc))
                continue
            finally:
                dest.unlink(missing_ok=True)
            held.add(record.sha256)
            added.append(record)
    return added, problems
