"""Typed, validated, versioned job configurations: one pydantic model per kind.

A job's ``config`` column is ``to_dict()`` of its kind's model; ``parse`` turns JSON (from a form, the API or
the database) back into the model. Each field declares its type, default, range, choices, label (``title``) and
help (``description``) once: pydantic checks them (strictly: no "5" for 5, no true for 1), the launch forms
(``webapp.jobs.form_fields``), the API's schema and ``manage.py launch_job`` are derived from them. What one
field cannot say (a rule across fields, a configured endpoint) is a kind's ``check``. Every failure is a
``ConfigError`` naming the field. ``VERSION`` goes up when a kind's fields change meaning, so an old row can be
read the way it was written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from django.conf import settings
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from nlac_core.backends import JOB_BACKENDS, LOCAL_BACKENDS
from nlac_core.backends.base import sampling_problem
from nlac_core.critic import MODES as CRITIQUE_MODES
from nlac_core.ema import SCHEDULES
from nlac_core.envs import ENV_NAMES, EVAL_SPLITS, TRAIN_SPLITS, overlapping
from nlac_core.formats import FORMATS
from nlac_core.successor import OUTCOME_TARGETS
from nlac_core.supervision import WHERE
from nlac_core.training import STRATEGIES, SFTRunConfig
from webapp.errors import FieldError
from webapp.jobs import endpoints

ConfigError = FieldError  # the jobs app's name for the one field error
MAX_ITEMS = 100_000
MAX_ID = 2**62
STEP_CHOICES = ("all", "first", "last")
CHECKPOINT = "checkpoint"  # metadata of a field holding a Checkpoint id (its form field lists the checkpoints)


def _steps(value: str) -> str:
    if value not in STEP_CHOICES:
        try:
            [int(n) for n in value.split(",") if n.strip()]
        except ValueError:
            raise ValueError("expected all, first, last or step numbers like 0,2,-1") from None
    return value


# the field types several kinds share, with their ranges: declared here once
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
OptionalId = Annotated[int | None, Field(ge=1, le=MAX_ID)]
CheckpointId = Annotated[int | None, Field(ge=1, le=MAX_ID), CHECKPOINT]
Steps = Annotated[str, Field(max_length=200, description="all, first, last, or step numbers like 0,2,-1"),
                  AfterValidator(_steps)]
MaxItems = Annotated[int, Field(ge=1, le=MAX_ITEMS)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
ChunkSize = Annotated[int, Field(ge=1, le=256, description="steps per committed chunk")]
MaxStateChars = Annotated[int, Field(ge=200, le=100_000)]
Tasks = Annotated[int, Field(ge=1, le=10_000)]
Trials = Annotated[int, Field(ge=1, le=64)]
MaxTurns = Annotated[int | None, Field(ge=1, le=1000)]
MaxNewTokens = Annotated[int | None, Field(ge=1, le=4096)]
Name = Annotated[str, Field(max_length=200)]
Split = Annotated[str, Field(max_length=50)]
TrainSteps = Annotated[int | None, Field(ge=1, le=1_000_000)]
LearningRate = Annotated[float, Field(ge=1e-8, le=1.0)]
BatchSize = Annotated[int, Field(ge=1, le=512)]
MaxLength = Annotated[int, Field(ge=32, le=32_768)]
FeedbackTokens = Annotated[int, Field(ge=4, le=512)]
Rounds = Annotated[int, Field(ge=1, le=8)]
Env = Literal[ENV_NAMES]
Where = Literal[WHERE]
OutcomeTarget = Literal[OUTCOME_TARGETS]
WHERE_LABELS = {"all": "every action", "state_changing": "state-changing tool calls only"}
OUTCOME_LABELS = {"sample": "sampled from P(success), seeded per step",
                  "threshold": "the likelier word (P >= 0.5: success)"}
OUTCOME_HELP = "how a Bellman target's predicted P(success) becomes the OUTCOME word the critic learns"
EMBEDDED = "embedded SmolLM2-135M-Instruct"


def labels(names: dict[str, str]) -> dict[str, Any]:
    """``json_schema_extra`` for a choice field whose options have readable labels (forms and schema show them)."""
    return {"choice_labels": names}


class Fields(BaseModel):
    """Settings checked strictly (no "5" for 5, no true for 1), unknown names refused, frozen once made: the
    base of the job configs and of the groups of fields several kinds share."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class JobConfig(Fields):

    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    QUEUE: ClassVar[str] = "gpu"
    NEEDS_SELECTION: ClassVar[bool] = True  # works on chosen trajectories (rollouts make their own)
    OPTIONAL_SELECTION: ClassVar[bool] = False  # may take chosen trajectories instead of making its own
    API_ONLY: ClassVar[tuple[str, ...]] = ()  # fields set through the API, not shown on the launch form
    INTERNAL: ClassVar[tuple[str, ...]] = ()  # fields the jobs set on their children (not in the shell's options)

    def check(self) -> None:
        """Rules across fields, raising ConfigError (subclasses add theirs and call this)."""

    @model_validator(mode="after")
    def _checked(self):
        self.check()
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> JobConfig:
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise ConfigError(unknown[0], f"not a setting of a {cls.KIND} job "
                                          f"(known: {', '.join(sorted(cls.model_fields))})")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _config_error(cls, exc.errors()[0]) from None


