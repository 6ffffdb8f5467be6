import copy
import json

from nlac_core.formats import read
from nlac_core.records import TaskRecord, TrajectoryRecord
from tests.conftest import TAU2_EMPTY, TAU2_GROK, needs_shared

pytestmark = needs_shared


def items(path):
    out = list(read(path))
    return ([i.record for i in out if isinstance(i.record, TaskRecord)],
            [i.record for i in out if isinstance(i.record, TrajectoryRecord)])


def test_it_reads_simulations_with_policy_and_models_from_info():
    tasks, sims = items(TAU2_GROK)
    assert len(tasks) == 20 and len(sims) == 20
    s = next(s for s in sims if s.external_id == "91762b0f-16e7-4655-b33f-f6b14bda27cd")
    assert s.policy.startswith("# Airline Agent Policy")
    assert s.source_model == "xai/grok-3" and s.user_model == "xai/grok-3"
    assert s.messages[0].role == "assistant"  # tau2 starts with the agent's greeting, no system message
    assert s.reward_info["reward_breakdown"] == {"DB": 0.0, "COMMUNICATE": 0.0}
    assert {r.termination_reason for r in sims} == {"user_stop", "max_steps"}


def test_it_keeps_dict_arguments_and_links_results_by_id():
    _, sims = items(TAU2_GROK)
    sim, call = next((s, tc) for s in sims for m in s.messages for tc in m.tool_calls
                     if tc.name == "get_reservation_details")
    msgs = sim.messages
    assert call.arguments == {"reservation_id": "EHGLP3"} and call.requestor == "assistant"
    result = next(m for m in msgs if m.role == "tool")
    assert result.tool_call_id == call.id and result.requestor == "assistant"


def test_it_keeps_the_users_control_tokens():
    _, sims = items(TAU2_GROK)
    endings = [[m for m in s.messages if m.role == "user"][-1].content for s in sims]
    assert sum(e.endswith("###STOP###") for e in endings) == 10
    assert "###TRANSFER###" in endings


def test_it_reads_a_results_file_with_no_simulations():
    tasks, sims = items(TAU2_EMPTY)
    assert len(tasks) == 5 and sims == []


def test_it_preserves_user_side_tool_calls(tmp_path):
    data = json.loads(TAU2_GROK.read_text())
    sim = copy.deepcopy(data["simulations"][0])
    sim["id"] = "user-tools"
    sim["messages"][1:1] = [
        {"role": "user", "content": None, "turn_idx": 1, "tool_calls": [
            {"id": "u1", "name": "toggle_airplane_mode", "arguments": {"on": False}, "requestor": "user"}]},
        {"role": "tool", "id": "u1", "content": "Airplane mode is off.", "requestor": "user", "turn_idx": 1},
    ]
    data["simulations"] = [sim]
    path = tmp_path / "user_tools.json"
    path.write_text(json.dumps(data))
    _, [record] = items(path)
    user_call = record.messages[1]
    assert user_call.role == "user"
    assert user_call.tool_calls[0].requestor == "user"
    assert user_call.tool_calls[0].arguments == {"on": False}
    assert record.messages[2].requestor == "user" and record.messages[2].tool_call_id == "u1"
