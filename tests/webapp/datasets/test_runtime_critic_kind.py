"""The runtime critic dataset kind on runtime checks: one record per revision round, each about the proposal it
judged; human corrections of a check (gold first) pair the human's verdict with that proposal; the critic-data
pipeline's labels come before model checks; and none of these leak into the critic-target kind."""

from __future__ import annotations

from nlac_core.backends.base import Provenance
from nlac_core.outputs import to_json
from nlac_core.successor import ref_of
from nlac_core.supervision import as_critique
from tests.webapp.datasets.conftest import add_critique, build, correct, job, make_dataset, step_view
from webapp.datasets.models import SnapshotRecord
from webapp.jobs.models import StepCritique

PROV = Provenance(prompt_id="runtime_critic@test0004", backend="hf", model="smollm2")
REJECTED = 'TOOL_CALL: {"name": "cancel_reservation", "arguments": {"reservation_id": "NO_SUCH"}}'


def add_check(trajectory, index, round_no, decision, proposal=None, feedback="", mode="runtime", job_row=None):
    step = step_view(trajectory, index)
    from nlac_core.actions import render_message_action

    proposal = proposal or render_message_action(step.action)
    c = as_critique(ref_of(step), {"round": round_no, "proposal": proposal, "decision": decision,
                                   "feedback": feedback, "executed": proposal != REJECTED}, PROV)
    return StepCritique.objects.create(trajectory=trajectory, step_index=index,
                                       job=job_row or job("supervised-rollout"), verdict=c.verdict, parse_ok=True,
                                       mode=mode, round=round_no,
                                       prompt_id=PROV.prompt_id, record=to_json(c))


def records(snapshot, trajectory):
    return list(SnapshotRecord.objects.filter(snapshot=snapshot, trajectory=trajectory).order_by("position"))


def prompt_of(row) -> str:
    return row.data["prompt"][-1]["content"]


def test_it_makes_a_record_per_round_about_the_proposal_judged(project, trajectory, personas):
    add_check(trajectory, 0, 0, "approve", job_row=job("supervised-rollout"))  # an older job's check: left out
    run = job("supervised-rollout")
    add_check(trajectory, 0, 0, "intervene", REJECTED, "no reservation NO_SUCH: look it up first", job_row=run)
    add_check(trajectory, 0, 1, "approve", job_row=run)
    checked1 = add_check(trajectory, 1, 0, "intervene", REJECTED, "the model's feedback", job_row=run)
    correct(personas["annotator"], trajectory, 1, checked1, accept_by=personas["reviewer"], verdict="optimal",
            suggestion="the call was fine")
    add_check(trajectory, 2, 0, "intervene", REJECTED, "expected get_reservation_details first",
              mode="runtime-label", job_row=job("critic-data"))
    add_check(trajectory, 2, 0, "approve")  # a model check: the label wins

    snapshot = build(make_dataset(project, "runtime_critic", include_model_critiques=True))
    rows = records(snapshot, trajectory)
    by_step = [(r.step_index, r.source, r.data["completion"][0]["content"]) for r in rows if r.step_index <= 2]
    assert by_step == [
        (0, "model_critique", "DECISION: intervene\nFEEDBACK: no reservation NO_SUCH: look it up first"),
        (0, "model_critique", "DECISION: approve\nFEEDBACK: the action follows the policy"),
        (1, "gold", "DECISION: approve\nFEEDBACK: the call was fine"),
        (2, "label", "DECISION: intervene\nFEEDBACK: expected get_reservation_details first")]
    assert "NO_SUCH" in prompt_of(rows[0]) and "NO_SUCH" not in prompt_of(rows[1])  # round 1 judged the executed one
    assert "NO_SUCH" in prompt_of(rows[2]) and "NO_SUCH" in prompt_of(rows[3])
    assert rows[0].data["provenance"]["round"] == 0 and rows[1].data["provenance"]["round"] == 1

    without_model = build(make_dataset(project, "runtime_critic", name="humans and labels"))
    assert {(r.step_index, r.source) for r in records(without_model, trajectory)} == {(1, "gold"), (2, "label")}


def test_it_keeps_runtime_checks_and_their_corrections_out_of_critic_targets(project, trajectory, personas):
    checked = add_check(trajectory, 0, 0, "intervene", REJECTED, "feedback")
    correct(personas["annotator"], trajectory, 0, checked, accept_by=personas["reviewer"], verdict="harmful")
    add_critique(trajectory, 1, "optimal")
    snapshot = build(make_dataset(project, "critic_targets", include_model_critiques=True))
    assert [(r.step_index, r.source) for r in records(snapshot, trajectory)] == [(1, "model_critique")]
