"""The tolerant critique parser: never raises, names what is missing.

Besides hand-written variants, it is checked on real outputs of the embedded
model saved by ``bench/bench_critique.py --save-fixtures`` (free mode, real
tau-bench steps of the gpt-4o airline run; 50 with the worked example, 5
zero-shot): the parser must agree with what a reader sees in them. The
``expected_missing`` labels were written by the parser at save time and then
checked by reading every output (no label needed a change).
"""

import json
from pathlib import Path

import pytest

from nlac_core.prompts.parsing import (
    parse_critique,
    parse_future,
    parse_runtime_decision,
    parse_success_prob,
    parse_verdict,
    split_sections,
)

FIXTURES = Path(__file__).parent / "fixtures" / "smollm2_free_critiques.jsonl"


def test_it_reads_the_five_fields_in_the_prompted_format():
    parsed = parse_critique("FUTURE: the user confirms\nOUTCOME: success\nVERDICT: optimal\n"
                            "REASON: it follows the policy\nSUGGESTION: keep it")
    assert parsed.ok
    assert (parsed.future, parsed.success_prob, parsed.verdict) == ("the user confirms", 1.0, "optimal")
    assert (parsed.reason, parsed.suggestion) == ("it follows the policy", "keep it")


def test_it_accepts_markdown_numbering_synonyms_and_continuation_lines():
    parsed = parse_critique("**Predicted future:** the booking fails\n   because the card is expired\n"
                            "2. Outcome - 30%\n**Verdict**: Sub-optimal.\nReasoning: no confirmation\n"
                            "- Better action: ask first")
    assert parsed.ok
    assert parsed.future == "the booking fails because the card is expired"
    assert parsed.success_prob == pytest.approx(0.3)
    assert parsed.verdict == "suboptimal"
    assert parsed.suggestion == "ask first"


def test_it_flags_what_is_missing_and_never_raises():
    for text in ("", "I think the agent did fine.", "VERDICT: perhaps", "\x00\ud800 FUTURE:", "::::", "FUTURE:" * 50):
        parsed = parse_critique(text)
        assert not parsed.ok
    parsed = parse_critique("FUTURE: x\nVERDICT: maybe\nREASON: y")
    assert parsed.missing == ("outcome", "verdict", "suggestion")


def test_it_keeps_the_first_of_repeated_fields():
    sections = split_sections("VERDICT: harmful\nREASON: a\nVERDICT: optimal")
    assert sections.get("verdict") == "harmful"


def test_it_maps_free_wording_to_verdicts_and_probabilities():
    assert parse_verdict("Not optimal at all") == "suboptimal"
    assert parse_verdict("This is wrong") == "harmful"
    assert parse_verdict("Optimal.") == "optimal"
    assert parse_verdict("unclear") is None
    assert parse_success_prob("failure") == 0.0
    assert parse_success_prob("The episode will succeed") == 1.0
    assert parse_success_prob("it will not succeed") == 0.0
    assert parse_success_prob("0.25") == 0.25
    assert parse_success_prob("75 %") == 0.75
    assert parse_success_prob("hard to say") is None


def test_it_reads_futures_and_runtime_decisions():
    future = parse_future("FUTURE: the user pays\nOUTCOME: success")
    assert (future.text, future.success_prob, future.ok) == ("the user pays", 1.0, True)
    prose = parse_future("The user will pay.")
    assert (prose.text, prose.ok) == ("The user will pay.", False)
    assert parse_runtime_decision("DECISION: intervene\nFEEDBACK: ask for confirmation") == (
        "intervene", "ask for confirmation")
    assert parse_runtime_decision("DECISION: approve\nFEEDBACK: fine")[0] == "approve"


def test_it_parses_real_small_model_outputs_as_a_reader_would():
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    assert len(rows) == 55 and sum(not r["expected_missing"] for r in rows) == 11
    for row in rows:
        parsed = parse_critique(row["raw_text"])
        assert parsed.ok == (not row["expected_missing"]), row["raw_text"]
        assert list(parsed.missing) == row["expected_missing"], row["raw_text"]
        if parsed.ok:
            assert parsed.verdict in ("optimal", "suboptimal", "harmful")
        if "outcome" not in parsed.missing:
            assert 0.0 <= parsed.success_prob <= 1.0, row["raw_text"]


def test_it_reads_what_the_small_model_wrote_in_its_sections():
    by_start = {json.loads(line)["raw_text"][:60]: json.loads(line)["raw_text"]
                for line in FIXTURES.read_text().splitlines()}
    failure = parse_critique(next(t for t in by_start.values() if "OUTCOME: failure" in t))
    assert failure.ok and failure.success_prob == 0.0 and failure.verdict == "suboptimal"
    percent = parse_critique(next(t for t in by_start.values() if "VERDICT: 97%" in t))
    assert percent.verdict is None and percent.missing == ("verdict",) and percent.success_prob == pytest.approx(0.97)
    wrong_field = parse_critique(next(t for t in by_start.values() if "OUTCOME: suboptimal" in t))
    assert wrong_field.missing == ("outcome", "verdict") and wrong_field.reason.startswith("The policy requires")


@pytest.mark.parametrize("text, prob", [
    ("failure after 1 more turn", 0.0), ("0.7 (likely success)", 0.7), ("**Success.**", 1.0), ("70%", 0.7),
    ("the agent will not succeed", 0.0), ("likely to fail", 0.0), ("unknown", None), ("it may fail or succeed", None),
])
def test_it_lets_an_opening_outcome_word_win_over_numbers_later(text, prob):
    assert parse_success_prob(text) == (pytest.approx(prob) if prob is not None else None)


@pytest.mark.parametrize("text, verdict", [
    ("not harmful, but suboptimal", "suboptimal"), ("Not optimal.", "suboptimal"), ("alright", None),
    ("not bad", None), ("the action is correct", "optimal"), ("harmfully wrong", "harmful"), ("97%", None),
])
def test_it_reads_verdicts_as_whole_words_and_skips_negated_ones(text, verdict):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize("text, decision", [
    ("no need to intervene", "approve"), ("Intervene: ask first", "intervene"), ("APPROVE", "approve"),
    ("reject this call", "intervene"), ("hmm", None),
])
def test_it_reads_runtime_decisions_with_negation(text, decision):
    assert parse_runtime_decision(f"DECISION: {text}\nFEEDBACK: x")[0] == decision
