"""Rollouts: batched across episodes, seeded, cancellable, written in our JSONL."""

import json
import random
import subprocess
import sys

import pytest

from nlac_core.backends.base import ChatRequest, SamplingSpec
from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import EnvError, make_env
from nlac_core.envs.base import LLMQuery, drive
from nlac_core.rollout import derive_seed, read_trajectories, rollout, write_trajectories
from tests.conftest import ROOT, needs_shared

pytestmark = needs_shared

QUESTIONS = ["Is it alive?", "Is it big?", "Is it red?", "Is it soft?", "Is it metal?", "Is it round?"]


def yes_if_in_category(words):
    """A scoring oracle: yes when the question mentions a category of the word (from the real list)."""
    category_of = {t.external_id: t.meta["category"].lower() for t in words}

    def scorer(request):
        text = request.messages[-1]["content"]
        word = text.split("The hidden object is: ", 1)[1].split(".\n", 1)[0]
        yes = category_of[word].rstrip("s") in text.split("The player asks:", 1)[1].lower()
        return 0.0 if (request.continuation == "Yes.") == yes else -3.0
    return FakeBackend(model="oracle", scorer=scorer)


def guesser(request):
    """Asks the category, then guesses the first word of it (enough to win some games and lose others)."""
    start = max(i for i, m in enumerate(request.messages) if m["content"].startswith("Let's play"))
    game = request.messages[start:]  # after the system text and the prompt's example
    asked = [m["content"] for m in game if m["role"] == "assistant"]
    if asked and asked[-1] == "Is it an animal?" and game[-1]["content"].startswith("Yes."):
        return "Is it a cat?"
    return QUESTIONS[len(asked) % len(QUESTIONS)] if asked else "Is it an animal?"


class RowSeededFake(FakeBackend):
    """Samples each row from its own seed, like the hf backend's ``row_seeds``."""

    def generate(self, requests, spec, *, row_seeds=None):
        self.calls.append(("generate", list(requests)))
        self.seen_seeds = getattr(self, "seen_seeds", []) + [list(row_seeds)]
        out = FakeBackend(responder=lambda r: "x").generate(requests, spec)
        return [type(c)(random.Random(s).choice(QUESTIONS), c.prompt_tokens, 3, "stop") for c, s in
                zip(out, row_seeds, strict=True)]


@pytest.fixture
def env():
    twenty = make_env("twenty_questions", oracle=FakeBackend())
    return make_env("twenty_questions", oracle=yes_if_in_category(twenty.tasks()))


def test_it_advances_all_live_episodes_with_one_policy_call_and_one_oracle_call_per_turn(env):
    tasks = env.tasks(limit=4)  # Basketball, Cat, Apple, Car
    policy = FakeBackend(responder=guesser)
    records = rollout(env, policy, tasks, trials=3)
    assert len(records) == 12 and [(r.task.external_id, r.trial) for r in records[:4]] == [
        ("Basketball", 0), ("Basketball", 1), ("Basketball", 2), ("Cat", 0)]
    sizes = [len(requests) for kind, requests in policy.calls]
    assert all(kind == "generate" for kind, _ in policy.calls)
    assert sizes == [12, 12] + [9] * 18  # the three Cat games are won on turn 2 and drop out
    oracle_calls = env._shared.oracle.calls
    assert [len(r) for _, r in oracle_calls] == [24] + [18] * 19  # two scores (Yes./No.) per live question
    cat = next(r for r in records if r.task.external_id == "Cat")
    assert cat.reward == -1.0 and cat.termination_reason == "guessed" and cat.meta["turns"] == 2
    assert cat.meta["policy_backend"] == "fake" and cat.meta["env_llm"] == {
        "role": "oracle", "backend": "fake", "model": "oracle", "mode": "loglikelihood", "sampling": None}
    assert {r.reward for r in records if r.task.external_id != "Cat"} == {-20.0}


