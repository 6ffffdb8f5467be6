"""The full-text index of trajectories (see webapp/trajectories/search.py)."""

from django.db import migrations

from webapp.trajectories import search


def create_and_fill(apps, schema_editor):
    search.create(schema_editor)
    # Index what is already stored (databases that had trajectories before this migration).
    search.reindex(apps.get_model("trajectories", "Trajectory"), apps.get_model("trajectories", "Message"))


def drop(apps, schema_editor):
    search.drop(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0002_project_facets")]
    operations = [migrations.RunPython(create_and_fill, drop)]
