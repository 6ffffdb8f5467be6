"""Drop the foreign-key indexes that another index already leads with (message_unique_position for
Message.trajectory, traj_project_id for Trajectory.project, traj_task_id for Trajectory.task): every query they
served is served as well, and an import no longer writes them for every row it adds.

The models say db_index=False; the tables are changed by DROP INDEX on both backends (an AlterField would make
SQLite copy the whole message table, and leave PostgreSQL's index in place)."""

import django.db.models.deletion
from django.db import migrations, models

# (table, column): Django names a field's index the same way on SQLite and PostgreSQL
INDEXES = {
    "trajectories_message_trajectory_id_32b6861b": ("trajectories_message", "trajectory_id"),
    "trajectories_trajectory_project_id_bb7d4e15": ("trajectories_trajectory", "project_id"),
    "trajectories_trajectory_task_id_66ed70e5": ("trajectories_trajectory", "task_id"),
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
                migrations.AlterField(
                    model_name="trajectory",
                    name="project",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="trajectories", to="trajectories.project"),
                ),
                migrations.AlterField(
                    model_name="trajectory",
                    name="task",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="trajectories", to="trajectories.task"),
                ),
            ],
        ),
    ]
