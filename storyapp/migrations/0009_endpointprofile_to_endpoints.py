"""EndpointProfile moved to the endpoints app with its table
(endpoints 0001): state only, no row or column changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("endpoints", "0001_initial"),
        ("storyapp", "0008_action_attempts"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="campaign",
                    name="endpoint",
                    field=models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                        related_name="campaigns", to="endpoints.endpointprofile",
                    ),
                ),
                migrations.DeleteModel(name="EndpointProfile"),
            ],
        ),
    ]
