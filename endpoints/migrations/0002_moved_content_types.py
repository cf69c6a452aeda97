"""The two moved models keep their content types, renamed to this app, as
Django's own RenameModel does: the admin's per-model permissions granted to
staff, and the admin log's entries, stay attached to them. A fresh database
has none yet (they are made after migrating), so there is nothing to rename."""

from django.db import migrations

MOVED = (("storyapp", "endpointprofile"), ("knowledge", "embeddingcalibration"))


def _rename(apps, schema_editor, *, backwards: bool) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.db_manager(schema_editor.connection.alias)
    for app_label, model in MOVED:
        old, new = ("endpoints", app_label) if backwards else (app_label, "endpoints")
        if not types.filter(app_label=new, model=model).exists():
            types.filter(app_label=old, model=model).update(app_label=new)
    ContentType.objects.clear_cache()


def forwards(apps, schema_editor) -> None:
    _rename(apps, schema_editor, backwards=False)


def backwards(apps, schema_editor) -> None:
    _rename(apps, schema_editor, backwards=True)


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("endpoints", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
