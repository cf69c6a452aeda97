"""The endpoint layer's rows: how to call each model server, and the
semantic floor measured for each embedding model."""

from django.db import models

from . import secrets_at_rest
from .allowlist import validate_base_url


class EndpointProfile(models.Model):
    """An OpenAI-compatible endpoint and how to call it. Admin-managed."""

    class Thinking(models.TextChoices):
        ALLOW = "allow", "Let a reasoning model think (its thinking is kept out of the story)"
        OFF = "off", "Ask the model not to think"

    class ApiMode(models.TextChoices):
        CHAT = "chat", "Chat completions (messages)"
        COMPLETIONS = "completions", "Text completions (one text in the model's instruct template)"

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(
        max_length=300, validators=[validate_base_url], help_text="For example http://127.0.0.1:11434/v1"
    )
    api_key_encrypted = models.TextField(blank=True, editable=False)
    chat_model = models.CharField(max_length=200)
    api_mode = models.CharField(max_length=20, choices=ApiMode.choices, default=ApiMode.CHAT)
    #: The instruct template completions mode renders the prompt in
    #: (contextbuild.instruct); empty means the one detected from the server.
    instruct_template = models.CharField(
        max_length=40, blank=True,
        help_text="Completions mode only. Empty: the template detected from the server (shown below).",
    )
    #: What the last check of the server detected, and why (endpoints.instructprobe).
    detected_template = models.CharField(max_length=40, blank=True, editable=False)
    detected_template_why = models.CharField(max_length=300, blank=True, editable=False)
    #: Which kind of server this is, for the samplers it reads
    #: (endpoints.samplers); empty means what the window probe recognised.
    backend = models.CharField(max_length=20, blank=True)
    #: Sampler settings by our names (endpoints/data/samplers.json); a campaign may override them.
    samplers = models.JSONField(default=dict, blank=True)
    #: Request fields the server refused by name: no longer sent.
    refused_samplers = models.JSONField(default=list, blank=True, editable=False)
    #: How the server's chat template needs the conversation folded (endpoints.rolefolds), learned from its refusals.
    role_folds = models.JSONField(default=list, blank=True, editable=False)
    #: Requests Loremaster sends this server at once (a local server serves
    #: one, or its slots); empty means what the server said (`server_slots`).
    max_concurrent_requests = models.PositiveSmallIntegerField(
        null=True, blank=True,
        help_text="Empty: as many as the server says it serves at once (llama.cpp's slots; llama-cpp-python and "
                  "KoboldCpp serve one), else no limit.",
    )
    server_slots = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)
    #: How fast the server reads a prompt, measured (endpoints.promptspeed): the first-byte wait follows the prompt's size.
    prompt_tokens_per_second = models.FloatField(null=True, blank=True, editable=False)
    thinking = models.CharField(max_length=8, choices=Thinking.choices, default=Thinking.ALLOW)
    reasoning_reserve_tokens = models.PositiveIntegerField(
        default=0, help_text="Tokens a reasoning model may think for beyond the narration's length; "
                             "the prompt leaves room for them.",
    )
    temperature = models.FloatField(default=0.8)
    max_output_tokens = models.PositiveIntegerField(default=600)
    context_token_budget = models.PositiveIntegerField(default=8192)
    embedding_model = models.CharField(max_length=200, blank=True)
    first_byte_timeout_seconds = models.PositiveIntegerField(
        default=30, help_text="How long to wait for the first word of a reply (or any silence after it)."
    )
    timeout_seconds = models.PositiveIntegerField(
        default=300, help_text="The longest a whole reply may take, from the request to its last word."
    )
    #: The window an overflow taught (the server named it, or it refused a
    #: smaller budget); prompts are budgeted below it. Cleared by an admin.
    learned_window_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Learned from the server's overflow errors; clear it after changing the model."
    )
    #: What the server said it accepts (probing.probe_window), asked again
    #: when the profile is saved or a turn fails against it; a window the
    #: server named stands until it names another (window.store_probe).
    probed_window_tokens = models.PositiveIntegerField(null=True, blank=True, editable=False)
    probed_window_source = models.CharField(max_length=100, blank=True, editable=False)
    probed_window_detail = models.CharField(max_length=300, blank=True, editable=False)
    probed_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: Why the last check found no window while an earlier one stands (it
    #: timed out, the server was unreachable): kept beside the window it did
    #: not replace, so the admin sees both.
    probe_note = models.CharField(max_length=300, blank=True, editable=False)
    #: The server's prompt tokens per one of ours, as measured on recent turns.
    token_ratio = models.FloatField(null=True, blank=True, editable=False)
    is_default = models.BooleanField(
        default=False, help_text="Used by new campaigns that do not pick a profile."
    )
    is_scripted_demo = models.BooleanField(
        default=False, help_text="The built-in scripted demo server, not a real model."
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        # The table it had in storyapp, where it was made.
        db_table = "storyapp_endpointprofile"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def api_key(self) -> str:
        return secrets_at_rest.decrypt(self.api_key_encrypted)

    @api_key.setter
    def api_key(self, value: str) -> None:
        self.api_key_encrypted = secrets_at_rest.encrypt(value)

    @property
    def template_name(self) -> str:
        """The instruct template prompts are rendered in: the admin's choice,
        else the detected one, else plain labels."""
        return self.instruct_template or self.detected_template or "plain"

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class EmbeddingCalibration(models.Model):
    """The semantic admission floor measured for one embedding model.

    Written by `manage.py calibrate_embeddings`; read by retrieval, which
    disables the semantic path for a model with no row here rather than
    borrow another model's floor (cosine scales differ between models).
    """

    model = models.CharField(max_length=200, unique=True)
    floor = models.FloatField()
    # min/p10/median/p90/p95/max and the pair count of each distribution.
    related = models.JSONField(default=dict)
    unrelated = models.JSONField(default=dict)
    method = models.CharField(max_length=200, blank=True)
    measured_at = models.DateTimeField()

    class Meta:
        # The table it had in knowledge, where it was made.
        db_table = "knowledge_embeddingcalibration"
        ordering = ["model"]

    def __str__(self) -> str:
        return f"{self.model}: floor {self.floor:.3f}"


class EndpointLease(models.Model):
    """One request to a model server, holding one of its slots or waiting
    for one (endpoints.slots). A row beats while its request runs; one that
    stopped beating belonged to a dead worker and is cleared."""

    class Kind(models.TextChoices):
        NARRATION = "narration", "Narration"
        PROBE = "probe", "Probe"
        DERIVED = "derived", "Summary or memories"

    profile = models.ForeignKey(EndpointProfile, on_delete=models.CASCADE, related_name="leases")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    holding = models.BooleanField(default=False)
    holder = models.CharField(max_length=200)
    since = models.DateTimeField()
    beat = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["profile", "holding"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.profile_id} ({'holding' if self.holding else 'waiting'})"
