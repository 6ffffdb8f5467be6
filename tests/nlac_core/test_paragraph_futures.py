"""Futures with content: the successor writes its FUTURE section across line breaks as one paragraph, resamples
an empty one (bounded), and flags what is still empty; a flagged future is never a finished critique and a
flagged Bellman target never a training record."""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.bellman import backup
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.outputs import from_json, to_json
from nlac_core.sections import continue_line, continue_paragraph, is_degenerate, one_paragraph
from nlac_core.sft_data import StepIndex, successor_records
from nlac_core.successor import FUTURE_PRIMER, predict_futures, transition_of
from tests.nlac_core._steps import tau_steps

LIST_AFTER_OPENER = " the agent will:\n1. look up the reservation\n2. cancel it.\nOUTCOME: success"


def test_it_joins_a_list_written_after_the_primer_into_one_paragraph():
    text = one_paragraph(" After this action," + LIST_AFTER_OPENER)
    assert text == "After this action, the agent will: look up the reservation; cancel it."
    assert not is_degenerate(text, FUTURE_PRIMER)


def test_it_calls_the_primer_or_a_list_opener_alone_degenerate():
    assert is_degenerate("After this action,", FUTURE_PRIMER)
    assert is_degenerate("After this action, the agent will:", FUTURE_PRIMER)
    assert is_degenerate("", FUTURE_PRIMER)
    assert not is_degenerate("After this action, the user confirms.", FUTURE_PRIMER)


def test_it_keeps_a_future_that_breaks_the_line_after_the_opener():
    """The landed code cut at the first newline and stored "After this action, the agent will:" (4 of 12 real
    futures of the embedded model)."""
    transitions = [transition_of(s) for s in tau_steps()[:2]]
    backend = FakeBackend(responder=lambda r: LIST_AFTER_OPENER)
    futures = predict_futures(backend, transitions, CritiqueConfig().spec(64))
    expected = "After this action, the agent will: look up the reservation; cancel it."
    assert [f[0].text for f in futures] == [expected] * 2
    assert not any(f[0].degenerate for f in futures)
    kind, batch = backend.calls[0]  # one batched FUTURE call, nothing resampled
    assert kind == "generate" and len(batch) == 2 and backend.calls[1][0] == "loglikelihood"


def test_it_resamples_an_empty_future_with_its_own_seed_and_then_keeps_it():
    seen = []

    class Flaky(FakeBackend):
        def generate(self, requests, spec):
            seen.append((len(requests), spec.temperature, spec.seed))
            return super().generate(requests, spec)

    answers = iter(["\n\n", " the user pays.\n"])
    backend = Flaky(responder=lambda r: next(answers) if "FUTURE:" in r.assistant_prefix else " x")
    [paragraph] = continue_paragraph(backend, [transition_request()], "FUTURE", CritiqueConfig().spec(64),
                                     primer=FUTURE_PRIMER)
    assert paragraph.text == "After this action, the user pays." and not paragraph.degenerate
    assert paragraph.attempts == 2
    assert seen == [(1, 0.0, 0), (1, 0.8, 7919)]  # greedy first, then sampled with a seed of its own


def test_it_flags_a_future_still_empty_after_the_bounded_resamples_and_the_critique_is_not_finished():
    transitions = [transition_of(s) for s in tau_steps()[:3]]
    first_action = f"THE AGENT'S ACTION:\n{transitions[0].action}\n"

    def responder(request):
        if request.assistant_prefix.endswith(f"FUTURE: {FUTURE_PRIMER}"):
            empty = first_action in request.messages[-1]["content"]
            return " the agent will:\n" if empty else " the user agrees."
        return " fine"

    backend = FakeBackend(responder=responder)
    critiques = critique(backend, transitions)
    first, *rest = critiques
    assert first.futures[0].degenerate and first.predicted_future == "After this action, the agent will:"
    assert not first.parse_ok and "future" in first.missing
    assert all(c.parse_ok and not c.futures[0].degenerate for c in rest)
    # 1 + 2 resamples of the one empty row, never more
    future_calls = [batch for kind, batch in backend.calls
                    if kind == "generate" and batch[0].assistant_prefix.endswith(f"FUTURE: {FUTURE_PRIMER}")]
    assert [len(b) for b in future_calls] == [3, 1, 1]
    assert from_json(to_json(first)).futures[0].degenerate  # kept through JSON (the job's stored record)


def test_it_leaves_a_degenerate_bellman_target_out_of_the_successor_records():
    steps = tau_steps()[:4]
    def opener_only(request):  # the composer (the online model) writes only a list opener
        return " the agent will:" if "FUTURE:" in request.assistant_prefix else " x"

    target = FakeBackend(responder=lambda r: " the user agrees.")
    targets = backup(FakeBackend(responder=opener_only), target, steps)
    assert targets and all(t.degenerate for t in targets)
    index = StepIndex(s.trajectory for s in steps)
    assert successor_records(targets, index) == []
    good = backup(FakeBackend(responder=lambda r: " the user confirms."), target, steps)
    assert len(successor_records(good, index)) == len(good) and not any(t.degenerate for t in good)


def transition_request():
    from nlac_core.successor import successor_requests

    requests, _ = successor_requests([transition_of(tau_steps()[0])])
    return requests[0]


@pytest.mark.slow
def test_it_writes_content_where_the_embedded_model_broke_the_line_after_the_opener(embedded_backend):
    """Steps 4, 5, 8 and 9 of `critique gpt-4o-airline.json --limit 3 --max-steps 12`: cut at the first line
    break, the embedded model's future is the opener alone on each; written as a paragraph, each has content."""
    from nlac_core.commands.algorithm import load_trajectories, select_steps
    from nlac_core.successor import successor_requests
    from tests.conftest import TAU_GPT4O

    steps = select_steps(load_trajectories(str(TAU_GPT4O), None, 3), "all", 12)
    chosen = [steps[i] for i in (4, 5, 8, 9)]
    requests, _ = successor_requests([transition_of(s, None, 2000) for s in chosen])
    spec = CritiqueConfig().spec(64)
    lines = continue_line(embedded_backend, requests, "FUTURE", spec, primer=FUTURE_PRIMER)
    assert all(is_degenerate(line, FUTURE_PRIMER) for line in lines), lines  # what the landed code stored
    paragraphs = continue_paragraph(embedded_backend, requests, "FUTURE", spec, primer=FUTURE_PRIMER)
    assert not any(p.degenerate for p in paragraphs), [p.text for p in paragraphs]
    assert all(len(p.text.split()) > 8 and "\n" not in p.text for p in paragraphs)
