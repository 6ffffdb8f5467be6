"""One iteration of Natural Language Actor-Critic, as one function.

    rollout -> Bellman backup -> critique -> refine -> train (critic + policy) -> EMA update

Off-policy: the backup, critique and refine phases work on transitions drawn
from the fresh rollout and from the replay buffer (``nlac_core.replay``).

One model plays every role, as in the paper: the checkpoint being trained is
the policy, the successor model, the evaluator and the refiner; the target
checkpoint (an EMA copy of its weights) predicts the next futures of the
backup. The successor targets and the distillation records are mixed into one
SFT dataset for that one model.

Every phase writes its output file in ``workdir`` and is skipped when the file
is already there, so a crashed iteration re-run finishes the work and
duplicates nothing (training itself resumes from its last trainer checkpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nlac_core.backends.base import Backend, SamplingSpec
from nlac_core.bellman import BackupConfig, backup, generic_policy_prompt
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.ema import TargetSchedule, update_target
from nlac_core.envs import EVAL_SPLITS, TRAIN_SPLITS, make_env, overlapping
from nlac_core.evaluation import compute_metrics
from nlac_core.outputs import from_json, to_json
from nlac_core.records import TrajectoryRecord
from nlac_core.refine import RefineConfig, action_spec_for, refine_steps
from nlac_core.replay import ReplayConfig, draw
from nlac_core.rollout import read_trajectories, rollout, write_trajectories
from nlac_core.sft_data import StepIndex, distillation_records, records_hash, successor_records
from nlac_core.state import StepView
from nlac_core.successor import OUTCOME_TARGETS, transition_of
from nlac_core.training import LaunchConfig, SFTRunConfig, train

Progress = Callable[[str, int, int], None]  # (phase, done, total)
LoadBackend = Callable[[str], Backend]  # model directory -> backend


@dataclass(frozen=True)
class IterationConfig:
    env: str = "twenty_questions"
    tasks: int = 4
    trials: int = 1
    split: str = ""  # the tasks it trains on ("": the environment's train split, envs.TRAIN_SPLITS)
    eval_split: str = ""  # the tasks its checkpoints are scored on ("": the held-out one, envs.EVAL_SPLITS)
    max_turns: int | None = None
    policy_temperature: float = 0.7
    policy_tokens: int | None = None
    seed: int = 0
    tau: float = 0.05
    target_schedule: str = "polyak"  # or "hard": a copy of the online weights every target_every iterations
    target_every: int = 1
    max_state_chars: int = 1500
    critique: CritiqueConfig = field(default_factory=CritiqueConfig)
    backup: BackupConfig = field(default_factory=lambda: BackupConfig(next_action="policy", max_state_chars=1500))
    refine: RefineConfig = field(default_factory=RefineConfig)
    distill_kept: bool = True  # a step kept without a refine call (optimal, or won) is its own distillation target
    outcome_target: str = "sample"  # how a Bellman target's P(success) becomes its OUTCOME word (successor.py)
    replay: ReplayConfig = field(default_factory=ReplayConfig)  # off-policy: transitions drawn from the buffer too
    sft: dict[str, Any] = field(default_factory=dict)  # SFTRunConfig fields

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.trials < 1:
            raise ValueError(f"tasks and trials must be at least 1, got {self.tasks} and {self.trials}")
        self.schedule()  # raises ValueError on a bad tau, schedule or period
        if self.outcome_target not in OUTCOME_TARGETS:
            raise ValueError(f"outcome_target must be one of {', '.join(OUTCOME_TARGETS)}, got {self.outcome_target!r}")

        if overlapping(self.env, self.split, self.eval_split):
            raise ValueError(f"the iteration would train on its evaluation split: split {self.train_split()!r} "
                             f"shares tasks with eval_split {self.eval_split or EVAL_SPLITS.get(self.env)!r}")

    def train_split(self) -> str:
        return self.split or TRAIN_SPLITS.get(self.env, "")

    def schedule(self):
        return TargetSchedule(self.target_schedule, self.tau, self.target_every)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IterationResult:
    workdir: Path
    trajectories: int
    steps: int
    rollout_metrics: dict[str, Any]
    dataset_records: dict[str, int]
    dataset_hash: str
    checkpoint: Path
    target: Path
    train_metrics: dict[str, Any]
    fresh_transitions: int = 0
    replayed_transitions: int = 0


def run_iteration(workdir: str | Path, model_dir: str | Path, target_dir: str | Path, config: IterationConfig,
                  load_backend: LoadBackend, oracle: Backend | None = None, on_progress: Progress | None = None,
                  should_stop: Callable[[], bool] | None = None,
                  replay: Sequence[TrajectoryRecord] = (), launch: LaunchConfig | None = None) -> IterationResult:
    """Run (or finish) one NLAC iteration in ``workdir``; returns where everything went.

    ``load_backend(path)`` builds a backend for a model directory (the caller
    decides hf or vllm and keeps models loaded); ``oracle`` is the environment's
    own LLM (20 Questions oracle, tool-use user), which stays fixed. ``replay``
    is the replay buffer (imported runs, earlier rollouts): the backup, critique
    and refine phases work on transitions drawn from it and from the fresh
    rollout (``config.replay``), the drawn ones listed in ``transitions.json``.
    ``launch``: the SFT phase's processes (default: in this process).
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").write_text(json.dumps(config.to_dict(), indent=2, default=str))
    report = on_progress or (lambda phase, done, total: None)
    env = make_env(config.env, oracle=oracle) if oracle is not None else make_env(config.env)
    model = load_backend(str(model_dir))

    # 1. rollout of the current policy
    rollout_path = work / "rollout.jsonl"
    if not rollout_path.is_file():
        spec = SamplingSpec(max_new_tokens=config.policy_tokens or env.default_max_new_tokens,
                            temperature=config.policy_temperature, seed=config.seed)
        trajectories = rollout(env, model, env.tasks(config.train_split(), limit=config.tasks), trials=config.trials,
                               spec=spec, max_turns=config.max_turns, source_checkpoint=str(model_dir),
                               progress=lambda d, t: report("rollout", d, t), should_stop=should_stop)
        write_trajectories(rollout_path, trajectories)
    trajectories = list(read_trajectories(rollout_path))
    drawn = draw(trajectories, replay, config.env, config.replay)
    steps: list[StepView] = drawn.steps
    index = StepIndex([*trajectories, *{s.trajectory.content_hash(): s.trajectory for s in drawn.replayed}.values()])
    _record_draw(work / "transitions.json", drawn)

    def policy_prompt(step: StepView):
        if step.trajectory.meta.get("env") == config.env:
            return env.render_policy(step.trajectory.task, step.history)
        return generic_policy_prompt(step, config.max_state_chars)  # an imported run: its own tools and policy

    def action_spec(step: StepView):
        return env.action_spec if step.trajectory.meta.get("env") == config.env else action_spec_for(step)

    # 2. Bellman targets, with the target checkpoint predicting the next futures
    targets = _phase(work / "backup.jsonl", "backup", report, lambda: backup(
        model, load_backend(str(target_dir)), steps, config.backup, policy_prompt=policy_prompt))
    # 3. critiques, 4. refinements
    transitions = [transition_of(s, None, config.max_state_chars) for s in steps]
    critiques = _phase(work / "critiques.jsonl", "critique", report,
                       lambda: critique(model, transitions, config.critique))
    refinements = _phase(work / "refinements.jsonl", "refine", report, lambda: refine_steps(
        model, steps, critiques, config.refine, spec_for=action_spec,
        max_state_chars=config.max_state_chars))

    # 5. one dataset for the one model: successor targets + distillation
    critic_records = successor_records(targets, index, config.max_state_chars, config.outcome_target, config.seed)
    policy_records = distillation_records(refinements, index, policy_prompt=policy_prompt,
                                          kept_actions=config.distill_kept)
    records = critic_records + policy_records
    _write_jsonl(work / "dataset.jsonl", records)

    # 6. train, 7. EMA
    checkpoint = work / "checkpoint"
    result = train(records, model_dir, checkpoint, SFTRunConfig.from_dict(config.sft), launch,
                   parent_checkpoint=str(model_dir), name=f"{work.name}-checkpoint",
                   on_progress=lambda e: report("train", e.step, e.total_steps), should_stop=should_stop)
    new_target = work / "target"
    if not (new_target / "config.json").is_file():  # the update writes atomically: present means done
        update_target(target_dir, checkpoint, config.schedule(), out_dir=new_target)
    report("ema", 1, 1)
    return IterationResult(work, len(trajectories), len(steps), compute_metrics(trajectories).to_dict(),
                           {"successor": len(critic_records), "distillation": len(policy_records)},
                           records_hash(records), checkpoint, new_target, result.metrics,
                           fresh_transitions=len(drawn.fresh), replayed_transitions=len(drawn.replayed))


def _record_draw(path: Path, drawn) -> None:
    """Which transitions this iteration backed up, fresh and replayed (by trajectory hash and step)."""
    def refs(steps):
        return [[s.trajectory.content_hash(), s.index] for s in steps]

    path.write_text(json.dumps({"fresh": refs(drawn.fresh), "replayed": refs(drawn.replayed)}) + "\n")


def _phase(path: Path, name: str, report: Progress, compute: Callable[[], list]) -> list:
    if path.is_file():
        return [from_json(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
    records = compute()
    _write_jsonl(path, [to_json(r) for r in records])
    report(name, len(records), len(records))
    return records


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
