"""The event log: what memory did, oldest first (the activity list, a segment's heat history, listeners)."""

from __future__ import annotations

from collections.abc import Sequence

from ..types import Event
from .codec import from_json
from .database import Database, equals

EVENT_COLS = "id, at, kind, item_kind, item_id, summary, detail"


def event_from_row(r: tuple) -> Event:
    return Event(r[0], r[1], r[2], r[3], r[4], r[5], from_json(r[6], {}))


class EventLog:
    def __init__(self, db: Database):
        self.db = db

    def events(
        self,
        since_id: int = 0,
        limit: int = 100,
        *,
        kinds: Sequence[str] | None = None,
        exclude_kinds: Sequence[str] | None = None,
        item_kind: str | None = None,
        item_id: int | None = None,
        newest: bool = False,
    ) -> list[Event]:
        """Events after `since_id`, oldest first. Filters are done in SQL; with `newest=True` the
        newest `limit` matching events are returned (still oldest first), e.g. for an activity list."""
        where, args = equals([("item_kind", item_kind), ("item_id", item_id)])
        where.append("id > ?")
        args.append(since_id)
        if kinds is not None:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            args += list(kinds)
        if exclude_kinds:
            where.append(f"kind NOT IN ({','.join('?' * len(exclude_kinds))})")
            args += list(exclude_kinds)
        rows = self.db.rows(
            f"SELECT {EVENT_COLS} FROM event WHERE {' AND '.join(where)} "
            f"ORDER BY id {'DESC' if newest else 'ASC'} LIMIT ?",
            [*args, limit],
        )
        if newest:
            rows.reverse()
        return [event_from_row(r) for r in rows]

    def latest_event_id(self) -> int:
        """The id of the newest event, 0 when the log is empty (a cheap "has memory changed?" check)."""
        return int(self.db.scalar("SELECT coalesce(max(id), 0) FROM event") or 0)

    def segment_events(self, sid: int) -> list[Event]:
        """Every logged event of one segment, oldest first: its own (created, visited, promoted,
        archived, restored, pinned...) and the pages that moved into it. Feeds its heat history."""
        rows = self.db.rows(
            f"SELECT {EVENT_COLS} FROM event WHERE item_kind = 'segment' AND item_id = ? "
            f"UNION SELECT {EVENT_COLS} FROM event WHERE kind = 'page_moved' "
            "AND json_extract(detail, '$.segment_id') = ? ORDER BY id",
            (sid, sid),
        )
        return [event_from_row(r) for r in rows]
