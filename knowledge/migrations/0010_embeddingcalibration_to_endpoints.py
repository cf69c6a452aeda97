"""EmbeddingCalibration moved to the endpoints app with its table
(endpoints 0001): state only, no row or column changes."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("endpoints", "0001_initial"),
        ("knowledge", "0009_hubs_and_local_models"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EmbeddingCalibration")],
        ),
    ]
