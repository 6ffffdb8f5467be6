"""Reviewers accept (gold) or return; every role sees what it should and nothing more; the audit log."""

from __future__ import annotations

import pytest

from tests.webapp.annotation.conftest import fields
from webapp.annotation.models import Annotation, AuditEvent, Revision
from webapp.annotation.services import queues, reviews, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Target


@pytest.fixture
def queue(personas, project, trajectory, critiques):
    return queues.check_create_queue(personas["researcher"], "verdicts", project, QueueSpec(verdict="suboptimal"),
                                     1, [personas["annotator"]])


@pytest.fixture
def submitted(personas, trajectory, critiques, queue):
    item = queue.items.get()
    return revisions.check_save_revision(personas["annotator"], Target(trajectory, 1, critiques[1]), fields(), None,
                                         queue_item=item)


def test_it_makes_only_accepted_revisions_gold(personas, submitted):
    assert not reviews.gold_revisions().exists()
    reviews.do_review(personas["reviewer"], submitted.annotation, submitted.pk, "accept")
    assert list(reviews.gold_revisions()) == [submitted]
    later = revisions.check_save_revision(personas["annotator"], Target.of(submitted.annotation),
                                          fields(comment="more"), submitted.pk)
    assert list(reviews.gold_revisions()) == [submitted]  # the gold stays the accepted one until re-reviewed
    assert Annotation.objects.get().state == "submitted" and later.pk != submitted.pk
    revisions.do_delete(personas["reviewer"], submitted.annotation)
    assert not reviews.gold_revisions().exists()  # deleted annotations are not gold


def test_it_refuses_a_stale_review_and_a_return_without_reason(personas, submitted):
    revisions.check_save_revision(personas["annotator"], Target.of(submitted.annotation), fields(comment="newer"),
                                  submitted.pk)
    with pytest.raises(reviews.StaleReview):
        reviews.do_review(personas["reviewer"], submitted.annotation, submitted.pk, "accept")
    with pytest.raises(ValueError, match="say why"):
        reviews.do_review(personas["reviewer"], submitted.annotation, Annotation.objects.get().head_id, "return")
    assert not reviews.gold_revisions().exists()


def test_it_reviews_over_http_and_shows_the_return_to_the_author(client_for, personas, submitted, trajectory,
                                                                 critiques):
    client = client_for("reviewer")
    page = client.get("/review/").content.decode()
    assert f'id="review-{submitted.annotation_id}"' in page
    client.post(f"/annotations/{submitted.annotation_id}/review/",
                {"revision": submitted.pk, "decision": "return", "reason": "<b>too harsh</b>"})
    assert Annotation.objects.get().state == "returned"
    page = client_for("annotator").get(f"/trajectories/{trajectory.pk}/steps/1/?critique={critiques[1].pk}")
    assert "Returned by a reviewer: &lt;b&gt;too harsh&lt;/b&gt;" in page.content.decode()


def test_it_lets_each_role_do_only_its_part(client, personas, project, trajectory, critiques, queue, submitted):
    steps = f"/trajectories/{trajectory.pk}/steps"
    other = project.trajectories.exclude(pk=trajectory.pk).filter(n_steps__gte=1).first()
    data = {**fields(), "critique": ""}

    def as_(name):
        client.force_login(personas[name])
        return client

    # outsiders: nothing
    c = as_("outsider")
    for path in (f"{steps}/1/", "/queues/", f"/queues/{queue.pk}/", "/review/", "/audit/",
                 f"/annotations/{submitted.annotation_id}/"):
        assert c.get(path).status_code == 403, path
    assert c.post(f"{steps}/1/save/", data).status_code == 403
    # annotators: their queue's steps only, no review, no audit, no queue creation
    c = as_("annotator")
    assert f"/queues/{queue.pk}/" in c.get("/queues/").content.decode()
    assert c.get(f"/queues/{queue.pk}/").status_code == 200
    assert c.post(f"/trajectories/{other.pk}/steps/0/save/", data).status_code == 403
    assert c.post(f"{steps}/1/save/", {**data, "critique": critiques[1].pk,
                                       "base_revision": submitted.pk}).status_code == 302
    for path in ("/review/", "/audit/", "/queues/new/"):
        assert c.get(path).status_code == 403, path
    assert c.post(f"/annotations/{submitted.annotation_id}/review/",
                  {"revision": submitted.pk, "decision": "accept"}).status_code == 403
    # an annotator who is not assigned does not see the queue, nor someone else's annotation
    from webapp.accounts.services import do_create_user
    stranger = do_create_user("stranger", "pw-stranger-1", "annotator")[0]
    client.force_login(stranger)
    assert client.get(f"/queues/{queue.pk}/").status_code == 404
    assert client.get(f"/annotations/{submitted.annotation_id}/").status_code == 403
    assert client.post(f"{steps}/1/save/", data).status_code == 403
    # reviewers review, read the audit log, may edit an annotator's annotation
    c = as_("reviewer")
    assert c.get("/review/").status_code == 200 and c.get("/audit/").status_code == 200
    head = Annotation.objects.get().head_id
    assert c.post(f"{steps}/1/save/", {**data, "critique": critiques[1].pk, "annotation": submitted.annotation_id,
                                       "base_revision": head}).status_code == 302
    assert Revision.objects.order_by("-id").first().author == personas["reviewer"]
    assert c.get("/queues/new/").status_code == 403
    # researchers create queues and annotate anywhere, but do not review
    c = as_("researcher")
    assert c.get("/queues/new/").status_code == 200
    assert c.post(f"/trajectories/{other.pk}/steps/0/save/", data).status_code == 302
    assert c.get("/review/").status_code == 403
    # admins do everything
    c = as_("admin")
    assert all(c.get(p).status_code == 200 for p in ("/review/", "/audit/", "/queues/new/"))


def test_it_records_every_action_in_the_audit_log(client_for, personas, submitted):
    reviews.do_review(personas["reviewer"], submitted.annotation, submitted.pk, "accept")
    revisions.do_delete(personas["reviewer"], submitted.annotation)
    revisions.do_restore_deleted(personas["admin"], submitted.annotation)
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor__username"))
    assert actions == [("queue.create", "researcher"), ("revision.save", "annotator"), ("review.accept", "reviewer"),
                       ("annotation.delete", "reviewer"), ("annotation.restore", "admin")]
    page = client_for("admin").get("/audit/").content.decode()
    assert "review.accept" in page and "annotation.restore" in page


def test_it_never_redirects_to_an_outside_address(client_for, personas, submitted):
    response = client_for("reviewer").post(f"/annotations/{submitted.annotation_id}/review/", {
        "revision": submitted.pk, "decision": "accept", "back": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/review/"
    response = client_for("annotator").post("/annotate/undo/", {"back": "//evil.example/"})
    assert not response["Location"].startswith("//evil")
