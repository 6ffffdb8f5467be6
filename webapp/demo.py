"""The demo of `make run`: a first run that shows the whole loop, safe to re-run.

``seed()`` creates the demo users, imports the demo runs from the shared data folder, builds a small dataset,
and, unless ``NLAC_DEMO=0`` (settings.NLAC_DEMO, always off under production settings), starts the loop:

- a **critique job** with the embedded model over the first three agent steps of two failed tau-bench episodes,
  launched in the background as the demo researcher (the Jobs page shows it live; critiques commit two steps at
  a time);
- a **queue** over the same six steps with overlap 2, assigned to ``annotator`` and ``annotator2``: the
  annotator lands on work at once, and each step shows the model's critique as soon as the job has written it;
- two **corrections** by ``annotator2`` (steps the critic has not reached yet, judged on their own), one accepted
  by the demo reviewer (gold for training) and one left for the reviewer's list.

Every part is looked up before it is made, so a second run adds nothing; a demo job that never reached the
broker (Redis down) is launched on the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from webapp.accounts.services import do_create_demo_users
from webapp.annotation.models import Annotation, Queue, Revision
from webapp.annotation.services import assignments, queues, reviews, revisions
from webapp.annotation.services.revisions import Target
from webapp.datasets.models import Dataset
from webapp.datasets.services.build import do_build_snapshot, do_create_snapshot
from webapp.datasets.services.datasets import check_create_dataset
from webapp.jobs.models import Job
from webapp.jobs.services import lifecycle
from webapp.trajectories.models import Project, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

# (project, domain, path under the shared data folder)
DEMO_FILES = (
    ("tau-bench airline (gpt-4o)", "tau-bench-airline", "tau-bench/gpt-4o-airline.json"),
    ("tau2-bench airline (grok-3)", "tau2-bench-airline",
     "tau2-bench/2025-10-05T22-50-14.083933_airline_llm_agent_grok-3_user_simulator_grok-3.json"),
)
DATASET_NAME = "demo tau2 episodes"
QUEUE_NAME = "demo: the first moves of two failed airline episodes"
STEPS = (0, 1, 2)  # of each demo episode
N_EPISODES = 2
# What annotator2 wrote on the first episode's steps 0 and 1 (gpt-4o asks for the user id, then asks for every
# booking detail before looking the user up). The first is accepted, the second waits for the reviewer.
CORRECTIONS = (
    {"verdict": "optimal", "predicted_outcome": "success",
     "reasoning": "Asking for the user id first is what the airline policy requires: without it the agent can "
                  "look up neither the profile nor the saved payment methods."},
    {"verdict": "suboptimal", "predicted_outcome": "failure",
     "reasoning": "It asks the user for trip type, cabin and every passenger before looking the user up: the "
                  "profile holds the saved passengers and payment methods, so half of these questions are wasted.",
     "suggestion": "Call get_user_details with the id just given, then ask only what the profile does not say."},
)

Say = Callable[[str], None]


class DemoRefused(Exception):
    """The demo was asked for under production settings."""


@dataclass(frozen=True)
class DemoLoop:
    job: Job | None
    queue: Queue


def seed(say: Say = print) -> DemoLoop | None:
    """Users, imports, the demo dataset, then the loop (when settings.NLAC_DEMO). Idempotent."""
    if settings.NLAC_PRODUCTION:
        raise DemoRefused("the demo is never seeded under production settings: its users have known passwords")
    say("Demo users (one per role, and a second annotator):")
    for demo, created in do_create_demo_users():
        state = "created" if created else "exists "
        say(f"  {state}  {demo.role:<10}  user: {demo.username:<10}  password: {demo.password}")
    root = settings.NLAC_SHARED_DATA
    if not root.is_dir():
        say(f"No demo data at {root}: skipping the benchmark imports and the demo loop.")
        return None
    for name, domain, rel in DEMO_FILES:
        _import(root / rel, name, domain, say)
    _dataset(say)
    if not settings.NLAC_DEMO:
        say("NLAC_DEMO=0: no demo critique job, queue or corrections.")
        return None
    return seed_loop(say)


def _import(path, name: str, domain: str, say: Say) -> None:
    if not path.is_file():
        say(f"  missing {path}, skipped")
        return
    result = do_import_file(path, do_get_or_create_project(name, domain=domain))
    if result.already_imported:
        say(f"  {name}: already imported")
    elif result.ok:
        say(f"  {name}: {result.batch.n_added} trajectories imported")
    else:
        say(f"  {name}: import failed: {result.batch.error}")


def _dataset(say: Say) -> None:
    """A small trajectories dataset of the tau2 run, built v1, so the Datasets page has something to open."""
    project = Project.objects.filter(name=DEMO_FILES[1][0], n_trajectories__gt=0).first()
    if project is None or Dataset.objects.filter(name=DATASET_NAME).exists():
        return
    dataset = check_create_dataset(None, DATASET_NAME, "trajectories", project, {},
                                   "The grok-3 tau2-bench airline episodes, split by task (demo data).")
    snapshot = do_build_snapshot(do_create_snapshot(dataset, None, "built by make run"))
    say(f"  dataset {snapshot.label}: {snapshot.n_records} trajectories")


def episodes(project: Project) -> list[Trajectory]:
    """The demo's episodes: the first failed ones (in file order) with all of the demo steps."""
    return list(project.trajectories.filter(success=False, n_steps__gt=max(STEPS)).order_by("id")[:N_EPISODES])


