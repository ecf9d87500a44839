"""`mnemo eval locomo`: LoCoMo retrieval (recall_acc at turn budgets) and QA, ours beside baselines.

Protocol (documented in docs/eval.md):
- Each sample is imported into a fresh store in a temp dir through the same code the user's
  `mnemo ingest` runs (`parse_locomo` + `write_conversation`: LLM-free bulk path).
- "mnemo" ranks with `store.retrieve(question, conversation_id=None, budget=RetrievalBudget(
  pages=P), record_visits=False)`: the question comes as if asked in a new chat, so the old
  conversation's STM is not handed over for free; whatever tiers the memory searches
  (STM pages included, when its ranking includes them) compete in one ranking, whose turns
  (`Retrieval.sides`: a page's better side first) fill the budget as the chat prompt quotes them.
  `record_visits=False` keeps the store unchanged, so question order does not matter.
- A retriever's ranked units (mnemo: the turns of its pages ranked one side at a time,
  `Retrieval.sides`, a side → its turn ids from the page meta `turn_ids` / `user_turns`, a page
  not split → all of them; a baseline → one turn) fill a budget of k turns
  (`metrics.fill_turn_budget`): a side of two merged turns costs two; the last unit is cut to its
  first turns that fit; recall_acc@k per question, averaged per category, over categories 1–4 and
  over 1–5.
- Baselines share the embedder and the exact turn texts: flat dense over turns, BM25 over
  turns (FTS5), and their RRF fusion ("hybrid").
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.evaluation import metrics
from app.evaluation.baselines import BM25Turns, FlatDense, rrf_fuse
from app.importers.base import ImportFatalError, ParsedConversation
from app.importers.locomo import parse_locomo
from app.importers.progress import ProgressBar
from app.importers.reading import decode_text, parse_json, read_bytes
from app.importers.writer import write_conversation

if TYPE_CHECKING:
    from app.evaluation.qa import Answer, QAAnswerer
    from memory_core import MemoryParams, MemoryStore, Retrieval
    from memory_core.types import Page, SideHit
    from models.chat import ChatModel

RETRIEVERS = ("mnemo", "flat-dense", "bm25", "hybrid")
KS = (5, 10, 25, 50)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
QA_MODES = ("memory", "no-memory", "full-context")
BASELINE_DEPTH = 100  # turns ranked by each baseline (enough for the largest budget and for fusion)


@dataclass
class Question:
    sample_id: str
    index: int  # position in the sample's qa list
    question: str
    category: int
    answer: Any
    evidence_raw: list
    evidence: list[str]
    adversarial_answer: str | None = None

    @property
    def gold(self) -> str:
        return metrics.gold_answer({"answer": self.answer, "category": self.category})


@dataclass
class Sample:
    sample_id: str
    conversation: ParsedConversation
    questions: list[Question]
    speakers: tuple[str, str]
    raw: dict = field(repr=False, default_factory=dict)


def load_samples(path: str | Path, sample_ids: Sequence[str] | None = None) -> tuple[list[Sample], list[str]]:
    """Read a LoCoMo file with the importer's reader/parser; (samples, warnings)."""
    data, name = read_bytes(Path(path))
    obj = parse_json(decode_text(data, name), name)
    parsed = parse_locomo(obj, name)
    warnings = [str(i) for i in parsed.issues]
    raw_by_id = {s.get("sample_id"): s for s in (obj if isinstance(obj, list) else [obj]) if isinstance(s, dict)}
    samples: list[Sample] = []
    for conv in parsed.conversations:
        if sample_ids and conv.external_id not in sample_ids:
            continue
        if conv.people is not None:  # the protocol: speaker_a is the user (app.importers.people)
            conv.people = conv.people.with_me(conv.people.user_side)
        raw = raw_by_id.get(conv.external_id, {})
        c = raw.get("conversation", {})
        qs = []
        for i, qa in enumerate(raw.get("qa") or []):
            if (
                not isinstance(qa, dict)
                or not isinstance(qa.get("question"), str)
                or qa.get("category") not in CATEGORY_NAMES
            ):
                warnings.append(f"{name}: {conv.external_id}, qa {i + 1}: malformed question — skipped")
                continue
            ev = metrics.normalize_evidence(qa.get("evidence") or [])
            qs.append(
                Question(
                    conv.external_id,
                    i,
                    qa["question"],
                    int(qa["category"]),
                    qa.get("answer"),
                    list(qa.get("evidence") or []),
                    ev,
                    qa.get("adversarial_answer"),
                )
            )
        samples.append(Sample(conv.external_id, conv, qs, (c.get("speaker_a", "A"), c.get("speaker_b", "B")), raw))
    if sample_ids:
        missing = [s for s in sample_ids if s not in {x.sample_id for x in samples}]
        if missing:
            raise ImportFatalError(
                f"{name}: no sample(s) {', '.join(missing)}; "
                f"available: {', '.join(c.external_id for c in parsed.conversations)}"
            )
    return samples, warnings


