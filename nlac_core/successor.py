"""The successor model M(s, a): a short text predicting the rest of the episode
after action a in state s, ending with the predicted outcome.

This text is the critic's "value in language space". In NLAC the same model
that acts also predicts; here any backend can, and the Bellman backup asks the
slowly moving target checkpoint for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from nlac_core.actions import render_message_action
from nlac_core.backends.base import Backend, ChatRequest, Provenance, SamplingSpec, sampling_problem
from nlac_core.outcome import OutcomeCalibration
from nlac_core.outputs import Future, StepRef
from nlac_core.prompts.nlac import OUTCOMES, SUCCESSOR
from nlac_core.prompts.parsing import parse_future
from nlac_core.sections import choose, continue_paragraph, extend, is_degenerate
from nlac_core.state import DEFAULT_MAX_CHARS, StepView, render_messages

ACTION_CHARS = 1200
FUTURE_PRIMER = "After this action,"
# How a Bellman target's P(success) becomes the OUTCOME word of its SFT record: "sample" draws it (success with
# probability P, the draw seeded per step), as d_t+1 ~ M_target is a sample; "threshold" writes the likelier word.
OUTCOME_TARGETS = ("sample", "threshold")


@dataclass(frozen=True)
class Transition:
    """(s, a) as text, for prompts: a stored step, or a state with a new action (a'~pi, a refinement)."""

    ref: StepRef
    state: str
    action: str


def ref_of(step: StepView) -> StepRef:
    return StepRef(step.trajectory.content_hash(), step.index, step.trajectory.task.external_id)


def transition_of(step: StepView, action: str | None = None, max_state_chars: int = DEFAULT_MAX_CHARS) -> Transition:
    text = render_message_action(step.action) if action is None else action
    return Transition(ref_of(step), render_messages(step.history, max_state_chars), clip_action(text))


def clip_action(text: str) -> str:
    text = (text or "").strip() or "(empty action)"
    return text if len(text) <= ACTION_CHARS else text[: ACTION_CHARS - 8] + " ...[cut]"


def successor_requests(transitions: Sequence[Transition]) -> tuple[list[ChatRequest], str]:
    rendered = [SUCCESSOR.render(state=t.state, action=t.action) for t in transitions]
    return [r.request() for r in rendered], SUCCESSOR.prompt_id


def predict_futures(backend: Backend, transitions: Sequence[Transition], spec: SamplingSpec, k: int = 1,
                    sectioned: bool = True, calibration: OutcomeCalibration | None = None) -> list[list[Future]]:
    """k futures for each transition, in one batched pass (k * len(transitions) rows).

    Sectioned (the default): the model writes the FUTURE paragraph (resampled when
    empty, else flagged ``degenerate``), and OUTCOME is the probability of "success"
    against "failure". Free: the model writes both lines at once and the parser
    reads them (the outcome may then be missing; an empty future is degenerate).
    ``calibration`` maps P(success) through a fitted Platt scaling (``nlac_core.outcome``); the raw
    probability and the calibration's id are kept on each future.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if problem := sampling_problem(k, spec.temperature):
        raise ValueError(problem)
    rows = [t for t in transitions for _ in range(k)]
    requests, prompt_id = successor_requests(rows)
    provenance = Provenance.of(prompt_id, backend, spec)
    if sectioned:
        paragraphs = continue_paragraph(backend, requests, "FUTURE", spec, primer=FUTURE_PRIMER)
        probs = choose(backend, extend(requests, [f"FUTURE: {p.text}" for p in paragraphs]), "OUTCOME", OUTCOMES)
        results = [(p.text, prob.get("success"), p.degenerate) for p, prob in zip(paragraphs, probs, strict=True)]
    else:
        free_spec = replace(spec, max_new_tokens=max(spec.max_new_tokens, 96))
        parsed = [parse_future(c.text) for c in backend.generate(requests, free_spec)]
        results = [(p.text, p.success_prob, is_degenerate(p.text)) for p in parsed]
    out: list[list[Future]] = []
    for i, t in enumerate(transitions):
        if calibration is None:
            out.append([Future(t.ref, text, prob, provenance, action=t.action, degenerate=bad)
                        for text, prob, bad in results[i * k:(i + 1) * k]])
        else:
            out.append([Future(t.ref, text, calibration.apply(prob), provenance, action=t.action, degenerate=bad,
                               success_prob_raw=prob, outcome_calibration=calibration.id)
                        for text, prob, bad in results[i * k:(i + 1) * k]])
    return out


def outcome_draw(ref: StepRef, seed: int = 0) -> float:
    """A uniform number in [0, 1) fixed by the step and the seed: the same step gets the same draw in a job, a
    dataset build and the CLI, on any worker."""
    digest = hashlib.sha256(f"outcome:{seed}:{ref.trajectory_hash}:{ref.step_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def outcome_word(success_prob: float | None, how: str = "sample", draw: float = 0.0) -> str:
    """The OUTCOME word a predicted P(success) stands for in an SFT target.

    ``sample``: "success" when ``draw`` < P, so over steps the words carry P itself (a target network that puts
    0.7 on a lost episode and 0.9 on a won one still teaches the difference). ``threshold``: the likelier word,
    which says "success" for every P above 0.5 and so carries nothing back until a prediction crosses it. A real
    outcome (P of 0 or 1) gives the same word either way."""
    if success_prob is None:
        return "unknown"
    if how == "threshold":
        return "success" if success_prob >= 0.5 else "failure"
    if how != "sample":
        raise ValueError(f"outcome target must be one of {', '.join(OUTCOME_TARGETS)}, got {how!r}")
    return "success" if draw < success_prob else "failure"


def render_future(text: str, outcome: str) -> str:
    """A future as the successor prompt's answer format: the SFT completion for M(s, a)."""
    return f"FUTURE: {text.strip()}\nOUTCOME: {outcome}"
