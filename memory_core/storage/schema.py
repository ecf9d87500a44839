"""apsw connection factory (sqlite-vec loaded, WAL, foreign keys) and the schema as numbered migrations."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import apsw
import sqlite_vec

FTS_PORTER = "porter unicode61 remove_diacritics 2"


def connect(path: str | Path, *, busy_timeout_ms: int = 10_000) -> apsw.Connection:
    """Open `path` with sqlite-vec loaded, WAL journal, foreign keys on, secure delete and a busy timeout.

    The file is the user's alone (0600), made so before SQLite first opens it; SQLite gives its -wal
    and -shm files the database file's mode. Secure delete: what is deleted is overwritten with
    zeros, so forgotten memory does not linger in free space of the file (memory_core.storage.database
    purges the rest after a forget)."""
    if str(path) != ":memory:":
        private_file(Path(path))
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(busy_timeout_ms)
    # Switching a new file to WAL needs an exclusive lock, and SQLite answers BUSY at once (without
    # the busy handler) when another connection is creating the same file: retry until the timeout.
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except apsw.BusyError:
            if time.monotonic() > deadline:
                conn.close()
                raise
            time.sleep(0.02)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA cache_size=-32000")
    return conn


def private_file(path: Path) -> None:
    """Create `path` owner-only (0600) when it does not exist, or take away the group's and others'
    permissions of an existing one (and of its -wal and -shm, which an older Mnemo left 0644). Best
    effort: a file of another owner, or a system without POSIX modes, is left as it is."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError:  # a read-only folder, say: SQLite says what is wrong when it opens it
        return
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                os.chmod(file, mode & ~0o077)
        except OSError:
            pass


def is_storage_full(exc: BaseException) -> bool:
    """True when `exc` says the disk (or the database's size limit) is full: SQLite's SQLITE_FULL,
    or ENOSPC from a file written beside the database. Callers keep what they hold and retry later
    instead of counting it as a failure of the work itself."""
    if isinstance(exc, apsw.FullError):
        return True
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


# Tables every Mnemo memory has (schema version 1 on); a file without them is someone else's database.
CORE_TABLES = ("meta", "conversation", "message", "page", "segment")


def check_file(path: str | Path) -> str | None:
    """Why the file at `path` cannot be used as a Mnemo memory, or None when it can.

    Read-only: it never modifies the file (used before a backup is put back, so a wrong or
    damaged file is refused while the current memory is still in place). Runs SQLite's
    `quick_check`, which reads every page: seconds for hundreds of MB, so call it off the UI thread.
    """
    p = Path(path)
    if not p.is_file():
        return f"{p} is not a file"
    try:
        # immutable: no lock, no -wal/-shm files created; what is checked is the main file, which is what a
        # restore copies
        uri = f"file:{quote(p.resolve().as_posix())}?mode=ro&immutable=1"
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        return f"{p} cannot be opened ({exc})"
    try:
        version = _user_version(conn)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in CORE_TABLES if t not in names]
        if version < 1 or missing:
            return f"{p} is not a Mnemo memory database (no {', '.join(missing) or 'schema version'})"
        if version > SCHEMA_VERSION:
            return (
                f"{p} has schema version {version}, newer than this program knows ({SCHEMA_VERSION}); "
                f"upgrade Mnemo to use it"
            )
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            return f"{p} is damaged: {'; '.join(problems)}"
    except apsw.Error as exc:
        return f"{p} is damaged or is not a Mnemo memory database ({exc})"
    finally:
        conn.close()
    return None


