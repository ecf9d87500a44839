"""Build the configured embedder and chat model from settings (the only place that picks backends)."""

from __future__ import annotations

from app.settings import ChatModelSettings, EmbeddingSettings


def build_embedder(settings: EmbeddingSettings):
    from models.embedder import OnnxEmbedder

    return OnnxEmbedder(settings.onnx_path or None, settings.tokenizer_path or None)


def build_chat_model(settings: ChatModelSettings):
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
