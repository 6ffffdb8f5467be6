"""python manage.py export_trajectories --project NAME OUT.jsonl (NLAC Studio lossless JSONL)"""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from webapp.trajectories.models import Project, Trajectory
from webapp.trajectories.services.exports import do_export_jsonl


class Command(BaseCommand):
    help = "Export a project's trajectories as NLAC Studio JSONL ('-' writes to stdout)."

    def add_arguments(self, parser):
        parser.add_argument("out")
        parser.add_argument("--project", required=True)

    def handle(self, *args, out, project, **options):
        proj = Project.objects.filter(name=project).first() or Project.objects.filter(slug=project).first()
        if proj is None:
            raise CommandError(f"no project named {project!r}")
        qs = Trajectory.objects.filter(project=proj)
        if out == "-":
            n = do_export_jsonl(qs, sys.stdout)
        else:
            with open(Path(out), "w", encoding="utf-8") as f:
                n = do_export_jsonl(qs, f)
        self.stderr.write(f"exported {n} trajectories of {proj.name}")
