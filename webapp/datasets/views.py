"""Dataset, snapshot, export and lineage pages (researchers). Thin: validate, fetch through access, call a service."""

from __future__ import annotations

from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.datasets import access, compare
from webapp.datasets.forms import BuildForm, DatasetForm, EvaluateForm, ExportForm, TrainForm
from webapp.datasets.models import Dataset, Export, Snapshot
from webapp.datasets.services import datasets as service
from webapp.datasets.services import lineage
from webapp.datasets.services.build import do_settle
from webapp.datasets.services.exports import ExportError, do_settle_exports, file_name, formats_for
from webapp.datasets.services.specs import SpecError
from webapp.jobs import access as job_access
from webapp.jobs.configs import ConfigError
from webapp.jobs.kinds import taking
from webapp.jobs.models import Checkpoint, Job
from webapp.jobs.services import lifecycle

RECORDS_PAGE = 25
SPLITS = ("train", "validation", "test")


def dataset_list(request):
    access.require_curate(request.user)
    datasets = Dataset.objects.select_related("project").order_by("name")
    latest = {}
    for s in Snapshot.objects.order_by("dataset_id", "-version").only("pk", "dataset_id", "version", "status",
                                                                      "n_records"):
        latest.setdefault(s.dataset_id, s)
    return render(request, "datasets/list.html", {"rows": [(d, latest.get(d.pk)) for d in datasets]})


@require_http_methods(["GET", "POST"])
def dataset_new(request):
    access.require_curate(request.user)
    form = DatasetForm(request.POST or None, initial={"project": request.GET.get("project")})
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            dataset, snapshot, job = service.check_create_and_build(
                request.user, d["name"], d["kind"], d["project"], form.spec(), d.get("description") or "",
                d.get("notes") or "")
        except SpecError as exc:
            name = exc.field.split(".")[-1]
            form.add_error(name if name in form.fields else None, f"{exc.field}: {exc.message}")
        else:
            flash.success(request, f"Dataset {dataset.name} created; {snapshot.label} is being built by job {job.pk}.")
            _warn_if_unsent(request, job)
            return redirect("dataset_detail", pk=dataset.pk)
    return render(request, "datasets/new.html", {"form": form}, status=400 if form.errors else 200)


def dataset_detail(request, pk: int):
    dataset = access.get_dataset(request.user, pk)
    snapshots = [do_settle(s) for s in dataset.snapshots.select_related("created_by", "job").order_by("-version")]
    return render(request, "datasets/detail.html", {"dataset": dataset, "snapshots": snapshots,
                                                    "build_form": BuildForm()})


@require_POST
def dataset_build(request, pk: int):
    dataset = access.get_dataset(request.user, pk)
    form = BuildForm(request.POST)
    if not form.is_valid():
        flash.error(request, "Notes: at most 5000 characters.")
        return redirect("dataset_detail", pk=dataset.pk)
    snapshot, job = service.do_start_build(request.user, dataset, form.cleaned_data.get("notes") or "")
    flash.success(request, f"{snapshot.label} is being built by job {job.pk}.")
    _warn_if_unsent(request, job)
    return redirect("dataset_detail", pk=dataset.pk)


def _warn_if_unsent(request, job) -> None:
    """A build or export keeps its job when the broker is down (the reaper sends it later): say so."""
    if job is not None and getattr(job, "send_error", ""):
        flash.error(request, f"The job queue cannot be reached right now ({job.send_error}): job {job.pk} waits "
                             "and starts once it is back.")


def _snapshot_context(snapshot: Snapshot, request) -> dict:
    split = request.GET.get("split") if request.GET.get("split") in SPLITS else ""
    records = snapshot.records.select_related("author", "revision").order_by("position")
    if split:
        records = records.filter(split=split)
    page = Paginator(records, RECORDS_PAGE).get_page(request.GET.get("page"))
    return {"snapshot": snapshot, "dataset": snapshot.dataset, "page": page, "split": split,
            "exports": (exports := list(snapshot.exports.order_by("-id")[:50])),
            "pending_exports": any(e.status in (Export.QUEUED, Export.RUNNING) for e in exports),
            "export_form": ExportForm(), "formats": formats_for(snapshot.dataset.kind),
            "train_form": TrainForm(), "evaluate_form": EvaluateForm(),
            "trainable": (trained_by := taking(snapshot.dataset.kind, trains=True)) == "train-critic",
            "distillable": trained_by == "distill-policy",
            "evaluable": taking(snapshot.dataset.kind, trains=False) == "evaluate-critic",
            "uses": lineage.snapshot_uses(snapshot)}


def _settled(snapshot: Snapshot) -> Snapshot:
    do_settle_exports(snapshot)
    return do_settle(snapshot)


def snapshot_detail(request, pk: int):
    snapshot = _settled(access.get_snapshot(request.user, pk))
    return render(request, "datasets/snapshot.html", _snapshot_context(snapshot, request))


@require_POST
def snapshot_export(request, pk: int):
    snapshot = access.get_snapshot(request.user, pk)
    form = ExportForm(request.POST)
    if form.is_valid():
        try:
            export, job = service.check_start_export(request.user, snapshot, form.cleaned_data["format"],
                                                     form.cleaned_data.get("split") or "")
        except ExportError as exc:
            flash.error(request, str(exc))
        else:
            flash.success(request, f"Export {export.pk} ({export.format}) is being written by job {job.pk}.")
            _warn_if_unsent(request, job)
    else:
        flash.error(request, "Choose one of the export formats.")
    return redirect("snapshot_detail", pk=snapshot.pk)


