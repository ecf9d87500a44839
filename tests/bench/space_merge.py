"""What merging two memory spaces fuses, on a memory built from the LoCoMo dev split (a measurement, not a test).

    python -m tests.bench.space_merge [--locomo PATH] [--questions 200] [--show 30] [--pairs-only]

Imports the dev split with the app's importer (real store, real ONNX embedder) and splits each conversation
in thirds by time: the first third stays in Personal, the last third moves to a space "Work", the middle
third is in both (copied into Work: the same exchanges, as a copy or an import of them leaves them). So the
same people talk in two spaces, and some of it twice. Then the memory jobs run LLM-free (extractive
persona) after LoCoMo questions are recalled as chats would (topics gain heat and are read for the
persona), and Work is merged into Personal, once as a dry run and once for real. Prints the facts and traits of each space before, what the merge did (moved, held
word for word, confirmed, updated, older, left beside a pinned item), the seconds it took, and the fused
pairs (held text → offered text) to judge by eye. A merge by words alone would have left every confirmed,
updated and older pair as two active copies.

Then `PAIRS`: 24 facts about the user written in two spaces, labelled beforehand: 8 restatements (the
merge should keep one, confirmed), 8 newer values of the same thing (it should update, the older text a
version) and 8 different facts on a near subject (it should keep both). Each pair is merged in a memory of
its own (Personal's fact an hour older), and the table says what the merge did with each label.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def build(store, locomo: Path, n_questions: int) -> tuple[int, int]:
    """The dev split in two spaces (the middle third of each conversation in both); returns (Work's id,
    the pages copied into Work: what the merge must recognise as held already)."""
    from app.importers import load, write_all

    parsed = load(locomo, "locomo")
    write_all(store, parsed, path=str(locomo))
    work, copied = store.spaces.create("Work"), 0
    for conv in store.conversations.list_conversations():
        pages = sorted(store.pages.list_pages(conversation_id=conv.id, limit=100_000), key=lambda p: p.timestamp)
        third = len(pages) // 3
        store.spaces.move_pages([p.id for p in pages[2 * third :]], work)
        copied += len(store.spaces.copy_pages([p.id for p in pages[third : 2 * third]], work))
    store.jobs.run_pending(allow_llm=False)
    raw = json.loads(locomo.read_text(encoding="utf-8"))
    qs = [q["question"] for s in raw for q in s.get("qa", []) if isinstance(q.get("question"), str)]
    step = max(1, len(qs) // max(1, n_questions))
    for q in qs[::step][:n_questions]:
        store.retrieve(q, record_visits=True)
    store.jobs.run_pending(allow_llm=False)
    return work, copied


# (label, Personal's fact, Work's fact), labelled before any was merged
PAIRS = [
    ("same", "The user's dog is called Biscuit.", "The user's dog is named Biscuit."),
    ("same", "The user is allergic to shellfish.", "The user has a shellfish allergy."),
    ("same", "The user works as a nurse.", "The user is a nurse by profession."),
    ("same", "The user's sister Laura lives in Lisbon.", "Laura, the user's sister, lives in Lisbon."),
    ("same", "The user prefers short answers.", "The user likes answers to be short."),
    ("same", "The user drives a blue Skoda.", "The user's car is a blue Skoda."),
    ("same", "The user runs every Sunday morning.", "Every Sunday morning the user goes running."),
    ("same", "The user is vegetarian.", "The user does not eat meat."),
    ("newer", "The user lives in Porto.", "The user lives in Lyon now."),
    ("newer", "The user's manager is Ana.", "The user's manager is Rui now."),
    ("newer", "The user's report is due on Friday.", "The user's report is due on Monday."),
    ("newer", "The user's gym membership costs 30 euros a month.", "The user's gym membership costs 45 euros a month."),
    ("newer", "The user's favourite colour is green.", "The user's favourite colour is blue."),
    ("newer", "The user's phone number ends in 4312.", "The user's phone number ends in 9981."),
    ("newer", "The user is learning Spanish.", "The user is learning Japanese now."),
    ("newer", "The user's daughter is 7 years old.", "The user's daughter is 8 years old."),
    ("other", "The user's brother Tom lives in Madrid.", "The user's cousin Eva lives in Berlin."),
    ("other", "The user is allergic to shellfish.", "The user is allergic to penicillin."),
    ("other", "The user drinks green tea.", "The user drinks coffee in the morning."),
    ("other", "The user's report is due on Friday.", "The user's presentation is on Thursday."),
    ("other", "The user works as a nurse.", "The user's husband works as a teacher."),
    ("other", "The user lives in Porto.", "The user was born in Lyon."),
    ("other", "The user's dog is called Biscuit.", "The user's cat is called Miso."),
    ("other", "The user likes jazz.", "The user plays the piano."),
]


def pairs(tmp: Path) -> dict[str, dict[str, int]]:
    """Merge each labelled pair in a memory of its own; returns {label: {what the merge did: count}}."""
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder

    emb = OnnxEmbedder()
    table: dict[str, dict[str, int]] = {}
    for i, (label, held, offered) in enumerate(PAIRS):
        store = MemoryStore.open(
            tmp / f"pair-{i}.db", emb.embed, embed_model_id=emb.model_id, dim=emb.dim, params=MemoryParams()
        )
        try:
            store.persona.add_knowledge("user", held)
            with store.transaction():  # Personal's fact an hour older
                store.db.execute("UPDATE knowledge SET updated_at = updated_at - 3600")
            work = store.spaces.create("Work")
            store.persona.add_knowledge("user", offered, space_id=work)
            m = store.spaces.merge(work, 1)
            did = m.fused[0].how if m.fused else ("pinned" if m.conflicts else "kept both")
            print(f"  {label:<5} -> {did:<9} {held!r} / {offered!r}")
            table.setdefault(label, {}).setdefault(did, 0)
            table[label][did] += 1
            assert store.check_integrity() == []
        finally:
            store.close()
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--show", type=int, default=30, help="fused pairs printed of each kind")
    ap.add_argument("--pairs-only", action="store_true", help="only the labelled pairs (seconds, not minutes)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-space-merge-"))
    print("labelled pairs:")
    for label, did in pairs(tmp).items():
        print(f"{label}: {did}")
    if args.pairs_only:
        return 0
    from app.context import AppContext
    from app.operations.spaces import describe_merge

    store = AppContext.create(config_dir=tmp / "config", data_dir=tmp / "data").open_store()
    try:
        t0 = time.perf_counter()
        work, copied = build(store, Path(args.locomo), args.questions)
        print(f"built in {time.perf_counter() - t0:.0f} s; {copied} pages in both spaces")
        for sp in store.spaces.list():
            archived = store.db.scalar(
                "SELECT count(*) FROM knowledge WHERE space_id = ? AND status != 'active'", (sp.id,)
            )
            print(f"  {sp.name}: {sp.pages} pages, {sp.facts} facts (+{archived} archived), {sp.traits} traits")
        t0 = time.perf_counter()
        plan = store.spaces.merge(work, 1, dry_run=True)
        dry = time.perf_counter() - t0
        t0 = time.perf_counter()
        done = store.spaces.merge(work, 1)
        took = time.perf_counter() - t0
        assert done.to_json() == {**plan.to_json(), "dry_run": False}, "the dry run said otherwise"
        print(f"dry run {dry:.2f} s, merge {took:.2f} s")
        print(describe_merge(done))
        print(json.dumps({k: done.to_json()[k] for k in ("pages", "facts", "traits")}))
        for how in ("confirmed", "updated", "older", "held"):
            fused = [f for f in done.fused if f.how == how]
            print(f"-- {how}: {len(fused)}")
            for f in fused[: args.show]:
                print(f"   [{f.kind} {f.into}] {f.held!r}\n      <- {f.offered!r}")
        for c in done.conflicts[: args.show]:
            print(f"-- pinned [{c.kind} {c.held_id}] {c.held!r} beside {c.offered!r}")
        for sp in store.spaces.list():
            print(f"after: {sp.name}: {sp.pages} pages, {sp.facts} facts, {sp.traits} traits")
        problems = store.check_integrity()
        print(f"integrity: {problems or 'clean'}")
        return 1 if problems else 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
