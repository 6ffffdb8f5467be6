"""The language Bellman backup: who is asked what, terminal handling, batching."""

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.bellman import BackupConfig, backup, backup_chunks
from nlac_core.outputs import from_json, to_json
from tests.nlac_core._steps import tau_steps, tau_trajectories


def test_it_bootstraps_from_the_target_models_future_of_the_policys_next_action():
    steps = tau_steps()[:3]
    policy = FakeBackend(model="policy", responder=lambda r: "TOOL_CALL: {\"name\": \"think\", \"arguments\": {}}"
                         if "next action" in r.messages[-1]["content"] else " the agent books the flight",
                         scorer=lambda r: 0.0)
    target = FakeBackend(model="target", responder=lambda r: " the user is happy",
                         scorer=lambda r: 0.0 if "success" in r.continuation else -2.0)
    targets = backup(policy, target, steps)
    # the policy wrote a_t+1 (one batched call), the target predicted d_t+1, the policy's model composed
    assert [k for k, _ in policy.calls] == ["generate", "generate"]
    assert [k for k, _ in target.calls] == ["generate", "loglikelihood"]
    assert len(policy.calls[0][1]) == 3 and len(target.calls[0][1]) == 3
    for t, step in zip(targets, steps, strict=True):
        assert not t.terminal and t.step.step_index == step.index
        assert t.next_action.startswith("TOOL_CALL:")
        assert t.next_future == "After this action, the user is happy"
        assert t.success_prob == pytest.approx(1 / (1 + 2.718281828 ** -2), rel=1e-3)  # carried from d_t+1
        assert t.text == "After this action, the agent books the flight"
        assert t.provenance.prompt_id.startswith("backup@") and t.provenance.model == "policy"
        assert t.next_provenance.model == "target" and t.next_provenance.prompt_id.startswith("successor@")
        assert t.next_action_source == "policy" and t.next_action_provenance.model == "policy"
        assert t.next_action_provenance.prompt_id.startswith("agent_policy@")
        assert from_json(to_json(t)) == t
    # the backup prompt shows what really happened right after the action
    compose = policy.calls[1][1][0].messages[-1]["content"]
    assert "WHAT HAPPENED RIGHT AFTER (reward 0)" in compose and "the user is happy" in compose


def test_it_uses_the_recorded_next_action_off_policy():
    steps = tau_steps()[:2]
    policy = FakeBackend(responder=lambda r: " x")
    targets = backup(policy, FakeBackend(responder=lambda r: " y"), steps, BackupConfig(next_action="data"))
    assert [k for k, _ in policy.calls] == ["generate"]  # only the composition
    from nlac_core.actions import render_message_action

    assert targets[0].next_action == render_message_action(steps[1].action)  # the recorded one, rendered
    assert targets[0].next_action_source == "data" and targets[0].next_action_provenance is None


def test_it_describes_the_final_state_at_a_terminal_transition_with_the_real_outcome():
    trajectories = tau_trajectories(3)
    from nlac_core.state import steps_of

    last = [steps_of(t)[-1] for t in trajectories]
    policy = FakeBackend(responder=lambda r: " done")
    targets = backup(policy, FakeBackend(), last)
    assert all(t.terminal for t in targets)
    assert [t.success_prob for t in targets] == [float(t.success) for t in trajectories]
    assert all(t.next_action == "" and t.provenance.prompt_id.startswith("backup_terminal@") for t in targets)
    ending = policy.calls[0][1][0].messages[-1]["content"]
    assert "HOW THE EPISODE ENDED: the episode ended with reward" in ending


def test_it_keeps_the_order_of_mixed_terminal_and_inner_steps_and_chunks():
    steps = tau_steps()[-3:]
    policy = FakeBackend(responder=lambda r: " x")
    targets = backup(policy, FakeBackend(responder=lambda r: " y"), steps)
    assert [t.step.step_index for t in targets] == [s.index for s in steps]
    assert [t.terminal for t in targets] == [False, False, True]
    chunks = list(backup_chunks(policy, policy, tau_steps()[:5], BackupConfig(chunk_size=2)))
    assert [len(c) for c in chunks] == [2, 2, 1]
    with pytest.raises(ValueError, match="next_action"):
        BackupConfig(next_action="oracle")
