"""Memory into parameters: `mnemo memory distill` trains a LoRA adapter for the chat model from what
memory holds, so the model knows it without being reminded (MemOS's "parametric memory").

What it learns from (`collect_pairs`): the user's facts and traits (the persona), and the pages of
the hottest segments, each turned into question/answer pairs in the chat's own format: "My sister's
name is Clara" gives "What is my sister's name?" → "Your sister's name is Clara." and a few other
wordings of the question, so the adapter learns the fact rather than one sentence; a page gives
"What did I tell you about <its topic>?" → what the user said, in the second person.

How (decision 0021): PyTorch + transformers + peft on the CPU, in the optional extra `mnemo[train]`.
transformers loads the GGUF chat model itself (`from_pretrained(gguf_file=...)` dequantises it), peft
trains a LoRA on the attention's value/output and the MLP's projections (the weights whose rows
llama.cpp's converter does not permute, so peft's A and B are llama.cpp's lora_a and lora_b as
they are), and models.lora writes them as a GGUF adapter, which is checked against the model and
added to the registry (app.parametric.adapters) like any other adapter. The answers alone carry the loss.

`train_adapter` runs on the calling thread (the CLI's, or the app's task runner: app.runtime.tasks), reports
each step and stops between steps when cancelled, leaving nothing behind.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.chat import CancelToken

if TYPE_CHECKING:
    import torch
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from memory_core import MemoryStore

log = logging.getLogger(__name__)

TRAIN_PACKAGES = ("torch", "transformers", "peft", "gguf")
INSTALL_HINT = 'pip install "mnemo[train]"'
# HF module -> llama.cpp tensor (per layer); q_proj and k_proj are left out: llama.cpp stores their rows
# permuted for RoPE, so their LoRA B would need the same permutation
TARGETS = {
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
ARCHITECTURES = {"llama", "mistral", "qwen2", "qwen3"}  # the GGUF names whose layers are named as above


class DistillError(RuntimeError):
    """Distilling cannot go on (nothing to learn, the extra not installed, an unsupported model)."""


class DistillCancelled(DistillError):
    pass


@dataclass(frozen=True)
class QAPair:
    question: str
    answer: str
    source: str  # "fact 12", "trait 3", "page 40"


@dataclass
class DistillConfig:
    rank: int = 8
    alpha: int = 16
    steps: int = 60
    batch: int = 8
    learning_rate: float = 2e-3
    threads: int = 0  # 0: every core
    max_pairs: int = 400
    hot_segments: int = 5
    pages_per_segment: int = 8
    seed: int = 0


@dataclass
class DistillResult:
    path: Path
    pairs: int
    steps: int
    seconds: float
    first_loss: float
    last_loss: float


Progress = Callable[[int, int, float], None]  # (step, steps, loss)


def missing_packages() -> list[str]:
    """The [train] extra's packages that are not installed ([]: distilling can run)."""
    import importlib.util

    return [name for name in TRAIN_PACKAGES if importlib.util.find_spec(name) is None]


# -- what memory holds, as questions and answers ----------------------------------------------

_FLIP = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "am": "are",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
}
_WORD = re.compile(r"[A-Za-z']+")
_MY_IS = re.compile(r"^my (?P<x>.+?) (?P<be>is|are|was|were) (?P<y>.+)$", re.IGNORECASE)
_I_VERB = re.compile(
    r"^i (?P<v>like|love|enjoy|hate|prefer|drive|play|own|have|speak|drink|eat|collect|read|watch|use|want)"
    r" (?P<y>.+)$",
    re.IGNORECASE,
)
_I_WHERE = re.compile(r"^i (?P<v>live|work|grew up|was born|study|studied|go) (?P<p>in|at|near|to) (?P<y>.+)$", re.I)
_I_WORK_AS = re.compile(r"^i (?:work|am working) as (?:an? )?(?P<y>.+)$", re.IGNORECASE)
_I_AM = re.compile(r"^(?:i am|i'm) (?P<y>.+)$", re.IGNORECASE)


def second_person(text: str) -> str:
    """The user's own words said back to them ("my dog is Rex" -> "your dog is Rex")."""

    def swap(m: re.Match) -> str:
        word = m.group(0)
        out = _FLIP.get(word.lower())
        if out is None:
            return word
        return out.capitalize() if word[0].isupper() and m.start() == 0 else out

    text = re.sub(r"\b([Ii]) was\b", r"\1 were", text)  # "I was born" -> "you were born"
    return _WORD.sub(swap, text)


