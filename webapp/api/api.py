"""The REST API (django-ninja): the OpenAPI schema at /api/openapi.json, interactive docs at /api/docs.

Authentication: ``Authorization: Bearer <token>`` with a token made on the account's token page (or the
browser session, CSRF-checked, for the docs page). Permissions are the UI's: every handler asks the same
access module its page asks. Errors are ``{"detail": ..., "field": ...}`` with a 4xx status.
Handlers are thin: they validate, call the service the UI calls, and shape the answer.
"""

from __future__ import annotations

from typing import Annotated

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import File, Form, NinjaAPI, Path, Query, Router, UploadedFile
from ninja.errors import AuthenticationError
from pydantic import Field

from webapp.api import schemas as s
from webapp.api.auth import SessionAuth, TokenAuth
from webapp.api.docs_access import docs_login_required
from webapp.datasets import access as dataset_access
from webapp.datasets.models import Dataset, Snapshot
from webapp.datasets.services import datasets as service
from webapp.datasets.services.build import do_settle
from webapp.datasets.services.exports import do_settle_exports, file_name
from webapp.datasets.services.lineage import checkpoint_lineage
from webapp.jobs import access as job_access
from webapp.jobs.kinds import JOB_KINDS
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.services import lifecycle
from webapp.trajectories import access, queries
from webapp.trajectories.forms import TrajectoryFilterForm, UploadForm
from webapp.trajectories.models import Project
from webapp.trajectories.services.uploads import do_receive_upload

MAX_ID = s.MAX_ID
Id = Annotated[int, Path(ge=1, le=MAX_ID, description="an id")]
StepNo = Annotated[int, Path(ge=0, le=1_000_000, description="the step number among agent steps")]


api = NinjaAPI(title="NLAC Studio API", version="1", urls_namespace="api", auth=[TokenAuth(), SessionAuth()],
               docs_decorator=docs_login_required,  # schema and docs: a login (or a token for the schema)
               description="Trajectories and steps, imports, dataset snapshots and their exports, jobs, "
                           "checkpoints and evaluations. Same permissions as the web UI.")


def _error(request, status: int, detail: str, field: str | None = None):
    return api.create_response(request, {"detail": detail, "field": field}, status=status)


@api.exception_handler(AuthenticationError)
def _unauthorized(request, exc):
    """Reads and writes alike, whatever the method: no live token and no session."""
    response = _error(request, 401, "authentication required: send Authorization: Bearer <token> (a live API token)")
    response["WWW-Authenticate"] = "Bearer"
    return response


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return _error(request, 403, "your role may not do this")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _error(request, 404, str(exc) or "not found")


def _bad_request(request, exc):
    field = getattr(exc, "field", None)
    message = getattr(exc, "message", None) or str(exc)
    return _error(request, 400, f"{field}: {message}" if field and not message.startswith(field) else message,
                  field)


for _cls in ("webapp.errors.FieldError", "webapp.datasets.services.exports.ExportError",
             "webapp.datasets.services.build.BuildError"):
    _module, _name = _cls.rsplit(".", 1)
    api.add_exception_handler(getattr(__import__(_module, fromlist=[_name]), _name), _bad_request)

ERRORS = {400: s.Error, 401: s.Error, 403: s.Error, 404: s.Error}


# -- trajectories ---------------------------------------------------------------------------------------------

trajectories = Router(tags=["trajectories"])


@trajectories.get("/projects", response={200: list[s.ProjectOut], **ERRORS})
def list_projects(request):
    projects = list(access.visible_projects(request.user).order_by("name")[:1000])
    if access.reads_everything(request.user):
        return projects
    # an annotator: counts of what they read, never the whole project's figures
    counts = {row["project_id"]: row for row in access.visible_trajectories(request.user).order_by()
              .values("project_id").annotate(n=Count("id"), tasks=Count("task_id", distinct=True))}
    return [{"id": p.pk, "name": p.name, "slug": p.slug, "domain": p.domain,
             "n_trajectories": counts.get(p.pk, {}).get("n", 0), "n_tasks": counts.get(p.pk, {}).get("tasks", 0),
             "mean_reward": None} for p in projects]


