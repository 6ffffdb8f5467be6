"""SFT records from targets, critiques and refinements: TRL's shape, provenance, no critique leak."""

from dataclasses import replace

from nlac_core.backends.fake import FakeBackend
from nlac_core.bellman import backup
from nlac_core.critic import critique
from nlac_core.outputs import from_json, to_json
from nlac_core.refine import refine_steps
from nlac_core.sft_data import StepIndex, critique_records, distillation_records, records_hash, successor_records
from nlac_core.successor import transition_of
from tests.nlac_core._steps import tau_steps, tau_trajectories

CALL = 'TOOL_CALL: {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}'


def outputs():
    steps = tau_steps()[:3]
    backend = FakeBackend(responder=lambda r: CALL if "improved" in r.messages[-1]["content"] else " fine")
    critiques = [replace(c, verdict="suboptimal") for c in critique(backend, [transition_of(s) for s in steps])]
    return steps, critiques, backup(backend, backend, steps), refine_steps(backend, steps, critiques)


def test_it_builds_successor_records_from_bellman_targets():
    _, _, targets, _ = outputs()
    records = successor_records(targets, StepIndex(tau_trajectories(1)))
    assert len(records) == 3
    r = records[0]
    assert set(r) == {"prompt", "completion", "provenance"}
    assert r["prompt"][-1]["role"] == "user" and "THE AGENT'S ACTION" in r["prompt"][-1]["content"]
    assert r["completion"] == [{"role": "assistant", "content": f"FUTURE: {targets[0].text}\nOUTCOME: success"}]
    assert r["provenance"]["kind"] == "bellman_target" and r["provenance"]["prompt_id"].startswith("successor@")
    assert r["provenance"]["source"]["prompt_id"].startswith("backup@")


def test_it_leaves_the_critique_out_of_distillation_inputs():
    steps, critiques, _, refinements = outputs()
    records = distillation_records(refinements, StepIndex(tau_trajectories(1)))
    assert len(records) == 3
    for r, c in zip(records, critiques, strict=True):
        text = " ".join(m["content"] for m in r["prompt"])
        assert c.reasoning not in text and "CRITIQUE" not in text
        assert r["completion"][0]["content"] == CALL
        assert r["provenance"]["refine_prompt_id"].startswith("refine@")
    assert distillation_records(refinements, StepIndex(tau_trajectories(1)), only_changed=True) == [
        r for r, ref in zip(records, refinements, strict=True) if ref.refined_action != ref.original_action]


def test_it_builds_critique_records_only_from_parsed_critiques_by_default():
    _, critiques, _, _ = outputs()
    index = StepIndex(tau_trajectories(1))
    records = critique_records(critiques, index)
    assert len(records) == 3 and records[0]["completion"][0]["content"] == critiques[0].render()
    broken = [from_json({**to_json(critiques[0]), "parse_ok": False})]
    assert critique_records(broken, index) == [] and len(critique_records(broken, index, require_parsed=False)) == 1


def test_it_round_trips_every_output_record_through_json():
    _, critiques, targets, refinements = outputs()
    for record in (*critiques, *targets, *refinements):
        assert from_json(to_json(record)) == record


def test_it_hashes_records_with_their_provenance_in_order():
    _, _, targets, _ = outputs()
    records = successor_records(targets, StepIndex(tau_trajectories(1)))
    assert records_hash(records) == records_hash([dict(r) for r in records])
    assert records_hash(records) != records_hash([{**r, "provenance": {}} for r in records])
    assert records_hash(records) != records_hash(records[::-1])


def test_it_trains_the_critic_on_the_prompt_it_is_judged_with():
    """A critic-target record's prompt (a model critique's, and a human correction's) is the prompt the sectioned
    critique (the default, as evaluate-critic judges) sends for the same step and futures: no worked example
    the critic never sees again."""
    from nlac_core.critic import render_futures
    from nlac_core.datasets import HumanCritique, human_critique_record

    steps = tau_steps()[:2]
    seen = []
    backend = FakeBackend(responder=lambda r: seen.append(r.messages) or " fine")
    critiques = critique(backend, [transition_of(s) for s in steps])
    records = critique_records(critiques, StepIndex(tau_trajectories(1)), require_parsed=False)
    sent = [list(m) for m in seen if m[-1]["content"].endswith("Critique the action.")]
    for record, c in zip(records, critiques, strict=True):
        assert record["prompt"] in sent
        assert record["provenance"]["prompt_id"] == c.provenance.prompt_id  # evaluator_zero_shot@...
        assert not any("cancel_order" in m["content"] for m in record["prompt"])  # the worked example's call
    human = human_critique_record(steps[0], HumanCritique("f", "failure", "suboptimal", "r", "s"),
                                  render_futures(critiques[0].futures), {})
    assert human["prompt"] == records[0]["prompt"]
