"""Many annotators at once against the real database (PostgreSQL in CI): no item ever exceeds its
overlap, and no revision is lost."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from tests.webapp.annotation.conftest import fields
from webapp.annotation.models import Annotation, Assignment, QueueItem, Revision
from webapp.annotation.services import assignments, queues, revisions
from webapp.annotation.services.queues import QueueSpec
from webapp.annotation.services.revisions import Conflict, Target

pytestmark = pytest.mark.django_db(transaction=True)


def run_threads(n: int, work):
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    results: list = [None] * n

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    close_old_connections()
    assert not errors, errors
    return results


def test_it_never_exceeds_the_overlap_with_annotators_pressing_next_at_once(personas, project):
    from webapp.accounts.services import do_create_user
    people = [do_create_user(f"crowd{i}", "pw-crowd-123", "annotator")[0] for i in range(10)]
    queue = queues.check_create_queue(personas["researcher"], "crowd", project, QueueSpec(sample=12, seed=5), 3,
                                      people)

    def annotate(i):
        saved = []
        while (claimed := assignments.do_claim_next(queue, people[i])) is not None:
            item = QueueItem.objects.select_related("trajectory", "critique", "queue").get(pk=claimed.item_id)
            revision = revisions.check_save_revision(people[i], Target(item.trajectory, item.step_index,
                                                                       item.critique),
                                                     fields(comment=f"crowd{i}"), None, queue_item=item)
            saved.append(revision.pk)
        return saved

    saved = [pk for part in run_threads(len(people), annotate) for pk in part]
    assert len(saved) == 12 * 3  # every slot filled exactly once
    assert Revision.objects.filter(pk__in=saved).count() == len(saved) == Revision.objects.count()
    for item in QueueItem.objects.filter(queue=queue):
        done = Assignment.objects.filter(item=item, status=Assignment.DONE).count()
        assert done == item.n_done == item.n_taken == 3, item


def test_it_lets_exactly_one_of_many_simultaneous_saves_on_the_same_base_win(personas, project):
    trajectory = project.trajectories.filter(n_steps__gte=1).first()
    target = Target(trajectory, 0)
    base = revisions.check_save_revision(personas["annotator"], target, fields(), None)
    annotation = Annotation.objects.get(pk=base.annotation_id)

    def save(i):
        actor = personas["annotator"] if i % 2 else personas["reviewer"]
        try:
            return revisions.check_save_revision(actor, target, fields(comment=f"tab {i}"), base.pk,
                                                 annotation=annotation).pk
        except Conflict:
            return None

    results = run_threads(8, save)
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    annotation.refresh_from_db()
    assert annotation.head_id == winners[0] and Revision.objects.count() == 2
