"""Drop the index of Message.trajectory, which message_unique_position (trajectory, position) already leads with: every
query it served is served as well (a trajectory's messages in order), and an import no longer writes it for each of
its ~27 messages a trajectory. (Trajectory.project's and Trajectory.task's stay: SQLite answers a search within a
project, newest first, by walking the single-column index in id order; with only (project, id) it sorted all
matches, 0.5 s for a common word at 100,000 trajectories.)

The model says db_index=False; the table is changed by DROP INDEX on both backends (an AlterField would make SQLite
copy the whole message table)."""

import django.db.models.deletion
from django.db import migrations, models

# (table, column): Django names a field's index the same way on SQLite and PostgreSQL
INDEXES = {
    "trajectories_message_trajectory_id_32b6861b": ("trajectories_message", "trajectory_id"),
}


class Migration(migrations.Migration):

    dependencies = [
        ("trajectories", "0006_trajectory_source_model_from_file_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{name}"', f'CREATE INDEX "{name}" ON "{table}" ("{column}")')
                for name, (table, column) in INDEXES.items()
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="trajectory",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="messages", to="trajectories.trajectory"),
                ),
            ],
        ),
    ]
