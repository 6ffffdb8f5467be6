"""Agreement figures against hand-computed values, and on a real overlapped queue."""

from __future__ import annotations

import pytest

from tests.webapp.annotation.conftest import fields
from webapp.annotation import agreement
from webapp.annotation.diff import similarity, word_diff
from webapp.annotation.services import assignments, queues, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Target


def test_it_computes_cohens_kappa_like_the_textbook():
    # 10 items, observed agreement 0.7, chance agreement 0.5 -> kappa 0.4
    a = ["optimal"] * 5 + ["harmful"] * 5
    b = ["optimal"] * 4 + ["harmful"] + ["optimal"] * 2 + ["harmful"] * 3
    assert agreement.cohen_kappa(a, b) == pytest.approx(0.4)
    assert agreement.cohen_kappa(a, a) == pytest.approx(1.0)
    assert agreement.cohen_kappa([], []) is None


def test_it_computes_krippendorffs_alpha_for_three_annotators():
    units = [{"a": "optimal", "b": "optimal", "c": "optimal"}, {"a": "harmful", "b": "harmful", "c": "harmful"},
             {"a": "suboptimal", "b": "suboptimal"}, {"a": "optimal", "b": "harmful", "c": "optimal"}]
    alpha = agreement.krippendorff_alpha(units)
    assert 0.5 < alpha < 0.9
    assert agreement.krippendorff_alpha([{"a": "optimal", "b": "optimal"}, {"a": "harmful", "b": "harmful"}]) == 1.0


def test_it_diffs_words_and_measures_text_similarity():
    segments = word_diff("the user leaves angry", "the user stays")
    assert [(s.op, s.text) for s in segments if s.op != "same"] == [("del", "leaves angry"), ("ins", "stays")]
    assert similarity("a b c d", "a b c d") == 1.0 and similarity("a b", "c d") == 0.0


def test_it_reports_agreement_per_queue_and_pair(client_for, personas, project):
    from webapp.accounts.services import do_create_user
    second = do_create_user("annotator2", "pw-annotator-2", "annotator")[0]
    people = [personas["annotator"], second]
    queue = queues.check_create_queue(personas["researcher"], "double", project, QueueSpec(sample=4, seed=2), 2,
                                      people)
    verdicts = {0: ["optimal", "harmful", "harmful", "optimal"], 1: ["optimal", "harmful", "optimal", "optimal"]}
    for who, person in enumerate(people):
        for _ in range(4):
            item = assignments.do_claim_next(queue, person).item
            revisions.check_save_revision(person, Target(item.trajectory, item.step_index, item.critique),
                                          fields(verdict=verdicts[who][item.position], reasoning=f"r{who}"), None,
                                          queue_item=item)
    result = agreement.for_queue(queue)
    assert result.n_items == 4 and len(result.pairs) == 1
    pair = result.pairs[0]
    assert pair.raw == 0.75 and pair.kappa == pytest.approx(0.5) and 0 < pair.text_similarity < 1
    page = client_for("reviewer").get(f"/queues/{queue.pk}/").content.decode()
    assert "Cohen" in page and "0.500" in page