class TrajectoryFilter(s.Schema):
    project: str = Field("", max_length=200, description="a project's slug")
    task: str = Field("", max_length=200)
    source_model: str = Field("", max_length=200)
    outcome: str = Field("", pattern="^(|success|failure)$")
    reward_min: float | None = Field(None, ge=-1e12, le=1e12)
    reward_max: float | None = Field(None, ge=-1e12, le=1e12)
    termination_reason: str = Field("", max_length=100)
    q: str = Field("", max_length=200, description="words in the messages")
    sort: str = Field("newest", pattern="^(newest|oldest|reward|reward_desc|longest|shortest)$")
    cursor: str = Field("", max_length=500, description="next_cursor of the previous page")


@trajectories.get("/trajectories", response={200: s.TrajectoryPage, **ERRORS})
def list_trajectories(request, filters: Query[TrajectoryFilter]):
    """25 trajectories a page (keyset-paginated: pass ``next_cursor`` back as ``cursor``)."""
    visible = access.visible_trajectories(request.user)
    raw = {k: v for k, v in filters.dict().items() if v not in ("", None) and k not in ("sort", "cursor")}
    form = TrajectoryFilterForm(raw)
    form.fields["project"].queryset = access.visible_projects(request.user)
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        return _error(request, 400, f"{name}: {' '.join(errors)}", name)
    page = queries.page(form.cleaned_data, filters.sort, filters.cursor or None, base=visible)
    return {"items": page.rows, "count": page.count, "count_capped": page.count_capped,
            "next_cursor": page.next_cursor}


def _message(m) -> dict:
    return {"position": m.position, "role": m.role, "content": m.content, "tool_calls": m.tool_calls or [],
            "tool_call_id": m.tool_call_id, "name": m.name, "step_index": m.step_index}


@trajectories.get("/trajectories/{pk}", response={200: s.TrajectoryOut, **ERRORS})
def get_trajectory(request, pk: Id):
    t = access.get_trajectory(request.user, pk)
    return {"id": t.pk, "project": t.project.slug, "task": t.task.external_id, "trial": t.trial,
            "source_model": t.source_model, "reward": t.reward, "success": t.success,
            "termination_reason": t.termination_reason, "error": t.error, "content_hash": t.content_hash,
            "n_steps": t.n_steps, "messages": [_message(m) for m in t.messages.order_by("position")]}


@trajectories.get("/trajectories/{pk}/steps/{step_index}", response={200: s.StepOut, **ERRORS})
def get_step(request, pk: Id, step_index: StepNo):
    """One agent step: its action, and every model critique, Bellman target and refinement of it."""
    t = access.get_step(request.user, pk, step_index)
    action = t.messages.filter(step_index=step_index).first()
    if action is None:
        raise Http404(f"trajectory {t.pk} has no agent step {step_index} (it has {t.n_steps})")
    critiques = [{"id": c.pk, "job": c.job_id, "checkpoint": c.checkpoint_id, "verdict": c.verdict,
                  "success_prob": c.success_prob, "parse_ok": c.parse_ok, "prompt_id": c.prompt_id,
                  "predicted_future": str(c.record.get("predicted_future", "")),
                  "reasoning": str(c.record.get("reasoning", "")), "suggestion": str(c.record.get("suggestion", ""))}
                 for c in t.critiques.filter(step_index=step_index).order_by("id")]
    targets = [{"id": x.pk, "job": x.job_id, "text": str(x.record.get("text", "")), "success_prob": x.success_prob,
                "prompt_id": x.prompt_id} for x in t.targets.filter(step_index=step_index).order_by("id")]
    refinements = [{"id": r.pk, "job": r.job_id, "refined_action": str(r.record.get("refined_action", "")),
                    "valid": r.valid, "changed": r.changed, "prompt_id": r.prompt_id}
                   for r in t.refinements.filter(step_index=step_index).order_by("id")]
    return {"trajectory": t.pk, "step_index": step_index, "action": _message(action), "critiques": critiques,
            "targets": targets, "refinements": refinements}


@trajectories.post("/imports", response={200: s.ImportOut, 202: s.ImportOut, 400: s.Error, 401: s.Error,
                                         403: s.Error})
