"""Forms: a dataset's definition, a build, an export, a training or evaluation launched from a snapshot."""

from __future__ import annotations

from django import forms

from webapp.annotation.models import VERDICTS
from webapp.annotation.services.queues import DISAGREEMENTS
from webapp.annotation.services.queues import OUTCOMES as TRAJ_OUTCOMES
from webapp.datasets.kinds import KIND_LABELS, KINDS
from webapp.datasets.services.exports import FORMAT_LABELS
from webapp.jobs.configs import EvaluateCriticJob, JobConfig, TrainCriticJob
from webapp.jobs.form_fields import config_data, form_fields
from webapp.trajectories.models import Project


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=150)
    kind = forms.ChoiceField(choices=[(k, KIND_LABELS[k]) for k in KINDS])
    project = forms.ModelChoiceField(queryset=Project.objects.all(), to_field_name="slug")
    description = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))
    outcome = forms.ChoiceField(choices=[(o, o) for o in TRAJ_OUTCOMES], initial="any", label="Trajectory outcome")
    min_reward = forms.FloatField(required=False)
    max_reward = forms.FloatField(required=False)
    verdict = forms.ChoiceField(required=False, choices=[("", "any")] + [(v, v) for v in VERDICTS],
                                label="Critic verdict")
    disagreement = forms.ChoiceField(choices=[(d, d.replace("_", " ")) for d in DISAGREEMENTS], initial="any",
                                     label="Critic vs outcome")
    source_model = forms.CharField(required=False, max_length=200)
    sample = forms.IntegerField(required=False, min_value=1, max_value=1_000_000, label="Random sample of N steps")
    seed = forms.IntegerField(required=False, initial=0, min_value=0, label="Sample seed")
    include_submitted = forms.BooleanField(required=False, label="Use submitted (not yet accepted) corrections")
    include_model_critiques = forms.BooleanField(required=False, label="Use model critiques where nothing better "
                                                 "exists (flagged)")
    human_only = forms.BooleanField(required=False, label="Only steps a human corrected")
    only_human_accepted = forms.BooleanField(required=False, label="Distillation: only refined actions from "
                                             "accepted human corrections")
    only_changed = forms.BooleanField(required=False, label="Distillation: only refinements that change the action")
    skip_optimal = forms.BooleanField(required=False, label="Distillation: leave out steps judged optimal")
    train = forms.IntegerField(min_value=0, max_value=100, initial=80, label="Train %")
    validation = forms.IntegerField(min_value=0, max_value=100, initial=10, label="Validation %")
    test = forms.IntegerField(min_value=0, max_value=100, initial=10, label="Test %")
    split_seed = forms.IntegerField(min_value=0, initial=0)
    notes = forms.CharField(required=False, max_length=5000, label="Notes for v1",
                            widget=forms.Textarea(attrs={"rows": 2}))

    def spec(self) -> dict:
        d = self.cleaned_data
        flt = {"outcome": d["outcome"], "min_reward": d.get("min_reward"), "max_reward": d.get("max_reward"),
               "verdict": d.get("verdict") or "", "disagreement": d["disagreement"],
               "source_model": d.get("source_model") or "", "sample": d.get("sample"), "seed": d.get("seed") or 0}
        return {"filter": flt, **{k: bool(d.get(k)) for k in (
            "include_submitted", "include_model_critiques", "human_only", "only_human_accepted", "only_changed",
            "skip_optimal")}, "fractions": [d["train"], d["validation"], d["test"]], "split_seed": d["split_seed"]}


class BuildForm(forms.Form):
    notes = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))


class ExportForm(forms.Form):
    format = forms.ChoiceField(choices=list(FORMAT_LABELS.items()))
    split = forms.ChoiceField(required=False, choices=[("", "every split"), ("train", "train"),
                                                       ("validation", "validation"), ("test", "test")])


class SnapshotJobForm(forms.Form):
    """A job launched on a snapshot: a few of its kind's config fields, derived from the config."""

    config_class: type[JobConfig]
    names: tuple[str, ...]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields.update(form_fields(self.config_class, self.names))

    def config(self, snapshot_pk: int) -> dict:
        return {"snapshot": snapshot_pk, **config_data(self.config_class, self.cleaned_data)}


class TrainForm(SnapshotJobForm):
    config_class = TrainCriticJob  # distill-policy has the same fields
    names = ("checkpoint", "name", "max_steps", "learning_rate", "lora")


class EvaluateForm(SnapshotJobForm):
    config_class = EvaluateCriticJob
    names = ("checkpoint", "split", "max_steps")
