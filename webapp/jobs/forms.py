"""Launch forms, one per job kind: the fields a researcher sets, turned into the kind's config.

Forms check types and shapes; ranges and combinations are the config classes'
(``webapp.jobs.configs``), whose ConfigError is put back on the field it names.
The selection is a list of trajectory ids, or the trajectory list's filter
carried over as a query string ("launch from here").
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from django import forms

from webapp.jobs import endpoints
from webapp.jobs.configs import BACKENDS, CRITIQUE_MODES, ENVS, MAX_ITEMS
from webapp.jobs.kinds import JOB_KINDS
from webapp.jobs.models import Checkpoint

FILTER_KEYS = ("project", "task", "source_model", "outcome", "reward_min", "reward_max", "termination_reason", "q")


class LaunchForm(forms.Form):
    KIND = ""
    SELECTION = True  # the kind works on chosen trajectories
    MODEL = True  # the kind runs a model (backend, checkpoint, endpoint, batch size)
    KEEP: tuple[str, ...] = ()  # model fields a kind without a backend choice still has (its own version)

    trajectory_ids = forms.CharField(required=False, label="Trajectory ids",
                                     help_text="comma-separated; or launch from a filtered trajectory list",
                                     widget=forms.TextInput(attrs={"size": 40}))
    filter = forms.CharField(required=False, widget=forms.HiddenInput)

    backend = forms.ChoiceField(choices=[(b, b) for b in BACKENDS], initial="hf")
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct")
    endpoint_model = forms.CharField(required=False, max_length=200, label="Endpoint model (openai)")
    endpoint = forms.ChoiceField(required=False, label="Endpoint (openai)",
                                 help_text="one of the endpoints the admin configured (NLAC_OPENAI_ENDPOINTS)")
    batch_size = forms.IntegerField(initial=16, min_value=1, max_value=1024)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not self.SELECTION:
            del self.fields["trajectory_ids"], self.fields["filter"]
        if not self.MODEL:
            for name in ("backend", "checkpoint", "endpoint_model", "endpoint", "batch_size"):
                if name not in self.KEEP:
                    del self.fields[name]
        if "endpoint" in self.fields:  # read now: the admin's list, as this process has it
            self.fields["endpoint"].choices = [("", "–"), *((n, n) for n in endpoints.names())]

    def clean_trajectory_ids(self) -> list[int]:
        raw = self.cleaned_data.get("trajectory_ids") or ""
        try:
            ids = [int(part) for part in raw.replace(" ", ",").split(",") if part.strip()]
        except ValueError:
            raise forms.ValidationError("expected trajectory ids separated by commas, like 12, 15, 40") from None
        if len(ids) > MAX_ITEMS:
            raise forms.ValidationError(f"at most {MAX_ITEMS} ids")
        if any(not 1 <= i < 2**63 for i in ids):
            raise forms.ValidationError("trajectory ids are positive whole numbers below 2^63")
        return ids

    def clean_filter(self) -> dict[str, str]:
        raw = self.cleaned_data.get("filter") or ""
        return {k: v for k, v in parse_qsl(raw) if k in FILTER_KEYS and v}

    def config(self) -> dict[str, Any]:
        data = {k: v for k, v in self.cleaned_data.items() if k not in ("trajectory_ids", "filter")}
        if "checkpoint" in data:
            data["checkpoint"] = data["checkpoint"].pk if data["checkpoint"] else None
        return {k: v for k, v in data.items() if v is not None and v != ""}

    def selection(self) -> dict[str, Any]:
        if not self.SELECTION:
            return {}
        if self.cleaned_data.get("trajectory_ids"):
            return {"trajectory_ids": self.cleaned_data["trajectory_ids"]}
        if self.cleaned_data.get("filter"):
            return {"filter": self.cleaned_data["filter"]}
        return {}

    def field_for(self, config_field: str) -> str | None:
        """The form field a ConfigError's field belongs to (None: a form-wide error)."""
        name = config_field.split(".")[0]
        if name == "selection":
            return "trajectory_ids"
        return name if name in self.fields else None


