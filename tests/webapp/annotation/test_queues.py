"""Queues: built from a filter over steps, handed out one item at a time within the overlap,
leases that expire, returned items that come back to their author, progress."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.annotation.conftest import add_critique, fields
from webapp.annotation.models import Assignment, QueueItem
from webapp.annotation.services import assignments, queues, reviews, revisions
from webapp.annotation.services.queues import QueueError, QueueSpec
from webapp.annotation.services.revisions import Target
from webapp.trajectories.models import Message


@pytest.fixture
def annotators(personas):
    from webapp.accounts.services import do_create_user
    return [personas["annotator"]] + [do_create_user(f"annotator{i}", "pw-annotator", "annotator")[0]
                                      for i in (2, 3)]


def make_queue(personas, project, annotators, spec=None, overlap=1, lease_s=600):
    spec = spec or QueueSpec()
    return queues.check_create_queue(personas["researcher"], "q", project, spec, overlap, annotators,
                                     lease_s=lease_s)


def test_it_builds_a_queue_from_each_filter(personas, project, annotators, trajectory, critiques):
    steps = Message.objects.filter(trajectory__project=project, step_index__isnull=False)
    assert make_queue(personas, project, annotators).n_items == steps.count()
    failed = steps.filter(trajectory__success=False).count()
    assert make_queue(personas, project, annotators, QueueSpec(outcome="failed")).n_items == failed
    assert make_queue(personas, project, annotators, QueueSpec(verdict="harmful")).n_items == 1
    add_critique(trajectory, 3, parse_ok=False)
    assert make_queue(personas, project, annotators, QueueSpec(parse_failures=True)).n_items == 1
    # trajectory failed; critiques said P(success)=0.7 on steps 0..3: the critic predicted success
    said = make_queue(personas, project, annotators, QueueSpec(disagreement="predicted_success_failed"))
    assert said.n_items == 4
    with pytest.raises(QueueError, match="no step of this project matches"):
        make_queue(personas, project, annotators, QueueSpec(disagreement="predicted_failure_succeeded"))
    bare = make_queue(personas, project, annotators, QueueSpec(no_critique=True))
    assert bare.n_items == steps.count() - 4
    sample = make_queue(personas, project, annotators, QueueSpec(sample=25, seed=7))
    again = make_queue(personas, project, annotators, QueueSpec(sample=25, seed=7))
    assert sample.n_items == 25 and list(sample.items.values_list("trajectory_id", "step_index")) == list(
        again.items.values_list("trajectory_id", "step_index"))
    shown = QueueItem.objects.get(queue=make_queue(personas, project, annotators, QueueSpec(verdict="harmful")))
    assert shown.critique_id == critiques[2].pk


def test_it_refuses_bad_queue_settings_with_the_field_named(personas, project, annotators):
    with pytest.raises(QueueError) as e:
        make_queue(personas, project, annotators[:1], overlap=2)
    assert e.value.field == "overlap"
    with pytest.raises(QueueError) as e:
        make_queue(personas, project, annotators, QueueSpec(verdict="harmful"))
    assert e.value.field == "filter"
    with pytest.raises(QueueError) as e:
        make_queue(personas, project, annotators, QueueSpec(no_critique=True, verdict="harmful"))
    assert e.value.field == "no_critique"


def test_it_hands_each_item_to_at_most_overlap_annotators(personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=2, seed=1), overlap=2)
    a, b, c = (assignments.do_claim_next(queue, u) for u in annotators)
    assert a.item_id == b.item_id != c.item_id
    assert assignments.do_claim_next(queue, annotators[0]).pk == a.pk  # a live lease is resumed, not doubled
    assert QueueItem.objects.get(pk=a.item_id).n_taken == 2


def test_it_gives_an_expired_lease_to_the_next_annotator(personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=1, seed=1), overlap=1)
    first = assignments.do_claim_next(queue, annotators[0])
    assert assignments.do_claim_next(queue, annotators[1]) is None
    Assignment.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    second = assignments.do_claim_next(queue, annotators[1])
    assert second is not None and second.item_id == first.item_id
    assert Assignment.objects.get(pk=first.pk).status == Assignment.EXPIRED
    assert QueueItem.objects.get(pk=first.item_id).n_taken == 1


def test_it_keeps_a_late_save_but_does_not_count_it_over_the_overlap(personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=1, seed=1), overlap=1)
    late = assignments.do_claim_next(queue, annotators[0])
    Assignment.objects.filter(pk=late.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    winner = assignments.do_claim_next(queue, annotators[1])
    item = winner.item
    target = Target(item.trajectory, item.step_index, item.critique)
    revisions.check_save_revision(annotators[1], target, fields(), None, queue_item=item)
    revisions.check_save_revision(annotators[0], target, fields(comment="late"), None, queue_item=item)
    item.refresh_from_db()
    assert item.n_done == 1 and item.n_taken == 1
    assert Assignment.objects.get(pk=late.pk).status == Assignment.EXPIRED
    assert target.trajectory.annotations.count() == 2  # the late text is kept all the same


def test_it_frees_the_slot_of_a_skipped_item(personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=1, seed=1), overlap=1)
    claimed = assignments.do_claim_next(queue, annotators[0])
    item = claimed.item
    revisions.check_save_revision(annotators[0], Target(item.trajectory, item.step_index, item.critique),
                                  fields(skipped=True, skip_reason="tool output is truncated"), None, queue_item=item)
    assert Assignment.objects.get(pk=claimed.pk).status == Assignment.SKIPPED
    assert assignments.do_claim_next(queue, annotators[1]).item_id == item.pk
    assert assignments.do_claim_next(queue, annotators[0]) is None  # nobody gets an item twice


def test_it_brings_a_returned_item_back_to_its_author_first(personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=3, seed=1), overlap=1)
    item = assignments.do_claim_next(queue, annotators[0]).item
    revision = revisions.check_save_revision(annotators[0], Target(item.trajectory, item.step_index, item.critique),
                                             fields(), None, queue_item=item)
    assignments.do_claim_next(queue, annotators[0])  # moves on to the next item ...
    Assignment.objects.filter(annotator=annotators[0], status=Assignment.LEASED).update(
        status=Assignment.SKIPPED)  # ... and skips it
    reviews.do_review(personas["reviewer"], revision.annotation, revision.pk, "return", "the verdict is too harsh")
    back = assignments.do_claim_next(queue, annotators[0])
    assert back.item_id == item.pk and back.status == Assignment.RETURNED
    item.refresh_from_db()
    assert item.n_done == 0
    again = revisions.check_save_revision(annotators[0], Target(item.trajectory, item.step_index, item.critique),
                                          fields(verdict="suboptimal"), revision.pk, queue_item=item)
    item.refresh_from_db()
    again.annotation.refresh_from_db()
    assert item.n_done == 1 and again.annotation.state == "submitted"


def test_it_shows_progress_per_queue_and_per_annotator(client_for, personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=2, seed=3), overlap=2)
    item = assignments.do_claim_next(queue, annotators[0]).item
    revisions.check_save_revision(annotators[0], Target(item.trajectory, item.step_index, item.critique),
                                  fields(), None, queue_item=item)
    page = client_for("annotator").get(f"/queues/{queue.pk}/").content.decode()
    assert '<dd id="progress-done">1 / 4</dd>' in page and "<td>annotator</td><td class=\"num\">1</td>" in page


def test_it_walks_an_annotator_through_a_queue_over_http(client_for, personas, project, annotators):
    queue = make_queue(personas, project, annotators, QueueSpec(sample=2, seed=3), overlap=1)
    client = client_for("annotator")
    response = client.post(f"/queues/{queue.pk}/next/")
    assert response.status_code == 302 and "queue_item=" in response["Location"]
    item = Assignment.objects.get(annotator=personas["annotator"]).item
    page = client.get(response["Location"]).content.decode()
    assert 'id="save-next"' in page and f'name="queue_item" value="{item.pk}"' in page
    data = {**fields(), "queue_item": item.pk, "critique": item.critique_id or "", "then": "next"}
    response = client.post(f"/trajectories/{item.trajectory_id}/steps/{item.step_index}/save/", data)
    assert response["Location"] == f"/queues/{queue.pk}/next/"
    response = client.get(response["Location"])
    second = Assignment.objects.get(annotator=personas["annotator"], status=Assignment.LEASED).item
    assert second.pk != item.pk and f"queue_item={second.pk}" in response["Location"]
    assert QueueItem.objects.get(pk=item.pk).n_done == 1


def test_it_creates_a_queue_from_the_form(client_for, personas, project, annotators):
    client = client_for("researcher")
    response = client.post("/queues/new/", {"name": "failed steps", "project": project.slug, "outcome": "failed",
                                            "disagreement": "any", "overlap": 2, "lease_minutes": 10, "sample": 10,
                                            "seed": 0, "assignees": [u.pk for u in annotators[:2]]})
    assert response.status_code == 302
    response = client.post("/queues/new/", {"name": "too many", "project": project.slug, "outcome": "any",
                                            "disagreement": "any", "overlap": 3, "lease_minutes": 10, "seed": 0,
                                            "assignees": [annotators[0].pk]})
    assert response.status_code == 400 and "only 1 assigned" in response.content.decode()
