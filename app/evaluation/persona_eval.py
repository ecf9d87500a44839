"""`mnemo eval locomo --persona`: how much of what a LoCoMo dialogue says about speaker_a its persona holds.

Each conversation is imported in time order as the app imports it (speaker_a the user: the evaluation's
protocol, `app.evaluation.locomo.load_samples`), then every segment is promoted (the "promote_segment"
job, forced for every segment, so the figure measures what a promotion extracts and not when heat lets
it run), by the LLM-free path or, with a chat model, through its JSON completion. The user's facts are
then compared with LoCoMo's gold `observation` lists for speaker_a (each session's, with evidence):

- coverage: the share of gold observations some fact matches;
- precision: the share of facts that match some gold observation.

A fact matches an observation when the cosine of their embeddings (the app's own embedder) is at least
`threshold`. Both texts name speaker_a the same way first: a fact says "The user …", an observation
"Caroline …", and the name (or "the user") alone would lift every cosine, so both are written with "the
person" in its place. Nothing of the dev split is used to write facts: the extraction never sees it.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.importers.writer import write_conversation

if TYPE_CHECKING:
    from app.evaluation.locomo import Embedder, Sample
    from memory_core import MemoryParams, MemoryStore
    from memory_core.types import CompleteJsonFn

DEFAULT_THRESHOLD = 0.6


def gold_observations(raw: dict, speaker: str) -> list[tuple[str, list[str]]]:
    """Speaker's gold observations of a LoCoMo sample, session by session: (text, evidence ids)."""
    out = []
    obs = raw.get("observation") or {}
    for key in sorted(obs, key=lambda k: int(re.sub(r"\D", "", k) or 0)):
        for item in (obs.get(key) or {}).get(speaker) or []:
            if isinstance(item, list) and item and isinstance(item[0], str):
                ev = item[1] if len(item) > 1 else []
                out.append((item[0], [ev] if isinstance(ev, str) else list(ev or [])))
    return out


def neutral(text: str, names: Sequence[str]) -> str:
    """`text` with its subject named the same way whoever wrote it ("The user"/"Caroline" → "the person")."""
    t = re.sub(r"\b[Tt]he user\b", "the person", text)
    for n in names:
        t = re.sub(rf"\b{re.escape(n)}\b", "the person", t)
    return t


def match_matrix(embed: Callable, facts: Sequence[str], gold: Sequence[str], names: Sequence[str]) -> np.ndarray:
    """Cosine of every fact (rows) to every gold observation (columns), both with `neutral` subjects."""
    if not facts or not gold:
        return np.zeros((len(facts), len(gold)), np.float32)
    f = np.asarray(embed([neutral(x, names) for x in facts]), np.float32)
    g = np.asarray(embed([neutral(x, names) for x in gold]), np.float32)
    f /= np.linalg.norm(f, axis=1, keepdims=True) + 1e-9
    g /= np.linalg.norm(g, axis=1, keepdims=True) + 1e-9
    return f @ g.T


def scores(sim: np.ndarray, threshold: float) -> dict[str, float | None]:
    """Coverage and precision (percent) of a fact x gold cosine matrix at `threshold`."""
    if sim.size == 0:
        return {"coverage": 0.0 if sim.shape[1] else None, "precision": 0.0 if sim.shape[0] else None}
    hit = sim >= threshold
    return {
        "coverage": round(100.0 * float(hit.any(axis=0).mean()), 1),
        "precision": round(100.0 * float(hit.any(axis=1).mean()), 1),
    }