class CritiqueForm(LaunchForm):
    KIND = "critique"
    steps = forms.CharField(initial="all", max_length=200, help_text="all, first, last, or step numbers like 0,2,-1")
    max_steps = forms.IntegerField(initial=200, min_value=1, max_value=MAX_ITEMS)
    k = forms.IntegerField(initial=1, min_value=1, max_value=16, label="k futures")
    mode = forms.ChoiceField(choices=[(m, m) for m in CRITIQUE_MODES], initial="sectioned")
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    seed = forms.IntegerField(initial=0, min_value=0)
    chunk_size = forms.IntegerField(initial=8, min_value=1, max_value=256, help_text="steps per committed chunk")
    calibrate_verdicts = forms.BooleanField(initial=True, required=False)
    calibrate_outcome = forms.BooleanField(initial=True, required=False, label="Calibrated P(success)",
                                           help_text="through the checkpoint's outcome calibration, if it has one")


class RolloutForm(LaunchForm):
    KIND = "rollout"
    SELECTION = False
    env = forms.ChoiceField(choices=[(e, e) for e in ENVS], initial="twenty_questions", label="Environment")
    split = forms.CharField(required=False, max_length=50, help_text="20 Questions and MATH: train, test, all; "
                                                                      "tool use: graded, base, all, synthetic_train, "
                                                                      "synthetic_test (evaluate: default test)")
    tasks = forms.IntegerField(initial=4, min_value=1, max_value=10_000)
    trials = forms.IntegerField(initial=1, min_value=1, max_value=64)
    max_turns = forms.IntegerField(required=False, min_value=1, max_value=1000)
    max_new_tokens = forms.IntegerField(required=False, min_value=1, max_value=4096)
    temperature = forms.FloatField(initial=0.7, min_value=0.0, max_value=2.0)
    seed = forms.IntegerField(initial=0, min_value=0)
    project = forms.CharField(required=False, max_length=200, help_text="where the episodes go "
                                                                        "(default: '<env> rollouts')")


class BackupForm(LaunchForm):
    KIND = "backup"
    target_checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                               empty_label="the policy checkpoint's EMA twin, else the policy",
                                               label="Target network")
    next_action = forms.ChoiceField(choices=[("policy", "sampled from the policy"), ("data", "as recorded")],
                                    initial="policy", label="Next action a_t+1")
    steps = forms.CharField(initial="all", max_length=200, help_text="all, first, last, or step numbers like 0,2,-1")
    max_steps = forms.IntegerField(initial=200, min_value=1, max_value=MAX_ITEMS)
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    seed = forms.IntegerField(initial=0, min_value=0)
    chunk_size = forms.IntegerField(initial=8, min_value=1, max_value=256)

    def config(self) -> dict[str, Any]:
        data = super().config()
        if "target_checkpoint" in data:
            data["target_checkpoint"] = data["target_checkpoint"].pk
        return data


class EvaluateForm(RolloutForm):
    KIND = "evaluate"
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    project = forms.CharField(required=False, max_length=200, help_text="where the episodes go "
                                                                        "(default: 'evaluations')")


