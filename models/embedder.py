"""ONNX sentence embedder: tokenizer.json (tokenizers) + an ONNX encoder, mean pooling, L2 norm."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from models.errors import ModelFileError
from models.resolve import check_onnx, check_tokenizer_json, default_embedder_files

# onnxruntime (1.2x on Linux and macOS) collects telemetry by default: it writes a device id and an
# event queue (OS, CPU, memory, versions) under ~/.cache/Microsoft and uploads them to Microsoft.
# Mnemo keeps everything on the machine, so it opts out; the variable must be set before onnxruntime
# is imported (the decision is latched then). A user can still set ORT_DISABLE_TELEMETRY=0.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


_ORT_MESSAGE = re.compile(r"\[ONNXRuntimeError\] : \d+ : (\w+) : (?:Load model from .*? failed:)?(.*)", re.S)


def _ort_reason(exc: Exception) -> str:
    """ONNX Runtime's message without its status prefix and the path repeated ("[ONNXRuntimeError] :
    7 : INVALID_PROTOBUF : Load model from /x.onnx failed:Protobuf parsing failed." -> "Protobuf
    parsing failed"): the error already names the file."""
    text = str(exc).strip()
    m = _ORT_MESSAGE.match(text)
    if m:
        text = m.group(2).strip() or m.group(1)
    return text.rstrip(". ") or type(exc).__name__


class OnnxEmbedder:
    """Embeds sentences into unit-norm float32 vectors.

    onnxruntime's `InferenceSession.run` is thread-safe, but a `tokenizers.Tokenizer`
    with truncation/padding set is mutable state, so tokenisation is guarded by a lock.
    Batches are sorted by length and padded per chunk, so a batch gives the same
    vectors as single calls (padding is masked out of the mean).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        threads: int = 0,
    ):
        if model_path is None or tokenizer_path is None:
            files = default_embedder_files()
            model_path = model_path or files.model
            tokenizer_path = tokenizer_path or files.tokenizer
        self.model_path = check_onnx(model_path)
        self.tokenizer_path = check_tokenizer_json(tokenizer_path)
        self.max_length = max_length
        self.batch_size = batch_size

        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            self._tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise ModelFileError(self.tokenizer_path, f"cannot load tokenizer: {exc}") from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tok_lock = threading.Lock()

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        # Idle ORT worker threads spin by default, stealing CPU from the numpy and llama.cpp work
        # that follows each embedding on a small machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelFileError(self.model_path, f"ONNX Runtime cannot load this model: {_ort_reason(exc)}") from exc
        self._input_names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._input_names
        if missing:
            raise ModelFileError(
                self.model_path, f"not a sentence-embedding model: inputs {sorted(missing)} are missing"
            )
        try:
            self.dim = int(self._embed_batch(["dimension probe"]).shape[1])
        except Exception as exc:  # loads, but does not run as a sentence encoder (inputs, shapes)
            raise ModelFileError(self.model_path, f"ONNX Runtime cannot run this model: {_ort_reason(exc)}") from exc
        digest = hashlib.sha1(self.model_path.read_bytes()[: 1 << 20]).hexdigest()[:10]
        self.model_id = f"{self.model_path.stem}-{self.model_path.parent.name}-{digest}-{self.dim}d"

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`; returns an array of shape (len(texts), dim), rows of unit norm."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_one() for one")
        return self._embed_sorted(list(texts), with_tokens=False)[0]

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_with_tokens(
        self, texts: Sequence[str], contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, list[str]]]]:
        """The sentence vectors of `embed` and, from the same encoder pass, each text's token vectors.

        Returns (vectors, per_text) where per_text[i] is (an (m, dim) float32 array of unit rows,
        the m token strings), [CLS] and [SEP] left out. memory_core matches a question's words
        against a page's words with them (late interaction), at no extra encoder cost at ingest.

        `contexts[i]` (optional, "" for none) is read by the encoder just before `texts[i]` and left
        out of both results ("late chunking", Günther et al. 2024): the text's tokens see what was
        said before it ("I've had them for 3 years" after "Look at my turtles!"), while its vector
        still describes the text alone. Its end is kept when the two do not fit `max_length`;
        the text itself is never cut for it. With no context the result is exactly `embed`'s."""
        if isinstance(texts, str):
            raise TypeError("embed_with_tokens() takes a sequence of strings")
        if contexts is not None and (isinstance(contexts, str) or len(contexts) != len(texts)):
            raise TypeError("contexts must be a sequence of strings, one per text")
        return self._embed_sorted(
            list(texts), with_tokens=True, contexts=list(contexts) if contexts is not None else None
        )

    def _embed_sorted(self, texts: list[str], *, with_tokens: bool, contexts: list[str] | None = None):
        """Batches of texts of similar length (little padding), results in the order given:
        (vectors, per-text token vectors, or [] without `with_tokens`)."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32), []
        ctx = contexts or [""] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]) + len(ctx[i]))
        parts: list[np.ndarray] = []
        per_text: list = [None] * len(texts) if with_tokens else []
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            got = self._embed_batch(
                [texts[i] for i in idx], with_tokens=with_tokens, contexts=[ctx[i] for i in idx] if contexts else None
            )
            if with_tokens:
                got, toks = got
                for i, t in zip(idx, toks):
                    per_text[i] = t
            parts.append(got)
        stacked = np.concatenate(parts, axis=0)
        out = np.empty_like(stacked)
        out[np.array(order)] = stacked
        return out, per_text

    def _embed_batch(self, texts: list[str], with_tokens: bool = False, contexts: list[str] | None = None):
        with self._tok_lock:
            encodings = self._tokenizer.encode_batch(texts)
            # only a context's end can fit: its last 8 characters per token of max_length are tokenised
            ctx_ids = (
                [
                    e.ids
                    for e in self._tokenizer.encode_batch(
                        [c[-8 * self.max_length :] for c in contexts], add_special_tokens=False
                    )
                ]
                if contexts
                else [[] for _ in texts]
            )
        # each sequence: the text's leading specials ([CLS]), the context's end, the rest of the text
        seqs: list[tuple[list[int], int, int]] = []  # (ids, where the context starts, its length)
        for enc, cids in zip(encodings, ctx_ids):
            lead = 0
            while lead < len(enc.ids) and enc.special_tokens_mask[lead]:
                lead += 1
            room = max(0, self.max_length - len(enc.ids))
            cids = cids[len(cids) - room :] if room else []
            seqs.append((enc.ids[:lead] + cids + enc.ids[lead:], lead, len(cids)))
        width = max(1, max(len(ids) for ids, _, _ in seqs))
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, (seq, _, _) in enumerate(seqs):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (batch, seq, dim)
        pool = mask.astype(np.float32)
        for row, (_, at, n) in enumerate(seqs):
            pool[row, at : at + n] = 0.0  # the context is read, not described
        m = pool[:, :, None]
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vecs = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        if not with_tokens:
            return vecs
        per_text = []
        for row, (enc, (_, at, n)) in enumerate(zip(encodings, seqs)):
            keep = [i for i in range(len(enc.ids)) if enc.special_tokens_mask[i] == 0]
            tv = hidden[row, [i + n if i >= at else i for i in keep]].astype(np.float32)
            tv /= np.clip(np.linalg.norm(tv, axis=1, keepdims=True), 1e-12, None)
            per_text.append((tv, [enc.tokens[i] for i in keep]))
        return vecs, per_text
