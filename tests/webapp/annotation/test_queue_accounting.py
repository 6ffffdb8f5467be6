"""Queue slot accounting through every transition, and the blindness of overlapped annotators."""

from __future__ import annotations

import pytest

from tests.webapp.annotation.conftest import fields
from webapp.annotation.models import Assignment, QueueItem
from webapp.annotation.services import assignments, queues, reviews, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Target


@pytest.fixture
def pair(personas):
    from webapp.accounts.services import do_create_user
    return [personas["annotator"], do_create_user("annotator2", "pw-annotator-2", "annotator")[0]]


def target(item):
    return Target(item.trajectory, item.step_index, item.critique)


def test_it_does_not_let_a_non_assignee_use_up_a_slot(personas, project, pair):
    queue = queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(sample=1), 1, pair[:1])
    item = queue.items.get()
    revisions.check_save_revision(personas["researcher"], target(item), fields(), None, queue_item=item)
    assert assignments.do_claim_next(queue, pair[0]).item_id == item.pk


def test_it_counts_an_accepted_return_as_done_again(personas, project, pair):
    queue = queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(sample=2), 1, pair[:1])
    item = assignments.do_claim_next(queue, pair[0]).item
    first = revisions.check_save_revision(pair[0], target(item), fields(), None, queue_item=item)
    reviews.do_review(personas["reviewer"], first.annotation, first.pk, "return", "check the policy")
    reviews.do_review(personas["reviewer"], first.annotation, first.pk, "accept")
    assert QueueItem.objects.get(pk=item.pk).n_done == 1
    assert Assignment.objects.get(item=item).status == Assignment.DONE
    assert assignments.do_claim_next(queue, pair[0]).item_id != item.pk  # not stuck on the accepted item


def test_it_never_makes_a_skip_gold(personas, project, pair):
    queue = queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(sample=1), 1, pair[:1])
    item = assignments.do_claim_next(queue, pair[0]).item
    skip = revisions.check_save_revision(pair[0], target(item), fields(skipped=True, skip_reason="unclear"), None,
                                         queue_item=item)
    with pytest.raises(ValueError, match="skipped"):
        reviews.do_review(personas["reviewer"], skip.annotation, skip.pk, "accept")
    assert not reviews.gold_revisions().exists()


def test_it_takes_the_slot_again_when_a_skip_is_undone(personas, project, pair):
    queue = queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(sample=1), 1, pair[:1])
    item = assignments.do_claim_next(queue, pair[0]).item
    done = revisions.check_save_revision(pair[0], target(item), fields(), None, queue_item=item)
    revisions.check_save_revision(pair[0], target(item), fields(skipped=True, skip_reason="unclear"), done.pk,
                                  queue_item=item)
    assert QueueItem.objects.get(pk=item.pk).n_taken == 0
    revisions.do_undo_last(pair[0])
    item.refresh_from_db()
    assert (item.n_taken, item.n_done) == (1, 1) and Assignment.objects.get(item=item).status == Assignment.DONE
    assert revisions.do_undo_last(pair[0]) is not None  # the next undo goes one further back
    assert revisions.do_undo_last(pair[0]) is not None


def test_it_keeps_overlapped_annotators_blind_to_each_other(client_for, client, personas, project, pair, critiques,
                                                            trajectory):
    queue = queues.check_create_queue(personas["researcher"], "q", project, QueueSpec(verdict="harmful"), 2, pair)
    item = queue.items.get()
    revisions.check_save_revision(pair[0], target(item), fields(verdict="optimal", reasoning="first opinion"), None,
                                  queue_item=item)
    client.force_login(pair[1])
    page = client.get(f"/trajectories/{trajectory.pk}/steps/{item.step_index}/?queue_item={item.pk}").content.decode()
    assert "first opinion" not in page and "annotator: <strong>optimal" not in page
    page = client_for("reviewer").get(f"/trajectories/{trajectory.pk}/steps/{item.step_index}/").content.decode()
    assert "annotator: <strong>optimal" in page


def test_it_survives_a_stash_with_bad_ids_and_odd_digits(client, personas, trajectory, critiques):
    url = f"/trajectories/{trajectory.pk}/steps/1/"
    client.post(url + "save/", {**fields(), "critique": critiques[1].pk, "annotation": "x1", "base_revision": "²"})
    client.force_login(personas["researcher"])
    assert client.get(url).status_code == 200
    assert client.get(url + "?annotation=²&critique=²").status_code == 200
    assert client.get("/audit/?before=²").status_code == 403  # researchers do not read the audit log
    client.force_login(personas["admin"])
    assert client.get("/audit/?before=²").status_code == 200
