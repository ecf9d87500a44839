"""Which chat model writes topic titles (the setting `topic_titles`, decision 0026).

"on" and "off" say it; "auto" (the default) lets a capable model write them: one of at least MIN_PARAMS
parameters, read from the GGUF header (`general.size_label`, "135M", "7B", "8x7B"), else from the count in the
model's file or server name ("qwen2.5-7b-instruct", "llama3.2:3b"), else, for a GGUF file, from its size (a
1B model quantised to 4 bits takes ~0.6 GB). A model served over the OpenAI API whose name says no size is
taken as capable: a server is what one runs for a model too big to load here. The bundled SmolLM2-135M is not
capable: forced on, it titled 9 of 12 LoCoMo topics, mostly with headings unrelated to them ("The Art of Love"
for a pottery class), where the keywords' title names them (decision 0026).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CHOICES = ("auto", "on", "off")
MIN_PARAMS = 1e9
MIN_GGUF_BYTES = 500 * 1024 * 1024  # a GGUF whose size label and name say nothing: ~0.8B parameters at 4-5 bits
_UNIT = {"m": 1e6, "b": 1e9, "t": 1e12}  # no "k": "4k", "128k" in a name are its context
# "7B", "0.5b", "135M", "8x7B" (experts x size) in a size label or a name, not inside a longer word or number
_COUNT = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)([mbt])(?![a-z0-9])", re.IGNORECASE)


def parameter_count(text: str | None) -> float | None:
    """The parameter count a size label or a model name states ("Llama-3.2-3B-Instruct-Q4_K_M" -> 3e9); None
    when it states none (the larger, when it states two)."""
    counts = [
        (int(experts) if experts else 1) * float(n) * _UNIT[unit.lower()]
        for experts, n, unit in _COUNT.findall(text or "")
    ]
    return max(counts) if counts else None


def model_size(model: Any) -> float | None:
    """`model`'s parameter count as far as its file or name tells (None: a served model whose name says none)."""
    path = getattr(model, "model_path", None)
    if path is not None:
        from models.discover import read_gguf_header

        header = read_gguf_header(path) or {}
        for said in (header.get("general.size_label"), Path(path).name):
            n = parameter_count(said if isinstance(said, str) else None)
            if n is not None:
                return n
        try:
            return Path(path).stat().st_size / MIN_GGUF_BYTES * MIN_PARAMS
        except OSError:
            return 0.0  # a file that cannot be read is no capable model
    return parameter_count(getattr(model, "model_id", None))


def model_writes_titles(setting: str, model: Any) -> bool:
    """Whether `model` writes topic titles under the setting ("auto", "on", "off"). Never raises: the LLM
    thread asks before each memory job."""
    if model is None or setting == "off":
        return False
    if setting == "on":
        return True
    try:
        n = model_size(model)
    except Exception:  # an unreadable file: the keywords' titles stay
        log.exception("could not tell the chat model's size")
        return False
    return n is None or n >= MIN_PARAMS
