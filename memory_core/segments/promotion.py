"""Promotion of a hot segment into the persona (the "promote_segment" job): the LLM, when there is one and
it has not kept failing, or the extractive path reads the segment's new pages into traits and facts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..pages.component import Pages
from ..pages.embedding import Embedding
from ..persona import extract as X
from ..persona.merge import PersonaMerge
from ..storage.codec import from_json, to_json
from ..storage.database import Database, checkpoint
from ..storage.jobs import Jobs
from ..types import CompleteJsonFn
from .component import Segments

# A model whose persona answers were rejected this many promotions in a row (nothing it said was stated
# by the conversation, or no valid JSON: the bundled 135M model, every time) is not asked again for its
# model id until LLM_RETRY_AFTER_S have passed since its last rejection: each try cost seconds of
# generation for nothing. The count lives in the store's meta table, so a restart does not pay the
# three tries again; another model (another id) is asked at once.
LLM_REJECTIONS_BEFORE_SKIP = 3
LLM_RETRY_AFTER_S = 7 * 86400
_REJECTIONS_KEY = "llm_rejections"


class Promotion:
    def __init__(
        self,
        db: Database,
        embedding: Embedding,
        pages: Pages,
        segments: Segments,
        merge: PersonaMerge,
        jobs: Jobs,
        llm: CompleteJsonFn | None,
        llm_model_id: str | None,
    ):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        self.merge = merge
        self.llm = llm
        self.llm_model_id = llm_model_id
        jobs.register("promote_segment", self._job_promote_segment)

    def _job_promote_segment(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        sid = int(payload["segment_id"])
        rows = self.db.rows(
            "SELECT id, user_text, assistant_text, timestamp, conversation_id, json_extract(meta, '$.people') "
            "FROM page WHERE segment_id = ? AND analyzed = 0 ORDER BY id",
            (sid,),
        )
        if not rows:

            def nothing() -> None:
                self.segments.cool(sid, promoted=False)

            return nothing
        pages = [X.PageText(r[0], r[1], r[2], r[3], from_json(r[5], None)) for r in rows]  # whose dialogue
        conv_of = {r[0]: r[4] for r in rows}
        model_id = self.llm_model_id
        rejected = self._llm_rejections_in_a_row(model_id)
        llm = self.llm if allow_llm and rejected < LLM_REJECTIONS_BEFORE_SKIP else None
        ext = X.extract(pages, llm=llm, llm_model_id=model_id)
        if llm is not None:
            rejected = rejected + 1 if ext.fallback_reason else 0
        texts = [f"{t.dimension}: {t.value}" for t in ext.traits] + [f.text for f in ext.facts]
        vecs = self.embedding.embed(texts) if texts else np.zeros((0, self.db.dim), np.float32)
        tvecs, fvecs = vecs[: len(ext.traits)], vecs[len(ext.traits) :]

        def apply() -> None:
            if llm is not None:
                self._record_llm_rejections(model_id, rejected)
            if self.db.execute("SELECT 1 FROM segment WHERE id = ?", (sid,)).fetchone():
                self._write(sid, ext, tvecs, fvecs, conv_of, model_id, rejected)

        return apply

    def _write(
        self,
        sid: int,
        ext: X.Extraction,
        tvecs: np.ndarray,
        fvecs: np.ndarray,
        conv_of: dict[int, int | None],
        model_id: str | None,
        rejected: int,
    ) -> None:
        """Merge what was extracted from segment `sid` into the persona (inside the job's transaction), passing
        over the pages forgotten meanwhile, and mark its pages analyzed."""
        page_ids = list(conv_of)
        marks = ",".join("?" * len(page_ids))
        alive = {r[0] for r in self.db.execute(f"SELECT id FROM page WHERE id IN ({marks})", page_ids).fetchall()}
        n_t = n_k = 0
        for item, vec in zip(ext.traits, tvecs):
            srcs = [p for p in item.page_ids if p in alive]
            if srcs and self.merge.upsert_trait(
                item.dimension,
                item.value,
                item.evidence,
                item.confidence,
                srcs,
                vec,
                {conv_of[p] for p in srcs},
                ext.model,
            ):
                n_t += 1
        checkpoint("promote:between_items")
        for fact, vec in zip(ext.facts, fvecs):
            srcs = [p for p in fact.page_ids if p in alive]
            if srcs and self.merge.upsert_knowledge(
                fact.owner, fact.text, fact.confidence, srcs, vec, {conv_of[p] for p in srcs}, ext.model
            ):
                n_k += 1
        if alive:
            self.pages.mark_analyzed(sorted(alive))
        # both counts start again, as MemoryOS's code resets N_visit: what made the segment hot is read now
        self.segments.cool(sid, promoted=True)
        if ext.fallback_reason:
            summary = f"LLM output for segment {sid} was rejected; used the extractive path"
            if rejected == LLM_REJECTIONS_BEFORE_SKIP:
                summary += (
                    f" (rejected {rejected} times in a row: the model is not asked again for "
                    f"{LLM_RETRY_AFTER_S // 86400} days, or until another model is chosen)"
                )
            self.db.emit(
                "llm_fallback",
                "segment",
                sid,
                summary,
                {"reason": ext.fallback_reason, "model": model_id, "in_a_row": rejected},
            )
        self.db.emit(
            "promoted",
            "segment",
            sid,
            f"segment {sid} promoted to long-term memory ({n_t} traits, {n_k} facts changed)",
            {"traits": n_t, "knowledge": n_k, "pages": sorted(alive), "model": ext.model},
        )

    def _llm_rejections_in_a_row(self, model_id: str | None) -> int:
        """How many promotions in a row rejected this model's answer. Once LLM_RETRY_AFTER_S have passed
        since the last rejection, one short of the limit: the model is asked once more, and another
        rejection skips it for another week."""
        entry = self.rejection_state().get(str(model_id))
        if not isinstance(entry, dict):
            return 0
        try:
            n, at = int(entry.get("in_a_row", 0)), float(entry.get("at", 0.0))
        except (TypeError, ValueError):
            return 0
        if n >= LLM_REJECTIONS_BEFORE_SKIP and self.db.clock() - at >= LLM_RETRY_AFTER_S:
            return LLM_REJECTIONS_BEFORE_SKIP - 1
        return n

    def rejection_state(self) -> dict:
        state = from_json(self.db.get_meta(_REJECTIONS_KEY), {})
        return state if isinstance(state, dict) else {}

    def _record_llm_rejections(self, model_id: str | None, in_a_row: int) -> None:
        state = self.rejection_state()
        if in_a_row:
            state[str(model_id)] = {"in_a_row": in_a_row, "at": self.db.clock()}
        else:
            state.pop(str(model_id), None)
        self.db.set_meta(_REJECTIONS_KEY, to_json(state))
