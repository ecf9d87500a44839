"""Benchmark: a memory cube's round trip on LoCoMo. A memory is built from part of the LoCoMo dev split (its
conversations imported as the app imports them, the persona read out of every segment by the extractive
path, a few facts written and updated by the user, pins on pages, a segment, a fact and a trait), exported
as a cube and imported into an empty memory; then both rank the same questions.

    python -m tests.bench.cube_roundtrip [--samples conv-26,conv-30,conv-41] [--questions 100] [--out FILE]

Prints one JSON object: the sizes and times of export and import, how many of the questions rank the same
top 25 in both memories (the same pages, by their time and words, in the same order, with scores equal to
1e-5), whether the persona (every trait and fact with its numbers, every version with its source pages),
the pins and the page links (tier, chain, segment and its heat, chat) are the same, what a second import
of the cube added (nothing, it should be), and whether undoing the import left the memory as empty as it
was. The LoCoMo file is read from ../shared/data/locomo/locomo-dev.json (never copied into the repo).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the app sets it (see tests/bench/retrieval.py)

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


def _open(path: Path, embedder, model_id: str | None = None):
    from memory_core import MemoryStore

    return MemoryStore.open(
        path,
        embedder.embed,
        embed_model_id=model_id or embedder.model_id,
        dim=embedder.dim,
        embed_tokens=embedder.embed_with_tokens,
    )


def _build(store, samples) -> None:
    from app.importers.writer import write_conversation

    for sample in samples:
        write_conversation(store, sample.conversation)
    store.jobs.run_pending(allow_llm=False)
    for seg in store.segments.list_segments(limit=100_000):  # the persona, by the extractive path (no LLM)
        store.jobs.enqueue("promote_segment", {"segment_id": seg.id})
    store.jobs.run_pending()
    store.persona.add_knowledge("user", "I live in Porto")
    store.persona.add_knowledge("user", "I live in Lyon now")  # an update: Porto stays a version
    store.persona.add_knowledge("user", "I am allergic to peanuts", pinned=True)
    store.persona.add_trait("hobby", "paints landscapes", pinned=True)
    pages = store.pages.list_pages(order_by="id", descending=False, limit=100_000)
    for p in pages[:: max(1, len(pages) // 10)]:
        store.curation.pin("page", p.id)
    segs = store.segments.list_segments(order_by="id", descending=False, limit=5)
    if segs:
        store.curation.pin("segment", segs[0].id)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--samples", default="conv-26,conv-30,conv-41", help="the LoCoMo samples the memory is built from")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument(
        "--other-model",
        action="store_true",
        help="also import into a memory that names its (same) embedder another model: the cube's vectors are left "
        "and the pages embedded by the import's jobs",
    )
    args = ap.parse_args(argv)

    from app.evaluation.locomo import load_samples, spread_limit
    from memory_core import RetrievalBudget
    from models.embedder import OnnxEmbedder
    from tests.memory_core.cubes_support import counts, persona, pins, structure

    samples, _ = load_samples(args.data, [s for s in args.samples.split(",") if s])
    questions = [q for qs in spread_limit(samples, args.questions).values() for q in qs]
    embedder = OnnxEmbedder()
    report: dict = {"samples": [s.sample_id for s in samples], "questions": len(questions)}
    with tempfile.TemporaryDirectory(prefix="mnemo-cube-bench-") as tmp:
        folder = Path(tmp)
        src = _open(folder / "source.db", embedder)
        t0 = time.perf_counter()
        _build(src, samples)
        report["build_s"] = round(time.perf_counter() - t0, 1)
        report["source"] = counts(src)
        t0 = time.perf_counter()
        cube = src.cubes.export(folder / "locomo.mnemocube", app_version="bench")
        report["export"] = {"s": round(time.perf_counter() - t0, 2), "bytes": cube.bytes, "counts": cube.counts}

        dst = _open(folder / "empty.db", embedder)
        t0 = time.perf_counter()
        record = dst.cubes.import_cube(cube.path)
        report["import"] = {"s": round(time.perf_counter() - t0, 2), "status": record.status}
        report["import"]["counts"] = record.counts.to_json()
        report["integrity"] = dst.check_integrity()
        report["pending_jobs_after_import"] = dst.jobs.pending()

        def top(store, question: str) -> list[tuple]:
            r = store.retrieve(question, budget=RetrievalBudget(pages=25), record_visits=False)
            return [(h.page.timestamp, h.page.user_text, h.page.assistant_text, round(h.score, 5)) for h in r.pages]

        same = 0
        differing: list[str] = []
        for q in questions:
            if top(src, q.question) == top(dst, q.question):
                same += 1
            else:
                differing.append(q.question)
        report["top25_same"] = same
        report["top25_differing"] = differing[:10]
        report["persona_same"] = persona(src) == persona(dst)
        report["persona_items"] = {"traits": src.persona.count_traits(include_archived=True)}
        report["persona_items"]["facts"] = src.persona.count_knowledge(include_archived=True)
        report["versions"] = report["source"]["item_version"]
        report["derivations"] = report["source"]["derivation"]
        report["pins_same"] = pins(src) == pins(dst)
        report["pins"] = {k: len(v) for k, v in pins(src).items()}
        report["links_same"] = structure(src) == structure(dst)
        report["counts_same"] = counts(src) == counts(dst)

        before = counts(dst)
        t0 = time.perf_counter()
        second = dst.cubes.import_cube(cube.path)
        report["second_import"] = {
            "s": round(time.perf_counter() - t0, 2),
            "added": second.counts.added,
            "unchanged": counts(dst) == before,
        }
        undo = dst.cubes.undo(record.id)
        after = counts(dst)
        report["undo"] = {
            "pages_removed": undo.pages,
            "empty_again": all(v == 0 for v in after.values()),
            "counts_after": after,
        }
        if args.other_model:
            other = _open(folder / "other.db", embedder, model_id="another-model-id")
            t0 = time.perf_counter()
            rec = other.cubes.import_cube(cube.path)
            report["other_model"] = {
                "s": round(time.perf_counter() - t0, 1),
                "status": rec.status,
                "pages": other.pages.count_pages(),
                "top25_same": sum(top(src, q.question) == top(other, q.question) for q in questions),
                "top25_same_pages": sum(
                    [x[:3] for x in top(src, q.question)] == [x[:3] for x in top(other, q.question)] for q in questions
                ),
                "persona_same": persona(src) == persona(other),
                "integrity": other.check_integrity(),
            }
            other.close()
        src.close()
        dst.close()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    ok = (
        report["top25_same"] == len(questions)
        and report["persona_same"]
        and report["pins_same"]
        and report["second_import"]["added"] == 0
        and report["undo"]["empty_again"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
