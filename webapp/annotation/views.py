"""Annotation pages. Thin: validate with a form, fetch through access, call one service, render.

Every htmx swap target is a named partial of the full page, and every hx-post is also a plain
form post, so the whole flow works without JavaScript. A save or draft posted after the session
expired is kept in the (anonymous) session and becomes the user's draft after the login round trip.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webapp.accounts.access import is_researcher, require
from webapp.annotation import access, agreement, step
from webapp.annotation.diff import field_diffs
from webapp.annotation.forms import NotesUploadForm, QueueForm, ReviewForm, RevisionForm, raw_fields
from webapp.annotation.models import Annotation, Assignment, AuditEvent, QueueItem, Revision
from webapp.annotation.services import assignments, drafts, notes, queues, reviews, revisions
from webapp.annotation.services.revisions import Conflict, RevisionRefused, Target
from webapp.datasets.services.lineage import revision_uses
from webapp.jobs.models import StepCritique
from webapp.trajectories import access as trajectory_access

PENDING = "nlac_pending_drafts"


def _id(value) -> int | None:
    """A database id from a query or form value, or None (never an exception: "²".isdigit() is True)."""
    text = str(value or "")
    return int(text) if text.isascii() and text.isdecimal() and len(text) < 18 else None


def _back(request, default: str) -> str:
    """The page to return to, if it is one of ours (never an outside address)."""
    back = request.POST.get("back") or ""
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                                require_https=request.is_secure()):
        return back
    return reverse(default)


def _step_url(trajectory_id: int, step_index: int, **params) -> str:
    url = reverse("annotate_step", args=[trajectory_id, step_index])
    params = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{url}?{urlencode(params)}" if params else url


def _queue_item(request, trajectory_id: int, step_index: int, value) -> QueueItem | None:
    if not value:
        return None
    if _id(value) is None:
        raise Http404("no such queue item")
    item = QueueItem.objects.select_related("queue").filter(pk=_id(value), trajectory_id=trajectory_id,
                                                            step_index=step_index).first()
    if item is None:
        raise Http404("no such queue item for this step")
    access.get_queue(request.user, item.queue_id)
    return item


def _target(request, trajectory, step_index: int, critique_id, annotation_id):
    annotation = access.get_annotation(request.user, int(annotation_id)) if annotation_id else None
    if annotation is not None:
        if (annotation.trajectory_id, annotation.step_index) != (trajectory.pk, step_index):
            raise Http404("that annotation is of another step")
        return Target.of(annotation), annotation
    critique = None
    if critique_id:
        critique = get_object_or_404(StepCritique, pk=critique_id, trajectory=trajectory, step_index=step_index)
    return Target(trajectory, step_index, critique), None


def _adopt_pending(request, trajectory, step_index: int) -> bool:
    """Text posted while logged out becomes this user's draft (if they may edit it)."""
    pending = request.session.get(PENDING) or {}
    entry = pending.pop(f"{trajectory.pk}:{step_index}", None)
    if entry is None:
        return False
    request.session[PENDING] = pending
    try:
        target, annotation = _target(request, trajectory, step_index, _id(entry.get("critique")),
                                     _id(entry.get("annotation")))
        if annotation is not None and not access.can_edit_annotation(request.user, annotation):
            return False
        if not access.can_annotate_step(request.user, trajectory.pk, step_index):
            return False
        author = annotation.author if annotation else request.user
        drafts.do_keep_draft(request.user, revisions.draft_key(target, author), trajectory.pk, step_index,
                             entry.get("fields") or {}, _id(entry.get("base_revision")))
    except (Http404, PermissionDenied, ValueError):
        return False  # not theirs to edit, or gone: the stash is dropped rather than breaking the page
    return True


def _render_step(request, trajectory, step_index, *, status=200, partial=None, extra=None, **kwargs):
    context = step.context(request.user, trajectory, step_index, **kwargs)
    context["can_edit"] = access.can_annotate_step(request.user, trajectory.pk, step_index) and (
        context["annotation"] is None or access.can_edit_annotation(request.user, context["annotation"]))
    context["can_review"] = access.can_review(request.user)
    context.update(extra or {})
    if "form" not in context:
        context["form"] = None
    template = "annotation/step.html" + (f"#{partial}" if partial else "")
    return render(request, template, context, status=status)


