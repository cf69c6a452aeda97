from django import forms

from contextbuild import instruct

from . import samplers
from .models import EndpointProfile

PREFIX = "sampler_"


class SamplerField(forms.CharField):
    """One sampler setting: empty is the server's default; a number is
    checked against the setting's range; strings are one per line."""

    def __init__(self, name: str, spec: dict, **kwargs):
        self.setting = name
        widget = forms.Textarea(attrs={"rows": 2}) if spec["type"] == "strings" else forms.TextInput(
            attrs={"inputmode": "decimal", "size": 10})
        hint = "one per line" if spec["type"] == "strings" else f"{spec['min']} to {spec['max']}"
        super().__init__(required=False, label=spec["label"], widget=widget, help_text=f"Empty: the server's default ({hint}).",
                         **kwargs)

    def clean(self, value):
        try:
            return samplers.clean(self.setting, super().clean(value))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


#: A form's sampler fields, one per setting of endpoints/data/samplers.json.
SamplerFields = type("SamplerFields", (forms.Form,), {
    PREFIX + name: SamplerField(name, spec) for name, spec in samplers.settings().items()
})


def sampler_initial(values: dict | None) -> dict:
    """The fields' initial text for stored settings."""
    return {PREFIX + name: ("\n".join(value) if isinstance(value, list) else value)
            for name, value in (values or {}).items() if name in samplers.settings()}


def sampler_values(cleaned: dict) -> dict:
    """The settings a form's cleaned data holds (empty ones left out)."""
    return {name[len(PREFIX):]: value for name, value in cleaned.items()
            if name.startswith(PREFIX) and value is not None}


class EndpointProfileForm(SamplerFields, forms.ModelForm):
    """Admin form. The key is write-only: it is never rendered back, and an
    empty field keeps the stored one."""

    api_key = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current key. Stored encrypted.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    instruct_template = forms.ChoiceField(
        required=False, label="Instruct template",
        choices=[("", "Detect from the server")] + [(n, t.label) for n, t in instruct.templates().items()],
        help_text="Completions mode renders the prompt in this template. Detect: from the server's chat "
                  "template (llama.cpp /props, Ollama /api/show) or the model's name; plain labels for a base model.",
    )

    backend = forms.ChoiceField(
        required=False, label="Server kind",
        choices=[("", "Recognise it (the window probe)")] + [(k, b["label"]) for k, b in samplers.backends().items()],
        help_text="Decides which sampler settings are sent, and under which names.",
    )

    class Meta:
        model = EndpointProfile
        fields = [
            "name", "base_url", "chat_model", "api_mode", "instruct_template", "backend", "thinking",
            "reasoning_reserve_tokens", "temperature", "max_output_tokens", "context_token_budget",
            "learned_window_tokens", "embedding_model", "first_byte_timeout_seconds", "timeout_seconds",
            "max_concurrent_requests", "is_default",
        ]
        help_texts = {
            "embedding_model": (
                "The model that embeds lore for semantic search: a model of this endpoint, or "
                "local:all-MiniLM-L6-v2 to compute it in the workers with no server "
                "(needs requirements-local.txt). Empty: the instance default, else keywords only."
            ),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.initial.update(sampler_initial(self.instance.samplers))

    def save(self, commit: bool = True) -> EndpointProfile:
        profile = super().save(commit=False)
        profile.samplers = sampler_values(self.cleaned_data)
        if self.cleaned_data.get("clear_api_key"):
            profile.api_key = ""
        elif self.cleaned_data.get("api_key"):
            profile.api_key = self.cleaned_data["api_key"]
        if commit:
            profile.save()
        return profile
