"""The vLLM backend's own logic, on hosts without a GPU: a stand-in ``vllm`` module records what it is asked.

The real engine is tested in test_backend_vllm.py (GPU hosts); here the point is
what this backend sends: prefixes as continued assistant messages, one seed
per request, over-long prompts cut at the front, log-probs read at the right
positions.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest

from nlac_core.backends.base import ChatRequest, SamplingSpec, ScoreRequest

CONTEXT = 1024


class SamplingParams:
    def __init__(self, **kwargs) -> None:
        self.__dict__.update(kwargs)


@dataclass
class Sample:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class Output:
    prompt_token_ids: list[int]
    outputs: list[Sample] = field(default_factory=list)
    prompt_logprobs: list | None = None


@dataclass
class Logprob:
    logprob: float


class LLM:
    """Answers each prompt with its seed; gives every prompt token a log-prob of -0.5."""

    def __init__(self, model: str, **kwargs) -> None:
        from transformers import AutoTokenizer

        self.kwargs = kwargs
        self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=CONTEXT))
        self.calls: list[tuple[str, list, dict]] = []

    def get_tokenizer(self):
        return self.tokenizer

    def chat(self, conversations, params, use_tqdm=True, **kwargs):
        self.calls.append(("chat", conversations, kwargs))
        return [Output([1, 2, 3], [Sample(f"seed {p.seed}.", [7, 8], "length")]) for p in params]

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append(("generate", prompts, {}))
        if getattr(params, "prompt_logprobs", None) == 0:
            return [Output(p["prompt_token_ids"], [Sample("", [5], "length")],
                           [None] + [{t: Logprob(-0.5)} for t in p["prompt_token_ids"][1:]]) for p in prompts]
        return [Output(p["prompt_token_ids"], [Sample(f"seed {q.seed}", [7], "stop")])
                for p, q in zip(prompts, params, strict=True)]


@pytest.fixture(scope="module")
def stand_in(embedded_model_dir):
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
        from nlac_core.backends.vllm_backend import VLLMBackend

        yield VLLMBackend(model=str(embedded_model_dir))


@pytest.fixture
def backend(stand_in):
    stand_in._llm.calls.clear()
    return stand_in


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_it_sends_prefixes_as_a_continued_assistant_message_with_a_seed_per_request(backend):
    requests = [ChatRequest(chat("a")), ChatRequest(chat("b"), assistant_prefix="VERDICT:"), ChatRequest(chat("c"))]
    done = backend.generate(requests, SamplingSpec(max_new_tokens=4, temperature=1.0, seed=10, stop=(".",)))
    assert [c.text for c in done] == ["seed 10", "seed 11", "seed 12"]
    assert [c.finish_reason for c in done] == ["stop", "stop", "stop"]  # cut at "." even though vLLM said length
    (_, plain, plain_kw), (_, prefixed, prefixed_kw) = backend._llm.calls
    assert plain == [chat("a"), chat("c")]
    assert plain_kw == {"add_generation_prompt": True, "continue_final_message": False}
    assert prefixed == [chat("b") + [{"role": "assistant", "content": "VERDICT:"}]]
    assert prefixed_kw == {"add_generation_prompt": False, "continue_final_message": True}


def test_it_sends_no_seed_when_greedy_and_honours_row_seeds(backend):
    greedy = backend.generate([chat("a")], SamplingSpec(max_new_tokens=4))
    assert greedy[0].text == "seed None."
    sampled = backend.generate([chat("a"), chat("b")], SamplingSpec(max_new_tokens=4, temperature=0.7, seed=1),
                               row_seeds=[42, None])
    assert [c.text for c in sampled] == ["seed 42.", "seed 2."]


def test_it_keeps_the_end_of_a_prompt_longer_than_the_context(backend):
    request = ChatRequest(chat("word " * 1200 + "the end"))
    done = backend.generate([request], SamplingSpec(max_new_tokens=4))[0]
    kind, (prompt,), _ = backend._llm.calls[-1]
    assert kind == "generate"
    assert prompt["prompt_token_ids"] == backend.prompt_ids(request)[-(CONTEXT - 4):]
    assert done.prompt_tokens == CONTEXT - 4


def test_it_sums_the_log_probs_of_the_continuation_tokens_only(backend):
    question = chat("Is it?")
    scores = backend.loglikelihood([ScoreRequest(question, " Yes, it is."), ScoreRequest(question, ""),
                                    ScoreRequest(question, " No", assistant_prefix="VERDICT:")])
    n_yes = len(backend.tokenizer.encode(" Yes, it is.", add_special_tokens=False))
    n_no = len(backend.tokenizer.encode(" No", add_special_tokens=False))
    assert scores == [-0.5 * n_yes, 0.0, -0.5 * n_no]
    _, prompts, _ = backend._llm.calls[-1]
    assert len(prompts) == 2  # the empty continuation costs no request
