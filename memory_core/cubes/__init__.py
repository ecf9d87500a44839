"""Memory cubes (docs/memcube.md): a portable file of memory (pages, segments, the persona with every
version and source, pins, and the same model's vectors) that another memory imports, merges and can undo.
Qt-free and model-free like the rest of memory_core; the store offers it as `store.cubes`."""

from .component import Cubes
from .export import CubeExport, CubeSelection
from .format import FORMAT_VERSION, SUFFIX, CubeCancelled, CubeError, CubeLimits
from .records import Conflict, ImportCounts, ImportPlan, ImportRecord, ItemOrigin, UndoReport

__all__ = [
    "FORMAT_VERSION",
    "SUFFIX",
    "Conflict",
    "CubeCancelled",
    "CubeError",
    "CubeExport",
    "CubeLimits",
    "CubeSelection",
    "Cubes",
    "ImportCounts",
    "ImportPlan",
    "ImportRecord",
    "ItemOrigin",
    "UndoReport",
]
