"""The full-text index of trajectories (see webapp/trajectories/search.py)."""

from collections import defaultdict

from django.db import migrations

from nlac_core.records import TaskRecord, TrajectoryRecord
from webapp.trajectories import convert, search


def create_and_fill(apps, schema_editor):
    search.create(schema_editor)
    # Index what is already stored (databases that had trajectories before this migration).
    Trajectory = apps.get_model("trajectories", "Trajectory")
    Message = apps.get_model("trajectories", "Message")
    last = 0
    while True:
        ids = list(Trajectory.objects.filter(id__gt=last).order_by("id").values_list("id", flat=True)[:500])
        if not ids:
            return
        by_trajectory = defaultdict(list)
        for m in Message.objects.filter(trajectory_id__in=ids).order_by("trajectory_id", "position"):
            by_trajectory[m.trajectory_id].append(convert.message_record(m))
        search.index((tid, search.document(TrajectoryRecord(task=TaskRecord(external_id=""),
                                                            messages=tuple(by_trajectory[tid]))))
                     for tid in ids)
        last = ids[-1]


def drop(apps, schema_editor):
    search.drop(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0002_project_facets")]
    operations = [migrations.RunPython(create_and_fill, drop)]
