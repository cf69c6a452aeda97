from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from endpoints.models import EndpointProfile
from knowledge.query.vocabulary import passage_keys
from lifecycle.queryset import LifecycleQuerySet, Vocabulary


class CampaignQuerySet(models.QuerySet):
    def of_reader(self, reader) -> "CampaignQuerySet":
        """The reader's own campaigns (the library's filter: only the game master
        sees it), so another reader's id answers as missing."""
        return self.filter(owner=reader)

    def of_member(self, reader) -> "CampaignQuerySet":
        """The campaigns the reader may open: their own (as game master) and
        those shared with them. Everyone else's still answer as missing."""
        return self.filter(Q(owner=reader) | Q(memberships__user=reader)).distinct()


class Campaign(models.Model):
    class NarrationLength(models.TextChoices):
        UNSET = "", "No preference"
        BRIEF = "brief", "Brief"
        MEDIUM = "medium", "Medium"
        LONG = "long", "Long"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="campaigns")
    title = models.CharField(max_length=200)
    narrator_prompt = models.TextField(blank=True, help_text="Leave empty for the default narrator rules.")
    ai_instructions = models.TextField(blank=True)
    plot_essentials = models.TextField(blank=True)
    authors_note = models.TextField(blank=True)
    persona_name = models.CharField(max_length=100, blank=True)
    persona_pronouns = models.CharField(max_length=50, blank=True)
    persona_description = models.TextField(blank=True)
    narration_length = models.CharField(
        max_length=10, choices=NarrationLength.choices, blank=True, default=NarrationLength.UNSET
    )
    #: The reader's own reply settings; unset means the endpoint profile's,
    #: and a longer reply than the profile allows is capped to it.
    temperature = models.FloatField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    #: Sampler settings that override the endpoint profile's for this story (endpoints.samplers).
    sampler_overrides = models.JSONField(default=dict, blank=True)
    #: The story's first narration, written by the reader; it becomes the first action.
    opening_text = models.TextField(blank=True)
    # {"rules": [str], "forbidden_status_changes": [{"from": str, "to": str}]}
    canon = models.JSONField(default=dict, blank=True)
    # The narrative state before the first action; each action keeps the state after it.
    initial_state = models.JSONField(default=dict, blank=True)
    endpoint = models.ForeignKey(
        EndpointProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="campaigns"
    )
    head = models.ForeignKey(
        "Action", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = CampaignQuerySet.as_manager()

    class TurnMode(models.TextChoices):
        FREE = "free", "Free: anyone acts, each action narrated in turn"
        ROUNDS = "rounds", "Rounds: every seat acts, then one narration"
        TURNS = "turns", "Turns: seats act in order"

    #: How a shared story takes its players' actions (storyapp.turnorder).
    turn_mode = models.CharField(max_length=10, choices=TurnMode.choices, default=TurnMode.FREE)
    #: Seconds a round (rounds) or a seat's turn (turns) may last; 0: no timer.
    turn_seconds = models.PositiveIntegerField(default=0)
    #: Whether the game master reads each narration before the players do.
    review = models.BooleanField(default=False)
    #: The game master's direction to the narrator, seen by no player.
    director_note = models.TextField(blank=True)
    #: When the game master's page last followed the story (presence; a
    #: member's is on their Membership).
    game_master_seen = models.DateTimeField(null=True, blank=True)
    #: Seats a bundle brought ({"name", "description", "role"}), as text:
    #: bundles carry seats, never accounts, so no member holds them.
    imported_seats = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-updated"]

    def __str__(self) -> str:
        return self.title

    def state_at(self, head: "Action | None") -> dict:
        """The narrative state at `head`: the head's own, or the opening state."""
        return dict(head.state) if head is not None else dict(self.initial_state or {})

    @property
    def canon_rules(self) -> list[str]:
        rules = (self.canon or {}).get("rules") or []
        return [rule for rule in rules if isinstance(rule, str) and rule.strip()]

    @property
    def forbidden_status_changes(self) -> list[dict]:
        changes = (self.canon or {}).get("forbidden_status_changes") or []
        return [c for c in changes if isinstance(c, dict) and c.get("from") and c.get("to")]


class Membership(models.Model):
    """A reader in someone else's campaign. The owner is its game master and
    holds no membership; a player takes a seat (a character), a watcher
    only reads along."""

    class Role(models.TextChoices):
        PLAYER = "player", "Player"
        WATCHER = "watcher", "Watcher"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    seat_name = models.CharField(max_length=100, blank=True)
    seat_description = models.TextField(blank=True)
    joined = models.DateTimeField(auto_now_add=True)
    #: When the member's page last followed the story (presence).
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["joined", "id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "user"], name="one_membership_per_reader"),
            # Seats are told apart by name, in the story and to the narrator.
            models.UniqueConstraint(
                Lower("seat_name"), "campaign", condition=~Q(seat_name=""), name="one_seat_name_per_campaign",
                violation_error_message="Another seat of this story already has that name.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.campaign} ({self.role})"


class WaitingTurn(models.Model):
    """A member's action kept while the narrator answers another one
    (storyapp.turnorder): it joins the story, in arrival order, once the
    narration before it is done. It is no Action until then, so the story
    tree, undo and branches never hold a turn that has no place yet."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="waiting_turns")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seat_name = models.CharField(max_length=100, blank=True)
    text = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Waiting turn #{self.pk} in {self.campaign}"


class TurnClock(models.Model):
    """Where a shared campaign's round or turn stands (storyapp.turnorder)."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="turn_clock")
    #: When the current round or seat's turn began; None while the narrator
    #: writes, since no one's time runs out waiting for it.
    started = models.DateTimeField(null=True, blank=True)
    #: Turns: the seat whose turn it is (None: the first seat's).
    seat = models.ForeignKey(Membership, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    #: Rounds: the ids of the readers who passed this round.
    passed = models.JSONField(default=list, blank=True)
    #: Rounds: the round's timer ran out while the game master's narrations
    #: were at their cap; it is narrated as soon as one of them ends.
    closed = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"Turn clock of {self.campaign}"


class CampaignEvent(models.Model):
    """Something that changed in a campaign, kept in order so every member's
    page can follow it live and a reconnect resumes where it left off
    (storyapp.campaignevents). `audience` narrows who may see it."""

    #: The audience of an event every member sees; any other audience is a
    #: seat name, for that seat (and the game master, who sees all).
    EVERYONE = ""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=40)
    data = models.JSONField(default=dict, blank=True)
    audience = models.CharField(max_length=100, blank=True, default=EVERYONE)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["campaign", "id"], name="campaign_events_in_order")]

    def __str__(self) -> str:
        return f"{self.kind} in campaign {self.campaign_id}"


class ActionQuerySet(LifecycleQuerySet):
    """Narrations' lifecycle: pending, streaming, and the worker's heartbeat."""

    vocabulary = Vocabulary(state="status", waiting="pending", running="streaming", failed="failed", seen="heartbeat")


class Action(models.Model):
    """One step of the story. Actions form a tree; the campaign's head picks
    the path (the lineage) that is the story being read."""

    class Kind(models.TextChoices):
        PLAYER = "player", "Player"
        AI = "ai", "Narrator"
        SYSTEM = "system", "System"

    class Status(models.TextChoices):
        DONE = "done", "Done"
        PENDING = "pending", "Waiting for a worker"
        STREAMING = "streaming", "Narrating"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"

    #: Workers that may die on one narration before it is failed, so a
    #: narration that kills its worker does not kill them all in turn.
    MAX_ATTEMPTS = 3

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="actions")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    # Distance from the root; the lineage length at this action is depth + 1.
    depth = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    text = models.TextField(blank=True)
    token_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DONE)
    error = models.TextField(blank=True)
    # What the model server itself said of a failure (its status and message):
    # staff only, since it may name internal addresses or echo a key.
    error_detail = models.TextField(blank=True)
    stop_requested = models.BooleanField(default=False)
    # The narrative state after this action, so moving the head restores state
    # without replaying anything.
    state = models.JSONField(default=dict, blank=True)
    state_rejections = models.JSONField(default=list, blank=True)
    #: A reasoning model's thinking for this narration (endpoints.reasoning):
    #: shown behind a reveal and in the inspector, never part of the story.
    thinking = models.TextField(blank=True)
    #: Set while the narration waits for a free slot on a busy model server (endpoints.slots).
    waiting_for_server = models.BooleanField(default=False)
    # World Info's timed effects (sticky, cooldown) after this action, as
    # worldinfo.records.TimedState.as_stored(): copied from the parent like
    # `state`, and written by the narration whose prompt set them, so every
    # lineage (after an undo, a retry, a branch) continues its own timers.
    world_info_timers = models.JSONField(default=dict, blank=True)
    # When the head last arrived here; redo follows the most recently visited child.
    visited = models.DateTimeField(null=True, blank=True)
    # Set by the worker while it narrates; a stale heartbeat means the worker died.
    heartbeat = models.DateTimeField(null=True, blank=True)
    #: Workers that have claimed this narration.
    attempts = models.PositiveSmallIntegerField(default=0)
    #: Who sent a player action, and the seat it was sent from: the seat's
    #: name is kept on the action, so attribution outlives the membership
    #: and travels in bundles, which carry seats, not accounts.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seat_name = models.CharField(max_length=100, blank=True)
    #: A finished narration the players and watchers may not read yet: the
    #: campaign is under review and its game master has not approved it
    #: (storyapp.review); `reviewed` is when they did.
    held_for_review = models.BooleanField(default=False)
    reviewed = models.DateTimeField(null=True, blank=True)
    #: Narrator-only or one seat's passages this narration repeats
    #: (contextbuild.leaks records): shown to the game master alone.
    leaks = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    #: A narration whose worker has not touched it for lifecycle.policy's
    #: STALE_AFTER is taken to be dead: it may be claimed again, and Stop
    #: ends it at once. The worker beats while it waits on the model.
    objects = ActionQuerySet.as_manager()

    class Meta:
        ordering = ["depth", "id"]
        indexes = [models.Index(fields=["campaign", "status"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk}"

    @property
    def in_flight(self) -> bool:
        return self.status in {self.Status.PENDING, self.Status.STREAMING}

    @property
    def in_story(self) -> bool:
        """Failed narrations and empty stopped ones are not part of the story."""
        return bool(self.text.strip()) and self.status != self.Status.FAILED


class ContextSnapshot(models.Model):
    """Exactly what the narrator was given for one AI action. The inspector
    renders from this alone, so it survives later edits to the sources."""

    action = models.OneToOneField(Action, on_delete=models.CASCADE, related_name="snapshot")
    report = models.JSONField()
    system_text = models.TextField()
    story_text = models.TextField()
    #: The messages exactly as sent (chat), or one user message holding the
    #: exact text (completions).
    messages = models.JSONField(default=list)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Snapshot for action #{self.action_id}"


class Whisper(models.Model):
    """A note from the game master to one seat: its player reads it, the
    narrator is told it as known only to that character, nobody else sees it."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="whispers")
    seat_name = models.CharField(max_length=100)
    text = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"Whisper to {self.seat_name} in {self.campaign}"


class DerivedJobQuerySet(LifecycleQuerySet):
    """Derived jobs' lifecycle: queued, running, and `updated` as the beat
    (a job waiting for its next attempt is dated at that attempt)."""

    vocabulary = Vocabulary(state="state", waiting="queued", running="running", failed="failed", seen="updated")


class DerivedJob(models.Model):
    """One piece of work derived from the story after a turn: a summary of a
    stretch of the lineage, or the memories of one narration.

    Its identity is where in the tree it is anchored (`anchor`, and for a
    summary `starts_after` and `level`), so asking twice for the same work
    finds the same row, and a retried Celery task finds its attempts here.
    """

    class Kind(models.TextChoices):
        SUMMARY = "summary", "Summary"
        MEMORIES = "memories", "Memories"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    MAX_ATTEMPTS = 3

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="derived_jobs")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    #: The last action the work covers (a summary) or is made from (memories).
    anchor = models.ForeignKey(Action, on_delete=models.CASCADE, related_name="+")
    #: A summary's stretch begins after this action; None means at the root.
    starts_after = models.ForeignKey(Action, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    level = models.PositiveSmallIntegerField(default=0)
    #: kind, anchor, start and level in one unique string: the same work
    #: asked for twice is one row on every database (NULL starts included).
    key = models.CharField(max_length=100, unique=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = DerivedJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["campaign", "kind", "state"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of action #{self.anchor_id}"


class Summary(models.Model):
    """A third-person summary of the lineage after `starts_after` through
    `covers_through`; level 1 and up are summaries of summaries. Used only
    while `covers_through` is on the lineage being read."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="summaries")
    starts_after = models.ForeignKey(Action, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    covers_through = models.ForeignKey(Action, on_delete=models.CASCADE, related_name="summaries")
    level = models.PositiveSmallIntegerField(default=0)
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    job = models.OneToOneField(DerivedJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="summary")

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"Summary through action #{self.covers_through_id}"


class MemoryQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """Stores the memories and their word keys (MemoryWord) together."""
        made = super().bulk_create(objs, *args, **kwargs)
        MemoryWord.objects.bulk_create(word for memory in made for word in memory.words())
        return made


class Memory(models.Model):
    """A short fact from one point of the story, retrieved for later turns
    of the same lineage only. Recorded memories come from accepted state
    events; inferred ones from a summary, and go with it when it is withdrawn.
    Its word keys are stored beside it (MemoryWord) by `save` and
    `bulk_create`, whichever wrote it."""

    class Authority(models.TextChoices):
        RECORDED = "recorded", "Recorded"
        INFERRED = "inferred", "Inferred"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memories")
    anchor = models.ForeignKey(Action, on_delete=models.CASCADE, related_name="memories")
    summary = models.ForeignKey(Summary, null=True, blank=True, on_delete=models.CASCADE, related_name="facts")
    authority = models.CharField(max_length=10, choices=Authority.choices)
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    embedding_model = models.CharField(max_length=200, blank=True)
    embedding = models.BinaryField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["created", "id"]

    def __str__(self) -> str:
        return self.text[:60]

    def save(self, *args, **kwargs):
        update_fields = kwargs.get("update_fields")
        rewords = update_fields is None or "text" in update_fields
        super().save(*args, **kwargs)
        if rewords:
            MemoryWord.objects.filter(memory=self).delete()
            MemoryWord.objects.bulk_create(self.words())

    def words(self) -> list["MemoryWord"]:
        """Its word keys, as lore matching stems them (knowledge.query.vocabulary)."""
        return [MemoryWord(memory_id=self.pk, campaign_id=self.campaign_id, key=key)
                for key in sorted({MemoryWord.key_of(key) for key in passage_keys("", self.text)})]


class MemoryWord(models.Model):
    """One word key of a memory: recall finds a query's memories through
    the (campaign, key) index instead of reading and splitting every memory
    of the story (storyapp.recall). The keys are exactly those
    `knowledge.query.weighing.matched_terms` compares, so what a memory
    matches is the same either way."""

    #: A longer key is stored, and looked up, by its first this many characters.
    KEY_LENGTH = 100

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="keys")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=KEY_LENGTH)

    class Meta:
        indexes = [models.Index(fields=["campaign", "key"], name="storyapp_memoryword_key")]

    @classmethod
    def key_of(cls, key: str) -> str:
        return key[: cls.KEY_LENGTH]

    def __str__(self) -> str:
        return self.key


class LoginFailures(models.Model):
    """Wrong passwords counted for one throttle key (storyapp.logins): a
    username with a client address, or a username from anywhere. In the
    database, not the cache, so a lockout holds while Redis is down."""

    key = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    window_started = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.failures} failures, locked until {self.locked_until}"
