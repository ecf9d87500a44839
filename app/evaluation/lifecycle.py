"""`mnemo eval locomo --lifecycle`: LoCoMo replayed as a life, not read as a finished file (issue 31).

Each conversation goes into a fresh store session by session, in date order, on the store's clock at the
session's time; after each session the questions whose evidence is all said by then are asked (a question
without evidence after the last session). Each question's recall is measured as in the static evaluation, then
the pages a reply's prompt would quote (the chat's `QuoteFloor`, at most `recall_turns` pages) get their visit
(`store.record_quoted_pages`), and the memory jobs run (promotion on the LLM-free path). `mtm_capacity` is small,
so the coldest segments go to the archive as the conversation grows: recall is measured with heat, promotion and
archiving live, beside the static figure of the same questions.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.evaluation import metrics
from app.evaluation.locomo import Question, Sample, _row_value, _side_turns, summarize
from app.importers.writer import write_conversation

LIFECYCLE_MTM_CAPACITY = 20  # segments kept in mid-term memory during the replay (the default is 200)
_SESSION = re.compile(r"^D(\d+):")


def question_session(q: Question, last: int) -> int:
    """The session after which `q` can be asked: the latest one its evidence is in (`last` without any)."""
    got = [int(m.group(1)) for e in q.evidence if (m := _SESSION.match(e))]
    return max(got) if got else last


class _Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


class LifecycleEval:
    def __init__(
        self,
        embedder,
        *,
        memory_params,
        ks: Sequence[int],
        mtm_capacity: int = LIFECYCLE_MTM_CAPACITY,
        log: Callable[[str], None] | None = None,
    ):
        self.embedder = embedder
        self.params = memory_params
        self.params.tiers.mtm_capacity = mtm_capacity
        self.ks = sorted(set(ks))
        self.log = log or (lambda m: print(m, file=sys.stderr))

    def run(self, samples: Sequence[Sample], chosen: dict[str, list[Question]]) -> dict:
        rows: list[dict] = []
        life: dict[str, dict] = {}
        with tempfile.TemporaryDirectory(prefix="mnemo-lifecycle-") as tmp:
            for sample in samples:
                if chosen.get(sample.sample_id):
                    got, stats = self._replay(sample, chosen[sample.sample_id], Path(tmp))
                    rows += got
                    life[sample.sample_id] = stats
                    self.log(f"lifecycle {sample.sample_id}: {stats}")
        return {
            "recall": {f"k{k}": summarize(rows, _row_value("recall", str(k))) for k in self.ks},
            "mtm_capacity": self.params.tiers.mtm_capacity,
            "samples": life,
        }

    def _replay(self, sample: Sample, questions: list[Question], tmp: Path) -> tuple[list[dict], dict[str, Any]]:
        from app.prompting import QuoteFloor
        from memory_core import MemoryStore, RetrievalBudget

        conv = sample.conversation
        sessions = sorted({t.session for t in conv.turns})
        clock = _Clock(min(t.timestamp for t in conv.turns))
        store = MemoryStore.open(
            tmp / f"{sample.sample_id}.sqlite3",
            self.embedder.embed,
            embed_model_id=self.embedder.model_id,
            dim=self.embedder.dim,
            params=self.params,
            clock=clock,
            embed_tokens=getattr(self.embedder, "embed_with_tokens", None),
        )
        floor = QuoteFloor.from_params(self.params)
        by_session: dict[int, list[Question]] = {}
        for q in questions:
            by_session.setdefault(question_session(q, sessions[-1]), []).append(q)
        rows: list[dict] = []
        try:
            for s in sessions:
                turns = [t for t in conv.turns if t.session <= s]
                clock.t = max(t.timestamp for t in turns if t.session == s)
                write_conversation(store, dataclasses.replace(conv, turns=turns))
                store.run_pending(allow_llm=False)
                clock.t += 60.0
                for q in by_session.get(s, []):
                    r = store.retrieve(q.question, None, RetrievalBudget(pages=max(self.ks)))
                    units = [_side_turns(u) for u in r.sides]
                    recall = {
                        str(k): metrics.recall_acc(q.evidence, metrics.fill_turn_budget(units, k)) for k in self.ks
                    }
                    rows.append({"category": q.category, "recall": recall})
                    quoted = [h.page.id for h in r.pages if floor.refusal(h) is None][
                        : self.params.quoting.recall_turns
                    ]
                    store.record_quoted_pages(quoted)
                    store.run_pending(allow_llm=False)
                    clock.t += 30.0
            stats = {
                "archived_segments": store.count_segments(tier="archive"),
                "mtm_segments": store.count_segments(tier="mtm"),
                "promotions": sum(1 for e in store.events(limit=100_000) if e.kind == "promoted"),
                "visits": sum(1 for e in store.events(limit=100_000) if e.kind == "segment_visited"),
            }
        finally:
            store.close()
        return rows, stats


def format_lifecycle(life: dict, static: dict | None, ks: Sequence[int]) -> list[str]:
    head = f"{'mnemo':<14} {'cats':<5} " + " ".join(f"{'R@' + str(k):>6}" for k in ks)
    lines = [
        f"lifecycle: sessions replayed in date order, questions after their evidence, visits and promotion live, "
        f"mtm_capacity {life['mtm_capacity']}",
        head,
        "-" * len(head),
    ]
    for name, by_k in (("static", static), ("lifecycle", life["recall"])):
        if by_k:
            for cats, key in (("1-5", "overall_1_5"), ("1-4", "overall_1_4")):
                vals = [by_k[f"k{k}"][key] for k in ks]
                lines.append(f"{name:<14} {cats:<5} " + " ".join("   -  " if v is None else f"{v:6.1f}" for v in vals))
    for sid, st in life["samples"].items():
        lines.append(
            f"{sid}: {st['archived_segments']} segments archived, {st['mtm_segments']} in mid-term, "
            f"{st['promotions']} promotions, {st['visits']} visits"
        )
    return lines
