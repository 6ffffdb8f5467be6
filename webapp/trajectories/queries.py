"""Read-side queries for the trajectory list: filters, sorts, keyset pagination.

Keyset, not OFFSET: page 5,000 costs what page 1 costs. The cursor is the last
row's (sort value, id), signed so that a hand-edited URL cannot inject values.
Only summary columns are selected; message bodies are never read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.db.models import F, Q, QuerySet

from webapp.trajectories import search
from webapp.trajectories.models import Project, Trajectory

PAGE_SIZE = 25
SEARCH_COUNT_CAP = 1000
LIST_COLUMNS = ("id", "project_id", "project__name", "project__slug", "task__external_id", "trial",
                "source_model", "reward", "success", "termination_reason", "n_messages", "n_steps", "preview",
                "error", "created_at")
# From Trajectory.meta (never the messages): the runtime critic's intervention count and the experiment arm.
META_COLUMNS = {"interventions": "meta__supervision__interventions", "arm": "meta__arm"}

# sort name -> (field, descending)
SORTS: dict[str, tuple[str, bool]] = {
    "newest": ("id", True),
    "oldest": ("id", False),
    "reward_desc": ("reward", True),
    "reward_asc": ("reward", False),
    "longest": ("n_messages", True),
    "shortest": ("n_messages", False),
}
_SIGNER = signing.Signer(salt="trajectory-list-cursor")


@dataclass
class Page:
    rows: list[dict[str, Any]]
    next_cursor: str | None
    count: int
    count_capped: bool


def filtered(params: dict[str, Any], base: QuerySet[Trajectory] | None = None) -> QuerySet[Trajectory]:
    """Apply the validated filter form's cleaned data to ``base`` (what the user may read: pass
    ``access.visible_trajectories(user)``; jobs select from every trajectory)."""
    qs = Trajectory.objects.all() if base is None else base
    if params.get("project"):
        qs = qs.filter(project=params["project"])
    if params.get("task"):
        qs = qs.filter(task__external_id=params["task"])
    if params.get("source_model"):
        qs = qs.filter(source_model=params["source_model"])
    if params.get("outcome") == "success":
        qs = qs.filter(success=True)
    elif params.get("outcome") == "failure":
        qs = qs.filter(success=False)
    if params.get("reward_min") is not None:
        qs = qs.filter(reward__gte=params["reward_min"])
    if params.get("reward_max") is not None:
        qs = qs.filter(reward__lte=params["reward_max"])
    if params.get("termination_reason"):
        qs = qs.filter(termination_reason=params["termination_reason"])
    if params.get("interventions"):
        # Trajectory.meta["supervision"]["interventions"]: a JSON key lookup that SQLite and PostgreSQL both
        # compare as a number (no message is read).
        qs = qs.filter(meta__supervision__interventions__gt=0)
    if params.get("arm"):
        qs = qs.filter(meta__arm=params["arm"])
    if params.get("q"):
        qs = search.matching(qs, params["q"])
    return qs


def encode_cursor(sort: str, row: dict[str, Any]) -> str:
    field, _ = SORTS[sort]
    return _SIGNER.sign_object([sort, row[field], row["id"]])


def decode_cursor(sort: str, cursor: str) -> tuple[Any, int] | None:
    try:
        cursor_sort, value, last_id = _SIGNER.unsign_object(cursor)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if cursor_sort != sort or not isinstance(last_id, int):
        return None
    return value, last_id


def _after(field: str, desc: bool, value: Any, last_id: int) -> Q:
    """Rows strictly after (value, id) in the sort order. NULL rewards sort last either way."""
    op = "lt" if desc else "gt"
    if field == "id":
        return Q(**{f"id__{op}": last_id})
    if value is None:
        return Q(**{f"{field}__isnull": True, f"id__{op}": last_id})
    return (Q(**{f"{field}__{op}": value}) | Q(**{field: value, f"id__{op}": last_id})
            | Q(**{f"{field}__isnull": True}))


def page(params: dict[str, Any], sort: str = "newest", cursor: str | None = None, *,
         base: QuerySet[Trajectory] | None = None) -> Page:
    sort = sort if sort in SORTS else "newest"
    field, desc = SORTS[sort]
    qs = filtered(params, base)
    if params.get("q"):
        count = qs.order_by()[: SEARCH_COUNT_CAP + 1].count()
        capped = count > SEARCH_COUNT_CAP
        count = min(count, SEARCH_COUNT_CAP)
    else:
        count, capped = qs.count(), False
    if cursor:
        decoded = decode_cursor(sort, cursor)
        if decoded is not None:
            qs = qs.filter(_after(field, desc, *decoded))
    if field == "id":
        order = ["-id" if desc else "id"]
    else:
        key = F(field).desc(nulls_last=True) if desc else F(field).asc(nulls_last=True)
        order = [key, "-id" if desc else "id"]
    rows = [_with_meta(r) for r in qs.order_by(*order).values(*LIST_COLUMNS, *META_COLUMNS.values())[: PAGE_SIZE + 1]]
    next_cursor = encode_cursor(sort, rows[PAGE_SIZE - 1]) if len(rows) > PAGE_SIZE else None
    return Page(rows=rows[:PAGE_SIZE], next_cursor=next_cursor, count=count, count_capped=capped)


def _with_meta(row: dict[str, Any]) -> dict[str, Any]:
    """Rename the JSON keys a row was read with, keeping only values of the expected type (meta comes from
    files)."""
    interventions = row.pop(META_COLUMNS["interventions"])
    arm = row.pop(META_COLUMNS["arm"])
    row["interventions"] = interventions if isinstance(interventions, int) and not isinstance(interventions, bool) \
        else None
    row["arm"] = arm if isinstance(arm, str) else ""
    return row


def facet_values_of(trajectories: QuerySet, project: Project | None, fields: tuple[str, ...],
                    limit: int = 200) -> dict[str, list[str]]:
    """Filter choices from the given trajectories themselves (a user who reads only some of a project: few
    rows), in one query of the distinct combinations."""
    if project is not None:
        trajectories = trajectories.filter(project=project)
    chosen: dict[str, set[str]] = {f: set() for f in fields}
    for row in trajectories.order_by().values_list(*fields).distinct()[:limit * limit]:
        for f, value in zip(fields, row, strict=True):
            if value and len(chosen[f]) < limit:
                chosen[f].add(value)
    return {f: sorted(values) for f, values in chosen.items()}


def facet_values(project: Project | None, fields: tuple[str, ...],
                 projects: QuerySet[Project] | None = None) -> dict[str, list[str]]:
    """Filter choices per field, from the cached per-project facets (never a DISTINCT scan
    per request): one project's, or the union over ``projects`` (the ones the user reads) in one query."""
    if project is None:
        projects = (Project.objects.all() if projects is None else projects).only("facets")
    else:
        projects = [project]
    chosen: dict[str, set[str]] = {f: set() for f in fields}
    for p in projects:
        for f in fields:
            chosen[f].update((p.facets or {}).get(f, []))
    return {f: sorted(values) for f, values in chosen.items()}
