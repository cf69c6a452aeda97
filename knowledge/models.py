"""Imported knowledge: sources, their passages, vectors and index jobs (DESIGN.md §3-4).

`KnowledgeSource.index_state` is what retrieval reads: a source is searched
only while it is `ready` (and enabled). A re-index of a ready source leaves
it `ready`, with its old passages searchable, until the new passages are
swapped in by one transaction; the job in flight is on `IndexJob`.
"""

from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q

from lifecycle.queryset import LifecycleQuerySet, Vocabulary
from storyapp.models import Campaign

#: The name of KnowledgeSource's always-include constraint (see its Meta).
ALWAYS_INCLUDE_CANON_ONLY = "knowledge_source_always_include_canon_only"


class KnowledgeSource(models.Model):
    class Classification(models.TextChoices):
        CANON = "canon", "Canon"
        REFERENCE = "reference", "Reference"
        INSPIRATION = "inspiration", "Inspiration"

    class Visibility(models.TextChoices):
        VISIBLE = "visible", "Visible"
        HIDDEN = "hidden", "Narrator only"

    class IndexState(models.TextChoices):
        PENDING = "pending", "Waiting to be indexed"
        INDEXING = "indexing", "Indexing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="sources")
    title = models.CharField(max_length=200)
    original_filename = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64, help_text="Of the decoded, newline-normalised text.")
    # The decoded text, kept so a re-index and an export need no file.
    content = models.TextField()
    size_bytes = models.PositiveIntegerField(default=0)
    #: The file as uploaded, until the index job has read it (then empty):
    #: a web request only stores it, a worker parses it (issue 23).
    upload = models.BinaryField(default=b"", blank=True, editable=False)
    #: The uploaded file's size, and what the source takes stored (its text,
    #: entries, passages, lexical index and vectors; knowledge.footprint),
    #: for the lore-size limits (quotas.lore).
    upload_bytes = models.PositiveBigIntegerField(default=0)
    stored_bytes = models.PositiveBigIntegerField(default=0)
    classification = models.CharField(
        max_length=12, choices=Classification.choices, default=Classification.REFERENCE
    )
    visibility = models.CharField(max_length=8, choices=Visibility.choices, default=Visibility.VISIBLE)
    #: A seat (a character's name) this source is known to alone: it is not
    #: searched, the narrator is given it as that character's secret, and
    #: only that seat's player (and the game master) sees it in the inspector.
    secret_seat = models.CharField(max_length=100, blank=True)
    #: The lorebook format the file was read as ("SillyTavern World Info",
    #: "NovelAI lorebook v5", ...); empty for Markdown and text. A source with
    #: a format is indexed from its `entries`, one passage or more per entry.
    format = models.CharField(max_length=80, blank=True)
    #: What the file carries that Loremaster does not use, kept, never dropped
    #: (DESIGN.md §4): the book's own fields, a card's, the import's notes.
    metadata = models.JSONField(default=dict, blank=True)
    always_include = models.BooleanField(default=False, help_text="Canon only: every passage in every prompt.")
    enabled = models.BooleanField(default=True)
    index_state = models.CharField(max_length=8, choices=IndexState.choices, default=IndexState.PENDING)
    # Why the last index job failed; kept while older passages stay searchable.
    error = models.TextField(blank=True)
    passage_count = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    # The content hash and embedding model the live passages were built with.
    indexed_sha256 = models.CharField(max_length=64, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    indexed_at = models.DateTimeField(null=True, blank=True)
    # Bumped by every swap of the live passages or vectors, so the per-process
    # caches built from them see the change (selectors.library_stamp) even
    # when two workers' clocks commit out of order.
    revision = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "sha256"], name="knowledge_source_unique_content"),
            # The always-include rule, written here only: every passage of an
            # always-included source goes into every prompt as what is true in
            # the story, which only Canon is. The message is the one readers
            # see; `services.source_always_include_check` asks this constraint.
            models.CheckConstraint(
                condition=Q(always_include=False) | Q(classification="canon"),
                name=ALWAYS_INCLUDE_CANON_ONLY,
                violation_error_message="Only Canon sources can be always included.",
            ),
        ]
        indexes = [
            models.Index(fields=["campaign", "index_state", "enabled"]),
            # Every turn asks for the always-included sources, which most
            # libraries have none of: read through the campaign index, a
            # 2,000-source library's rows were each read and dropped (1.6 ms).
            models.Index(fields=["campaign"], condition=Q(always_include=True), name="knowledge_source_always"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_hidden(self) -> bool:
        return self.visibility == self.Visibility.HIDDEN

    @property
    def is_lorebook(self) -> bool:
        return bool(self.format)


class LoreEntry(models.Model):
    """One entry of an imported lorebook, as the reader can edit it.

    World Info applies it as SillyTavern would (worldinfo.engine, fed by
    knowledge.worldinfo): its keys, flags and the settings `extras` holds by
    the format's own names (SillyTavern's for every format once edited)
    decide when it enters a prompt and where; a disabled one is not indexed.
    An export gives every field back.
    """

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="entries")
    position = models.PositiveIntegerField(help_text="The entry's place in the file.")
    title = models.CharField(max_length=300, blank=True)
    text = models.TextField(blank=True)
    keys = models.JSONField(default=list, blank=True)
    secondary_keys = models.JSONField(default=list, blank=True)
    regex_keys = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    constant = models.BooleanField(default=False, help_text="Always included while the source is Canon.")
    #: A seat this entry is known to alone (as KnowledgeSource.secret_seat):
    #: World Info leaves it out; the narrator is given it as that seat's secret.
    secret_seat = models.CharField(max_length=100, blank=True)
    extras = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["source_id", "position"]
        constraints = [models.UniqueConstraint(fields=["source", "position"], name="knowledge_entry_unique_position")]

    def __str__(self) -> str:
        return self.title or f"Entry {self.position + 1}"

    @property
    def all_keys(self) -> list[str]:
        return [*self.keys, *self.regex_keys]


class KnowledgeChunk(models.Model):
    """One passage. `campaign` repeats the source's so the lexical index can
    filter by campaign inside the index (see knowledge/lexical/)."""

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="chunks")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    index = models.PositiveIntegerField()
    heading_path = models.TextField(blank=True)
    text = models.TextField()
    #: The lorebook entry this passage was cut from, whose keys admit it.
    entry = models.ForeignKey(LoreEntry, null=True, blank=True, on_delete=models.CASCADE, related_name="chunks")
    token_count = models.PositiveIntegerField()
    # PostgreSQL only (weighted heading + text); SQLite keeps an FTS5 table.
    search = SearchVectorField(null=True, editable=False)

    class Meta:
        ordering = ["source_id", "index"]
        constraints = [models.UniqueConstraint(fields=["source", "index"], name="knowledge_chunk_unique_index")]
        # Campaign-wide reads (the term statistics' sample, library loads). The
        # lexical search may intersect it with the (campaign, search) GIN index,
        # never read a campaign's rows through it (knowledge/lexical/postgres.py).
        indexes = [models.Index(fields=["campaign"], name="knowledge_chunk_campaign")]

    def __str__(self) -> str:
        return f"{self.source_id} · passage {self.index}"


