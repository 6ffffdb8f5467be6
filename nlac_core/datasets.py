"""Dataset snapshots, the pure part: which target a step gets, the split by task, and the records.

A snapshot record is TRL's conversational prompt/completion shape (``nlac_core.sft_data``) plus where it came
from, so every exported line can be traced back to the human edit or the job that produced it::

    {"prompt": [chat messages], "completion": [{"role": "assistant", "content": ...}],
     "split": "train", "source": "gold", "provenance": {...}}

Critic targets take, per step, the best target there is, in this order: the accepted (gold) human revision,
a submitted human revision (opt-in), the language Bellman target, a model critique (opt-in, flagged).
Splits are by task: every step of a task lands in the same split, so no task leaks from train into test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nlac_core.prompts.nlac import RUNTIME_CRITIC, TRAINED_EVALUATOR
from nlac_core.state import DEFAULT_MAX_CHARS, StepView
from nlac_core.successor import transition_of

SPLITS = ("train", "validation", "test")
# Critic-target sources, best first. "submitted" and "model_critique" are opt-in.
CRITIC_SOURCES = ("gold", "submitted", "bellman", "model_critique")
HUMAN_SOURCES = ("gold", "submitted")

Record = dict[str, Any]


@dataclass(frozen=True)
class HumanCritique:
    """An annotator's correction of a step's critique (the fields of a revision that a critic learns)."""

    predicted_future: str
    predicted_outcome: str  # success / failure / ""
    verdict: str  # optimal / suboptimal / harmful / ""
    reasoning: str
    suggestion: str

    def render(self) -> str:
        """Written exactly like a model critique (``outputs.Critique.render``), so both train the same head."""
        return (f"FUTURE: {self.predicted_future.strip()}\nOUTCOME: {self.predicted_outcome or 'unknown'}\n"
                f"VERDICT: {self.verdict or 'unknown'}\nREASON: {self.reasoning.strip()}\n"
                f"SUGGESTION: {self.suggestion.strip()}")


@dataclass(frozen=True)
class Candidates:
    """What one step has to offer as a critic target; each is (source object, provenance) or None."""

    gold: Any = None
    submitted: Any = None
    bellman: Any = None
    model_critique: Any = None


def choose_critic_target(candidates: Candidates, *, include_submitted: bool = False,
                         include_model_critiques: bool = False, human_only: bool = False) -> str | None:
    """The source a step's critic target comes from, or None when it has none that is allowed."""
    allowed = {"gold": True, "submitted": include_submitted, "bellman": not human_only,
               "model_critique": include_model_critiques and not human_only}
    for source in CRITIC_SOURCES:
        if allowed[source] and getattr(candidates, source) is not None:
            return source
    return None


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(not isinstance(f, int | float) or f < 0 for f in fractions):
        raise ValueError("split fractions: three numbers >= 0 for train, validation and test")
    total = float(sum(fractions))
    if total <= 0:
        raise ValueError("split fractions: they add up to 0")
    return tuple(f / total for f in fractions)  # type: ignore[return-value]


def split_of(task_key: str, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0) -> str:
    """One task's split, from a seeded hash of its key alone: the same task lands in the same split in every
    version and every dataset built with this seed and these fractions, whatever other tasks come and go
    (so training on v1 and testing on v2 cannot leak)."""
    fracs = check_fractions(fractions)
    u = int(hashlib.sha256(f"{seed}:{task_key}".encode()).hexdigest(), 16) / 2**256
    if u < fracs[0]:
        return "train"
    return "validation" if u < fracs[0] + fracs[1] else "test"


def split_tasks(task_keys: Iterable[str], fractions: Sequence[float] = (0.8, 0.1, 0.1),
                seed: int = 0) -> dict[str, str]:
    """Each task's split (``split_of``); every task gets exactly one."""
    check_fractions(fractions)
    return {key: split_of(key, fractions, seed) for key in set(task_keys)}


def _record(prompt: list[dict[str, Any]], completion: str, source: str, provenance: dict[str, Any]) -> Record:
    return {"prompt": prompt, "completion": [{"role": "assistant", "content": completion}], "source": source,
            "provenance": provenance}


def human_critique_record(step: StepView, human: HumanCritique, futures_text: str, provenance: dict[str, Any],
                          source: str = "gold", max_state_chars: int = DEFAULT_MAX_CHARS) -> Record:
    """Evaluator prompt for (s, a) and the futures the model had predicted -> the human's critique."""
    t = transition_of(step, None, max_state_chars)
    rendered = TRAINED_EVALUATOR.render(state=t.state, action=t.action, futures=futures_text or "(no prediction)")
    return _record(rendered.messages, human.render(), source, {**provenance, "prompt_id": rendered.prompt_id})


def runtime_record(step: StepView, policy: str, verdict: str, feedback: str, provenance: dict[str, Any],
                   source: str, max_state_chars: int = DEFAULT_MAX_CHARS, max_policy_chars: int = 4000,
                   action: str | None = None) -> Record:
    """(policy, context, proposed action) -> approve, or intervene with feedback. An optimal action is
    approved; a suboptimal or harmful one is intervened on, the feedback being what the critique said.
    ``action``: the proposal judged, when it is not the step's recorded action (one the critic rejected)."""
    t = transition_of(step, action, max_state_chars)
    policy = (policy or "(no written policy)").strip()
    if len(policy) > max_policy_chars:
        policy = policy[: max_policy_chars - 8] + " ...[cut]"
    rendered = RUNTIME_CRITIC.render(policy=policy, state=t.state, action=t.action)
    decision = "approve" if verdict == "optimal" else "intervene"
    feedback = " ".join(feedback.split()) or ("the action follows the policy" if decision == "approve" else
                                              "the action does not move the task forward")
    return _record(rendered.messages, f"DECISION: {decision}\nFEEDBACK: {feedback}", source,
                   {**provenance, "prompt_id": rendered.prompt_id, "decision": decision})


def as_messages(record: Mapping[str, Any]) -> dict[str, Any]:
    """The conversational ``messages`` variant: the prompt followed by the completion."""
    return {"messages": list(record["prompt"]) + list(record["completion"])}


def as_prompt_completion(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"prompt": list(record["prompt"]), "completion": list(record["completion"])}


def canonical(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class ContentHash:
    """sha256 over the canonical JSON of every record, in order: a snapshot's identity."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, record: Mapping[str, Any]) -> None:
        self._h.update(canonical(record).encode())
        self._h.update(b"\n")

    def hexdigest(self) -> str:
        return self._h.hexdigest()
