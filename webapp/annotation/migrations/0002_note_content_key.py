"""Notes get an identity (``content_key``) so that importing a notes file again adds nothing.

Existing notes are keyed in place. Where an earlier double import already stored the same note twice, the
first keeps the key and the later copies keep none (""): nothing is deleted, and the copies stay visible
for a person to remove.
"""

from django.conf import settings
from django.db import migrations, models

from nlac_core.formats.notes_csv import note_key


def key_existing_notes(apps, schema_editor):
    Note = apps.get_model("annotation", "Note")
    seen: set[tuple[int, str]] = set()
    keyed = []
    notes = Note.objects.order_by("id").only("pk", "trajectory_id", "step_index", "author_name", "text")
    for note in notes.iterator():
        key = note_key(note.step_index, note.author_name, note.text)
        if (note.trajectory_id, key) in seen:
            continue
        seen.add((note.trajectory_id, key))
        note.content_key = key
        keyed.append(note)
        if len(keyed) >= 1000:
            Note.objects.bulk_update(keyed, ["content_key"])
            keyed = []
    Note.objects.bulk_update(keyed, ["content_key"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='note',
            name='content_key',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.RunPython(key_existing_notes, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='note',
            constraint=models.UniqueConstraint(condition=models.Q(('content_key', ''), _negated=True),
                                               fields=('trajectory', 'content_key'), name='note_unique_content'),
        ),
    ]
