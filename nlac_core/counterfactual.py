"""Counterfactual re-runs of supervised episodes: what would have happened with the other choice at one step.

For a step the critic intervened on, the episode is re-run from the same prefix *without* the intervention
(the actor's original proposal runs); for a sample of approved steps, *with* a forced one (the critic writes its
feedback, the actor revises, the revision runs). Either way the environment is restored to the recorded state
before the step (``Environment.restore``: no LLM call, the database rebuilt from the executed tool calls), and
the rest of the episode is played as the run played it: the same actor, under the same supervisor, with the
intervention budget the episode had used so far. Each re-run's outcome, set against the recorded one, is a
``intervention_metrics.Counterfactual`` label.

The critic-data pipeline validates its targets the same way (kind ``feedback``): the recorded action at a
step of an unsupervised episode gets the target's feedback, the actor revises, and the episode goes on
without a critic; the target is kept if that succeeds.

Re-runs are seeded from the recorded trial's seed, the step and the kind, so they repeat.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nlac_core.actions import render_message_action
from nlac_core.backends.base import Backend, SamplingSpec
from nlac_core.envs.base import Environment
from nlac_core.intervention_metrics import Counterfactual
from nlac_core.records import TrajectoryRecord
from nlac_core.rollout import derive_seed, play, step, takes_row_seeds
from nlac_core.supervision import revise

KINDS = ("without", "forced", "feedback")


@dataclass(frozen=True)
class CounterfactualCase:
    """A supervised episode and the agent step to re-run it from, with the other choice (``kind``)."""

    trajectory: TrajectoryRecord
    step_index: int
    kind: str  # "without": the intervention removed; "forced": one forced on an approved step; "feedback": below
    feedback: str = ""  # kind "feedback": the recorded action is revised after this feedback

    @property
    def message_index(self) -> int:
        return self.trajectory.steps[self.step_index][0]

    @property
    def checks(self) -> list[dict[str, Any]]:
        return list(self.trajectory.messages[self.message_index].meta.get("supervision") or [])

    @property
    def proposal(self) -> str:
        """The actor's first proposal at the step (what the critic judged first; the recorded action when no
        critic checked it)."""
        checks = self.checks
        return checks[0]["proposal"] if checks else render_message_action(self.trajectory.messages[self.message_index])

    def label(self, rerun: TrajectoryRecord) -> Counterfactual:
        recorded = self.trajectory.success
        if self.kind == "without":
            return Counterfactual(intervened=True, success_with=recorded, success_without=rerun.success)
        return Counterfactual(intervened=self.kind == "feedback", success_with=rerun.success,
                              success_without=recorded)


def cases_of(trajectories: Sequence[TrajectoryRecord], forced_sample: int = 0, seed: int = 0,
             ) -> list[CounterfactualCase]:
    """Every step whose first check was an intervention (``without``), and up to ``forced_sample`` approved steps
    chosen with ``seed`` (``forced``), in episode then step order."""
    without, approved = [], []
    for trajectory in trajectories:
        for step_index, (_, message) in enumerate(trajectory.steps):
            checks = message.meta.get("supervision") or []
            if not checks or checks[0].get("forced"):
                continue
            if checks[0]["decision"] == "intervene":
                without.append(CounterfactualCase(trajectory, step_index, "without"))
            elif checks[0]["decision"] == "approve":
                approved.append(CounterfactualCase(trajectory, step_index, "forced"))
    chosen = set(random.Random(seed).sample(range(len(approved)), min(forced_sample, len(approved))))
    order = {id(t): n for n, t in enumerate(trajectories)}
    cases = without + [c for n, c in enumerate(approved) if n in chosen]
    return sorted(cases, key=lambda c: (order[id(c.trajectory)], c.step_index, c.kind))


def rerun(env: Environment, actor: Backend, cases: Sequence[CounterfactualCase], supervisor, *,
          spec: SamplingSpec, max_turns: int | None = None, source_model: str = "", source_checkpoint: str = "",
          should_stop: Callable[[], bool] | None = None,
          on_trajectory: Callable[[CounterfactualCase, TrajectoryRecord], None] | None = None,
          ) -> list[tuple[CounterfactualCase, TrajectoryRecord]]:
    """Re-run each case from its step with the other choice; (case, re-run episode) for those that finished.
    ``supervisor`` None: the re-runs go on without a critic (kind ``feedback`` only)."""
    spec = env.policy_sampling(spec)
    envs = [env.spawn() for _ in cases]
    trial_seeds = [derive_seed((c.trajectory.meta or {}).get("trial_seed"), "counterfactual", c.step_index, c.kind)
                   for c in cases]
    seeds_used: list[list[int | None]] = [[] for _ in cases]
    results: list[TrajectoryRecord | None] = [None] * len(cases)

    def settle(i: int) -> None:
        case = cases[i]
        record = envs[i].trajectory(
            trial=case.trajectory.trial, source_model=source_model or actor.model, source_checkpoint=source_checkpoint,
            meta={"arm": "counterfactual", "counterfactual": {"of": case.trajectory.content_hash(),
                                                              "step_index": case.step_index, "kind": case.kind},
                  "sampling": spec.to_dict(), "seed": spec.seed, "trial_seed": trial_seeds[i],
                  "turn_seeds": seeds_used[i], "seeding": "per_trial" if takes_row_seeds(actor) else "per_call",
                  **({"supervision": supervisor.summary(envs[i])} if supervisor is not None else {})})
        results[i] = record
        if on_trajectory is not None:
            on_trajectory(case, record)

    if not cases or (should_stop and should_stop()):
        return []
    for slot, case in zip(envs, cases, strict=True):
        slot.restore(case.trajectory.task, case.trajectory.messages[:case.message_index])
        before = [c for _, m in case.trajectory.steps[:case.step_index] for c in m.meta.get("supervision") or []]
        if supervisor is not None:
            supervisor.start(slot, sum(c["decision"] == "intervene" for c in before),
                             sum(c["decision"] in ("approve", "intervene") for c in before))
    actions, checks = [""] * len(cases), [[] for _ in cases]
    without = [i for i, c in enumerate(cases) if c.kind == "without"]
    for i in without:
        first = cases[i].checks[0]
        actions[i] = first["proposal"]
        checks[i] = [{**first, "decision": "removed", "executed": True,
                      "reason": "counterfactual: the intervention removed, the original proposal runs"}]
    forced = [i for i, c in enumerate(cases) if c.kind == "forced"]
    if forced:
        revised, records = supervisor.force([envs[i] for i in forced], [envs[i].policy_rendered() for i in forced],
                                            [cases[i].proposal for i in forced])
        for i, text, record in zip(forced, revised, records, strict=True):
            actions[i], checks[i] = text, record
    told = [i for i, c in enumerate(cases) if c.kind == "feedback"]
    if told:
        revised = revise(actor, spec, [envs[i].policy_rendered() for i in told], [cases[i].proposal for i in told],
                         [cases[i].feedback for i in told])
        for i, text in zip(told, revised, strict=True):
            actions[i] = text
            checks[i] = [{"round": 0, "proposal": cases[i].proposal, "decision": "intervene",
                          "feedback": cases[i].feedback, "target": True},
                         {"round": 1, "proposal": text, "decision": "unchecked", "executed": True,
                          "reason": "validating a critic target: the revision after its feedback runs"}]
    step(envs, actions, ["counterfactual"] * len(cases), checks, max_turns)
    for i, slot in enumerate(envs):
        if slot.done:
            settle(i)
    play(envs, actor, spec, trial_seeds, seeds_used, lambda i: results[i] is None, settle, max_turns=max_turns,
         supervisor=supervisor, should_stop=should_stop)
    return [(c, r) for c, r in zip(cases, results, strict=True) if r is not None]
