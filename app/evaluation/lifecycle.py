"""`mnemo eval locomo --lifecycle`: LoCoMo replayed as a life, not read as a finished file (issue 31).

Each conversation goes into a fresh store session by session, in date order, on the store's clock at the
session's time; after each session the questions whose evidence is all said by then are asked (a question
without evidence after the last session). Each question's recall is measured as in the static evaluation, then
the pages a reply's prompt would quote (the chat's `QuoteFloor`, at most `recall_turns` pages) get their visit
(`store.record_quoted_pages`), and the memory jobs run (promotion on the LLM-free path). `mtm_capacity` is small,
so the coldest segments go to the archive as the conversation grows.

Asked after its session, a question ranks against the sessions said so far, not the whole conversation, so that
"per session" recall is not comparable with the static figure. Two comparisons are:
- end of life: after the whole replay, every question is asked once more on the lived store exactly as the
  static evaluation asks it (the same budget, no visit recorded, the store's clock at the real time as the
  static store's is): the same questions over the same pages, the only difference what the lifecycle did to the
  memory (archived segments, promotions, visits, knowledge);
- the same replay without the lifecycle (the static run's settings, no visit recorded, no memory job run), asked
  per session and at the end: the per-session figure's baseline, and a check that replaying session by session
  builds the static store.
Both replays embed each page once (`_MemoEmbedder`), so they hold the very same vectors.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.evaluation import metrics
from app.evaluation.locomo import Question, Sample, _row_value, _side_turns, summarize
from app.importers.writer import write_conversation

if TYPE_CHECKING:
    from app.evaluation.locomo import Embedder
    from memory_core import MemoryParams, MemoryStore, Retrieval

LIFECYCLE_MTM_CAPACITY = 20  # segments kept in mid-term memory during the replay (the default is 200)
_SESSION = re.compile(r"^D(\d+):")
# the figures of each question, by name: asked after its session (with and without the lifecycle), and at the
# end of the replay as the static run asks (with and without it)
RUNS = ("session", "session_no_lifecycle", "end_of_life", "end_of_life_no_lifecycle")
RUN_LABELS = {
    "session": "per session, lifecycle",
    "session_no_lifecycle": "per session, none",
    "end_of_life": "end of life, lifecycle",
    "end_of_life_no_lifecycle": "end of life, none",
}
LOST_SHOWN = 40  # questions that lost recall against the static run, kept in the report with their evidence


def question_session(q: Question, last: int) -> int:
    """The session after which `q` can be asked: the latest one its evidence is in (`last` without any)."""
    got = [int(m.group(1)) for e in q.evidence if (m := _SESSION.match(e))]
    return max(got) if got else last


class _Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


class _MemoEmbedder:
    """The evaluation's embedder, each text embedded once per conversation (the two replays of a conversation
    embed the same pages after the same contexts, and ask the same questions)."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner = embedder
        self.model_id = embedder.model_id
        self.dim = embedder.dim
        self.has_tokens = getattr(embedder, "embed_with_tokens", None) is not None
        self._plain: dict[str, np.ndarray] = {}
        self._tokens: dict[tuple[str, str], tuple[np.ndarray, Any]] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self._plain})
        if todo:
            for t, v in zip(todo, self.inner.embed(todo)):
                self._plain[t] = v
        return np.stack([self._plain[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_with_tokens(
        self, texts: Sequence[str], contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, list[str]]]]:
        ctx = list(contexts) if contexts is not None else [""] * len(texts)
        keys = list(zip(texts, ctx))
        todo = sorted({k for k in keys if k not in self._tokens})
        if todo:
            with_ctx = any(c for _, c in todo)
            vecs, per_text = self.inner.embed_with_tokens(
                [t for t, _ in todo], [c for _, c in todo] if with_ctx else None
            )
            for k, v, tok in zip(todo, vecs, per_text):
                self._tokens[k] = (v, tok)
        got = [self._tokens[k] for k in keys]
        vectors = np.stack([g[0] for g in got]) if got else np.zeros((0, self.dim), np.float32)
        return vectors, [g[1] for g in got]


@dataclasses.dataclass
class _Replay:
    """What one replay of a conversation gave: each question's recall (by qa index) after its session and at
    the end, the turns the end's retrieval returned, where the evidence was at the end, and the store's figures."""

    session: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    end: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    end_turns: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    evidence: dict[int, dict[str, dict]] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)


