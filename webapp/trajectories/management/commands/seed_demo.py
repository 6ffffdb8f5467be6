"""Demo users and demo data for `make run`: safe and fast to re-run."""

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from webapp.datasets.models import Dataset
from webapp.datasets.services.build import do_build_snapshot, do_create_snapshot
from webapp.datasets.services.datasets import check_create_dataset
from webapp.trajectories.models import Project
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

# (project, domain, path under the shared data folder)
DEMO_FILES = (
    ("tau-bench airline (gpt-4o)", "tau-bench-airline", "tau-bench/gpt-4o-airline.json"),
    ("tau2-bench airline (grok-3)", "tau2-bench-airline",
     "tau2-bench/2025-10-05T22-50-14.083933_airline_llm_agent_grok-3_user_simulator_grok-3.json"),
)


class Command(BaseCommand):
    help = "Create the demo users and import the demo runs from the shared data folder when it is there."

    def handle(self, *args, **options):
        self.stdout.write("Demo users (one per role):")
        call_command("create_demo_users", stdout=self.stdout)
        root = settings.NLAC_SHARED_DATA
        if not root.is_dir():
            self.stdout.write(f"No demo data at {root}: skipping the benchmark imports.")
            return
        for name, domain, rel in DEMO_FILES:
            path = root / rel
            if not path.is_file():
                self.stdout.write(f"  missing {path}, skipped")
                continue
            result = do_import_file(path, do_get_or_create_project(name, domain=domain))
            b = result.batch
            if result.already_imported:
                self.stdout.write(f"  {name}: already imported")
            elif result.ok:
                self.stdout.write(f"  {name}: {b.n_added} trajectories imported")
            else:
                self.stderr.write(f"  {name}: import failed: {b.error}")
        self._demo_dataset()

    def _demo_dataset(self) -> None:
        """A small trajectories dataset of the tau2 run, built v1, so the Datasets page has something to open."""
        project = Project.objects.filter(name=DEMO_FILES[1][0], n_trajectories__gt=0).first()
        if project is None or Dataset.objects.filter(name="demo tau2 episodes").exists():
            return
        dataset = check_create_dataset(None, "demo tau2 episodes", "trajectories", project, {},
                                       "The grok-3 tau2-bench airline episodes, split by task (demo data).")
        snapshot = do_build_snapshot(do_create_snapshot(dataset, None, "built by make run"))
        self.stdout.write(f"  dataset {snapshot.label}: {snapshot.n_records} trajectories")
