"""SFT records built from what the algorithm wrote, ready for TRL.

Each record is TRL's conversational prompt/completion shape plus provenance:

    {"prompt": [chat messages], "completion": [{"role": "assistant", "content": ...}],
     "provenance": {"kind": ..., "step": {...}, "prompt_id": ..., "source": {...}}}

Three builders:
- ``successor_records``: the critic's data in NLAC: successor prompt for (s, a)
  -> the Bellman target text (FUTURE / OUTCOME).
- ``critique_records``: evaluator prompt for (s, a, futures) -> a critique (a
  model's, or better, an annotator's correction).
- ``distillation_records``: policy prompt for s -> the refined action a'. The
  critique is *not* in the input: the policy learns to act as if it had read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from nlac_core.bellman import PolicyPrompter, generic_policy_prompt
from nlac_core.checkpoints import dataset_hash
from nlac_core.critic import render_futures
from nlac_core.outputs import BellmanTarget, Critique, Refinement, StepRef
from nlac_core.prompts.nlac import SUCCESSOR, TRAINED_EVALUATOR
from nlac_core.records import TrajectoryRecord
from nlac_core.state import DEFAULT_MAX_CHARS, StepView, step_of
from nlac_core.successor import outcome_draw, outcome_word, render_future, transition_of

Record = dict[str, Any]


class StepIndex:
    """Find the stored step a StepRef names, among the trajectories given."""

    def __init__(self, trajectories: Iterable[TrajectoryRecord]) -> None:
        self._by_hash = {t.content_hash(): t for t in trajectories}

    def __len__(self) -> int:
        return len(self._by_hash)

    def step(self, ref: StepRef) -> StepView:
        trajectory = self._by_hash.get(ref.trajectory_hash)
        if trajectory is None:
            raise KeyError(f"no trajectory with content hash {ref.trajectory_hash[:16]}... "
                           f"(step {ref.step_index} of task {ref.task_id!r})")
        return step_of(trajectory, ref.step_index)


def _record(prompt: list[dict[str, Any]], completion: str, provenance: dict[str, Any]) -> Record:
    return {"prompt": prompt, "completion": [{"role": "assistant", "content": completion}],
            "provenance": provenance}


def _source(provenance) -> dict[str, Any]:
    return asdict(provenance) if provenance is not None else {}


def successor_records(targets: Iterable[BellmanTarget], index: StepIndex,
                      max_state_chars: int = DEFAULT_MAX_CHARS, outcome: str = "sample",
                      seed: int = 0) -> list[Record]:
    """Successor SFT records from Bellman targets; a degenerate target (an empty composed future) is left out.
    ``outcome`` says how each target's P(success) becomes its OUTCOME word (``successor.outcome_word``: drawn,
    seeded per step by ``seed``, or the likelier word); the provenance keeps P and how the word was chosen."""
    out = []
    for target in targets:
        if target.degenerate:
            continue
        t = transition_of(index.step(target.step), None, max_state_chars)
        rendered = SUCCESSOR.render(state=t.state, action=t.action)
        word = outcome_word(target.success_prob, outcome, outcome_draw(target.step, seed))
        out.append(_record(rendered.messages, render_future(target.text, word), {
            "kind": "bellman_target", "step": asdict(target.step), "prompt_id": rendered.prompt_id,
            "success_prob": target.success_prob, "outcome_target": outcome,
            "terminal": target.terminal, "source": _source(target.provenance),
            "next_source": _source(target.next_provenance)}))
    return out


def critique_records(critiques: Iterable[Critique], index: StepIndex, require_parsed: bool = True,
                     max_state_chars: int = DEFAULT_MAX_CHARS) -> list[Record]:
    """Evaluator SFT records; critiques that failed to parse are left out unless asked."""
    out = []
    for c in critiques:
        if require_parsed and not c.parse_ok:
            continue
        t = transition_of(index.step(c.step), None, max_state_chars)
        rendered = TRAINED_EVALUATOR.render(state=t.state, action=t.action, futures=render_futures(c.futures))
        out.append(_record(rendered.messages, c.render(), {
            "kind": "critique", "step": asdict(c.step), "prompt_id": rendered.prompt_id, "mode": c.mode,
            "source": _source(c.provenance)}))
    return out


def distillation_records(refinements: Iterable[Refinement], index: StepIndex,
                         policy_prompt: PolicyPrompter | None = None, only_valid: bool = True,
                         only_changed: bool = False,
                         keep: Callable[[Refinement], bool] | None = None,
                         kept_actions: bool = True) -> list[Record]:
    """(s -> a') records; invalid refinements are left out by default, unchanged ones on request. A step whose
    action was kept without a refine call (judged optimal, or the step that won) is its own target, or is left
    out with ``kept_actions=False``."""
    prompter = policy_prompt or generic_policy_prompt
    out = []
    for r in refinements:
        if (only_valid and not r.valid) or (only_changed and r.refined_action.strip() == r.original_action.strip()):
            continue
        if r.kept and not kept_actions:
            continue
        if keep is not None and not keep(r):
            continue
        rendered = prompter(index.step(r.step))
        out.append(_record(rendered.messages, r.refined_action, {
            "kind": "distillation", "step": asdict(r.step), "prompt_id": rendered.prompt_id,
            "refine_prompt_id": r.provenance.prompt_id, "rounds": r.rounds, "source": _source(r.provenance),
            **({"kept": r.kept} if r.kept else {})}))
    return out


def records_hash(records: Sequence[Mapping[str, Any]]) -> str:
    """The dataset's identity, as checkpoint manifests record it (``checkpoints.dataset_hash``):
    every record with its provenance, in order."""
    return dataset_hash(records)