class LifecycleEval:
    def __init__(
        self,
        embedder: Embedder,
        *,
        memory_params: MemoryParams,
        ks: Sequence[int],
        mtm_capacity: int = LIFECYCLE_MTM_CAPACITY,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.embedder = embedder
        self.static_params = copy.deepcopy(memory_params)  # the static run's settings: the baseline replay's
        self.params = copy.deepcopy(memory_params)
        self.params.tiers.mtm_capacity = mtm_capacity
        self.ks = sorted(set(ks))
        self.log = log or (lambda m: print(m, file=sys.stderr))

    def run(
        self, samples: Sequence[Sample], chosen: dict[str, list[Question]], static_rows: Sequence[dict] = ()
    ) -> dict:
        """Both replays of every sample with chosen questions; `static_rows`: the static run's per-question rows
        (its report's "per_question"), to say which questions the lifecycle made lose their evidence."""
        rows: list[dict] = []
        life: dict[str, dict] = {}
        with tempfile.TemporaryDirectory(prefix="mnemo-lifecycle-") as tmp:
            for sample in samples:
                questions = chosen.get(sample.sample_id)
                if not questions:
                    continue
                memo = _MemoEmbedder(self.embedder)
                lived = self._replay(sample, questions, Path(tmp), memo, live=True)
                plain = self._replay(sample, questions, Path(tmp), memo, live=False)
                rows += _question_rows(sample, questions, lived, plain)
                life[sample.sample_id] = {**lived.stats, "no_lifecycle": plain.stats}
                self.log(f"lifecycle {sample.sample_id}: {lived.stats}; without: {plain.stats}")
        return {
            "recall": _summaries(rows, "session", self.ks),
            "runs": {run: _summaries(rows, run, self.ks) for run in RUNS},
            "vs_static": compare_with_static(rows, static_rows, self.ks),
            "mtm_capacity": self.params.tiers.mtm_capacity,
            "mtm_capacity_no_lifecycle": self.static_params.tiers.mtm_capacity,
            "samples": life,
            "per_question": rows,
        }

    def _open(self, path: Path, memo: _MemoEmbedder, params: MemoryParams, clock: _Clock) -> MemoryStore:
        from memory_core import MemoryStore

        return MemoryStore.open(
            path,
            memo.embed,
            embed_model_id=memo.model_id,
            dim=memo.dim,
            params=params,
            clock=clock,
            embed_tokens=memo.embed_with_tokens if memo.has_tokens else None,
        )

    def _replay(
        self, sample: Sample, questions: list[Question], tmp: Path, memo: _MemoEmbedder, *, live: bool
    ) -> _Replay:
        """One replay: sessions in date order, each question asked after its session; with `live`, the quoted
        pages' visits and the memory jobs after each question, and the small mid-term capacity."""
        from app.chat.prompting import QuoteFloor

        conv = sample.conversation
        sessions = sorted({t.session for t in conv.turns})
        clock = _Clock(min(t.timestamp for t in conv.turns))
        params = self.params if live else self.static_params
        store = self._open(tmp / f"{sample.sample_id}-{'life' if live else 'plain'}.sqlite3", memo, params, clock)
        floor = QuoteFloor.from_params(params)
        by_session: dict[int, list[Question]] = {}
        for q in questions:
            by_session.setdefault(question_session(q, sessions[-1]), []).append(q)
        out = _Replay()
        try:
            for s in sessions:
                turns = [t for t in conv.turns if t.session <= s]
                clock.t = max(t.timestamp for t in turns if t.session == s)
                write_conversation(store, dataclasses.replace(conv, turns=turns))
                if live:
                    store.jobs.run_pending(allow_llm=False)
                clock.t += 60.0
                for q in by_session.get(s, []):
                    r = self._ask(store, q)
                    out.session[q.index] = self._recall(q, r)
                    if live:
                        quoted = [h.page.id for h in r.pages if floor.refusal(h) is None]
                        store.segments.record_quoted_pages(quoted[: params.quoting.recall_turns])
                        store.jobs.run_pending(allow_llm=False)
                    clock.t += 30.0
            self._end_of_life(store, clock, questions, out)
            out.stats = _store_stats(store)
        finally:
            store.close()
        return out

    def _end_of_life(self, store: MemoryStore, clock: _Clock, questions: list[Question], out: _Replay) -> None:
        """Every question asked once more on the store as the replay left it, as the static run asks it: the
        same budget, no visit, and the clock at the real time (the static store's clock), so a date the
        question names is read as the static run reads it."""
        clock.t = time.time()
        where = _turn_pages(store)
        for q in questions:
            r = self._ask(store, q)
            out.end[q.index] = self._recall(q, r)
            out.end_turns[q.index] = metrics.fill_turn_budget([_side_turns(u) for u in r.sides], max(self.ks))
            out.evidence[q.index] = {e: where.get(e, {}) for e in q.evidence}

    def _ask(self, store: MemoryStore, q: Question) -> Retrieval:
        from memory_core import RetrievalBudget

        budget = RetrievalBudget(pages=max(self.ks))
        return store.retrieve(q.question, conversation_id=None, budget=budget, record_visits=False)

    def _recall(self, q: Question, r: Retrieval) -> dict[str, float]:
        units = [_side_turns(u) for u in r.sides]
        return {str(k): metrics.recall_acc(q.evidence, metrics.fill_turn_budget(units, k)) for k in self.ks}


def _store_stats(store: MemoryStore) -> dict[str, Any]:
    events = store.event_log.events(limit=1_000_000)
    return {
        "archived_segments": store.segments.count_segments(tier="archive"),
        "mtm_segments": store.segments.count_segments(tier="mtm"),
        "archived_pages": store.pages.count_pages(tier="archive"),
        "pages": store.pages.count_pages(),
        "promotions": sum(1 for e in events if e.kind == "promoted"),
        "visits": sum(1 for e in events if e.kind == "segment_visited"),
        "knowledge": store.persona.count_knowledge(),
    }


def _turn_pages(store: MemoryStore) -> dict[str, dict]:
    """Each dialogue turn's page at the end of the replay: its tier, segment and what the lifecycle did to that
    segment (visits, promotions)."""
    segs = {s.id: s for s in store.segments.list_segments(limit=1_000_000)}
    out: dict[str, dict] = {}
    for p in store.pages.list_pages(limit=1_000_000, order_by="id", descending=False):
        ids = p.meta.get("turn_ids") if isinstance(p.meta, dict) else None
        seg = segs.get(p.segment_id) if p.segment_id is not None else None
        info = {
            "page_id": p.id,
            "tier": p.tier,
            "segment_id": p.segment_id,
            "segment_visits": seg.n_visit if seg else None,
            "segment_promotions": seg.promotions if seg else None,
        }
        for t in ids if isinstance(ids, list) else []:
            out[str(t)] = info
    return out


def _question_rows(sample: Sample, questions: list[Question], lived: _Replay, plain: _Replay) -> list[dict]:
    sessions = sorted({t.session for t in sample.conversation.turns})
    return [
        {
            "sample_id": q.sample_id,
            "qa_index": q.index,
            "question": q.question,
            "category": q.category,
            "evidence": q.evidence,
            "asked_after_session": question_session(q, sessions[-1]),
            "recall": {
                "session": lived.session[q.index],
                "session_no_lifecycle": plain.session[q.index],
                "end_of_life": lived.end[q.index],
                "end_of_life_no_lifecycle": plain.end[q.index],
            },
            "retrieved_end_of_life": lived.end_turns[q.index],
            "evidence_at_end": lived.evidence[q.index],
        }
        for q in questions
    ]


def _summaries(rows: Sequence[dict], run: str, ks: Sequence[int]) -> dict:
    return {f"k{k}": summarize(rows, _row_value("recall", run, str(k))) for k in ks}


def compare_with_static(rows: Sequence[dict], static_rows: Sequence[dict], ks: Sequence[int]) -> dict | None:
    """End-of-life recall against the static run's, question by question: at each k how many questions lost or
    gained and the mean change (points); the questions that lost at k 10 (or the nearest k), with where their
    evidence was at the end (tier, segment, its visits and promotions) and its rank in both retrievals."""
    static = {(r["sample_id"], r["qa_index"]): r for r in static_rows if "mnemo" in r.get("recall", {})}
    pairs = [(r, static[(r["sample_id"], r["qa_index"])]) for r in rows if (r["sample_id"], r["qa_index"]) in static]
    if not pairs:  # the static run ranked no question with mnemo
        return None
    out: dict[str, Any] = {"questions": len(pairs), "by_k": {}}
    for k in ks:
        d = [r["recall"]["end_of_life"][str(k)] - s["recall"]["mnemo"][str(k)] for r, s in pairs]
        out["by_k"][f"k{k}"] = {
            "lost": sum(1 for x in d if x < 0),
            "gained": sum(1 for x in d if x > 0),
            "mean_change_points": round(100.0 * sum(d) / len(d), 2) if d else None,
        }
    k = min(ks, key=lambda x: abs(x - 10))
    lost = [(r, s) for r, s in pairs if r["recall"]["end_of_life"][str(k)] < s["recall"]["mnemo"][str(k)]]
    out["lost_at_k"] = k
    out["lost"] = [
        {
            "sample_id": r["sample_id"],
            "qa_index": r["qa_index"],
            "question": r["question"],
            "category": r["category"],
            "static": s["recall"]["mnemo"][str(k)],
            "end_of_life": r["recall"]["end_of_life"][str(k)],
            "end_of_life_no_lifecycle": r["recall"]["end_of_life_no_lifecycle"][str(k)],
            "evidence": {
                e: {
                    **r["evidence_at_end"].get(e, {}),
                    "static_rank": _rank(e, s["retrieved"]["mnemo"]),
                    "end_of_life_rank": _rank(e, r["retrieved_end_of_life"]),
                }
                for e in r["evidence"]
            },
        }
        for r, s in lost[:LOST_SHOWN]
    ]
    return out


def _rank(turn: str, retrieved: Sequence[str]) -> int | None:
    """The turn's place (1-based) in a retrieval's turns within the largest budget; None when not there."""
    return retrieved.index(turn) + 1 if turn in retrieved else None


def format_lifecycle(life: dict, static: dict | None, ks: Sequence[int]) -> list[str]:
    head = f"{'mnemo':<26} {'cats':<5} " + " ".join(f"{'R@' + str(k):>6}" for k in ks)
    lines = [
        f"lifecycle: sessions replayed in date order, visits, promotion and archiving live (mtm_capacity "
        f"{life['mtm_capacity']}); 'none': the same replay with the static settings, no visit, no memory job",
        "end of life: every question asked again after the whole replay, as the static run asks it; "
        "per session: each question asked after the session its evidence ends in (fewer pages to rank against)",
        head,
        "-" * len(head),
    ]
    runs = life.get("runs") or {"session": life["recall"]}
    for name, by_k in (("static", static), *((RUN_LABELS[r], runs.get(r)) for r in RUNS)):
        if by_k:
            for cats, key in (("1-5", "overall_1_5"), ("1-4", "overall_1_4")):
                vals = [by_k[f"k{k}"][key] for k in ks]
                lines.append(f"{name:<26} {cats:<5} " + " ".join("   -  " if v is None else f"{v:6.1f}" for v in vals))
    vs = life.get("vs_static")
    if vs:
        lines.append(
            f"end of life against static, {vs['questions']} questions: "
            + "; ".join(
                f"R@{k} {c['mean_change_points']:+.1f} points ({c['lost']} lost, {c['gained']} gained)"
                for k, c in ((k, vs["by_k"][f"k{k}"]) for k in ks)
                if c["mean_change_points"] is not None
            )
        )
    for sid, st in life["samples"].items():
        lines.append(
            f"{sid}: {st['archived_segments']} segments archived ({st.get('archived_pages', '?')} of "
            f"{st.get('pages', '?')} pages), {st['mtm_segments']} in mid-term, {st['promotions']} promotions, "
            f"{st['visits']} visits"
            + (
                f"; none: {st['no_lifecycle']['archived_segments']} archived, {st['no_lifecycle']['visits']} visits"
                if "no_lifecycle" in st
                else ""
            )
        )
    return lines