class TrainCriticForm(LaunchForm):
    KIND = "train-critic"
    MODEL = False
    KEEP = ("checkpoint",)
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct", label="Base checkpoint")
    source = forms.ChoiceField(choices=[("targets", "Bellman targets (successor SFT)"),
                                        ("critiques", "model critiques")], initial="targets")
    name = forms.CharField(required=False, max_length=150, help_text="of the new checkpoint")
    max_steps = forms.IntegerField(required=False, initial=50, min_value=1)
    epochs = forms.FloatField(initial=1.0, min_value=0.01)
    learning_rate = forms.FloatField(initial=2e-5, min_value=1e-8, max_value=1.0)
    per_device_batch_size = forms.IntegerField(initial=2, min_value=1, max_value=512, label="Batch size")
    max_length = forms.IntegerField(initial=1024, min_value=32, max_value=32_768)
    lora = forms.BooleanField(required=False, label="LoRA")
    lora_r = forms.IntegerField(initial=16, min_value=1, max_value=1024, label="LoRA rank")
    seed = forms.IntegerField(initial=0, min_value=0)
    outcome_target = forms.ChoiceField(
        choices=[("sample", "sampled from P(success), seeded per step"),
                 ("threshold", "the likelier word (P >= 0.5: success)")], initial="sample", required=False,
        label="Target OUTCOME",
        help_text="how a Bellman target's predicted P(success) becomes the OUTCOME word the critic learns")

    def config(self) -> dict[str, Any]:
        data = {k: v for k, v in self.cleaned_data.items() if k not in ("trajectory_ids", "filter")}
        data["checkpoint"] = data["checkpoint"].pk if data.get("checkpoint") else None
        out = {k: v for k, v in data.items() if v is not None and v != ""}
        out["checkpoint"] = data["checkpoint"]
        out["max_steps"] = data.get("max_steps")  # blank: no step limit, the epochs decide
        return out


class RefineForm(LaunchForm):
    KIND = "refine"
    critique_job = forms.IntegerField(required=False, min_value=1, help_text="refine from this critique job's "
                                                                             "critiques (default: the newest)")
    rounds = forms.IntegerField(initial=1, min_value=1, max_value=8, label="m rounds")
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    seed = forms.IntegerField(initial=0, min_value=0)
    chunk_size = forms.IntegerField(initial=8, min_value=1, max_value=256)
    refine_optimal = forms.BooleanField(required=False, label="Also rewrite steps the critique judged optimal",
                                        help_text="by default they keep their action (no refine call)")


class DistillPolicyForm(TrainCriticForm):
    KIND = "distill-policy"
    source = forms.ChoiceField(choices=[("refinements", "refined actions")], initial="refinements")
    only_changed = forms.BooleanField(required=False, initial=True, label="Only refinements that change the action")
    skip_optimal = forms.BooleanField(required=False, label="Leave out steps critiqued as optimal")
    outcome_target = None  # a policy learns actions, not outcomes


class NlacIterationForm(LaunchForm):
    KIND = "nlac-iteration"
    SELECTION = False
    MODEL = False
    KEEP = ("checkpoint",)
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct", label="Online model")
    target_checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                               empty_label="its EMA twin, else a copy of it", label="Target network")
    env = forms.ChoiceField(choices=[(e, e) for e in ENVS], initial="twenty_questions", label="Environment")
    split = forms.CharField(required=False, max_length=50, help_text="the tasks it trains on (default: train; "
                                                                      "tool use: synthetic_train)")
    eval_split = forms.CharField(required=False, max_length=50, help_text="held out for scoring (default: test; "
                                                                           "tool use: synthetic_test)")
    tasks = forms.IntegerField(initial=4, min_value=1, max_value=10_000)
    trials = forms.IntegerField(initial=1, min_value=1, max_value=64)
    max_turns = forms.IntegerField(required=False, min_value=1, max_value=1000)
    temperature = forms.FloatField(initial=0.7, min_value=0.0, max_value=2.0, label="Rollout temperature")
    refine_rounds = forms.IntegerField(initial=1, min_value=1, max_value=8, label="m refinement rounds")
    tau = forms.FloatField(initial=0.05, min_value=0.0, max_value=1.0, label="EMA tau")
    target_schedule = forms.ChoiceField(choices=[("polyak", "Polyak: average with tau each iteration"),
                                                 ("hard", "hard copy every N iterations")], initial="polyak")
    target_every = forms.IntegerField(initial=1, min_value=1, max_value=1000, label="N (hard copy)")
    outcome_target = TrainCriticForm.base_fields["outcome_target"]
    replay_size = forms.IntegerField(initial=64, min_value=0, max_value=MAX_ITEMS, label="Replay: transitions",
                                     help_text="backed up per iteration, fresh and from the project's stored "
                                               "trajectories (0: the fresh rollout alone)")
    fresh_fraction = forms.FloatField(initial=0.5, min_value=0.0, max_value=1.0, label="Replay: fresh share")
    max_steps = forms.IntegerField(required=False, initial=20, min_value=1, label="SFT max steps")
    learning_rate = forms.FloatField(initial=2e-5, min_value=1e-8, max_value=1.0)
    per_device_batch_size = forms.IntegerField(initial=2, min_value=1, max_value=512, label="Batch size")
    max_length = forms.IntegerField(initial=1024, min_value=32, max_value=32_768)
    lora = forms.BooleanField(required=False, label="LoRA")
    seed = forms.IntegerField(initial=0, min_value=0)
    project = forms.CharField(required=False, max_length=200)

    def config(self) -> dict[str, Any]:
        data = {k: v for k, v in self.cleaned_data.items() if v is not None and v != ""}
        for name in ("checkpoint", "target_checkpoint"):
            data[name] = self.cleaned_data[name].pk if self.cleaned_data.get(name) else None
        data["max_steps"] = self.cleaned_data.get("max_steps")
        return data


