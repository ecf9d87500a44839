"""Full-text rows of pages and facts: the porter table for every text, the trigram table for CJK text
(unicode61 keeps a CJK run as one token, so only trigrams find a word inside it).

A deleted row's words stay in the index until its segment is merged (memory_core.storage.purge): deleting
one notes the table, and the transaction's forget is purged after it commits."""

from __future__ import annotations

from .. import text as T
from .database import Database


def fts_put(db: Database, table: str, tri: str, rowid: int, body: str) -> None:
    db.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
    db.execute(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", (rowid, body))
    db.execute(f"DELETE FROM {tri} WHERE rowid = ?", (rowid,))
    if T.has_cjk(body):
        db.execute(f"INSERT INTO {tri}(rowid, body) VALUES (?, ?)", (rowid, body))


def fts_del(db: Database, table: str, tri: str, rowid: int) -> None:
    db.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
    db.execute(f"DELETE FROM {tri} WHERE rowid = ?", (rowid,))
    db.purge.note_fts((table, tri))