def spread_limit(samples: Sequence[Sample], limit: int | None) -> dict[str, list[Question]]:
    """`limit` questions in total: shared round-robin among the samples, and within a sample
    taken evenly spaced over its qa list (LoCoMo lists are grouped by category, so the first
    questions alone would be nearly all multi-hop and temporal ones)."""
    if limit is None:
        return {s.sample_id: list(s.questions) for s in samples}
    quota = {s.sample_id: 0 for s in samples}
    left = max(0, limit)
    while left > 0:
        progressed = False
        for s in samples:
            if left and quota[s.sample_id] < len(s.questions):
                quota[s.sample_id] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    chosen: dict[str, list[Question]] = {}
    for s in samples:
        n, q = len(s.questions), quota[s.sample_id]
        chosen[s.sample_id] = [s.questions[(i * n) // q] for i in range(q)] if q else []
    return chosen


def _pct(values: Sequence[float]) -> float | None:
    return None if not values else round(100.0 * sum(values) / len(values), 2)


def _present(values: Iterable[float | None]) -> list[float]:
    """The values a question has (a category-5 question has no A-Mem score, for one)."""
    return [v for v in values if v is not None]


def _row_value(*path: str) -> Callable[[dict], float | None]:
    """A `summarize` key: the row's value at the nested keys `path`, e.g. ("recall", "bm25", "10")."""

    def key(row: dict) -> float | None:
        value: Any = row
        for name in path:
            value = value[name]
        return value

    return key


def summarize(rows: Sequence[dict], key: Callable[[dict], float | None]) -> dict:
    """Per category and overall (1–4, 1–5) means of `key(row)`, in percent, with counts."""
    by_cat: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for cat in CATEGORY_NAMES:
        vals = _present(key(r) for r in rows if r["category"] == cat)
        by_cat[str(cat)] = _pct(vals)
        counts[str(cat)] = len(vals)
    v14 = _present(key(r) for r in rows if r["category"] in (1, 2, 3, 4))
    v15 = _present(key(r) for r in rows)
    return {
        "overall_1_4": _pct(v14),
        "overall_1_5": _pct(v15),
        "by_category": by_cat,
        "n": counts,
        "n_1_4": len(v14),
        "n_1_5": len(v15),
    }


def _latency(ms: Sequence[float]) -> dict:
    if not ms:
        return {}
    s = sorted(ms)

    def p(q: float) -> float:
        return s[min(len(s) - 1, int(math.ceil(q * len(s))) - 1)]

    return {
        "mean_ms": round(statistics.fmean(s), 2),
        "p50_ms": round(p(0.5), 2),
        "p95_ms": round(p(0.95), 2),
        "max_ms": round(s[-1], 2),
        "n": len(s),
    }


@dataclass
class _Rankers:
    """One sample's retrievers: the store (mnemo), the baselines' indexes and the questions' vectors."""

    store: Any
    dense: Any
    bm25: Any
    qvecs: Any
    q_embed_ms: float


class Embedder(Protocol):
    """What the evaluations embed with: models.embedder.OnnxEmbedder's interface (a test's stand-in may
    lack `embed_with_tokens`; the evaluations look for it with getattr)."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_with_tokens(
        self, texts: Sequence[str], contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, list[str]]]]: ...


ASKED_BEFORE_REPLY = "I'm not sure, I don't have that information."


class LocomoEval:
    def __init__(
        self,
        embedder: Embedder,
        *,
        memory_params: MemoryParams | None = None,
        retrievers: Sequence[str] = RETRIEVERS,
        ks: Sequence[int] = KS,
        qa_model: ChatModel | None = None,
        qa_modes: Sequence[str] = QA_MODES,
        qa_turns: int | None = None,
        store_factory: Callable[[Path], Any] | None = None,
        progress: bool = True,
        log: Callable[[str], None] | None = None,
        asked_before: str | None = None,
        ablate: bool = False,
        segments: bool = False,
    ) -> None:
        self.embedder = embedder
        # each sample's mid-term segments after the import: count, largest share, median size, titles
        self.segments = segments
        self.segment_stats: dict[str, dict] = {}
        self.memory_params = memory_params
        self.retrievers = [r for r in RETRIEVERS if r in retrievers]
        self.ks = sorted(set(int(k) for k in ks))
        self.qa_model = qa_model
        self.qa_modes = list(qa_modes)
        # the chat agent's own budget of recalled turns unless told (MemoryParams.quoting.recall_turns)
        self.qa_turns = qa_turns or self._params().quoting.recall_turns
        self.store_factory = store_factory or self._open_store
        self.progress = progress
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        if asked_before not in (None, "same", "all"):
            raise ValueError(f"asked_before must be 'same' or 'all', not {asked_before!r}")
        self.asked_before = asked_before  # None, "same" (that question) or "all" (every question of a sample)
        # mnemo's recall with each ranking stage switched off in turn (memory_core.recall.ranking.SWITCHABLE)
        self.ablate = ablate

    # -- stores ------------------------------------------------------------------------------
    def _open_store(self, path: Path) -> MemoryStore:
        from memory_core import MemoryStore

        return MemoryStore.open(
            path,
            self.embedder.embed,
            embed_model_id=self.embedder.model_id,
            dim=self.embedder.dim,
            params=self._params(),
            # an embedder without token vectors ranks without the word-by-word match
            embed_tokens=getattr(self.embedder, "embed_with_tokens", None),
        )

    def _params(self) -> MemoryParams:
        from memory_core import MemoryParams

        return self.memory_params or MemoryParams()

    def _retrieve(self, store: MemoryStore, question: str, pages: int, off: Sequence[str] = ()) -> Retrieval:
        from memory_core import RetrievalBudget

        budget = RetrievalBudget(pages=pages)
        if off:
            return store.retrieve(question, conversation_id=None, budget=budget, record_visits=False, off=off)
        return store.retrieve(question, conversation_id=None, budget=budget, record_visits=False)

    def _ask_before(self, store: MemoryStore, question: str) -> tuple[int, int]:
        """--asked-before: the question was asked once already, in a chat of its own, and got a
        non-answer (what a small model often says); (chat id, page id) of the page that left."""
        cid = store.conversations.create_conversation("asked before")
        return cid, store.intake.add_page(cid, question, ASKED_BEFORE_REPLY)

    # -- run ------------------------------------------------------------------------------------
    def run(self, samples: Sequence[Sample], *, limit: int | None = None, data_path: str = "") -> dict:
        t_start = time.perf_counter()
        chosen = spread_limit(samples, limit)
        per_question: list[dict] = []
        timings: dict[str, Any] = {
            "ingest_s": {},
            "baseline_index_s": {},
            "retrieval_ms": {r: [] for r in self.retrievers},
        }
        qa_answerer = None
        if self.qa_model is not None:
            from app.chat.prompting import QuoteFloor
            from app.evaluation.qa import QAAnswerer

            qa_answerer = QAAnswerer(
                self.qa_model, memory_turns=self.qa_turns, floor=QuoteFloor.from_params(self._params())
            )
        need_store = "mnemo" in self.retrievers or (qa_answerer is not None and "memory" in self.qa_modes)
        total_q = sum(len(v) for v in chosen.values())
        steps = total_q * (1 + (len(self.qa_modes) if qa_answerer is not None else 0))
        bar = ProgressBar(steps, label="eval locomo", unit="steps", enabled=self.progress)
        with tempfile.TemporaryDirectory(prefix="mnemo-eval-") as tmp:
            for sample in samples:
                questions = chosen[sample.sample_id]
                if not questions:
                    continue
                rows = self._run_sample(sample, questions, Path(tmp), need_store, qa_answerer, timings, bar)
                per_question.extend(rows)
        bar.close()
        return self._report(samples, chosen, per_question, timings, time.perf_counter() - t_start, data_path)

    def _run_sample(
        self,
        sample: Sample,
        questions: list[Question],
        tmp: Path,
        need_store: bool,
        qa_answerer: QAAnswerer | None,
        timings: dict,
        bar: ProgressBar,
    ) -> list[dict]:
        store = bm25 = None
        try:
            store, dense, bm25 = self._open_sample(sample, tmp, need_store, timings)
            t0 = time.perf_counter()
            qvecs = self.embedder.embed([q.question for q in questions]) if dense is not None else None
            # the questions are embedded in one batch; each dense ranking is charged its share
            q_embed_ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(questions)) if dense is not None else 0.0
            rankers = _Rankers(store, dense, bm25, qvecs, q_embed_ms)
            known = {t.turn_id for t in sample.conversation.turns}
            rows: list[dict] = []
            retrievals: list[Any] = []
            # --asked-before all: every question of the sample was asked once already, each in a chat of its
            # own; their page ids as strings, as they appear in the ranked units ("page:ID:side")
            askings = (
                {str(self._ask_before(store, q.question)[1]) for q in questions}
                if self.asked_before == "all" and store is not None
                else set()
            )
            for qi, q in enumerate(questions):
                asked = (
                    self._ask_before(store, q.question) if self.asked_before == "same" and store is not None else None
                )
                ranked = self._rank_question(rankers, qi, q, timings, retrievals)
                if need_store and store is not None and "mnemo" not in self.retrievers:
                    retrievals.append(self._retrieve(store, q.question, self.qa_turns))
                row = self._question_row(q, ranked, known)
                if self.ablate and store is not None:
                    row["ablation"] = self._ablation_recall(store, q)
                if asked is not None and store is not None:
                    cid, pid = asked
                    recalled = any(t.startswith(f"page:{pid}:") for u in ranked.get("mnemo", []) for t in u)
                    row["asked_before"] = {"page_id": pid, "recalled": recalled}
                    store.curation.forget("page", pid)
                    store.conversations.delete_conversation(cid)
                if askings:
                    top = metrics.fill_turn_budget(ranked.get("mnemo", []), 10)
                    row["asked_before"] = {
                        "askings_in_top_10": len({t.split(":")[1] for t in top if t.startswith("page:")} & askings)
                    }
                rows.append(row)
                bar.update(1, note=f"{sample.sample_id} retrieval")
            if qa_answerer is not None:
                self._answer_sample(sample, questions, rows, retrievals, qa_answerer, bar)
            return rows
        finally:
            if bm25 is not None:
                bm25.close()
            if store is not None:
                store.close()

    def _open_sample(
        self, sample: Sample, tmp: Path, need_store: bool, timings: dict
    ) -> tuple[MemoryStore | None, FlatDense | None, BM25Turns | None]:
        """The sample's store (imported) and the baselines' indexes that the retrievers asked for need."""
        conv = sample.conversation
        turn_ids = [t.turn_id for t in conv.turns]
        turn_texts = [t.text for t in conv.turns]
        store = None
        if need_store:
            t0 = time.perf_counter()
            store = self.store_factory(tmp / f"{sample.sample_id}.sqlite3")
            write_conversation(store, conv)
            timings["ingest_s"][sample.sample_id] = round(time.perf_counter() - t0, 3)
            if self.segments:
                self.segment_stats[sample.sample_id] = segment_stats(store)
        t0 = time.perf_counter()
        dense = (
            FlatDense(turn_ids, turn_texts, self.embedder.embed)
            if {"flat-dense", "hybrid"} & set(self.retrievers)
            else None
        )
        bm25 = BM25Turns(turn_ids, turn_texts) if {"bm25", "hybrid"} & set(self.retrievers) else None
        timings["baseline_index_s"][sample.sample_id] = round(time.perf_counter() - t0, 3)
        return store, dense, bm25

    def _rank_question(
        self, rk: _Rankers, qi: int, q: Question, timings: dict, retrievals: list
    ) -> dict[str, list[list[str]]]:
        """Each retriever's ranked units for question `qi`, its latency added to `timings`; mnemo's
        Retrieval appended to `retrievals` (the QA prompt's memory)."""
        ranked: dict[str, list[list[str]]] = {}
        dense_rank = bm25_rank = None
        spent: dict[str, float] = {}
        for name in self.retrievers:
            t0 = time.perf_counter()
            if name == "mnemo":
                r = self._retrieve(rk.store, q.question, max(self.ks))
                ranked[name] = [_side_turns(u) for u in r.sides]
                retrievals.append(r)
            elif name == "flat-dense":
                dense_rank = rk.dense.rank(rk.qvecs[qi], BASELINE_DEPTH)
                ranked[name] = [[d] for d in dense_rank]
                t0 -= rk.q_embed_ms / 1000.0
            elif name == "bm25":
                bm25_rank = rk.bm25.rank(q.question, BASELINE_DEPTH)
                ranked[name] = [[d] for d in bm25_rank]
            elif name == "hybrid":
                dr = dense_rank if dense_rank is not None else rk.dense.rank(rk.qvecs[qi], BASELINE_DEPTH)
                br = bm25_rank if bm25_rank is not None else rk.bm25.rank(q.question, BASELINE_DEPTH)
                ranked[name] = [[d] for d in rrf_fuse([dr, br], n=BASELINE_DEPTH)]
            spent[name] = (time.perf_counter() - t0) * 1000.0
            if name == "hybrid":  # its latency includes the two rankings it fuses, even when reused
                spent[name] += (spent["flat-dense"] if "flat-dense" in spent else rk.q_embed_ms) + spent.get(
                    "bm25", 0.0
                )
            timings["retrieval_ms"][name].append(spent[name])
        return ranked

    def _question_row(self, q: Question, ranked: dict[str, list[list[str]]], known: set[str]) -> dict:
        """The report's row of one question: what each retriever returned within the largest budget, and
        its recall at each k."""
        row: dict[str, Any] = {
            "sample_id": q.sample_id,
            "qa_index": q.index,
            "question": q.question,
            "category": q.category,
            "answer": q.answer if q.category != 5 else None,
            "adversarial_answer": q.adversarial_answer,
            "evidence_raw": q.evidence_raw,
            "evidence": q.evidence,
            "evidence_not_in_conversation": [e for e in q.evidence if e not in known],
            "retrieved": {},
            "recall": {},
        }
        for name, units in ranked.items():
            row["retrieved"][name] = metrics.fill_turn_budget(units, max(self.ks))
            row["recall"][name] = self._recall_at_ks(q, units)
        return row

    def _recall_at_ks(self, q: Question, units: list[list[str]]) -> dict[str, float]:
        return {str(k): metrics.recall_acc(q.evidence, metrics.fill_turn_budget(units, k)) for k in self.ks}

    def _ablation_recall(self, store: MemoryStore, q: Question) -> dict[str, dict[str, float]]:
        """--ablate: mnemo's recall at each k with each ranking stage switched off in turn."""
        from memory_core.recall.ranking import SWITCHABLE

        out = {}
        for stage in SWITCHABLE:
            r = self._retrieve(store, q.question, max(self.ks), off=(stage,))
            out[stage] = self._recall_at_ks(q, [_side_turns(u) for u in r.sides])
        return out

    def _answer_sample(
        self,
        sample: Sample,
        questions: list[Question],
        rows: list[dict],
        retrievals: list,
        qa: QAAnswerer,
        bar: ProgressBar,
    ) -> None:
        """QA mode by mode (so each mode's shared prompt prefix stays in the KV cache)."""
        for row in rows:
            row["qa"] = {}
        context = None
        if "full-context" in self.qa_modes:
            sessions: dict[int, list] = {}
            for t in sample.conversation.turns:
                sessions.setdefault(t.session, []).append(t)
            ordered = [(ts[0].timestamp, [t.text for t in ts]) for _, ts in sorted(sessions.items())]
            context = qa.full_context(sample.sample_id, ordered, sample.speakers)
        for mode in self.qa_modes:
            for i, (q, row) in enumerate(zip(questions, rows)):
                if mode == "memory":
                    ans = qa.answer_memory(q.question, retrievals[i], sample.speakers)
                elif mode == "no-memory":
                    ans = qa.answer_no_memory(q.question, sample.speakers)
                else:
                    assert context is not None  # built above for "full-context"
                    ans = qa.answer_full(q.question, context, sample.speakers)
                row["qa"][mode] = score_answer(ans, q)
                bar.update(1, note=f"{sample.sample_id} {mode}")

    # -- report ------------------------------------------------------------------------------------
    def _ablation_summary(self, rows: list[dict]) -> dict:
        """Recall summaries by k of mnemo with every stage ("none" off) and with each stage off in turn."""
        from memory_core.recall.ranking import SWITCHABLE

        rows = [r for r in rows if "ablation" in r]
        out = {"none": {f"k{k}": summarize(rows, _row_value("recall", "mnemo", str(k))) for k in self.ks}}
        for stage in SWITCHABLE:
            out[stage] = {f"k{k}": summarize(rows, _row_value("ablation", stage, str(k))) for k in self.ks}
        return out

    def _report(
        self,
        samples: Sequence[Sample],
        chosen: dict[str, list[Question]],
        rows: list[dict],
        timings: dict,
        total_s: float,
        data_path: str,
    ) -> dict:
        retrieval = {}
        for name in self.retrievers:
            retrieval[name] = {f"k{k}": summarize(rows, _row_value("recall", name, str(k))) for k in self.ks}
        qa_summary = {}
        if rows and "qa" in rows[0]:
            for mode in self.qa_modes:
                qrows = [r for r in rows if mode in r.get("qa", {})]
                qa_summary[mode] = {
                    "official_f1": summarize(qrows, _row_value("qa", mode, "official_f1")),
                    "amem_f1": summarize(qrows, _row_value("qa", mode, "amem_f1")),
                    "bleu1": summarize(qrows, _row_value("qa", mode, "bleu1")),
                    "prompt_tokens_mean": round(statistics.fmean(r["qa"][mode]["prompt_tokens"] for r in qrows), 1),
                    "answer_s_mean": round(statistics.fmean(r["qa"][mode]["seconds"] for r in qrows), 3),
                    "answer_s_total": round(sum(r["qa"][mode]["seconds"] for r in qrows), 2),
                }
        lat = {name: _latency(v) for name, v in timings["retrieval_ms"].items()}
        return {
            "benchmark": "locomo",
            "data": str(data_path),
            "samples": [s.sample_id for s in samples if chosen[s.sample_id]],
            "questions": len(rows),
            "turns": sum(s.conversation.n_turns for s in samples if chosen[s.sample_id]),
            "ks": self.ks,
            "retrievers": self.retrievers,
            "embed_model_id": getattr(self.embedder, "model_id", ""),
            "memory_params": self.memory_params.to_dict() if self.memory_params is not None else None,
            "qa_model": getattr(self.qa_model, "model_id", None) if self.qa_model is not None else None,
            "qa_turns": self.qa_turns if self.qa_model is not None else None,
            "retrieval": retrieval,
            "asked_before": (
                {
                    "mode": self.asked_before,
                    "reply": ASKED_BEFORE_REPLY,
                    "questions": len(rows),
                    "recalled": sum(1 for r in rows if r.get("asked_before", {}).get("recalled")),
                    "askings_in_top_10": sum(r.get("asked_before", {}).get("askings_in_top_10", 0) for r in rows),
                }
                if self.asked_before
                else None
            ),
            "ablation": self._ablation_summary(rows) if self.ablate else None,
            "segments": dict(self.segment_stats) if self.segments else None,
            "qa": qa_summary,
            "timings": {
                "total_s": round(total_s, 2),
                "ingest_s": timings["ingest_s"],
                "baseline_index_s": timings["baseline_index_s"],
                "retrieval": lat,
            },
            "per_question": rows,
        }


def segment_stats(store: MemoryStore, titles: int = 5) -> dict:
    """A store's segments (mid-term and archived): how many, the largest one's share of all the pages, the
    median size, and the biggest segments' titles, for `--segments` (issue 31: topical segments)."""
    segs = store.segments.list_segments(limit=1_000_000)
    pages = store.pages.count_pages()
    sizes = sorted((s.page_count for s in segs), reverse=True)
    big = sorted(segs, key=lambda s: (-s.page_count, s.id))[:titles]
    return {
        "pages": pages,
        "segments": len(segs),
        "largest": sizes[0] if sizes else 0,
        "largest_share": round(100.0 * sizes[0] / pages, 1) if sizes and pages else 0.0,
        "median_size": statistics.median(sizes) if sizes else 0,
        "single_page": sum(1 for n in sizes if n == 1),
        "titles": [[s.page_count, s.title] for s in big],
    }


def format_segments(stats: dict[str, dict]) -> list[str]:
    head = f"{'sample':<10} {'pages':>6} {'segments':>9} {'largest':>8} {'share %':>8} {'median':>7} {'single':>7}"
    lines = ["segments after the import (largest share of the conversation's pages):", head, "-" * len(head)]
    for sid, st in stats.items():
        lines.append(
            f"{sid:<10} {st['pages']:>6} {st['segments']:>9} {st['largest']:>8} {st['largest_share']:>8.1f} "
            f"{st['median_size']:>7} {st['single_page']:>7}"
        )
    for sid, st in stats.items():
        lines.append(f"{sid} biggest: " + "; ".join(f"{t} ({n})" for n, t in st["titles"]))
    return lines


def _page_turns(page: Page) -> list[str]:
    meta = page.meta if isinstance(page.meta, dict) else {}
    ids = meta.get("turn_ids")
    if isinstance(ids, list) and ids:
        return [str(i) for i in ids]
    # a page without turn ids (not from the importer, e.g. a chat) costs its turns too: one per side
    return [
        f"page:{page.id}:{side}"
        for side, text in (("user", page.user_text), ("assistant", page.assistant_text))
        if text
    ] or [f"page:{page.id}"]


def _side_turns(unit: SideHit) -> list[str]:
    """The turns a ranked side of a page (memory_core.SideHit) holds: the user side's are the first
    `user_turns` of the page's `turn_ids` (app.importers.pages). A page without that split costs all its turns."""
    page = unit.hit.page
    turns = _page_turns(page)
    if unit.side == "page":
        return turns
    meta = page.meta if isinstance(page.meta, dict) else {}
    n = meta.get("user_turns")
    if isinstance(meta.get("turn_ids"), list) and meta["turn_ids"]:
        if isinstance(n, int) and 0 < n < len(turns):
            return turns[:n] if unit.side == "user" else turns[n:]
        return turns
    side = f"page:{page.id}:{unit.side}"
    return [side] if side in turns else turns


def score_answer(ans: Answer, q: Question) -> dict:
    out = {
        "prediction": ans.prediction,
        "prompt_tokens": ans.prompt_tokens,
        "seconds": round(ans.seconds, 3),
        "official_f1": metrics.locomo_f1(ans.prediction, q.answer, q.category),
    }
    if q.category == 5:  # no gold answer: the A-Mem-style scores are left out
        out["amem_f1"] = None
        out["bleu1"] = None
    else:
        out["amem_f1"] = metrics.amem_f1(ans.prediction, q.gold if q.category == 3 else str(q.answer))
        out["bleu1"] = metrics.bleu1(ans.prediction, q.gold if q.category == 3 else str(q.answer))
    out.update({k: v for k, v in ans.detail.items()})
    return out


# -- printing ------------------------------------------------------------------------------------
def _f(v: float | None) -> str:
    return "   -" if v is None else f"{v:5.1f}"


def format_tables(report: dict) -> str:
    ks = report["ks"]
    lines = [
        f"LoCoMo retrieval recall_acc (%) — {report['questions']} questions, samples "
        f"{', '.join(report['samples'])}; budget k = retrieved dialog turns"
    ]
    asked = report.get("asked_before")
    if asked and asked.get("mode") == "all":
        lines.append(
            f'every question asked once before, each in a chat of its own, answered "{asked["reply"]}"; '
            f"{asked['askings_in_top_10']} of those askings within the questions' 10-turn budgets"
        )
    elif asked:
        lines.append(
            f'each question asked once before in a chat of its own, answered "{asked["reply"]}"; '
            f"that earlier asking recalled for {asked['recalled']} of {asked['questions']} questions"
        )
    head = f"{'retriever':<12} {'cats':<5} " + " ".join(f"{'R@' + str(k):>6}" for k in ks)
    lines += [head, "-" * len(head)]
    for name, by_k in report["retrieval"].items():
        for cats, key in (("1-5", "overall_1_5"), ("1-4", "overall_1_4")):
            lines.append(f"{name:<12} {cats:<5} " + " ".join(f"{_f(by_k[f'k{k}'][key]):>6}" for k in ks))
    if report["retrieval"]:
        lines += ["", *format_by_category(report["retrieval"], ks)]
    lat = report["timings"]["retrieval"]
    if lat:
        lines.append("")
        lines.append(
            "retrieval latency per question: "
            + "; ".join(f"{n} p50 {v['p50_ms']:.1f} ms p95 {v['p95_ms']:.1f} ms" for n, v in lat.items() if v)
        )
    if report["timings"]["ingest_s"]:
        ing = report["timings"]["ingest_s"]
        lines.append(
            f"ingest (fresh store per sample): {sum(ing.values()):.1f} s total "
            f"({', '.join(f'{k} {v:.1f}s' for k, v in ing.items())})"
        )
    if report.get("ablation"):
        lines += ["", *format_ablation(report["ablation"], ks)]
    if report.get("segments"):
        lines += ["", *format_segments(report["segments"])]
    if report.get("qa"):
        lines += ["", *format_qa(report["qa"], report["qa_model"])]
    lines.append(f"total {report['timings']['total_s']:.1f} s")
    return "\n".join(lines)


def format_by_category(retrieval: dict, ks: Sequence[int]) -> list[str]:
    """Each retriever's recall per LoCoMo category at each k (the heading gives each category's questions)."""
    n = next(iter(retrieval.values()))[f"k{ks[0]}"]["n"]
    cat_head = f"{'retriever':<12} {'k':>3} " + " ".join(
        f"{CATEGORY_NAMES[c][:11] + '(' + str(n[str(c)]) + ')':>16}" for c in CATEGORY_NAMES
    )
    lines = ["per category:", cat_head, "-" * len(cat_head)]
    for name, by_k in retrieval.items():
        for k in ks:
            lines.append(
                f"{name:<12} {k:>3} "
                + " ".join(f"{_f(by_k[f'k{k}']['by_category'][str(c)]):>16}" for c in CATEGORY_NAMES)
            )
    return lines


def format_qa(qa: dict, qa_model: str) -> list[str]:
    """The QA scores of each mode (with memory, without, the full conversation), then official F1 by category."""
    lines = [f"LoCoMo QA with {qa_model} (official F1 cats 1-5 / 1-4, A-Mem F1 and BLEU-1 cats 1-4, %)"]
    qhead = f"{'mode':<13} {'F1 1-5':>7} {'F1 1-4':>7} {'A-Mem F1':>9} {'BLEU-1':>7} {'tokens':>7} {'s/answer':>9}"
    lines += [qhead, "-" * len(qhead)]
    for mode, s in qa.items():
        lines.append(
            f"{mode:<13} {_f(s['official_f1']['overall_1_5']):>7} {_f(s['official_f1']['overall_1_4']):>7} "
            f"{_f(s['amem_f1']['overall_1_4']):>9} {_f(s['bleu1']['overall_1_4']):>7} "
            f"{s['prompt_tokens_mean']:>7.0f} {s['answer_s_mean']:>9.2f}"
        )
    lines.append(
        "official F1 by category: "
        + "; ".join(
            f"{mode}: "
            + ", ".join(f"{c}={_f(s['official_f1']['by_category'][str(c)]).strip()}" for c in CATEGORY_NAMES)
            for mode, s in qa.items()
        )
    )
    return lines


def format_ablation(ablation: dict, ks: Sequence[int]) -> list[str]:
    """The ablation table: mnemo's recall (categories 1-5) at each k with every stage, then with each
    stage off (memory_core.recall.ranking.SWITCHABLE), and the change against every stage on."""
    head = (
        f"{'stage off':<18} "
        + " ".join(f"{'R@' + str(k):>6}" for k in ks)
        + "   "
        + " ".join(f"{'Δ@' + str(k):>6}" for k in ks)
    )
    lines = ["mnemo recall_acc (%, categories 1-5) with one ranking stage switched off:", head, "-" * len(head)]
    base = ablation["none"]
    for stage, by_k in ablation.items():
        vals = [by_k[f"k{k}"]["overall_1_5"] for k in ks]
        deltas = [
            None if v is None or base[f"k{k}"]["overall_1_5"] is None else v - base[f"k{k}"]["overall_1_5"]
            for v, k in zip(vals, ks)
        ]
        lines.append(
            f"{stage:<18} "
            + " ".join(f"{_f(v):>6}" for v in vals)
            + "   "
            + " ".join(f"{'' if x is None else f'{x:+.1f}':>6}" for x in deltas)
        )
    return lines


def write_json(report: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=1, ensure_ascii=False, default=_json_default), encoding="utf-8")


def _json_default(o: object) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
