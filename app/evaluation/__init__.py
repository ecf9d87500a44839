"""Evaluation harness: LoCoMo retrieval and QA (`mnemo eval locomo`), its metrics and baselines.

- `metrics`: official LoCoMo F1 with its per-category rules, A-Mem-style F1 and BLEU-1,
  evidence-id normalisation, recall_acc and the turn-budget fill rule.
- `baselines`: flat dense and BM25 (FTS5) over turns, and their RRF fusion.
- `locomo`: the runner (fresh store per conversation through the importer), tables, JSON.
- `qa`: prompts for answering with memory, without memory and with the truncated full context.
"""
