from django import forms

from .models import Campaign, EndpointProfile


class CampaignForm(forms.ModelForm):
    """The campaign's settings. Canon is edited as plain lines so a reader
    never has to write JSON: one rule a line, and `dead -> alive` for a
    status change that may never happen."""

    canon_rules = forms.CharField(
        label="Canon rules", required=False, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One rule a line. The narrator is told these are true and may not be contradicted.",
    )
    forbidden_status_changes = forms.CharField(
        label="Forbidden status changes", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One a line, written as “dead -> alive”.",
    )

    class Meta:
        model = Campaign
        fields = [
            "title", "endpoint", "narration_length", "ai_instructions", "plot_essentials", "authors_note",
            "persona_name", "persona_pronouns", "persona_description", "narrator_prompt",
        ]
        widgets = {
            "ai_instructions": forms.Textarea(attrs={"rows": 3}),
            "plot_essentials": forms.Textarea(attrs={"rows": 3}),
            "authors_note": forms.Textarea(attrs={"rows": 2}),
            "persona_description": forms.Textarea(attrs={"rows": 2}),
            "narrator_prompt": forms.Textarea(attrs={"rows": 4}),
        }
        labels = {
            "endpoint": "Model endpoint",
            "ai_instructions": "AI instructions",
            "authors_note": "Author's note",
            "persona_name": "Your character's name",
            "persona_pronouns": "Pronouns",
            "persona_description": "Your character",
            "narrator_prompt": "Narrator prompt override",
        }
        help_texts = {
            "ai_instructions": "How the narrator should write: voice, tense, what to avoid.",
            "plot_essentials": "Facts the narrator must always remember.",
            "authors_note": "A steer placed close to the end of the story, where it weighs most.",
            "narration_length": "How long each narration should be, within the endpoint's reply limit.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = EndpointProfile.objects.all()
        self.fields["endpoint"].empty_label = "The server's default endpoint"
        if self.instance.pk:
            self.initial["canon_rules"] = "\n".join(self.instance.canon_rules)
            self.initial["forbidden_status_changes"] = "\n".join(
                f"{c['from']} -> {c['to']}" for c in self.instance.forbidden_status_changes
            )

    def clean_canon_rules(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["canon_rules"].splitlines() if line.strip()]

    def clean_forbidden_status_changes(self) -> list[dict]:
        changes = []
        for number, line in enumerate(self.cleaned_data["forbidden_status_changes"].splitlines(), start=1):
            if not line.strip():
                continue
            before, arrow, after = line.partition("->")
            if not arrow or not before.strip() or not after.strip():
                raise forms.ValidationError(f"Line {number} should look like “dead -> alive”.")
            changes.append({"from": before.strip(), "to": after.strip()})
        return changes

    def save(self, commit: bool = True) -> Campaign:
        campaign = super().save(commit=False)
        campaign.canon = {
            "rules": self.cleaned_data["canon_rules"],
            "forbidden_status_changes": self.cleaned_data["forbidden_status_changes"],
        }
        if commit:
            campaign.save()
        return campaign


class EndpointProfileForm(forms.ModelForm):
    """Admin form. The key is write-only: it is never rendered back, and an
    empty field keeps the stored one."""

    api_key = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key. Stored encrypted.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")

    class Meta:
        model = EndpointProfile
        fields = [
            "name", "base_url", "chat_model", "api_mode", "temperature", "max_output_tokens",
            "context_token_budget", "embedding_model", "timeout_seconds", "is_default",
        ]

    def save(self, commit: bool = True) -> EndpointProfile:
        profile = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            profile.api_key = ""
        elif self.cleaned_data.get("api_key"):
            profile.api_key = self.cleaned_data["api_key"]
        if commit:
            profile.save()
        return profile


class ActionEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=20000)


class TurnForm(forms.Form):
    text = forms.CharField(required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 3}))