def seed_loop(say: Say = print) -> DemoLoop | None:
    project = Project.objects.filter(name=DEMO_FILES[0][0]).first()
    chosen = episodes(project) if project else []
    if len(chosen) < N_EPISODES:
        say("  demo loop skipped: the tau-bench airline run is not imported")
        return None
    users = {u.username: u for u in get_user_model().objects.filter(
        username__in=("annotator", "annotator2", "reviewer", "researcher"))}
    queue = _queue(project, chosen, users, say)
    _corrections(queue, users, say)
    job = _critique_job(queue, chosen, users["researcher"], say)
    return DemoLoop(job, queue)


def _queue(project: Project, chosen: list[Trajectory], users: dict, say: Say) -> Queue:
    found = Queue.objects.filter(name=QUEUE_NAME, project=project).first()
    if found is not None:
        return found
    steps = [(t.pk, s, None) for t in chosen for s in STEPS]  # no critique yet: the page shows the newest one
    spec = queues.QueueSpec(outcome="failed", extra={"demo": f"steps {', '.join(map(str, STEPS))} of "
                                                             f"{N_EPISODES} failed episodes"})
    queue = queues.do_create_queue(
        users["researcher"], QUEUE_NAME, project, spec, 2, [users["annotator"], users["annotator2"]], steps, 3600,
        "Is each move of the agent right? The model's critique appears on the step once the demo critique job "
        "has reached it: correct its verdict and reasoning, or judge the step yourself.")
    say(f"  queue {queue.name!r}: {queue.n_items} steps, overlap 2, for annotator and annotator2")
    return queue


@transaction.atomic
def _corrections(queue: Queue, users: dict, say: Say) -> None:
    author, reviewer = users["annotator2"], users["reviewer"]
    if Annotation.objects.filter(author=author, trajectory__in=queue.items.values("trajectory")).exists():
        return
    saved: list[Revision] = []
    for fields in CORRECTIONS:
        assignment = assignments.do_claim_next(queue, author)
        item = assignment.item
        saved.append(revisions.check_save_revision(author, Target(item.trajectory, item.step_index), fields, None,
                                                   queue_item=item))
    accepted = saved[0]
    reviews.do_review(reviewer, accepted.annotation, accepted.pk, "accept")
    say("  annotator2's corrections: one accepted by reviewer, one waiting for review")


def _critique_job(queue: Queue, chosen: list[Trajectory], researcher, say: Say) -> Job | None:
    known = (queue.spec.get("extra") or {}).get("demo_job")
    job = Job.objects.filter(pk=known).first() if known else None
    if job is not None:
        return job
    config = {"steps": ",".join(map(str, STEPS)), "max_steps": len(STEPS) * N_EPISODES, "chunk_size": 2}
    try:
        job = lifecycle.check_launch_job(researcher, "critique", config, {"trajectory_ids": [t.pk for t in chosen]})
    except lifecycle.BrokerUnavailable as error:
        say(f"  demo critique job not launched ({error}); the next `make run` launches it")
        return None
    queue.spec = {**queue.spec, "extra": {**(queue.spec.get("extra") or {}), "demo_job": job.pk}}
    queue.save(update_fields=["spec"])
    say(f"  critique job {job.pk}: the embedded model over {job.config['max_steps']} demo steps (Jobs page)")
    return job