def test_it_batches_the_simulated_users_across_tool_use_episodes():
    def user(request):
        agent_turns = sum(1 for m in request.messages if m["role"] == "user")  # roles are flipped for the user
        return "###STOP###" if agent_turns > 2 else "Please mark task_1 as completed."
    simulated = FakeBackend(responder=user)
    env = make_env("tool_use", oracle=simulated)
    records = rollout(env, FakeBackend(reply="Let me check that for you."), env.tasks(limit=3), trials=2)
    assert len(records) == 6 and {r.termination_reason for r in records} == {"user_stop"}
    assert [len(requests) for _, requests in simulated.calls] == [6, 6, 6]  # reset, turn 1, turn 2
    assert all(r.user_model == "fake-model" and r.reward == 0.0 for r in records)
    assert records[0].meta["env_llm"] == {"role": "simulated_user", "backend": "fake", "model": "fake-model",
                                          "sampling": env._shared.user_spec.to_dict()}


def test_it_seeds_each_trial_so_that_a_trial_samples_the_same_text_in_any_batch(env):
    spec = SamplingSpec(max_new_tokens=8, temperature=1.0, seed=7)
    tasks = env.tasks(limit=3)
    first, again = RowSeededFake(), RowSeededFake()
    a = rollout(env, first, tasks, trials=2, spec=spec, max_turns=4)
    b = rollout(env, again, tasks, trials=2, spec=spec, max_turns=4)
    assert [r.content_hash() for r in a] == [r.content_hash() for r in b]
    alone = rollout(env, RowSeededFake(), tasks[1:2], trials=2, spec=spec, max_turns=4)
    assert [r.messages for r in alone] == [r.messages for r in a[2:4]]  # same trial, other batch: same text
    assert a[0].messages != a[1].messages  # the trials of a task differ
    assert a[0].meta["seeding"] == "per_trial" and a[0].meta["trial_seed"] == derive_seed(7, "Basketball", 0)
    assert a[0].meta["turn_seeds"] == [derive_seed(a[0].meta["trial_seed"], "turn", n) for n in range(4)]
    other = rollout(env, RowSeededFake(), tasks, trials=2, spec=SamplingSpec(8, 1.0, seed=8), max_turns=4)
    assert [r.messages for r in other] != [r.messages for r in a]


def test_it_seeds_each_call_for_a_backend_with_one_seed_per_call(env):
    policy = FakeBackend(responder=guesser)
    records = rollout(env, policy, env.tasks(limit=2), spec=SamplingSpec(seed=3), max_turns=2)
    assert records[0].meta["seeding"] == "per_call"
    assert records[0].meta["turn_seeds"] == [derive_seed(3, "turn", 0), derive_seed(3, "turn", 1)]


def test_it_writes_trajectories_that_round_trip_through_our_jsonl(env, tmp_path):
    records = rollout(env, FakeBackend(responder=guesser), env.tasks(limit=3), trials=2, max_turns=5,
                      source_checkpoint="ckpt-0")
    math_env = make_env("math")
    records += rollout(math_env, FakeBackend(reply="So \\boxed{3}."), math_env.tasks(limit=2))
    path = tmp_path / "runs" / "episodes.jsonl"
    assert write_trajectories(path, records) == 8
    back = list(read_trajectories(path))
    assert back == records and [r.content_hash() for r in back] == [r.content_hash() for r in records]
    first = json.loads(path.read_text().splitlines()[0])
    assert first["schema"] == "nlac.trajectory.v1" and first["source_checkpoint"] == "ckpt-0"
    assert first["meta"]["policy_prompt_id"].startswith("policy_twenty_questions@")
    assert first["meta"]["sampling"]["stop"] == ["\n"] and first["source_model"] == "fake-model"


