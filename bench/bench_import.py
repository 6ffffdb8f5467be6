"""Import speed of the gpt-4o tau-bench airline file (200 trajectories, 5,308 messages),
and peak memory of importing it against a file 20 times its size.

    python bench/bench_import.py [--repeat 3] [--no-memory]   # SQLite in a temporary folder
    DATABASE_URL=postgres://... python bench/bench_import.py

Each repetition imports into a fresh project, so nothing is skipped as already there.
The memory figure runs each import in a child process and reads its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import SHARED, django_with


def replicated(src: Path, times: int, out: Path) -> Path:
    """A tau-bench file `times` as long: each copy's task ids are shifted, so every record is new."""
    records = json.loads(src.read_text())
    with open(out, "w") as f:
        f.write("[")
        for c in range(times):
            for i, r in enumerate(records):
                f.write(("," if c or i else "") + json.dumps({**r, "task_id": r["task_id"] + 1000 * c}))
        f.write("]")
    return out


def child_import(path: str, url: str) -> None:
    """Run in a child process: import one file, print messages and peak RSS."""
    django_with(url)
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    result = do_import_file(path, do_get_or_create_project(f"mem-{Path(path).stem}"))
    assert result.ok, result.batch.error
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    readers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest reader process
    print(json.dumps({"messages": result.batch.n_messages, "rss_mb": rss_mb, "readers_mb": readers_mb,
                      "seconds": result.batch.duration_s}))


def memory(path: Path, tmp: str) -> None:
    big = replicated(path, 20, Path(tmp) / "gpt-4o-airline-x20.json")
    for f in (path, big):
        url = f"sqlite:///{tmp}/mem-{f.stem}.sqlite3"
        out = subprocess.run([sys.executable, __file__, "--child", str(f), url], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
        got = json.loads(out)
        readers = f", largest reader process {got['readers_mb']:.0f} MB" if got["readers_mb"] else ""
        print(f"peak RSS importing {f.name} ({f.stat().st_size / 1e6:.0f} MB, {got['messages']:,} messages): "
              f"{got['rss_mb']:.0f} MB{readers} in {got['seconds']:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_import(*args.child)
        return
    tmp = tempfile.mkdtemp(prefix="nlac-bench-import-")
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{tmp}/bench.sqlite3"
    django_with(url)
    from django.db import connection

    from webapp.trajectories.models import Project
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    path = SHARED / "tau-bench" / "gpt-4o-airline.json"
    times, messages = [], 0
    for i in range(args.repeat):
        Project.objects.filter(name__startswith="bench-import").delete()
        project = do_get_or_create_project(f"bench-import-{i}")
        started = time.perf_counter()
        result = do_import_file(path, project)
        times.append(time.perf_counter() - started)
        assert result.ok and result.batch.n_added == 200, result.batch.error
        messages = result.batch.n_messages
    best, median = min(times), statistics.median(times)
    print(f"database: {connection.vendor}")
    print(f"file: {path.name} ({path.stat().st_size / 1e6:.1f} MB, 200 trajectories, {messages} messages)")
    print(f"import time: median {median:.2f} s, best {best:.2f} s over {args.repeat} runs (target < 3 s)")
    print(f"rate: {messages / median:,.0f} messages/s, {200 / median:,.0f} trajectories/s (median)")
    if not args.no_memory:
        memory(path, tmp)


if __name__ == "__main__":
    main()
