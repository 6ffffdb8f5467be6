"""The transformers backend on the real embedded SmolLM2: batching, seeds, stops, prefixes, scoring."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest
import torch

from nlac_core.backends.base import BackendError, ChatRequest, SamplingSpec, ScoreRequest

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What is the capital of France?",
    "Say hello.",
    "Name one primary color and explain in a few words why it is called primary.",
    "What is 2 plus 2?",
]


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_it_generates_the_same_greedy_texts_batched_as_one_at_a_time(embedded_backend):
    spec = SamplingSpec(max_new_tokens=12)
    requests = [chat(q) for q in QUESTIONS]
    batched = embedded_backend.generate(requests, spec)
    single = [embedded_backend.generate([r], spec)[0] for r in requests]
    assert batched == single
    assert batched[0].text.startswith("The capital of France is Paris")


def test_it_repeats_a_sampled_call_with_the_same_seed_and_not_with_another(embedded_backend):
    requests = [chat(q) for q in QUESTIONS[:3]]
    spec = SamplingSpec(max_new_tokens=10, temperature=1.0, seed=7)
    first = [c.text for c in embedded_backend.generate(requests, spec)]
    again = [c.text for c in embedded_backend.generate(requests, spec)]
    other = [c.text for c in embedded_backend.generate(requests, dataclasses.replace(spec, seed=8))]
    assert first == again
    assert first != other
    # request i samples with seed + i, whatever its batch mates: alone with seed 8 it is request 1 above
    alone = embedded_backend.generate([requests[1]], dataclasses.replace(spec, seed=8))[0].text
    assert alone == first[1]
    # k copies of one request in a call are k different samples (k futures of one step)
    copies = embedded_backend.generate([requests[1]] * 3, spec)
    assert len({c.text for c in copies}) > 1


def test_it_cuts_at_a_stop_string_and_stops_generating(embedded_backend):
    spec = SamplingSpec(max_new_tokens=40, stop=(" is",))
    done = embedded_backend.generate([chat(QUESTIONS[0])], spec)[0]
    assert done.text == "The capital of France"
    assert done.finish_reason == "stop"
    assert done.completion_tokens < 10  # stopped at the stop string, not after 40 tokens


def test_it_says_length_when_max_new_tokens_runs_out(embedded_backend):
    done = embedded_backend.generate([chat(QUESTIONS[2])], SamplingSpec(max_new_tokens=3))[0]
    assert done.finish_reason == "length"
    assert done.completion_tokens == 3


def test_it_continues_an_assistant_prefix_without_repeating_it(embedded_backend):
    plain = ChatRequest(chat(QUESTIONS[0]))
    prefixed = ChatRequest(chat(QUESTIONS[0]), assistant_prefix="The capital of France is")
    spec = SamplingSpec(max_new_tokens=6, stop=("\n",))
    without, with_prefix = embedded_backend.generate([plain, prefixed], spec)
    assert with_prefix.text.startswith(" Paris")
    assert "capital" not in with_prefix.text
    assert with_prefix.prompt_tokens > without.prompt_tokens


def test_it_counts_prompt_and_completion_tokens(embedded_backend):
    request = ChatRequest(chat(QUESTIONS[0]))
    done = embedded_backend.generate([request], SamplingSpec(max_new_tokens=20))[0]
    assert done.finish_reason == "stop"
    assert done.prompt_tokens == len(embedded_backend.prompt_ids(request))
    # the text's tokens plus the end-of-turn token; never the padding after it
    assert done.completion_tokens == len(embedded_backend.tokenizer.encode(done.text)) + 1


def test_it_keeps_the_start_and_the_end_of_a_prompt_too_long_for_the_context(embedded_backend, caplog):
    long_request = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "Please read this. " * 60 + "Now say hello."}]
    full = embedded_backend.prompt_ids(ChatRequest(long_request))
    saved = embedded_backend.max_length, embedded_backend._warned_truncation, embedded_backend.truncated_prompts
    embedded_backend.max_length, embedded_backend._warned_truncation = 64, False
    try:
        with caplog.at_level(logging.WARNING, logger="nlac_core.backends.hf"):
            first, second = embedded_backend.generate([long_request, long_request], SamplingSpec(max_new_tokens=4))
        kept = embedded_backend._fit(full, 60)
        assert embedded_backend.truncated_prompts == saved[2] + 3
    finally:
        embedded_backend.max_length, embedded_backend._warned_truncation, embedded_backend.truncated_prompts = saved
    assert first.prompt_tokens == second.prompt_tokens == 60
    assert len([r for r in caplog.records if "exceeds" in r.message]) == 1
    text = embedded_backend.tokenizer.decode(kept)
    assert "You are terse." in text and text.rstrip().endswith("assistant")  # instructions and the request kept
    assert "Now say hello." in text


def test_it_prefers_yes_to_an_unrelated_continuation(embedded_backend):
    question = chat("Is Paris the capital of France? Answer yes or no.")
    options = [" Yes.", "Bananas are purple and sing at night.", "Yes", "No"]
    requests = [ScoreRequest(question, option) for option in options]
    together = embedded_backend.loglikelihood(requests)
    yes, unrelated = together[:2]
    assert all(math.isfinite(s) and s < 0 for s in together)
    assert yes > unrelated + 10
    # options sharing a prompt are scored against one prompt pass: same figures as one at a time
    alone = [embedded_backend.loglikelihood([r])[0] for r in requests]
    assert together == pytest.approx(alone, abs=1e-3)
    assert embedded_backend.loglikelihood([ScoreRequest(question, "")]) == [0.0]


def test_it_scores_exactly_what_a_plain_forward_pass_gives(embedded_backend):
    request = ScoreRequest(chat("Is the sky blue?"), " Yes, it is.", assistant_prefix="VERDICT:")
    prompt = embedded_backend.prompt_ids(request)
    continuation = embedded_backend.tokenizer.encode(request.continuation, add_special_tokens=False)
    ids = torch.tensor([prompt + continuation])
    with torch.inference_mode():
        logprobs = embedded_backend.hf_model(ids).logits[0].float().log_softmax(-1)
    expected = sum(logprobs[len(prompt) + j - 1, t].item() for j, t in enumerate(continuation))
    mixed = [request, ScoreRequest(chat("Hi"), "Hello! How can I help you today?")]
    assert embedded_backend.loglikelihood(mixed)[0] == pytest.approx(expected, abs=1e-3)


def test_it_refuses_a_directory_that_holds_no_model(tmp_path):
    from nlac_core.backends.hf import HFBackend

    with pytest.raises(BackendError, match=f"{tmp_path}: not a model directory"):
        HFBackend(model=str(tmp_path))
