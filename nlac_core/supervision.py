"""The asymmetric actor-critic at run time: a critic checks each action the actor proposes before it runs.

At an agent step the actor proposes an action; the critic, given the task's policy, the conversation so far
and the proposal, answers ``approve`` or ``intervene`` with feedback. On intervene the feedback goes to the
actor alone (a private follow-up to its own prompt: never into the episode's messages, so neither the user
simulator nor the environment sees it) and the actor proposes again. A step gets at most ``max_rounds``
revisions and an episode at most ``max_interventions`` interventions; after that the last proposal runs
unchecked. Only the executed action reaches the environment.

Every check is kept on the executed assistant message (``meta["supervision"]``: proposal, decision, feedback,
round, the critic's prompt id) and summed up in the trajectory's ``meta["supervision"]``.

The decision is chosen by comparing the log-likelihoods of the two words after ``DECISION:`` (never an
invalid answer; a backend without log-likelihoods writes the word); the feedback is written after
``DECISION: intervene`` / ``FEEDBACK:``. ``Supervisor.review`` is the hook ``rollout.rollout`` calls
between the actor's proposals and the environment step.

``judge_recorded`` replays the critic offline on recorded episodes (an imported tau-bench run): it judges each
recorded action as if it had been proposed, and nothing is re-run. ``as_critique`` turns one check into the
``Critique`` record (mode ``runtime``) that the app stores, shows and lets annotators correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from nlac_core.actions import parse_tool_action, render_message_action
from nlac_core.backends.base import Backend, ChatRequest, Provenance, SamplingSpec
from nlac_core.outputs import Critique, StepRef
from nlac_core.prompts.base import Rendered
from nlac_core.prompts.nlac import ACTOR_FEEDBACK, DECISIONS, RUNTIME_CRITIC
from nlac_core.rollout import derive_seed, takes_row_seeds
from nlac_core.sections import CONTENT_FREE, choose, continue_line
from nlac_core.state import DEFAULT_MAX_CHARS, StepView, render_messages
from nlac_core.successor import clip_action, ref_of

WHERE = ("all", "state_changing")
# Tool names that read and never change anything: not checked when only state-changing calls are.
READ_ONLY_PREFIXES = ("get_", "list_", "search_", "find_", "lookup_", "read_", "check_", "calculate", "think")


@dataclass(frozen=True)
class SupervisionConfig:
    max_rounds: int = 2  # revisions per step after an intervention
    max_interventions: int = 4  # per episode
    where: str = "all"  # every action, or only state-changing tool calls
    feedback_tokens: int = 64
    max_state_chars: int = DEFAULT_MAX_CHARS
    max_policy_chars: int = 4000
    # approve/intervene scored relative to the same prompt with policy, history and action "N/A" (contextual
    # calibration, as the NLAC verdicts): by raw likelihood the base critic approved 160 of 160 checks
    calibrate: bool = True

    def __post_init__(self) -> None:
        if self.where not in WHERE:
            raise ValueError(f"where: expected one of {', '.join(WHERE)}, got {self.where!r}")
        if self.max_rounds < 0 or self.max_interventions < 0:
            raise ValueError("max_rounds and max_interventions must be 0 or more")


def is_state_changing(action_text: str) -> bool:
    """A tool call whose name is not a read-only one; replies to the user and reads are not."""
    action, error = parse_tool_action(action_text)
    if error or action is None or action.tool_call is None:
        return False
    return not action.tool_call.name.lower().startswith(READ_ONLY_PREFIXES)


class Supervisor:
    """The critic between the actor and the environment, for the episodes of one rollout."""

    def __init__(self, actor: Backend, critic: Backend, config: SupervisionConfig | None = None,
                 actor_spec: SamplingSpec | None = None) -> None:
        self.actor = actor
        self.critic = critic
        self.config = config or SupervisionConfig()
        self.actor_spec = actor_spec or SamplingSpec(max_new_tokens=96)
        self.critic_spec = SamplingSpec(max_new_tokens=self.config.feedback_tokens)
        self._used: dict[int, int] = {}  # interventions per episode (keyed by the environment slot)
        self._checks: dict[int, int] = {}

    # -- the hook -------------------------------------------------------------------------------------------

    def review(self, slots: list[Any], rendered: list[Rendered], proposals: list[str],
               row_seeds: Sequence[int | None] | None = None) -> tuple[list[str], list[list[dict]]]:
        """The actions to execute (one per slot) and each step's supervision records. ``row_seeds``: the seeds
        the proposals were sampled with, one per slot; a backend that takes a seed per row samples each
        revision with one derived from its slot's (so a revision does not depend on its batch mates, and a
        resumed job plays as it would have)."""
        per_row = row_seeds is not None and takes_row_seeds(self.actor)
        final = list(proposals)
        records: list[list[dict]] = [[] for _ in slots]
        followups: list[list[dict[str, Any]]] = [[] for _ in slots]  # the actor's private conversation
        pending = [j for j in range(len(slots)) if self._eligible(slots[j], final[j], 0)]
        round_no = 0
        while pending:
            decisions = self._check([slots[j] for j in pending], [final[j] for j in pending])
            revise = []
            for j, (decision, feedback, probs) in zip(pending, decisions, strict=True):
                key = id(slots[j])
                self._checks[key] = self._checks.get(key, 0) + 1
                records[j].append({"round": round_no, "proposal": final[j], "decision": decision,
                                   "feedback": feedback, "critic_prompt_id": RUNTIME_CRITIC.prompt_id,
                                   "critic_model": self.critic.model, "decision_probs": probs,
                                   "calibration": self.calibration})
                if decision == "intervene":
                    self._used[key] = self._used.get(key, 0) + 1
                    revise.append((j, feedback))
            if not revise:
                break
            requests = []
            for j, feedback in revise:
                followups[j] += [{"role": "assistant", "content": final[j]},
                                 {"role": "user", "content": ACTOR_FEEDBACK.format(feedback=feedback)}]
                requests.append(ChatRequest(list(rendered[j].messages) + followups[j], rendered[j].assistant_prefix))
            spec = replace(self.actor_spec, seed=None if self.actor_spec.seed is None else self.actor_spec.seed
                           + round_no + 1)
            if per_row:
                seeds = [derive_seed(row_seeds[j], "revision", round_no) for j, _ in revise]
                completions = self.actor.generate(requests, spec, row_seeds=seeds)
            else:
                completions = self.actor.generate(requests, spec)
            for (j, _), completion in zip(revise, completions, strict=True):
                final[j] = rendered[j].assistant_prefix + completion.text
            round_no += 1
            pending = [j for j, _ in revise if self._eligible(slots[j], final[j], round_no)]
        for j in range(len(slots)):
            last = records[j][-1] if records[j] else None
            if last is None or last["proposal"] != final[j] or last["decision"] == "intervene":
                records[j].append({"round": round_no if last else 0, "proposal": final[j],
                                   "decision": "unchecked", "feedback": "",
                                   "reason": self._why_unchecked(slots[j], final[j])})
            records[j][-1]["executed"] = True
        return final, records

    def force(self, slots: list[Any], rendered: list[Rendered], proposals: list[str]) -> tuple[list[str],
                                                                                               list[list[dict]]]:
        """An intervention forced on each proposal (a counterfactual of an approved step): the critic writes its
        feedback after ``DECISION: intervene``, the actor revises once, and the revision runs unchecked."""
        feedback = self._feedback(self._requests(slots, proposals))
        revisions = revise(self.actor, self.actor_spec, rendered, proposals, feedback)
        records = []
        for slot, proposal, text, revision in zip(slots, proposals, feedback, revisions, strict=True):
            self._used[id(slot)] = self._used.get(id(slot), 0) + 1
            self._checks[id(slot)] = self._checks.get(id(slot), 0) + 1
            records.append([{"round": 0, "proposal": proposal, "decision": "intervene", "feedback": text,
                             "forced": True, "critic_prompt_id": RUNTIME_CRITIC.prompt_id,
                             "critic_model": self.critic.model},
                            {"round": 1, "proposal": revision, "decision": "unchecked", "feedback": "",
                             "reason": "the revision after a forced intervention runs as it is", "executed": True}])
        return revisions, records

    def start(self, slot: Any, interventions: int = 0, checks: int = 0) -> None:
        """Count what an episode restored from a recorded prefix had already used (a counterfactual re-run keeps
        the episode's intervention budget)."""
        self._used[id(slot)] = interventions
        self._checks[id(slot)] = checks

    def summary(self, slot: Any) -> dict[str, Any]:
        key = id(slot)
        return {"critic_model": self.critic.model, "critic_backend": self.critic.name,
                "critic_prompt_id": RUNTIME_CRITIC.prompt_id, "max_rounds": self.config.max_rounds,
                "max_interventions": self.config.max_interventions, "where": self.config.where,
                "calibration": self.calibration,
                "interventions": self._used.get(key, 0), "checks": self._checks.get(key, 0)}

    @property
    def calibration(self) -> str:
        """How approve/intervene were scored: ``content_free`` (calibrated) or ``""`` (raw likelihood)."""
        return "content_free" if self.config.calibrate else ""

    # -- inside ---------------------------------------------------------------------------------------------

    def _eligible(self, slot, proposal: str, round_no: int) -> bool:
        """A proposal is checked only when an intervention could still change it: a revision round is left
        (the last revision runs as it is), the episode has interventions left, and it is the kind of action
        checked here."""
        if round_no >= self.config.max_rounds or self._used.get(id(slot), 0) >= self.config.max_interventions:
            return False
        return self.config.where == "all" or is_state_changing(proposal)

    def _why_unchecked(self, slot, proposal: str) -> str:
        if self.config.where == "state_changing" and not is_state_changing(proposal):
            return "not a state-changing tool call"
        if self._used.get(id(slot), 0) >= self.config.max_interventions:
            return "the episode's interventions are used up"
        return "the step's revision rounds are used up"

    def _requests(self, slots, proposals) -> list[ChatRequest]:
        out = []
        for slot, proposal in zip(slots, proposals, strict=True):
            policy = (slot.policy_text or "(no written policy)").strip()
            if len(policy) > self.config.max_policy_chars:
                policy = policy[: self.config.max_policy_chars - 8] + " ...[cut]"
            rendered = RUNTIME_CRITIC.render(policy=policy, state=render_messages(slot.messages,
                                                                                self.config.max_state_chars),
                                             action=clip_action(proposal))
            out.append(rendered.request())
        return out

    def _check(self, slots, proposals) -> list[tuple[str, str, dict[str, float]]]:
        """(decision, feedback, P(decision)) per proposal; the probabilities calibrated unless turned off."""
        requests = self._requests(slots, proposals)
        probs = decision_probs(self.critic, requests, self.config.calibrate, self.critic_spec)
        decisions = [max(p, key=p.get) if p else "approve" for p in probs]  # unreadable: the action runs
        lines = iter(self._feedback([r for r, d in zip(requests, decisions, strict=True) if d == "intervene"]))
        return [(d, next(lines) if d == "intervene" else "", {k: round(v, 4) for k, v in p.items()})
                for d, p in zip(decisions, probs, strict=True)]

    def _feedback(self, requests: list[ChatRequest]) -> list[str]:
        """What the critic writes after ``DECISION: intervene`` / ``FEEDBACK:``, one line per request."""
        lines = continue_line(self.critic, [ChatRequest(r.messages, "DECISION: intervene\n") for r in requests],
                              "FEEDBACK", self.critic_spec)
        return [line or "the action does not follow the policy" for line in lines]


def decision_probs(critic: Backend, requests: Sequence[ChatRequest], calibrate: bool = True,
                   spec: SamplingSpec | None = None) -> list[dict[str, float]]:
    """P(approve), P(intervene) for runtime-critic prompts (``RUNTIME_CRITIC``, as a runtime-critic dataset
    record's prompt is), by likelihood after ``DECISION:``; calibrated against the content-free prompt unless
    ``calibrate`` is off. An empty dict: the backend wrote something else (no likelihoods)."""
    baselines = None
    if calibrate:
        empty = RUNTIME_CRITIC.render(policy=CONTENT_FREE, state=CONTENT_FREE, action=CONTENT_FREE).request()
        baselines = [empty] * len(requests)
    return choose(critic, requests, "DECISION", DECISIONS, spec, baselines=baselines)


def revise(actor: Backend, spec: SamplingSpec, rendered: Sequence[Rendered], proposals: Sequence[str],
           feedback: Sequence[str]) -> list[str]:
    """The actor's revision of each proposal after feedback, written to it alone (a private follow-up)."""
    requests = [ChatRequest(list(r.messages) + [{"role": "assistant", "content": p},
                                                {"role": "user", "content": ACTOR_FEEDBACK.format(feedback=f)}],
                            r.assistant_prefix) for r, p, f in zip(rendered, proposals, feedback, strict=True)]
    return [r.assistant_prefix + c.text for r, c in zip(rendered, actor.generate(requests, spec), strict=True)]


@dataclass(frozen=True)
class _Recorded:
    """A recorded state seen as a slot: what the critic's prompt needs."""

    policy_text: str
    messages: tuple


def judge_recorded(critic: Backend, steps: Sequence[StepView], config: SupervisionConfig | None = None,
                   ) -> list[Critique]:
    """The critic's check of each recorded action, offline (mode ``runtime``, round 0). Steps that would not be
    checked under ``config.where`` are left out: the result lists only the judged steps, in order."""
    config = config or SupervisionConfig()
    judged = [s for s in steps if config.where == "all" or is_state_changing(render_message_action(s.action))]
    if not judged:
        return []
    supervisor = Supervisor(critic, critic, config)
    actions = [render_message_action(s.action) for s in judged]
    decisions = supervisor._check([_Recorded(s.trajectory.policy, s.history) for s in judged], actions)
    provenance = Provenance.of(RUNTIME_CRITIC.prompt_id, critic, supervisor.critic_spec)
    return [as_critique(ref_of(s), {"round": 0, "proposal": action, "decision": d, "feedback": f, "executed": True,
                                    "decision_probs": p, "calibration": supervisor.calibration}, provenance)
            for s, action, (d, f, p) in zip(judged, actions, decisions, strict=True)]


def as_critique(ref: StepRef, check: dict[str, Any], provenance: Provenance) -> Critique:
    """One check as a Critique: approve is the verdict "optimal", intervene "suboptimal"; the feedback is the
    reasoning and the suggestion (what an annotator corrects); ``action`` is the proposal judged."""
    decision = check["decision"]
    feedback = check.get("feedback") or ""
    return Critique(step=ref, predicted_future="", success_prob=None,
                    verdict="optimal" if decision == "approve" else "suboptimal", reasoning=feedback,
                    suggestion=feedback, raw_text=f"DECISION: {decision}\nFEEDBACK: {feedback}".strip(),
                    parse_ok=True, provenance=provenance, mode="runtime", action=check["proposal"], decision=decision,
                    round=int(check.get("round", 0)), executed=bool(check.get("executed", False)),
                    verdict_probs=dict(check.get("decision_probs") or {}),
                    verdict_calibration=check.get("calibration") or "")
