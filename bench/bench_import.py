"""Import speed of the gpt-4o tau-bench airline file (200 trajectories, 5,308 messages).

    python bench/bench_import.py [--repeat 3]        # SQLite in a temporary folder
    DATABASE_URL=postgres://... python bench/bench_import.py

Each repetition imports into a fresh project, so nothing is skipped as already there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from _setup import SHARED, django_with


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
