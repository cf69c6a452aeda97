"""EndpointProfile (from storyapp) and EmbeddingCalibration (from knowledge)
move here with their tables: state only, the rows stay where they are."""

import endpoints.allowlist
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        # The tables this state describes: made and last altered there.
        ("storyapp", "0006_endpoint_probe_ratio_snapshot_messages"),
        ("knowledge", "0003_embedding_calibration"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='EmbeddingCalibration',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('model', models.CharField(max_length=200, unique=True)),
                        ('floor', models.FloatField()),
                        ('related', models.JSONField(default=dict)),
                        ('unrelated', models.JSONField(default=dict)),
                        ('method', models.CharField(blank=True, max_length=200)),
                        ('measured_at', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'knowledge_embeddingcalibration',
                        'ordering': ['model'],
                    },
                ),
                migrations.CreateModel(
                    name='EndpointProfile',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('base_url', models.CharField(help_text='For example http://127.0.0.1:11434/v1', max_length=300, validators=[endpoints.allowlist.validate_base_url])),
                        ('api_key_encrypted', models.TextField(blank=True, editable=False)),
                        ('chat_model', models.CharField(max_length=200)),
                        ('api_mode', models.CharField(choices=[('chat', 'Chat completions (messages)'), ('completions', 'Text completions (one labelled text, for models without a chat template)')], default='chat', max_length=20)),
                        ('temperature', models.FloatField(default=0.8)),
                        ('max_output_tokens', models.PositiveIntegerField(default=600)),
                        ('context_token_budget', models.PositiveIntegerField(default=8192)),
                        ('embedding_model', models.CharField(blank=True, max_length=200)),
                        ('first_byte_timeout_seconds', models.PositiveIntegerField(default=30, help_text='How long to wait for the first word of a reply (or any silence after it).')),
                        ('timeout_seconds', models.PositiveIntegerField(default=300, help_text='The longest a whole reply may take, from the request to its last word.')),
                        ('learned_window_tokens', models.PositiveIntegerField(blank=True, help_text="Learned from the server's overflow errors; clear it after changing the model.", null=True)),
                        ('probed_window_tokens', models.PositiveIntegerField(blank=True, editable=False, null=True)),
                        ('probed_window_source', models.CharField(blank=True, editable=False, max_length=100)),
                        ('probed_window_detail', models.CharField(blank=True, editable=False, max_length=300)),
                        ('probed_at', models.DateTimeField(blank=True, editable=False, null=True)),
                        ('token_ratio', models.FloatField(blank=True, editable=False, null=True)),
                        ('is_default', models.BooleanField(default=False, help_text='Used by new campaigns that do not pick a profile.')),
                        ('is_scripted_demo', models.BooleanField(default=False, help_text='The built-in scripted demo server, not a real model.')),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('updated', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'db_table': 'storyapp_endpointprofile',
                        'ordering': ['name'],
                    },
                ),
            ],
        ),
    ]