def bound(cls: type[JobConfig], name: str, key: str):
    """A field's declared ``ge`` or ``le`` (None: unbounded)."""
    for meta in cls.model_fields[name].metadata:
        if getattr(meta, key, None) is not None:
            return getattr(meta, key)
    return None


def _config_error(cls: type[JobConfig], error: dict[str, Any]) -> ConfigError:
    """pydantic's first error, in this app's words, on the field it names."""
    name = str(error["loc"][0]) if error["loc"] else "config"
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx", {})
    if kind == "value_error":
        if isinstance(ctx.get("error"), FieldError):
            return ctx["error"]
        return ConfigError(name, str(ctx.get("error", error["msg"])))
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return ConfigError(name, f"expected a whole number, got {value!r}")
    if kind in ("float_type", "float_parsing", "finite_number"):
        return ConfigError(name, f"expected a number, got {value!r}")
    if kind == "bool_type":
        return ConfigError(name, "expected true or false")
    if kind == "string_type":
        return ConfigError(name, f"expected text, got {value!r}")
    if kind == "literal_error":
        choices = [c for c in get_args(cls.model_fields[name].annotation) if c]
        return ConfigError(name, f"expected one of {', '.join(choices)}, got {value!r}")
    if kind in ("greater_than_equal", "less_than_equal") and name in cls.model_fields:
        low, high = bound(cls, name, "ge"), bound(cls, name, "le")
        if isinstance(low, float) or isinstance(high, float):
            return ConfigError(name, f"must be between {low:g} and {high:g}, got {value:g}")
        return ConfigError(name, f"must be between {low} and {high}, got {value}")
    if kind == "missing":
        return ConfigError(name, f"required by a {cls.KIND} job")
    if kind == "string_too_long":
        return ConfigError(name, f"at most {ctx['max_length']} characters")
    return ConfigError(name, error["msg"])


def _endpoint_names() -> str:
    names = endpoints.names()
    if names:
        return f"configured: {', '.join(names)}"
    return "none is configured: an admin lists them in NLAC_OPENAI_ENDPOINTS"


def _require_sampling(k: int, temperature: float, what: str = "k > 1 futures") -> None:
    if problem := sampling_problem(k, temperature, what):
        raise ConfigError("temperature", problem)


