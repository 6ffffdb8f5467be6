"""The NLAC steps with the real embedded model on a real tau-bench trajectory.

The 135M model's judgments are weak before training (that is what the product
is for); what must hold is that it yields complete, well-formed records.
"""

import pytest

from nlac_core.actions import render_message_action
from nlac_core.bellman import BackupConfig, backup
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.refine import RefineConfig, action_spec_for, refine_steps
from nlac_core.successor import transition_of
from tests.nlac_core._steps import tau_steps

pytestmark = pytest.mark.slow
SHORT = 1200  # characters of state: enough context, quick on 2 CPU cores


def test_it_critiques_a_real_step_with_every_field(embedded_backend):
    step = tau_steps()[2]
    [c] = critique(embedded_backend, [transition_of(step, None, SHORT)], CritiqueConfig(text_tokens=32,
                                                                                        future_tokens=32))
    assert c.parse_ok and c.missing == ()
    assert c.verdict in ("optimal", "suboptimal", "harmful")
    assert 0.0 <= c.success_prob <= 1.0
    assert len(c.predicted_future) > len("After this action,") and len(c.reasoning) > len("The action is")
    assert c.provenance.backend == "hf" and c.provenance.model.endswith("smollm2-135m-instruct")


def test_it_backs_up_a_real_transition_and_a_terminal_one(embedded_backend):
    steps = tau_steps()
    inner, last = steps[2], steps[-1]
    targets = backup(embedded_backend, embedded_backend, [inner, last],
                     BackupConfig(action_tokens=48, future_tokens=32, target_tokens=48, max_state_chars=SHORT))
    first, terminal = targets
    assert not first.terminal and first.next_action and first.next_future.startswith("After this action,")
    assert first.success_prob is not None and 0 <= first.success_prob <= 1
    assert first.text.startswith("After this action,") and len(first.text) > len("After this action,")
    assert terminal.terminal and terminal.success_prob == float(last.trajectory.success)


def test_it_refines_a_real_step_into_a_checked_action(embedded_backend):
    step = tau_steps()[2]
    [c] = critique(embedded_backend, [transition_of(step, None, SHORT)], CritiqueConfig(text_tokens=24,
                                                                                        future_tokens=24))
    [r] = refine_steps(embedded_backend, [step], [c], RefineConfig(max_new_tokens=64), max_state_chars=SHORT)
    assert r.original_action == render_message_action(step.action)
    assert r.refined_action.strip()
    check = action_spec_for(step).check(r.refined_action)
    assert r.valid == check.ok and (r.valid or r.error == check.error)
