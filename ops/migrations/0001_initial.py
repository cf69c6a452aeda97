from django.db import migrations, models


class Migration(migrations.Migration):
    """WorkerHeartbeat moves here from knowledge, keeping its table: state only."""

    initial = True

    dependencies = [
        ("knowledge", "0010_embeddingcalibration_to_endpoints"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="WorkerHeartbeat",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("seen", models.DateTimeField()),
                        ("queues", models.CharField(blank=True, max_length=200)),
                        ("local_models", models.CharField(blank=True, max_length=200)),
                    ],
                    options={"db_table": "knowledge_workerheartbeat"},
                ),
            ],
            database_operations=[],
        ),
    ]