class SupervisedRolloutForm(RolloutForm):
    KIND = "supervised-rollout"
    env = forms.ChoiceField(choices=[(e, e) for e in ENVS], initial="tool_use", label="Environment")
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct", label="Actor checkpoint")
    critic_backend = forms.ChoiceField(choices=[("hf", "hf"), ("vllm", "vllm")], initial="hf")
    critic_checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                               empty_label="embedded SmolLM2-135M-Instruct", label="Critic checkpoint")
    max_rounds = forms.IntegerField(initial=2, min_value=0, max_value=8, label="R revision rounds per step")
    max_interventions = forms.IntegerField(initial=4, min_value=0, max_value=100, label="I interventions per episode")
    where = forms.ChoiceField(choices=[("all", "every action"), ("state_changing", "state-changing tool calls only")],
                              initial="all", label="Check")
    feedback_tokens = forms.IntegerField(initial=64, min_value=4, max_value=512)
    calibrate = forms.BooleanField(required=False, initial=True, label="Calibrated decisions",
                                   help_text="scored against a content-free prompt (off: raw likelihood)")
    both_arms = forms.BooleanField(required=False, initial=True, label="Also run without the critic (baseline arm)")
    counterfactuals = forms.BooleanField(required=False, initial=True,
                                         label="Counterfactual re-runs (helpfulness, harmfulness)")
    forced_sample = forms.IntegerField(initial=10, min_value=0, max_value=MAX_ITEMS,
                                       label="Approved steps re-run with a forced intervention")
    project = forms.CharField(required=False, max_length=200, help_text="where the episodes go "
                                                                        "(default: '<env> supervised')")

    def config(self) -> dict[str, Any]:
        data = super().config()
        data["critic_checkpoint"] = data["critic_checkpoint"].pk if data.get("critic_checkpoint") else None
        for name in ("both_arms", "counterfactuals", "calibrate"):
            data[name] = bool(self.cleaned_data.get(name))
        return data


class ReplayCriticForm(LaunchForm):
    KIND = "replay-critic"
    backend = forms.ChoiceField(choices=[("hf", "hf"), ("vllm", "vllm")], initial="hf")
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct", label="Critic checkpoint")
    steps = forms.CharField(initial="all", max_length=200, help_text="all, first, last, or step numbers like 0,2,-1")
    max_steps = forms.IntegerField(initial=200, min_value=1, max_value=MAX_ITEMS)
    where = forms.ChoiceField(choices=[("all", "every action"), ("state_changing", "state-changing tool calls only")],
                              initial="all", label="Judge")
    feedback_tokens = forms.IntegerField(initial=64, min_value=4, max_value=512)
    calibrate = forms.BooleanField(required=False, initial=True, label="Calibrated decisions",
                                   help_text="scored against a content-free prompt (off: raw likelihood)")
    chunk_size = forms.IntegerField(initial=8, min_value=1, max_value=256)


