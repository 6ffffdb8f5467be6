"""python manage.py import_trajectories PATH... --project NAME [--format F] [--source-model M]"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from nlac_core.formats import FORMATS
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project


class Command(BaseCommand):
    # Django's system checks import every view and the API's schemas to check the URLconf (0.3 s of each run) and
    # check nothing a data command relies on; `manage.py check`, `migrate` and the servers run them.
    requires_system_checks = []
    help = "Import trajectory files (format auto-detected). Each file is atomic; re-imports add nothing."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--project", required=True, help="project name (created if new)")
        parser.add_argument("--format", choices=sorted(FORMATS), help="override format detection")
        parser.add_argument("--source-model", default="", help="agent model name when the file does not say")
        parser.add_argument("--domain", default="", help="domain of a new project, e.g. tau-bench-airline")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, paths, project, format, source_model, domain, no_progress, **options):
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise CommandError(f"not a file: {', '.join(missing)}")
        proj = do_get_or_create_project(project, domain=domain)
        failures = 0
        for path in paths:
            with tqdm(desc=path.name, unit=" traj", disable=no_progress or None, leave=False) as bar:
                result = do_import_file(path, proj, fmt=format, source_model=source_model, on_progress=bar.update)
            b = result.batch
            if result.already_imported:
                self.stdout.write(f"{path.name}: already imported into {proj.name}, nothing added")
            elif result.ok:
                self.stdout.write(f"{path.name} [{b.format}]: {b.n_added} trajectories added, {b.n_skipped} skipped, "
                                  f"{b.n_messages} messages, {b.n_tasks} new tasks in {b.duration_s:.2f}s")
            else:
                failures += 1
                self.stderr.write(f"{b.error}\n  nothing of {path.name} was imported")
        if failures:
            raise CommandError(f"{failures} of {len(paths)} files failed")