def import_file(request, file: File[UploadedFile], project: Form[str], format: Form[str] = "",
                source_model: Form[str] = ""):
    """Import a file (any supported format) into a project (made when new). A large file is imported by a
    cpu job: the answer is 202 with the job's id. A file that cannot be imported is a 400 naming the place."""
    access.require_import(request.user)
    form = UploadForm({"project": project, "format": format, "source_model": source_model}, {"file": file})
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        return _error(request, 400, f"{name}: {' '.join(errors)}", name)
    received = do_receive_upload(request.user, form.cleaned_data["file"], form.cleaned_data)
    if received.job is not None:
        return 202, {"status": "queued", "job": received.job.pk}
    batch = received.result.batch
    if not received.result.ok:  # nothing was imported: the error names the place in the file
        return _error(request, 400, batch.error, "file")
    return 200, {"status": batch.status, "project": received.project.slug, "added": batch.n_added,
                 "skipped": batch.n_skipped}


# -- datasets -------------------------------------------------------------------------------------------------

datasets = Router(tags=["datasets"])


def _snapshot(snap) -> dict:
    snap = do_settle(snap)
    return {"id": snap.pk, "dataset": snap.dataset.name, "version": snap.version, "status": snap.status,
            "n_records": snap.n_records, "content_hash": snap.content_hash, "card": snap.card or {},
            "notes": snap.notes, "error": snap.error, "job": snap.job_id, "created_at": snap.created_at,
            "built_at": snap.built_at}


def _dataset(d) -> dict:
    return {"id": d.pk, "name": d.name, "kind": d.kind, "project": d.project.slug, "description": d.description,
            "spec": d.spec, "created_at": d.created_at,
            "snapshots": [_snapshot(x) for x in d.snapshots.select_related("dataset").order_by("-version")[:100]]}


@datasets.get("/datasets", response={200: list[s.DatasetOut], **ERRORS})
def list_datasets(request, kind: str = Query("", max_length=30), project: str = Query("", max_length=200)):
    dataset_access.require_curate(request.user)
    rows = Dataset.objects.select_related("project").order_by("name")
    if kind:
        rows = rows.filter(kind=kind)
    if project:
        rows = rows.filter(project__slug=project)
    return [_dataset(d) for d in rows[:500]]


@datasets.post("/datasets", response={201: s.DatasetOut, **ERRORS})
def create_dataset(request, payload: s.DatasetIn):
    """A dataset from a kind, a project and a filter; v1 is built by a job unless ``build`` is false."""
    dataset_access.require_curate(request.user)
    project = Project.objects.filter(slug=payload.project).first()
    if project is None:
        return _error(request, 400, f"project: no project with slug {payload.project!r}", "project")
    dataset, _, _ = service.check_create_and_build(request.user, payload.name, payload.kind, project, payload.spec,
                                                   payload.description, build=payload.build)
    return 201, _dataset(dataset)


@datasets.get("/datasets/{pk}", response={200: s.DatasetOut, **ERRORS})
def get_dataset(request, pk: Id):

    return _dataset(dataset_access.get_dataset(request.user, pk))


@datasets.post("/datasets/{pk}/build", response={202: s.SnapshotOut, **ERRORS})
def build_dataset(request, payload: s.BuildIn, pk: Id):
    """The next version, built by a cpu job (poll the snapshot or the job)."""
    snapshot, _ = service.do_start_build(request.user, dataset_access.get_dataset(request.user, pk), payload.notes)
    return 202, _snapshot(snapshot)


@datasets.get("/snapshots", response={200: list[s.SnapshotOut], **ERRORS})
def list_snapshots(request, dataset: int = Query(0, ge=0, le=MAX_ID),
                   status: str = Query("", pattern="^(|building|ready|failed)$"),
                   before: int = Query(MAX_ID, ge=1, le=MAX_ID), limit: int = Query(50, ge=1, le=500)):
    """Every dataset's versions, newest first (or one dataset's); pass the last id as ``before``."""
    dataset_access.require_curate(request.user)
    rows = Snapshot.objects.select_related("dataset").filter(pk__lt=before).order_by("-id")
    if dataset:
        rows = rows.filter(dataset_id=dataset)
    if status:
        rows = rows.filter(status=status)
    return [_snapshot(x) for x in rows[:limit]]


