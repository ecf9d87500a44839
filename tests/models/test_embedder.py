"""The real bundled ONNX embedder: shape, norms, semantics, batching, threads, bad files."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from models.embedder import OnnxEmbedder
from models.errors import ModelFileError


def test_unit_norm_384d(embedder):
    vecs = embedder.embed(["hello world", "a second, longer sentence about memory and time"])
    assert vecs.shape == (2, 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder.dim == 384
    assert embedder.model_id


def test_semantic_similarity(embedder):
    puppy, dog, stocks = embedder.embed(["I adopted a puppy", "I got a new dog", "The stock market fell today"])
    assert puppy @ dog > puppy @ stocks + 0.2


def test_batch_equals_single_calls(embedder):
    texts = [f"sentence number {i} " + "word " * (i % 17) for i in range(64)]
    batch = embedder.embed(texts)
    singles = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.max(np.abs(batch - singles)) < 1e-4


def test_truncates_long_input(embedder):
    vec = embedder.embed(["word " * 5000])
    assert vec.shape == (1, 384)
    assert np.isfinite(vec).all()


def test_empty_batch(embedder):
    assert embedder.embed([]).shape == (0, 384)


def test_thread_safe(embedder):
    texts = [f"thread text {i}" for i in range(40)]
    expected = embedder.embed(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: embedder.embed([t])[0], texts))
    assert np.max(np.abs(np.stack(results) - expected)) < 1e-4


def test_missing_model_names_file(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelFileError) as info:
        OnnxEmbedder(missing, tmp_path / "tokenizer.json")
    assert str(missing) in str(info.value)


def test_corrupt_model_names_file(tmp_path):
    from models.resolve import default_embedder_files

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07" + b"garbage" * 100)
    with pytest.raises(ModelFileError) as info:
        OnnxEmbedder(bad, default_embedder_files().tokenizer)
    assert str(bad) in str(info.value)


def test_not_onnx_names_file(tmp_path):
    from models.resolve import default_embedder_files

    bad = tmp_path / "model.onnx"
    bad.write_text("this is text, not a model")
    with pytest.raises(ModelFileError, match="not an ONNX model") as info:
        OnnxEmbedder(bad, default_embedder_files().tokenizer)
    assert str(bad) in str(info.value)


def test_embedding_leaves_no_telemetry_behind(tmp_path):
    """onnxruntime collects telemetry unless told not to before it loads: a device id and an event
    queue under ~/.cache/Microsoft, uploaded to Microsoft. Mnemo opts out; nothing may appear."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    code = "from models.embedder import OnnxEmbedder; print(OnnxEmbedder().embed(['hello']).shape)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "(1, 384)" in out.stdout, out.stderr
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] == []


def test_token_vectors_come_from_the_same_pass(embedder):
    texts = ["I took a short trip to Rome last week.", "hi", "word " * 400, ""]
    vecs, per_text = embedder.embed_with_tokens(texts)
    np.testing.assert_allclose(vecs, embedder.embed(texts), atol=1e-5)
    assert len(per_text) == 4
    rome, hi, long, empty = per_text
    assert rome[1][:4] == ["i", "took", "a", "short"] and "rome" in rome[1]
    assert "[CLS]" not in rome[1] and "[SEP]" not in rome[1]
    assert rome[0].shape == (len(rome[1]), 384) and rome[0].dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rome[0], axis=1), 1.0, atol=1e-5)
    assert hi[1] == ["hi"]
    assert len(long[1]) == embedder.max_length - 2  # truncated like the sentence vector
    assert empty[0].shape == (0, 384) and empty[1] == []
    # the pooled vector is the mean of the token states (with the specials): the tokens are the
    # states the page vector is made of, not another model's
    assert float(vecs[0] @ (rome[0].mean(axis=0) / np.linalg.norm(rome[0].mean(axis=0)))) > 0.9
    with pytest.raises(TypeError):
        embedder.embed_with_tokens("one string")


def test_a_context_is_read_before_the_text_and_left_out_of_both_results(embedder):
    """Late chunking: the text's tokens see the context; neither its vector nor its rows hold it."""
    texts = ["Nate: I've had them for 3 years now and they bring me tons of joy!", "hi"]
    plain, plain_tok = embedder.embed_with_tokens(texts)
    none, none_tok = embedder.embed_with_tokens(texts, ["", ""])
    np.testing.assert_array_equal(none, plain)  # no context: exactly `embed`
    np.testing.assert_array_equal(none_tok[0][0], plain_tok[0][0])
    read, read_tok = embedder.embed_with_tokens(texts, ["Nate: Look how cute my two turtles are!", ""])
    assert read_tok[0][1] == plain_tok[0][1]  # the text's own tokens, no "turtles"
    assert float(read[0] @ plain[0]) < 0.95  # read in context: another vector
    np.testing.assert_allclose(read[1], plain[1], atol=1e-6)  # a neighbour in the batch: unchanged
    turtles = embedder.embed(["turtles"])[0]
    assert float(read[0] @ turtles) > float(plain[0] @ turtles) + 0.05
    # a context too long for max_length loses its beginning, never the text
    long_ctx, long_tok = embedder.embed_with_tokens([texts[0]], ["blah " * 1000])
    assert long_tok[0][1] == plain_tok[0][1]
    with pytest.raises(TypeError):
        embedder.embed_with_tokens(texts, ["only one"])
    with pytest.raises(TypeError):
        embedder.embed_with_tokens(texts, "one string")


def test_a_short_batch_gives_each_text_its_single_call_vectors_and_tokens(embedder):
    texts = [f"a short memory about item {i} " + "and more words " * (i % 5) for i in range(20)]
    batch = embedder.embed_with_tokens(texts)
    for text, vec, (tokens, names) in zip(texts, batch[0], batch[1]):
        single, [(single_tokens, single_names)] = embedder.embed_with_tokens([text])
        assert np.max(np.abs(vec - single[0])) < 1e-4
        assert names == single_names and np.max(np.abs(tokens - single_tokens)) < 1e-4
