import re

from django import forms

from contextbuild.narrative import Entity, NarrativeState, SeatState, Thread
from endpoints.forms import PREFIX, SamplerFields, sampler_initial, sampler_values
from endpoints.models import EndpointProfile
from endpoints.samplers import settings as sampler_settings

from .models import Campaign


class CampaignForm(SamplerFields, forms.ModelForm):
    """The campaign's settings, grouped as a story setup reads. Canon is
    edited as plain lines so a reader never has to write JSON: one rule a
    line, and `dead -> alive` for a status change that may never happen."""

    GROUPS = (
        ("Story and opening scene", ("title", "plot_essentials", "opening_text")),
        ("Your character", ("persona_name", "persona_pronouns", "persona_description")),
        ("Narrator", ("ai_instructions", "authors_note", "director_note", "review", "narration_length",
                      "narrator_prompt")),
        ("Canon", ("canon_rules", "forbidden_status_changes")),
        ("Model", ("endpoint", "temperature", "max_output_tokens")),
        ("Samplers", tuple(PREFIX + name for name in sampler_settings())),
    )
    #: Groups shown folded: a reader opens them when they need them.
    FOLDED = ("Samplers",)

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
            "title", "plot_essentials", "opening_text", "persona_name", "persona_pronouns", "persona_description",
            "ai_instructions", "authors_note", "director_note", "review", "narration_length", "narrator_prompt",
            "endpoint", "temperature", "max_output_tokens",
        ]
        widgets = {
            "ai_instructions": forms.Textarea(attrs={"rows": 3}),
            "plot_essentials": forms.Textarea(attrs={"rows": 3}),
            "opening_text": forms.Textarea(attrs={"rows": 4}),
            "authors_note": forms.Textarea(attrs={"rows": 2}),
            "director_note": forms.Textarea(attrs={"rows": 2}),
            "persona_description": forms.Textarea(attrs={"rows": 2}),
            "narrator_prompt": forms.Textarea(attrs={"rows": 4}),
            "temperature": forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "2"}),
            "max_output_tokens": forms.NumberInput(attrs={"min": "16"}),
        }
        labels = {
            "title": "Title",
            "endpoint": "Model endpoint",
            "ai_instructions": "AI instructions",
            "authors_note": "Author's note",
            "director_note": "Director's note",
            "review": "Review each narration before the players read it",
            "persona_name": "Your character's name",
            "persona_pronouns": "Pronouns",
            "persona_description": "Your character",
            "narrator_prompt": "Narrator prompt override",
            "opening_text": "Opening scene",
            "max_output_tokens": "Longest reply (tokens)",
        }
        help_texts = {
            "title": "What the story is called in your list.",
            "plot_essentials": "Facts the narrator must always remember.",
            "opening_text": "The story's first narration, in your words. Leave empty and the narrator opens the scene when you first press Send.",
            "persona_name": "The name the narrator calls you by.",
            "persona_pronouns": "For example she/her, he/him, they/them.",
            "persona_description": "Who your character is: looks, past, what they want.",
            "ai_instructions": "How the narrator should write: voice, tense, what to avoid.",
            "authors_note": "A steer placed close to the end of the story, where it weighs most.",
            "director_note": "Your direction as game master: the narrator follows it, and no player sees it.",
            "review": "In a shared story: each narration waits for you to approve, edit or retry it.",
            "narration_length": "How long each narration should be, within the longest reply.",
            "narrator_prompt": "Replaces the built-in narrator rules. Leave empty for the default.",
            "endpoint": "Which model narrates; an admin sets these up.",
            "temperature": "0 is steady and predictable, around 1 is lively, above 1.3 wanders. Empty: the endpoint's setting.",
            "max_output_tokens": "Empty: the endpoint's limit. It cannot be longer than the endpoint allows.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in sampler_settings():
            self.fields[PREFIX + name].help_text = "Empty: the endpoint's setting."
        self.fields["endpoint"].queryset = EndpointProfile.objects.all()
        self.fields["endpoint"].empty_label = "The server's default endpoint"
        if self.instance.pk:
            self.initial.update(sampler_initial(self.instance.sampler_overrides))
            self.initial["canon_rules"] = "\n".join(self.instance.canon_rules)
            self.initial["forbidden_status_changes"] = "\n".join(
                f"{c['from']} -> {c['to']}" for c in self.instance.forbidden_status_changes
            )
            if self.instance.head_id is not None:
                self.fields["opening_text"].disabled = True
                self.fields["opening_text"].help_text = "The story has begun; its opening is the first narration. Edit it there."

    def groups(self):
        """The form's fields in their groups, for the template."""
        return [(title, [self[name] for name in names], title in self.FOLDED and not any(self[n].errors for n in names))
                for title, names in self.GROUPS]

    def clean_temperature(self):
        value = self.cleaned_data["temperature"]
        if value is not None and not 0 <= value <= 2:
            raise forms.ValidationError("Use a temperature from 0 to 2.")
        return value

    def clean(self):
        data = super().clean()
        longest = data.get("max_output_tokens")
        profile = data.get("endpoint") or EndpointProfile.objects.filter(is_default=True).first()
        if longest is not None and profile is not None and longest > profile.max_output_tokens:
            self.add_error("max_output_tokens", f"“{profile.name}” allows replies of at most {profile.max_output_tokens} tokens.")
        elif longest is not None and longest < 16:
            self.add_error("max_output_tokens", "A reply needs at least 16 tokens.")
        return data

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
        campaign.sampler_overrides = sampler_values(self.cleaned_data)
        campaign.canon = {
            "rules": self.cleaned_data["canon_rules"],
            "forbidden_status_changes": self.cleaned_data["forbidden_status_changes"],
        }
        if commit and campaign.pk is not None:
            # Only what the form edits: a shared story's head moves under
            # its players' turns while the game master has the settings open.
            campaign.save(update_fields=[*self._meta.fields, "sampler_overrides", "canon", "updated"])
        elif commit:
            campaign.save()
        return campaign


class ActionEditForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=20000)