@require_GET
def annotate_step(request, pk: int, step_index: int):
    trajectory = trajectory_access.get_step(request.user, pk, step_index)
    if not trajectory.messages.filter(step_index=step_index).exists():
        raise Http404(f"trajectory {pk} has no agent step {step_index}")
    item = _queue_item(request, pk, step_index, request.GET.get("queue_item"))
    restored = _adopt_pending(request, trajectory, step_index)
    if restored:
        flash.info(request, "The text you typed while logged out was kept as your draft: check it and save.")
    annotation_id = _id(request.GET.get("annotation"))
    annotation = access.get_annotation(request.user, annotation_id) if annotation_id else None
    critique_id = _id(request.GET.get("critique"))
    return _render_step(request, trajectory, step_index, critique_id=critique_id, annotation=annotation,
                        queue_item=item)


def _stash_and_login(request, pk: int, step_index: int):
    pending = request.session.get(PENDING) or {}
    ids = {name: _id(request.POST.get(name)) for name in ("critique", "annotation", "base_revision", "queue_item")}
    pending[f"{pk}:{step_index}"] = {"fields": raw_fields(request.POST), **ids}
    request.session[PENDING] = pending
    url = _step_url(pk, step_index, critique=ids["critique"], annotation=ids["annotation"],
                    queue_item=ids["queue_item"])
    if request.htmx:
        response = HttpResponse(status=401)
        response["HX-Redirect"] = f"{reverse('login')}?{urlencode({'next': url})}"
        return response
    return redirect_to_login(url)


@login_not_required
@require_POST
def save_revision(request, pk: int, step_index: int):
    if not request.user.is_authenticated:
        return _stash_and_login(request, pk, step_index)
    trajectory = access.get_step_to_annotate(request.user, pk, step_index)
    form = RevisionForm(request.POST)
    valid = form.is_valid()
    data = form.cleaned_data
    target, annotation = _target(request, trajectory, step_index, data.get("critique"), data.get("annotation"))
    require(access.can_annotate_step(request.user, pk, step_index))
    if annotation is not None:
        require(access.can_edit_annotation(request.user, annotation))
    item = _queue_item(request, pk, step_index, data.get("queue_item"))
    author = annotation.author if annotation else request.user
    partial = "editor" if request.htmx else None
    if not valid:
        return _render_step(request, trajectory, step_index, status=400, partial=partial, annotation=annotation,
                            critique_id=target.critique.pk if target.critique else None, queue_item=item,
                            extra={"form": form, "start": raw_fields(request.POST)})
    try:
        revision = revisions.check_save_revision(request.user, target, form.revision_fields(),
                                                 data.get("base_revision"), annotation=annotation, queue_item=item)
    except Conflict as conflict:
        drafts.do_keep_draft(request.user, revisions.draft_key(target, author), pk, step_index,
                             raw_fields(request.POST), data.get("base_revision"))
        return _render_step(request, trajectory, step_index, status=409, partial=partial,
                            annotation=conflict.annotation, queue_item=item,
                            extra=_conflict_context(conflict, form.revision_fields()))
    except RevisionRefused as refused:
        form.add_error(None, f"Not saved: {refused}")
        return _render_step(request, trajectory, step_index, status=400, partial=partial, annotation=annotation,
                            critique_id=target.critique.pk if target.critique else None, queue_item=item,
                            extra={"form": form, "start": step.editor_values(form.revision_fields())})
    if request.POST.get("then") == "next" and item is not None:
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = reverse("queue_next", args=[item.queue_id])
            return response
        return redirect("queue_next", item.queue_id)
    if request.htmx:
        fresh = Annotation.objects.select_related("author", "head", "critique").get(pk=revision.annotation_id)
        return _render_step(request, trajectory, step_index, partial="editor", annotation=fresh,
                            queue_item=item, extra={"saved": revision})
    flash.success(request, f"Saved revision {revision.pk}.")
    return redirect(_step_url(pk, step_index, annotation=revision.annotation_id,
                              queue_item=item.pk if item else None))


def _conflict_context(conflict: Conflict, mine: dict) -> dict:
    theirs = conflict.head.fields() if conflict.head else {}
    return {"conflict": True, "theirs": conflict.head, "mine": mine,
            "conflict_diffs": field_diffs(theirs, mine, step.DIFF_FIELDS),
            "start": step.editor_values(mine), "base_revision_id": conflict.head.pk if conflict.head else None}


