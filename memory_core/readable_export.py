"""Export everything the assistant remembers to a file the user owns.

Two formats, both written through the store's public read API (so they show exactly what the
inspector shows) and both atomic: the file appears complete or not at all, and a failure (a
full disk, a cancel) leaves any earlier export with that name untouched.

- JSON (`export_json`): complete and machine-readable — persona traits and knowledge with their
  version history and provenance, every segment with its heat, every page (all tiers) with its
  chain and segment links, and the conversations the pages came from. Embeddings are left out:
  they are derived data, recomputed from the text by whichever embedding model reads it.
  Streamed item by item, so a 100k-page memory never sits in RAM as one document.
- Markdown (`export_markdown`): a readable account of the persona, the knowledge and the
  segments (hottest first), for a person rather than a program.

Progress: `on_progress(done, total)` is called as items are written; if it raises, the export
stops and the partial file is removed (that is how a caller cancels).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .conversations import Conversations
    from .pages.component import Pages
    from .pages.embedding import Embedding
    from .persona.component import Persona
    from .segments.component import Segments
    from .types import Conversation, Knowledge, MemoryParams, Page, Segment, Trait

FORMAT = "mnemo-memory-export"
VERSION = 1
BATCH = 1000

Progress = Callable[[int, int], None]
_Item = TypeVar("_Item", "Page", "Segment")


class MemoryStore(Protocol):
    """What an export reads of memory_core.MemoryStore (named here: memory_core.store imports this module)."""

    @property
    def conversations(self) -> Conversations: ...
    @property
    def persona(self) -> Persona: ...
    @property
    def segments(self) -> Segments: ...
    @property
    def pages(self) -> Pages: ...
    @property
    def embedding(self) -> Embedding: ...
    @property
    def params(self) -> MemoryParams: ...
    @property
    def dim(self) -> int: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    def is_paused(self) -> bool: ...
    def stats(self) -> dict: ...


@dataclasses.dataclass
class ExportResult:
    path: Path
    pages: int
    segments: int
    traits: int
    knowledge: int
    bytes: int


@contextlib.contextmanager
def atomic_file(path: Path, *, binary: bool = False) -> Iterator[Any]:
    """Write to a temporary file beside `path` (text, or bytes with `binary`); on success it replaces
    `path`, on any failure (a full disk, a cancel) it is removed and `path` keeps what it had."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    tmp = Path(tmp_name)
    fh = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    try:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        os.replace(tmp, path)
    except BaseException:
        try:
            fh.close()
        except OSError:
            pass
        tmp.unlink(missing_ok=True)
        raise


def _walk(list_fn: Callable[..., list[_Item]]) -> Iterator[_Item]:
    """Every item of a `list_pages`/`list_segments`-style call, by id, in batches (keyset paging)."""
    after = 0
    while True:
        batch = list_fn(order_by="id", descending=False, limit=BATCH, after_id=after)
        yield from batch
        if len(batch) < BATCH:
            return
        after = batch[-1].id


def _conversations(store: MemoryStore) -> list[Conversation]:
    out: list[Conversation] = []
    offset = 0
    while True:
        batch = store.conversations.list_conversations(limit=BATCH, offset=offset)
        out += batch
        if len(batch) < BATCH:
            return out
        offset += len(batch)


def _with_versions(store: MemoryStore, kind: str, item: Trait | Knowledge) -> dict:
    d = dataclasses.asdict(item)
    d["versions"] = [dataclasses.asdict(v) for v in store.persona.item_versions(kind, item.id)]
    return d


def _iso(ts: float | None) -> str | None:
    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")


