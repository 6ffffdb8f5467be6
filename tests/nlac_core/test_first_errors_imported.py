"""First errors placed in imported benchmark runs: tau-bench's gold actions (``task.actions`` with ``kwargs``)
feed the same localisation as tau2's ``evaluation_criteria``, on the real gpt-4o airline run."""

from __future__ import annotations

import json
import subprocess
import sys

from nlac_core.critic_data import first_error, gold_actions
from nlac_core.formats import read
from nlac_core.records import Message, TaskRecord, ToolCall, TrajectoryRecord
from tests.conftest import ROOT, TAU2_GROK, TAU_GPT4O, needs_shared

BOOK = {"user_id": "mia_li_3668", "cabin": "economy", "nonfree_baggages": 0}


def tau_bench_task() -> TaskRecord:
    """As the tau-bench importer stores it: the record's ``task.actions`` verbatim."""
    return TaskRecord(external_id="0", instruction="Book me a flight.",
                      gold_actions=({"name": "get_user_details", "kwargs": {"user_id": "mia_li_3668"}},
                                    {"name": "book_reservation", "kwargs": BOOK}))


def episode(*calls: ToolCall, reward: float = 0.0) -> TrajectoryRecord:
    messages = [Message("system", "policy"), Message("user", "Hi, book me a flight.")]
    for c in calls:
        messages += [Message("assistant", tool_calls=(c,)), Message("tool", "{}", tool_call_id=c.id, name=c.name)]
    messages.append(Message("assistant", "Done."))
    return TrajectoryRecord(task=tau_bench_task(), messages=tuple(messages), reward=reward,
                            termination_reason="user_stop")


def test_it_reads_tau_bench_kwargs_as_the_gold_arguments():
    assert gold_actions(tau_bench_task()) == [{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}},
                                              {"name": "book_reservation", "arguments": BOOK}]


def test_it_places_a_wrong_argument_after_a_read_in_a_tau_bench_episode():
    wrong = {**BOOK, "nonfree_baggages": 1}
    error = first_error(episode(ToolCall("c1", "get_user_details", {"user_id": "mia_li_3668"}),
                                ToolCall("c2", "book_reservation", wrong)))
    assert error is not None
    assert error.step_index == 1  # the read (step 0) is on the path; the booking is not
    assert error.reason == "wrong nonfree_baggages for book_reservation"
    assert error.expected == {"name": "book_reservation", "arguments": BOOK}


def test_it_places_nothing_in_a_won_or_correct_episode():
    right = episode(ToolCall("c1", "book_reservation", BOOK), reward=1.0)
    assert first_error(right) is None


def test_it_places_an_episode_that_ends_short_of_the_gold_path_at_its_last_step():
    error = first_error(episode(ToolCall("c1", "get_user_details", {"user_id": "mia_li_3668"})))
    assert error is not None and error.step_index == 1
    assert error.reason == "ended without book_reservation"


@needs_shared
def test_it_localises_first_errors_in_the_real_gpt4o_airline_run(tmp_path):
    """92 of the run's 116 failed episodes leave tau-bench's gold path at a tool call or end short of it (6 of the
    116 have no gold action to compare with); none was placed when only tau2's criteria were read."""
    out = tmp_path / "labels.jsonl"
    done = subprocess.run([sys.executable, "-m", "nlac_core", "first-errors", str(TAU_GPT4O), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "localised 92 of 116 failed episodes (6 without gold actions; 200 episodes in all)" in done.stdout
    labels = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(label["decision"] == "intervene" for label in labels) == 92
    assert sum(label["decision"] == "approve" for label in labels) == 92
    episodes = {t.content_hash(): t for t in (i.record for i in read(TAU_GPT4O)) if isinstance(t, TrajectoryRecord)}
    first = next(label for label in labels if label["decision"] == "intervene")
    trajectory = episodes[first["trajectory"]]
    assert (trajectory.task.external_id, trajectory.trial, first["step_index"]) == ("0", 0, 9)
    assert first["reason"] == "wrong nonfree_baggages for book_reservation"
    assert "expected book_reservation(" in first["feedback"]
    assert trajectory.steps[9][1].tool_calls[0].arguments["nonfree_baggages"] == 1


@needs_shared
def test_it_localises_first_errors_in_a_real_tau2_run():
    done = subprocess.run([sys.executable, "-m", "nlac_core", "first-errors", str(TAU2_GROK)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "localised 8 of 9 failed episodes" in done.stdout
