"""Snapshots: which target each step gets and where it came from, splits without task leakage, immutability."""

from __future__ import annotations

import pytest

from tests.webapp.datasets.conftest import (
    add_critique,
    add_refinement,
    add_target,
    build,
    correct,
    make_dataset,
)
from webapp.datasets.models import Snapshot, SnapshotRecord
from webapp.datasets.services.build import BuildError, do_build_snapshot, do_create_snapshot
from webapp.datasets.services.specs import SpecError


@pytest.fixture
def every_source(trajectory, personas):
    """Step 0: gold, submitted, Bellman and model critique; 1: submitted and Bellman; 2: Bellman only;
    3: a model critique only; 4: nothing."""
    annotator, reviewer = personas["annotator"], personas["reviewer"]
    c0 = add_critique(trajectory, 0, "suboptimal")
    gold = correct(annotator, trajectory, 0, c0, accept_by=reviewer, verdict="harmful")
    submitted0 = correct(personas["researcher"], trajectory, 0, c0, verdict="optimal")
    add_target(trajectory, 0)
    submitted1 = correct(annotator, trajectory, 1, None, verdict="suboptimal")
    add_target(trajectory, 1)
    add_target(trajectory, 2, "an older target")
    newest = add_target(trajectory, 2, "the newest target")
    c3 = add_critique(trajectory, 3, "optimal")
    return {"gold": gold, "submitted0": submitted0, "submitted1": submitted1, "target2": newest, "critique3": c3,
            "critique0": c0}


def _by_step(snapshot, trajectory):
    return {r.step_index: r for r in SnapshotRecord.objects.filter(snapshot=snapshot, trajectory=trajectory)}


def test_it_takes_the_best_target_of_each_step_with_its_provenance(project, trajectory, every_source, personas):
    snapshot = build(make_dataset(project, filter={"outcome": "failed"}))
    rows = _by_step(snapshot, trajectory)
    assert sorted(rows) == [0, 1, 2]  # step 3 has only a model critique (opt-in), step 4 nothing
    gold = rows[0]
    assert gold.source == "gold" and gold.revision_id == every_source["gold"].pk
    assert gold.author == personas["annotator"] and gold.critique_id == every_source["critique0"].pk
    assert gold.data["provenance"]["author"] == "annotator" and gold.data["provenance"]["verdict"] == "harmful"
    assert gold.data["completion"][0]["content"].startswith("FUTURE: human future 0\nOUTCOME: failure\n"
                                                            "VERDICT: harmful")
    assert "model future 0" in gold.data["prompt"][-1]["content"]  # the futures the model had predicted
    assert gold.prompt_id.startswith("evaluator_zero_shot@")  # the prompt the critic is judged with
    assert rows[1].source == "bellman"  # a submitted revision only counts when asked for
    assert rows[2].source == "bellman" and rows[2].target_id == every_source["target2"].pk
    assert rows[2].data["completion"][0]["content"] == "FUTURE: the newest target\nOUTCOME: failure"
    assert rows[2].data["provenance"]["job"] == rows[2].job_id and rows[2].prompt_id.startswith("successor@")
    card = snapshot.card
    assert card["counts_by_source"] == {"gold": 1, "bellman": 2}
    assert card["authors"] == ["annotator"] and card["human_revisions"] == 1
    assert card["steps_without_target"] == snapshot.card["steps_selected"] - 3
    assert sum(card["splits"].values()) == snapshot.n_records == 3
    assert set(card["prompt_ids"]) == {gold.prompt_id, rows[2].prompt_id}

    opted = build(make_dataset(project, name="with opt-ins", include_submitted=True, include_model_critiques=True))
    rows = _by_step(opted, trajectory)
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[0].source == "gold"  # gold still beats a submitted revision
    assert rows[1].source == "submitted" and rows[1].revision_id == every_source["submitted1"].pk
    assert rows[3].source == "model_critique" and rows[3].data["provenance"]["flag"] == "model critique"
    assert opted.card["flagged_model_critiques"] == 1

    human = build(make_dataset(project, name="humans only", human_only=True, include_submitted=True))
    assert {r.source for r in SnapshotRecord.objects.filter(snapshot=human)} == {"gold", "submitted"}


