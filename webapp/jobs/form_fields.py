"""Django form fields derived from a job config's declared fields (``webapp.jobs.configs``): type, default,
range, choices and their labels, label (``title``) and help (``description``) are read from the pydantic
field, so a launch form cannot drift from what the job accepts. ``config_data`` turns a form's cleaned data
back into the config's JSON."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from django import forms
from django.db.models import Model

from nlac_core.backends import LOCAL_BACKENDS
from webapp.jobs import endpoints
from webapp.jobs.configs import CHECKPOINT, EMBEDDED, JobConfig, bound
from webapp.jobs.models import Checkpoint


def field_type(annotation: Any) -> tuple[Any, bool]:
    """The field's type without None, and whether None is allowed."""
    if get_origin(annotation) in (types.UnionType, Union):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(get_args(annotation))
    return annotation, False


def _max_length(info) -> int | None:
    return next((m.max_length for m in info.metadata if getattr(m, "max_length", None) is not None), None)


def form_field(config: type[JobConfig], name: str) -> forms.Field:
    info = config.model_fields[name]
    kind, _ = field_type(info.annotation)
    common = {"label": info.title, "help_text": info.description or ""}
    if CHECKPOINT in info.metadata:
        return forms.ModelChoiceField(queryset=Checkpoint.objects.all(), required=False, label=info.title,
                                      empty_label=info.description or EMBEDDED)
    if name == "endpoint":  # the admin's list, read when the form is made (``LaunchForm.__init__``)
        return forms.ChoiceField(required=False, choices=[], **common)
    if kind is bool:
        return forms.BooleanField(required=False, initial=info.default, **common)
    if get_origin(kind) is Literal:
        choices = [c for c in get_args(kind) if c]
        if name == "backend" and getattr(config, "LOCAL_MODEL", ""):
            choices = [c for c in choices if c in LOCAL_BACKENDS]
        names = (info.json_schema_extra or {}).get("choice_labels", {})
        return forms.ChoiceField(choices=[(c, names.get(c, c)) for c in choices], initial=info.default,
                                 required=info.is_required(), **common)
    # blank takes the config's default (``config_data``), or None where the field allows it
    limits = {"min_value": bound(config, name, "ge"), "max_value": bound(config, name, "le"),
              "required": info.is_required(), "initial": None if info.is_required() else info.default}
    if kind is int:
        return forms.IntegerField(**limits, **common)
    if kind is float:
        return forms.FloatField(**limits, **common)
    return forms.CharField(required=False, max_length=_max_length(info), initial=info.default or None, **common)


def form_fields(config: type[JobConfig], names=None) -> dict[str, forms.Field]:
    """The form fields of ``names`` (default: every field the launch form shows, see ``shown``)."""
    return {name: form_field(config, name) for name in (names if names is not None else shown(config))}


def shown(config: type[JobConfig]) -> list[str]:
    """The fields a launch form shows: all but the API-only ones (and the endpoint's, for a local-only kind)."""
    hidden = set(config.API_ONLY)
    if getattr(config, "LOCAL_MODEL", ""):
        hidden |= {"endpoint", "endpoint_model"}
    return [name for name in config.model_fields if name not in hidden]


def config_data(config: type[JobConfig], cleaned: dict[str, Any]) -> dict[str, Any]:
    """A form's cleaned values as the config's JSON: checkpoints by id; a blank field takes the config's default,
    except a blank field that may be None over a default that is not (no step limit: the epochs decide)."""
    data = {}
    for name, value in cleaned.items():
        if name not in config.model_fields:
            continue
        if isinstance(value, Model):
            value = value.pk
        if value is None or value == "":
            info = config.model_fields[name]
            if field_type(info.annotation)[1] and info.default is not None:
                data[name] = None
            continue
        data[name] = value
    return data


def set_endpoint_choices(fields: dict[str, forms.Field]) -> None:
    if "endpoint" in fields:  # read now: the admin's list, as this process has it
        fields["endpoint"].choices = [("", "–"), *((n, n) for n in endpoints.names())]
