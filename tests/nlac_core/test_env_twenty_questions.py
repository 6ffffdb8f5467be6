"""20 Questions rules (LMRL-Gym's), with a scripted oracle: the model is beside the point here."""

import json

import pytest

from nlac_core.backends.base import Unsupported
from nlac_core.backends.fake import FakeBackend
from nlac_core.envs import EnvError, make_env
from nlac_core.envs.twenty_questions import INTRO, Word, parse_oracle_text
from tests.conftest import needs_shared

pytestmark = needs_shared


def oracle_saying(yes_when):
    """A scoring oracle: "Yes." is likelier exactly when ``yes_when(word, question)``."""
    def scorer(request):
        text = request.messages[-1]["content"]
        word = text.split("The hidden object is: ", 1)[1].split(".\n", 1)[0]
        question = text.split("The player asks: ", 1)[1].split("\n", 1)[0]
        yes = yes_when(word, question)
        return 0.0 if (request.continuation == "Yes.") == yes else -5.0
    return FakeBackend(scorer=scorer)


class GeneratingOracle(FakeBackend):
    """An oracle over an API: no log-likelihoods, so the environment must generate and parse."""

    def loglikelihood(self, requests):
        self.calls.append(("loglikelihood", list(requests)))
        raise Unsupported("no log-likelihoods over this API")


def game(word, oracle=None, **kwargs):
    env = make_env("twenty_questions", oracle=oracle or oracle_saying(lambda w, q: False), **kwargs)
    assert env.reset(env.task_for(word)) == INTRO
    return env


def test_it_costs_one_point_per_question_and_nothing_for_the_one_that_names_the_word():
    env = game("Cat", oracle_saying(lambda w, q: "animal" in q))
    first = env.step("Is it an animal?")
    assert (first.observation, first.reward, first.done) == ("Yes.", -1.0, False)
    second = env.step("Is it a cat?")
    assert (second.observation, second.reward, second.done) == ("Yes.", 0.0, True)
    record = env.trajectory()
    assert record.reward == -1.0 and record.termination_reason == "guessed"
    assert record.reward_info["won"] is True and record.reward_info["questions"] == 2
    assert [m.role for m in record.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [m.meta["reward"] for m in record.messages if m.role == "assistant"] == [-1.0, 0.0]


def test_it_counts_any_variant_as_naming_the_word_but_only_as_a_whole_word():
    assert Word("Airplane", ("Airplane", "Plane"), "Vehicles").named_in("Is it a PLANE?") == "Plane"
    assert Word("Airplane", ("Airplane", "Plane"), "Vehicles").named_in("Is it a planet?") is None
    assert Word("Car", ("Car",), "Vehicles").named_in("Is it a carrot?") is None
    env = game("Airplane")
    assert env.step("Is it a planet?").done is False
    result = env.step("Could it be a plane?")
    assert result.done and result.reward == 0.0 and result.info["variant"] == "Plane"
    assert env.trajectory().reward == -1.0
    assert game("Television").step("Is it a TV?").done  # variants from the real list: "Television;TV"


def test_it_ends_the_game_lost_after_twenty_questions():
    env = game("Helmet")
    results = [env.step(f"Is it thing number {i}?") for i in range(20)]
    assert [r.done for r in results] == [False] * 19 + [True]
    record = env.trajectory()
    assert record.reward == -20.0 and record.termination_reason == "max_questions"
    assert record.reward_info == {"success": False, "won": False, "word": "Helmet", "questions": 20,
                                  "invalid_questions": 0}
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("Is it a helmet?")


def test_it_reads_anything_but_a_yes_from_a_generating_oracle_as_no():
    replies = iter(["Maybe, it depends.", "yes, it is", "", "Yes.", "I cannot answer that"])
    oracle = GeneratingOracle(responder=lambda request: next(replies))
    env = game("Guitar", oracle)
    answers = [env.step(f"Is it object {i}?").observation for i in range(5)]
    assert answers == ["No.", "Yes.", "No.", "Yes.", "No."]
    assert [kind for kind, _ in oracle.calls] == ["loglikelihood"] + ["generate"] * 5  # asks to score only once
    odd = [m.meta for m in env.messages if m.role == "user" and "oracle_text" in m.meta]
    assert [m["oracle_text"] for m in odd] == ["Maybe, it depends.", "yes, it is", "", "I cannot answer that"]
    assert parse_oracle_text('"Yes!"') == "Yes." and parse_oracle_text("Yesterday") == "No."


def test_it_picks_the_likelier_of_yes_and_no_when_the_oracle_can_score():
    oracle = oracle_saying(lambda w, q: "instrument" in q)
    env = game("Violin", oracle)
    assert env.step("Is it a musical instrument?").observation == "Yes."
    assert env.step("Is it an animal?").observation == "No."
    (kind, requests), = oracle.calls[-1:]
    assert kind == "loglikelihood" and [r.continuation for r in requests] == ["Yes.", "No."]
    assert "Violin" in requests[0].messages[-1]["content"]


def test_it_charges_a_turn_for_an_invalid_question_without_asking_the_oracle():
    oracle = oracle_saying(lambda w, q: True)
    env = game("Piano", oracle)
    result = env.step("Tell me what it is.")
    assert result.reward == -1.0 and not result.done and "ending with" in result.info["error"]
    assert env.turns == 1 and oracle.calls == []
    assert env.messages[-2].meta["action_error"] == result.info["error"]
    assert env.messages[-1].content.startswith("(Not a yes/no question")
    env.step("Piano.")  # naming the word without asking does not win
    assert not env.done and env.total_reward == -2.0
    assert env.step("Is it a piano?").done
    assert env.trajectory().reward_info["invalid_questions"] == 2


def test_it_never_shows_the_hidden_word_to_the_policy():
    env = game("Cat", oracle_saying(lambda w, q: True))
    env.step("Is it alive?")
    messages = env.policy_request().messages
    assert "Cat" not in json.dumps(messages)
    assert list(messages[-3:]) == [{"role": "user", "content": INTRO}, {"role": "assistant", "content": "Is it alive?"},
                             {"role": "user", "content": "Yes.\n\nYou have 19 questions left. Ask your next yes/no "
                                                         "question."}]


def test_it_lists_words_across_categories_with_disjoint_splits():
    env = make_env("twenty_questions", oracle=FakeBackend())
    everything = env.tasks()
    assert len(everything) == 158
    assert len({t.meta["category"] for t in env.tasks(limit=17)}) == 17
    train, test = {t.external_id for t in env.tasks("train")}, {t.external_id for t in env.tasks("test")}
    assert not train & test and train | test == {t.external_id for t in everything} and len(test) == 29
    assert {t.split for t in env.tasks("test")} == {"test"} and env.task_for("Cat") in everything
    with pytest.raises(EnvError, match="unknown split 'dev'"):
        env.tasks("dev")
    with pytest.raises(EnvError, match="limit must be at least 1"):
        env.tasks(limit=0)


def test_it_names_the_missing_word_list(tmp_path):
    with pytest.raises(FileNotFoundError, match="20 Questions word list not found: .*nowhere.json"):
        make_env("twenty_questions", oracle=FakeBackend(), words_path=tmp_path / "nowhere.json")
    bad = tmp_path / "words.json"
    bad.write_text('{"categories": {"Animals": "Cat"}}')
    with pytest.raises(EnvError, match="categories.Animals must be a list of strings"):
        make_env("twenty_questions", oracle=FakeBackend(), words_path=bad)
