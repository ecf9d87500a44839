"""Mnemo's memory engine: SQLite tiers (STM -> MTM -> archive), heat, persona, hybrid retrieval.

Qt-free and model-free: it receives an embedding function and, optionally, a JSON-completion
function (`EmbedFn`, `CompleteJsonFn`) and works without the latter; an embedder that also gives
token vectors (`TokenEmbedFn`) adds word-by-word matching to retrieval.
"""

from .cubes import (
    CubeCancelled,
    CubeError,
    CubeExport,
    CubeLimits,
    CubeSelection,
    ImportPlan,
    ImportRecord,
    ItemOrigin,
    UndoReport,
)
from .storage.purge import read_forgotten_spans
from .storage.schema import check_file, is_storage_full
from .store import MemoryStore
from .types import (
    CompleteJsonFn,
    Conversation,
    ConversationMemory,
    DamagedDatabaseError,
    EmbeddingMismatchError,
    EmbedFn,
    Event,
    ItemVersion,
    Job,
    Knowledge,
    KnowledgeHit,
    LLMDeferred,
    MemoryParams,
    Message,
    Page,
    PageHit,
    Retrieval,
    RetrievalBudget,
    Segment,
    SideHit,
    StoreClosedError,
    TokenEmbedFn,
    Trait,
    TraitHit,
)

__all__ = [
    "MemoryStore",
    "MemoryParams",
    "RetrievalBudget",
    "Retrieval",
    "PageHit",
    "SideHit",
    "KnowledgeHit",
    "TraitHit",
    "Conversation",
    "ConversationMemory",
    "Message",
    "Page",
    "Segment",
    "Trait",
    "Knowledge",
    "Event",
    "Job",
    "ItemVersion",
    "EmbedFn",
    "TokenEmbedFn",
    "CompleteJsonFn",
    "DamagedDatabaseError",
    "EmbeddingMismatchError",
    "StoreClosedError",
    "LLMDeferred",
    "is_storage_full",
    "check_file",
    "read_forgotten_spans",
    "CubeCancelled",
    "CubeError",
    "CubeExport",
    "CubeLimits",
    "CubeSelection",
    "ImportPlan",
    "ImportRecord",
    "ItemOrigin",
    "UndoReport",
]
