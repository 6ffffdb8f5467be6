"""Successor + evaluator on real tau-bench steps, with a scripted backend.

The model is beside the point here: these tests pin down the procedure (what
is asked, in how many batched calls, how answers become critiques).
"""

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.critic import CritiqueConfig, critique, critique_chunks
from nlac_core.successor import predict_futures, transition_of
from tests.nlac_core._steps import tau_steps


def scorer_preferring(*words):
    return lambda request: 0.0 if request.continuation.strip() in words else -3.0


def content_free(request):
    return "CONVERSATION SO FAR:\nN/A\n" in request.messages[-1]["content"]


def biased_scorer(request):
    """A model that likes "optimal" whatever it reads, and likes "harmful" more on a real step than on none."""
    word = request.continuation.strip()
    prior = {"optimal": 0.0, "suboptimal": -4.0, "harmful": -5.0, "success": -3.0, "failure": 0.0}[word]
    return prior + (4.0 if word == "harmful" and not content_free(request) else 0.0)


def test_it_writes_a_structured_critique_in_five_batched_calls():
    steps = tau_steps()[:5]
    backend = FakeBackend(responder=lambda r: " the user confirms\nand more", scorer=biased_scorer)
    critiques = critique(backend, [transition_of(s) for s in steps])
    assert [kind for kind, _ in backend.calls] == ["generate", "loglikelihood", "loglikelihood", "generate",
                                                   "generate"]
    # the whole batch in each call; the verdict call adds one content-free row per OUTCOME word (all "failure")
    assert [len(batch) for _, batch in backend.calls] == [5, 10, 15 + 3, 5, 5]
    for c, step in zip(critiques, steps, strict=True):
        assert c.parse_ok and c.missing == ()
        assert c.verdict == "harmful" and c.verdict_calibration == "content_free"
        assert c.verdict_probs["harmful"] > 0.5 and sum(c.verdict_probs.values()) == pytest.approx(1, abs=1e-3)
        assert c.success_prob == pytest.approx(1 / (1 + 2.718281828 ** 3), rel=1e-3)
        # the future goes through the line break (a paragraph), the one-line sections stop at it
        assert c.predicted_future == "After this action, the user confirms; and more"
        assert c.reasoning == "The action is the user confirms"
        assert c.reasoning.startswith("The action is") and c.suggestion.startswith("The agent should")
        assert c.step.step_index == step.index and c.step.task_id == step.trajectory.task.external_id
        assert c.provenance.prompt_id.startswith("evaluator_zero_shot@") and c.provenance.backend == "fake"
        assert c.futures[0].provenance.prompt_id.startswith("successor@")
        assert c.raw_text.splitlines()[2] == "VERDICT: harmful"


def test_it_calibrates_verdicts_against_the_content_free_prompt():
    """Raw likelihoods give the model's favourite word for every step; calibrated ones what the step changed."""
    transitions = [transition_of(s) for s in tau_steps()[:3]]
    raw = critique(FakeBackend(responder=lambda r: " x", scorer=biased_scorer), transitions,
                   CritiqueConfig(calibrate_verdicts=False))
    assert {c.verdict for c in raw} == {"optimal"} and {c.verdict_calibration for c in raw} == {""}
    backend = FakeBackend(responder=lambda r: " x", scorer=biased_scorer)
    calibrated = critique(backend, transitions)
    assert {c.verdict for c in calibrated} == {"harmful"}
    baseline_rows = [r for r in backend.calls[2][1] if content_free(r)]
    assert len(baseline_rows) == 3  # one content-free row per verdict word, shared by the three steps
    assert baseline_rows[0].assistant_prefix.endswith("FUTURE: N/A\nOUTCOME: failure\nVERDICT:")


def test_it_keeps_raw_text_and_flags_a_broken_free_critique():
    steps = tau_steps()[:2]
    backend = FakeBackend(responder=lambda r: "The agent did a good job overall.")
    critiques = critique(backend, [transition_of(s) for s in steps], CritiqueConfig(mode="free"))
    for c in critiques:
        assert not c.parse_ok
        assert c.raw_text == "The agent did a good job overall."
        assert c.verdict is None and "verdict" in c.missing


def test_it_parses_a_well_formed_free_critique():
    text = "FUTURE: booked\nOUTCOME: 80%\nVERDICT: Optimal\nREASON: follows policy\nSUGGESTION: keep it"
    backend = FakeBackend(responder=lambda r: text)
    [c] = critique(backend, [transition_of(tau_steps()[0])], CritiqueConfig(mode="free"))
    assert c.parse_ok and c.verdict == "optimal" and c.success_prob == pytest.approx(0.8)
    assert c.mode == "free" and c.provenance.prompt_id.startswith("evaluator@")


def test_it_samples_k_futures_and_averages_their_success():
    step = tau_steps()[1]
    probs = iter([0.0, -10.0, -10.0, 0.0, 0.0, -10.0])  # success, failure, success
    backend = FakeBackend(responder=lambda r: " something", scorer=lambda r: next(probs))
    [futures] = predict_futures(backend, [transition_of(step)],
                                CritiqueConfig(k=3, temperature=0.8).spec(32), k=3)
    assert len(futures) == 3
    assert [round(f.success_prob) for f in futures] == [1, 0, 1]
    with pytest.raises(ValueError, match="need sampling"):
        CritiqueConfig(k=3)
    with pytest.raises(ValueError, match="mode"):
        CritiqueConfig(mode="poetry")


def test_it_critiques_in_chunks_and_stops_when_asked():
    steps = tau_steps()[:5]
    backend = FakeBackend(responder=lambda r: " x")
    seen = []
    chunks = list(critique_chunks(backend, [transition_of(s) for s in steps], CritiqueConfig(chunk_size=2),
                                  on_progress=lambda done, total: seen.append((done, total))))
    assert [len(c) for c in chunks] == [2, 2, 1] and seen == [(2, 5), (4, 5), (5, 5)]
    stop_after_one = iter([False, True])
    chunks = list(critique_chunks(backend, [transition_of(s) for s in steps], CritiqueConfig(chunk_size=2),
                                  should_stop=lambda: next(stop_after_one)))
    assert [len(c) for c in chunks] == [2]