@datasets.get("/snapshots/{pk}", response={200: s.SnapshotOut, **ERRORS})
def get_snapshot(request, pk: Id):

    return _snapshot(dataset_access.get_snapshot(request.user, pk))


@datasets.get("/snapshots/{pk}/records", response={200: s.RecordPage, **ERRORS})
def list_records(request, pk: Id, split: str = Query("", pattern="^(|train|validation|test)$"),
                 after: int = Query(-1, ge=-1, le=2**31), limit: int = Query(50, ge=1, le=500)):
    """The frozen records in position order; pass ``next_after`` back as ``after``."""
    snapshot = dataset_access.get_snapshot(request.user, pk)
    if snapshot.status != "ready":
        return _error(request, 400, f"{snapshot.label} is {snapshot.status}: only a built snapshot has records")
    rows = snapshot.records.filter(position__gt=after).order_by("position")
    if split:
        rows = rows.filter(split=split)
    page = list(rows.values("position", "split", "source", "trajectory_id", "step_index", "revision_id",
                            "prompt_id", "data")[:limit + 1])
    items = [{"position": r["position"], "split": r["split"], "source": r["source"], "trajectory": r["trajectory_id"],
              "step_index": r["step_index"], "revision": r["revision_id"], "prompt_id": r["prompt_id"],
              "data": r["data"]} for r in page[:limit]]
    return {"items": items, "next_after": items[-1]["position"] if len(page) > limit else None}


def _export(e) -> dict:
    if e.status in ("queued", "running"):
        do_settle_exports(e.snapshot)
        e.refresh_from_db()
    return {"id": e.pk, "snapshot": e.snapshot_id, "format": e.format, "split": e.split, "status": e.status,
            "n_records": e.n_records, "size_bytes": e.size_bytes, "job": e.job_id,
            "download": reverse("api:download_export", kwargs={"pk": e.pk}) if e.status == "ready" else None}


@datasets.post("/snapshots/{pk}/exports", response={202: s.ExportOut, **ERRORS})
def create_export(request, payload: s.ExportIn, pk: Id):
    """Write the snapshot in a format (a cpu job); poll the export, then download it."""
    export, _ = service.check_start_export(request.user, dataset_access.get_snapshot(request.user, pk), payload.format,
                                           payload.split)
    return 202, _export(export)


@datasets.get("/exports/{pk}", response={200: s.ExportOut, **ERRORS})
def get_export(request, pk: Id):

    return _export(dataset_access.get_export(request.user, pk))


@datasets.get("/exports/{pk}/download", response={404: s.Error, 401: s.Error, 403: s.Error},
              url_name="download_export", openapi_extra={"responses": {"200": {
                  "description": "the file", "content": {"application/octet-stream": {}}}}})
def download_export(request, pk: Id):
    export = dataset_access.get_export(request.user, pk)
    if export.status != "ready" or not export.path:
        raise Http404(f"export {export.pk} is {export.status}, not ready yet")
    try:
        handle = open(export.path, "rb")  # noqa: SIM115 - FileResponse closes it
    except FileNotFoundError:
        raise Http404("the export file was removed from the server; export again") from None
    return FileResponse(handle, as_attachment=True, filename=file_name(export))


# -- jobs, checkpoints, evaluations ---------------------------------------------------------------------------

jobs = Router(tags=["jobs"])


def _job(j) -> dict:
    return {"id": j.pk, "kind": j.kind, "status": j.status, "queue": j.queue, "config": j.config or {},
            "progress_done": j.progress_done, "progress_total": j.progress_total, "phase": j.phase,
            "outputs": j.outputs or {}, "error": j.error, "checkpoint": j.checkpoint_id,
            "created_by": j.created_by.username if j.created_by else None, "created_at": j.created_at,
            "started_at": j.started_at, "finished_at": j.finished_at}


@jobs.get("/job-kinds", response={200: list[s.JobKindOut], **ERRORS})
def list_job_kinds(request):
    """Every job kind with its config's JSON Schema, derived from the same declared fields the launch forms and
    ``manage.py launch_job`` are."""
    job_access.require_jobs(request.user)
    return [{"name": k.name, "label": k.label, "queue": k.queue, "launchable": k.launchable,
             "started_by": k.started_by, "dataset_kinds": list(k.dataset_kinds), "trains": k.trains,
             "config_schema": k.config.model_json_schema()} for k in JOB_KINDS.values()]


