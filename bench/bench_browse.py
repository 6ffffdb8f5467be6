"""List and detail page server times on a database of 100,000 trajectories.

    python bench/bench_browse.py [--trajectories 100000] [--runs 30]
    DATABASE_URL=postgres://.../nlac_bench python bench/bench_browse.py

Builds (once; reused while its size matches) a database of copies of the real
gpt-4o tau-bench airline run: each copy gets its own 50 tasks and unique content
hashes, so indexes see realistic cardinalities (about 26.5 messages a trajectory,
2.65M messages for 100k). Then times pages through Django's test client (the
server side: middleware, queries, templates), logged in as a reviewer (who reads every project; an annotator
reads only the steps of their queues).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _setup import ROOT, SHARED, django_with, percentile

PROJECT = "bench tau-bench airline x500"


def build(n_target: int) -> None:
    from django.db import transaction
    from django.utils import timezone

    from nlac_core.formats import read
    from webapp import bulk
    from webapp.trajectories import convert, search
    from webapp.trajectories.models import Message, Project, Task, Trajectory
    from webapp.trajectories.services.projects import do_get_or_create_project, do_refresh_summary

    project = do_get_or_create_project(PROJECT, domain="tau-bench-airline")
    have = Trajectory.objects.filter(project=project).count()
    if have == n_target:
        print(f"reusing the bench database: {have} trajectories")
        do_refresh_summary(project)
        return
    Project.objects.filter(pk=project.pk).delete()
    project = do_get_or_create_project(PROJECT, domain="tau-bench-airline")
    records = [i.record for i in read(SHARED / "tau-bench" / "gpt-4o-airline.json")]
    # Message rows of each source record (trajectory id 0), built once and reused by every copy; written by the
    # importer's bulk loader (webapp/bulk.py).
    templates = [list(convert.message_values(r, 0)) for r in records]
    documents = [search.indexed(r) for r in records]
    trajectories = bulk.Table(Trajectory, convert.TRAJECTORY_COLUMNS)
    messages = bulk.Table(Message, convert.MESSAGE_COLUMNS)
    copies = -(-n_target // len(records))
    started = time.perf_counter()
    made = 0
    for c in range(copies):
        with transaction.atomic():
            tasks = {}
            for r in records:
                if r.task.external_id not in tasks:
                    tasks[r.task.external_id] = Task(project=project, external_id=f"{c}:{r.task.external_id}",
                                                     content_hash=f"{c}:{r.task.external_id}",
                                                     **convert.task_fields(r.task))
            Task.objects.bulk_create(tasks.values())
            now = timezone.now()
            chosen = records[: n_target - made]
            hashes = [f"bench-{c}-{i}" for i in range(len(chosen))]
            trajectories.load(convert.in_context(
                convert.trajectory_values(r, h, source_format="tau-bench", imported_from="bench", record_index=i),
                project.pk, tasks[r.task.external_id].pk, None, now)
                for i, (r, h) in enumerate(zip(chosen, hashes, strict=True)))
            ids = dict(Trajectory.objects.filter(project=project, content_hash__in=hashes)
                       .values_list("content_hash", "id"))
            messages.load((ids[h], *m[1:]) for h, tmpl in zip(hashes, templates, strict=False) for m in tmpl)
            search.index((ids[h], doc) for h, doc in zip(hashes, documents, strict=False))
            made += len(chosen)
        if c % 50 == 0:
            print(f"  built {made:,} trajectories in {time.perf_counter() - started:.0f}s")
    do_refresh_summary(project)
    print(f"built {made:,} trajectories in {time.perf_counter() - started:.0f}s")


def timed(client, url: str, runs: int) -> tuple[float, float]:
    client.get(url)  # warm caches, as a user's second request would
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), percentile(times, 0.95)


def db_size() -> str:
    from django.db import connection

    if connection.vendor == "sqlite":
        name = Path(connection.settings_dict["NAME"])
        total = sum(p.stat().st_size for p in name.parent.glob(name.name + "*"))
        return f"{total / 1e9:.2f} GB (SQLite file + WAL)"
    with connection.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        return f"{cur.fetchone()[0] / 1e9:.2f} GB (PostgreSQL)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    bench_dir = ROOT / "var" / "bench"
    bench_dir.mkdir(parents=True, exist_ok=True)
    django_with(os.environ.get("DATABASE_URL") or f"sqlite:///{bench_dir / 'bench.sqlite3'}")
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from webapp.accounts.services import do_create_user
    from webapp.trajectories import queries
    from webapp.trajectories.models import Message, Project, Trajectory

    build(args.trajectories)
    setup_test_environment()
    client = Client()
    client.force_login(do_create_user("bench-reviewer", "bench-reviewer-pw", "reviewer")[0])
    project = Project.objects.get(name=PROJECT)
    n_msgs = Message.objects.filter(trajectory__project=project).count()
    base = f"/projects/{project.slug}/"

    def deep_cursor(sort: str, filters: dict, depth: int) -> str:
        field, desc = queries.SORTS[sort]
        qs = queries.filtered({"project": project, **filters})
        order = [f"-{field}" if desc else field, "-id" if desc else "id"]
        row = qs.order_by(*order).values(field, "id")[depth - 1]
        return queries.encode_cursor(sort, row)

    failure_deep = deep_cursor("newest", {"outcome": "failure"}, 40_000)
    reward_deep = deep_cursor("reward_desc", {}, 50_000)
    long_one = Trajectory.objects.filter(project=project, n_messages__gte=60).order_by("id").first()
    cases = [
        ("list, first page", base),
        ("list, first page, filter outcome=failure", base + "?outcome=failure"),
        ("list, deep page (row 40,000), filter outcome=failure", base + f"?outcome=failure&cursor={failure_deep}"),
        ("list, deep page (row 50,000), sort reward_desc", base + f"?sort=reward_desc&cursor={reward_deep}"),
        ("list, all projects, filter termination=max_steps", "/trajectories/?termination_reason=max_steps"),
        ("list, htmx partial, filter outcome=success", base + "?outcome=success"),
        (f"detail, {long_one.n_messages}-message trajectory", f"/trajectories/{long_one.pk}/"),
        ("step page, step 5 of that trajectory", f"/trajectories/{long_one.pk}/steps/5/"),
        ("search, common word (q=insurance)", base + "?q=insurance"),
        ("search, a word no message has", base + "?q=zqxjnowhere"),
    ]
    print(f"database: {connection.vendor}; {Trajectory.objects.count():,} trajectories, {n_msgs:,} messages; "
          f"size {db_size()}")
    print(f"server time over {args.runs} requests (targets: list < 150 ms, detail < 100 ms)")
    for name, url in cases:
        if "htmx" in name:
            client.defaults["HTTP_HX_REQUEST"] = "true"
        runs = min(args.runs, 5) if name.startswith("search") else args.runs
        median, p95 = timed(client, url, runs)
        client.defaults.pop("HTTP_HX_REQUEST", None)
        print(f"  {name:<58} median {median:7.1f} ms   p95 {p95:7.1f} ms")


if __name__ == "__main__":
    main()