class ModelChoice(JobConfig):
    """Which model a job runs: a registered checkpoint on hf/vllm, or an OpenAI-compatible endpoint named from
    the admin's list (``webapp.jobs.endpoints``): the worker sends its key there, so a job never carries a URL.
    Version 2: ``endpoint`` (a configured name) replaced ``base_url`` (a URL typed into the job)."""

    VERSION: ClassVar[int] = 2
    # why a kind runs only on a local backend ("": any): it reads log-likelihoods or weights
    LOCAL_MODEL: ClassVar[str] = ""
    backend: Literal[JOB_BACKENDS] = "hf"
    checkpoint: CheckpointId = None  # None = the embedded model
    endpoint_model: Name = Field("", title="Endpoint model (openai)")  # the model name the endpoint serves
    endpoint: str = Field("", max_length=64, title="Endpoint (openai)",
                          description="one of the endpoints the admin configured (NLAC_OPENAI_ENDPOINTS)")
    batch_size: int = Field(16, ge=1, le=1024)

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> JobConfig:
        data = dict(data or {})
        if data.get("base_url"):  # a version 1 row, or a client that still sends a URL: never call it
            raise ConfigError("base_url", f"a job names an admin-configured endpoint in `endpoint` "
                                          f"({_endpoint_names()}), never a URL: the worker would send its API key")
        data.pop("base_url", None)  # version 1 rows of hf/vllm jobs carry it empty
        return super().parse(data)

    def check(self) -> None:
        if self.backend == "openai":
            if self.LOCAL_MODEL:
                raise ConfigError("backend", self.LOCAL_MODEL)
            if not self.endpoint_model.strip():
                raise ConfigError("endpoint_model", "the openai backend needs the endpoint's model name")
            if self.endpoint not in endpoints.configured():
                raise ConfigError("endpoint", f"{self.endpoint!r} is not a configured endpoint ({_endpoint_names()})")


class EnvModel(Fields):
    """The environment's own model (20 Questions oracle, tool-use user; ``webapp.jobs.env_model``): a checkpoint
    (None: the embedded base model) or a configured endpoint; fixed, never the policy."""

    env_checkpoint: OptionalId = None
    env_endpoint: str = Field("", max_length=64)
    env_endpoint_model: Name = ""

    def check_env_model(self) -> None:
        if self.env_endpoint:
            if self.env_endpoint not in endpoints.configured():
                raise ConfigError("env_endpoint", f"{self.env_endpoint!r} is not a configured endpoint "
                                                  f"({_endpoint_names()})")
            if not self.env_endpoint_model.strip():
                raise ConfigError("env_endpoint_model", "an endpoint environment model needs the model name it serves")
            if self.env_checkpoint is not None:
                raise ConfigError("env_checkpoint", "choose a checkpoint or an endpoint for the environment, not both")


ENV_MODEL_FIELDS = tuple(EnvModel.model_fields)

MAX_SHARDS = 64


class ShardSettings(Fields):
    """A step job split across workers (``webapp.jobs.runners.shards``): with ``shards`` > 1 the job is a parent
    whose shards are child jobs of the same kind, each over a contiguous run of whole chunks of the selection;
    ``shard`` is set on the children only. A chunk's seed follows its place in the selection, so the results are
    those of the one-shard run."""

    INTERNAL: ClassVar[tuple[str, ...]] = ("shard",)
    shards: int = Field(1, ge=1, le=MAX_SHARDS, title="Shards",
                        description="child jobs any worker may take, each a share of the steps")
    shard: int | None = Field(None, ge=0, le=MAX_SHARDS - 1)

    def check(self) -> None:
        super().check()  # type: ignore[misc]
        if self.shard is not None and self.shard >= self.shards:
            raise ConfigError("shard", f"must be below shards ({self.shards}), got {self.shard}")


SHARD_FIELDS = ShardSettings.INTERNAL  # set by the parent on its shards, never by a user


