from django import forms
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

from . import services
from .models import KnowledgeSource


class UploadOptionsForm(forms.Form):
    """How the uploaded files are to be used; the files come from the request."""

    classification = forms.ChoiceField(
        choices=KnowledgeSource.Classification.choices, initial=KnowledgeSource.Classification.REFERENCE
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
