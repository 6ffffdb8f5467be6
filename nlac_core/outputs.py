"""Typed records of what the model writes about steps: futures, critiques,
Bellman targets, refinements. Each carries the step it is about
(:class:`StepRef`) and its :class:`~nlac_core.backends.base.Provenance`
(prompt_id, backend, model, sampling, seed), and converts to plain JSON for
JSONL files and the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from nlac_core.backends.base import Provenance

VERDICTS = ("optimal", "suboptimal", "harmful")


@dataclass(frozen=True)
class StepRef:
    """An agent step: the trajectory's content hash and the step number among agent steps."""

    trajectory_hash: str
    step_index: int
    task_id: str = ""


@dataclass(frozen=True)
class Future:
    """A successor-model sample M(s, a): what happens next, and the predicted chance of success."""

    step: StepRef
    text: str
    success_prob: float | None
    provenance: Provenance
    action: str = ""
    # nothing but the primer came out, even after resampling (sections.continue_paragraph): never a finished
    # critique, never a training target
    degenerate: bool = False
    # success_prob calibrated (nlac_core.outcome): the model's own probability, and the calibration's id
    success_prob_raw: float | None = None
    outcome_calibration: str = ""


@dataclass(frozen=True)
class Critique:
    """The evaluator's judgment of a step. ``parse_ok`` is False when the model broke
    the format: then ``raw_text`` holds what it wrote and missing fields are empty."""

    step: StepRef
    predicted_future: str
    success_prob: float | None
    verdict: str | None
    reasoning: str
    suggestion: str
    raw_text: str
    parse_ok: bool
    provenance: Provenance
    futures: tuple[Future, ...] = ()
    missing: tuple[str, ...] = ()
    mode: str = "sectioned"
    # sectioned mode: P(verdict) over the three words, and how it was calibrated ("content_free" or "")
    verdict_probs: dict[str, float] = field(default_factory=dict)
    verdict_calibration: str = ""
    # mode "runtime" (a runtime critic's check, nlac_core.supervision): the action it judged when that is not
    # the step's recorded one (a proposal it rejected), approve/intervene, the revision round, whether it ran
    action: str = ""
    decision: str = ""
    round: int = 0
    executed: bool = True

    def render(self) -> str:
        """The critique as the refinement prompt and the SFT target show it."""
        outcome = "unknown" if self.success_prob is None else f"{'success' if self.success_prob >= 0.5 else 'failure'}"
        return (f"FUTURE: {self.predicted_future}\nOUTCOME: {outcome}\nVERDICT: {self.verdict or 'unknown'}\n"
                f"REASON: {self.reasoning}\nSUGGESTION: {self.suggestion}")


@dataclass(frozen=True)
class BellmanTarget:
    """A language Bellman target for M(s_t, a_t): the immediate outcome composed with a
    summary of the next future d_t+1 (or, at a terminal transition, the final state)."""

    step: StepRef
    text: str
    success_prob: float | None
    terminal: bool
    provenance: Provenance
    next_action: str = ""
    next_future: str = ""
    next_provenance: Provenance | None = None  # of d_t+1: the target (EMA) model's successor call
    next_action_source: str = ""  # "policy" (sampled a_t+1) or "data" (the recorded next action)
    next_action_provenance: Provenance | None = None  # of a sampled a_t+1: the policy's call
    degenerate: bool = False  # an empty composed future even after resampling: kept for the record, never trained on


@dataclass(frozen=True)
class Refinement:
    """pi_r(a' | s, a, critique): the refined action after ``rounds`` rounds, checked
    against the environment's action format (``valid``/``error``)."""

    step: StepRef
    original_action: str
    refined_action: str
    valid: bool
    error: str
    rounds: int
    critique_text: str
    provenance: Provenance
    history: tuple[str, ...] = field(default_factory=tuple)
    # why the action was kept without a refine call ("" when refined): "optimal" (the critique judged it so)
    # or "won" (the step that won its episode, such as a 20 Questions guess naming the word)
    kept: str = ""


def to_json(record: Any) -> Any:
    if is_dataclass(record) and not isinstance(record, type):
        return {"type": type(record).__name__, **{f.name: to_json(getattr(record, f.name)) for f in fields(record)}} \
            if type(record) in _TOP else {f.name: to_json(getattr(record, f.name)) for f in fields(record)}
    if isinstance(record, tuple | list):
        return [to_json(v) for v in record]
    return record


_TOP = {Future, Critique, BellmanTarget, Refinement}


def _prov(data: dict | None) -> Provenance | None:
    return Provenance(**data) if data else None


def from_json(data: dict[str, Any]) -> Future | Critique | BellmanTarget | Refinement:
    """Inverse of :func:`to_json` for the four top-level records."""
    data = dict(data)
    kind = data.pop("type", None)
    data["step"] = StepRef(**data["step"])
    data["provenance"] = _prov(data["provenance"])
    if kind == "Future":
        return Future(**data)
    if kind == "Critique":
        data["futures"] = tuple(from_json({"type": "Future", **f}) for f in data.get("futures", ()))
        data["missing"] = tuple(data.get("missing", ()))
        return Critique(**data)
    if kind == "BellmanTarget":
        data["next_provenance"] = _prov(data.get("next_provenance"))
        data["next_action_provenance"] = _prov(data.get("next_action_provenance"))
        return BellmanTarget(**data)
    if kind == "Refinement":
        data["history"] = tuple(data.get("history", ()))
        return Refinement(**data)
    raise ValueError(f"unknown record type {kind!r}")
