from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("endpoints", "0003_endpointprofile_probe_note")]

    operations = [
        migrations.AddField(
            model_name="endpointprofile",
            name="instruct_template",
            field=models.CharField(
                blank=True, max_length=40,
                help_text="Completions mode only. Empty: the template detected from the server (shown below).",
            ),
        ),
        migrations.AddField(
            model_name="endpointprofile", name="detected_template",
            field=models.CharField(blank=True, editable=False, max_length=40),
        ),
        migrations.AddField(
            model_name="endpointprofile", name="detected_template_why",
            field=models.CharField(blank=True, editable=False, max_length=300),
        ),
        migrations.AddField(
            model_name="endpointprofile", name="thinking",
            field=models.CharField(
                choices=[("allow", "Let a reasoning model think (its thinking is kept out of the story)"),
                         ("off", "Ask the model not to think")],
                default="allow", max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="endpointprofile", name="reasoning_reserve_tokens",
            field=models.PositiveIntegerField(
                default=0, help_text="Tokens a reasoning model may think for beyond the narration's length; "
                                     "the prompt leaves room for them.",
            ),
        ),
        migrations.AlterField(
            model_name="endpointprofile", name="api_mode",
            field=models.CharField(
                choices=[("chat", "Chat completions (messages)"),
                         ("completions", "Text completions (one text in the model's instruct template)")],
                default="chat", max_length=20,
            ),
        ),
    ]