def pairs_from_fact(text: str, source: str) -> list[QAPair]:
    """Questions a fact about the user answers, each with the fact said back as the answer."""
    fact = " ".join(text.split()).rstrip(".!")
    if not fact:
        return []
    answer = second_person(fact)
    answer = answer[0].upper() + answer[1:] + "."
    questions: list[str] = []
    if m := _MY_IS.match(fact):
        x, be = m["x"], m["be"].lower()
        questions += [f"What {be} my {x}?", f"Do you remember what my {x} {be}?", f"Tell me my {x}."]
    elif _I_WORK_AS.match(fact):
        questions += ["What is my job?", "What do I work as?", "What do I do for a living?"]
    elif m := _I_WHERE.match(fact):
        v = m["v"].lower()
        aux = "was I" if v == "was born" else ("did I" if v in ("grew up", "studied") else "do I")
        verb = {"was born": "born", "grew up": "grow up", "studied": "study"}.get(v, v)
        questions += [f"Where {aux} {verb}?", f"Do you remember where {aux.split()[1]} {verb}?"]
    elif m := _I_VERB.match(fact):
        v = m["v"].lower()
        questions += [f"What do I {v}?", f"Do you remember what I {v}?", f"Which {_head(m['y'])} do I {v}?"]
    elif m := _I_AM.match(fact):
        questions += ["What do you know about me?", "Who am I?"]
    questions += [f"What did I tell you about {_topic(fact)}?"]
    return [QAPair(q, answer, source) for q in dict.fromkeys(questions)]


def _head(phrase: str) -> str:
    words = [w for w in _WORD.findall(phrase) if w.lower() not in ("a", "an", "the", "my", "some")]
    return words[-1].lower() if words else "one"


def _topic(fact: str) -> str:
    """A few words a question can name the fact by (its content words, the user's own first)."""
    stop = {"i", "my", "me", "is", "are", "am", "was", "a", "an", "the", "and", "to", "of", "in", "at", "it"}
    words = [w for w in _WORD.findall(fact) if w.lower() not in stop]
    return " ".join(second_person(w) for w in words[:3]) or "myself"


def pairs_from_page(user_text: str, topic: str, source: str) -> list[QAPair]:
    said = " ".join(user_text.split())[:400]
    if len(said) < 12:
        return []
    answer = "You told me: " + second_person(said)
    return [QAPair(f"What did I tell you about {topic}?", answer, source)]


def collect_pairs(store: MemoryStore, config: DistillConfig | None = None) -> list[QAPair]:
    """Question/answer pairs from the persona (the user's facts and traits) and the pages of the
    hottest segments, at most `config.max_pairs`, facts first."""
    config = config or DistillConfig()
    pairs: list[QAPair] = []
    for k in store.persona.list_knowledge("user", limit=config.max_pairs):
        pairs += pairs_from_fact(k.text, f"fact {k.id}")
    for t in store.persona.list_traits(limit=config.max_pairs):
        q = f"What do you know about my {t.dimension.replace('_', ' ')}?"
        pairs.append(QAPair(q, f"Your {t.dimension.replace('_', ' ')}: {t.value}.", f"trait {t.id}"))
    for seg in store.segments.list_segments(limit=config.hot_segments):
        topic = ", ".join(seg.keywords[:3]) or _topic(seg.summary)
        for page in store.pages.list_pages(segment_id=seg.id, limit=config.pages_per_segment):
            pairs += pairs_from_page(page.user_text, topic, f"page {page.id}")
    return pairs[: config.max_pairs]


# -- training -----------------------------------------------------------------------------------


def _load(model_path: Path, threads: int) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF reader draws its own bar on stderr
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local file: never ask the network
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    folder, name = str(model_path.parent), model_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return tokenizer, model


def _examples(tokenizer: PreTrainedTokenizerBase, pairs: Sequence[QAPair]) -> list[tuple[list[int], int]]:
    """Each pair as (token ids, where the answer starts): the chat template's prompt, then the answer
    and the end-of-turn token, which alone carry the loss."""
    out = []
    for p in pairs:
        # token ids, or (transformers 5) a BatchEncoding holding them
        prompt: Any = tokenizer.apply_chat_template(
            [{"role": "user", "content": p.question}], add_generation_prompt=True
        )
        full: Any = tokenizer.apply_chat_template(
            [{"role": "user", "content": p.question}, {"role": "assistant", "content": p.answer}]
        )
        if hasattr(prompt, "input_ids"):  # transformers 5 returns a BatchEncoding
            prompt, full = prompt["input_ids"], full["input_ids"]
        if list(full[: len(prompt)]) == list(prompt):
            out.append((list(full), len(prompt)))
    return out


