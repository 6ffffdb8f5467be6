"""What a dataset holds: a kind, a filter over the project's steps (the annotation queues' filter) and the
options of its kind, checked before anything is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from nlac_core.datasets import check_fractions
from webapp.annotation.services.queues import QueueError, QueueSpec
from webapp.datasets.kinds import KINDS
from webapp.errors import FieldError

SpecError = FieldError  # this app's name for the one field error (webapp.errors)


@dataclass(frozen=True)
class DatasetSpec:
    filter: dict[str, Any] = field(default_factory=dict)  # QueueSpec fields: outcome, reward range, verdict...
    # critic targets and runtime critic: which sources beyond gold revisions and Bellman targets
    include_submitted: bool = False  # annotators' submitted (not yet accepted) revisions
    include_model_critiques: bool = False  # model critiques where nothing better exists (flagged)
    human_only: bool = False  # only steps a human corrected
    # distillation
    only_human_accepted: bool = False  # only refined actions from accepted (gold) human revisions
    only_changed: bool = False  # only refinements that differ from the original action
    skip_optimal: bool = False  # leave out steps whose critique said the action was already optimal
    # splits: by task, seeded
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    split_seed: int = 0
    max_state_chars: int = 2000

    def step_filter(self) -> QueueSpec:
        return QueueSpec(**self.filter)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fractions"] = list(self.fractions)
        return out

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> DatasetSpec:
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(unknown[0], f"not a dataset setting (known: {', '.join(sorted(known))})")
        flt = data.get("filter") or {}
        if not isinstance(flt, dict):
            raise SpecError("filter", "expected an object of step filters")
        step_fields = {f.name for f in fields(QueueSpec)} - {"extra"}
        bad = sorted(set(flt) - step_fields)
        if bad:
            raise SpecError(f"filter.{bad[0]}", f"not a step filter (known: {', '.join(sorted(step_fields))})")
        types = {"outcome": str, "verdict": str, "disagreement": str, "source_model": str, "parse_failures": bool,
                 "no_critique": bool, "seed": int, "sample": (int, type(None)), "min_reward": (int, float, type(None)),
                 "max_reward": (int, float, type(None))}
        for name, value in flt.items():
            wanted = types[name] if isinstance(types[name], tuple) else (types[name],)
            if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
                raise SpecError(f"filter.{name}", f"expected {_kind(wanted)}, got {value!r}")
        if isinstance(flt.get("source_model"), str) and len(flt["source_model"]) > 200:
            raise SpecError("filter.source_model", "at most 200 characters")
        try:
            QueueSpec(**flt).validate()
        except QueueError as exc:
            raise SpecError(f"filter.{exc.field}", exc.message) from None
        except TypeError as exc:
            raise SpecError("filter", str(exc)) from None
        for name in ("include_submitted", "include_model_critiques", "human_only", "only_human_accepted",
                     "only_changed", "skip_optimal"):
            if name in data and not isinstance(data[name], bool):
                raise SpecError(name, "expected true or false")
        try:
            data["fractions"] = tuple(check_fractions(tuple(data.get("fractions", (0.8, 0.1, 0.1)))))
        except (TypeError, ValueError) as exc:
            raise SpecError("fractions", str(exc).removeprefix("split fractions: ")) from None
        for name, low, high in (("split_seed", 0, 2**31 - 1), ("max_state_chars", 200, 100_000)):
            value = data.get(name, 0 if name == "split_seed" else 2000)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise SpecError(name, f"a whole number between {low} and {high}")
        return cls(**{**data, "filter": dict(flt)})


def _kind(wanted) -> str:
    names = {str: "a string", bool: "true or false", int: "a whole number", float: "a number", type(None): "null"}
    return " or ".join(dict.fromkeys(names[t] for t in wanted if not (t is int and float in wanted)))


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise SpecError("kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    return kind