def export_download(request, pk: int):
    export = access.get_export(request.user, pk)
    if export.status != Export.READY or not export.path:
        raise Http404("this export is not written yet")
    try:
        handle = open(export.path, "rb")  # noqa: SIM115 - FileResponse closes it
    except FileNotFoundError:
        raise Http404("the export file was removed from the server; export again") from None
    kinds = {".jsonl": "application/x-ndjson", ".json": "application/json",
             ".parquet": "application/vnd.apache.parquet", ".gz": "application/gzip"}
    suffix = "." + export.path.rsplit(".", 1)[-1]
    return FileResponse(handle, as_attachment=True, filename=file_name(export),
                        content_type=kinds.get(suffix, "application/octet-stream"))


def _launch_on_snapshot(request, pk: int, form_class, kind_of, success):
    """The snapshot page's job buttons: the form's job with the snapshot pinned, or the refusal flashed."""
    snapshot = access.get_snapshot(request.user, pk)
    job_access.require_jobs(request.user)
    form = form_class(request.POST)
    if not form.is_valid():
        flash.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("snapshot_detail", pk=snapshot.pk)
    kind = kind_of(snapshot)
    try:
        job = lifecycle.check_launch_job(request.user, kind, form.config(snapshot.pk))
    except ConfigError as exc:
        flash.error(request, f"{exc.field}: {exc.message}")
        return redirect("snapshot_detail", pk=snapshot.pk)
    except lifecycle.BrokerUnavailable as exc:
        flash.error(request, str(exc))
        return redirect("snapshot_detail", pk=snapshot.pk)
    flash.success(request, success(job, kind, form.cleaned_data, snapshot))
    return redirect("job_detail", pk=job.pk)


@require_POST
def snapshot_train(request, pk: int):
    """"Train critic on this" / "distill policy on this": the job with the snapshot pinned."""
    return _launch_on_snapshot(
        request, pk, TrainForm,
        lambda snapshot: taking(snapshot.dataset.kind, trains=True) or "train-critic",  # none: the job refuses
        lambda job, kind, d, snapshot: f"Job {job.pk} ({kind}) queued on {snapshot.label}.")


@require_POST
def snapshot_evaluate(request, pk: int):
    return _launch_on_snapshot(
        request, pk, EvaluateForm, lambda snapshot: "evaluate-critic",
        lambda job, kind, d, snapshot: f"Job {job.pk} evaluates {d['checkpoint'] or 'the embedded model'} on the "
                                       f"{d['split']} split of {snapshot.label}.")


def checkpoint_detail(request, pk: int):
    checkpoint = job_access.get_checkpoint(request.user, pk)
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("produced_by", "parent"), pk=checkpoint.pk)
    return render(request, "datasets/checkpoint.html", {"checkpoint": checkpoint,
                                                        "lineage": lineage.checkpoint_lineage(checkpoint)})


def checkpoint_compare(request):
    job_access.require_jobs(request.user)
    ids = []
    for raw in request.GET.getlist("id"):
        if raw.isascii() and raw.isdigit() and len(raw) < 18:
            ids.append(int(raw))
    chosen = list(Checkpoint.objects.filter(pk__in=ids).order_by("id")) if ids else []
    if not chosen:  # default: the checkpoints with a critic evaluation, newest six
        with_eval = (Job.objects.filter(kind="evaluate-critic", status=Job.SUCCEEDED, checkpoint__isnull=False)
                     .order_by("-id").values_list("checkpoint_id", flat=True)[:200])
        chosen = list(Checkpoint.objects.filter(pk__in=list(dict.fromkeys(with_eval))[:6]).order_by("id"))
    raw = request.GET.get("snapshot", "")
    snapshot_id = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 18 else None
    split = request.GET.get("split") if request.GET.get("split") in SPLITS else ""
    cols = compare.columns(chosen, snapshot_id, split)
    snapshots = {s.pk: s for s in Snapshot.objects.select_related("dataset").filter(
        pk__in={(c.critic.config or {}).get("snapshot") for c in cols if c.critic})}
    accuracy = compare.bars([(c.checkpoint.name, c.colour, c.accuracy) for c in cols])
    return render(request, "datasets/compare.html", {
        "cols": cols, "accuracy_bars": accuracy, "snapshots": snapshots, "snapshot_id": snapshot_id, "split": split,
        "mixed": len({((c.critic.config or {}).get("snapshot"), (c.critic.config or {}).get("split"))
                      for c in cols if c.critic}) > 1, "pass_bars": compare.pass_k_bars(cols), "g": compare.GEOMETRY,
        "all_checkpoints": Checkpoint.objects.order_by("-id")[:200], "chosen": {c.pk for c in chosen},
        "mixed_environments": compare.mixed_environments(cols),
        "auroc_marks": compare.auroc_intervals([(c.checkpoint.name, c.colour, c.report, c.base) for c in cols]),
        "critic_table": compare.critic_table([(c.report, c.base) for c in cols])})
