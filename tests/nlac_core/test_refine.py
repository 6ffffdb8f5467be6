"""Refinement: m rounds, each checked against the environment's action format."""

from dataclasses import replace

import pytest

from nlac_core.actions import ActionSpec
from nlac_core.backends.fake import FakeBackend
from nlac_core.critic import CritiqueConfig, critique
from nlac_core.refine import RefineConfig, action_spec_for, refine, refine_steps
from nlac_core.successor import Transition, transition_of
from tests.nlac_core._steps import tau_steps

CALL = 'TOOL_CALL: {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}'


def to_change(critiques):
    """The critiques with the verdict "suboptimal": only a step the critique says to change is refined."""
    return [replace(c, verdict="suboptimal") for c in critiques]


def critiques_for(steps):
    return to_change(critique(FakeBackend(responder=lambda r: " ok"), [transition_of(s) for s in steps]))


def test_it_refines_with_the_critique_in_the_prompt_and_validates_the_tool_call():
    steps = tau_steps()[:2]
    backend = FakeBackend(responder=lambda r: "Improved action: " + CALL)
    refinements = refine_steps(backend, steps, critiques_for(steps))
    prompt = backend.calls[0][1][0].messages[-1]["content"]
    assert "CRITIQUE:\nFUTURE: After this action, ok" in prompt and "Known tools:" in prompt
    for r in refinements:
        assert r.valid and r.error == "" and r.rounds == 1
        assert r.refined_action == CALL  # the echoed label is dropped
        assert r.provenance.prompt_id.startswith("refine@")


def test_it_rejects_unknown_tools_bad_json_and_missing_arguments():
    step = tau_steps()[2]
    for reply, error in (('TOOL_CALL: {"name": "delete_everything", "arguments": {}}', "unknown tool"),
                         ('TOOL_CALL: {"name": "get_user_details", "arguments": ', "not valid JSON"),
                         ('TOOL_CALL: ["get_user_details"]', '"name" string')):
        [r] = refine_steps(FakeBackend(responder=lambda r, reply=reply: reply), [step], critiques_for([step]))
        assert not r.valid and error in r.error, (reply, r.error)
        assert r.refined_action == reply.strip()  # kept for the annotator to see
    spec = ActionSpec("tool_use", {"book": ("user_id", "flight")})
    check = spec.check('TOOL_CALL: {"name": "book", "arguments": {"user_id": "u"}}')
    assert not check.ok and "missing argument(s): flight" in check.error


def test_it_runs_m_rounds_critiquing_the_latest_action_again():
    step = tau_steps()[2]
    replies = iter(["Is it a dog?", "Is it alive?"])
    backend = FakeBackend(responder=lambda r: next(replies) if "Write the improved action" in
                          r.messages[-1]["content"] else " fine")
    t = Transition(transition_of(step).ref, "USER: think of an object", "Is it a cat?")
    [c] = to_change(critique(backend, [t]))
    [r] = refine(backend, [t], [c], [ActionSpec("twenty_questions")], RefineConfig(rounds=2, on_optimal="refine"),
                 CritiqueConfig())
    assert r.history == ("Is it a dog?", "Is it alive?") and r.refined_action == "Is it alive?" and r.valid
    # round 2 refined the action of round 1, after a new critique of it
    refine_prompts = [req.messages[-1]["content"] for kind, batch in backend.calls if kind == "generate"
                      for req in batch if "Write the improved action" in req.messages[-1]["content"]]
    assert "THE AGENT'S ACTION:\nIs it a dog?" in refine_prompts[1]


def test_it_keeps_the_last_valid_round_when_a_later_one_breaks_the_format():
    step = tau_steps()[2]
    replies = iter(["Is it a dog?", "I think it is a dog."])
    backend = FakeBackend(responder=lambda r: next(replies) if "Write the improved action" in
                          r.messages[-1]["content"] else " fine")
    t = Transition(transition_of(step).ref, "s", "Is it a cat?")
    [r] = refine(backend, [t], to_change(critique(backend, [t])), [ActionSpec("twenty_questions")],
                 RefineConfig(rounds=2, on_optimal="refine"))
    assert r.valid and r.refined_action == "Is it a dog?" and r.history[-1] == "I think it is a dog."


def test_it_refuses_a_tool_call_when_no_tool_is_known():
    """A trajectory that never called a tool gives nothing to check a name against: no blind acceptance."""
    step = tau_steps()[0]
    bare = replace(step, trajectory=replace(step.trajectory, messages=tuple(
        replace(m, tool_calls=()) for m in step.trajectory.messages)))
    assert action_spec_for(bare).tools == {}
    check = action_spec_for(bare).check('TOOL_CALL: {"name": "rm_rf", "arguments": {}}')
    assert not check.ok and "no tools are known here" in check.error
    assert action_spec_for(bare).check("Could you give me your user id?").ok  # a reply needs no tool


def test_it_passes_the_critique_config_to_later_rounds():
    step = tau_steps()[2]
    backend = FakeBackend(responder=lambda r: "Is it a dog?" if "Write the improved action" in
                          r.messages[-1]["content"] else "FUTURE: x\nOUTCOME: success\nVERDICT: optimal\nREASON: r\n"
                          "SUGGESTION: s")
    [c] = critiques_for([step])
    refine_steps(backend, [step], [c], RefineConfig(rounds=2, on_optimal="refine"),
                 spec_for=lambda s: ActionSpec("twenty_questions"),
                 critique_config=CritiqueConfig(mode="free"))
    free_prompts = [req for kind, batch in backend.calls if kind == "generate" for req in batch
                    if req.messages[0]["content"].startswith("You are a critic")]
    assert free_prompts and all(len(req.messages) > 3 for req in free_prompts)  # the worked example is in it


def test_it_checks_twenty_questions_and_math_actions():
    q = ActionSpec("twenty_questions")
    assert q.check("Is it an animal?").ok
    assert not q.check("It is an animal.").ok
    assert not q.check("What color is it?").ok
    m = ActionSpec("math")
    assert m.check("So x = 2, and the answer is $\\boxed{\\frac{1}{2}}$.").ok
    assert not m.check("The answer is 2.").ok


def test_it_takes_the_action_format_from_the_trajectory():
    step = tau_steps()[0]
    spec = action_spec_for(step)
    assert spec.kind == "tool_use" and "get_user_details" in spec.tools and "book_reservation" in spec.tools
    schemas = [{"type": "function", "function": {"name": "lookup", "parameters": {"required": ["id"]}}}]
    with_schemas = replace(step, trajectory=replace(step.trajectory, meta={"tools": schemas}))
    assert action_spec_for(with_schemas).tools == {"lookup": ("id",)}  # stored schemas win over tools used
    ours = replace(step, trajectory=replace(step.trajectory, meta={"env": "tool_use"}))
    assert set(action_spec_for(ours).tools) == {"get_users", "get_task", "create_task", "update_task_status",
                                                "transfer_to_human_agents"}
    with pytest.raises(ValueError, match="rounds"):
        RefineConfig(rounds=0)
