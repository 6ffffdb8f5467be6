"""manage.py export_dataset NAME --version N --format F --out PATH [--split S]: a snapshot to a file."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from webapp.datasets.models import Dataset, Snapshot
from webapp.datasets.services import exports


class Command(BaseCommand):
    help = "Write a built dataset snapshot to a file (a directory for --format hf), streamed."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version is the snapshot's here, not Django's own version flag
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("name", help="the dataset's name")
        parser.add_argument("--version", type=int, default=None, help="the snapshot version (default: the newest)")
        parser.add_argument("--format", required=True, help="jsonl, jsonl-prompt-completion, parquet, hf; "
                                                            "trajectories: nlac-jsonl, tau-bench, jsonl")
        parser.add_argument("--out", required=True, help="the file to write (a directory for hf)")
        parser.add_argument("--split", default="", help="train, validation or test (default: every split)")

    def handle(self, *args, name, version, format, out, split, **options):
        dataset = Dataset.objects.filter(name=name).first()
        if dataset is None:
            known = ", ".join(Dataset.objects.values_list("name", flat=True)[:20]) or "none yet"
            raise CommandError(f"no dataset named {name!r} (datasets: {known})")
        snapshots = Snapshot.objects.filter(dataset=dataset, status=Snapshot.READY)
        snapshot = snapshots.filter(version=version).first() if version else snapshots.order_by("-version").first()
        if snapshot is None:
            versions = snapshots.order_by("version").values_list("version", flat=True)
            built = ", ".join(f"v{v}" for v in versions) or "none"
            raise CommandError(f"{name} has no built version {version or ''}".strip() + f" (built: {built})")
        started = time.perf_counter()
        try:
            n = exports.write(snapshot, format, Path(out), split)
        except exports.ExportError as exc:
            raise CommandError(str(exc)) from None
        seconds = time.perf_counter() - started
        self.stdout.write(f"wrote {n} records of {snapshot.label} as {format} to {out} in {seconds:.1f} s")
