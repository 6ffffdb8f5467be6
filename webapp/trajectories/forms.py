from __future__ import annotations

from django import forms
from django.conf import settings

from nlac_core.formats import FORMATS
from webapp.trajectories.models import Project
from webapp.trajectories.queries import SORTS
from webapp.trajectories.supervision import ARMS

_YES, _NO = ("1", "true", "on", "yes"), ("", "0", "false", "off", "no")


class TrajectoryFilterForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.all(), required=False, to_field_name="slug",
                                     empty_label="All projects")
    task = forms.CharField(required=False, max_length=200)
    source_model = forms.CharField(required=False, max_length=200, label="Source model")
    outcome = forms.ChoiceField(required=False, choices=[("", "Any outcome"), ("success", "Succeeded"),
                                                         ("failure", "Failed")])
    reward_min = forms.FloatField(required=False, label="Reward ≥")
    reward_max = forms.FloatField(required=False, label="Reward ≤")
    termination_reason = forms.CharField(required=False, max_length=100, label="Termination")
    q = forms.CharField(required=False, max_length=200, label="Search messages")
    interventions = forms.CharField(required=False, max_length=10, label="With interventions")
    arm = forms.ChoiceField(required=False, choices=[("", "Any arm")] + [(a, a) for a in ARMS])
    sort = forms.ChoiceField(required=False, choices=[(k, k.replace("_", " ")) for k in SORTS])
    cursor = forms.CharField(required=False, max_length=500, widget=forms.HiddenInput)

    def clean_q(self) -> str:
        return self.cleaned_data["q"].strip()

    def clean_interventions(self) -> bool:
        """A checkbox (``interventions=1``); also the booleans a job's JSON filter carries."""
        value = self.cleaned_data["interventions"].strip().lower()
        if value in _YES:
            return True
        if value in _NO:
            return False
        raise forms.ValidationError("expected 1 or 0")


class UploadForm(forms.Form):
    file = forms.FileField(allow_empty_file=True)  # an empty .jsonl is the export of an empty project
    project = forms.CharField(max_length=200, help_text="An existing project's name, or a new one.")
    format = forms.ChoiceField(required=False, choices=[("", "Detect automatically")] + [(n, n) for n in FORMATS])
    source_model = forms.CharField(required=False, max_length=200,
                                   help_text="Agent model name, when the file does not say. A name given here "
                                             "makes a different run; a tau-bench file's own name is only a label.")

    def clean_file(self):
        f = self.cleaned_data["file"]
        limit = settings.UPLOAD_MAX_BYTES
        if f.size > limit:
            raise forms.ValidationError(
                f"{f.name} is {f.size / 1e6:.1f} MB; uploads are limited to {limit / 1e6:.0f} MB. "
                "Import larger files with: python manage.py import_trajectories PATH --project NAME")
        if f.size == 0 and not f.name.endswith((".jsonl", ".ndjson")):
            raise forms.ValidationError(f"{f.name} is empty.")
        return f

    def clean_project(self) -> str:
        name = " ".join(self.cleaned_data["project"].split())
        if not name:
            raise forms.ValidationError("Give the project a name.")
        return name