def export_json(store: MemoryStore, path: str | Path, *, on_progress: Progress | None = None) -> ExportResult:
    """Write the whole memory as one JSON document (see the module docstring)."""
    path = Path(path)
    stats = store.stats()
    traits = store.persona.list_traits(include_archived=True, limit=1_000_000)
    knowledge = store.persona.list_knowledge(include_archived=True, limit=1_000_000)
    n_pages, n_segs = store.pages.count_pages(), store.segments.count_segments()
    total = len(traits) + len(knowledge) + n_segs + n_pages
    done = 0

    def tick(k: int = 1) -> None:
        nonlocal done
        done += k
        if on_progress is not None and (done % 500 == 0 or done == total):
            on_progress(done, total)

    with atomic_file(path) as fh:
        header = {
            "format": FORMAT,
            "version": VERSION,
            "exported_at": _iso(store.clock()),
            "embedding_model": store.embedding.model_id,
            "embedding_dim": store.dim,
            "paused": store.is_paused(),
            "counts": {"pages": n_pages, "segments": n_segs, "traits": len(traits), "knowledge": len(knowledge)},
            "tiers": {"pages": stats["pages"], "segments": stats["segments"]},
            "params": dataclasses.asdict(store.params),
        }
        fh.write(json.dumps(header, ensure_ascii=False)[:-1])  # the header's fields open the document
        fh.write(',\n"conversations": ')
        fh.write(json.dumps([dataclasses.asdict(c) for c in _conversations(store)], ensure_ascii=False))
        persona: tuple[tuple[str, str, Sequence[Trait | Knowledge]], ...] = (
            ("traits", "trait", traits),
            ("knowledge", "knowledge", knowledge),
        )
        for name, kind, items in persona:
            fh.write(f',\n"{name}": [')
            for i, item in enumerate(items):
                fh.write(("," if i else "") + "\n" + json.dumps(_with_versions(store, kind, item), ensure_ascii=False))
                tick()
            fh.write("]")
        walks: tuple[tuple[str, Iterator[Segment | Page]], ...] = (
            ("segments", _walk(store.segments.list_segments)),
            ("pages", _walk(store.pages.list_pages)),
        )
        for name, rows in walks:
            fh.write(f',\n"{name}": [')
            for i, row in enumerate(rows):
                fh.write(("," if i else "") + "\n" + json.dumps(dataclasses.asdict(row), ensure_ascii=False))
                tick()
            fh.write("]")
        fh.write("\n}\n")
    if on_progress is not None:
        on_progress(total, total)
    return ExportResult(path, n_pages, n_segs, len(traits), len(knowledge), path.stat().st_size)


def _md_escape(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def export_markdown(
    store: MemoryStore, path: str | Path, *, on_progress: Progress | None = None, max_segments: int | None = None
) -> ExportResult:
    """Write a readable account of the memory: persona, knowledge, then segments, hottest first."""
    path = Path(path)
    traits = store.persona.list_traits(limit=1_000_000)
    knowledge = store.persona.list_knowledge(limit=1_000_000)
    n_segs = store.segments.count_segments()
    limit = n_segs if max_segments is None else min(n_segs, max_segments)
    total = len(traits) + len(knowledge) + limit
    done = 0
    with atomic_file(path) as fh:
        w = fh.write
        w(
            f"# What the assistant remembers\n\nExported {_iso(store.clock())} · {store.pages.count_pages():,} pages · "
            f"{n_segs:,} segments · {len(traits)} traits · {len(knowledge)} facts\n\n"
        )
        w("## Persona\n\n")
        if not traits:
            w("_No traits yet._\n\n")
        by_dim: dict[str, list] = {}
        for t in traits:
            by_dim.setdefault(t.dimension, []).append(t)
        for dim in sorted(by_dim):
            w(f"### {dim}\n\n")
            for t in by_dim[dim]:
                src = f" (from pages {', '.join(map(str, t.source_page_ids))})" if t.source_page_ids else ""
                w(f"- {_md_escape(t.value)} — confidence {t.confidence:.2f}, version {t.version}{src}\n")
                done += 1
            w("\n")
        for owner, title in (("user", "What the user told"), ("assistant", "What the assistant said")):
            items = [k for k in knowledge if k.owner == owner]
            w(f"## {title}\n\n")
            if not items:
                w("_Nothing yet._\n\n")
            for k in items:
                w(f"- {_md_escape(k.text)}{' 📌' if k.pinned else ''}\n")
                done += 1
            w("\n")
        w("## Segments (hottest first)\n\n| id | tier | heat | pages | visits | summary |\n|---|---|---|---|---|---|\n")
        offset = 0
        while offset < limit:
            batch = store.segments.list_segments(
                order_by="heat", descending=True, limit=min(BATCH, limit - offset), offset=offset
            )
            if not batch:
                break
            for s in batch:
                w(f"| {s.id} | {s.tier} | {s.heat:.2f} | {s.page_count} | {s.n_visit} | {_md_escape(s.summary)} |\n")
            offset += len(batch)
            done += len(batch)
            if on_progress is not None:
                on_progress(done, total)
    if on_progress is not None:
        on_progress(total, total)
    return ExportResult(path, store.pages.count_pages(), n_segs, len(traits), len(knowledge), path.stat().st_size)


def export_memory(
    store: MemoryStore, path: str | Path, *, fmt: str | None = None, on_progress: Progress | None = None
) -> ExportResult:
    """Export in the format named by `fmt` ("json" or "markdown"), else by the file's suffix."""
    fmt = (fmt or ("markdown" if str(path).lower().endswith((".md", ".markdown")) else "json")).lower()
    if fmt in ("md", "markdown"):
        return export_markdown(store, path, on_progress=on_progress)
    if fmt != "json":
        raise ValueError(f"unknown export format {fmt!r}: use json or markdown")
    return export_json(store, path, on_progress=on_progress)