def _m1(conn: apsw.Connection, dim: int) -> None:
    conn.execute(f"""
    CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);

    CREATE TABLE conversation(
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL DEFAULT 'New chat',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        source TEXT,
        external_id TEXT,
        memory_paused INTEGER NOT NULL DEFAULT 0,
        incognito INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX conversation_ext ON conversation(source, external_id) WHERE external_id IS NOT NULL;
    CREATE INDEX conversation_updated ON conversation(updated_at DESC, id DESC);

    CREATE TABLE message(
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES message(id) ON DELETE SET NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'complete',
        meta TEXT NOT NULL DEFAULT '{{}}'
    );
    CREATE INDEX message_conv ON message(conversation_id, created_at, id);
    CREATE INDEX message_parent ON message(parent_id);
    CREATE VIRTUAL TABLE message_fts USING fts5(content, content='message', content_rowid='id', tokenize='trigram');
    CREATE TRIGGER message_ai AFTER INSERT ON message BEGIN
        INSERT INTO message_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER message_ad AFTER DELETE ON message BEGIN
        INSERT INTO message_fts(message_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER message_au AFTER UPDATE OF content ON message BEGIN
        INSERT INTO message_fts(message_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO message_fts(rowid, content) VALUES (new.id, new.content);
    END;

    CREATE TABLE chain(
        id INTEGER PRIMARY KEY,
        summary TEXT NOT NULL DEFAULT '',
        keywords TEXT NOT NULL DEFAULT '[]',
        updated_at REAL NOT NULL
    );

    CREATE TABLE segment(
        id INTEGER PRIMARY KEY,
        tier TEXT NOT NULL CHECK (tier IN ('mtm', 'archive')),
        summary TEXT NOT NULL DEFAULT '',
        keywords TEXT NOT NULL DEFAULT '[]',
        kw_counts TEXT NOT NULL DEFAULT '{{}}',
        emb_sum BLOB NOT NULL,
        n_visit INTEGER NOT NULL DEFAULT 0,
        l_interaction INTEGER NOT NULL DEFAULT 0,
        last_access REAL NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        page_count INTEGER NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0,
        promotions INTEGER NOT NULL DEFAULT 0,
        archived_at REAL
    );
    CREATE INDEX segment_tier ON segment(tier, last_access);

    CREATE TABLE page(
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER REFERENCES conversation(id) ON DELETE SET NULL,
        user_text TEXT NOT NULL,
        assistant_text TEXT NOT NULL,
        timestamp REAL NOT NULL,
        tier TEXT NOT NULL CHECK (tier IN ('stm', 'mtm', 'archive')),
        segment_id INTEGER REFERENCES segment(id),
        prev_page_id INTEGER REFERENCES page(id) ON DELETE SET NULL,
        chain_id INTEGER REFERENCES chain(id),
        keywords TEXT NOT NULL DEFAULT '[]',
        pinned INTEGER NOT NULL DEFAULT 0,
        user_message_id INTEGER REFERENCES message(id) ON DELETE SET NULL,
        assistant_message_id INTEGER REFERENCES message(id) ON DELETE SET NULL,
        meta TEXT NOT NULL DEFAULT '{{}}',
        created_at REAL NOT NULL,
        moved_at REAL,
        analyzed INTEGER NOT NULL DEFAULT 0,
        dedupe_key TEXT UNIQUE,
        CHECK ((tier = 'stm') = (segment_id IS NULL))
    );
    CREATE INDEX page_tier_conv ON page(tier, conversation_id, id);
    CREATE INDEX page_conv ON page(conversation_id, id);
    CREATE INDEX page_segment ON page(segment_id, id);
    CREATE INDEX page_prev ON page(prev_page_id);
    CREATE INDEX page_chain ON page(chain_id);
    CREATE INDEX page_ts ON page(timestamp);

    CREATE TABLE trait(
        id INTEGER PRIMARY KEY,
        dimension TEXT NOT NULL,
        value TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '',
        confidence REAL NOT NULL DEFAULT 0.5,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
        version INTEGER NOT NULL DEFAULT 1,
        pinned INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        conversation_ids TEXT NOT NULL DEFAULT '[]',
        model TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        embedding BLOB NOT NULL
    );
    CREATE INDEX trait_dim ON trait(dimension);

    CREATE TABLE knowledge(
        id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL CHECK (owner IN ('user', 'assistant')),
        text TEXT NOT NULL,
        confidence REAL NOT NULL DEFAULT 0.5,
        status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
        version INTEGER NOT NULL DEFAULT 1,
        pinned INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        conversation_ids TEXT NOT NULL DEFAULT '[]',
        model TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX knowledge_owner ON knowledge(owner, status);

    -- old versions of traits and knowledge (the current version lives in the item row)
    CREATE TABLE item_version(
        id INTEGER PRIMARY KEY,
        item_kind TEXT NOT NULL CHECK (item_kind IN ('trait', 'knowledge')),
        item_id INTEGER NOT NULL,
        version INTEGER NOT NULL,
        text TEXT NOT NULL,
        created_at REAL NOT NULL,
        archived_at REAL NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '{{}}',
        UNIQUE(item_kind, item_id, version)
    );

    -- provenance: which pages each version of a trait / knowledge item was derived from
    CREATE TABLE derivation(
        item_kind TEXT NOT NULL CHECK (item_kind IN ('trait', 'knowledge')),
        item_id INTEGER NOT NULL,
        version INTEGER NOT NULL,
        page_id INTEGER NOT NULL,
        PRIMARY KEY (item_kind, item_id, version, page_id)
    ) WITHOUT ROWID;
    CREATE INDEX derivation_page ON derivation(page_id);

    CREATE TABLE job(
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{{}}',
        key TEXT UNIQUE,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        error TEXT
    );
    CREATE INDEX job_status ON job(status, id);

    CREATE TABLE event(
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        item_kind TEXT,
        item_id INTEGER,
        summary TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '{{}}'
    );

    -- change log of the vector tables, so in-memory matrix caches sync incrementally
    CREATE TABLE vec_log(
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        item_id INTEGER NOT NULL,
        op TEXT NOT NULL
    );

    CREATE VIRTUAL TABLE page_vec USING vec0(
        page_id INTEGER PRIMARY KEY, embedding float[{dim}] distance_metric=cosine);
    CREATE VIRTUAL TABLE segment_vec USING vec0(
        segment_id INTEGER PRIMARY KEY, tier TEXT PARTITION KEY, embedding float[{dim}] distance_metric=cosine);
    CREATE VIRTUAL TABLE knowledge_vec USING vec0(
        knowledge_id INTEGER PRIMARY KEY, embedding float[{dim}] distance_metric=cosine);

    CREATE VIRTUAL TABLE page_fts USING fts5(body, content='', contentless_delete=1, tokenize='{FTS_PORTER}');
    CREATE VIRTUAL TABLE page_tri USING fts5(body, content='', contentless_delete=1, tokenize='trigram');
    CREATE VIRTUAL TABLE page_fts_vocab USING fts5vocab(page_fts, 'row');
    CREATE VIRTUAL TABLE knowledge_fts USING fts5(body, content='', contentless_delete=1, tokenize='{FTS_PORTER}');
    CREATE VIRTUAL TABLE knowledge_tri USING fts5(body, content='', contentless_delete=1, tokenize='trigram');
    """)