class CritiqueJob(ShardSettings, ModelChoice):
    """Successor + evaluator over the selected steps (selection: trajectory ids or a filter)."""

    KIND: ClassVar[str] = "critique"
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars", *SHARD_FIELDS)
    steps: Steps = "all"
    max_steps: MaxItems = 1000
    k: int = Field(1, ge=1, le=16, title="k futures")
    mode: Literal[CRITIQUE_MODES] = "sectioned"
    temperature: Temperature = 0.0
    seed: Seed = 0
    chunk_size: ChunkSize = 8
    max_state_chars: MaxStateChars = 2000
    calibrate_verdicts: bool = True
    calibrate_outcome: bool = Field(True, title="Calibrated P(success)",
                                    description="through the checkpoint's outcome calibration, if it has one "
                                                "(a calibrate-outcome job stores it)")

    def check(self) -> None:
        super().check()
        _require_sampling(self.k, self.temperature)


class CalibrateOutcomeJob(ModelChoice):
    """The successor's P(success) fitted to real outcomes (nlac_core.outcome): the selected episodes' steps
    (with rewards) are split by task, a Platt scaling is fitted on one part and reported on the other (held
    out), raw and calibrated (AUROC with a by-task interval, Brier against the base rate, reliability, flags),
    and stored on the checkpoint: its later critique jobs map P(success) through it."""

    KIND: ClassVar[str] = "calibrate-outcome"
    LOCAL_MODEL: ClassVar[str] = "P(success) is read from log-likelihoods: use hf or vllm"
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars",)
    steps: Steps = "all"
    max_steps: MaxItems = 400
    held_out: float = Field(0.5, ge=0.05, le=0.95, title="Held-out share of tasks")
    seed: Seed = 0
    chunk_size: ChunkSize = 16
    max_state_chars: MaxStateChars = 1500


class RolloutJob(ShardSettings, EnvModel, ModelChoice):
    """A policy on an environment, N tasks x k trials; the episodes are stored in a project."""

    KIND: ClassVar[str] = "rollout"
    NEEDS_SELECTION: ClassVar[bool] = False
    API_ONLY: ClassVar[tuple[str, ...]] = (*ENV_MODEL_FIELDS, *SHARD_FIELDS)
    env: Env = Field("twenty_questions", title="Environment")
    split: Split = Field("", description="20 Questions and MATH: train, test, all; tool use: graded, base, all, "
                                         "synthetic_train, synthetic_test (evaluate: default test)")
    tasks: Tasks = 4
    trials: Trials = 1
    max_turns: MaxTurns = None
    max_new_tokens: MaxNewTokens = None
    temperature: Temperature = 0.7
    seed: Seed = 0
    project: Name = Field("", description="where the episodes go (default: '<env> rollouts')")

    def task_split(self) -> str:
        """The split the episodes' tasks come from ("" is the environment's own default)."""
        return self.split

    def check(self) -> None:
        super().check()
        self.check_env_model()


class BackupJob(ShardSettings, ModelChoice):
    """Language Bellman targets for the selected steps: a_t+1 from the policy (``checkpoint``) or the data,
    d_t+1 from the target network (``target_checkpoint``: default the policy checkpoint's EMA twin, else the
    policy checkpoint itself)."""

    KIND: ClassVar[str] = "backup"
    LOCAL_MODEL: ClassVar[str] = "a backup needs the target network's weights: use hf or vllm"
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars", *SHARD_FIELDS)
    target_checkpoint: CheckpointId = Field(None, title="Target network",
                                            description="default: the policy checkpoint's EMA twin, else the policy")
    next_action: Literal["policy", "data"] = Field(
        "policy", title="Next action a_t+1",
        json_schema_extra=labels({"policy": "sampled from the policy", "data": "as recorded"}))
    steps: Steps = "all"
    max_steps: MaxItems = 1000
    temperature: Temperature = 0.0
    seed: Seed = 0
    chunk_size: ChunkSize = 8
    max_state_chars: MaxStateChars = 2000


