"""pgvector's store for the semantic path, on PostgreSQL where the
extension can be created (knowledge/pgvector.py); elsewhere nothing, and
the numpy path serves the same retrieval."""

from django.db import migrations


def install(apps, schema_editor):
    from knowledge import pgvector

    said = pgvector.install(schema_editor)
    if said:
        print(f"\n  {said}")


def uninstall(apps, schema_editor):
    from knowledge import pgvector

    pgvector.uninstall(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0014_secrets_secret_seat")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
