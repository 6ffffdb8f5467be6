"""Jobs through Redis and real Celery workers: queue overhead, critique throughput, recovery after SIGKILL.

    python bench/bench_jobs.py [--jobs 100] [--steps 16] [--lease 6] [--reap-every 2]

1. Queue overhead: ``--jobs`` export jobs of one trajectory each (no model), created at once, run end to
   end by one worker process (solo pool); jobs per minute from the first creation to the last finish.
2. Critique throughput: the first step of ``--steps`` real tau-bench trajectories critiqued by the
   embedded model, through a critique job on a worker (model load included, as a first job pays it), and
   the same steps through ``python -m nlac_core critique`` (model load included); steps per minute.
3. Recovery: a worker is SIGKILLed in the middle of a critique job; a second worker runs Celery beat with
   the reaper every ``--reap-every`` s; seconds from the SIGKILL until the job runs again, for a lease of
   ``--lease`` s (the job's lease must run out first: that wait is the design, and the lease is the knob).

Uses a fresh SQLite database and job folder under a temporary directory, and the Redis at REDIS_URL
(default 127.0.0.1:6379) on queues of its own.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from _setup import ROOT, SHARED, stop_workers, worker_bench

TAU = SHARED / "tau-bench" / "gpt-4o-airline.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--lease", type=int, default=6)
    parser.add_argument("--reap-every", type=int, default=2)
    args = parser.parse_args()

    tmp, queue, user, ids = worker_bench("nlac-bench-jobs-", NLAC_JOB_LEASE_S=str(args.lease),
                                         NLAC_REAP_EVERY_S=str(args.reap_every))
    from webapp.jobs.models import Job, StepCritique
    from webapp.jobs.services import lifecycle

    procs: list[subprocess.Popen] = []

    def start_worker(beat: bool = False) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", queue, "--pool", "solo",
               "-l", "warning", "-n", f"{queue}-{len(procs)}@%h", "--without-gossip", "--without-mingle",
               "--without-heartbeat"]
        if beat:
            cmd += ["-B", "--schedule", str(tmp / "celerybeat-schedule")]
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc

    def wait(condition, timeout: float, what: str, every: float = 0.05):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(every)
        raise SystemExit(f"timed out waiting for {what}")

    try:
        worker = start_worker()
        # warm-up: one job, so worker start-up is not counted
        warm = lifecycle.check_create_job(user, "export", {}, {"trajectory_ids": ids[:1]})
        wait(lambda: Job.objects.filter(pk=warm.pk, status=Job.SUCCEEDED).exists(), 60, "the warm-up job")

        started = time.perf_counter()
        jobs = [lifecycle.check_create_job(user, "export", {}, {"trajectory_ids": [ids[i % len(ids)]]})
                for i in range(args.jobs)]
        created = time.perf_counter() - started
        first = jobs[0].pk
        wait(lambda: Job.objects.filter(pk__gte=first, status=Job.SUCCEEDED).count() == args.jobs, 600,
             "the export jobs")
        seconds = time.perf_counter() - started
        print(f"queue overhead: {args.jobs} no-model jobs (export of 1 trajectory) end to end in {seconds:.1f} s "
              f"on one worker process = {args.jobs / seconds * 60:.0f} jobs/minute (creating them took "
              f"{created:.1f} s)")

        # critique throughput, job path (model load included: the worker has not loaded it yet)
        steps = args.steps
        started = time.perf_counter()
        job = lifecycle.check_create_job(user, "critique", {"steps": "first", "chunk_size": 16},
                                         {"trajectory_ids": ids[:steps]})
        # polled twice a second: on 2 cores a tighter poll would take CPU from the model and slow the job
        wait(lambda: Job.objects.filter(pk=job.pk, status__in=Job.FINISHED).exists(), 1800, "the critique job",
             every=0.5)
        job_s = time.perf_counter() - started
        job.refresh_from_db()
        row_s = (job.finished_at - job.created_at).total_seconds()
        assert StepCritique.objects.filter(job=job).count() == steps
        out = tmp / "cli.jsonl"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nlac_core", "critique", str(TAU), str(out), "--limit", str(steps),
                        "--steps", "first", "--chunk-size", "16"], cwd=ROOT, check=True, capture_output=True)
        cli_s = time.perf_counter() - started
        print(f"critique throughput ({steps} real tau-bench steps, embedded model, CPU, model load included): "
              f"job {steps / row_s * 60:.1f} steps/minute ({row_s:.1f} s from creation to finish on the row; "
              f"{job_s:.1f} s as polled), CLI {steps / cli_s * 60:.1f} steps/minute ({cli_s:.1f} s); "
              f"job/CLI = {cli_s / row_s:.2f}x")

        # recovery after SIGKILL
        job = lifecycle.check_create_job(user, "critique", {"steps": "first", "chunk_size": 1},
                                         {"trajectory_ids": ids[steps:steps + 8]})
        wait(lambda: StepCritique.objects.filter(job=job).exists(), 600, "the first chunk")
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        killed = time.perf_counter()
        start_worker(beat=True)
        wait(lambda: Job.objects.filter(pk=job.pk, status=Job.RUNNING, attempts=2).exists(), 600,
             "the job to run again")
        back = time.perf_counter() - killed
        wait(lambda: Job.objects.filter(pk=job.pk, status__in=Job.FINISHED).exists(), 900, "the job to finish")
        rows = StepCritique.objects.filter(job=job)
        unique = len(set(rows.values_list("trajectory_id", "step_index")))
        print(f"recovery: running again {back:.1f} s after SIGKILL (lease {args.lease} s, reaper every "
              f"{args.reap_every} s); finished with {rows.count()} critiques for 8 steps ({unique} distinct)")
    finally:
        stop_workers(procs, tmp)


if __name__ == "__main__":
    main()
