from django import forms

from contextbuild import instruct

from .models import EndpointProfile


class EndpointProfileForm(forms.ModelForm):
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

    class Meta:
        model = EndpointProfile
        fields = [
            "name", "base_url", "chat_model", "api_mode", "instruct_template", "thinking", "reasoning_reserve_tokens", "temperature", "max_output_tokens",
            "context_token_budget", "learned_window_tokens", "embedding_model", "first_byte_timeout_seconds",
            "timeout_seconds", "is_default",
        ]
        help_texts = {
            "embedding_model": (
                "The model that embeds lore for semantic search: a model of this endpoint, or "
                "local:all-MiniLM-L6-v2 to compute it in the workers with no server "
                "(needs requirements-local.txt). Empty: the instance default, else keywords only."
            ),
        }

    def save(self, commit: bool = True) -> EndpointProfile:
        profile = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            profile.api_key = ""
        elif self.cleaned_data.get("api_key"):
            profile.api_key = self.cleaned_data["api_key"]
        if commit:
            profile.save()
        return profile
