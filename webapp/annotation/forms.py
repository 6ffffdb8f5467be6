"""Forms: the editor, a queue's filter, a review decision. They validate; services write."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from nlac_core.formats.base import Context, FormatError, clean, loads
from webapp.accounts.roles import ANNOTATOR
from webapp.annotation.models import FIELDS, OUTCOMES, RATINGS, VERDICTS
from webapp.annotation.services.queues import DISAGREEMENTS, MAX_ITEMS, QueueSpec
from webapp.annotation.services.queues import OUTCOMES as TRAJ_OUTCOMES
from webapp.trajectories.models import Project

MAX_FIELD_CHARS = 20_000


def _choices(values, blank="—"):
    return [("", blank)] + [(v, v) for v in values]


class RevisionForm(forms.Form):
    base_revision = forms.IntegerField(required=False, widget=forms.HiddenInput)
    critique = forms.IntegerField(required=False, widget=forms.HiddenInput)
    annotation = forms.IntegerField(required=False, widget=forms.HiddenInput)
    queue_item = forms.IntegerField(required=False, widget=forms.HiddenInput)
    predicted_future = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, widget=forms.Textarea(
        attrs={"rows": 3}))
    predicted_outcome = forms.ChoiceField(required=False, choices=_choices(OUTCOMES))
    verdict = forms.ChoiceField(required=False, choices=_choices(VERDICTS))
    reasoning = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, widget=forms.Textarea(attrs={"rows": 3}))
    suggestion = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, widget=forms.Textarea(attrs={"rows": 2}))
    refined_content = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, label="Refined action: text",
                                      widget=forms.Textarea(attrs={"rows": 2}))
    refined_tool_calls = forms.CharField(
        required=False, max_length=MAX_FIELD_CHARS, label="Refined action: tool calls (JSON)",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '[{"name": "get_user_details", "arguments": {}}]'}))
    rating = forms.ChoiceField(required=False, choices=_choices(RATINGS), label="The model's critique is")
    comment = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, widget=forms.Textarea(attrs={"rows": 2}))
    skipped = forms.BooleanField(required=False, label="Skip this step")
    skip_reason = forms.CharField(required=False, max_length=2000)

    def clean_refined_tool_calls(self):
        text = (self.cleaned_data.get("refined_tool_calls") or "").strip()
        if not text:
            return []
        # the import formats' decoder and rules: nesting past MAX_DEPTH, NaN and 5,000-digit integers are
        # refused with the field named (json.loads raised RecursionError or ValueError: a 500)

        try:
            value = clean(loads(text, "tool calls", ""), Context("tool calls"))
        except FormatError as e:
            where = f" (at {e.field})" if e.field else ""
            raise forms.ValidationError(f"not usable JSON: {e.message}{where}") from None
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            raise forms.ValidationError("a list of tool calls, each {\"name\": ..., \"arguments\": {...}}")
        calls = []
        for i, call in enumerate(value):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"].strip():
                raise forms.ValidationError(f"tool call {i + 1}: needs a \"name\" string")
            arguments = call.get("arguments", {})
            if not isinstance(arguments, dict):
                raise forms.ValidationError(f"tool call {i + 1}: \"arguments\" must be an object")
            calls.append({"name": call["name"].strip(), "arguments": arguments})
        return calls

    def clean(self):
        data = super().clean()
        if data.get("skipped") and not (data.get("skip_reason") or "").strip():
            self.add_error("skip_reason", "say why the step is skipped")
        return data

    def revision_fields(self) -> dict:
        return {name: self.cleaned_data.get(name) if name != "skipped" else bool(self.cleaned_data.get(name))
                for name in FIELDS}


def raw_fields(post) -> dict:
    """What the user typed, as typed (for drafts and the conflict view, valid or not)."""
    kept = {}
    for name in FIELDS:
        if name == "skipped":
            kept[name] = bool(post.get(name))
        else:
            kept[name] = str(post.get(name, ""))[:MAX_FIELD_CHARS]
    return kept


class QueueForm(forms.Form):
    name = forms.CharField(max_length=200)
    project = forms.ModelChoiceField(queryset=Project.objects.all(), to_field_name="slug")
    outcome = forms.ChoiceField(choices=[(o, o) for o in TRAJ_OUTCOMES], initial="any",
                                label="Trajectory outcome")
    min_reward = forms.FloatField(required=False)
    max_reward = forms.FloatField(required=False)
    verdict = forms.ChoiceField(required=False, choices=_choices(VERDICTS, "any"), label="Critic verdict")
    parse_failures = forms.BooleanField(required=False, label="Only critiques that broke the format")
    disagreement = forms.ChoiceField(choices=[(d, d.replace("_", " ")) for d in DISAGREEMENTS], initial="any",
                                     label="Critic vs outcome")
    no_critique = forms.BooleanField(required=False, label="Only steps with no critique yet")
    sample = forms.IntegerField(required=False, min_value=1, max_value=MAX_ITEMS, label="Random sample of N")
    seed = forms.IntegerField(required=False, initial=0)
    overlap = forms.IntegerField(min_value=1, max_value=20, initial=1, label="Annotators per item")
    lease_minutes = forms.IntegerField(min_value=1, max_value=240, initial=10)
    assignees = forms.ModelMultipleChoiceField(queryset=get_user_model().objects.none(),
                                               widget=forms.CheckboxSelectMultiple)
    instructions = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["assignees"].queryset = get_user_model().objects.filter(groups__name=ANNOTATOR).order_by(
            "username")

    def spec(self) -> QueueSpec:
        d = self.cleaned_data
        return QueueSpec(outcome=d["outcome"], min_reward=d.get("min_reward"), max_reward=d.get("max_reward"),
                         verdict=d.get("verdict") or "", parse_failures=bool(d.get("parse_failures")),
                         disagreement=d["disagreement"], no_critique=bool(d.get("no_critique")),
                         sample=d.get("sample"), seed=d.get("seed") or 0)


class ReviewForm(forms.Form):
    revision = forms.IntegerField(widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=[("accept", "accept"), ("return", "return")])
    reason = forms.CharField(required=False, max_length=5000)


class NotesUploadForm(forms.Form):
    file = forms.FileField(help_text="CSV: simulation_id (or trajectory_id), note, and optionally step, author")
