"""The lexical index's database objects, which differ per database.

PostgreSQL: the (campaign, tsvector) GIN index. SQLite: the FTS5 table and
the triggers that keep it in sync with the chunk rows. See knowledge/lexical/.
"""

from django.db import migrations


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        from knowledge.lexical import postgres

        postgres.install(schema_editor)
    elif schema_editor.connection.vendor == "sqlite":
        from knowledge.lexical import sqlite

        sqlite.install(schema_editor)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        from knowledge.lexical import postgres

        postgres.uninstall(schema_editor)
    elif schema_editor.connection.vendor == "sqlite":
        from knowledge.lexical import sqlite

        sqlite.uninstall(schema_editor)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
