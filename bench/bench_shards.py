"""A sharded critique job on two real Celery workers against the same job on one: wall time and identical rows.

    python bench/bench_shards.py [--steps 16] [--chunk-size 4] [--shards 2]

The first step of ``--steps`` real tau-bench trajectories is critiqued by the embedded model twice: arm 1, one
worker process and ``shards=1``; arm 2, ``--shards`` worker processes and ``shards=--shards``. The cores are split
between the workers (``OMP_NUM_THREADS``: all of them for the one worker, an equal share each for several), as one
worker per GPU would split a GPU host. Each worker has loaded the model (a warm-up job) before anything is timed.
Wall time is from the job's creation to its finish on the row.

Criterion, fixed before the run: the sharded job writes exactly one critique per step and its rows (verdict,
P(success), predicted future) equal the one-shard job's; the speed-up is reported as measured (on 2 CPU cores
two workers share the same cores, so little is expected here; on a GPU host each shard has a GPU of its own).

Uses a fresh SQLite database and job folder under a temporary directory, and the Redis at REDIS_URL
(default 127.0.0.1:6379) on queues of its own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _setup import ROOT, stop_workers, worker_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2)
    args = parser.parse_args()
    cores = os.cpu_count() or 1

    tmp, queue, user, ids = worker_bench("nlac-bench-shards-")
    ids = ids[:args.steps]
    from webapp.jobs.models import Job, StepCritique
    from webapp.jobs.services import lifecycle

    procs: list[subprocess.Popen] = []

    def start_workers(n: int) -> list[subprocess.Popen]:
        threads = str(max(1, cores // n))
        started = []
        for _ in range(n):
            cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", queue, "--pool",
                   "solo", "-l", "warning", "-n", f"{queue}-{len(procs)}@%h", "--without-gossip",
                   "--without-mingle", "--without-heartbeat"]
            env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", "OMP_NUM_THREADS": threads}
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(proc)
            started.append(proc)
        return started

    def stop(workers: list[subprocess.Popen]) -> None:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            proc.wait(timeout=60)

    def finished(job: Job, timeout: float) -> Job:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.status in Job.FINISHED:
                return job
            time.sleep(0.5)  # polled twice a second: a tighter poll takes CPU from the model
        raise SystemExit(f"timed out waiting for job {job.pk}")

    def warm(n: int) -> None:
        """One tiny job per worker: each worker loads the model before the timed job (as a warm GPU worker)."""
        for _ in range(5):
            jobs = [lifecycle.check_create_job(user, "critique", {"steps": "first", "max_steps": 1},
                                               {"trajectory_ids": [ids[0]]}) for _ in range(n)]
            workers_seen = {finished(j, 900).worker for j in jobs}
            if len(workers_seen) == n:
                return  # every worker ran one (a fast worker may take two: then go again)
        raise SystemExit(f"the {n} workers did not all take a warm-up job")

    def arm(n_workers: int, shards: int) -> tuple[Job, float, dict]:
        workers = start_workers(n_workers)
        try:
            warm(n_workers)
            job = lifecycle.check_create_job(user, "critique", {"steps": "first", "chunk_size": args.chunk_size,
                                                                "shards": shards}, {"trajectory_ids": ids})
            job = finished(job, 3600)
            assert job.status == Job.SUCCEEDED, job.error
            jobs = [job.pk, *job.children.values_list("pk", flat=True)]
            rows = {(r.trajectory_id, r.step_index): (r.verdict, r.success_prob, r.record["predicted_future"])
                    for r in StepCritique.objects.filter(job__in=jobs)}
            assert StepCritique.objects.filter(job__in=jobs).count() == len(rows) == args.steps
            return job, (job.finished_at - job.created_at).total_seconds(), rows
        finally:
            stop(workers)

    try:
        started = time.perf_counter()
        one, one_s, one_rows = arm(1, 1)
        many, many_s, many_rows = arm(args.shards, args.shards)
        same = one_rows == many_rows
        children = list(many.children.order_by("id"))
        print(f"sharded critique, {args.steps} real tau-bench steps, embedded model, {cores} CPU cores, chunk "
              f"{args.chunk_size}:")
        print(f"  1 worker, 1 shard:    {one_s:.1f} s = {args.steps / one_s * 60:.1f} steps/minute")
        print(f"  {args.shards} workers, {args.shards} shards: {many_s:.1f} s = {args.steps / many_s * 60:.1f} "
              f"steps/minute; speed-up {one_s / many_s:.2f}x; shards ran on {len({c.worker for c in children})} "
              f"workers")
        print(f"  rows identical to the one-shard run: {same} ({len(many_rows)} critiques, one per step)")
        print(f"  criterion (one per step, identical rows): {'met' if same else 'NOT met'}; "
              f"bench wall time {time.perf_counter() - started:.0f} s")
    finally:
        stop_workers(procs, tmp)


if __name__ == "__main__":
    main()