class WhisperForm(forms.Form):
    """The game master's note to one seat (storyapp.models.Whisper)."""

    seat_name = forms.ChoiceField(label="To")
    text = forms.CharField(label="Whisper", max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, seats: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["seat_name"].choices = [(seat, seat) for seat in seats]


class TurnForm(forms.Form):
    text = forms.CharField(required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 3}))


class TurnOrderForm(forms.Form):
    """The game master's choice of turn order and timer (storyapp.turnorder)."""

    turn_mode = forms.ChoiceField(choices=Campaign.TurnMode.choices, label="Turn order")
    turn_seconds = forms.IntegerField(
        min_value=0, max_value=86400, initial=0, label="Timer (seconds)",
        help_text="How long a round, or a seat's turn, may last; 0 for no timer.",
    )


class MemoryForm(forms.ModelForm):
    """The story's memory fields, edited beside the story; the next turn reads them."""

    class Meta:
        model = Campaign
        fields = ["authors_note", "plot_essentials", "ai_instructions"]
        widgets = {name: forms.Textarea(attrs={"rows": 3}) for name in fields}
        labels = {"authors_note": "Author's note", "plot_essentials": "Plot essentials", "ai_instructions": "AI instructions"}
        help_texts = {
            "authors_note": "A steer placed near the end of the prompt, where it weighs most.",
            "plot_essentials": "Facts the narrator must always remember.",
            "ai_instructions": "How the narrator should write.",
        }


