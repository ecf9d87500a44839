"""`KVCacheStore`: saved model states of prompt beginnings, on disk, for the next start.

A chat model that keeps its attention cache (llama.cpp's KV cache) can skip the prompt it has
already processed; after a restart that cache is gone and the first reply waits for the whole
prompt again. This store keeps, per slot (one chat's stable prompt beginning, or the one every new
chat starts with), the backend's saved state of a token prefix, so a later process can load it and
process only the rest. It knows nothing of the model: the backend hands it an opaque key (what
makes a state valid: the model file, the load settings that shape the cache), the prefix's token
ids and the state bytes.

One file per (key, slot), written to a temp file in the folder and renamed over the old one, so a
reader sees a whole file or none; owner-only (0600, what `tempfile.mkstemp` makes). A file holds a
header (JSON: key, slot, token count and digest, when it was built, the payload's length and CRC),
the token ids and the state. A state is handed out only when the header's key is the caller's and
the stored tokens are exactly the caller's prompt beginning; a file that cannot be read whole (cut
short by a full disk, flipped bits, another format) is deleted, never loaded. The folder is the
index: nothing to get out of step with the files. `stats.json` beside them counts hits and misses
(lost updates between two processes only lose a count). Past `cap_bytes` the least recently used
files go (a hit touches its file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import tempfile
import time
import zlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAGIC = b"MNEMO-KV"
FORMAT = 1
SUFFIX = ".kv"
STATS_FILE = "stats.json"
HEADER_MAX = 64 * 1024  # a header is a few hundred bytes: more is not one of ours
STALE_TEMP_S = 600.0  # a temp file this old was left by a process that died while writing
_PREFIX = struct.Struct("<8sI")  # magic, header length


def key_digest(key: Mapping[str, Any]) -> str:
    """A short, stable name for a key (the same dict gives the same digest in every process)."""
    return hashlib.blake2b(json.dumps(key, sort_keys=True).encode(), digest_size=16).hexdigest()


def _token_bytes(tokens: Sequence[int]) -> bytes:
    arr = array("i", tokens)  # int32 on every platform Python runs on
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def tokens_digest(tokens: Sequence[int]) -> str:
    return hashlib.blake2b(_token_bytes(tokens), digest_size=16).hexdigest()


@dataclass(frozen=True)
class KVEntry:
    """One saved state, as its header describes it."""

    path: Path
    slot: str
    key: dict
    key_digest: str
    n_tokens: int
    tokens_digest: str
    built_at: float
    last_used: float  # the file's mtime: when it was written or last loaded
    size: int  # bytes on disk
    payload_len: int
    payload_crc: int
    header_len: int

    @property
    def payload_offset(self) -> int:
        return _PREFIX.size + self.header_len + 4 * self.n_tokens


@dataclass
class KVStats:
    """Hits (a state loaded) and misses (a prompt processed that no saved state covered), and per
    file the hits and when it last had one."""

    hits: int = 0
    misses: int = 0
    entries: dict[str, dict[str, float]] = field(default_factory=dict)  # file name -> {"hits", "last_hit"}

    def of(self, entry: KVEntry) -> tuple[int, float | None]:
        got = self.entries.get(entry.path.name) or {}
        return int(got.get("hits", 0)), got.get("last_hit")


class KVCacheStore:
    def __init__(self, folder: str | os.PathLike, cap_bytes: int):
        self.folder = Path(folder)
        self.cap_bytes = int(cap_bytes)

    # -- reading -------------------------------------------------------------------
    def entries(self) -> list[KVEntry]:
        """Every readable entry, newest use first. A file whose header is not whole is deleted."""
        found = []
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        for name in names:
            path = self.folder / name
            if name.endswith(SUFFIX):
                entry = self._read_header(path)
                if entry is not None:
                    found.append(entry)
            elif name.endswith(".tmp"):
                self._drop_stale_temp(path)
        return sorted(found, key=lambda e: e.last_used, reverse=True)

    def find(self, key: Mapping[str, Any], tokens: Sequence[int], *, longer_than: int = 0) -> KVEntry | None:
        """The longest entry saved under `key` whose tokens begin `tokens` and are more than
        `longer_than`, by the header's digest (`read` compares the tokens themselves)."""
        digest = key_digest(key)
        best: KVEntry | None = None
        digests: dict[int, str] = {}
        for entry in self.entries():
            if entry.key_digest != digest or entry.key != dict(key):
                continue
            n = entry.n_tokens
            if n <= longer_than or n > len(tokens) or (best is not None and n <= best.n_tokens):
                continue
            if n not in digests:
                digests[n] = tokens_digest(tokens[:n])
            if digests[n] == entry.tokens_digest:
                best = entry
        return best

    def has(self, key: Mapping[str, Any], slot: str, tokens: Sequence[int]) -> bool:
        """Whether `slot` already holds exactly these tokens under `key` (nothing to save again)."""
        entry = self._read_header(self._path(key_digest(key), slot))
        return (
            entry is not None
            and entry.key == dict(key)
            and entry.n_tokens == len(tokens)
            and entry.tokens_digest == tokens_digest(tokens)
        )

    def read(self, entry: KVEntry, tokens: Sequence[int]) -> bytearray | None:
        """The state of `entry`, checked whole: the stored tokens are `tokens[:n]`, the payload is as
        long as the header says and its CRC matches. Anything else deletes the file and gives None."""
        try:
            with open(entry.path, "rb") as f:
                f.seek(_PREFIX.size + entry.header_len)
                stored = f.read(4 * entry.n_tokens)
                if stored != _token_bytes(tokens[: entry.n_tokens]):
                    return None  # another prompt (a digest collision, or replaced meanwhile): not an error
                payload = bytearray(entry.payload_len)
                got = f.readinto(payload)
                extra = f.read(1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("a saved model state could not be read (%s): %s", entry.path.name, exc)
            return None
        if got != entry.payload_len or extra or zlib.crc32(payload) != entry.payload_crc:
            self._discard(entry.path, "its data is cut short or damaged")
            return None
        return payload

    def stats(self) -> KVStats:
        try:
            raw = json.loads((self.folder / STATS_FILE).read_text(encoding="utf-8"))
            return KVStats(int(raw.get("hits", 0)), int(raw.get("misses", 0)), dict(raw.get("entries") or {}))
        except (OSError, ValueError, TypeError, AttributeError):
            return KVStats()

    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries())

    # -- writing -------------------------------------------------------------------
    def put(self, key: Mapping[str, Any], slot: str, tokens: Sequence[int], payload) -> KVEntry | None:
        """Save `payload` (a bytes-like state) of the prefix `tokens` as `slot`'s entry under `key`,
        replacing the slot's old one; then the least recently used entries go until the folder fits
        the cap. None when it cannot be written (a full disk: the old entry stays) or is larger than
        the cap by itself."""
        view = memoryview(payload).cast("B")
        digest = key_digest(key)
        token_bytes = _token_bytes(tokens)
        header = json.dumps(
            {
                "format": FORMAT,
                "key": dict(key),
                "key_digest": digest,
                "slot": slot,
                "n_tokens": len(tokens),
                "tokens_digest": tokens_digest(tokens),
                "built_at": time.time(),
                "payload_len": len(view),
                "payload_crc": zlib.crc32(view),
            },
            sort_keys=True,
        ).encode()
        size = _PREFIX.size + len(header) + len(token_bytes) + len(view)
        if size > self.cap_bytes:
            return None
        path = self._path(digest, slot)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        except OSError as exc:
            log.warning("a model state could not be saved: %s", exc)
            return None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_PREFIX.pack(MAGIC, len(header)))
                f.write(header)
                f.write(token_bytes)
                f.write(view)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("a model state could not be saved: %s", exc)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return None
        self._forget_hits(path.name)
        self.evict(keep=path)
        return self._read_header(path)

    def touch(self, entry: KVEntry) -> None:
        """`entry` was loaded: it is the most recently used, and a hit."""
        now = time.time()
        try:
            os.utime(entry.path, (now, now))
        except OSError:
            pass
        stats = self.stats()
        got = stats.entries.setdefault(entry.path.name, {})
        got["hits"] = int(got.get("hits", 0)) + 1
        got["last_hit"] = now
        stats.hits += 1
        self._save_stats(stats)

    def miss(self) -> None:
        stats = self.stats()
        stats.misses += 1
        self._save_stats(stats)

    def evict(self, keep: Path | None = None) -> list[KVEntry]:
        """Delete the least recently used entries until the rest fit the cap; returns what went."""
        entries = self.entries()
        total = sum(e.size for e in entries)
        gone = []
        for entry in reversed(entries):  # oldest use first
            if total <= self.cap_bytes:
                break
            if keep is not None and entry.path == keep:
                continue
            if self.remove(entry):
                total -= entry.size
                gone.append(entry)
        return gone

    def remove(self, entry: KVEntry) -> bool:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("a saved model state could not be deleted (%s): %s", entry.path.name, exc)
            return False
        self._forget_hits(entry.path.name)
        return True

    def clear(self) -> tuple[int, int]:
        """Delete every entry and the counts; returns (entries, bytes) deleted."""
        n = size = 0
        for entry in self.entries():
            if self.remove(entry):
                n, size = n + 1, size + entry.size
        try:
            os.unlink(self.folder / STATS_FILE)
        except OSError:
            pass
        return n, size

    # -- internals -----------------------------------------------------------------
    def _path(self, digest: str, slot: str) -> Path:
        name = hashlib.blake2b(f"{digest}\0{slot}".encode(), digest_size=12).hexdigest()
        return self.folder / f"{name}{SUFFIX}"

    def _read_header(self, path: Path) -> KVEntry | None:
        """The header of `path`; None when there is no such file, and the file deleted when it is not
        a whole entry of this format (its size must be exactly what the header says)."""
        try:
            with open(path, "rb") as f:
                info = os.fstat(f.fileno())
                prefix = f.read(_PREFIX.size)
                magic, header_len = _PREFIX.unpack(prefix) if len(prefix) == _PREFIX.size else (b"", 0)
                raw = f.read(header_len) if magic == MAGIC and 0 < header_len <= HEADER_MAX else b""
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("a saved model state could not be read (%s): %s", path.name, exc)
            return None
        if not raw:  # (the file is closed before it is deleted: Windows deletes no open file)
            self._discard(path, "it is cut short or not a saved state of this format")
            return None
        try:
            head = json.loads(raw.decode("utf-8"))
            entry = KVEntry(
                path=path,
                slot=str(head["slot"]),
                key=dict(head["key"]),
                key_digest=str(head["key_digest"]),
                n_tokens=int(head["n_tokens"]),
                tokens_digest=str(head["tokens_digest"]),
                built_at=float(head["built_at"]),
                last_used=info.st_mtime,
                size=info.st_size,
                payload_len=int(head["payload_len"]),
                payload_crc=int(head["payload_crc"]),
                header_len=header_len,
            )
            ok = head.get("format") == FORMAT and entry.n_tokens > 0 and entry.payload_len > 0
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok or entry.payload_offset + entry.payload_len != info.st_size:
            self._discard(path, "its header is damaged, or the file is cut short")
            return None
        return entry

    def _discard(self, path: Path, why: str) -> None:
        log.warning("a saved model state was deleted unread (%s): %s", path.name, why)
        try:
            os.unlink(path)
        except OSError:
            pass
        self._forget_hits(path.name)
        return None

    def _drop_stale_temp(self, path: Path) -> None:
        try:
            if time.time() - path.stat().st_mtime > STALE_TEMP_S:
                os.unlink(path)
        except OSError:
            pass

    def _forget_hits(self, name: str) -> None:
        stats = self.stats()
        if stats.entries.pop(name, None) is not None:
            self._save_stats(stats)

    def _save_stats(self, stats: KVStats) -> None:
        data = json.dumps({"hits": stats.hits, "misses": stats.misses, "entries": stats.entries}).encode()
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.folder / STATS_FILE)
        except OSError as exc:
            log.info("the saved-state counts could not be written: %s", exc)