def _m2(conn: apsw.Connection, dim: int) -> None:
    """Indexes for eviction (pinned pages) and for finding the page of an assistant message."""
    conn.execute("""
    CREATE INDEX IF NOT EXISTS page_pinned ON page(segment_id) WHERE pinned = 1;
    CREATE INDEX IF NOT EXISTS page_amsg ON page(assistant_message_id) WHERE assistant_message_id IS NOT NULL;
    """)


def _m3(conn: apsw.Connection, dim: int) -> None:
    """Indexes for the inspector: pages sorted by tier (deep scrolls read ids from the index alone),
    and one item's events (a segment's heat history)."""
    conn.execute("""
    CREATE INDEX IF NOT EXISTS page_tier_id ON page(tier, id);
    CREATE INDEX IF NOT EXISTS event_item ON event(item_kind, item_id, id);
    """)


def _m4(conn: apsw.Connection, dim: int) -> None:
    """Each page's content-token vectors (4-bit rows, memory_core.pages.token_match) for word-by-word
    matching. Derived data: filled as pages are embedded, or by the "index_tokens" job."""
    conn.execute("CREATE TABLE IF NOT EXISTS page_tok(page_id INTEGER PRIMARY KEY, vecs BLOB NOT NULL)")


def _m5(conn: apsw.Connection, dim: int) -> None:
    """Each page's two side vectors (memory_core.pages.token_match.pack_sides: b"" for a page not split), made
    in the same encoder pass as its token rows; NULL in a row from before, which "index_tokens" redoes."""
    conn.execute("ALTER TABLE page_tok ADD COLUMN sides BLOB")


def _m6(conn: apsw.Connection, dim: int) -> None:
    """Memory cube imports (memory_core.cubes): each import's record, what it did to every item (the ids
    the cube's became, and a merged item as it was, for an undo), and the cube staged while it is written."""
    conn.execute("""
    CREATE TABLE IF NOT EXISTS cube_import(
        id INTEGER PRIMARY KEY,
        cube_id TEXT NOT NULL,
        file_name TEXT NOT NULL,
        file_sha256 TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('staging', 'running', 'done', 'undone')),
        started_at REAL NOT NULL,
        finished_at REAL,
        undone_at REAL,
        manifest TEXT NOT NULL DEFAULT '{}',
        summary TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE IF NOT EXISTS cube_import_item(
        import_id INTEGER NOT NULL REFERENCES cube_import(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        ref INTEGER NOT NULL,
        item_id INTEGER,
        action TEXT NOT NULL CHECK (action IN ('added', 'present', 'merged', 'skipped')),
        key TEXT,
        before TEXT,
        after_version INTEGER,
        stamp REAL,
        note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (import_id, kind, ref)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS cube_import_item_of ON cube_import_item(kind, item_id);
    CREATE INDEX IF NOT EXISTS cube_import_item_key ON cube_import_item(kind, key) WHERE key IS NOT NULL;
    CREATE TABLE IF NOT EXISTS cube_stage(
        import_id INTEGER NOT NULL REFERENCES cube_import(id) ON DELETE CASCADE,
        member TEXT NOT NULL,
        ref INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (import_id, member, ref)
    ) WITHOUT ROWID;
    """)


