"""Our own JSONL: export -> import round-trips exactly."""

import io
import json

import pytest

from nlac_core.formats import nlac_jsonl, read
from tests.conftest import INSPECT_EVAL, INSPECT_JSON, SWE_TRAJ, TAU2_GROK, TAU_ERROR, TAU_GPT4O, needs_shared
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services.exports import do_export_jsonl
from webapp.trajectories.services.imports import do_import_file
from webapp.trajectories.services.projects import do_get_or_create_project

pytestmark = [needs_shared, pytest.mark.django_db]


def export(project) -> str:
    out = io.StringIO()
    do_export_jsonl(Trajectory.objects.filter(project=project), out)
    return out.getvalue()


def test_it_round_trips_real_runs_through_our_jsonl(tmp_path):
    first = ""
    for path in (TAU_GPT4O, TAU_ERROR, TAU2_GROK):  # one project each: task ids are per benchmark
        original = do_get_or_create_project(f"original {path.name}")
        assert do_import_file(path, original).ok
        text = export(original)
        # The export holds exactly what the source file said.
        assert nlac_jsonl.loads_all(text) == [i.record for i in read(path) if hasattr(i.record, "messages")]
        first += text
    assert len(first.splitlines()) == 221

    path = tmp_path / "export.jsonl"
    path.write_text(first)
    copy = do_get_or_create_project("copy")
    result = do_import_file(path, copy)
    assert result.ok and result.batch.format == "nlac-jsonl" and result.batch.n_added == 221
    assert export(copy) == first
    hashes = set(Trajectory.objects.exclude(project=copy).values_list("content_hash", flat=True))
    assert set(Trajectory.objects.filter(project=copy).values_list("content_hash", flat=True)) == hashes
    # Importing our export of the tau2 run into its original project adds nothing: same content, same hash.
    tau2_only = tmp_path / "tau2.jsonl"
    tau2_only.write_text(export(original))
    assert do_import_file(tau2_only, original).batch.n_added == 0


def test_it_names_the_line_and_field_of_a_hand_edited_export(tmp_path):
    project = do_get_or_create_project("p")
    assert do_import_file(TAU2_GROK, project).ok
    lines = export(project).splitlines()
    lines[4] = lines[4].replace('"trial":0', '"trial":"zero"')
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines))
    result = do_import_file(path, do_get_or_create_project("q"))
    assert result.batch.error == "edited.jsonl, line 5, field 'trial': expected an integer, got a string"


def round_trip(source, tmp_path) -> tuple[str, str]:
    """Import ``source``, export it, import the export elsewhere: (first export, export of the re-import)."""
    original = do_get_or_create_project(f"original {source.name}")
    assert do_import_file(source, original).ok
    exported = tmp_path / f"{source.name}.export.jsonl"
    exported.write_text(export(original))
    copy = do_get_or_create_project(f"copy {source.name}")
    result = do_import_file(exported, copy)
    assert result.ok and result.batch.format == "nlac-jsonl", result.batch.error or result.batch.format
    hashes = sorted(Trajectory.objects.filter(project=original).values_list("content_hash", flat=True))
    assert sorted(Trajectory.objects.filter(project=copy).values_list("content_hash", flat=True)) == hashes
    return exported.read_text(), export(copy)


def test_it_round_trips_a_swe_agent_trajectory_longer_than_the_sniffers_head(tmp_path):
    """Keys are sorted, so ``schema`` comes after the messages: past 64 KiB on a long trajectory."""
    data = json.loads(SWE_TRAJ.read_text())
    data["history"] = data["history"] * 6  # the real trajectory, six times as long, with the info SWE-agent writes
    data["info"] = {"exit_status": "submitted", "submission": "diff --git a/x b/x",
                    "model_stats": {"instance_cost": 0.42, "tokens_sent": 51234, "tokens_received": 812}}
    source = tmp_path / "long.traj"
    source.write_text(json.dumps(data))
    first, again = round_trip(source, tmp_path)
    assert first.index('"schema"') > 65536
    assert again == first
    [record] = nlac_jsonl.loads_all(again)
    assert record.termination_reason == "submitted" and record.cost and record.usage and record.meta["info"]


@pytest.mark.parametrize("source", [SWE_TRAJ, INSPECT_JSON, INSPECT_EVAL, TAU_GPT4O], ids=lambda p: p.name)
def test_it_round_trips_every_importable_format_exactly(tmp_path, source):
    first, again = round_trip(source, tmp_path)
    assert again == first
    assert nlac_jsonl.loads_all(first) == [i.record for i in read(source) if hasattr(i.record, "messages")]


def test_it_round_trips_an_openai_chat_jsonl_file_exactly(tmp_path):
    source = tmp_path / "chats.jsonl"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x" * 70_000}]
    line = {"messages": messages, "reward": 1, "metadata": {"task_id": "t", "split": "d"}}
    source.write_text(json.dumps(line) + "\n")
    first, again = round_trip(source, tmp_path)
    assert again == first