@login_not_required
@require_POST
def keep_draft(request, pk: int, step_index: int):
    if not request.user.is_authenticated:
        return _stash_and_login(request, pk, step_index)
    trajectory = access.get_step_to_annotate(request.user, pk, step_index)
    target, found = _target(request, trajectory, step_index, _id(request.POST.get("critique")),
                            _id(request.POST.get("annotation")))
    if found is not None:
        require(access.can_edit_annotation(request.user, found))
    base = request.POST.get("base_revision", "")
    try:
        draft = drafts.do_keep_draft(request.user, revisions.draft_key(target, found.author if found else request.user),
                                     pk, step_index, raw_fields(request.POST), _id(base))
    except ValueError as error:
        return HttpResponse(str(error), status=400, content_type="text/plain")
    return HttpResponse(f"Draft kept {draft.updated_at:%H:%M:%S}", content_type="text/plain")


@require_GET
def history(request, pk: int):
    annotation = access.get_annotation(request.user, pk)
    original = revisions.model_fields(annotation.critique)
    rows = []
    for revision in annotation.revisions.select_related("author", "parent").order_by("-id"):
        parent = revision.parent.fields() if revision.parent else original
        rows.append({"revision": revision, "vs_parent": field_diffs(parent, revision.fields(), step.DIFF_FIELDS),
                     "vs_model": field_diffs(original, revision.fields(), step.DIFF_FIELDS)})
    uses = None
    if is_researcher(request.user):  # the lineage: the snapshots these edits are frozen in, what they trained
        uses = revision_uses([row["revision"].pk for row in rows])
    return render(request, "annotation/history.html", {
        "annotation": annotation, "rows": rows, "can_edit": access.can_edit_annotation(request.user, annotation),
        "reviews": annotation.reviews.select_related("reviewer", "revision"), "uses": uses})


@require_POST
def restore_revision(request, pk: int):
    revision = get_object_or_404(Revision.objects.select_related("annotation"), pk=pk)
    annotation = access.get_annotation(request.user, revision.annotation_id)
    require(access.can_edit_annotation(request.user, annotation))
    base = request.POST.get("base_revision", "")
    try:
        revisions.check_restore(request.user, revision, _id(base))
    except Conflict:
        flash.error(request, "Not restored: the annotation was saved again meanwhile. Here is its current history.")
        return redirect("annotation_history", annotation.pk)
    flash.success(request, f"Restored revision {revision.pk} as a new revision.")
    return redirect("annotation_history", annotation.pk)


@require_POST
def undo_last(request):
    require(access.annotates_anywhere(request.user) or access.queues_for(request.user).exists())
    try:
        annotation = revisions.do_undo_last(request.user)
    except Conflict:
        flash.error(request, "Not undone: your last save was built on by someone meanwhile. See its history.")
        return redirect(_back(request, "queue_list"))
    if annotation is None:
        flash.info(request, "Nothing of yours to undo.")
        return redirect(_back(request, "queue_list"))
    flash.success(request, "Your last save was undone (it stays in the history).")
    return redirect(_step_url(annotation.trajectory_id, annotation.step_index, annotation=annotation.pk
                              if annotation.deleted_at is None else None,
                              critique=annotation.critique_id))


@require_POST
def delete_annotation(request, pk: int):
    annotation = access.get_annotation(request.user, pk)
    require(annotation.author_id == request.user.pk or access.is_reviewer(request.user))
    if request.POST.get("restore"):
        revisions.do_restore_deleted(request.user, annotation)
        flash.success(request, "Annotation restored.")
    else:
        revisions.do_delete(request.user, annotation)
        flash.success(request, "Annotation deleted (a reviewer or you can restore it from its history).")
    return redirect("annotation_history", annotation.pk)


# -- queues ------------------------------------------------------------------------------------------------------

@require_GET
def queue_list(request):
    rows = access.queues_for(request.user).select_related("project").annotate(
        n_done=Count("items__assignments", filter=Q(items__assignments__status=Assignment.DONE)))
    return render(request, "annotation/queue_list.html", {
        "queues": rows[:200], "can_create": access.can_create_queue(request.user)})


@require_http_methods(["GET", "POST"])
def queue_new(request):
    require(access.can_create_queue(request.user))
    form = QueueForm(request.POST or None, initial={"project": request.GET.get("project")})
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            queue = queues.check_create_queue(request.user, d["name"], d["project"], form.spec(), d["overlap"],
                                              d["assignees"], lease_s=d["lease_minutes"] * 60,
                                              instructions=d.get("instructions") or "")
        except queues.QueueError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            flash.success(request, f"Queue {queue.name!r} holds {queue.n_items} steps.")
            return redirect("queue_detail", queue.pk)
    return render(request, "annotation/queue_new.html", {"form": form}, status=400 if form.errors else 200)


