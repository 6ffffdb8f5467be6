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


def _targets_at(p: float, n_trajectories: int = 30):
    """An inner Bellman target with P(success) = p on every step of real trajectories."""
    from nlac_core.outputs import BellmanTarget
    from nlac_core.successor import ref_of

    _, _, targets, _ = outputs()
    return [BellmanTarget(ref_of(s), "the user gets a refund", p, False, targets[0].provenance)
            for s in tau_steps(n_trajectories)]


def test_it_draws_outcome_words_from_p_success_seeded_per_step():
    from nlac_core.outputs import StepRef
    from nlac_core.successor import outcome_draw, outcome_word

    refs = [StepRef(f"{n:064x}", n % 7, "t") for n in range(4000)]
    draws = [outcome_draw(r) for r in refs]
    assert all(0.0 <= d < 1.0 for d in draws) and draws == [outcome_draw(r) for r in refs]  # fixed per step
    assert [outcome_draw(r, seed=1) for r in refs[:50]] != draws[:50]  # and per seed
    for p in (0.1, 0.7, 0.9):
        share = sum(outcome_word(p, "sample", d) == "success" for d in draws) / len(draws)
        assert abs(share - p) < 0.03, (p, share)
    # the target network's belief is carried, not its mode: 0.7 and 0.9 both say "success" when thresholded
    assert outcome_word(0.7, "threshold") == outcome_word(0.9, "threshold") == "success"
    lower = sum(outcome_word(0.7, "sample", d) == "failure" for d in draws)
    higher = sum(outcome_word(0.9, "sample", d) == "failure" for d in draws)
    assert lower > 2 * higher
    # a real outcome is the same word either way, and an unknown one stays unknown
    assert {outcome_word(1.0, "sample", d) for d in draws} == {"success"}
    assert {outcome_word(0.0, "sample", d) for d in draws} == {"failure"}
    assert outcome_word(None, "sample", 0.3) == outcome_word(None, "threshold") == "unknown"


def test_it_samples_the_successor_records_outcome_word_and_keep_p_in_the_provenance():
    index = StepIndex(tau_trajectories(30))
    targets = _targets_at(0.8)
    assert len(targets) > 250
    sampled = successor_records(targets, index)
    words = [r["completion"][0]["content"].rsplit("OUTCOME: ", 1)[1] for r in sampled]
    assert 0.7 < words.count("success") / len(words) < 0.9 and set(words) == {"success", "failure"}
    assert sampled == successor_records(targets, index)  # the same records every time
    assert all(r["provenance"]["success_prob"] == 0.8 and r["provenance"]["outcome_target"] == "sample"
               for r in sampled)
    thresholded = successor_records(targets, index, outcome="threshold")
    assert {r["completion"][0]["content"].rsplit("OUTCOME: ", 1)[1] for r in thresholded} == {"success"}
    other_seed = successor_records(targets, index, seed=1)
    assert [r["completion"] for r in other_seed] != [r["completion"] for r in sampled]
