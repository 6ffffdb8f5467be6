"""Trajectory pages. Thin: validate, fetch through access, call one service, render.
htmx requests get the named partial of the same template, so every swap also
works as a plain page load without JavaScript."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages as flash
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from webapp import home as role_home
from webapp.trajectories import access, detail, queries
from webapp.trajectories.forms import TrajectoryFilterForm, UploadForm
from webapp.trajectories.models import ImportBatch, Project
from webapp.trajectories.services.uploads import do_receive_upload


def home(request):
    projects = access.visible_projects(request.user)
    imports = ImportBatch.objects.select_related("project", "created_by") if access.reads_everything(request.user) \
        else ImportBatch.objects.none()  # an annotator reads their queues' trajectories, not the import log
    return render(request, "trajectories/home.html", {
        "projects": projects, "recent_imports": imports[:10], "project_figures": access.reads_everything(request.user),
        **role_home.context(request.user)})


def _list_context(request, project: Project | None = None) -> dict:
    data = request.GET.copy()
    if project is not None:
        data["project"] = project.slug
    form = TrajectoryFilterForm(data)
    form.fields["project"].queryset = projects = access.visible_projects(request.user)
    form.is_valid()
    params = form.cleaned_data  # the valid filters; invalid ones are reported and ignored
    sort = params.get("sort") or "newest"
    result = queries.page(params, sort, params.get("cursor") or None,
                          base=access.visible_trajectories(request.user))
    keep = {k: v for k, v in request.GET.items() if k != "cursor" and v}
    if project is not None:
        keep.pop("project", None)
    next_url = f"?{urlencode({**keep, 'cursor': result.next_cursor})}" if result.next_cursor else None
    chosen = params.get("project") or project
    everything = access.reads_everything(request.user)
    if everything:
        facets = queries.facet_values(chosen, ("source_model", "termination_reason"), projects)
    else:  # from the trajectories this user reads, not the project's cached ones (they would name the rest)
        facets = queries.facet_values_of(access.visible_trajectories(request.user), chosen,
                                         ("source_model", "termination_reason"))
    return {
        "form": form,
        "page": result,
        "project": chosen,
        "next_url": next_url,
        "first_url": f"?{urlencode(keep)}" if keep else "?",
        "is_continuation": bool(params.get("cursor")),
        "source_models": facets["source_model"],
        "termination_reasons": facets["termination_reason"],
        "project_figures": everything,  # whole-project figures are for those who read the whole project
    }


def trajectory_list(request):
    context = _list_context(request)
    if request.htmx and not request.htmx.boosted:
        return render(request, "trajectories/list.html#results", context)
    return render(request, "trajectories/list.html", context)


def project_detail(request, slug: str):
    project = access.get_project(request.user, slug)
    context = _list_context(request, project)
    if request.htmx and not request.htmx.boosted:
        return render(request, "trajectories/list.html#results", context)
    return render(request, "trajectories/list.html", context)


def trajectory_detail(request, pk: int):
    trajectory = access.get_trajectory(request.user, pk)
    context = detail.context(trajectory)
    context["step_links"] = access.visible_step_indices(request.user, trajectory)  # None: every step
    return render(request, "trajectories/detail.html", context)


@require_http_methods(["GET", "POST"])
def import_upload(request):
    access.require_import(request.user)
    form = UploadForm(request.POST or None, request.FILES or None)
    result = None
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        received = do_receive_upload(request.user, upload, form.cleaned_data)
        if received.job is not None:
            flash.info(request, f"{upload.name} ({upload.size / 1e6:.1f} MB) is being imported by job "
                                f"{received.job.pk}.")
            if getattr(received.job, "send_error", ""):  # kept: the reaper sends it once the broker is back
                flash.error(request, f"The job queue cannot be reached right now ({received.job.send_error}): "
                                     f"job {received.job.pk} waits and starts once it is back.")
            return redirect("job_detail", pk=received.job.pk)
        project, result = received.project, received.result
        if result.ok:
            b = result.batch
            if result.already_imported:
                flash.info(request, f"{upload.name} was already imported into {project.name}: nothing added.")
            else:
                flash.success(request, f"Imported {upload.name} into {project.name}: {b.n_added} trajectories added, "
                                       f"{b.n_skipped} already there, {b.n_messages} messages.")
            return redirect("project_detail", slug=project.slug)
        status = 400
    else:
        status = 400 if request.method == "POST" else 200
    return render(request, "trajectories/upload.html", {"form": form, "result": result}, status=status)