class TrainingSettings(Fields):
    """The SFT settings every training kind shares (``nlac_core.training.SFTRunConfig``)."""

    max_steps: TrainSteps = Field(50, description="blank: no step limit, the epochs decide")
    learning_rate: LearningRate = 2e-5
    per_device_batch_size: BatchSize = Field(2, title="Batch size")
    max_length: MaxLength = 1024
    lora: bool = Field(False, title="LoRA")
    seed: Seed = 0
    max_state_chars: MaxStateChars = 2000
    # how the model spreads over the worker host's training processes (NLAC_TRAIN_PROCESSES, one per GPU)
    strategy: Literal[STRATEGIES] = Field(
        "ddp", title="Training strategy", json_schema_extra=labels({
            "ddp": "DDP: a whole model per GPU", "fsdp": "FSDP: the model sharded over the GPUs",
            "deepspeed": "DeepSpeed ZeRO-3: the model sharded over the GPUs"}))


class TrainCriticJob(TrainingSettings, JobConfig):
    """SFT of the critic (the successor model M(s, a), NLAC's critic) on what the selection's steps carry:
    Bellman targets (``source="targets"``) or model critiques (``"critiques"``), newest per step; ``"nlac"``:
    targets and refinements, one model. Produces a checkpoint registered with its lineage; ``checkpoint`` is the
    base (default: the embedded model)."""

    KIND: ClassVar[str] = "train-critic"
    API_ONLY: ClassVar[tuple[str, ...]] = ("snapshot", "max_state_chars")
    checkpoint: CheckpointId = Field(None, title="Base checkpoint")
    source: Literal["targets", "critiques", "nlac"] = Field(
        "targets", json_schema_extra=labels({"targets": "Bellman targets (successor SFT)",
                                             "critiques": "model critiques",
                                             "nlac": "Bellman targets and refinements (one NLAC model)"}))
    snapshot: OptionalId = None  # train on this dataset snapshot's train split instead (the selection is unused)
    name: str = Field("", max_length=150, description="of the new checkpoint")
    epochs: float = Field(1.0, ge=0.01, le=1000)
    lora_r: int = Field(16, ge=1, le=1024, title="LoRA rank")
    outcome_target: OutcomeTarget = Field("sample", title="Target OUTCOME", description=OUTCOME_HELP,
                                          json_schema_extra=labels(OUTCOME_LABELS))

    def sft_config(self):
        return SFTRunConfig(learning_rate=self.learning_rate, epochs=self.epochs, max_steps=self.max_steps,
                            per_device_batch_size=self.per_device_batch_size, max_length=self.max_length,
                            lora=self.lora, lora_r=self.lora_r, seed=self.seed)


class RefineJob(ShardSettings, ModelChoice):
    """Refined actions for the selected steps that have a critique (the newest, or those of ``critique_job``),
    m rounds each; every round is checked against the step's action format. Only what the critique says to
    change is refined: a step judged optimal keeps its action (unless ``refine_optimal``), and the step that
    won its episode always does."""

    KIND: ClassVar[str] = "refine"
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars", *SHARD_FIELDS)
    critique_job: OptionalId = Field(None, description="refine from this critique job's critiques "
                                                       "(default: the newest)")
    rounds: Rounds = Field(1, title="m rounds")
    temperature: Temperature = 0.0
    seed: Seed = 0
    chunk_size: ChunkSize = 8
    max_state_chars: MaxStateChars = 2000
    refine_optimal: bool = Field(False, title="Also rewrite steps the critique judged optimal",
                                 description="by default they keep their action (no refine call)")


class DistillPolicyJob(TrainCriticJob):
    """SFT of the policy on (state -> refined action) from the selected steps' newest valid refinements;
    the critique is not in the input. ``only_changed`` keeps refinements that differ from the original;
    ``skip_optimal`` leaves out steps whose critique said the action was already optimal."""

    KIND: ClassVar[str] = "distill-policy"
    API_ONLY: ClassVar[tuple[str, ...]] = ("snapshot", "max_state_chars", "outcome_target")  # a policy learns actions
    source: Literal["refinements"] = Field("refinements", json_schema_extra=labels({"refinements": "refined actions"}))
    only_changed: bool = Field(True, title="Only refinements that change the action")
    skip_optimal: bool = Field(False, title="Leave out steps critiqued as optimal")

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> JobConfig:
        if (data or {}).get("source", "refinements") != "refinements":
            raise ConfigError("source", "a policy is distilled from refinements")
        return super().parse(data)


