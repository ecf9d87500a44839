"""ONNX sentence embedder: tokenizer.json (tokenizers) + an ONNX encoder, mean pooling, L2 norm."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from models.errors import ModelFileError
from models.resolve import check_onnx, check_tokenizer_json, default_embedder_files

# onnxruntime (1.2x on Linux and macOS) collects telemetry by default: it writes a device id and an
# event queue (OS, CPU, memory, versions) under ~/.cache/Microsoft and uploads them to Microsoft.
# Mnemo keeps everything on the machine, so it opts out; the variable must be set before onnxruntime
# is imported (the decision is latched then). A user can still set ORT_DISABLE_TELEMETRY=0.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


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
            raise ModelFileError(self.model_path, f"ONNX Runtime cannot load this model: {exc}") from exc
        self._input_names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._input_names
        if missing:
            raise ModelFileError(
                self.model_path, f"not a sentence-embedding model: inputs {sorted(missing)} are missing"
            )
        self.dim = int(self._embed_batch(["dimension probe"]).shape[1])
        digest = hashlib.sha1(self.model_path.read_bytes()[:1 << 20]).hexdigest()[:10]
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

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[tuple[np.ndarray, list[str]]]]:
        """The sentence vectors of `embed` and, from the same encoder pass, each text's token vectors.

        Returns (vectors, per_text) where per_text[i] is (an (m, dim) float32 array of unit rows,
        the m token strings), [CLS] and [SEP] left out. memory_core matches a question's words
        against a page's words with them (late interaction), at no extra encoder cost at ingest."""
        if isinstance(texts, str):
            raise TypeError("embed_with_tokens() takes a sequence of strings")
        return self._embed_sorted(list(texts), with_tokens=True)

    def _embed_sorted(self, texts: list[str], *, with_tokens: bool):
        """Batches of texts of similar length (little padding), results in the order given:
        (vectors, per-text token vectors, or [] without `with_tokens`)."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32), []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts: list[np.ndarray] = []
        per_text: list = [None] * len(texts) if with_tokens else []
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            got = self._embed_batch([texts[i] for i in idx], with_tokens=with_tokens)
            if with_tokens:
                got, toks = got
                for i, t in zip(idx, toks):
                    per_text[i] = t
            parts.append(got)
        stacked = np.concatenate(parts, axis=0)
        out = np.empty_like(stacked)
        out[np.array(order)] = stacked
        return out, per_text

    def _embed_batch(self, texts: list[str], with_tokens: bool = False):
        with self._tok_lock:
            encodings = self._tokenizer.encode_batch(texts)
        width = max(1, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]  # (batch, seq, dim)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vecs = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        if not with_tokens:
            return vecs
        per_text = []
        for row, enc in enumerate(encodings):
            keep = [i for i, t in enumerate(enc.tokens) if (enc.special_tokens_mask[i] == 0)]
            tv = hidden[row, keep].astype(np.float32)
            tv /= np.clip(np.linalg.norm(tv, axis=1, keepdims=True), 1e-12, None)
            per_text.append((tv, [enc.tokens[i] for i in keep]))
        return vecs, per_text