class PersonaEval:
    """Import, promote every segment, compare the user's facts with speaker_a's gold observations."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        memory_params: MemoryParams | None = None,
        llm: CompleteJsonFn | None = None,
        llm_model_id: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.embedder = embedder
        self.memory_params = memory_params
        self.llm = llm
        self.llm_model_id = llm_model_id
        self.threshold = threshold
        self.log = log or (lambda _m: None)

    def _open_store(self, path: Path) -> MemoryStore:
        from memory_core import MemoryParams, MemoryStore

        return MemoryStore.open(
            path,
            self.embedder.embed,
            embed_model_id=self.embedder.model_id,
            dim=self.embedder.dim,
            params=self.memory_params or MemoryParams(),
            llm=self.llm,
            llm_model_id=self.llm_model_id,
        )

    def run(self, samples: Sequence[Any], *, limit: int | None = None) -> dict:
        chosen = list(samples)[:limit] if limit else list(samples)
        rows = []
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="mnemo-persona-") as tmp:
            for sample in chosen:
                rows.append(self._run_sample(sample, Path(tmp)))
                r = rows[-1]
                self.log(
                    f"{r['sample_id']}: {r['facts']} facts, {r['gold']} observations, "
                    f"coverage {r['coverage']} %, precision {r['precision']} %"
                )
        return self._report(rows, time.perf_counter() - t0)

    def _run_sample(self, sample: Sample, tmp: Path) -> dict:
        store = self._open_store(tmp / f"{sample.sample_id}.sqlite3")
        try:
            write_conversation(store, sample.conversation)
            store.jobs.run_pending(allow_llm=self.llm is not None)
            for seg in store.segments.list_segments(limit=100_000):  # promote every segment (what, not when)
                store.jobs.enqueue("promote_segment", {"segment_id": seg.id}, key=f"persona-eval:{seg.id}")
            store.jobs.run_pending(allow_llm=self.llm is not None)
            known = store.persona.list_knowledge("user", limit=100_000)
            facts = [k.text for k in known]
            by_model: dict[str, int] = {}
            for k in known:  # the model's own facts, and those of the LLM-free path it fell back to
                by_model[k.model] = by_model.get(k.model, 0) + 1
            others = store.persona.count_knowledge("person")
            sizes = [s.page_count for s in store.segments.list_segments(limit=100_000)]
        finally:
            store.close()
        a, b = sample.speakers
        gold = [g for g, _ in gold_observations(sample.raw, a)]
        sim = match_matrix(self.embedder.embed, facts, gold, [a, b])
        row: dict[str, Any] = {
            "sample_id": sample.sample_id,
            "speaker": a,
            "facts": len(facts),
            "facts_about_others": others,
            "facts_by_model": by_model,
            "gold": len(gold),
            **scores(sim, self.threshold),
            "segments": len(sizes),
            "largest_segment_share": round(100.0 * max(sizes) / sum(sizes), 1) if sizes and sum(sizes) else None,
            "median_segment_size": statistics.median(sizes) if sizes else None,
            "examples": [
                {
                    "fact": f,
                    "best_gold": gold[int(sim[i].argmax())] if gold else None,
                    "cos": round(float(sim[i].max()), 3),
                }
                for i, f in enumerate(facts[:8])
            ]
            if gold
            else [],
        }
        row["_sim"] = sim
        return row

    def _report(self, rows: list[dict], total_s: float) -> dict:
        sims = [r.pop("_sim") for r in rows]
        by_t = {}
        for t in (0.5, 0.55, 0.6, 0.65, 0.7):
            covered = sum(int((s >= t).any(axis=0).sum()) for s in sims if s.size)
            matched = sum(int((s >= t).any(axis=1).sum()) for s in sims if s.size)
            n_gold = sum(r["gold"] for r in rows)
            n_facts = sum(r["facts"] for r in rows)
            by_t[str(t)] = {
                "coverage": round(100.0 * covered / n_gold, 1) if n_gold else None,
                "precision": round(100.0 * matched / n_facts, 1) if n_facts else None,
            }
        return {
            "path": f"model {self.llm_model_id}" if self.llm is not None else "LLM-free",
            "threshold": self.threshold,
            "match": "embedding cosine, speaker's name and 'the user' both written 'the person'",
            "overall": by_t[str(self.threshold)] if str(self.threshold) in by_t else None,
            "by_threshold": by_t,
            "per_sample": rows,
            "total_s": round(total_s, 1),
        }


def format_report(report: dict) -> str:
    lines = [
        f"persona vs LoCoMo gold observations of speaker_a ({report['path']}; match: {report['match']})",
        f"{'sample':<10} {'facts':>6} {'others':>7} {'gold':>6} {'coverage':>9} {'precision':>10} "
        f"{'segments':>9} {'largest %':>10} {'median':>7}",
    ]
    for r in report["per_sample"]:
        lines.append(
            f"{r['sample_id']:<10} {r['facts']:>6} {r['facts_about_others']:>7} {r['gold']:>6} "
            f"{_f(r['coverage']):>9} {_f(r['precision']):>10} {r['segments']:>9} "
            f"{_f(r['largest_segment_share']):>10} {_f(r['median_segment_size']):>7}"
        )
    o = report["overall"] or {}
    lines.append(
        "facts by who wrote them: " + "; ".join(f"{r['sample_id']} {r['facts_by_model']}" for r in report["per_sample"])
    )
    lines.append(
        f"overall at cosine >= {report['threshold']}: coverage {_f(o.get('coverage'))} %, "
        f"precision {_f(o.get('precision'))} %"
    )
    lines.append(
        "other thresholds: "
        + "; ".join(
            f">= {t}: coverage {_f(v['coverage'])} %, precision {_f(v['precision'])} %"
            for t, v in report["by_threshold"].items()
        )
    )
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"
