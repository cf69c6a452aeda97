from __future__ import annotations

from django import forms
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

from worldinfo import records

from . import entrysettings, regexkeys, services
from .lorebooks import is_regex_key, key_line
from .lorebooks.stored import expand
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


def _count(label: str, *, low: int = 0, high: int | None = None, blank: bool = True) -> forms.IntegerField:
    """A whole number in a range, its refusals naming the field (the
    entry's refusal is one line above the form, not beside each field)."""
    span = f"from {low:,} to {high:,}" if high is not None else f"{low:,} or more"
    return forms.IntegerField(
        label=label, required=not blank, min_value=low, max_value=high,
        error_messages={"invalid": f"{label}: write a whole number.", "min_value": f"{label}: {span}.",
                        "max_value": f"{label}: {span}.", "required": f"{label}: write a whole number."},
    )


def _flag(label: str) -> forms.BooleanField:
    return forms.BooleanField(label=label, required=False)


def _tristate(label: str) -> forms.ChoiceField:
    choices = [(entrysettings.BOOK, "As the book"), (entrysettings.YES, "Yes"), (entrysettings.NO, "No")]
    return forms.ChoiceField(label=label, choices=choices, required=False)


def _choice(label: str, names: dict) -> forms.ChoiceField:
    return forms.ChoiceField(label=label, choices=[(str(k), v) for k, v in names.items()])


class Refusals:
    """A form's refusals as the one line said above it."""

    def problems(self) -> str:
        return " ".join(str(e) for errors in self.errors.values() for e in errors)


POSITIONS = {k: v[0].upper() + v[1:] for k, v in records.POSITION_WORDS.items()}
LOGICS = {records.AND_ANY: "Any of them", records.NOT_ALL: "Not all of them",
          records.NOT_ANY: "None of them", records.AND_ALL: "All of them"}
ROLES = {k: v.capitalize() for k, v in records.ROLE_NAMES.items()}


class EntryForm(Refusals, forms.Form):
    """What a reader edits of a lorebook entry: its text and keys, and
    every World Info setting the engine applies (knowledge.entrysettings
    says where each is kept). Keys are one comma-separated line, as every
    tool the files come from writes them."""

    title = forms.CharField(max_length=300, required=False)
    keys = forms.CharField(required=False, max_length=5000)
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}), max_length=200_000, strip=False)
    enabled = _flag("Enabled")
    constant = _flag("Always included")
    secret_seat = forms.CharField(label="Known only to", required=False, max_length=100)
    order = _count("Order", high=1_000_000)
    position = _choice("Position", POSITIONS)
    secondary_keys = forms.CharField(label="Secondary keys", required=False, max_length=5000)
    selective = _flag("Use the secondary keys")
    logic = _choice("Match", LOGICS)
    depth = _count("Depth", high=1000)
    role = _choice("Role", ROLES)
    probability = _count("Probability", high=100)
    use_probability = _flag("Roll the probability")
    groups = forms.CharField(label="Inclusion groups", required=False, max_length=1000)
    group_weight = _count("Group weight", high=1_000_000)
    group_override = _flag("Prioritize (highest order wins the group)")
    use_group_scoring = _tristate("Group scoring")
    sticky = _count("Sticky", high=1_000_000)
    cooldown = _count("Cooldown", high=1_000_000)
    delay = _count("Delay", high=1_000_000)
    scan_depth = _count("Scan depth", high=1000)
    case_sensitive = _tristate("Case-sensitive")
    match_whole_words = _tristate("Whole words only")
    exclude_recursion = _flag("Not activated by other entries")
    prevent_recursion = _flag("Does not activate other entries")
    delay_until_recursion = _count("Delay until recursion level", high=1000)
    ignore_budget = _flag("Ignores the budget")
    vectorized = _flag("Also activated by meaning")
    match_persona_description = _flag("The reader's character (persona)")
    match_character_description = _flag("The character's description")
    match_character_personality = _flag("The character's personality")
    match_character_depth_prompt = _flag("The character's depth prompt")
    match_scenario = _flag("The scenario")
    match_creator_notes = _flag("The creator's notes")
    character_names = forms.CharField(label="Characters", required=False, max_length=2000)
    character_exclude = _flag("Exclude these characters")
    triggers = forms.MultipleChoiceField(
        label="Triggers", choices=entrysettings.TRIGGERS, required=False, widget=forms.CheckboxSelectMultiple,
    )

    #: Numbers a blank field gives their SillyTavern default; the others
    #: (sticky, cooldown, delay, scan depth) mean "none" or "the book's".
    DEFAULTED = {"order": 100, "depth": 4, "probability": 100, "group_weight": 100, "delay_until_recursion": 0}

    @classmethod
    def for_entry(cls, entry, *, data=None) -> EntryForm:
        """The editor of one entry: its saved values, or what the reader sent."""
        initial = {
            "title": entry.title, "keys": ", ".join([*entry.keys, *entry.regex_keys]), "text": entry.text,
            "enabled": entry.enabled, "constant": entry.constant, "secondary_keys": ", ".join(entry.secondary_keys),
            "secret_seat": entry.secret_seat,
            **entrysettings.settings_of(expand(entry.extras or {})),
        }
        return cls(data, initial=initial, auto_id=False)

    def clean_keys(self):
        return _checked_keys(self.cleaned_data["keys"])

    def clean_secondary_keys(self):
        return _checked_keys(self.cleaned_data["secondary_keys"])

    def clean(self):
        data = super().clean()
        for name, default in self.DEFAULTED.items():
            if name in data and data[name] is None:
                data[name] = default
        return data

    def settings(self) -> dict:
        """The World Info settings of the cleaned form, for entrysettings."""
        columns = {"title", "keys", "text", "enabled", "constant", "secondary_keys", "secret_seat"}
        return {name: value for name, value in self.cleaned_data.items() if name not in columns}


