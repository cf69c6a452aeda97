from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("endpoints", "0002_moved_content_types"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpointprofile",
            name="probe_note",
            field=models.CharField(blank=True, editable=False, max_length=300),
        ),
    ]
