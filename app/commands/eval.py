"""`mnemo eval locomo`: LoCoMo retrieval recall_acc (ours beside flat-dense, BM25 and hybrid
baselines) and, with --qa, answer quality of the configured chat model with memory, without
memory and with the truncated full conversation. See docs/eval.md."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext
    from app.evaluation.locomo import Sample


def register(subparsers: SubParsers) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate memory quality on benchmarks (LoCoMo)", description="Evaluate the memory on benchmarks."
    )
    bench = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    lp = bench.add_parser(
        "locomo",
        help="LoCoMo: retrieval recall_acc at turn budgets, optional QA",
        description="Each LoCoMo conversation is imported into a fresh temporary store "
        "(the `mnemo ingest` path), then every question is retrieved for.",
    )
    lp.add_argument("--data", required=True, help="LoCoMo JSON (e.g. ../shared/data/locomo/locomo-dev.json)")
    lp.add_argument("--samples", default=None, help="comma-separated sample ids (default: all)")
    lp.add_argument(
        "--retriever",
        default="all",
        help="mnemo, flat-dense, bm25, hybrid, all, or a comma-separated list (default: all)",
    )
    lp.add_argument("--ks", default="5,10,25,50", help="turn budgets (default: 5,10,25,50)")
    lp.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="evaluate N questions in total, spread evenly over the samples",
    )
    _add_qa_options(lp)
    _add_study_options(lp)
    lp.add_argument("--out", default=None, metavar="FILE.json", help="write the full report (per question too)")
    lp.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    lp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    lp.set_defaults(func=run_locomo)

    def show_help(args: argparse.Namespace, ctx: AppContext) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=show_help)


def _add_qa_options(lp: argparse.ArgumentParser) -> None:
    """--qa and how its questions are put to the chat model."""
    lp.add_argument("--qa", action="store_true", help="also answer with the configured chat model and score F1/BLEU-1")
    lp.add_argument(
        "--qa-modes",
        default="memory,no-memory,full-context",
        help="QA prompts to run (default: memory,no-memory,full-context)",
    )
    lp.add_argument(
        "--qa-turns",
        type=int,
        default=None,
        help="recalled turns offered to the model, a page's better side first, from as many pages "
        "(default: the chat agent's, MemoryParams.quoting.recall_turns: 14)",
    )
    lp.add_argument(
        "--asked-before",
        nargs="?",
        const="same",
        choices=("same", "all"),
        default=None,
        help="ask each question once before, in a chat of its own, with a non-answer reply; then measure "
        "(all: every question of a sample asked before any is measured)",
    )


def _add_study_options(lp: argparse.ArgumentParser) -> None:
    """The studies a run makes beside the static recall (the persona's instead of it): ablation, the
    persona, the segments, the lifecycle."""
    lp.add_argument(
        "--ablate",
        action="store_true",
        help="also report mnemo's recall at each k with each ranking stage switched off in turn",
    )
    lp.add_argument(
        "--persona",
        action="store_true",
        help="measure the persona instead: speaker_a's facts after promotion against LoCoMo's gold observations "
        "(--limit: that many conversations)",
    )
    lp.add_argument(
        "--persona-model",
        default=None,
        metavar="PATH|default",
        help="with --persona: promote with this GGUF (or the configured chat model: default), not the LLM-free path",
    )
    lp.add_argument(
        "--persona-threshold", type=float, default=None, help="with --persona: the cosine a match needs (0.6)"
    )
    lp.add_argument(
        "--segments",
        action="store_true",
        help="also print each conversation's segments: count, largest share of its pages, median size, titles",
    )
    lp.add_argument(
        "--lifecycle",
        action="store_true",
        help="also replay each conversation session by session in date order, asking each question after its "
        "evidence and again at the end of the replay, with visits, promotion and archiving live (a small "
        "mtm_capacity) and without them, beside the static recall",
    )


def _parse_retrievers(text: str) -> list[str]:
    from app.evaluation.locomo import RETRIEVERS

    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or "all" in names:
        return list(RETRIEVERS)
    bad = [n for n in names if n not in RETRIEVERS]
    if bad:
        raise ValueError(f"unknown retriever(s) {', '.join(bad)}; use {', '.join(RETRIEVERS)} or all")
    return names


def _parse_options(args: argparse.Namespace) -> tuple[list[str], list[int], list[str]]:
    """The retrievers, turn budgets and QA modes asked for; ValueError says which is wrong."""
    from app.evaluation.locomo import QA_MODES

    retrievers = _parse_retrievers(args.retriever)
    ks = [int(k) for k in args.ks.split(",") if k.strip()]
    if not ks or min(ks) < 1:
        raise ValueError("--ks needs positive integers")
    modes = [m.strip() for m in args.qa_modes.split(",") if m.strip()]
    if any(m not in QA_MODES for m in modes):
        raise ValueError(f"--qa-modes: use some of {', '.join(QA_MODES)}")
    return retrievers, ks, modes


def _prepare_qa() -> bool:
    """Ready the process for `--qa`: False (after saying why) when nltk is missing."""
    if importlib.util.find_spec("nltk") is None:  # Porter stemmer and BLEU; no data download needed
        print("mnemo eval locomo: error: --qa needs nltk (pip install 'mnemo[eval]')", file=sys.stderr)
        return False
    # LoCoMo times are wall-clock times stored as UTC; the memory prompt formats dates in
    # local time, so show them in UTC to keep each session's day as in the data.
    os.environ["TZ"] = "UTC"
    if hasattr(time, "tzset"):
        time.tzset()
    return True


def _print_locomo(args: argparse.Namespace, report: dict, lifecycle_lines: list[str]) -> None:
    """The report as JSON (without the per-question rows) or as tables."""
    from app.evaluation.locomo import format_tables

    if args.json:
        summary = {k: v for k, v in report.items() if k != "per_question"}
        print(json.dumps(summary, indent=1, default=str))
    else:
        print(format_tables(report))
        if lifecycle_lines:
            print("\n" + "\n".join(lifecycle_lines))
        if args.out:
            print(f"report written to {args.out}")


def run_locomo(args: argparse.Namespace, ctx: AppContext) -> int:
    from app.evaluation.locomo import LocomoEval, load_samples, write_json
    from app.importers import ImportFatalError

    try:
        retrievers, ks, modes = _parse_options(args)
    except ValueError as exc:
        print(f"mnemo eval locomo: error: {exc}", file=sys.stderr)
        return 2
    sample_ids = [s.strip() for s in args.samples.split(",")] if args.samples else None
    try:
        samples, warnings = load_samples(args.data, sample_ids)
    except ImportFatalError as exc:
        print(f"mnemo eval locomo: error: {exc}", file=sys.stderr)
        return 2
    for w in warnings[:20]:
        print(f"warning: {w}", file=sys.stderr)
    if not samples:
        print("mnemo eval locomo: error: no samples to evaluate", file=sys.stderr)
        return 2
    if args.persona:
        return _run_persona(args, ctx, samples)
    if args.qa and not _prepare_qa():
        return 2
    qa_model = ctx.chat_model() if args.qa else None
    if args.ablate and "mnemo" not in retrievers:
        retrievers = ["mnemo", *retrievers]
    needs_memory = "mnemo" in retrievers or (args.qa and "memory" in modes)
    runner = LocomoEval(
        ctx.embedder(),
        memory_params=ctx.memory_params() if needs_memory else None,
        retrievers=retrievers,
        ks=ks,
        qa_model=qa_model,
        qa_modes=modes,
        qa_turns=args.qa_turns,
        progress=not args.no_progress,
        asked_before=args.asked_before,
        ablate=args.ablate,
        segments=args.segments,
    )
    report = runner.run(samples, limit=args.limit, data_path=args.data)
    lifecycle_lines = _run_lifecycle(args, ctx, samples, ks, report) if args.lifecycle else []
    if args.out:
        write_json(report, args.out)
    _print_locomo(args, report, lifecycle_lines)
    return 0


def _run_lifecycle(
    args: argparse.Namespace, ctx: AppContext, samples: list[Sample], ks: list[int], report: dict
) -> list[str]:
    """`--lifecycle`: app.evaluation.lifecycle, its figures put in `report` and its table returned."""
    from app.evaluation.lifecycle import LifecycleEval, format_lifecycle
    from app.evaluation.locomo import spread_limit

    log = (lambda m: None) if args.no_progress else (lambda m: print(m, file=sys.stderr))
    life = LifecycleEval(ctx.embedder(), memory_params=ctx.memory_params(), ks=ks, log=log).run(
        samples, spread_limit(samples, args.limit), report["per_question"]
    )
    report["lifecycle"] = life
    return format_lifecycle(life, report["retrieval"].get("mnemo"), ks)


def _run_persona(args: argparse.Namespace, ctx: AppContext, samples: list[Sample]) -> int:
    """`--persona`: app.evaluation.persona_eval."""
    from app.evaluation.locomo import write_json
    from app.evaluation.persona_eval import DEFAULT_THRESHOLD, PersonaEval, format_report

    llm = model_id = None
    if args.persona_model:
        if args.persona_model == "default":
            model = ctx.chat_model()
        else:
            from dataclasses import replace

            from app.runtime.backends import build_chat_model

            model = build_chat_model(replace(ctx.settings.chat, backend="llama", gguf_path=args.persona_model))
        llm, model_id = model.complete_json, getattr(model, "model_id", None) or str(args.persona_model)
    runner = PersonaEval(
        ctx.embedder(),
        memory_params=ctx.memory_params(),
        llm=llm,
        llm_model_id=model_id,
        threshold=args.persona_threshold or DEFAULT_THRESHOLD,
        log=None if args.no_progress else (lambda m: print(m, file=sys.stderr)),
    )
    report = runner.run(samples, limit=args.limit)
    if args.out:
        write_json(report, args.out)
    print(json.dumps(report, indent=1, default=str) if args.json else format_report(report))
    return 0
