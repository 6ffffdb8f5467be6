"""Projects and their cached aggregates (list pages read these, never a live GROUP BY)."""

from __future__ import annotations

from django.db.models import Avg, Count, IntegerField, Sum
from django.db.models.functions import Cast
from django.utils.text import slugify

from nlac_core.metrics import pass_hat_ks
from webapp.trajectories.models import Project, Trajectory

FACET_FIELDS = ("source_model", "termination_reason")
COUNTERFACTUALS = "has_counterfactuals"
FACET_LIMIT = 200


def do_get_or_create_project(name: str, domain: str = "") -> Project:
    name = name.strip()
    if not name:
        raise ValueError("a project needs a name")
    project = Project.objects.filter(name=name).first()
    if project is None:
        base = slugify(name)[:180] or "project"
        slug, n = base, 1
        while Project.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        project = Project.objects.create(name=name, slug=slug, domain=domain)
    return project


def task_outcomes(project: Project) -> list[tuple[int, int]]:
    """(trials, successes) per task, from indexed columns only."""
    rows = (Trajectory.objects.filter(project=project).values("task_id")
            .annotate(n=Count("id"), c=Sum(Cast("success", IntegerField()))).values_list("n", "c"))
    return [(n, c or 0) for n, c in rows]


def do_refresh_summary(project: Project) -> Project:
    trajectories = Trajectory.objects.filter(project=project)
    agg = trajectories.aggregate(n=Count("id"), mean=Avg("reward"), tasks=Count("task", distinct=True),
                                 messages=Sum("n_messages"))  # each row's count: no join over the messages
    project.n_trajectories = agg["n"]
    project.n_tasks = agg["tasks"]
    project.mean_reward = agg["mean"]
    project.n_messages = agg["messages"] or 0
    project.pass_hat_k = {str(k): v for k, v in pass_hat_ks(task_outcomes(project)).items()}
    project.facets = {
        name: [v for v in trajectories.order_by(name).values_list(name, flat=True).distinct()[:FACET_LIMIT] if v]
        for name in FACET_FIELDS
    }
    # Whether any of them re-runs another from a step (supervision's counterfactuals): a trajectory page asks its
    # project's re-runs of it only then, since finding them reads a JSON key of every row.
    project.facets[COUNTERFACTUALS] = trajectories.filter(meta__counterfactual__of__isnull=False).exists()
    project.save(update_fields=["n_trajectories", "n_tasks", "mean_reward", "n_messages", "pass_hat_k", "facets"])
    return project