class CriticDataForm(LaunchForm):
    KIND = "critic-data"
    SELECTION = True  # optional: recorded episodes (an imported run) instead of self-play
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                        empty_label="embedded SmolLM2-135M-Instruct", label="Actor checkpoint")
    split = forms.CharField(initial="synthetic_train", max_length=50, help_text="the training tasks")
    tasks = forms.IntegerField(initial=20, min_value=1, max_value=10_000)
    k = forms.IntegerField(initial=4, min_value=1, max_value=64, label="k self-play trials per task")
    max_turns = forms.IntegerField(required=False, initial=10, min_value=1, max_value=1000)
    temperature = forms.FloatField(initial=0.7, min_value=0.0, max_value=2.0)
    seed = forms.IntegerField(initial=0, min_value=0)
    approve_ratio = forms.FloatField(initial=1.0, min_value=0.0, max_value=100.0,
                                     label="Approve targets per intervene target")
    at_turn_cap = forms.BooleanField(required=False, label="Place the error of an episode cut at the turn cap at "
                                                           "its last step (a weaker label)")
    validate_feedback = forms.BooleanField(required=False, label="Keep an intervene target only if re-running with "
                                                                 "its feedback succeeds")
    project = forms.CharField(required=False, max_length=200, help_text="default: '<env> critic data'")
    dataset = forms.CharField(required=False, max_length=200, help_text="default: 'runtime critic from job N'")
    train = forms.BooleanField(required=False, initial=True, label="Train a critic on the snapshot")
    critic_checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False,
                                               empty_label="embedded SmolLM2-135M-Instruct", label="Critic base model")
    train_max_steps = forms.IntegerField(required=False, initial=50, min_value=1, label="SFT max steps")
    learning_rate = forms.FloatField(initial=2e-5, min_value=1e-8, max_value=1.0)

    def config(self) -> dict[str, Any]:
        data = super().config()
        data["critic_checkpoint"] = data["critic_checkpoint"].pk if data.get("critic_checkpoint") else None
        for name in ("at_turn_cap", "validate_feedback", "train"):
            data[name] = bool(self.cleaned_data.get(name))
        data["train_max_steps"] = self.cleaned_data.get("train_max_steps")
        return data


class ExportForm(LaunchForm):
    KIND = "export"
    MODEL = False


class CalibrateOutcomeForm(LaunchForm):
    KIND = "calibrate-outcome"
    backend = forms.ChoiceField(choices=[("hf", "hf"), ("vllm", "vllm")], initial="hf")
    steps = forms.CharField(initial="all", max_length=200, help_text="all, first, last, or step numbers like 1,-2")
    max_steps = forms.IntegerField(initial=400, min_value=1, max_value=MAX_ITEMS)
    held_out = forms.FloatField(initial=0.5, min_value=0.05, max_value=0.95, label="Held-out share of tasks")
    seed = forms.IntegerField(initial=0, min_value=0)
    chunk_size = forms.IntegerField(initial=16, min_value=1, max_value=256)


FORMS: dict[str, type[LaunchForm]] = {f.KIND: f for f in (CritiqueForm, BackupForm, RefineForm, RolloutForm,
                                                           EvaluateForm, TrainCriticForm, DistillPolicyForm,
                                                           NlacIterationForm, ExportForm, SupervisedRolloutForm,
                                                           ReplayCriticForm, CriticDataForm, CalibrateOutcomeForm)}


class JobFilterForm(forms.Form):
    kind = forms.ChoiceField(required=False, choices=[("", "Any kind"), *((k, k) for k in JOB_KINDS)])
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), ("queued", "queued"),
                                                        ("running", "running"), ("succeeded", "succeeded"),
                                                        ("failed", "failed"), ("cancelled", "cancelled")])
    user = forms.CharField(required=False, max_length=150)
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
