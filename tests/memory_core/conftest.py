"""Fixtures for memory_core tests: a real database file in tmp_path, the real embedder, a test clock."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core import MemoryParams, MemoryStore

T0 = 1_700_000_000.0


class Clock:
    """A settable clock: every mechanic that reads time reads this."""

    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        self.t += dt
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_store(tmp_path, embedder, clock):
    """open_store(**param_overrides) -> MemoryStore on tmp_path/'memory.db' (closed at teardown)."""
    opened: list[MemoryStore] = []

    def _open(path=None, *, llm=None, llm_model_id=None, **params) -> MemoryStore:
        store = MemoryStore.open(
            path or tmp_path / "memory.db",
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(**params),
            llm=llm,
            llm_model_id=llm_model_id,
            clock=clock,
        )
        opened.append(store)
        return store

    yield _open
    for s in opened:
        s.close()


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def basis(dim: int, i: int) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def mix(dim: int, i: int, j: int, cos: float) -> np.ndarray:
    """A unit vector whose cosine with basis(i) is exactly `cos` (the rest along basis(j))."""
    return unit(cos * basis(dim, i) + np.sqrt(max(0.0, 1 - cos * cos)) * basis(dim, j))


@pytest.fixture
def open_tok(tmp_path, embedder, clock):
    """A store on tmp_path/'memory.db' with the real embedder's token vectors (closed at teardown)."""
    opened: list[MemoryStore] = []

    def _open(path=None, *, tokens=True, model_id=None, **params) -> MemoryStore:
        s = MemoryStore.open(
            path or tmp_path / "memory.db",
            embedder.embed,
            embed_model_id=model_id or embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(**params),
            clock=clock,
            embed_tokens=embedder.embed_with_tokens if tokens else None,
        )
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()