def test_it_parses_tool_calls_into_structured_calls_and_records_invalid_actions():
    actions = iter(['TOOL_CALL: {"name": "update_task_status", "arguments": {"task_id": "task_1", '
                    '"status": "completed"}}', "TOOL_CALL: {oops", "Done."])
    env = make_env("tool_use", oracle=FakeBackend(responder=lambda r: "Complete task_1 please. ###STOP###"
                                                  if r.messages[-1]["content"] == "Done." else
                                                  "Complete task_1 please."))
    task = [t for t in env.tasks() if t.external_id == "update_task_1"]
    record, = rollout(env, FakeBackend(responder=lambda r: next(actions)), task)
    steps = [m for m in record.messages if m.role == "assistant" and not m.meta.get("scripted")]
    assert steps[0].tool_calls[0].name == "update_task_status" and steps[0].tool_calls[0].id
    assert steps[0].tool_calls[0].arguments == {"task_id": "task_1", "status": "completed"}
    assert steps[1].tool_calls == () and "not valid JSON" in steps[1].meta["action_error"]
    assert record.reward == 1.0 and record.termination_reason == "user_stop"


def test_it_reports_progress_and_stops_when_asked(env):
    seen = []
    turns = iter(range(100))
    records = rollout(env, FakeBackend(responder=guesser), env.tasks(limit=3), trials=2,
                      progress=lambda done, total: seen.append((done, total)),
                      should_stop=lambda: next(turns) >= 3)
    assert [(r.task.external_id, r.termination_reason) for r in records] == [("Cat", "guessed")] * 2
    assert seen == [(0, 6), (0, 6), (2, 6)]  # after reset, turn 1, turn 2; then cancelled, unfinished dropped
    complete = []
    rollout(env, FakeBackend(responder=guesser), env.tasks(limit=2), progress=lambda d, t: complete.append(d))
    assert complete[-1] == 2 and complete == sorted(complete)


def test_it_caps_turns_below_the_environments_own_cap(env):
    record, = rollout(env, FakeBackend(responder=guesser), env.tasks(limit=1), max_turns=3)
    assert record.termination_reason == "max_turns" and record.reward == -3.0 and record.meta["turns"] == 3
    assert record.reward_info["success"] is False
    with pytest.raises(EnvError, match="trials must be at least 1"):
        rollout(env, FakeBackend(), env.tasks(limit=1), trials=0)


def test_it_merges_the_queries_of_a_round_into_one_call_per_backend_and_kind():
    a, b = FakeBackend(model="a", reply="A"), FakeBackend(model="b", reply="B")
    spec = SamplingSpec(max_new_tokens=4)

    def episode(backend, rounds):
        texts = []
        for _ in range(rounds):
            completions = yield LLMQuery(backend, (ChatRequest([{"role": "user", "content": "hi"}]),), spec)
            texts.append(completions[0].text)
        return "".join(texts)

    results = drive([episode(a, 1), episode(b, 2), episode(a, 3), "ready"])
    assert results == ["A", "BB", "AAA", "ready"]
    assert [len(r) for _, r in a.calls] == [2, 1, 1] and [len(r) for _, r in b.calls] == [1, 1]


def test_it_imports_environments_without_torch_or_sympy():
    code = ("import sys, nlac_core.envs.twenty_questions, nlac_core.envs.math, nlac_core.envs.tool_use, "
            "nlac_core.rollout, nlac_core.evaluation, nlac_core.commands.envs\n"
            "heavy = ('django', 'torch', 'transformers', 'vllm', 'sympy', 'math_verify')\n"
            "bad = [m for m in heavy if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_it_skips_finished_slots_and_plays_the_rest_as_it_would_have(env):
    spec = SamplingSpec(max_new_tokens=8, temperature=1.0, seed=5)
    tasks = env.tasks(limit=2)
    full = rollout(env, RowSeededFake(), tasks, trials=2, spec=spec, max_turns=3)
    rest = rollout(env, RowSeededFake(), tasks, trials=2, spec=spec, max_turns=3,
                   skip={(tasks[0].external_id, 0), (tasks[1].external_id, 1)})
    assert [(r.task.external_id, r.trial) for r in rest] == [(tasks[0].external_id, 1), (tasks[1].external_id, 0)]
    assert [r.content_hash() for r in rest] == [full[1].content_hash(), full[2].content_hash()]