#: The labelled parts of an entity line, after "id: Name | status".
_ENTITY_PART = re.compile(r"^(also|at|holds)\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)


def _entity_line(entity: Entity) -> str:
    parts = [f"{entity.id}: {entity.name}", entity.status]
    parts += [f"also: {', '.join(entity.aliases)}" if entity.aliases else ""]
    parts += [f"at: {entity.location}" if entity.location else ""]
    parts += [f"holds: {', '.join(entity.items)}" if entity.items else ""]
    return " | ".join(p for p in parts if p)


#: The labelled parts of a party line, after the seat's name.
_SEAT_PART = re.compile(r"^(at|carries)\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)


def _seat_line(seat: SeatState) -> str:
    parts = [seat.name, f"at: {seat.location}" if seat.location else ""]
    parts += [f"carries: {', '.join(seat.inventory)}" if seat.inventory else ""]
    return " | ".join(p for p in parts if p)


def _thread_line(thread: Thread) -> str:
    return f"{thread.id}: {thread.title}" + (" | resolved" if not thread.is_open else "")


def _listed(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class StateForm(forms.Form):
    """The narrative state at the head, corrected by hand beside the story.

    Plain lines, like the canon fields, so a reader never writes JSON; the
    form only turns lines into the stored document, and the service checks
    that document with the one state parser. A line the reader left as it
    was shown keeps its stored record exactly, so a name with a comma or a
    bar in it survives a save that only changed the scene.
    """

    summary = forms.CharField(label="Scene", required=False, widget=forms.Textarea(attrs={"rows": 3}))
    location = forms.CharField(label="Where you are", required=False)
    inventory = forms.CharField(
        label="You carry", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One thing per line.",
    )
    entities = forms.CharField(
        label="Characters and things", required=False, widget=forms.Textarea(attrs={"rows": 6}),
        help_text="One per line, as “id: Name | status | also: other names | at: place | holds: things”. "
                  "Only the id and the name are needed; an id is lowercase letters, digits, - or _.",
    )
    threads = forms.CharField(
        label="Threads", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, as “id: What is at stake”; add “| resolved” once it is over.",
    )
    party = forms.CharField(
        label="The players' characters", required=False, widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One seat per line, as “Name | at: place | carries: things”.",
    )
    based_on = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, state: dict, seats: tuple[str, ...] = (), **kwargs):
        self.shown = NarrativeState.from_document(state)
        kwargs.setdefault("initial", {
            "summary": self.shown.scene.summary,
            "location": self.shown.scene.location,
            "inventory": "\n".join(self.shown.inventory),
            # A blank line between entities: in a narrow panel a long line
            # wraps, and the gap shows where one entity ends.
            "entities": "\n\n".join(_entity_line(e) for e in self.shown.entities),
            "threads": "\n".join(_thread_line(t) for t in self.shown.threads),
            "based_on": self.shown.fingerprint(),
            "party": "\n".join(
                [_seat_line(s) for s in self.shown.party]
                + [name for name in seats if self.shown.seat(name) is None]
            ),
        })
        super().__init__(*args, **kwargs)
        if not (self.shown.party or seats):
            # A lone reader's story has no party: the form is as it always was.
            del self.fields["party"]

    def clean_inventory(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["inventory"].splitlines() if line.strip()]

    def clean_party(self) -> dict:
        """seat name → record from “Name | at: place | carries: things” lines."""
        party: dict[str, dict] = {}
        errors: list[str] = []
        for number, line in enumerate(self.cleaned_data["party"].splitlines(), start=1):
            name, *parts = (p.strip() for p in line.split("|"))
            if not name:
                if parts:
                    errors.append(f"Line {number} (“{line.strip()[:40]}”) should begin with the seat's name.")
                continue
            record: dict = {}
            for part in filter(None, parts):
                labelled = _SEAT_PART.match(part)
                if labelled is None:
                    errors.append(f"Line {number}: “{part[:40]}” should begin with at: or carries:.")
                elif labelled.group(1).lower() == "at":
                    record["location"] = labelled.group(2).strip()
                else:
                    record["inventory"] = _listed(labelled.group(2))
            party[name] = record
        if errors:
            raise forms.ValidationError(errors)
        return party

    def clean_entities(self) -> dict:
        kept = {_entity_line(e): e for e in self.shown.entities}
        return self._table("entities", lambda line, rest: self._entity(kept.get(line), rest))

    def clean_threads(self) -> dict:
        return self._table("threads", lambda line, rest: self._thread(rest))

    def _table(self, name: str, read_line) -> dict:
        """id → record from "id: rest" lines; every bad line is named."""
        table: dict[str, dict] = {}
        errors: list[str] = []
        for number, line in enumerate(self.cleaned_data[name].splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            key, colon, rest = line.partition(":")
            key = key.strip()
            if not colon or not key or "|" in key:
                errors.append(f"Line {number} (“{line[:40]}”) should begin with an id and a colon, like “guard: The guard”.")
            elif key in table:
                errors.append(f"Line {number}: the id “{key}” is already used above.")
            else:
                record, why = read_line(line, rest)
                if why:
                    errors.append(f"Line {number} (“{line[:40]}”): {why}")
                table[key] = record
        if errors:
            raise forms.ValidationError(errors)
        return table

    @staticmethod
    def _entity(unchanged: Entity | None, rest: str) -> tuple[dict, str]:
        if unchanged is not None:
            return unchanged.as_record(), ""
        name, *parts = (p.strip() for p in rest.split("|"))
        record: dict = {"name": name}
        for part in filter(None, parts):
            labelled = _ENTITY_PART.match(part)
            if labelled is None and "status" not in record:
                record["status"] = part
            elif labelled is None:
                return record, f"“{part}” is a second status; begin it with also:, at: or holds:."
            else:
                label, value = labelled.group(1).lower(), labelled.group(2).strip()
                if label == "at":
                    record["location"] = value
                else:
                    record["aliases" if label == "also" else "items"] = _listed(value)
        return record, ""

    @staticmethod
    def _thread(rest: str) -> tuple[dict, str]:
        title, *parts = (p.strip() for p in rest.split("|"))
        parts = [p for p in parts if p]
        if len(parts) > 1:
            return {}, "a thread line has a title and at most “| resolved”."
        return {"title": title, "status": parts[0] if parts else "open"}, ""

    def document(self) -> dict:
        """The state the reader typed, as the document the service checks."""
        data = self.cleaned_data
        return {
            "scene": {"summary": data["summary"], "location": data["location"]},
            "entities": data["entities"],
            "threads": data["threads"],
            "inventory": data["inventory"],
            "party": data["party"] if "party" in self.fields else self.shown.as_document().get("party"),
        }


class BundleUploadForm(forms.Form):
    bundle = forms.FileField(label="Campaign bundle (.json)", help_text="A file exported from Loremaster (format 1).")


class CardUploadForm(forms.Form):
    card = forms.FileField(
        label="Character card (.png or .json)",
        help_text="A SillyTavern character card, V1, V2 or V3: the image with the card inside, or its JSON.",
        widget=forms.FileInput(attrs={"accept": ".png,.json,image/png,application/json"}),
        error_messages={"required": "Choose a character card file."},
    )
    greeting = forms.IntegerField(
        label="Opening greeting", required=False, min_value=0, max_value=999, initial=0,
        # A number of a digit or two: the full-width inputs of app.css make it a long bar.
        widget=forms.NumberInput(attrs={"class": "narrow-number"}),
        help_text="0 opens with the card's first message; 1, 2, … with its alternate greetings, in the card's order.",
    )