def _checked_keys(keys: str) -> str:
    """Each regex key checked and compiled as a turn would (the check
    first, so a key that would explode is refused uncompiled)."""
    problems = [regexkeys.compile_key(k)[1] for k in key_line(keys) if is_regex_key(k)]
    problems = [p for p in problems if p]
    if problems:
        raise forms.ValidationError("; ".join(problems) + ".")
    return keys


class NewEntryForm(Refusals, forms.Form):
    """A new entry's essentials; the rest is set in its editor once it exists."""

    title = forms.CharField(max_length=300, required=False)
    keys = forms.CharField(required=False, max_length=5000)
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), max_length=200_000, strip=False)
    constant = _flag("Always included")

    def clean_keys(self):
        return _checked_keys(self.cleaned_data["keys"])

    def clean(self):
        data = super().clean()
        if not (data.get("title") or "").strip() and not (data.get("text") or "").strip():
            raise forms.ValidationError("Give the new entry a title or a text.")
        return data


class BookSettingsForm(Refusals, forms.Form):
    """A lorebook's World Info settings (worldinfo.records.BookSettings),
    which SillyTavern keeps globally and Loremaster per book."""

    scan_depth = _count("Scan depth", high=1000, blank=False)
    budget_percent = _count("Budget", low=1, high=100, blank=False)
    budget_cap = _count("Budget cap", high=1_000_000, blank=False)
    recursive = _flag("Recursive scanning")
    max_recursion_steps = _count("Max recursion steps", high=100, blank=False)
    min_activations = _count("Min activations", high=10_000, blank=False)
    min_activations_depth_max = _count("Min activations max depth", high=1000, blank=False)
    case_sensitive = _flag("Case-sensitive keys")
    match_whole_words = _flag("Whole words only")
    use_group_scoring = _flag("Group scoring")
    include_names = _flag("Include names in the scan")
    vectorize_all = _flag("Activate every entry by meaning too")

    @classmethod
    def for_source(cls, source, *, data=None) -> BookSettingsForm:
        stored = records.BookSettings.from_stored((source.metadata or {}).get("world_info"))
        return cls(data, initial=stored.as_stored(), auto_id="book-%s")

    def book_settings(self) -> records.BookSettings:
        return records.BookSettings(**self.cleaned_data)


class SourceForm(forms.ModelForm):
    """A source's settings. The always-include rule is checked by the model's
    constraint, which a ModelForm validates (`validate_constraints`)."""

    class Meta:
        model = KnowledgeSource
        fields = ["title", "classification", "visibility", "always_include", "enabled", "secret_seat"]
        labels = {"always_include": "Always include", "visibility": "Visibility", "secret_seat": "Known only to"}
        help_texts = {"secret_seat": "A seat's character name: only that player (and you) can see this source, "
                                     "and the narrator is told it as that character's secret."}


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
