"""How memory_core stores JSON and vectors in SQLite columns (one definition for every module)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def to_json(obj: Any) -> str:
    """Compact, key-sorted JSON: the same value always gives the same text."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def from_json(s: str | None, default: Any) -> Any:
    """Parse a JSON column; empty or unreadable text gives `default`."""
    try:
        return json.loads(s) if s else default
    except ValueError:
        return default


def vec_blob(vec: np.ndarray) -> bytes:
    """A float32 vector as the blob sqlite-vec expects."""
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()


def unit(vec: np.ndarray) -> np.ndarray:
    """`vec` scaled to unit length (a zero vector stays as it is), as float32."""
    n = float(np.linalg.norm(vec))
    return (vec / n).astype(np.float32) if n > 1e-12 else vec.astype(np.float32)
