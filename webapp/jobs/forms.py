"""Launch forms, one per job kind: the fields a researcher sets, turned into the kind's config.

The fields are derived from the kind's config (``webapp.jobs.form_fields``); the config
checks ranges and combinations again, and its ConfigError is put back on the field it names.
The selection is a list of trajectory ids, or the trajectory list's filter
carried over as a query string ("launch from here").
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from django import forms

from webapp.jobs.configs import MAX_ITEMS, JobConfig
from webapp.jobs.form_fields import config_data, form_fields, set_endpoint_choices
from webapp.jobs.kinds import JOB_KINDS, JobKind

FILTER_KEYS = ("project", "task", "source_model", "outcome", "reward_min", "reward_max", "termination_reason", "q")


class LaunchForm(forms.Form):
    """A kind's launch form: the selection (if the kind takes one) and the config's fields (``form_fields``)."""

    config_class: type[JobConfig]

    trajectory_ids = forms.CharField(required=False, label="Trajectory ids",
                                     help_text="comma-separated; or launch from a filtered trajectory list",
                                     widget=forms.TextInput(attrs={"size": 40}))
    filter = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        config = self.config_class
        if not (config.NEEDS_SELECTION or config.OPTIONAL_SELECTION):
            del self.fields["trajectory_ids"], self.fields["filter"]
        self.fields.update(form_fields(config))
        set_endpoint_choices(self.fields)

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
        return config_data(self.config_class, self.cleaned_data)

    def selection(self) -> dict[str, Any]:
        if "trajectory_ids" not in self.fields:
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


def launch_form(kind: JobKind) -> type[LaunchForm]:
    return type(f"{kind.config.__name__}Form", (LaunchForm,), {"config_class": kind.config})


# a launch page per kind users launch from the Jobs page (evaluate-critic is launched from its snapshot's page)
FORMS: dict[str, type[LaunchForm]] = {name: launch_form(k) for name, k in JOB_KINDS.items()
                                     if k.launchable and k.launch_page}


class JobFilterForm(forms.Form):
    kind = forms.ChoiceField(required=False, choices=[("", "Any kind"), *((k, k) for k in JOB_KINDS)])
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), ("queued", "queued"),
                                                        ("running", "running"), ("succeeded", "succeeded"),
                                                        ("failed", "failed"), ("cancelled", "cancelled")])
    user = forms.CharField(required=False, max_length=150)
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
