"""Build the configured embedder and chat model from settings (the only place that picks backends).

A model file that fails to load raises `ModelFileError` naming the file; here it also gets what to do
about it, since only the app knows whether the file was chosen in the settings or came bundled."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.messages import model_file_fix
from app.settings import ChatModelSettings, EmbeddingSettings
from models.errors import ModelFileError

if TYPE_CHECKING:
    from models.chat import ChatModel
    from models.embedder import OnnxEmbedder


def build_embedder(settings: EmbeddingSettings, settings_file: Path | None = None) -> OnnxEmbedder:
    from models.embedder import OnnxEmbedder
    from models.resolve import DEFAULT_ONNX, DEFAULT_TOKENIZER

    try:
        return OnnxEmbedder(settings.onnx_path or None, settings.tokenizer_path or None)
    except ModelFileError as exc:
        chosen = {"embedding.onnx_path": settings.onnx_path, "embedding.tokenizer_path": settings.tokenizer_path}
        key = _setting_of(exc.path, chosen)
        tokenizer = key == "embedding.tokenizer_path" or (key is None and exc.path.endswith(".json"))
        package = (DEFAULT_TOKENIZER if tokenizer else DEFAULT_ONNX)[0]
        what = "embedding tokenizer" if tokenizer else "embedding model"
        raise exc.with_fix(model_file_fix(what, key, settings_file, package)) from exc.__cause__


def build_chat_model(settings: ChatModelSettings, settings_file: Path | None = None) -> ChatModel:
    if settings.backend == "openai":
        from models.openai_http import OpenAIChatModel, OpenAIConfig

        return OpenAIChatModel(
            OpenAIConfig(
                base_url=settings.server_url,
                model=settings.server_model,
                api_key=settings.api_key,
                n_ctx=settings.n_ctx,
                temperature=settings.temperature,
                top_p=settings.top_p,
                min_p=settings.min_p,
                repeat_penalty=settings.repeat_penalty,
                max_tokens=settings.max_tokens,
            )
        )
    from models.llama_cpp_backend import LlamaCppChatModel, LlamaCppConfig
    from models.resolve import DEFAULT_GGUF

    try:
        return LlamaCppChatModel(
            LlamaCppConfig(
                model_path=settings.gguf_path or None,
                n_ctx=settings.n_ctx,
                n_threads=settings.n_threads,
                n_gpu_layers=settings.n_gpu_layers,
                temperature=settings.temperature,
                top_p=settings.top_p,
                min_p=settings.min_p,
                repeat_penalty=settings.repeat_penalty,
                self_repeat_penalty=settings.self_repeat_penalty,
                max_tokens=settings.max_tokens,
            )
        )
    except ModelFileError as exc:
        key = _setting_of(exc.path, {"chat.gguf_path": settings.gguf_path})
        raise exc.with_fix(model_file_fix("chat model", key, settings_file, DEFAULT_GGUF[0])) from exc.__cause__


def _setting_of(path: str, chosen: dict[str, str]) -> str | None:
    """The settings key whose file `path` is (None: a bundled default)."""
    for key, value in chosen.items():
        if value and Path(value).expanduser() == Path(path).expanduser():
            return key
    return None