@jobs.get("/jobs", response={200: list[s.JobOut], **ERRORS})
def list_jobs(request, kind: str = Query("", max_length=40), status: str = Query("", max_length=20),
              before: int = Query(MAX_ID, ge=1, le=MAX_ID), limit: int = Query(50, ge=1, le=500)):
    """Newest first; pass the last id as ``before`` for the next page."""
    job_access.require_jobs(request.user)
    rows = Job.objects.select_related("created_by").filter(pk__lt=before).order_by("-id")
    if kind:
        rows = rows.filter(kind=kind)
    if status:
        rows = rows.filter(status=status)
    return [_job(j) for j in rows[:limit]]


@jobs.post("/jobs", response={201: s.JobOut, 503: s.Error, **ERRORS})
def create_job(request, payload: s.JobIn):
    """Any job kind the UI launches, with its config (validated per kind) and selection. Builds, exports and
    imports are started by their own endpoints (they own a snapshot, an export, an uploaded file)."""
    job_access.require_jobs(request.user)
    kind = JOB_KINDS.get(payload.kind)
    if kind is not None and not kind.launchable:
        return _error(request, 400, f"kind: {payload.kind} jobs are started by {kind.started_by}", "kind")
    try:
        job = lifecycle.check_launch_job(request.user, payload.kind, payload.config, payload.selection)
    except lifecycle.BrokerUnavailable as exc:  # nothing was launched: safe to send again later
        return _error(request, 503, str(exc))
    return 201, _job(job)


@jobs.get("/jobs/{pk}", response={200: s.JobOut, **ERRORS})
def get_job(request, pk: Id):

    return _job(job_access.get_job(request.user, pk))


def _checkpoint(c) -> dict:
    lineage = checkpoint_lineage(c)
    return {"id": c.pk, "name": c.name, "kind": c.kind, "base_model": c.base_model, "parent": c.parent_id,
            "produced_by": c.produced_by_id, "dataset_hash": c.dataset_hash, "size_bytes": c.size_bytes,
            "created_at": c.created_at, "lineage": lineage.summary,
            "snapshot": lineage.snapshot.pk if lineage.snapshot else None}


@jobs.get("/checkpoints", response={200: list[s.CheckpointOut], **ERRORS})
def list_checkpoints(request, limit: int = Query(100, ge=1, le=500)):
    job_access.require_jobs(request.user)
    return [_checkpoint(c) for c in Checkpoint.objects.select_related("produced_by", "parent")[:limit]]


@jobs.get("/checkpoints/{pk}", response={200: s.CheckpointOut, **ERRORS})
def get_checkpoint(request, pk: Id):
    checkpoint = job_access.get_checkpoint(request.user, pk)
    return _checkpoint(get_object_or_404(Checkpoint.objects.select_related("produced_by", "parent"),
                                         pk=checkpoint.pk))


@jobs.get("/evaluations", response={200: list[s.EvaluationOut], **ERRORS})
def list_evaluations(request, checkpoint: int = Query(0, ge=0, le=MAX_ID), limit: int = Query(100, ge=1, le=500)):
    """Finished evaluate (policy) and evaluate-critic (critic vs humans) jobs, newest first."""
    job_access.require_jobs(request.user)
    rows = Job.objects.filter(kind__in=("evaluate", "evaluate-critic")).order_by("-id")
    if checkpoint:
        rows = rows.filter(checkpoint_id=checkpoint)
    return [{"job": j.pk, "kind": j.kind, "checkpoint": j.checkpoint_id, "status": j.status,
             "outputs": j.outputs or {}, "finished_at": j.finished_at} for j in rows[:limit]]


api.add_router("", trajectories)
api.add_router("", datasets)
api.add_router("", jobs)


def urls():
    """The API's URL patterns, exempt from the site's login redirect (the API answers 401 itself)."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback = login_not_required(pattern.callback)
    return patterns, app_name, namespace
