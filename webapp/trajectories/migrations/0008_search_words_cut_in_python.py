"""PostgreSQL's search documents made again, their words now cut in Python as SQLite's tokenizer cuts them
(webapp/trajectories/search.py): a document indexed by PostgreSQL's parser held other words for e-mail addresses,
paths and numbers with a dot than a query now looks for. SQLite's index is unchanged."""

from django.db import migrations

from webapp.trajectories import search


def reindex_postgres(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        search.reindex(apps.get_model("trajectories", "Trajectory"), apps.get_model("trajectories", "Message"))


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0007_drop_indexes_led_by_others")]
    operations = [migrations.RunPython(reindex_postgres, migrations.RunPython.noop)]
