"""Inference backends: ONNX sentence embedder, llama.cpp and OpenAI-compatible chat models.

This package is a leaf: it imports nothing from `app`, `ui` or `memory_core`.
"""

from models.errors import ModelError, ModelFileError

__all__ = ["ModelError", "ModelFileError"]