class EvaluateJob(RolloutJob):
    """A checkpoint on an environment split: success rate (winrate, accuracy), mean reward, pass^k, turns.
    The episodes are kept (project default: "evaluations"); the checkpoints page compares the results."""

    KIND: ClassVar[str] = "evaluate"
    temperature: Temperature = 0.0
    project: Name = Field("", description="where the episodes go (default: 'evaluations')")

    def task_split(self) -> str:
        """Evaluation scores on the environment's held-out split unless told otherwise."""
        return self.split or EVAL_SPLITS.get(self.env, "")


class NlacIterationJob(EnvModel, TrainingSettings, JobConfig):
    """One NLAC iteration as a parent job with a child job per phase: rollout of the policy -> language
    Bellman targets (next future from the EMA target) -> critiques -> refinements -> one SFT of the shared
    policy+critic model on the targets and the refined actions -> EMA update of the target network (the
    new checkpoint's twin). The parent waits between phases without holding a worker."""

    KIND: ClassVar[str] = "nlac-iteration"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars", *ENV_MODEL_FIELDS)
    checkpoint: CheckpointId = Field(None, title="Online model")  # policy and critic; default the embedded model
    target_checkpoint: CheckpointId = Field(None, title="Target network",
                                            description="default: its EMA twin, else a copy of it")
    env: Env = Field("twenty_questions", title="Environment")
    split: Split = Field("", description="the tasks it trains on (default: train; tool use: synthetic_train)")
    eval_split: Split = Field("", description="held out for scoring (default: test; tool use: synthetic_test)")
    tasks: Tasks = 4
    trials: Trials = 1
    max_turns: MaxTurns = None
    temperature: Temperature = Field(0.7, title="Rollout temperature")
    refine_rounds: Rounds = Field(1, title="m refinement rounds")
    tau: float = Field(0.05, ge=0.0, le=1.0, title="EMA tau")
    target_schedule: Literal[SCHEDULES] = Field(  # hard: the target copies the online weights every target_every
        "polyak", json_schema_extra=labels({"polyak": "Polyak: average with tau each iteration",
                                            "hard": "hard copy every N iterations"}))
    target_every: int = Field(1, ge=1, le=1000, title="N (hard copy)")
    outcome_target: OutcomeTarget = Field("sample", title="Target OUTCOME", description=OUTCOME_HELP,
                                          json_schema_extra=labels(OUTCOME_LABELS))
    # off-policy: the backup, critique and refine phases also take stored trajectories of the project (imported
    # runs, earlier rollouts) drawn from the replay buffer, about replay_size transitions with fresh_fraction fresh
    replay_size: int = Field(64, ge=0, le=MAX_ITEMS, title="Replay: transitions",
                             description="backed up per iteration, fresh and from the project's stored "
                                         "trajectories (0: the fresh rollout alone)")
    fresh_fraction: float = Field(0.5, ge=0.0, le=1.0, title="Replay: fresh share")
    max_steps: TrainSteps = Field(20, title="SFT max steps")
    max_state_chars: MaxStateChars = 1500
    project: Name = ""

    def train_split(self) -> str:
        return self.split or TRAIN_SPLITS[self.env]

    def check(self) -> None:
        self.check_env_model()
        if overlapping(self.env, self.split, self.eval_split):
            train, held = self.train_split(), self.eval_split or EVAL_SPLITS[self.env]
            raise ConfigError("split", f"the iteration would train on its evaluation split: split {train!r} shares "
                                       f"tasks with eval_split {held!r} ({self.env})")


