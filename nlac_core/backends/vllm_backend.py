"""vLLM backend for GPU hosts: the fast path for large batches.

``vllm`` is imported in the constructor only, so importing this module (or
``nlac_core.backends``) never needs it, and none of its types leave this file:
callers get :class:`Completion` objects and floats.

Seeds follow the same rule as the other backends: request ``i`` of a sampled
call uses ``spec.seed + i``, so k copies of one request in a batch give k
different samples, and the call as a whole is repeatable.
"""

from __future__ import annotations

import gc
import logging
import random
from collections.abc import Sequence
from typing import Any

from nlac_core.backends import templating
from nlac_core.backends.base import (
    BackendError,
    ChatRequest,
    Completion,
    SamplingSpec,
    ScoreRequest,
    as_requests,
    truncate_at_stop,
)

log = logging.getLogger(__name__)

# Tokens a chat template may add around the messages (role headers, a default system prompt).
TEMPLATE_ALLOWANCE = 512


class VLLMBackend:
    """A local model directory served by an in-process ``vllm.LLM``."""

    name = "vllm"

    def __init__(self, model: str, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.85,
                 max_model_len: int | None = None, dtype: str = "auto") -> None:
        try:
            import vllm  # lazy: GPU hosts only (requirements-gpu.txt)
        except ImportError as exc:
            raise BackendError("the vllm backend needs vllm, installed on GPU hosts only "
                               "(pip install -r requirements-gpu.txt)") from exc
        self.model = str(model)
        self._SamplingParams = vllm.SamplingParams
        kwargs: dict[str, Any] = {"model": self.model, "tensor_parallel_size": tensor_parallel_size,
                                  "gpu_memory_utilization": gpu_memory_utilization, "dtype": dtype}
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        try:
            self._llm = vllm.LLM(**kwargs)
        except Exception as exc:  # vLLM raises many kinds (ValueError, RuntimeError, OSError) on a bad setup
            raise BackendError(f"{model}: vLLM cannot load the model ({exc})") from exc
        self.tokenizer = self._llm.get_tokenizer()
        self.max_model_len = max_model_len or self._engine_max_len()
        self._warned_truncation = False

    def _engine_max_len(self) -> int | None:
        config = getattr(self._llm.llm_engine, "model_config", None)
        return getattr(config, "max_model_len", None)

    def close(self) -> None:
        """Drop the engine; the GPU memory is released when vLLM's workers are collected."""
        self._llm = None
        gc.collect()
        try:
            import torch  # lazy: only a vllm host asks for its GPUs

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def _params(self, spec: SamplingSpec, seed: int | None):
        kwargs: dict[str, Any] = {"n": 1, "max_tokens": spec.max_new_tokens, "temperature": spec.temperature,
                                  "top_p": spec.top_p, "seed": None if spec.greedy else seed}
        if spec.stop:
            kwargs["stop"] = list(spec.stop)
        return self._SamplingParams(**kwargs)

    def prompt_ids(self, request: ChatRequest | ScoreRequest) -> list[int]:
        """Token ids of the chat-template prompt, assistant prefix included (as the hf backend renders it)."""
        return templating.prompt_ids(self.tokenizer, request)

    def _surely_fits(self, request: ChatRequest, budget: int) -> bool:
        """A cheap bound (a token covers at least one character) that spares rendering most prompts twice."""
        chars = sum(len(str(m.get("content") or "")) for m in request.messages) + len(request.assistant_prefix)
        return chars + TEMPLATE_ALLOWANCE <= budget

    def generate(self, requests, spec: SamplingSpec, *, row_seeds: Sequence[int | None] | None = None
                 ) -> list[Completion]:
        """One completion per request, in order; ``row_seeds`` overrides the per-request seeds.

        Prompts go through ``LLM.chat`` (with ``continue_final_message`` for an
        assistant prefix). vLLM refuses a prompt longer than the context rather
        than truncating it, so a prompt that may not fit is rendered here,
        loses its beginning (one warning), and goes in as token ids.
        """
        requests = as_requests(requests)
        if not requests:
            return []
        if self._llm is None:
            raise BackendError(f"{self.model}: the backend was closed")
        base = spec.seed if spec.seed is not None else random.SystemRandom().randrange(2**62)
        params = [self._params(spec, base + i if row_seeds is None or row_seeds[i] is None else row_seeds[i])
                  for i in range(len(requests))]
        budget = (self.max_model_len or 0) - spec.max_new_tokens
        if self.max_model_len and budget < 1:
            raise BackendError(f"max_new_tokens {spec.max_new_tokens} leaves no room for a prompt in the "
                               f"{self.max_model_len}-token context of {self.model}")
        long = {i for i, r in enumerate(requests) if self.max_model_len and not self._surely_fits(r, budget)}
        results: list[Completion | None] = [None] * len(requests)
        try:
            # continue_final_message is per call, so requests with and without a prefix go in two calls.
            for prefixed in (False, True):
                idx = [i for i, r in enumerate(requests) if bool(r.assistant_prefix) == prefixed and i not in long]
                if idx:
                    outputs = self._llm.chat([self._conversation(requests[i]) for i in idx],
                                             [params[i] for i in idx], use_tqdm=False,
                                             add_generation_prompt=not prefixed, continue_final_message=prefixed)
                    for i, output in zip(idx, outputs, strict=True):
                        results[i] = self._completion(output, spec)
            if long:
                idx = sorted(long)
                prompts = [{"prompt_token_ids": self._fit(self.prompt_ids(requests[i]), budget)} for i in idx]
                outputs = self._llm.generate(prompts, [params[i] for i in idx], use_tqdm=False)
                for i, output in zip(idx, outputs, strict=True):
                    results[i] = self._completion(output, spec)
        except ValueError as exc:  # vLLM's refusal of a request (too long, bad parameter)
            raise BackendError(f"{self.model}: vLLM rejected the batch ({exc})") from exc
        return results  # type: ignore[return-value]

    def _fit(self, ids: list[int], budget: int) -> list[int]:
        if len(ids) <= budget:
            return ids
        if not self._warned_truncation:
            log.warning("%s: a prompt of %d tokens exceeds the %d-token budget; keeping its last %d tokens "
                        "(warned once)", self.model, len(ids), budget, budget)
            self._warned_truncation = True
        return ids[len(ids) - budget:]

    @staticmethod
    def _conversation(request: ChatRequest) -> list[dict[str, Any]]:
        messages = templating.plain_messages(request.messages)
        if request.assistant_prefix:
            messages.append({"role": "assistant", "content": request.assistant_prefix})
        return messages

    @staticmethod
    def _completion(output, spec: SamplingSpec) -> Completion:
        sample = output.outputs[0]
        text, stopped = truncate_at_stop(sample.text, spec.stop)
        finish = "length" if sample.finish_reason == "length" and not stopped else "stop"
        return Completion(text=text, prompt_tokens=len(output.prompt_token_ids or ()),
                          completion_tokens=len(sample.token_ids), finish_reason=finish)

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[float]:
        """Sum of the continuation tokens' log-probs, read from vLLM's prompt log-probs.

        The prompt is rendered with the tokenizer's chat template exactly as
        the hf backend renders it, and the continuation is tokenized on its own
        and appended; vLLM's prefix cache shares the prompt between options.
        """
        if not requests:
            return []
        if self._llm is None:
            raise BackendError(f"{self.model}: the backend was closed")
        prompts, spans = [], []
        for i, request in enumerate(requests):
            prompt = self.prompt_ids(request)
            cont = self.tokenizer.encode(request.continuation, add_special_tokens=False)
            if self.max_model_len and len(prompt) + len(cont) >= self.max_model_len:
                if len(cont) >= self.max_model_len - 1:
                    raise BackendError(f"score request {i}: the continuation alone has {len(cont)} tokens, more "
                                       f"than the {self.max_model_len}-token context of {self.model}")
                prompt = prompt[len(prompt) + len(cont) - self.max_model_len + 1:]
            prompts.append({"prompt_token_ids": prompt + cont})
            spans.append((len(prompt), len(cont)))
        todo = [i for i, (_, n) in enumerate(spans) if n]
        scores = [0.0] * len(requests)
        if not todo:
            return scores
        params = self._SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        outputs = self._llm.generate([prompts[i] for i in todo], params, use_tqdm=False)
        for i, output in zip(todo, outputs, strict=True):
            start, n = spans[i]
            ids = prompts[i]["prompt_token_ids"]
            logprobs = output.prompt_logprobs
            scores[i] = float(sum(logprobs[j][ids[j]].logprob for j in range(start, start + n)))
        return scores
