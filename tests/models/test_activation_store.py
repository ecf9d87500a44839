"""The on-disk store of saved prompt states (models.kv_cache_store): keys, prefixes, damage, the cap."""

from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from models.kv_cache_store import KVCacheStore

KEY = {"model": "/models/a.gguf", "model_size": 10, "n_ctx": 2048}
TOKENS = list(range(1, 201))


def _payload(n: int, seed: int = 7) -> bytes:
    return bytes((seed * 31 + i * 17) % 251 for i in range(n))


def test_a_saved_state_comes_back_for_a_prompt_that_begins_with_its_tokens(tmp_path):
    store = KVCacheStore(tmp_path / "activation", 1 << 20)
    entry = store.put(KEY, "chat:1", TOKENS, _payload(5000))
    assert entry is not None and entry.n_tokens == 200
    prompt = TOKENS + [900, 901, 902]
    found = store.find(KEY, prompt)
    assert found is not None and found.slot == "chat:1"
    assert bytes(store.read(found, prompt)) == _payload(5000)
    assert store.has(KEY, "chat:1", TOKENS)
    assert not store.has(KEY, "chat:1", TOKENS[:-1])
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(entry.path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path / "activation").st_mode) == 0o700


def test_another_key_or_another_prefix_never_matches(tmp_path):
    store = KVCacheStore(tmp_path, 1 << 20)
    store.put(KEY, "chat:1", TOKENS, _payload(100))
    assert store.find({**KEY, "n_ctx": 4096}, TOKENS + [5]) is None
    assert store.find({**KEY, "model": "/models/b.gguf"}, TOKENS + [5]) is None
    changed = [*TOKENS]
    changed[3] = 999  # the persona changed near the start
    assert store.find(KEY, changed + [5]) is None
    assert store.find(KEY, TOKENS[:150]) is None  # a shorter prompt cannot use a longer state
    assert store.find(KEY, TOKENS + [5], longer_than=200) is None  # no gain over what is cached


def test_the_longest_matching_state_wins_and_a_slot_keeps_one(tmp_path):
    store = KVCacheStore(tmp_path, 1 << 20)
    store.put(KEY, "new-chat", TOKENS[:50], _payload(100, 1))
    store.put(KEY, "chat:1", TOKENS[:120], _payload(100, 2))
    assert store.find(KEY, TOKENS).slot == "chat:1"
    store.put(KEY, "chat:1", TOKENS, _payload(100, 3))  # the chat grew: its entry is replaced
    assert sorted((e.slot, e.n_tokens) for e in store.entries()) == [("chat:1", 200), ("new-chat", 50)]
    found = store.find(KEY, TOKENS + [1])
    assert found.n_tokens == 200 and bytes(store.read(found, TOKENS + [1])) == _payload(100, 3)


@pytest.mark.parametrize("cut", [3, 20, -1])
def test_a_truncated_file_is_ignored_and_deleted(tmp_path, cut):
    store = KVCacheStore(tmp_path, 1 << 20)
    entry = store.put(KEY, "chat:1", TOKENS, _payload(3000))
    with open(entry.path, "r+b") as f:
        f.truncate(cut if cut > 0 else entry.size + cut)  # in the prefix, the header, or the state
    assert store.find(KEY, TOKENS) is None
    assert not entry.path.exists()
    assert store.entries() == []


def test_a_damaged_state_is_caught_by_its_checksum_and_deleted(tmp_path):
    store = KVCacheStore(tmp_path, 1 << 20)
    entry = store.put(KEY, "chat:1", TOKENS, _payload(3000))
    with open(entry.path, "r+b") as f:
        f.seek(entry.payload_offset + 1234)
        byte = f.read(1)
        f.seek(entry.payload_offset + 1234)
        f.write(bytes([byte[0] ^ 0x40]))
    found = store.find(KEY, TOKENS)  # the header is whole: found, but its state does not read back
    assert found is not None
    assert store.read(found, TOKENS) is None
    assert not entry.path.exists()


def test_files_that_are_not_entries_are_deleted_and_stale_temp_files_go(tmp_path):
    store = KVCacheStore(tmp_path, 1 << 20)
    (tmp_path / "junk.kv").write_bytes(b"not a state at all")
    (tmp_path / "bad-header.kv").write_bytes(b"MNEMO-KV" + (5).to_bytes(4, "little") + b"{nope")
    stale = tmp_path / ".abc.tmp"
    stale.write_bytes(b"half written")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = tmp_path / ".def.tmp"  # another process may be writing it now
    fresh.write_bytes(b"being written")
    assert store.entries() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".def.tmp"]


def test_past_the_cap_the_least_recently_used_goes(tmp_path):
    one = KVCacheStore(tmp_path, 1 << 20).put(KEY, "chat:0", TOKENS, _payload(10_000)).size
    for p in tmp_path.iterdir():
        p.unlink()
    store = KVCacheStore(tmp_path, 3 * one + 100)  # three entries fit (their slot names differ a little)
    a = store.put(KEY, "chat:1", TOKENS, _payload(10_000))
    store.put(KEY, "chat:2", TOKENS, _payload(10_000))
    store.put(KEY, "chat:3", TOKENS, _payload(10_000))
    past = time.time() - 100
    for i, entry in enumerate(sorted(store.entries(), key=lambda e: e.slot)):
        os.utime(entry.path, (past + i, past + i))  # used in the order 1, 2, 3
    store.touch(a)  # chat 1 was loaded: now the most recent
    store.put(KEY, "chat:4", TOKENS, _payload(10_000))
    assert sorted(e.slot for e in store.entries()) == ["chat:1", "chat:3", "chat:4"]
    assert store.total_bytes() <= store.cap_bytes
    assert store.stats().hits == 1


def test_a_state_larger_than_the_cap_is_not_written(tmp_path):
    store = KVCacheStore(tmp_path, 4000)
    assert store.put(KEY, "chat:1", TOKENS, _payload(10_000)) is None
    assert store.entries() == []


def test_clear_deletes_every_entry_and_the_counts(tmp_path):
    store = KVCacheStore(tmp_path, 1 << 20)
    entry = store.put(KEY, "chat:1", TOKENS, _payload(100))
    store.put(KEY, "new-chat", TOKENS[:10], _payload(100))
    store.touch(entry)
    store.miss()
    assert (store.stats().hits, store.stats().misses) == (1, 1)
    n, size = store.clear()
    assert n == 2 and size > 200
    assert store.entries() == [] and (store.stats().hits, store.stats().misses) == (0, 0)
