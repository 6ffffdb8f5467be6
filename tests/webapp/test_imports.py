"""Importing real benchmark runs into the database."""

import collections
import json

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import TAU2_GROK, TAU_ERROR, TAU_GPT4O, needs_shared
from webapp.trajectories.models import ImportBatch, Message, Task, Trajectory
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [needs_shared, pytest.mark.django_db]


def test_it_stores_every_trajectory_task_and_message_of_the_gpt4o_run(tau_project):
    assert Trajectory.objects.filter(project=tau_project).count() == 200
    assert Task.objects.filter(project=tau_project).count() == 50
    roles = collections.Counter(Message.objects.filter(trajectory__project=tau_project)
                                .values_list("role", flat=True))
    assert roles == {"system": 200, "user": 1490, "assistant": 2454, "tool": 1164}


def test_it_computes_the_runs_pass_hat_k(tau_project):
    assert tau_project.n_trajectories == 200 and tau_project.n_tasks == 50
    assert tau_project.mean_reward == pytest.approx(0.42)
    got = {int(k): round(v, 3) for k, v in tau_project.pass_hat_k.items()}
    assert got == {1: 0.42, 2: 0.273, 3: 0.22, 4: 0.20}


def test_it_numbers_agent_steps_with_a_stable_identity(tau_project):
    t = Trajectory.objects.filter(project=tau_project).order_by("id").first()
    steps = list(t.messages.filter(step_index__isnull=False).order_by("position"))
    assert [m.step_index for m in steps] == list(range(t.n_steps))
    assert all(m.role == "assistant" for m in steps)
    assert not t.messages.filter(role__in=["user", "tool", "system"], step_index__isnull=False).exists()


def test_it_adds_nothing_when_the_same_file_is_imported_again(tau_project, tmp_path):
    again = do_import_file(TAU_GPT4O, tau_project)
    assert again.already_imported
    # The same records in a differently formatted file are recognised record by record.
    copy = tmp_path / TAU_GPT4O.name  # tau-bench files name their model
    copy.write_text(json.dumps(json.loads(TAU_GPT4O.read_text()), indent=1))
    result = do_import_file(copy, tau_project)
    assert result.ok and result.batch.n_added == 0 and result.batch.n_skipped == 200
    assert Trajectory.objects.filter(project=tau_project).count() == 200
    assert Message.objects.filter(trajectory__project=tau_project).count() == 5308


def test_it_keeps_the_harness_error_record_as_a_failed_trajectory(db):
    project = do_get_or_create_project("errors")
    assert do_import_file(TAU_ERROR, project).ok
    t = Trajectory.objects.get(project=project)
    assert t.termination_reason == "error" and not t.success and t.reward == 0.0
    assert "EOFError: EOF when reading a line" in t.error
    assert t.n_messages == 0


def test_it_rejects_a_file_with_one_bad_record_and_stores_none_of_it(db, tmp_path):
    data = json.loads(TAU_GPT4O.read_text())
    del data[150]["traj"][3]["role"]
    bad = tmp_path / "gpt-4o-airline-broken.json"
    bad.write_text(json.dumps(data))
    project = do_get_or_create_project("broken")
    result = do_import_file(bad, project)
    assert not result.ok
    assert result.batch.error == "gpt-4o-airline-broken.json, record 150, field 'traj[3].role': missing required field"
    assert Trajectory.objects.count() == 0 and Message.objects.count() == 0 and Task.objects.count() == 0
    assert ImportBatch.objects.get().status == ImportBatch.FAILED


def test_it_rejects_truncated_json_and_stores_nothing(db, tmp_path):
    bad = tmp_path / "cut.json"
    bad.write_bytes(TAU_GPT4O.read_bytes()[:200_000])
    result = do_import_file(bad, do_get_or_create_project("cut"))
    assert result.batch.error == ("cut.json, record 7, field 'traj[23].content': "
                                  "malformed JSON: the file is cut short (it ends at byte 200000)")
    assert Trajectory.objects.count() == 0


def test_it_imports_from_the_command_line_and_reports_failures(db, tmp_path, capsys):
    call_command("import_trajectories", str(TAU2_GROK), "--project", "tau2", "--no-progress")
    assert "20 trajectories added" in capsys.readouterr().out
    assert Trajectory.objects.filter(project__name="tau2").count() == 20
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(CommandError, match="1 of 1 files failed"):
        call_command("import_trajectories", str(bad), "--project", "tau2", "--format", "openai-jsonl",
                     "--no-progress")
    assert "bad.jsonl, line 1: malformed JSON" in capsys.readouterr().err
