"""OpenAI-compatible chat endpoints: OpenAI itself, a vLLM server, or ``python -m nlac_core serve``.

A batch becomes concurrent HTTP requests (``concurrency`` at a time, order
kept), so a server that batches what arrives together (vLLM, our own serve)
generates them together. Retries with exponential backoff on connection
errors, timeouts, 408/409/429 and 5xx are the official client's own
(``max_retries``); what still fails becomes a BackendError naming the endpoint.

``assistant_prefix`` is sent as a final assistant message with
``continue_final_message`` (vLLM's extension, also understood by our server);
a server without it would answer a new turn instead. Log-likelihoods are not
available through chat endpoints: ``loglikelihood`` raises Unsupported.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

from nlac_core.backends.base import (
    BackendError,
    ChatRequest,
    Completion,
    SamplingSpec,
    ScoreRequest,
    Unsupported,
    as_requests,
    truncate_at_stop,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIBackend:
    """Chat completions over HTTP. Request ``i`` of a sampled call is sent with seed ``spec.seed + i``."""

    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0,
                 max_retries: int = 4, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise BackendError(f"concurrency must be at least 1, got {concurrency}")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        # Local servers need no key, but the client insists on one.
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.concurrency = concurrency
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=timeout, max_retries=max_retries)

    def close(self) -> None:
        self.client.close()

    def generate(self, requests, spec: SamplingSpec) -> list[Completion]:
        requests = as_requests(requests)
        if not requests:
            return []
        seeds = [None if spec.seed is None else spec.seed + i for i in range(len(requests))]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(lambda pair: self._one(pair[0], spec, pair[1]), zip(requests, seeds, strict=True)))

    def _one(self, request: ChatRequest, spec: SamplingSpec, seed: int | None) -> Completion:
        messages: list[dict[str, Any]] = [dict(m) for m in request.messages]
        kwargs: dict[str, Any] = {}
        if request.assistant_prefix:
            messages.append({"role": "assistant", "content": request.assistant_prefix})
            kwargs["extra_body"] = {"continue_final_message": True, "add_generation_prompt": False}
        if seed is not None:
            kwargs["seed"] = seed
        if spec.stop:
            kwargs["stop"] = list(spec.stop)
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=spec.max_new_tokens, temperature=spec.temperature,
                top_p=spec.top_p, n=1, **kwargs)
        except openai.APIStatusError as exc:
            raise BackendError(f"{self.base_url}: HTTP {exc.status_code} for model {self.model!r}: "
                               f"{_error_message(exc)}") from exc
        except openai.APITimeoutError as exc:
            raise BackendError(f"{self.base_url}: no answer within the timeout (after retries)") from exc
        except openai.APIConnectionError as exc:
            raise BackendError(f"{self.base_url}: cannot connect ({exc.__cause__ or exc})") from exc
        except openai.OpenAIError as exc:
            raise BackendError(f"{self.base_url}: {exc}") from exc
        if not response.choices:
            raise BackendError(f"{self.base_url}: the response has no choices")
        choice = response.choices[0]
        # Some servers return the stop string; the interface promises it is not part of the text.
        text, _ = truncate_at_stop(choice.message.content or "", spec.stop)
        usage = response.usage
        return Completion(text=text, prompt_tokens=usage.prompt_tokens if usage else 0,
                          completion_tokens=usage.completion_tokens if usage else 0,
                          finish_reason="length" if choice.finish_reason == "length" else "stop")

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[float]:
        raise Unsupported(f"{self.base_url}: chat completion endpoints do not give log-likelihoods of given "
                          "continuations; generate and parse instead")


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return exc.message