def _m_spaces(conn: apsw.Connection, dim: int) -> None:
    """Memory spaces (issue 32, MemOS's readable/writable cubes): named parts of one memory. Everything
    there is now is in space 1, 'Personal'. A page, segment, fact or trait belongs to one space; a
    conversation writes to `space_id` and reads `read_spaces` (NULL: its own space only; 'all'; or a JSON
    list of space ids); SQLite cannot add a column that REFERENCES another table with a default, so the
    spaces component (memory_core.spaces.component) keeps the ids valid. `meta.space_epoch` counts the moves and deletions of pages, so the in-memory map
    of page -> space that recall filters by (memory_core.recall.space_filter) knows when to read it again."""
    now = time.time()
    conn.execute("CREATE TABLE space(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at REAL NOT NULL)")
    conn.execute("INSERT INTO space(id, name, created_at) VALUES (1, 'Personal', ?)", (now,))
    for table in ("page", "segment", "knowledge", "trait", "conversation"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN space_id INTEGER NOT NULL DEFAULT 1")
    conn.execute("ALTER TABLE conversation ADD COLUMN read_spaces TEXT")
    conn.execute("CREATE INDEX page_space ON page(space_id)")
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('space_epoch', '0')")
    bump = "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'space_epoch'"
    conn.execute(f"CREATE TRIGGER page_space_moved AFTER UPDATE OF space_id ON page BEGIN {bump}; END")
    conn.execute(f"CREATE TRIGGER page_space_deleted AFTER DELETE ON page BEGIN {bump}; END")


def _m_persona_people(conn: apsw.Connection, dim: int) -> None:
    """Facts about other people (owner 'person', their name in `subject`: memory_core.persona.extract.page_sides)
    and how often an item was confirmed (`confirmations`: a restated fact counts, it is no new version).
    SQLite cannot change a CHECK, so the knowledge table is rebuilt from its own CREATE statement (every
    column another migration added kept), its ids, and so its vectors' and full-text rows, unchanged."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'knowledge'").fetchone()
    assert row is not None, "the knowledge table is made by the first migration"
    sql = row[0]
    old_check = "CHECK (owner IN ('user', 'assistant'))"
    if old_check in sql:
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'knowledge' AND sql IS NOT NULL"
            )
        ]
        new_sql = sql.replace(old_check, "CHECK (owner IN ('user', 'assistant', 'person'))", 1)
        new_sql = new_sql.replace("CREATE TABLE knowledge", "CREATE TABLE knowledge_new", 1)
        conn.execute(new_sql)
        conn.execute("INSERT INTO knowledge_new SELECT * FROM knowledge")
        conn.execute("DROP TABLE knowledge")
        conn.execute("ALTER TABLE knowledge_new RENAME TO knowledge")
        for ix in indexes:
            conn.execute(ix)
    conn.execute("ALTER TABLE knowledge ADD COLUMN subject TEXT")
    conn.execute("ALTER TABLE knowledge ADD COLUMN confirmations INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE trait ADD COLUMN confirmations INTEGER NOT NULL DEFAULT 0")


def _m_segment_titles(conn: apsw.Connection, dim: int) -> None:
    """A segment's title written by the chat model (decision 0026): `title` (NULL: none, its keywords' title
    is shown), `title_model` (the model that wrote it) and `title_pages` (its page count when a title was last
    asked for; asked again once it has doubled, memory_core.segments.titles)."""
    conn.execute("ALTER TABLE segment ADD COLUMN title TEXT")
    conn.execute("ALTER TABLE segment ADD COLUMN title_model TEXT")
    conn.execute("ALTER TABLE segment ADD COLUMN title_pages INTEGER NOT NULL DEFAULT 0")


# Each migration takes (conn, dim); index i moves user_version from i to i + 1.
MIGRATIONS: list[Callable[[apsw.Connection, int], None]] = [
    _m1,
    _m2,
    _m3,
    _m4,
    _m5,
    _m6,
    _m_spaces,
    _m_persona_people,
    _m_segment_titles,
]
SCHEMA_VERSION = len(MIGRATIONS)


def _user_version(conn: apsw.Connection) -> int:
    """The schema version SQLite keeps in the file header (PRAGMA always returns one row)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: apsw.Connection, dim: int) -> int:
    """Bring the schema up to SCHEMA_VERSION, one transaction per step. Returns the final version."""
    version = _user_version(conn)
    if version > SCHEMA_VERSION:
        raise RuntimeError(
            f"this memory database has schema version {version}, newer than this program knows "
            f"({SCHEMA_VERSION}); upgrade Mnemo to open it"
        )
    while version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # re-read inside the write lock: another connection may have migrated meanwhile
            version = _user_version(conn)
            if version < SCHEMA_VERSION:
                MIGRATIONS[version](conn, dim)
                version += 1
                conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return version