class ImportJob(JobConfig):
    """A file saved under the upload folder, imported into a project off the request (cpu queue, no model).
    The file is removed once imported (or refused); a crash leaves it for the retry."""

    KIND: ClassVar[str] = "import"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    path: str = ""
    file_name: str = Field("", max_length=500)  # as uploaded (the path's name is made safe)
    project: Name = ""
    format: Literal[("", *FORMATS)] = ""
    source_model: Name = ""

    def check(self) -> None:
        root = Path(settings.UPLOAD_DIR).resolve()
        if not self.path or root not in Path(self.path).resolve().parents:
            raise ConfigError("path", "an import job reads only files saved under the upload folder")
        if not self.project.strip():
            raise ConfigError("project", "a project name of 1 to 200 characters")


class ExportJob(JobConfig):
    """Trajectories (by the job's selection) to our lossless JSONL under var/exports/; no model."""

    KIND: ClassVar[str] = "export"
    QUEUE: ClassVar[str] = "cpu"


class BuildSnapshotJob(JobConfig):
    """A dataset snapshot's records, written (cpu queue, no model); the snapshot was created with its version."""

    KIND: ClassVar[str] = "build-snapshot"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    snapshot: Id  # required


class ExportSnapshotJob(JobConfig):
    """A snapshot written in one format under the exports folder, for download (cpu queue, no model)."""

    KIND: ClassVar[str] = "export-snapshot"
    QUEUE: ClassVar[str] = "cpu"
    NEEDS_SELECTION: ClassVar[bool] = False
    export: Id  # required


class EvaluateCriticJob(ModelChoice):
    """A critic checkpoint against held-out reference labels (human verdicts; in runtime-critic data also the
    first-error labels from gold actions): it judges every labelled step of a snapshot split and is scored on
    AUROC, balanced accuracy, false alarms (intervals by task), Brier against the base rate and positivity,
    beside the majority class and, with ``compare_base``, its base checkpoint on the same steps; critic targets
    also on verdict accuracy, predicted-outcome calibration and the similarity of its critique to the human's."""

    KIND: ClassVar[str] = "evaluate-critic"
    NEEDS_SELECTION: ClassVar[bool] = False
    snapshot: OptionalId = None  # required: checked after the model's settings (``check``)
    split: Literal["train", "validation", "test"] = "test"
    max_steps: MaxItems = 200
    mode: Literal[CRITIQUE_MODES] = "sectioned"
    chunk_size: ChunkSize = 8
    max_state_chars: MaxStateChars = 2000
    calibrate_verdicts: bool = True
    compare_base: bool = True  # also judge the same steps with the root of the checkpoint's lineage

    def check(self) -> None:
        super().check()
        if self.snapshot is None:
            raise ConfigError("snapshot", f"required by a {self.KIND} job")


class RuntimeCriticSettings(Fields):
    """How the runtime critic decides, shared by the supervised kinds (``nlac_core.supervision``)."""

    where: Where = Field("all", title="Check", json_schema_extra=labels(WHERE_LABELS))
    feedback_tokens: FeedbackTokens = 64
    calibrate: bool = Field(True, title="Calibrated decisions",  # relative to the content-free prompt
                            description="scored against a content-free prompt (off: raw likelihood)")


