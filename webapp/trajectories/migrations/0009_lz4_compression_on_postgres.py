"""On PostgreSQL, compress the long values of trajectories, their messages and tasks with LZ4 instead of the default
pglz: every episode of a tau-bench run holds its policy (about 6,000 characters) twice, as its policy and as its system
message, and pglz compressing them was a sixth of the server's work in an import of 10,000 trajectories
(bench/bench_vs_label_studio.py); LZ4 compresses and decompresses several times faster, for a few percent more disk.

Only new values are written so (stored ones stay pglz, both read the same). A server built without LZ4 is left as it
is. SQLite stores text as it is: nothing to do there. Django's models know nothing of a column's compression, so this
changes the database only."""

from django.db import migrations, models


def lz4_supported(cursor) -> bool:
    cursor.execute("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    row = cursor.fetchone()
    return bool(row) and "lz4" in (row[0] or [])


def long_columns(apps):
    """(table, column) of every text and JSON field of the models whose values can be long."""
    for name in ("Task", "Trajectory", "Message"):
        model = apps.get_model("trajectories", name)
        for field in model._meta.concrete_fields:
            if isinstance(field, (models.TextField, models.JSONField)):
                yield model._meta.db_table, field.column


def set_compression(method: str):
    def run(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            if method == "lz4" and not lz4_supported(cursor):
                return
        q = connection.ops.quote_name
        for table, column in long_columns(apps):
            schema_editor.execute(f"ALTER TABLE {q(table)} ALTER COLUMN {q(column)} SET COMPRESSION {method}")
    return run


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0008_search_words_cut_in_python")]
    operations = [migrations.RunPython(set_compression("lz4"), set_compression("default"))]
