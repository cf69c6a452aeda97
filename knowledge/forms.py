from django import forms
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

from . import regexkeys, services
from .lorebooks import is_regex_key, key_line
from .models import KnowledgeSource


#: The upload's default class: lorebooks are Canon, texts Reference.
BY_FILE = ""


class UploadOptionsForm(forms.Form):
    """How the uploaded files are to be used; the files come from the request."""

    classification = forms.ChoiceField(
        choices=[(BY_FILE, "By file"), *KnowledgeSource.Classification.choices],
        initial=BY_FILE, required=False,
    )
    visibility = forms.ChoiceField(
        choices=KnowledgeSource.Visibility.choices, initial=KnowledgeSource.Visibility.VISIBLE
    )
    always_include = forms.BooleanField(required=False, label="Always include (Canon only)")

    def clean(self):
        """Asks the service's guard once for the whole upload, so the refusal
        is said once, not once per file."""
        data = super().clean()
        try:
            services.source_always_include_check(
                classification=data.get("classification"), always_include=bool(data.get("always_include"))
            )
        except services.ImportRefused as exc:
            self.add_error("always_include", str(exc))
        return data


class EntryForm(forms.Form):
    """What a reader edits of a lorebook entry. Keys are one comma-separated
    line, as every tool the files come from writes them."""

    title = forms.CharField(max_length=300, required=False)
    keys = forms.CharField(required=False, max_length=5000)
    text = forms.CharField(required=False, widget=forms.Textarea, max_length=200_000, strip=False)
    enabled = forms.BooleanField(required=False)

    def clean_keys(self):
        """Each regex key checked and compiled as a turn would (the check
        first, so a key that would explode is refused uncompiled)."""
        keys = self.cleaned_data["keys"]
        problems = [regexkeys.compile_key(k)[1] for k in key_line(keys) if is_regex_key(k)]
        problems = [p for p in problems if p]
        if problems:
            raise forms.ValidationError("; ".join(problems) + ".")
        return keys


class SourceForm(forms.ModelForm):
    """A source's settings. The always-include rule is checked by the model's
    constraint, which a ModelForm validates (`validate_constraints`)."""

    class Meta:
        model = KnowledgeSource
        fields = ["title", "classification", "visibility", "always_include", "enabled"]
        labels = {"always_include": "Always include", "visibility": "Visibility"}


class LimitedUploadHandler(FileUploadHandler):
    """Stops reading a file once it passes `limit` bytes, and remembers its
    name: an oversized file never reaches memory or disk in full."""

    def __init__(self, request=None, *, limit: int):
        super().__init__(request)
        self.limit = limit
        self.too_large: list[str] = []
        self._received = 0

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self._received = 0

    def receive_data_chunk(self, raw_data, start):
        self._received += len(raw_data)
        if self._received > self.limit:
            self.too_large.append(self.file_name)
            raise SkipFile
        return raw_data

    def file_complete(self, file_size):
        return None