class SupervisedRolloutJob(RuntimeCriticSettings, RolloutJob):
    """The asymmetric actor-critic on an environment: the actor (this job's model: a checkpoint or an endpoint)
    proposes, the critic (``critic_checkpoint``, a small local model) approves or intervenes with feedback, at most
    ``max_rounds`` revisions per step and ``max_interventions`` per episode. ``both_arms`` also plays the same
    tasks and seeds without the critic (the baseline arm); ``counterfactuals`` re-runs every intervened step
    without its intervention and ``forced_sample`` approved steps with a forced one (helpfulness, harmfulness)."""

    KIND: ClassVar[str] = "supervised-rollout"
    API_ONLY: ClassVar[tuple[str, ...]] = (*ENV_MODEL_FIELDS, "shards", *SHARD_FIELDS)  # not sharded (yet)
    env: Env = Field("tool_use", title="Environment")
    checkpoint: CheckpointId = Field(None, title="Actor checkpoint")
    project: Name = Field("", description="where the episodes go (default: '<env> supervised')")
    critic_backend: Literal[LOCAL_BACKENDS] = "hf"
    critic_checkpoint: CheckpointId = Field(None, title="Critic checkpoint")  # None: the embedded model
    max_rounds: int = Field(2, ge=0, le=8, title="R revision rounds per step")
    max_interventions: int = Field(4, ge=0, le=100, title="I interventions per episode")
    both_arms: bool = Field(True, title="Also run without the critic (baseline arm)")
    counterfactuals: bool = Field(True, title="Counterfactual re-runs (helpfulness, harmfulness)")
    forced_sample: int = Field(10, ge=0, le=MAX_ITEMS, title="Approved steps re-run with a forced intervention")
    shards: int = Field(1, ge=1, le=1, description="a supervised rollout runs in one job (not sharded yet)")


class ReplayCriticJob(ShardSettings, RuntimeCriticSettings, ModelChoice):
    """A runtime critic (this job's model) judged offline on recorded episodes (an imported tau-bench run): each
    selected agent step's recorded action is checked as if it had been proposed; the checks are stored as runtime
    critiques of the steps (annotators can correct them). Nothing is re-run."""

    KIND: ClassVar[str] = "replay-critic"
    LOCAL_MODEL: ClassVar[str] = "the runtime critic decides by log-likelihood: use hf or vllm"
    API_ONLY: ClassVar[tuple[str, ...]] = ("max_state_chars", *SHARD_FIELDS)
    checkpoint: CheckpointId = Field(None, title="Critic checkpoint")
    steps: Steps = "all"
    max_steps: MaxItems = 1000
    where: Where = Field("all", title="Judge", json_schema_extra=labels(WHERE_LABELS))
    chunk_size: ChunkSize = 8
    max_state_chars: MaxStateChars = 2000


class CriticDataJob(EnvModel, ModelChoice):
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
    OPTIONAL_SELECTION: ClassVar[bool] = True  # recorded episodes (an imported run) instead of self-play
    API_ONLY: ClassVar[tuple[str, ...]] = ("env", "max_new_tokens", *ENV_MODEL_FIELDS)
    checkpoint: CheckpointId = Field(None, title="Actor checkpoint")
    env: Literal["tool_use"] = "tool_use"
    split: Split = Field("synthetic_train", description="the training tasks")
    tasks: Tasks = 20
    k: Trials = Field(4, title="k self-play trials per task")
    max_turns: MaxTurns = 10
    max_new_tokens: MaxNewTokens = None
    temperature: Temperature = 0.7
    seed: Seed = 0
    approve_ratio: float = Field(1.0, ge=0.0, le=100.0, title="Approve targets per intervene target")
    at_turn_cap: bool = Field(False, title="Place the error of an episode cut at the turn cap at its last step "
                                           "(a weaker label)")  # nlac_core.critic_data
    validate_feedback: bool = Field(False, title="Keep an intervene target only if re-running with its feedback "
                                                 "succeeds")
    project: Name = Field("", description="default: '<env> critic data'")
    dataset: Name = Field("", description="default: 'runtime critic from job N'")
    train: bool = Field(True, title="Train a critic on the snapshot")
    critic_checkpoint: CheckpointId = Field(None, title="Critic base model")  # None: the embedded model
    train_max_steps: TrainSteps = Field(50, title="SFT max steps")
    learning_rate: LearningRate = 2e-5

    def check(self) -> None:
        super().check()
        _require_sampling(self.k, self.temperature, "k self-play trials of a task")
        self.check_env_model()
