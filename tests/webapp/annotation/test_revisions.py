"""Saves append immutable revisions; a stale save is a conflict that writes nothing."""

from __future__ import annotations

import pytest

from tests.webapp.annotation.conftest import fields
from webapp.annotation.models import Annotation, AuditEvent, Revision
from webapp.annotation.services import revisions
from webapp.annotation.services.revisions import Conflict, RevisionRefused, Target


def test_it_saves_a_revision_and_never_changes_the_model_critique(personas, trajectory, critiques):
    critique = critiques[1]
    before = dict(critique.record)
    target = Target(trajectory, 1, critique)
    first = revisions.check_save_revision(personas["annotator"], target, fields(), None)
    second = revisions.check_save_revision(personas["annotator"], target, fields(verdict="suboptimal"), first.pk)
    annotation = Annotation.objects.get(pk=first.annotation_id)
    assert annotation.head_id == second.pk and second.parent_id == first.pk and annotation.state == "submitted"
    critique.refresh_from_db()
    assert critique.record == before and critique.verdict == "suboptimal"
    assert [e.action for e in AuditEvent.objects.order_by("id")] == ["revision.save", "revision.save"]
    assert AuditEvent.objects.order_by("id").last().before["verdict"] == "harmful"


def test_it_refuses_to_update_a_revision(personas, trajectory, critiques):
    revision = revisions.check_save_revision(personas["annotator"], Target(trajectory, 0, critiques[0]), fields(), None)
    revision.comment = "sneaky"
    with pytest.raises(ValueError, match="immutable"):
        revision.save()


def test_it_turns_a_stale_save_into_a_conflict_that_writes_nothing(personas, trajectory, critiques):
    target = Target(trajectory, 0, critiques[0])
    first = revisions.check_save_revision(personas["annotator"], target, fields(reasoning="mine, tab one"), None)
    annotation = Annotation.objects.get(pk=first.annotation_id)
    theirs = revisions.check_save_revision(personas["reviewer"], target, fields(reasoning="the reviewer's"),
                                           first.pk, annotation=annotation)
    with pytest.raises(Conflict) as raised:
        revisions.check_save_revision(personas["annotator"], target, fields(reasoning="mine, tab two"), first.pk)
    assert raised.value.head.pk == theirs.pk and raised.value.head.reasoning == "the reviewer's"
    assert Revision.objects.count() == 2 and AuditEvent.objects.count() == 2
    # merging = saving on top of the head that won
    merged = revisions.check_save_revision(personas["annotator"], target,
                                           fields(reasoning="the reviewer's + mine, tab two"), theirs.pk)
    assert Annotation.objects.get(pk=annotation.pk).head_id == merged.pk


def test_it_conflicts_when_two_tabs_make_the_first_save(personas, trajectory, critiques):
    target = Target(trajectory, 2, critiques[2])
    revisions.check_save_revision(personas["annotator"], target, fields(comment="tab one"), None)
    with pytest.raises(Conflict):
        revisions.check_save_revision(personas["annotator"], target, fields(comment="tab two"), None)
    assert Annotation.objects.count() == 1 and Revision.objects.count() == 1


def test_it_restores_an_old_revision_as_a_new_one(personas, trajectory, critiques):
    target = Target(trajectory, 0, critiques[0])
    a = revisions.check_save_revision(personas["annotator"], target, fields(reasoning="first idea"), None)
    b = revisions.check_save_revision(personas["annotator"], target, fields(reasoning="second idea"), a.pk)
    restored = revisions.check_restore(personas["annotator"], a, b.pk)
    assert restored.pk not in (a.pk, b.pk) and restored.reasoning == "first idea"
    assert restored.parent_id == b.pk and restored.restored_from_id == a.pk
    assert Revision.objects.filter(annotation=a.annotation).count() == 3


def test_it_undoes_the_last_save_by_reverting_then_by_withdrawing(personas, trajectory, critiques):
    target = Target(trajectory, 0, critiques[0])
    a = revisions.check_save_revision(personas["annotator"], target, fields(reasoning="keep this"), None)
    revisions.check_save_revision(personas["annotator"], target, fields(reasoning="oops"), a.pk)
    annotation = revisions.do_undo_last(personas["annotator"])
    annotation.refresh_from_db()
    assert annotation.head.reasoning == "keep this" and annotation.head.restored_from_id == a.pk
    assert Revision.objects.count() == 3  # nothing was deleted


def test_it_withdraws_a_first_save_softly_and_restores_it(personas, trajectory, critiques):
    target = Target(trajectory, 1, critiques[1])
    revisions.check_save_revision(personas["annotator"], target, fields(), None)
    annotation = revisions.do_undo_last(personas["annotator"])
    annotation.refresh_from_db()
    assert annotation.deleted_at is not None and Revision.objects.count() == 1
    revisions.do_restore_deleted(personas["reviewer"], annotation)
    annotation.refresh_from_db()
    assert annotation.deleted_at is None
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "revision.save", "revision.undo", "annotation.restore"]


def test_it_writes_a_critique_for_a_step_no_model_critiqued(personas, trajectory):
    revision = revisions.check_save_revision(personas["researcher"], Target(trajectory, 3), fields(), None)
    assert revision.annotation.critique is None and revision.annotation.step_index == 3


def test_it_refuses_a_critique_of_another_step_or_a_step_that_does_not_exist(personas, trajectory, critiques):
    with pytest.raises(RevisionRefused, match="another step"):
        revisions.check_save_revision(personas["annotator"], Target(trajectory, 1, critiques[0]), fields(), None)
    with pytest.raises(RevisionRefused, match="no agent step 999"):
        revisions.check_save_revision(personas["annotator"], Target(trajectory, 999), fields(), None)
    assert not Revision.objects.exists()