class KnowledgeEmbedding(models.Model):
    """A passage's vector from one embedding model, as little-endian float32.

    `neutral_share` is the share of the shipped neutral scenes the vector
    clears the model's floor against (knowledge.hubs), measured when it was
    stored; None when the model had no floor then. A high share marks a hub.
    """

    chunk = models.ForeignKey(KnowledgeChunk, on_delete=models.CASCADE, related_name="embeddings")
    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    vector = models.BinaryField()
    neutral_share = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chunk", "model"], name="knowledge_embedding_unique_model")]
        indexes = [models.Index(fields=["model", "chunk"])]


class IndexJobQuerySet(LifecycleQuerySet):
    """Index jobs' lifecycle: queued (held while `heartbeat` is empty, sent
    once it is the time of sending), running, and the worker's heartbeat."""

    vocabulary = Vocabulary(state="state", waiting="queued", running="running", failed="failed", seen="heartbeat")

    def held(self):
        """Queued and not yet sent to the broker (knowledge.services.jobs)."""
        return self.waiting().filter(heartbeat__isnull=True)

    def sent(self):
        """Waiting in the broker or running: a reader's share of the workers."""
        return self.in_flight().exclude(state=IndexJob.State.QUEUED, heartbeat__isnull=True)


class IndexJob(models.Model):
    """One run of the pipeline over one source: what the operators' monitor shows.

    Claimed by a conditional UPDATE (queued, or running with a stale
    heartbeat), so a duplicate delivery does nothing and a killed worker's
    job can be taken over. At most one job per source is active at a time.
    """

    class Kind(models.TextChoices):
        INDEX = "index", "Index"
        EMBED = "embed", "Re-embed"

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    ACTIVE = (State.QUEUED, State.RUNNING)

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=5, choices=Kind.choices, default=Kind.INDEX)
    state = models.CharField(max_length=9, choices=State.choices, default=State.QUEUED)
    content_sha256 = models.CharField(max_length=64)
    embedding_model = models.CharField(max_length=200, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent.")
    step = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the claiming process.")
    error = models.TextField(blank=True)
    passages = models.PositiveIntegerField(default=0)
    #: Passages whose vectors are committed (IndexJobBatch): an attempt that
    #: takes over from a dead worker resumes here instead of starting over.
    committed = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    objects = IndexJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source"], condition=Q(state__in=["queued", "running"]), name="knowledge_one_active_job"
            )
        ]
        indexes = [models.Index(fields=["state", "created"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} job #{self.pk}"

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE

    @property
    def duration(self):
        if self.started is None:
            return None
        return (self.finished or self.heartbeat or self.started) - self.started

    @property
    def duration_text(self) -> str:
        """The duration as a reader says it: "0.02 s", "4.1 s", "3 min 12 s"."""
        if self.duration is None:
            return ""
        seconds = self.duration.total_seconds()
        if seconds < 10:
            return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"
        if seconds < 60:
            return f"{seconds:.0f} s"
        minutes, rest = divmod(round(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s"




class IndexJobBatch(models.Model):
    """One committed batch of a running job's vectors, kept until the swap.

    A worker killed mid-embedding leaves these; the next attempt reuses every
    batch whose inputs (`inputs_sha256`, of the very texts) and model match,
    and embeds only the rest. Deleted when the job ends.
    """

    job = models.ForeignKey(IndexJob, on_delete=models.CASCADE, related_name="batches")
    start = models.PositiveIntegerField(help_text="The first passage of the batch.")
    size = models.PositiveIntegerField()
    model = models.CharField(max_length=200)
    inputs_sha256 = models.CharField(max_length=64)
    #: The batch's vectors, each as stored in KnowledgeEmbedding, one after the other.
    vectors = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "start"], name="knowledge_batch_unique_start")]
