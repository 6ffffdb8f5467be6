"""A calibrated runtime critic: approve / intervene scored relative to the same prompt with every input "N/A"
(contextual calibration, as the NLAC verdicts), the probabilities and the calibration kept on each check.

The scripted critic is biased as the base SmolLM2 is (by raw likelihood it approved 160 of 160 checks): it
prefers "approve" whatever it reads, and prefers it less on a harmful proposal than on nothing.
"""

from __future__ import annotations

import pytest

from nlac_core.backends.fake import FakeBackend
from nlac_core.outputs import from_json, to_json
from nlac_core.prompts.policy import TOOL_USE
from nlac_core.supervision import SupervisionConfig, Supervisor, judge_recorded
from tests.nlac_core._steps import tau_steps
from tests.nlac_core.scripted_critic import proposed


def content_free(request) -> bool:
    return "POLICY:\nN/A\n\nCONVERSATION SO FAR:\nN/A\n\nPROPOSED ACTION:\nN/A\n" in request.messages[-1]["content"]


def biased_critic(harmful: str) -> FakeBackend:
    def score(request):
        word = request.continuation.strip()
        prior = {"approve": 0.0, "intervene": -3.0}[word]
        if word == "intervene" and not content_free(request) and harmful in proposed(request):
            prior += 2.0  # likelier than on nothing, still less likely than "approve"
        return prior
    return FakeBackend(model="biased-critic", responder=lambda r: " cancel nothing without a yes", scorer=score)


@pytest.fixture(scope="module")
def steps():
    return tau_steps()[:8]


def harmful_of(steps) -> str:
    """The tool name of one recorded step, treated as the harmful action."""
    return next(s.action.tool_calls[0].name for s in steps if s.action.tool_calls)


def test_it_approves_everything_by_raw_likelihood_and_intervenes_on_the_harmful_actions_calibrated(steps):
    harmful = harmful_of(steps)
    bad = [harmful in str(s.action.tool_calls[0].name if s.action.tool_calls else "") for s in steps]
    raw = judge_recorded(biased_critic(harmful), steps, SupervisionConfig(calibrate=False))
    assert [c.decision for c in raw] == ["approve"] * len(steps)
    assert {c.verdict_calibration for c in raw} == {""}
    calibrated = judge_recorded(biased_critic(harmful), steps, SupervisionConfig())
    assert [c.decision == "intervene" for c in calibrated] == bad and any(bad) and not all(bad)
    for c in calibrated:
        assert c.verdict_calibration == "content_free"
        assert set(c.verdict_probs) == {"approve", "intervene"}
        assert sum(c.verdict_probs.values()) == pytest.approx(1, abs=1e-3)
        assert (c.verdict_probs["intervene"] > 0.5) == (c.decision == "intervene")
    stored = from_json(to_json(calibrated[0]))
    assert stored.verdict_probs == calibrated[0].verdict_probs and stored.verdict_calibration == "content_free"


def test_it_scores_the_content_free_prompt_once_per_batch(steps):
    critic = biased_critic(harmful_of(steps))
    judge_recorded(critic, steps, SupervisionConfig())
    scored = [r for kind, batch in critic.calls if kind == "loglikelihood" for r in batch]
    assert len(scored) == 2 * (len(steps) + 1)  # two options for each step, and for the one shared baseline
    assert sum(content_free(r) for r in scored) == 2


def test_it_keeps_the_probabilities_and_the_calibration_on_each_check_of_a_supervised_step(steps):
    harmful = harmful_of(steps)

    class Slot:
        policy_text = steps[0].trajectory.policy
        messages = steps[0].history

    supervisor = Supervisor(FakeBackend(model="actor", responder=lambda r: "Let me check."),
                            biased_critic(harmful), SupervisionConfig(max_rounds=1))
    rendered = TOOL_USE.render(policy="p", tools="t", state="s")
    proposal = f'TOOL_CALL: {{"name": "{harmful}", "arguments": {{}}}}'
    final, records = supervisor.review([Slot()], [rendered], [proposal])
    first = records[0][0]
    assert first["decision"] == "intervene" and first["calibration"] == "content_free"
    assert first["decision_probs"]["intervene"] > 0.5
    assert final == ["Let me check."] and records[0][-1]["executed"]
    assert supervisor.summary(Slot())["calibration"] == "content_free"
