"""The vLLM backend on the embedded model: GPU hosts with vllm installed only."""

from __future__ import annotations

import importlib.util
import math

import pytest

from nlac_core.backends.base import ChatRequest, SamplingSpec, ScoreRequest


def _vllm_on_a_gpu() -> bool:
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _vllm_on_a_gpu(), reason="needs a CUDA GPU and vllm")]


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def vllm_backend(embedded_model_dir):
    from nlac_core.backends.vllm_backend import VLLMBackend

    backend = VLLMBackend(model=str(embedded_model_dir), gpu_memory_utilization=0.3, dtype="float32")
    yield backend
    backend.close()


def test_it_generates_with_stops_prefixes_and_seeds(vllm_backend):
    greedy = vllm_backend.generate([chat("What is the capital of France?"), chat("Say hello.")],
                                   SamplingSpec(max_new_tokens=12))
    assert greedy[0].text.startswith("The capital of France is Paris")
    assert all(c.prompt_tokens > 0 and 0 < c.completion_tokens <= 12 for c in greedy)
    stopped = vllm_backend.generate([chat("What is the capital of France?")],
                                    SamplingSpec(max_new_tokens=40, stop=(" is",)))[0]
    assert (stopped.text, stopped.finish_reason) == ("The capital of France", "stop")
    prefixed = vllm_backend.generate([ChatRequest(chat("What is the capital of France?"),
                                                  assistant_prefix="The capital of France is")],
                                     SamplingSpec(max_new_tokens=4))[0]
    assert prefixed.text.startswith(" Paris")
    spec = SamplingSpec(max_new_tokens=10, temperature=1.0, seed=5)
    requests = [chat("Say hello.")] * 3
    first = [c.text for c in vllm_backend.generate(requests, spec)]
    assert first == [c.text for c in vllm_backend.generate(requests, spec)]
    assert len(set(first)) > 1
    # vLLM refuses an over-long prompt; the backend keeps its end instead
    too_long = vllm_backend.generate([chat("hello " * (vllm_backend.max_model_len + 100))],
                                     SamplingSpec(max_new_tokens=4))[0]
    assert too_long.prompt_tokens == vllm_backend.max_model_len - 4


def test_it_scores_continuations_as_the_hf_backend_does(vllm_backend, embedded_backend):
    question = chat("Is Paris the capital of France? Answer yes or no.")
    requests = [ScoreRequest(question, " Yes."), ScoreRequest(question, "Bananas are purple and sing at night."),
                ScoreRequest(question, " Yes", assistant_prefix="VERDICT:")]
    scores = vllm_backend.loglikelihood(requests)
    assert all(math.isfinite(s) and s < 0 for s in scores)
    assert scores[0] > scores[1]
    assert scores == pytest.approx(embedded_backend.loglikelihood(requests), abs=0.05)
