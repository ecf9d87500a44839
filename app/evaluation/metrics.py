"""LoCoMo metrics: retrieval recall_acc over a turn budget, the official QA F1, and the
A-Mem-style F1 and BLEU-1 that MemoryOS/A-Mem tables report.

Official LoCoMo QA F1 (snap-research/locomo, task_eval/evaluation.py):
- `normalize_answer`: drop commas, lowercase, drop punctuation, drop the words
  a/an/the/and, collapse whitespace.
- `f1_score`: Porter-stem every token; multiset overlap; 0 when nothing overlaps.
- category 1 (multi-hop): split prediction and gold on commas; for each gold part take
  the best F1 over prediction parts; average over gold parts.
- categories 2 and 4: plain `f1_score`; category 3: the gold is cut at the first ';'.
- category 5 (adversarial): 1 if the prediction contains "no information available" or
  "not mentioned" (case-insensitive), else 0.
- the gold answer is `str(answer)` (a few answers are ints).

A-Mem-style (A-Mem / MemoryOS evaluation utils): tokens = lowercase, '.', ',', '!', '?'
replaced by spaces, split on whitespace; F1 over token *sets*; 0 if either side is empty.
BLEU-1 = nltk `sentence_bleu([gold], pred, weights=(1,0,0,0), SmoothingFunction().method1)`.
A-Mem tokenises BLEU input with `nltk.word_tokenize`, which needs the 'punkt' download; we
tokenise with `bleu_tokenize` (words and punctuation marks as separate tokens, lowercase),
which is what word_tokenize does on these short answers, so nothing is downloaded.

Retrieval: `recall_acc` = fraction of a question's evidence dia_ids among the retrieved
turns; a question without (valid) evidence scores 1.0, as in the official code.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_stemmer = None


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        from nltk.stem import PorterStemmer

        _stemmer = PorterStemmer()
    return _stemmer.stem(word)


# -- official LoCoMo ----------------------------------------------------------------
def normalize_answer(s: str) -> str:
    s = str(s).replace(",", "")
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def f1_score(prediction: str, ground_truth: str) -> float:
    """Official token F1: stemmed, multiset overlap."""
    pred = [_stem(w) for w in normalize_answer(prediction).split()]
    gold = [_stem(w) for w in normalize_answer(ground_truth).split()]
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_multi(prediction: str, ground_truth: str) -> float:
    """Official multi-answer F1 (category 1): comma-split both, mean over gold of best match."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(ground_truth).split(",")]
    return sum(max(f1_score(p, g) for p in preds) for g in golds) / len(golds)


def says_not_available(prediction: str) -> bool:
    low = str(prediction).lower()
    return "no information available" in low or "not mentioned" in low


def gold_answer(qa: dict) -> str:
    """The gold string the official scorer compares with ('' for adversarial items)."""
    answer = qa.get("answer")
    if answer is None:
        return ""
    answer = str(answer)
    if qa.get("category") == 3:
        answer = answer.split(";")[0].strip()
    return answer


def locomo_f1(prediction: str, answer: object, category: int) -> float:
    """Official per-category QA score of `prediction` for a gold `answer`."""
    if category == 5:
        return 1.0 if says_not_available(prediction) else 0.0
    gold = "" if answer is None else str(answer)
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return f1_multi(prediction, gold)
    if category in (2, 3, 4):
        return f1_score(prediction, gold)
    raise ValueError(f"unknown LoCoMo category {category!r}")


# -- A-Mem style ----------------------------------------------------------------------
def amem_tokenize(text: str) -> list[str]:
    return str(text).lower().replace(".", " ").replace(",", " ").replace("!", " ").replace("?", " ").split()


def amem_f1(prediction: str, reference: str) -> float:
    prediction, reference = str(prediction).strip(), str(reference).strip()
    if not prediction or not reference:
        return 0.0
    pred, ref = set(amem_tokenize(prediction)), set(amem_tokenize(reference))
    if not pred or not ref:
        return 0.0
    common = pred & ref
    p, r = len(common) / len(pred), len(common) / len(ref)
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


_BLEU_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def bleu_tokenize(text: str) -> list[str]:
    return _BLEU_TOKEN.findall(str(text).lower())


def bleu1(prediction: str, reference: str) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    pred, ref = bleu_tokenize(prediction), bleu_tokenize(reference)
    if not pred or not ref:
        return 0.0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1))


# -- retrieval --------------------------------------------------------------------------
_DIA = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)


def normalize_evidence(evidence: Iterable) -> list[str]:
    """Clean LoCoMo evidence ids: "D8:6; D9:17" → two ids, "(D1:3)" → "D1:3", "D:11:26" →
    "D11:26", leading zeros dropped; junk like "D" is dropped; duplicates removed (order kept)."""
    out: list[str] = []
    if isinstance(evidence, str):
        evidence = [evidence]
    for raw in evidence or []:
        for m in _DIA.finditer(str(raw)):
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia not in out:
                out.append(dia)
    return out


def recall_acc(evidence: Sequence[str], retrieved: Iterable[str]) -> float:
    """Official recall_acc: share of evidence ids retrieved; 1.0 when there is no evidence."""
    if not evidence:
        return 1.0
    got = set(retrieved)
    return sum(1 for e in evidence if e in got) / len(evidence)


def fill_turn_budget(ranked: Iterable[Sequence[str]], k: int) -> list[str]:
    """Turns retrieved within a budget of `k` turns from ranked units (pages or single turns).

    Units are taken best first; each costs the number of its turns not already taken (a
    page with two turns costs two; turns repeated across units are counted once). The
    last unit that does not fit whole is cut: only its first turns, in conversation order
    (user side first), up to the budget are taken. Stops when k turns are taken."""
    out: list[str] = []
    seen: set[str] = set()
    for unit in ranked:
        for turn in unit:
            if len(out) >= k:
                return out
            if turn not in seen:
                seen.add(turn)
                out.append(turn)
        if len(out) >= k:
            break
    return out


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")
