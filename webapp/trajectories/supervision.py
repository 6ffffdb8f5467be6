"""What the trajectory page shows of runtime supervision (``nlac_core.supervision``): the critic's checks at
each agent step, the run's summary, and the counterfactual re-runs that branch off it.

The checks come from trajectory files, so nothing here trusts their shape: a value of the wrong type is left
out rather than shown wrong, and every string stays a plain string for the template to escape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nlac_core.actions import parse_tool_action
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.projects import COUNTERFACTUALS

# the arms of supervised-rollout jobs, then those of critic-data jobs
ARMS = ("baseline", "supervised", "counterfactual", "self-play", "validation")
# kind -> (how the original's step names the re-run, how the re-run names what it changed)
KINDS = {"without": ("without this intervention", "the intervention removed: the original proposal ran"),
         "forced": ("with a forced intervention", "an intervention forced on the approved step"),
         "feedback": ("with a target's feedback", "a runtime-critic target's feedback given at this step (its "
                                                  "validation)")}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Proposal:
    """An action as the actor wrote it, split for reading: the reply text and the tool call, if any."""

    raw: str
    text: str = ""
    tool_name: str = ""
    arguments_json: str = ""

    @classmethod
    def of(cls, raw: str) -> Proposal:
        action, error = parse_tool_action(raw)
        if error or action is None:
            return cls(raw=raw, text=raw)
        if action.tool_call is None:
            return cls(raw=raw, text=action.text)
        return cls(raw=raw, text=action.text, tool_name=action.tool_call.name,
                   arguments_json=json.dumps(action.tool_call.arguments, indent=2,
                                                             ensure_ascii=False))


@dataclass
class Check:
    round: int | None
    decision: str
    proposal: Proposal
    feedback: str = ""
    reason: str = ""
    critic_model: str = ""
    critic_prompt_id: str = ""
    forced: bool = False
    executed: bool = False


@dataclass
class Branch:
    """A counterfactual re-run seen from the trajectory it branches off (or, on the re-run, its original)."""

    kind: str
    step_index: int | None
    pk: int | None = None
    success: bool = False
    reward: float | None = None

    @property
    def label(self) -> str:
        return KINDS[self.kind][0] if self.kind in KINDS else f"re-run ({self.kind or 'unknown kind'})"

    @property
    def change(self) -> str:
        return KINDS[self.kind][1] if self.kind in KINDS else (self.kind or "unknown kind")


@dataclass
class StepSupervision:
    """The checks of one executed assistant step: the rejected proposals in order, and the check of what ran."""

    rejected: list[Check] = field(default_factory=list)
    final: Check | None = None
    branches: list[Branch] = field(default_factory=list)

    @property
    def interventions(self) -> int:
        return len(self.rejected)


def checks_of(meta: Any) -> list[Check]:
    raw = meta.get("supervision") if isinstance(meta, dict) else None
    if not isinstance(raw, list):
        return []
    out = []
    for c in raw:
        if not isinstance(c, dict) or not isinstance(c.get("decision"), str):
            continue
        out.append(Check(round=_count(c.get("round")), decision=c["decision"],
                         proposal=Proposal.of(_text(c.get("proposal"))), feedback=_text(c.get("feedback")),
                         reason=_text(c.get("reason")), critic_model=_text(c.get("critic_model")),
                         critic_prompt_id=_text(c.get("critic_prompt_id")), forced=c.get("forced") is True,
                         executed=c.get("executed") is True))
    return out


def step_supervision(meta: Any) -> StepSupervision | None:
    """None for a step nobody checked. Interventions are the proposals that never ran; the executed check (the
    last one, marked ``executed``) is the message itself."""
    checks = checks_of(meta)
    if not checks:
        return None
    final = next((c for c in reversed(checks) if c.executed), None) or checks[-1]
    rejected = [c for c in checks if c is not final and c.decision == "intervene"]
    if final.decision == "intervene":  # a record cut short: what ran was still the last proposal
        rejected.append(final)
        final = None
    return StepSupervision(rejected=rejected, final=final)


@dataclass
class Summary:
    """The header box: the run's arm and its critic's settings and totals (all optional)."""

    arm: str = ""
    job: int | None = None
    critic_model: str = ""
    critic_backend: str = ""
    critic_prompt_id: str = ""
    where: str = ""
    max_rounds: int | None = None
    max_interventions: int | None = None
    interventions: int | None = None
    checks: int | None = None
    supervised: bool = False
    original: Branch | None = None  # on a counterfactual re-run: the trajectory it branches off
    original_hash: str = ""


def summary(trajectory: Trajectory) -> Summary | None:
    meta = trajectory.meta if isinstance(trajectory.meta, dict) else {}
    s = meta.get("supervision")
    arm = _text(meta.get("arm"))
    cf = meta.get("counterfactual")
    if not isinstance(s, dict) and not arm and not isinstance(cf, dict):
        return None
    out = Summary(arm=arm, job=_count(meta.get("job")))
    if isinstance(s, dict):
        out.supervised = True
        for name in ("critic_model", "critic_backend", "critic_prompt_id", "where"):
            setattr(out, name, _text(s.get(name)))
        for name in ("max_rounds", "max_interventions", "interventions", "checks"):
            setattr(out, name, _count(s.get(name)))
    if isinstance(cf, dict):
        out.original_hash = _text(cf.get("of"))
        out.original = Branch(kind=_text(cf.get("kind")), step_index=_count(cf.get("step_index")))
        if out.original_hash:
            row = (Trajectory.objects.filter(project_id=trajectory.project_id, content_hash=out.original_hash)
                   .values("id", "success", "reward").first())
            if row is not None:
                out.original.pk, out.original.success, out.original.reward = row["id"], row["success"], row["reward"]
    return out


MAX_BRANCHES = 200


def branches_of(trajectory: Trajectory) -> dict[int, list[Branch]]:
    """The counterfactual re-runs of this trajectory stored in its project, by the step they branch at: one query
    over summary columns and two JSON keys (the re-runs' messages are not read), asked only of a project whose summary
    says it holds re-runs (a project's summary predating that flag is asked)."""
    if not trajectory.project.facets.get(COUNTERFACTUALS, True):
        return {}
    rows = (Trajectory.objects.filter(project_id=trajectory.project_id,
                                      meta__counterfactual__of=trajectory.content_hash)
            .values("id", "success", "reward", "meta__counterfactual__step_index", "meta__counterfactual__kind")
            .order_by("id")[:MAX_BRANCHES])
    out: dict[int, list[Branch]] = {}
    for row in rows:
        step = _count(row["meta__counterfactual__step_index"])
        if step is None:
            continue
        out.setdefault(step, []).append(Branch(kind=_text(row["meta__counterfactual__kind"]), step_index=step,
                                               pk=row["id"], success=row["success"], reward=row["reward"]))
    return out
