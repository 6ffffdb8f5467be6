"""Model backends behind one interface, found by name.

    backend = get_backend("hf", model="/path/to/model")      # transformers, CPU or GPU
    backend = get_backend("vllm", model="/path/to/model")    # vLLM, GPU hosts only
    backend = get_backend("openai", model="gpt-4o", base_url="http://host:8000/v1")

The registry is lazy: a backend's module (and torch, vllm or the HTTP client
it needs) is imported only when that backend is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from nlac_core.backends.base import (
    Backend,
    BackendError,
    ChatRequest,
    Completion,
    Provenance,
    SamplingSpec,
    ScoreRequest,
    Unsupported,
)

# name -> "module:attribute"; imported on first use only.
REGISTRY: dict[str, str] = {
    "hf": "nlac_core.backends.hf:HFBackend",
    "vllm": "nlac_core.backends.vllm_backend:VLLMBackend",
    "openai": "nlac_core.backends.openai_backend:OpenAIBackend",
    "fake": "nlac_core.backends.fake:FakeBackend",
}


# the backends a job may run on (``fake`` is the tests'), and those that hold the weights in the process: they
# read log-likelihoods, which a critic's decision, a P(success) or a target network needs
JOB_BACKENDS = ("hf", "vllm", "openai")
LOCAL_BACKENDS = ("hf", "vllm")


def register(name: str, target: str) -> None:
    """Add a backend: ``target`` is ``"package.module:ClassName"``."""
    REGISTRY[name] = target


def get_backend(name: str, **kwargs: Any) -> Backend:
    """Build the backend registered as ``name`` with its keyword arguments."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise BackendError(f"unknown backend {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return cls(**kwargs)


__all__ = [
    "JOB_BACKENDS", "LOCAL_BACKENDS", "REGISTRY", "Backend", "BackendError", "ChatRequest", "Completion",
    "Provenance", "SamplingSpec", "ScoreRequest", "Unsupported", "get_backend", "register",
]
