"""What the memory cube tests share: a small memory with something of everything (an own chat and an
imported one, STM, segments, a chain, an archived segment, facts with versions, an archived fact, pins),
a full dump of the tables a memory is made of, and the persona and rankings compared by content (ids
differ between two memories)."""

from __future__ import annotations

import base64

from memory_core import MemoryParams, MemoryStore, RetrievalBudget

OWN = [
    ("I'm planning a trip to Lisbon in May with my sister Ana.", "Lisbon in May is lovely; the jacarandas bloom."),
    ("We want to see the Belem tower and eat pasteis de nata.", "Belem has both: the tower and the famous bakery."),
    ("Ana is vegetarian, so restaurants matter.", "Lisbon has many vegetarian places, especially in Principe Real."),
    ("I also need to renew my passport before the trip.", "Passport renewals take about three weeks, so start soon."),
    ("My old passport expires in June.", "Then renew it now; some airlines want six months of validity."),
    ("I play the cello in a community orchestra on Tuesdays.", "That sounds wonderful. What are you rehearsing?"),
    ("We are rehearsing Dvorak's New World symphony.", "The largo has a famous English horn solo."),
    ("My cello teacher says my bowing is improving.", "Steady practice on open strings helps bowing a lot."),
    ("I adopted a grey cat named Miso last winter.", "Miso is a great name. How is she settling in?"),
    ("Miso likes to sleep on my cello case.", "Cats love warm, enclosed spots like cases."),
]
IMPORTED = [
    ("How do I make sourdough starter?", "Mix flour and water, feed it daily for a week."),
    ("My starter smells like acetone.", "It is hungry: feed it more often, at a warmer spot."),
    ("I baked my first loaf yesterday.", "Congratulations! How was the crumb?"),
    ("The crumb was dense and gummy.", "It was likely underproofed; let the dough rise longer."),
    ("I use rye flour for the starter.", "Rye ferments fast; it makes a lively starter."),
    ("I want to bake bread for Ana's birthday.", "A braided loaf would be festive."),
]
QUESTIONS = [
    "When is the trip to Lisbon?",
    "What does Ana eat?",
    "When does my passport expire?",
    "What instrument do I play?",
    "What is my cat called?",
    "Why was my bread dense?",
    "What flour is in the starter?",
    "What symphony is the orchestra rehearsing?",
    "Where does Miso sleep?",
    "What should I bake for the birthday?",
]


def open_memory(path, embedder, clock, **params) -> MemoryStore:
    """A memory file with the real embedder and its token vectors, a small STM unless told."""
    return MemoryStore.open(
        path,
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        params=MemoryParams.from_flat(**{"stm_capacity": 3, **params}),
        clock=clock,
        embed_tokens=embedder.embed_with_tokens,
    )


def build_memory(s: MemoryStore, clock, *, start: float | None = None) -> dict[str, int]:
    """Fill `s` (opened with a small STM) with a bit of everything; returns the ids worth naming."""
    if start is not None:
        clock.t = start
    own = s.conversations.create_conversation("Trip and music")
    imported = s.conversations.create_conversation("Bread", source="chatgpt", external_id="bread-1")
    for u, a in OWN:
        clock.advance(300)
        s.intake.add_page(own, u, a)
    t = clock.t
    for i, (u, a) in enumerate(IMPORTED):
        s.intake.add_page(imported, u, a, timestamp=t - 86400 * 30 + i * 60)
    s.jobs.run_pending()
    for seg in s.segments.list_segments():  # the persona read out of the pages (the extractive path: no LLM)
        s.jobs.enqueue("promote_segment", {"segment_id": seg.id})
    s.jobs.run_pending()
    drawn = [k for k in s.persona.list_knowledge() if k.source_page_ids]
    assert drawn, "the extractive path drew no fact from the pages"
    # a later page confirms a drawn fact: a second version with both pages as its sources
    other = next(p.id for p in s.pages.list_pages(limit=100) if p.id not in drawn[0].source_page_ids)
    with s.transaction():
        s.merge.upsert_knowledge(
            "user", drawn[0].text, 0.7, [other], s.embedding.embed([drawn[0].text])[0], {own}, "extractive"
        )
    clock.advance(60)
    s.persona.add_knowledge("user", "I live in Porto")
    clock.advance(60)
    s.persona.add_knowledge("user", "I live in Lyon now")  # an update: "I live in Porto" stays a version
    clock.advance(60)
    peanuts = s.persona.add_knowledge("user", "I am allergic to peanuts", pinned=True)
    s.persona.add_knowledge("user", "I own a bicycle")
    old = s.persona.add_knowledge("assistant", "The assistant suggested a packing list")
    assert old is not None
    s.persona.set_item_status("knowledge", old, "archived")
    s.persona.add_trait("hobby", "plays the cello")
    jazz = s.persona.add_trait("music", "likes Dvorak", pinned=True)
    pages = s.pages.list_pages(order_by="id", descending=False, limit=100)
    mtm = [p for p in pages if p.tier == "mtm"]
    s.curation.pin("page", mtm[0].id)
    segs = s.segments.list_segments(order_by="id", descending=False)
    s.curation.pin("segment", segs[0].id)
    if len(segs) > 2:
        with s.transaction():
            s.segments.archive(segs[-1].id)  # a segment in the archive too
    return {"own": own, "imported": imported, "peanuts": int(peanuts or 0), "jazz": int(jazz or 0)}


