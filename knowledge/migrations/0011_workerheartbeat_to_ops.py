from django.db import migrations


class Migration(migrations.Migration):
    """WorkerHeartbeat moves to ops, which keeps its table: state only."""

    dependencies = [
        ("knowledge", "0010_embeddingcalibration_to_endpoints"),
        ("ops", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="WorkerHeartbeat")],
            database_operations=[],
        ),
    ]
