"""MATH500: one-step episodes, a solution in, reward 1 when its boxed answer is right, else 0.

The problems are the 500 MATH test problems of PRM800K's split (``problem``,
``answer``, ``subject``, ``level``, ``unique_id`` per line). The action is a
whole solution; the answer is its last ``\\boxed{...}`` (the format the policy
prompt asks for and ``ActionSpec("math")`` checks), and math-verify compares
it with the gold answer (see ``math_grading``). A solution without a box
scores 0 and says so in its info.

MATH500 is test problems only, so training on it would score a policy on what it
was trained on. The problems are therefore split in two halves by a seeded hash
of each problem's id (``split_of``: stable whatever the file's order, and a
problem never changes sides): ``train`` for rollouts that feed training,
``test`` (the default) for evaluation, ``all`` for the 500.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nlac_core.actions import ActionSpec
from nlac_core.envs.base import EnvError, Environment, StepResult, data_path, take
from nlac_core.envs.math_grading import grade
from nlac_core.mathanswer import extract_boxed
from nlac_core.prompts import policy as policy_prompts
from nlac_core.prompts.base import Rendered
from nlac_core.records import Message, TaskRecord

DEFAULT_PROBLEMS = "math500/test.jsonl"
SPLITS = ("train", "test", "all")
SPLIT_SEED = "math500-split-v1"


def split_of(problem_id: str) -> str:
    """``train`` or ``test``, from a seeded hash of the problem's id alone (about half each)."""
    digest = hashlib.sha256(f"{SPLIT_SEED}:{problem_id}".encode()).digest()
    return "test" if digest[0] % 2 == 0 else "train"


def load_problems(path: str | Path | None = None) -> list[TaskRecord]:
    path = data_path(path, DEFAULT_PROBLEMS, "MATH500 problems")
    tasks = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EnvError(f"{path.name}, line {number}: not valid JSON ({exc.msg})") from None
            missing = [k for k in ("problem", "answer") if not isinstance(row.get(k), str)] if isinstance(
                row, dict) else ["problem", "answer"]
            if missing:
                raise EnvError(f"{path.name}, line {number}: missing string field(s) {', '.join(missing)}")
            problem_id = str(row.get("unique_id") or f"line-{number}")
            tasks.append(TaskRecord(
                external_id=problem_id,
                instruction=row["problem"],
                gold_answer=row["answer"],
                split=split_of(problem_id),
                meta={k: row[k] for k in ("subject", "level") if k in row},
            ))
    return tasks


class MathEnv(Environment):
    name = "math"
    policy_template = policy_prompts.MATH
    default_max_new_tokens = 384
    action_spec = ActionSpec("math")
    max_turns = 1

    def __init__(self, problems_path: str | Path | None = None, _problems: list[TaskRecord] | None = None) -> None:
        super().__init__()
        self._problems = _problems if _problems is not None else load_problems(problems_path)

    def spawn(self) -> MathEnv:
        return MathEnv(_problems=self._problems)

    def tasks(self, split: str = "", limit: int | None = None) -> list[TaskRecord]:
        """``test`` (default, the held-out half), ``train`` or ``all``, in the file's order."""
        split = split or "test"
        if split not in SPLITS:
            raise EnvError(f"math: unknown split {split!r}; known: {', '.join(SPLITS)}")
        chosen = self._problems if split == "all" else [t for t in self._problems if t.split == split]
        return take(chosen, limit, "math")

    def render_policy(self, task: TaskRecord, history: Sequence[Message]) -> Rendered:
        return self.policy_template.render(problem=task.instruction)

    def _reset(self, task: TaskRecord) -> str:
        self.messages.append(Message(role="user", content=task.instruction))
        return task.instruction

    def _step(self, action_text: str) -> StepResult:
        assert self.task is not None
        gold = self.task.gold_answer or ""
        predicted = extract_boxed(action_text or "")
        info: dict[str, Any] = {"gold": gold, "predicted": predicted}
        if predicted is None:
            check = self.action_spec.check(action_text)
            info.update(correct=False, error=check.error or "no \\boxed{...} answer")
        else:
            verdict = grade(gold, predicted)
            info.update(correct=verdict.correct, **({"error": verdict.error} if verdict.error else {}))
        reward = 1.0 if info["correct"] else 0.0
        meta: dict[str, Any] = {"reward": reward}
        if predicted is None:
            meta["action_error"] = info["error"]
        self.messages.append(Message(role="assistant", content=(action_text or "").strip(), turn_idx=0, meta=meta))
        self._finish("answered", {"success": info["correct"], **info})
        return StepResult("", reward, True, info)