def _batch(
    examples: Sequence[tuple[list[int], int]], idx: Sequence[int], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    import torch

    chosen = [examples[i] for i in idx]
    width = max(len(ids) for ids, _ in chosen)
    ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)
    labels = torch.full((len(chosen), width), -100, dtype=torch.long)
    mask = torch.zeros((len(chosen), width), dtype=torch.long)
    for row, (tokens, start) in enumerate(chosen):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        labels[row, start : len(tokens)] = torch.tensor(tokens[start:])
        mask[row, : len(tokens)] = 1
    return ids, labels, mask


def train_adapter(
    model_path: str | os.PathLike,
    pairs: Sequence[QAPair],
    out_path: str | os.PathLike,
    config: DistillConfig | None = None,
    *,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
) -> DistillResult:
    """Train a LoRA on `pairs` for the GGUF chat model at `model_path` and write it to `out_path` as a
    GGUF adapter. DistillError when the extra is missing or the model's architecture is not one this
    route knows; DistillCancelled (nothing written) when `cancel` is set."""
    config = config or DistillConfig()
    cancel = cancel or CancelToken()
    missing = missing_packages()
    if missing:
        raise DistillError(f"distilling needs {', '.join(missing)}: {INSTALL_HINT}")
    from models import lora

    model_path = Path(model_path)
    arch = str(lora.model_header(model_path).meta.get("general.architecture", ""))
    if arch not in ARCHITECTURES:
        raise DistillError(f"{model_path.name}: distilling knows {', '.join(sorted(ARCHITECTURES))} models, not {arch}")
    if not pairs:
        raise DistillError("memory holds nothing to learn yet (no facts about you, no conversations)")
    started = time.perf_counter()
    tokenizer, model = _load(model_path, config.threads)
    examples = _examples(tokenizer, pairs)
    peft_model, losses = _fit(model, examples, tokenizer.pad_token_id or 0, config, progress, cancel)
    out = _export(peft_model, Path(out_path), model_path, arch, config)
    lora.check_fits(out, model_path)
    return DistillResult(out, len(examples), len(losses), time.perf_counter() - started, losses[0], losses[-1])


def _fit(
    model: PreTrainedModel,
    examples: Sequence[tuple[list[int], int]],
    pad_id: int,
    config: DistillConfig,
    progress: Progress | None,
    cancel: CancelToken,
) -> tuple[PeftModel, list[float]]:
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(config.seed)
    lora_config = LoraConfig(
        r=config.rank, lora_alpha=config.alpha, lora_dropout=0.0, target_modules=[t.split(".")[-1] for t in TARGETS]
    )
    peft_model = get_peft_model(model, lora_config)
    peft_model.train()
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=0.0)
    gen = torch.Generator().manual_seed(config.seed)
    losses: list[float] = []
    order: list[int] = []
    for step in range(config.steps):
        if cancel.cancelled:
            raise DistillCancelled("distilling was cancelled; nothing was kept")
        if len(order) < config.batch:
            order += torch.randperm(len(examples), generator=gen).tolist()
        idx, order = order[: config.batch], order[config.batch :]
        ids, labels, mask = _batch(examples, idx, pad_id)
        loss = peft_model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
        losses.append(loss.item())
        if progress is not None:
            progress(step + 1, config.steps, losses[-1])
    return peft_model, losses


def _export(peft_model: PeftModel, out: Path, model_path: Path, arch: str, config: DistillConfig) -> Path:
    """peft's A and B of each adapted layer, as llama.cpp's lora_a and lora_b."""
    from models import lora

    pairs: dict[str, tuple[Any, Any]] = {}
    pattern = re.compile(r"layers\.(\d+)\.(\w+\.\w+)$")
    for name, module in peft_model.named_modules():
        m = pattern.search(name)
        if not m or m[2] not in TARGETS or not hasattr(module, "lora_A"):
            continue
        a = module.lora_A["default"].weight.detach().float().numpy()
        b = module.lora_B["default"].weight.detach().float().numpy()
        pairs[f"blk.{m[1]}.{TARGETS[m[2]]}.weight"] = (a, b)
    meta = lora.model_header(model_path).meta
    base = " ".join(str(meta[k]) for k in ("general.basename", "general.size_label") if meta.get(k))
    return lora.write_lora_gguf(
        out,
        pairs,
        architecture=arch,
        alpha=config.alpha,
        name=out.stem,
        meta={
            "mnemo.base_model": base or model_path.name,
            "mnemo.base_model.file": model_path.name,
            "mnemo.distilled_at": int(time.time()),
            "general.base_model.0.name": str(meta.get("general.name") or model_path.stem),
        },
    )
