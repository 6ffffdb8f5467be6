"""Shared fixtures: the real data folder, the personas, a few ready-made imports."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
TAU_GPT4O = SHARED / "tau-bench" / "gpt-4o-airline.json"
TAU_ERROR = SHARED / "tau-bench" / "pr55_error_record_deepseek-v3.json"
TAU2_GROK = SHARED / "tau2-bench" / "2025-10-05T22-50-14.083933_airline_llm_agent_grok-3_user_simulator_grok-3.json"
TAU2_EMPTY = SHARED / "tau2-bench" / "2025-10-05T07-40-31.711552_airline_llm_agent_gpt-4.1_user_simulator_gpt-4.1.json"
SWE_TRAJ = SHARED / "swe-agent" / "function_calling_simple.traj"
INSPECT_JSON = SHARED / "inspect-ai" / "log_formats.json"
INSPECT_EVAL = SHARED / "inspect-ai" / "log_formats.eval"

def pytest_sessionfinish(session, exitstatus):
    """Remove the session's job folder (logs, exports, trained checkpoints; see tests/settings.py)."""
    import shutil
    import tempfile

    from django.conf import settings

    folder = Path(getattr(settings, "NLAC_JOBS_DIR", ""))
    if folder.name.startswith("nlac-test-jobs-") and folder.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)


needs_shared = pytest.mark.skipif(not TAU_GPT4O.is_file(), reason="../shared/data is not beside this checkout")


@pytest.fixture
def personas(db):
    """annotator, reviewer, researcher, admin (one role each) and an outsider with none."""
    from django.contrib.auth import get_user_model

    from webapp.accounts.services import do_create_user

    users = {role: do_create_user(role, f"{role}-pw-123", role)[0]
             for role in ("annotator", "reviewer", "researcher", "admin")}
    users["outsider"] = get_user_model().objects.create_user("outsider", password="outsider-pw-123")
    return users


@pytest.fixture
def client_for(client, personas):
    """client_for("annotator") -> a test client logged in as that persona."""
    def login(name: str):
        client.force_login(personas[name])
        return client
    return login


def imported(name: str, path: Path):
    """A project holding one real file, imported through the service."""
    if not path.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    from webapp.trajectories.services.imports import do_import_file
    from webapp.trajectories.services.projects import do_get_or_create_project

    project = do_get_or_create_project(name)
    assert do_import_file(path, project).ok
    project.refresh_from_db()
    return project


@pytest.fixture
def tau_project(db):
    """The gpt-4o tau-bench airline run, imported."""
    return imported("tau-bench airline", TAU_GPT4O)
