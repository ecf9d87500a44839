"""The memory cube format (docs/memcube.md): its name and version, its members, the limits a reader holds an
untrusted cube to, the JSON Schema its records follow (resources/memcube.schema.json) and how vectors are
written in it."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
import numpy as np

FORMAT = "mnemo-memcube"
# the newest format this Mnemo writes and reads; it reads every older one (2: facts about other people,
# owner 'person' and their subject; format 1 is format 2 without them, so one schema reads both)
FORMAT_VERSION = 2
SUFFIX = ".mnemocube"
MANIFEST = "manifest.json"

# The JSON Lines members, in the order a reader checks them (a record only names records before it:
# pages their chats, chains and segments; the persona its source pages), each with its schema's name.
RECORD_MEMBERS: tuple[tuple[str, str], ...] = (
    ("chats.jsonl", "chat"),
    ("chains.jsonl", "chain"),
    ("segments.jsonl", "segment"),
    ("pages.jsonl", "page"),
    ("traits.jsonl", "trait"),
    ("facts.jsonl", "fact"),
    ("events.jsonl", "event"),
)
# Present when the cube carries vectors (manifest embedding.vectors): an import by the same embedding
# model needs no re-embedding.
VECTOR_MEMBERS: tuple[tuple[str, str], ...] = (
    ("vectors/pages.jsonl", "page_vector"),
    ("vectors/segments.jsonl", "segment_vector"),
    ("vectors/persona.jsonl", "persona_vector"),
)
# Reserved for the other memory types (activation memory: prompt KV caches; parametric memory: adapters).
# Format 1 writes none; a reader checks their checksums and leaves them unread.
OPTIONAL_PREFIXES = ("activation/", "parametric/")
COUNT_OF = {
    "chats.jsonl": "chats",
    "chains.jsonl": "chains",
    "segments.jsonl": "segments",
    "pages.jsonl": "pages",
    "traits.jsonl": "traits",
    "facts.jsonl": "facts",
    "events.jsonl": "events",
}


class CubeError(ValueError):
    """A cube that cannot be read or imported, said in one line; nothing was changed."""


class CubeCancelled(Exception):
    """The user cancelled an export or an import."""


@dataclass(frozen=True)
class CubeLimits:
    """What an untrusted cube may hold. A member (or the whole cube) bigger than these, or compressed more
    than `max_ratio` to 1, is refused from its zip header before anything is inflated, and again while it
    is read, so a header that lies inflates no more than the limit."""

    max_file_bytes: int = 8 * 1024**3
    max_member_bytes: int = 4 * 1024**3
    max_total_bytes: int = 8 * 1024**3
    max_ratio: float = 100.0
    max_members: int = 64
    max_manifest_bytes: int = 1024**2
    max_line_bytes: int = 8 * 1024**2  # one record: a page of two 1,000,000-character sides fits
    max_meta_bytes: int = 64 * 1024  # a page's meta
    max_token_rows: int = 2048  # word rows of one page


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of format FORMAT_VERSION (shipped in resources/, where the docs point)."""
    text = resources.files("resources").joinpath("memcube.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=32)
def validator(definition: str) -> jsonschema.protocols.Validator:
    """A validator of one record type of the schema ("manifest", "page", ...)."""
    root = schema()
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": root["$defs"]})


def schema_problem(definition: str, record: Any) -> str | None:
    """Why `record` is not a valid `definition`, in one short line; None when it is."""
    error = jsonschema.exceptions.best_match(validator(definition).iter_errors(record))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    if error.validator in ("maxLength", "maxItems", "maxProperties", "maximum"):
        message = f"larger than the format allows ({error.validator} {error.validator_value}): an oversized item"
    elif error.validator == "type":
        message = f"should be of type {error.validator_value}"
    elif error.validator in ("enum", "const"):
        message = f"should be one of {error.validator_value!r}" if error.validator == "enum" else "not what it must be"
    else:
        message = " ".join(error.message.split())
        if len(message) > 160:
            message = message[:157] + "..."
    return f"{where}: {message}" if where else message


def encode_vector(vec: np.ndarray) -> str:
    """A vector as the cube writes it: float32, little-endian, base64."""
    return base64.b64encode(np.ascontiguousarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode_bytes(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise CubeError(f"{what}: not base64") from None


def decode_vector(text: str, dim: int, what: str) -> np.ndarray:
    """A cube vector back as float32, refused unless it has `dim` finite values, not all zero."""
    raw = decode_bytes(text, what)
    if len(raw) != 4 * dim:
        raise CubeError(f"{what}: a vector of {len(raw) // 4} values where the cube says {dim}")
    vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vec)) or not np.any(vec):
        raise CubeError(f"{what}: a vector with values that are not finite, or all zero")
    return vec


def content_key(kind: str, *parts: str) -> str:
    """How an item is recognised in a later import whatever its ids: its kind and its words, lower-cased
    with runs of space made one."""
    return kind + ":" + "|".join(" ".join(p.lower().split()) for p in parts)