def test_it_builds_successor_distillation_and_runtime_critic_sets(project, trajectory, every_source, personas):
    successor = build(make_dataset(project, "successor_targets"))
    assert {r.source for r in successor.records.all()} == {"bellman"} and successor.n_records == 3

    c1 = add_critique(trajectory, 1, "optimal")
    add_refinement(trajectory, 1, 'TOOL_CALL: {"name": "get_user_details", "arguments": {"user_id": "x"}}', c1)
    add_refinement(trajectory, 2, "Let me check that reservation for you.")
    correct(personas["annotator"], trajectory, 3, every_source["critique3"], accept_by=personas["reviewer"],
            refined_content="I will look that up.",
            refined_tool_calls=[{"name": "get_reservation_details", "arguments": {"reservation_id": "ABC123"}}])
    distill = build(make_dataset(project, "distillation"))
    rows = _by_step(distill, trajectory)
    assert rows[3].source == "human_refinement" and rows[3].revision_id is not None
    assert rows[3].data["completion"][0]["content"] == (
        'I will look that up.\nTOOL_CALL: {"name": "get_reservation_details", "arguments": {"reservation_id": '
        '"ABC123"}}')
    assert "THE AGENT'S ACTION" not in rows[3].data["prompt"][-1]["content"]  # no critique, no action in the input
    assert rows[1].source == rows[2].source == "refinement"
    skip = build(make_dataset(project, "distillation", name="not optimal", skip_optimal=True))
    assert 1 not in _by_step(skip, trajectory)  # its critique said the action was already optimal
    human = build(make_dataset(project, "distillation", name="human refined", only_human_accepted=True))
    assert human.n_records == 1

    runtime = build(make_dataset(project, "runtime_critic", include_model_critiques=True))
    rows = _by_step(runtime, trajectory)
    assert rows[0].data["completion"][0]["content"] == "DECISION: intervene\nFEEDBACK: human suggestion 0"
    assert rows[1].data["completion"][0]["content"].startswith("DECISION: approve")  # the model said optimal
    assert rows[0].prompt_id.startswith("runtime_critic@")


def test_it_splits_by_task_so_no_task_is_in_two_splits(project):
    from tests.conftest import TAU_GPT4O, imported

    tau = imported("tau-bench airline", TAU_GPT4O)
    snapshot = build(make_dataset(tau, "trajectories", fractions=[0.6, 0.2, 0.2], split_seed=7))
    assert snapshot.n_records == tau.n_trajectories
    splits_of: dict[str, set[str]] = {}
    for key, split in SnapshotRecord.objects.filter(snapshot=snapshot).values_list("task_key", "split"):
        splits_of.setdefault(key, set()).add(split)
    assert all(len(s) == 1 for s in splits_of.values())
    assert {s for v in splits_of.values() for s in v} == {"train", "validation", "test"}
    card = snapshot.card
    assert sum(card["tasks_per_split"].values()) == len(splits_of)
    assert 0.4 < card["tasks_per_split"]["train"] / len(splits_of) < 0.8  # 50 tasks, each hashed on its own
    again = build(make_dataset(tau, "trajectories", name="same seed", fractions=[0.6, 0.2, 0.2], split_seed=7))
    assert again.content_hash == snapshot.content_hash


