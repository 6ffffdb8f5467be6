"""Dataset figures: export throughput and peak memory of the writers, snapshot build time, export from the DB.

    python bench/bench_datasets.py                 # everything below
    python bench/bench_datasets.py --skip-build    # only the writers (1.)

1. The writers alone: N generated critic-target records (a ~3.7 KB evaluator prompt, a ~0.4 KB critique,
   provenance; text drawn at random from pools so compression has real work) streamed to JSONL and to Parquet, at
   100k and 1M records. Each run is a fresh process, so its peak RSS (ru_maxrss) is its own; the figure
   that matters is that peak memory stays flat as N grows tenfold.
2. A snapshot build of ~100k steps: the real gpt-4o tau-bench run stored 41 times over (8,200 trajectories,
   100,614 agent steps) with a Bellman target on every step, built as a critic-targets snapshot (states
   rendered, prompts made, records written and hashed) into a bench SQLite file (or DATABASE_URL).
3. That snapshot exported from the database (streamed rows -> JSONL / Parquet), each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import ROOT, SHARED, django_with

DB_FILE = ROOT / "var" / "bench-datasets.sqlite3"
WORDS = (
    "the", "agent", "user", "reservation", "flight", "cancel", "refund", "policy", "basic", "economy", "cabin",
    "baggage", "verify", "identity", "tool", "call", "get_user_details", "update", "booking", "payment",
    "certificate", "confirm", "change", "date", "origin", "destination", "passenger", "insurance", "compensation",
    "delayed", "transfer", "human", "agent",
)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generated(n: int, seed: int = 0):
    """n distinct records: states and critiques drawn from pools of random text, each with its step number."""
    rng = random.Random(seed)
    system = "You judge one action of an AI agent. " + " ".join(rng.choice(WORDS) for _ in range(90))
    states = [" ".join(rng.choice(WORDS) for _ in range(330)) for _ in range(997)]
    critiques = [" ".join(rng.choice(WORDS) for _ in range(45)) for _ in range(991)]
    for i in range(n):
        yield {"prompt": [{"role": "system", "content": system},
                          {"role": "user", "content": f"CONVERSATION SO FAR:\n{states[i % 997]}\n\n"
                                                      f"THE AGENT'S ACTION:\nstep {i}"}],
               "completion": [{"role": "assistant", "content": f"FUTURE: {critiques[i % 991]}\nOUTCOME: failure\n"
                                                               "VERDICT: harmful\nREASON: x\nSUGGESTION: y"}],
               "split": ("train", "validation", "test")[i % 10 // 8 + (i % 10 == 9)], "source": "gold",
               "provenance": {"source": "gold", "revision": i, "author": f"annotator-{i % 7}",
                              "prompt_id": "evaluator@3f2a9c1e", "verdict": "harmful"}}


def run_writer(fmt: str, n: int) -> None:
    """In its own process: stream n generated records to a file, print one JSON line of figures."""
    sys.path.insert(0, str(ROOT))
    from nlac_core.formats import dataset_exports as ex

    base = peak_mb()
    with tempfile.TemporaryDirectory(prefix="nlac-bench-") as tmp:
        path = Path(tmp) / f"out.{fmt}"
        t0 = time.perf_counter()
        if fmt == "parquet":
            written = ex.write_parquet(generated(n), path)
        else:
            with path.open("w", encoding="utf-8") as out:
                written = ex.write_jsonl(generated(n), out)
        seconds = time.perf_counter() - t0
        size = path.stat().st_size
    print(json.dumps({"format": fmt, "n": written, "seconds": seconds, "size": size, "peak_mb": peak_mb(),
                      "base_mb": base}))


def writers(sizes: list[int]) -> None:
    gen_t0 = time.perf_counter()
    for _ in generated(100_000):
        pass
    gen = 100_000 / (time.perf_counter() - gen_t0)
    print(f"record generation alone: {gen:,.0f} records/s (included in the figures below)")
    for fmt in ("jsonl", "parquet"):
        for n in sizes:
            out = subprocess.run([sys.executable, __file__, "--writer", fmt, str(n)], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            print(f"{fmt:8s} {r['n']:>9,} records: {r['n'] / r['seconds']:>9,.0f} records/s, "
                  f"{r['seconds']:6.1f} s, {r['size'] / 1e6:8.1f} MB file, peak RSS {r['peak_mb']:6.0f} MB "
                  f"(after imports {r['base_mb']:.0f} MB)")


def store_steps(copies: int):
    from dataclasses import replace

    from nlac_core.backends.base import Provenance
    from nlac_core.formats import tau_bench
    from nlac_core.outputs import BellmanTarget, StepRef, to_json
    from webapp.jobs.models import Job, StepTarget
    from webapp.trajectories.models import Trajectory
    from webapp.trajectories.services.imports import do_store_records
    from webapp.trajectories.services.projects import do_get_or_create_project

    project = do_get_or_create_project("bench datasets")
    if project.trajectories.count() >= 200 * copies:
        return project
    originals = [item.record for item in tau_bench.read(SHARED / "tau-bench" / "gpt-4o-airline.json")]
    job = Job.objects.create(kind="backup", status=Job.SUCCEEDED, config={})
    prov = Provenance(prompt_id="backup@bench", backend="hf", model="smollm2")
    t0 = time.perf_counter()
    for copy in range(copies):
        records = [replace(r, trial=copy * 100 + r.trial) for r in originals]
        do_store_records(project, records, f"bench copy {copy}", fmt="tau-bench")
        by_hash = dict(Trajectory.objects.filter(project=project, content_hash__in=[r.content_hash() for r in records])
                       .values_list("content_hash", "pk"))
        rows = []
        for r in records:
            h = r.content_hash()
            for index in range(len(r.steps)):
                target = BellmanTarget(step=StepRef(h, index, r.task.external_id), text=f"the user confirms step "
                                       f"{index} and the booking changes", success_prob=0.3, terminal=False,
                                       provenance=prov)
                rows.append(StepTarget(trajectory_id=by_hash[h], step_index=index, job=job, success_prob=0.3,
                                       prompt_id="backup@bench", record=to_json(target)))
        StepTarget.objects.bulk_create(rows, batch_size=2000)
    print(f"stored {project.trajectories.count():,} trajectories and {StepTarget.objects.count():,} Bellman targets "
          f"in {time.perf_counter() - t0:.0f} s (setup, not a figure)")
    return project


def build(copies: int) -> int:
    from webapp.datasets.models import Dataset
    from webapp.datasets.services.build import do_build_snapshot, do_create_snapshot
    from webapp.datasets.services.datasets import check_create_dataset
    from webapp.trajectories.models import Message

    project = store_steps(copies)
    dataset = Dataset.objects.filter(name="bench critic").first() or check_create_dataset(
        None, "bench critic", "critic_targets", project, {})
    steps = Message.objects.filter(trajectory__project=project, step_index__isnull=False).count()
    t0 = time.perf_counter()
    snapshot = do_build_snapshot(do_create_snapshot(dataset, None))
    seconds = time.perf_counter() - t0
    print(f"snapshot build: {steps:,} steps -> {snapshot.n_records:,} records in {seconds:.1f} s "
          f"({snapshot.n_records / seconds:,.0f} records/s), {snapshot.label}, peak RSS {peak_mb():.0f} MB")
    return snapshot.pk


def run_db_export(fmt: str, snapshot_id: int) -> None:
    from webapp.datasets.models import Snapshot
    from webapp.datasets.services.exports import write

    snapshot = Snapshot.objects.get(pk=snapshot_id)
    base = peak_mb()
    with tempfile.TemporaryDirectory(prefix="nlac-bench-") as tmp:
        t0 = time.perf_counter()
        n = write(snapshot, fmt, Path(tmp) / f"out.{fmt}")
        seconds = time.perf_counter() - t0
    print(json.dumps({"format": fmt, "n": n, "seconds": seconds, "peak_mb": peak_mb(), "base_mb": base}))


def db_exports(snapshot_id: int) -> None:
    for fmt in ("jsonl", "parquet"):
        out = subprocess.run([sys.executable, __file__, "--db-export", fmt, str(snapshot_id)], capture_output=True,
                             text=True, check=True, env=os.environ).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        print(f"export from the database, {fmt:8s} {r['n']:,} records: {r['n'] / r['seconds']:,.0f} records/s, "
              f"{r['seconds']:.1f} s, peak RSS {r['peak_mb']:.0f} MB (after Django setup {r['base_mb']:.0f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writer", nargs=2, metavar=("FORMAT", "N"))
    parser.add_argument("--db-export", nargs=2, metavar=("FORMAT", "SNAPSHOT"))
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--copies", type=int, default=41)
    parser.add_argument("--skip-build", action="store_true")
    args = parser.parse_args()
    if args.writer:
        return run_writer(args.writer[0], int(args.writer[1]))
    db_url = os.environ.get("DATABASE_URL") or f"sqlite:///{DB_FILE}"
    os.environ["DATABASE_URL"] = db_url
    if args.db_export:
        django_with(db_url)
        return run_db_export(args.db_export[0], int(args.db_export[1]))
    writers([int(n) for n in args.sizes.split(",")])
    if not args.skip_build:
        DB_FILE.parent.mkdir(parents=True, exist_ok=True)
        django_with(db_url)
        db_exports(build(args.copies))


if __name__ == "__main__":
    main()
