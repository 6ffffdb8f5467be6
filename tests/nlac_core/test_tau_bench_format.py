"""tau-bench results files, read by nlac_core alone (no database)."""

import collections
import json

import pytest

from nlac_core.formats import FormatError, read
from nlac_core.records import TrajectoryRecord
from tests.conftest import TAU_ERROR, TAU_GPT4O, needs_shared

pytestmark = needs_shared


def trajectories(path):
    return [i.record for i in read(path) if isinstance(i.record, TrajectoryRecord)]


def test_it_reads_every_record_and_message_of_the_gpt4o_airline_run():
    records = trajectories(TAU_GPT4O)
    assert len(records) == 200
    assert len({r.task.external_id for r in records}) == 50
    roles = collections.Counter(m.role for r in records for m in r.messages)
    assert roles == {"system": 200, "user": 1490, "assistant": 2454, "tool": 1164}
    assert sum(r.reward for r in records) / 200 == pytest.approx(0.42)


def test_it_keeps_tool_calls_structured_and_linked_to_their_results():
    record = trajectories(TAU_GPT4O)[0]
    call_msg = next(m for m in record.messages if m.tool_calls)
    call = call_msg.tool_calls[0]
    assert call.name == "get_user_details"
    assert call.arguments == {"user_id": "mia_li_3668"}  # parsed from the JSON string
    result = next(m for m in record.messages if m.role == "tool")
    assert result.tool_call_id == call.id and result.name == "get_user_details"


def test_it_takes_the_task_and_gold_actions_from_the_record_itself():
    record = trajectories(TAU_GPT4O)[0]
    assert record.task.instruction.startswith("You are mia_li_3668")
    assert record.task.gold_actions[0]["name"] == "book_reservation"
    assert record.policy.startswith("# Airline Agent Policy")


def test_it_marks_runs_that_hit_the_step_cap():
    records = trajectories(TAU_GPT4O)
    capped = [r for r in records if r.reward_info is None]
    assert len(capped) == 5
    assert {r.termination_reason for r in capped} == {"max_steps"}


def test_it_keeps_a_harness_error_as_a_failed_trajectory_with_its_error():
    [record] = trajectories(TAU_ERROR)
    assert record.messages == ()
    assert record.reward == 0.0 and not record.success
    assert record.termination_reason == "error"
    assert record.error.startswith("EOF when reading a line")
    assert "EOFError" in record.error  # the traceback is kept


def test_it_names_file_record_and_field_of_a_wrong_type(tmp_path):
    data = json.loads(TAU_GPT4O.read_text())[:3]
    data[2]["traj"][1]["role"] = 7
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(FormatError) as exc:
        list(read(bad))
    assert str(exc.value) == "broken.json, record 2, field 'traj[1].role': expected a string, got an integer"
