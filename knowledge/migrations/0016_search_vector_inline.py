"""PostgreSQL keeps each passage's search vector in its row (compressed),
moving the text out of line first.

Ranking reads the vector of every passage that matches (ts_rank), the text
only of the few candidates. Stored out of line by default, each match cost a
lookup in the TOAST index and reads of its chunks: at 100,000 passages a
ranking read 9,219 buffers for 1,534 matches, inline 1,739, and its first
query after a restart with cold caches took 530 ms instead of 850. Writing
costs the same. Existing rows move when they are next written (a re-index);
the setting is a catalog change, with no rewrite and no lock held for long.
"""

from django.db import migrations

TABLE = "knowledge_knowledgechunk"


def _storage(schema_editor, mode: str) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN search SET STORAGE {mode}")


def inline(apps, schema_editor):
    _storage(schema_editor, "MAIN")


def out_of_line(apps, schema_editor):
    _storage(schema_editor, "EXTENDED")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0015_vector_store")]

    operations = [migrations.RunPython(inline, out_of_line, elidable=False)]