# ---------------------------------------------------------------------- comparing memories
MEMORY_TABLES = (
    "conversation",
    "message",
    "page",
    "segment",
    "chain",
    "trait",
    "knowledge",
    "item_version",
    "derivation",
    "job",
    "event",
    "meta",
    "cube_import",
    "cube_import_item",
    "cube_stage",
)


def dump(s: MemoryStore) -> dict[str, list]:
    """Every row of the tables a memory is made of, vectors and index rows included: two dumps are equal
    exactly when nothing changed."""
    out: dict[str, list] = {t: s.db.rows(f"SELECT * FROM {t} ORDER BY 1, 2") for t in MEMORY_TABLES}
    out["page_vec"] = s.db.rows("SELECT page_id, embedding FROM page_vec ORDER BY page_id")
    out["segment_vec"] = s.db.rows("SELECT segment_id, tier, embedding FROM segment_vec ORDER BY segment_id")
    out["knowledge_vec"] = s.db.rows("SELECT knowledge_id, embedding FROM knowledge_vec ORDER BY knowledge_id")
    out["page_tok"] = s.db.rows("SELECT * FROM page_tok ORDER BY page_id")
    for fts in ("page_fts", "page_tri", "knowledge_fts", "knowledge_tri"):
        out[fts] = s.db.rows(f"SELECT rowid FROM {fts} ORDER BY rowid")
    return out


def counts(s: MemoryStore) -> dict[str, int]:
    return {
        t: s.db.scalar(f"SELECT count(*) FROM {t}")
        for t in ("page", "segment", "chain", "conversation", "trait", "knowledge", "item_version", "derivation")
    }


def page_key(p) -> tuple:
    return (p.timestamp, p.user_text, p.assistant_text)


def persona(s: MemoryStore) -> list[tuple]:
    """The persona by content: each trait and fact with its numbers, pins, provenance, every version with
    its source pages (as page contents), sorted."""

    def pages(ids) -> list[tuple]:
        got = s.pages.by_ids(list(ids))
        return sorted(page_key(got[i]) for i in ids if i in got)

    out = []
    for kind in ("trait", "knowledge"):
        for (iid,) in s.db.rows(f"SELECT id FROM {kind}"):
            item = s.persona.get_trait(iid) if kind == "trait" else s.persona.get_knowledge(iid)
            assert item is not None
            text = item.value if kind == "trait" else item.text
            versions = []
            for v in s.persona.item_versions(kind, iid):
                detail = dict(v.detail)
                srcs = detail.pop("source_page_ids", [])
                versions.append((v.version, v.text, v.reason, repr(sorted(detail.items())), tuple(pages(srcs))))
            derived = s.db.rows(
                "SELECT version, page_id FROM derivation WHERE item_kind = ? AND item_id = ? ORDER BY 1, 2", (kind, iid)
            )
            by_version: dict[int, list[int]] = {}
            for v, p in derived:
                by_version.setdefault(v, []).append(p)
            out.append(
                (
                    kind,
                    text,
                    getattr(item, "dimension", getattr(item, "owner", "")),
                    item.status,
                    item.version,
                    item.pinned,
                    round(item.confidence, 6),
                    item.model,
                    item.created_at,
                    item.updated_at,
                    tuple(versions),
                    tuple((v, tuple(pages(ps))) for v, ps in sorted(by_version.items())),
                )
            )
    return sorted(out)


def structure(s: MemoryStore) -> list[tuple]:
    """Every page by content with what it is linked to, by content too: its tier, the page before it in its
    chain, its chain's summary, its segment (and the segment's heat parts), its chat."""
    pages = {p.id: p for p in s.pages.list_pages(order_by="id", descending=False, limit=100_000)}
    out = []
    for p in pages.values():
        seg = s.segments.get(p.segment_id) if p.segment_id else None
        conv = s.conversations.get_conversation(p.conversation_id) if p.conversation_id else None
        out.append(
            (
                page_key(p),
                p.tier,
                page_key(pages[p.prev_page_id]) if p.prev_page_id else None,
                p.chain_summary,
                None
                if seg is None
                else (
                    seg.tier,
                    seg.summary,
                    tuple(seg.keywords),
                    seg.n_visit,
                    seg.l_interaction,
                    seg.last_access,
                    seg.created_at,
                    seg.page_count,
                    seg.pinned,
                    seg.promotions,
                ),
                None if conv is None else (conv.title, conv.source, conv.created_at),
                p.pinned,
                tuple(p.keywords),
                repr(sorted(p.meta.items())),
            )
        )
    return sorted(out, key=repr)


def pins(s: MemoryStore) -> dict[str, list]:
    return {
        "page": sorted(page_key(p) for p in s.pages.list_pages(pinned=True, limit=10_000)),
        "segment": sorted(seg.summary for seg in s.segments.list_segments(pinned=True, limit=10_000)),
        "trait": sorted(t.value for t in s.persona.list_traits(include_archived=True) if t.pinned),
        "knowledge": sorted(k.text for k in s.persona.list_knowledge(include_archived=True) if k.pinned),
    }


def top(s: MemoryStore, question: str, n: int = 25) -> list[tuple]:
    """The best `n` pages for a question, by content and score."""
    r = s.retrieve(question, budget=RetrievalBudget(pages=n), record_visits=False)
    return [(*page_key(h.page), round(h.score, 5)) for h in r.pages]


def persona_text(s: MemoryStore) -> list[tuple]:
    return sorted(
        [("trait", t.dimension, t.value, t.status, t.version) for t in s.persona.list_traits(include_archived=True)]
        + [("knowledge", k.owner, k.text, k.status, k.version) for k in s.persona.list_knowledge(include_archived=True)]
    )


def b64(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")
