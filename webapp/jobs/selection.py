"""What a job works on: a list of trajectory ids, or the trajectory list's filter (frozen as the ids it matched).

The filter is the same one the trajectory list uses (project, task, source
model, outcome, reward range, termination, word search), validated by the same
form. Ids are resolved when the job is created, so a job re-run after a crash
sees the same trajectories even if more were imported meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webapp.jobs.configs import ConfigError
from webapp.trajectories import queries
from webapp.trajectories.forms import TrajectoryFilterForm
from webapp.trajectories.models import Trajectory

MAX_TRAJECTORIES = 10_000


@dataclass(frozen=True)
class Selection:
    trajectory_ids: tuple[int, ...] = ()
    filter: dict[str, Any] = field(default_factory=dict)  # the filter as given, kept for the record

    @property
    def empty(self) -> bool:
        return not self.trajectory_ids

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trajectory_ids": list(self.trajectory_ids)}
        if self.filter:
            out["filter"] = dict(self.filter)
        return out

    @classmethod
    def parse(cls, data: dict[str, Any], required: bool = False) -> Selection:
        if not isinstance(data, dict):
            raise ConfigError("selection", "expected an object with trajectory_ids or filter")
        unknown = sorted(set(data) - {"trajectory_ids", "filter", "limit"})
        if unknown:
            raise ConfigError(f"selection.{unknown[0]}", "not a selection field (trajectory_ids, filter, limit)")
        limit = data.get("limit", MAX_TRAJECTORIES)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TRAJECTORIES:
            raise ConfigError("selection.limit", f"must be a whole number between 1 and {MAX_TRAJECTORIES}")
        ids: list[int] = []
        raw_filter = data.get("filter") or {}
        if data.get("trajectory_ids"):
            raw = data["trajectory_ids"]
            if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i < 2**63
                                                    for i in raw):
                raise ConfigError("selection.trajectory_ids", "expected a list of trajectory ids")
            ids = list(dict.fromkeys(raw))[:limit]
            found = set(Trajectory.objects.filter(pk__in=ids).values_list("pk", flat=True))
            missing = [i for i in ids if i not in found]
            if missing:
                raise ConfigError("selection.trajectory_ids", f"no trajectory with id {missing[0]}")
        elif raw_filter:
            ids = _resolve_filter(raw_filter, limit)
            if not ids:
                raise ConfigError("selection.filter", "the filter matches no trajectory")
        if required and not ids:
            raise ConfigError("selection", "choose trajectories: a list of ids or a filter")
        return cls(tuple(ids), dict(raw_filter))


def _resolve_filter(raw: dict[str, Any], limit: int) -> list[int]:
    if not isinstance(raw, dict):
        raise ConfigError("selection.filter", "expected an object of trajectory list filters")
    form = TrajectoryFilterForm({k: v for k, v in raw.items() if v not in (None, "")})
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        raise ConfigError(f"selection.filter.{name}", "; ".join(errors))
    return list(queries.filtered(form.cleaned_data).order_by("id").values_list("pk", flat=True)[:limit])
