"""Reading segments: their rows as records, their heat, listed, counted and filtered (the inspector, recall).

A base of `Segments` (segments.component): the reading needs the database alone, and keeps the class
that writes segments to its mechanics."""

from __future__ import annotations

import math
from typing import Any

from ..storage.codec import from_json
from ..storage.database import Database, like_pattern
from ..types import Segment

TITLE_WORDS = 3
SEG_COLS = (
    "s.id, s.tier, s.summary, s.keywords, s.n_visit, s.l_interaction, s.last_access, s.created_at, "
    "s.updated_at, s.page_count, s.pinned, s.promotions, s.space_id, s.title, s.title_model"
)


class SegmentReading:
    db: Database

    def heat_sql(self, now: float) -> tuple[str, dict]:
        p = self.db.params
        return (
            "(:alpha * s.n_visit + :beta * s.l_interaction + :gamma * exp(-(max(:now - s.last_access, 0.0)) / :mu))",
            {"alpha": p.heat.alpha, "beta": p.heat.beta, "gamma": p.heat.gamma, "now": now, "mu": p.heat.mu},
        )

    def segment_from_row(self, r: tuple, now: float) -> Segment:
        p = self.db.params
        recency = math.exp(-max(now - r[6], 0.0) / p.heat.mu)
        heat = p.heat.alpha * r[4] + p.heat.beta * r[5] + p.heat.gamma * recency
        return Segment(
            id=r[0],
            tier=r[1],
            summary=r[2],
            keywords=from_json(r[3], []),
            n_visit=r[4],
            l_interaction=r[5],
            last_access=r[6],
            created_at=r[7],
            updated_at=r[8],
            page_count=r[9],
            pinned=bool(r[10]),
            promotions=r[11],
            recency=recency,
            heat=heat,
            title=r[13] or self.title(from_json(r[3], [])),  # the model's (decision 0026), else the keywords'
            title_by=r[14] or "",
            space_id=r[12],
        )

    _SEG_ORDER = {
        "heat": "heat",
        "last_access": "s.last_access",
        "created_at": "s.created_at",
        "id": "s.id",
        "n_visit": "s.n_visit",
        "l_interaction": "s.l_interaction",
        "page_count": "s.page_count",
        "updated_at": "s.updated_at",
    }

    def list_segments(
        self,
        *,
        tier: str | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        order_by: str = "heat",
        descending: bool = True,
        limit: int = 100,
        offset: int = 0,
        after_id: int | None = None,
    ) -> list[Segment]:
        if order_by not in self._SEG_ORDER:
            raise ValueError(f"order_by must be one of {sorted(self._SEG_ORDER)}")
        now = self.db.clock()
        heat, hargs = self.heat_sql(now)
        where, args = self._filters(tier, text, pinned)
        if after_id is not None:  # keyset paging (see list_pages)
            where = (where + " AND" if where else " WHERE") + " s.id > :after_id"
            args["after_id"] = after_id
        d = "DESC" if descending else "ASC"
        rows = self.db.rows(
            f"SELECT {SEG_COLS}, {heat} AS heat FROM segment s{where} "
            f"ORDER BY {self._SEG_ORDER[order_by]} {d}, s.id {d} LIMIT :limit OFFSET :offset",
            {**hargs, **args, "limit": limit, "offset": offset},
        )
        return [self.segment_from_row(r, now) for r in rows]

    def _filters(self, tier: str | None, text: str | None, pinned: bool | None) -> tuple[str, dict]:
        where: list[str] = []
        args: dict[str, Any] = {}
        if tier is not None:
            where.append("s.tier = :tier")
            args["tier"] = tier
        if pinned is not None:
            where.append("s.pinned = :pinned")
            args["pinned"] = int(pinned)
        if text:
            where.append("(s.summary LIKE :like ESCAPE '\\' OR s.keywords LIKE :like ESCAPE '\\')")
            args["like"] = like_pattern(text)
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def count_segments(
        self, *, tier: str | None = None, text: str | None = None, pinned: bool | None = None, **_: Any
    ) -> int:
        where, args = self._filters(tier, text, pinned)
        return self.db.scalar(f"SELECT count(*) FROM segment s{where}", args)

    def get(self, sid: int) -> Segment | None:
        now = self.db.clock()
        r = self.db.one(f"SELECT {SEG_COLS} FROM segment s WHERE s.id = ?", (sid,))
        return self.segment_from_row(r, now) if r else None

    def title(self, keywords: list[str]) -> str:
        """A readable title from a segment's keywords (the LLM-free path): its first few, the first
        capitalised ("Adoption, agencies, kids")."""
        words = keywords[:TITLE_WORDS]
        return ", ".join(words)[:1].upper() + ", ".join(words)[1:] if words else ""
