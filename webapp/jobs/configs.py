"""Typed, validated, versioned job configurations: one dataclass per kind.

A job's ``config`` column is ``asdict`` of its kind's class; ``parse`` turns
JSON (from a form, the API or the database) back into the class, checking
every field and naming the first bad one. ``VERSION`` goes up when a kind's
fields change meaning, so an old row can be read the way it was written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from nlac_core.ema import SCHEDULES
from nlac_core.envs import EVAL_SPLITS, TRAIN_SPLITS, overlapping
from nlac_core.successor import OUTCOME_TARGETS

BACKENDS = ("hf", "vllm", "openai")
STEP_CHOICES = ("all", "first", "last")
ENVS = ("twenty_questions", "math", "tool_use")
CRITIQUE_MODES = ("sectioned", "free", "free_zero_shot")
MAX_ITEMS = 100_000
SUPERVISE_WHERE = ("all", "state_changing")  # nlac_core.supervision.WHERE


class ConfigError(ValueError):
    """A bad field: ``field`` names it, the message says what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"expected a whole number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(name, f"must be between {low} and {high}, got {value}")


def _float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(name, f"expected a number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(name, f"must be between {low:g} and {high:g}, got {value:g}")


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(name, f"expected one of {', '.join(choices)}, got {value!r}")


def _check_env_model(config) -> None:
    """The environment's own model (``webapp.jobs.env_model``): a checkpoint, or a configured endpoint."""
    if config.env_checkpoint is not None:
        _int("env_checkpoint", config.env_checkpoint, 1, 2**62)
    if not isinstance(config.env_endpoint, str) or not isinstance(config.env_endpoint_model, str):
        raise ConfigError("env_endpoint", "expected an endpoint name and the model it serves")
    if config.env_endpoint:
        from webapp.jobs import endpoints

        if config.env_endpoint not in endpoints.configured():
            raise ConfigError("env_endpoint", f"{config.env_endpoint!r} is not a configured endpoint "
                                              f"({_endpoint_names()})")
        if not config.env_endpoint_model.strip():
            raise ConfigError("env_endpoint_model", "an endpoint environment model needs the model name it serves")
        if config.env_checkpoint is not None:
            raise ConfigError("env_checkpoint", "choose a checkpoint or an endpoint for the environment, not both")


def _check_step_selection(config) -> None:
    """``steps`` and ``max_steps`` of the jobs that work on the selected trajectories' steps."""
    if config.steps not in STEP_CHOICES:
        try:
            [int(n) for n in config.steps.split(",") if n.strip()]
        except (ValueError, AttributeError):
            raise ConfigError("steps", "expected all, first, last or step numbers like 0,2,-1") from None
    _int("max_steps", config.max_steps, 1, MAX_ITEMS)


def _check_step_work(config) -> None:
    """Sampling and chunking of the step jobs (critique, backup, refine)."""
    _float("temperature", config.temperature, 0.0, 2.0)
    _int("seed", config.seed, 0, 2**31 - 1)
    _int("chunk_size", config.chunk_size, 1, 256)
    _int("max_state_chars", config.max_state_chars, 200, 100_000)


@dataclass(frozen=True)
class JobConfig:
    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    QUEUE: ClassVar[str] = "gpu"
    NEEDS_SELECTION: ClassVar[bool] = True  # works on chosen trajectories (rollouts make their own)

    def validate(self) -> None:  # subclasses check their fields
        pass

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> JobConfig:
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(unknown[0], f"not a setting of a {cls.KIND} job (known: {', '.join(sorted(known))})")
        try:
            config = cls(**data)
        except TypeError as exc:
            raise ConfigError("config", str(exc)) from None
        config.validate()
        return config


@dataclass(frozen=True)
class ModelChoice(JobConfig):
    """Which model a job runs: a registered checkpoint on hf/vllm, or an OpenAI-compatible endpoint named from
    the admin's list (``webapp.jobs.endpoints``): the worker sends its key there, so a job never carries a URL.
    Version 2: ``endpoint`` (a configured name) replaced ``base_url`` (a URL typed into the job)."""

    VERSION: ClassVar[int] = 2
    backend: str = "hf"
    checkpoint: int | None = None  # Checkpoint id; None = the embedded model
    endpoint_model: str = ""  # openai: the model name the endpoint serves
    endpoint: str = ""  # openai: the name of a configured endpoint (NLAC_OPENAI_ENDPOINTS)
    batch_size: int = 16

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> JobConfig:
        data = dict(data or {})
        if data.get("base_url"):  # a version 1 row, or a client that still sends a URL: never call it
            raise ConfigError("base_url", f"a job names an admin-configured endpoint in `endpoint` "
                                          f"({_endpoint_names()}), never a URL: the worker would send its API key")
        data.pop("base_url", None)  # version 1 rows of hf/vllm jobs carry it empty
        return super().parse(data)

    def validate(self) -> None:
        _choice("backend", self.backend, BACKENDS)
        if self.checkpoint is not None:
            _int("checkpoint", self.checkpoint, 1, 2**62)
        if not isinstance(self.endpoint, str):
            raise ConfigError("endpoint", f"expected an endpoint name, got {self.endpoint!r}")
        if self.backend == "openai":
            if not isinstance(self.endpoint_model, str) or not self.endpoint_model.strip():
                raise ConfigError("endpoint_model", "the openai backend needs the endpoint's model name")
            from webapp.jobs import endpoints

            if self.endpoint not in endpoints.configured():
                raise ConfigError("endpoint", f"{self.endpoint!r} is not a configured endpoint ({_endpoint_names()})")
        _int("batch_size", self.batch_size, 1, 1024)


def _endpoint_names() -> str:
    from webapp.jobs import endpoints

    names = endpoints.names()
    if names:
        return f"configured: {', '.join(names)}"
    return "none is configured: an admin lists them in NLAC_OPENAI_ENDPOINTS"


@dataclass(frozen=True)
class CritiqueJob(ModelChoice):
    """Successor + evaluator over the selected steps (selection: trajectory ids or a filter)."""

    KIND: ClassVar[str] = "critique"
    steps: str = "all"  # all, first, last, or step numbers "0,2,-1"
    max_steps: int = 1000
    k: int = 1
    mode: str = "sectioned"
    temperature: float = 0.0
    seed: int = 0
    chunk_size: int = 8
    max_state_chars: int = 2000
    calibrate_verdicts: bool = True
    # P(success) through the outcome calibration stored on the checkpoint by a calibrate-outcome job, if any
    calibrate_outcome: bool = True

    def validate(self) -> None:
        super().validate()
        _check_step_selection(self)
        _int("k", self.k, 1, 16)
        _choice("mode", self.mode, CRITIQUE_MODES)
        _check_step_work(self)
        if self.k > 1 and self.temperature == 0:
            raise ConfigError("temperature", "k > 1 futures need sampling: set a temperature above 0")
        for name in ("calibrate_verdicts", "calibrate_outcome"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "expected true or false")


@dataclass(frozen=True)
class CalibrateOutcomeJob(ModelChoice):
    """The successor's P(success) fitted to real outcomes (nlac_core.outcome): the selected episodes' steps
    (with rewards) are split by task, a Platt scaling is fitted on one part and reported on the other (held
    out), raw and calibrated (AUROC with a by-task interval, Brier against the base rate, reliability, flags),
    and stored on the checkpoint: its later critique jobs map P(success) through it."""

    KIND: ClassVar[str] = "calibrate-outcome"
    steps: str = "all"
    max_steps: int = 400
    held_out: float = 0.5
    seed: int = 0
    chunk_size: int = 16
    max_state_chars: int = 1500

    def validate(self) -> None:
        super().validate()
        if self.backend == "openai":
            raise ConfigError("backend", "P(success) is read from log-likelihoods: use hf or vllm")
        _check_step_selection(self)
        _float("held_out", self.held_out, 0.05, 0.95)
        _int("seed", self.seed, 0, 2**31 - 1)
        _int("chunk_size", self.chunk_size, 1, 256)
        _int("max_state_chars", self.max_state_chars, 200, 100_000)


@dataclass(frozen=True)
class RolloutJob(ModelChoice):
    """A policy on an environment, N tasks x k trials; the episodes are stored in a project."""

    KIND: ClassVar[str] = "rollout"
    NEEDS_SELECTION: ClassVar[bool] = False
    env: str = "twenty_questions"
    split: str = ""
    tasks: int = 4
    trials: int = 1
    max_turns: int | None = None
    max_new_tokens: int | None = None
    temperature: float = 0.7
    seed: int = 0
    project: str = ""  # where the trajectories go (default: "<env> rollouts")
    # the environment's own model (20 Questions oracle, tool-use user): fixed, never the policy (env_model.py)
    env_checkpoint: int | None = None  # None: the embedded base model
    env_endpoint: str = ""
    env_endpoint_model: str = ""

    def task_split(self) -> str:
        """The split the episodes' tasks come from ("" is the environment's own default)."""
        return self.split

    def validate(self) -> None:
        super().validate()
        _choice("env", self.env, ENVS)
        _int("tasks", self.tasks, 1, 10_000)
        _int("trials", self.trials, 1, 64)
        if self.max_turns is not None:
            _int("max_turns", self.max_turns, 1, 1000)
        if self.max_new_tokens is not None:
            _int("max_new_tokens", self.max_new_tokens, 1, 4096)
        _float("temperature", self.temperature, 0.0, 2.0)
        _int("seed", self.seed, 0, 2**31 - 1)
        if len(self.project) > 200:
            raise ConfigError("project", "at most 200 characters")
        _check_env_model(self)


@dataclass(frozen=True)
class BackupJob(ModelChoice):
    """Language Bellman targets for the selected steps: a_t+1 from the policy (``checkpoint``) or the data,
    d_t+1 from the target network (``target_checkpoint``: default the policy checkpoint's EMA twin, else the
    policy checkpoint itself)."""

    KIND: ClassVar[str] = "backup"
    target_checkpoint: int | None = None
    next_action: str = "policy"
    steps: str = "all"
    max_steps: int = 1000
    temperature: float = 0.0
    seed: int = 0
    chunk_size: int = 8
    max_state_chars: int = 2000

    def validate(self) -> None:
        super().validate()
        if self.backend == "openai":
            raise ConfigError("backend", "a backup needs the target network's weights: use hf or vllm")
        if self.target_checkpoint is not None:
            _int("target_checkpoint", self.target_checkpoint, 1, 2**62)
        _choice("next_action", self.next_action, ("policy", "data"))
        _check_step_selection(self)
        _check_step_work(self)


@dataclass(frozen=True)
class TrainCriticJob(JobConfig):
    """SFT of the critic (the successor model M(s, a), NLAC's critic) on what the selection's steps carry:
    Bellman targets (``source="targets"``) or model critiques (``"critiques"``), newest per step. Produces a
    checkpoint registered with its lineage; ``checkpoint`` is the base (default: the embedded model)."""

    KIND: ClassVar[str] = "train-critic"
    checkpoint: int | None = None
    source: str = "targets"
    snapshot: int | None = None  # train on this dataset snapshot's train split instead (the selection is unused)
    name: str = ""
    max_steps: int | None = 50
    epochs: float = 1.0
    learning_rate: float = 2e-5
    per_device_batch_size: int = 2
    max_length: int = 1024
    lora: bool = False
    lora_r: int = 16
    seed: int = 0
    max_state_chars: int = 2000
    outcome_target: str = "sample"  # how a Bellman target's P(success) becomes its OUTCOME word (successor.py)

    def validate(self) -> None:
        _choice("source", self.source, ("targets", "critiques", "nlac"))  # nlac: targets and refinements
        _choice("outcome_target", self.outcome_target, OUTCOME_TARGETS)
        self.validate_training()

    def validate_training(self) -> None:
        if self.checkpoint is not None:
            _int("checkpoint", self.checkpoint, 1, 2**62)
        if self.snapshot is not None:
            _int("snapshot", self.snapshot, 1, 2**62)
        if len(self.name) > 150:
            raise ConfigError("name", "at most 150 characters")
        if self.max_steps is not None:
            _int("max_steps", self.max_steps, 1, 1_000_000)
        _float("epochs", self.epochs, 0.01, 1000)
        _float("learning_rate", self.learning_rate, 1e-8, 1.0)
        _int("per_device_batch_size", self.per_device_batch_size, 1, 512)
        _int("max_length", self.max_length, 32, 32_768)
        if not isinstance(self.lora, bool):
            raise ConfigError("lora", "expected true or false")
        _int("lora_r", self.lora_r, 1, 1024)
        _int("seed", self.seed, 0, 2**31 - 1)
        _int("max_state_chars", self.max_state_chars, 200, 100_000)

    def sft_config(self):
        from nlac_core.training import SFTRunConfig

        return SFTRunConfig(learning_rate=self.learning_rate, epochs=self.epochs, max_steps=self.max_steps,
                            per_device_batch_size=self.per_device_batch_size, max_length=self.max_length,
                            lora=self.lora, lora_r=self.lora_r, seed=self.seed)


@dataclass(frozen=True)
class RefineJob(ModelChoice):
    """Refined actions for the selected steps that have a critique (the newest, or those of ``critique_job``),
    m rounds each; every round is checked against the step's action format. Only what the critique says to
    change is refined: a step judged optimal keeps its action (unless ``refine_optimal``), and the step that
    won its episode always does."""

    KIND: ClassVar[str] = "refine"
    critique_job: int | None = None
    rounds: int = 1
    temperature: float = 0.0
    seed: int = 0
    chunk_size: int = 8
    max_state_chars: int = 2000
    refine_optimal: bool = False

    def validate(self) -> None:
        super().validate()
        if self.critique_job is not None:
            _int("critique_job", self.critique_job, 1, 2**62)
        _int("rounds", self.rounds, 1, 8)
        if not isinstance(self.refine_optimal, bool):
            raise ConfigError("refine_optimal", "expected true or false")
        _check_step_work(self)


@dataclass(frozen=True)
class DistillPolicyJob(TrainCriticJob):
    """SFT of the policy on (state -> refined action) from the selected steps' newest valid refinements;
    the critique is not in the input. ``only_changed`` keeps refinements that differ from the original;
    ``skip_optimal`` leaves out steps whose critique said the action was already optimal."""

    KIND: ClassVar[str] = "distill-policy"
    source: str = "refinements"
    only_changed: bool = True
    skip_optimal: bool = False

    def validate(self) -> None:
        if self.source != "refinements":
            raise ConfigError("source", "a policy is distilled from refinements")
        for name in ("only_changed", "skip_optimal"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "expected true or false")
        super().validate_training()


@dataclass(frozen=True)
class EvaluateJob(RolloutJob):
    """A checkpoint on an environment split: success rate (winrate, accuracy), mean reward, pass^k, turns.
    The episodes are kept (project default: "evaluations"); the checkpoints page compares the results."""

    KIND: ClassVar[str] = "evaluate"
    temperature: float = 0.0

    def task_split(self) -> str:
        """Evaluation scores on the environment's held-out split unless told otherwise."""
        return self.split or EVAL_SPLITS.get(self.env, "")


@dataclass(frozen=True)
class NlacIterationJob(JobConfig):
    """One NLAC iteration as a parent job with a child job per phase: rollout of the policy -> language
    Bellman targets (next future from the EMA target) -> critiques -> refinements -> one SFT of the shared
    policy+critic model on the targets and the refined actions -> EMA update of the target network (the
    new checkpoint's twin). The parent waits between phases without holding a worker."""

    KIND: ClassVar[str] = "nlac-iteration"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    checkpoint: int | None = None  # the online model (policy and critic); default the embedded model
    target_checkpoint: int | None = None  # the EMA target; default the online model's twin, else a copy of it
    env: str = "twenty_questions"
    split: str = ""  # the tasks it trains on; "" is the environment's train split (TRAIN_SPLITS)
    eval_split: str = ""  # the tasks its checkpoints are scored on; "" is the held-out one (EVAL_SPLITS)
    tasks: int = 4
    trials: int = 1
    max_turns: int | None = None
    temperature: float = 0.7
    refine_rounds: int = 1
    tau: float = 0.05
    target_schedule: str = "polyak"  # or "hard": the target copies the online weights every target_every updates
    target_every: int = 1
    outcome_target: str = "sample"  # how the Bellman targets' P(success) become OUTCOME words (successor.py)
    # off-policy: the backup, critique and refine phases also take stored trajectories of the project (imported
    # runs, earlier rollouts) drawn from the replay buffer, about replay_size transitions with fresh_fraction fresh
    replay_size: int = 64
    fresh_fraction: float = 0.5
    max_steps: int | None = 20
    learning_rate: float = 2e-5
    per_device_batch_size: int = 2
    max_length: int = 1024
    lora: bool = False
    seed: int = 0
    max_state_chars: int = 1500
    project: str = ""
    env_checkpoint: int | None = None  # the environment's own model (default the embedded base), never the policy
    env_endpoint: str = ""
    env_endpoint_model: str = ""

    def train_split(self) -> str:
        return self.split or TRAIN_SPLITS[self.env]

    def validate(self) -> None:
        for name in ("checkpoint", "target_checkpoint"):
            if getattr(self, name) is not None:
                _int(name, getattr(self, name), 1, 2**62)
        RolloutJob(env=self.env, split=self.split, tasks=self.tasks, trials=self.trials, max_turns=self.max_turns,
                   temperature=self.temperature, seed=self.seed, project=self.project,
                   env_checkpoint=self.env_checkpoint, env_endpoint=self.env_endpoint,
                   env_endpoint_model=self.env_endpoint_model).validate()
        for name in ("split", "eval_split"):
            if not isinstance(getattr(self, name), str) or len(getattr(self, name)) > 50:
                raise ConfigError(name, "expected a split name of at most 50 characters")
        if overlapping(self.env, self.split, self.eval_split):
            train, held = self.train_split(), self.eval_split or EVAL_SPLITS[self.env]
            raise ConfigError("split", f"the iteration would train on its evaluation split: split {train!r} shares "
                                       f"tasks with eval_split {held!r} ({self.env})")
        _int("refine_rounds", self.refine_rounds, 1, 8)
        _float("tau", self.tau, 0.0, 1.0)
        _choice("target_schedule", self.target_schedule, SCHEDULES)
        _int("target_every", self.target_every, 1, 1000)
        _int("replay_size", self.replay_size, 0, MAX_ITEMS)
        _float("fresh_fraction", self.fresh_fraction, 0.0, 1.0)
        TrainCriticJob(max_steps=self.max_steps, learning_rate=self.learning_rate, lora=self.lora,
                       per_device_batch_size=self.per_device_batch_size, max_length=self.max_length,
                       seed=self.seed, max_state_chars=self.max_state_chars,
                       outcome_target=self.outcome_target).validate()


@dataclass(frozen=True)
class ImportJob(JobConfig):
    """A file saved under the upload folder, imported into a project off the request (cpu queue, no model).
    The file is removed once imported (or refused); a crash leaves it for the retry."""

    KIND: ClassVar[str] = "import"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    path: str = ""
    file_name: str = ""  # as uploaded (the path's name is made safe)
    project: str = ""
    format: str = ""
    source_model: str = ""

    def validate(self) -> None:
        from pathlib import Path

        from django.conf import settings

        from nlac_core.formats import FORMATS

        root = Path(settings.UPLOAD_DIR).resolve()
        if not self.path or root not in Path(self.path).resolve().parents:
            raise ConfigError("path", "an import job reads only files saved under the upload folder")
        if not self.project.strip() or len(self.project) > 200:
            raise ConfigError("project", "a project name of 1 to 200 characters")
        if self.format and self.format not in FORMATS:
            raise ConfigError("format", f"expected one of {', '.join(FORMATS)}, got {self.format!r}")
        if len(self.source_model) > 200:
            raise ConfigError("source_model", "at most 200 characters")
        if len(self.file_name) > 500:
            raise ConfigError("file_name", "at most 500 characters")


@dataclass(frozen=True)
class ExportJob(JobConfig):
    """Trajectories (by the job's selection) to our lossless JSONL under var/exports/; no model."""

    KIND: ClassVar[str] = "export"
    QUEUE: ClassVar[str] = "cpu"


@dataclass(frozen=True)
class BuildSnapshotJob(JobConfig):
    """A dataset snapshot's records, written (cpu queue, no model); the snapshot was created with its version."""

    KIND: ClassVar[str] = "build-snapshot"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    snapshot: int = 0

    def validate(self) -> None:
        _int("snapshot", self.snapshot, 1, 2**62)


@dataclass(frozen=True)
class ExportSnapshotJob(JobConfig):
    """A snapshot written in one format under the exports folder, for download (cpu queue, no model)."""

    KIND: ClassVar[str] = "export-snapshot"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    export: int = 0

    def validate(self) -> None:
        _int("export", self.export, 1, 2**62)


@dataclass(frozen=True)
class EvaluateCriticJob(ModelChoice):
    """A critic checkpoint against held-out reference labels (human verdicts; in runtime-critic data also the
    first-error labels from gold actions): it judges every labelled step of a snapshot split and is scored on
    AUROC, balanced accuracy, false alarms (intervals by task), Brier against the base rate and positivity,
    beside the majority class and, with ``compare_base``, its base checkpoint on the same steps; critic targets
    also on verdict accuracy, predicted-outcome calibration and the similarity of its critique to the human's."""

    KIND: ClassVar[str] = "evaluate-critic"
    NEEDS_SELECTION: ClassVar[bool] = False
    snapshot: int = 0
    split: str = "test"
    max_steps: int = 200
    mode: str = "sectioned"
    chunk_size: int = 8
    max_state_chars: int = 2000
    calibrate_verdicts: bool = True
    compare_base: bool = True  # also judge the same steps with the root of the checkpoint's lineage

    def validate(self) -> None:
        super().validate()
        _int("snapshot", self.snapshot, 1, 2**62)
        _choice("split", self.split, ("train", "validation", "test"))
        _int("max_steps", self.max_steps, 1, MAX_ITEMS)
        _choice("mode", self.mode, CRITIQUE_MODES)
        _int("chunk_size", self.chunk_size, 1, 256)
        _int("max_state_chars", self.max_state_chars, 200, 100_000)
        for name in ("calibrate_verdicts", "compare_base"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "expected true or false")


def _check_supervision(config) -> None:
    """The runtime critic's settings shared by the supervised kinds."""
    _choice("critic_backend", config.critic_backend, ("hf", "vllm"))
    if config.critic_checkpoint is not None:
        _int("critic_checkpoint", config.critic_checkpoint, 1, 2**62)
    _int("max_rounds", config.max_rounds, 0, 8)
    _int("max_interventions", config.max_interventions, 0, 100)
    _choice("where", config.where, SUPERVISE_WHERE)
    _int("feedback_tokens", config.feedback_tokens, 4, 512)
    if not isinstance(config.calibrate, bool):
        raise ConfigError("calibrate", "expected true or false")


@dataclass(frozen=True)
class SupervisedRolloutJob(RolloutJob):
    """The asymmetric actor-critic on an environment: the actor (this job's model: a checkpoint or an endpoint)
    proposes, the critic (``critic_checkpoint``, a small local model) approves or intervenes with feedback, at most
    ``max_rounds`` revisions per step and ``max_interventions`` per episode. ``both_arms`` also plays the same
    tasks and seeds without the critic (the baseline arm); ``counterfactuals`` re-runs every intervened step
    without its intervention and ``forced_sample`` approved steps with a forced one (helpfulness, harmfulness)."""

    KIND: ClassVar[str] = "supervised-rollout"
    env: str = "tool_use"
    critic_backend: str = "hf"
    critic_checkpoint: int | None = None  # None: the embedded model
    max_rounds: int = 2
    max_interventions: int = 4
    where: str = "all"  # every action, or only state-changing tool calls
    feedback_tokens: int = 64
    calibrate: bool = True  # approve/intervene relative to the content-free prompt (nlac_core.supervision)
    both_arms: bool = True
    counterfactuals: bool = True
    forced_sample: int = 10

    def validate(self) -> None:
        super().validate()
        _check_supervision(self)
        for name in ("both_arms", "counterfactuals"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "expected true or false")
        _int("forced_sample", self.forced_sample, 0, MAX_ITEMS)


@dataclass(frozen=True)
class ReplayCriticJob(ModelChoice):
    """A runtime critic (this job's model) judged offline on recorded episodes (an imported tau-bench run): each
    selected agent step's recorded action is checked as if it had been proposed; the checks are stored as runtime
    critiques of the steps (annotators can correct them). Nothing is re-run."""

    KIND: ClassVar[str] = "replay-critic"
    steps: str = "all"
    max_steps: int = 1000
    where: str = "all"
    feedback_tokens: int = 64
    calibrate: bool = True  # approve/intervene relative to the content-free prompt (nlac_core.supervision)
    chunk_size: int = 8
    max_state_chars: int = 2000

    def validate(self) -> None:
        super().validate()
        if self.backend == "openai":
            raise ConfigError("backend", "the runtime critic decides by log-likelihood: use hf or vllm")
        if not isinstance(self.calibrate, bool):
            raise ConfigError("calibrate", "expected true or false")
        _check_step_selection(self)
        _choice("where", self.where, SUPERVISE_WHERE)
        _int("feedback_tokens", self.feedback_tokens, 4, 512)
        _int("chunk_size", self.chunk_size, 1, 256)
        _int("max_state_chars", self.max_state_chars, 200, 100_000)


@dataclass(frozen=True)
class CriticDataJob(ModelChoice):
    """The runtime critic's data from hard tasks: the actor (this job's model) plays each training task ``k``
    times; tasks it does not reliably solve are hard; each failed episode's first error is found from the task's
    gold actions (episodes where that is not possible go to an annotator queue); the targets are intervene (with
    feedback) at the first error and approve on the correct actions (``approve_ratio`` approvals per
    intervention), optionally kept only when re-running with the feedback succeeds (``validate``). Output: a
    runtime-critic dataset snapshot and, with ``train``, a train-critic job on it (base: ``critic_checkpoint``).
    With a selection, its recorded episodes (an imported tau-bench or tau2-bench run) are the episodes instead of
    self-play: no model is run, and the targets go to their project's dataset."""

    KIND: ClassVar[str] = "critic-data"
    NEEDS_SELECTION: ClassVar[bool] = False
    env: str = "tool_use"
    split: str = "synthetic_train"
    tasks: int = 20
    k: int = 4
    max_turns: int | None = 10
    max_new_tokens: int | None = None
    temperature: float = 0.7
    seed: int = 0
    approve_ratio: float = 1.0
    at_turn_cap: bool = False  # an episode cut at the turn cap is wrong at its last step (nlac_core.critic_data)
    validate_feedback: bool = False
    project: str = ""  # default "<env> critic data"
    env_checkpoint: int | None = None  # the simulated user's model (default the embedded base), never the actor
    env_endpoint: str = ""
    env_endpoint_model: str = ""
    dataset: str = ""  # default "runtime critic from job <id>"
    train: bool = True
    critic_checkpoint: int | None = None  # the critic's base model for training (None: the embedded model)
    train_max_steps: int | None = 50
    learning_rate: float = 2e-5

    def validate(self) -> None:
        super().validate()
        _choice("env", self.env, ("tool_use",))
        _int("tasks", self.tasks, 1, 10_000)
        _int("k", self.k, 1, 64)
        if self.max_turns is not None:
            _int("max_turns", self.max_turns, 1, 1000)
        if self.max_new_tokens is not None:
            _int("max_new_tokens", self.max_new_tokens, 1, 4096)
        _float("temperature", self.temperature, 0.0, 2.0)
        if self.k > 1 and self.temperature == 0:
            raise ConfigError("temperature", "k self-play trials of a task need sampling: set a temperature above 0")
        _int("seed", self.seed, 0, 2**31 - 1)
        _float("approve_ratio", self.approve_ratio, 0.0, 100.0)
        for name in ("at_turn_cap", "validate_feedback", "train"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "expected true or false")
        _check_env_model(self)
        if len(self.project) > 200 or len(self.dataset) > 200:
            raise ConfigError("project" if len(self.project) > 200 else "dataset", "at most 200 characters")
        if self.critic_checkpoint is not None:
            _int("critic_checkpoint", self.critic_checkpoint, 1, 2**62)
        if self.train_max_steps is not None:
            _int("train_max_steps", self.train_max_steps, 1, 1_000_000)
        _float("learning_rate", self.learning_rate, 1e-8, 1.0)
