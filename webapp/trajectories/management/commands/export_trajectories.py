"""python manage.py export_trajectories --project NAME OUT [--format nlac-jsonl|tau-bench]"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from webapp.trajectories.models import Project, Trajectory
from webapp.trajectories.services.exports import FORMATS, do_export


class Command(BaseCommand):
    # Django's system checks import every view and the API's schemas to check the URLconf (0.3 s of each run) and
    # check nothing a data command relies on; `manage.py check`, `migrate` and the servers run them.
    requires_system_checks = []
    help = ("Export a project's trajectories as NLAC Studio's lossless JSONL (re-importable) or a tau-bench results "
            "JSON array ('-' writes to stdout), streamed from the database.")

    def add_arguments(self, parser):
        parser.add_argument("out")
        parser.add_argument("--project", required=True)
        parser.add_argument("--format", choices=FORMATS, default="nlac-jsonl")

    def handle(self, *args, out, project, format, **options):
        proj = Project.objects.filter(name=project).first() or Project.objects.filter(slug=project).first()
        if proj is None:
            raise CommandError(f"no project named {project!r}")
        qs = Trajectory.objects.filter(project=proj)
        if out == "-":
            n = do_export(qs, sys.stdout, format)
        else:
            with open(Path(out), "w", encoding="utf-8") as f:
                n = do_export(qs, f, format)
        self.stderr.write(f"exported {n} trajectories of {proj.name}")