@require_GET
def queue_detail(request, pk: int):
    queue = access.get_queue(request.user, pk)
    items = QueueItem.objects.filter(queue=queue)
    per_annotator = (Assignment.objects.filter(item__queue=queue).values("annotator__username")
                     .annotate(done=Count("id", filter=Q(status=Assignment.DONE)),
                               skipped=Count("id", filter=Q(status=Assignment.SKIPPED)),
                               returned=Count("id", filter=Q(status=Assignment.RETURNED)),
                               leased=Count("id", filter=Q(status=Assignment.LEASED)))
                     .order_by("annotator__username"))
    totals = items.aggregate(done=Count("id", filter=Q(n_done__gte=queue.overlap)),
                             started=Count("id", filter=Q(n_done__gt=0)))
    mine = Assignment.objects.filter(item__queue=queue, annotator=request.user).select_related("item")
    return render(request, "annotation/queue_detail.html", {
        "queue": queue, "per_annotator": per_annotator, "totals": totals,
        "needed": queue.n_items * queue.overlap,
        "annotations_done": sum(r["done"] for r in per_annotator),
        "returned_to_me": mine.filter(status=Assignment.RETURNED),
        "is_assignee": queue.assignees.filter(pk=request.user.pk).exists(),
        "agreement": agreement.for_queue(queue) if queue.overlap > 1 else None,
    })


@require_http_methods(["GET", "POST"])
def queue_next(request, pk: int):
    queue = access.get_queue(request.user, pk)
    require(queue.assignees.filter(pk=request.user.pk).exists())
    assignment = assignments.do_claim_next(queue, request.user)
    if assignment is None:
        flash.info(request, f"Nothing left for you in {queue.name!r}. Thank you!")
        return redirect("queue_detail", queue.pk)
    item = assignment.item
    return redirect(_step_url(item.trajectory_id, item.step_index, queue_item=item.pk, critique=item.critique_id))


# -- review ------------------------------------------------------------------------------------------------------

@require_GET
def review_list(request):
    require(access.can_review(request.user))
    state = request.GET.get("state") or Annotation.SUBMITTED
    rows = (Annotation.objects.filter(state=state, deleted_at=None, head__isnull=False)
            .select_related("author", "head", "trajectory", "critique").order_by("updated_at"))
    if request.GET.get("author"):
        rows = rows.filter(author__username=request.GET["author"])
    return render(request, "annotation/review_list.html", {
        "rows": rows[:200], "state": state, "states": [s for s, _ in Annotation.STATES]})


@require_POST
def review_annotation(request, pk: int):
    require(access.can_review(request.user))
    annotation = access.get_annotation(request.user, pk)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        flash.error(request, "Not reviewed: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("review_list")
    d = form.cleaned_data
    try:
        reviews.do_review(request.user, annotation, d["revision"], d["decision"], d.get("reason") or "")
    except reviews.StaleReview as stale:
        flash.error(request, f"Not reviewed: {stale}")
    except ValueError as error:
        flash.error(request, f"Not reviewed: {error}")
    else:
        flash.success(request, f"Annotation {annotation.pk} {'accepted' if d['decision'] == 'accept' else 'returned'}.")
    return redirect(_back(request, "review_list"))


@require_http_methods(["GET", "POST"])
def import_notes(request, slug: str):
    require(access.can_create_queue(request.user))
    project = trajectory_access.get_project(request.user, slug)
    form = NotesUploadForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            result = notes.check_import_notes(request.user, project, upload.name,
                                              upload.read(notes.MAX_NOTES_BYTES + 1))
        except notes.NotesError as error:
            form.add_error("file", f"Nothing was imported: {error}")
            status = 400
        else:
            n, m, k = result.n_notes, result.n_trajectories, result.n_already
            text = f"Imported {n} note{pluralize(n)} on {m} {'trajectory' if m == 1 else 'trajectories'}"
            if k:
                text += f"; {k} {'was' if k == 1 else 'were'} already imported"
            (flash.success if n else flash.info)(request, text + ".")
            return redirect("project_detail", project.slug)
    elif request.method == "POST":
        status = 400
    return render(request, "annotation/notes_import.html", {"form": form, "project": project}, status=status)


@require_GET
def audit_log(request):
    require(access.can_read_audit(request.user))
    events = AuditEvent.objects.select_related("actor")
    if request.GET.get("actor"):
        events = events.filter(actor__username=request.GET["actor"])
    if request.GET.get("action"):
        events = events.filter(action=request.GET["action"])
    if _id(request.GET.get("before")):
        events = events.filter(pk__lt=_id(request.GET.get("before")))
    rows = list(events[:101])
    return render(request, "annotation/audit.html", {"events": rows[:100],
                                                     "older": rows[99].pk if len(rows) > 100 else None})
