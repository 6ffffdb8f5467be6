"""Job and checkpoint pages (researchers only). Thin: validate, fetch through access, call one service.

The job page's live part is a named partial that htmx re-fetches every two
seconds while the job runs; once it has ended the partial comes back without
the trigger, so the polling stops by itself. Without JavaScript the page is
simply reloaded by hand.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages as flash
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.datasets.compare import critic_figures
from webapp.jobs import access, charts
from webapp.jobs.configs import ConfigError
from webapp.jobs.forms import FILTER_KEYS, FORMS, JobFilterForm
from webapp.jobs.models import Checkpoint, Job, StepCritique
from webapp.jobs.runners.export import export_path
from webapp.jobs.runners.shards import is_parent
from webapp.jobs.services import lifecycle

PAGE = 50


def job_list(request):
    access.require_jobs(request.user)
    form = JobFilterForm(request.GET)
    form.is_valid()
    params = form.cleaned_data
    jobs = Job.objects.select_related("created_by", "checkpoint").order_by("-id")
    if params.get("kind"):
        jobs = jobs.filter(kind=params["kind"])
    if params.get("status"):
        jobs = jobs.filter(status=params["status"])
    if params.get("user"):
        jobs = jobs.filter(created_by__username=params["user"])
    if params.get("before"):
        jobs = jobs.filter(pk__lt=params["before"])
    rows = list(jobs[:PAGE + 1])
    keep = {k: v for k, v in request.GET.items() if k != "before" and v}
    older = f"?{urlencode({**keep, 'before': rows[PAGE - 1].pk})}" if len(rows) > PAGE else None
    context = {"form": form, "jobs": rows[:PAGE], "older_url": older, "kinds": list(FORMS)}
    if request.htmx and not request.htmx.boosted:
        return render(request, "jobs/list.html#job-table", context)
    return render(request, "jobs/list.html", context)


@require_http_methods(["GET", "POST"])
def job_launch(request, kind: str):
    access.require_jobs(request.user)
    form_class = FORMS.get(kind)
    if form_class is None:
        raise Http404(f"no job kind {kind!r}")
    if request.method == "POST":
        form = form_class(request.POST)
        status = 400
        if form.is_valid():
            try:
                job = lifecycle.check_launch_job(request.user, kind, form.config(), form.selection())
            except ConfigError as exc:
                form.add_error(form.field_for(exc.field), f"{exc.field}: {exc.message}")
            except lifecycle.BrokerUnavailable as exc:
                form.add_error(None, str(exc))
                status = 503
            else:
                flash.success(request, f"Job {job.pk} ({kind}) queued.")
                return redirect("job_detail", pk=job.pk)
        return render(request, "jobs/launch.html", {"form": form, "kind": kind}, status=status)
    initial = {}
    carried = {k: v for k, v in request.GET.items() if k in FILTER_KEYS and v}
    if carried:
        initial["filter"] = urlencode(carried)
    if request.GET.get("trajectory"):
        initial["trajectory_ids"] = request.GET["trajectory"]
    return render(request, "jobs/launch.html", {"form": form_class(initial=initial), "kind": kind,
                                                "carried_filter": carried})


def _detail_context(job: Job) -> dict:
    children = list(job.children.order_by("id"))
    sharded = bool(children) and is_parent(job.config)
    return {
        "job": job,
        "charts": charts.charts_for(job.metrics or []),
        "children": children,
        "sharded": sharded,  # a sharded parent: its progress is its shards', added up live
        "shard_done": sum(c.progress_done for c in children),
        "shard_total": sum(c.progress_total for c in children),
        "critique_rows": list(StepCritique.objects.filter(job__in=[job.pk, *(c.pk for c in children)] if sharded
                                                          else [job.pk]).select_related("trajectory")
                              .order_by("trajectory_id", "step_index")[:20]),
        "produced": list(job.checkpoints.all()),
        "arms": _arm_rows(job),
        "critic": _critic_figures(job),
    }


def _critic_figures(job: Job) -> dict | None:
    """An evaluate-critic job's figures against its baselines, with their charts (as the compare page draws)."""
    if job.kind != "evaluate-critic" or not (job.outputs or {}).get("critic"):
        return None
    return critic_figures(job.outputs, job.checkpoint.name if job.checkpoint else "this critic")


def _arm_rows(job: Job) -> list[tuple[str, dict]]:
    """A supervised-rollout's arms as table rows (its outputs hold each arm's metrics and episode counts)."""
    if job.kind != "supervised-rollout" or not job.outputs:
        return []
    episodes = job.outputs.get("episodes") or {}
    return [(arm, {**job.outputs[arm], "episodes": episodes.get(arm, 0)})
            for arm in ("baseline", "supervised") if isinstance(job.outputs.get(arm), dict)]


def job_detail(request, pk: int):
    job = access.get_job(request.user, pk)
    context = _detail_context(job)
    if request.htmx and not request.htmx.boosted:
        return render(request, "jobs/detail.html#live", context)
    return render(request, "jobs/detail.html", context)


@require_POST
def job_cancel(request, pk: int):
    job = lifecycle.do_request_cancel(access.get_job(request.user, pk))
    flash.info(request, f"Job {job.pk}: " + ("cancelled." if job.status == Job.CANCELLED else
                                             "asked to stop; it stops after the chunk it is working on."))
    return redirect("job_detail", pk=job.pk)


@require_POST
def job_retry(request, pk: int):
    job = access.get_job(request.user, pk)
    if job.status not in (Job.FAILED, Job.CANCELLED):
        flash.error(request, f"Job {job.pk} is {job.status}: only failed or cancelled jobs can be retried.")
        return redirect("job_detail", pk=job.pk)
    lifecycle.do_retry(job)
    if getattr(job, "send_error", ""):
        flash.warning(request, f"Job {job.pk} is queued again, but the job queue (the Redis broker) cannot be "
                               "reached now; it is sent automatically once the queue is back.")
    else:
        flash.success(request, f"Job {job.pk} queued again; what it had finished is kept.")
    return redirect("job_detail", pk=job.pk)


def job_log(request, pk: int):
    job = access.get_job(request.user, pk)
    path = lifecycle.log_path(job)
    if not path.is_file():
        raise Http404("this job has no log yet")
    return FileResponse(path.open("rb"), content_type="text/plain; charset=utf-8", as_attachment=False,
                        filename=f"job-{job.pk}.log")


def job_export_file(request, pk: int):
    job = access.get_job(request.user, pk)
    path = export_path(job.pk)
    if job.kind != "export" or job.status != Job.SUCCEEDED or not path.is_file():
        raise Http404("this job has no export file")
    return FileResponse(path.open("rb"), content_type="application/x-ndjson", as_attachment=True,
                        filename=f"job-{job.pk}-trajectories.jsonl")


def checkpoint_list(request):
    access.require_jobs(request.user)
    checkpoints = list(Checkpoint.objects.select_related("parent", "ema_of").defer("manifest")[:500])
    rollouts: dict[int, list[Job]] = {}
    finished = (Job.objects.filter(kind__in=("evaluate", "rollout"), status=Job.SUCCEEDED,
                                   checkpoint__in=[c.pk for c in checkpoints])
                .only("pk", "kind", "checkpoint_id", "config", "outputs").order_by("-id")[:5000])
    for job in finished:
        rollouts.setdefault(job.checkpoint_id, []).append(job)
    rows = [(c, rollouts.get(c.pk, [])[:5]) for c in checkpoints]
    return render(request, "jobs/checkpoints.html", {"rows": rows})