def test_it_never_changes_a_built_snapshot_and_numbers_the_next_build(project, trajectory, every_source, personas):
    dataset = make_dataset(project)
    v1 = build(dataset)
    before = {r.pk: r.data for r in v1.records.all()}
    # the annotator edits the gold correction; the reviewer accepts the new text
    new = correct(personas["annotator"], trajectory, 0, every_source["critique0"], accept_by=personas["reviewer"],
                  reasoning="a better reason")
    v1.refresh_from_db()
    assert {r.pk: r.data for r in v1.records.all()} == before
    assert v1.version == 1 and v1.status == Snapshot.READY
    v2 = build(dataset)
    assert v2.version == 2 and v2.content_hash != v1.content_hash
    assert _by_step(v2, trajectory)[0].revision_id == new.pk
    assert _by_step(v1, trajectory)[0].revision_id == every_source["gold"].pk
    record = v1.records.first()
    record.split = "test"
    with pytest.raises(ValueError, match="immutable"):
        record.save()
    with pytest.raises(BuildError, match="built once"):
        do_build_snapshot(v1)


def test_it_refuses_bad_definitions_and_empty_builds_with_the_field_named(project, trajectory):
    with pytest.raises(SpecError, match="filter.outcome"):
        make_dataset(project, filter={"outcome": "sometimes"})
    with pytest.raises(SpecError, match="filter.colour"):
        make_dataset(project, filter={"colour": "red"})
    with pytest.raises(SpecError, match="fractions"):
        make_dataset(project, fractions=[0, 0, 0])
    with pytest.raises(SpecError, match="include_submitted"):
        make_dataset(project, include_submitted="yes")
    with pytest.raises(SpecError, match="kind"):
        make_dataset(project, "everything")
    dataset = make_dataset(project)  # nothing has a target yet
    snapshot = do_create_snapshot(dataset, None)
    with pytest.raises(BuildError, match="no step of tau2-bench airline"):
        do_build_snapshot(snapshot)
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.FAILED and "no step" in snapshot.error
    assert not SnapshotRecord.objects.filter(snapshot=snapshot).exists()


def test_it_removes_a_failed_builds_records_and_leaves_a_lost_build_to_its_new_owner(project, trajectory,
                                                                                     every_source, monkeypatch):
    from nlac_core import datasets as core
    from webapp.datasets.services import build as service

    monkeypatch.setattr(service, "WRITE_BATCH", 1)  # every record is committed on its own
    calls = []

    def add(self, record):
        calls.append(record)
        if len(calls) == 3:
            raise RuntimeError("disk full")
    monkeypatch.setattr(core.ContentHash, "add", add)
    snapshot = do_create_snapshot(make_dataset(project), None)
    with pytest.raises(RuntimeError, match="disk full"):
        do_build_snapshot(snapshot)
    snapshot.refresh_from_db()
    assert snapshot.status == Snapshot.FAILED and "disk full" in snapshot.error
    assert not SnapshotRecord.objects.filter(snapshot=snapshot).exists()  # 2 were written, none are left

    calls.clear()
    lost = do_create_snapshot(snapshot.dataset, None)
    with pytest.raises(service.BuildStopped):
        do_build_snapshot(lost, still_owner=lambda: False)  # reaped meanwhile: the new run owns the build
    lost.refresh_from_db()
    assert lost.status == Snapshot.BUILDING and lost.error == ""


def test_it_checks_the_type_of_every_filter_value(project):
    for flt, field in (({"min_reward": "x"}, "filter.min_reward"), ({"source_model": {}}, "filter.source_model"),
                       ({"parse_failures": "yes"}, "filter.parse_failures"), ({"sample": True}, "filter.sample"),
                       ({"seed": 1.5}, "filter.seed")):
        with pytest.raises(SpecError, match=field):
            make_dataset(project, filter=flt)
    assert make_dataset(project, filter={"min_reward": 0, "max_reward": 0.5, "sample": 10}).spec["filter"][
        "sample"] == 10


def test_it_hashes_the_split_into_a_snapshots_identity(project):
    a = build(make_dataset(project, "trajectories", name="seed 1", split_seed=1))
    b = build(make_dataset(project, "trajectories", name="seed 2", split_seed=2))
    splits = lambda s: list(s.records.order_by("position").values_list("split", flat=True))  # noqa: E731
    assert splits(a) != splits(b) and a.content_hash != b.content_hash
