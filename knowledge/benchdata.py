"""Synthetic lore libraries for the benchmarks: passages of a Zipf-like
invented vocabulary written through the real lexical index, a unit vector
each (a few close to a shared direction, so some cosines clear the floor),
and turn queries drawn from the same vocabulary. Deterministic for a seed.
And a campaign's regex keys matched turn after turn, for key matching's figures."""

from __future__ import annotations

import time

import numpy as np
from django.db import transaction
from django.utils import timezone

from storyapp.models import Campaign

from . import lexical, pgvector, regexkeys, segments, termstats
from .models import KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from .query import QueryInputs
from .query.vocabulary import STOPWORDS
from .worldinfo.loading import TurnRegex

DIMENSIONS = 384
WORDS_PER_PASSAGE = 110
PASSAGES_PER_SOURCE = 50
VOCABULARY = 20000
_SYLLABLES = "ka lo ri wen tha mar el dor ys ae bri gan hol vess tor un quel sar im ost pel cyr oth ban".split()


class SyntheticLibrary:
    """Builds campaigns of synthetic passages for `owner`, embedded as `model`."""

    def __init__(self, *, owner, model: str, seed: int = 11, per_source: int = PASSAGES_PER_SOURCE):
        self.owner = owner
        self.per_source = per_source
        self.model = model
        self.rng = np.random.default_rng(seed)
        self.vocabulary = _vocabulary(self.rng)
        weights = 1.0 / (np.arange(VOCABULARY) + 100.0)
        self.weights = weights / weights.sum()

    def campaign(self, title: str, passages: int) -> Campaign:
        campaign = Campaign.objects.create(owner=self.owner, title=f"Bench {title}", persona_name="Mara")
        self.fill(campaign, passages, start=0)
        return campaign

    def fill(self, campaign: Campaign, passages: int, *, start: int) -> None:
        """Sources of `per_source` passages, their chunks through the
        lexical index, and a unit vector each; a few passages per source sit
        close to a shared direction so some cosines clear the floor."""
        now = timezone.now()
        sources = KnowledgeSource.objects.bulk_create(
            [
                KnowledgeSource(
                    campaign=campaign,
                    title=f"Bench source {start + i}",
                    original_filename=f"bench-{start + i}.md",
                    sha256=f"{start + i:064x}",
                    content="",
                    classification=("canon", "reference", "inspiration")[i % 3],
                    index_state=KnowledgeSource.IndexState.READY,
                    embedding_model=self.model,
                    passage_count=self.per_source,
                    indexed_at=now,
                )
                for i in range((passages + self.per_source - 1) // self.per_source)
            ],
            batch_size=1000,
        )
        if not sources[0].pk:
            sources = list(KnowledgeSource.objects.filter(campaign=campaign).order_by("-pk")[: len(sources)])
        batch = 5000
        for offset in range(0, passages, batch):
            count = min(batch, passages - offset)
            texts = self.texts(count)
            rows = [
                (
                    sources[(offset + i) // self.per_source].pk,
                    campaign.pk,
                    (offset + i) % self.per_source,
                    f"Bench {(offset + i) // self.per_source} > Part {(offset + i) % 7}",
                    text,
                    int(WORDS_PER_PASSAGE * 1.3),
                )
                for i, text in enumerate(texts)
            ]
            lexical.insert(rows=rows)
        ids = list(
            KnowledgeChunk.objects.filter(campaign=campaign)
            .exclude(embeddings__model=self.model)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        vectors = self.rng.standard_normal((len(ids), DIMENSIONS), dtype=np.float32)
        near = self.rng.random(len(ids)) < 0.002
        vectors[near] = self.direction() * 8 + vectors[near]
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for offset in range(0, len(ids), 5000):
            KnowledgeEmbedding.objects.bulk_create(
                [
                    KnowledgeEmbedding(chunk_id=pk, model=self.model, dimensions=DIMENSIONS, vector=v.tobytes())
                    for pk, v in zip(ids[offset : offset + 5000], vectors[offset : offset + 5000], strict=True)
                ],
                batch_size=2000,
            )
            pgvector.store(ids[offset : offset + 5000], [v.tobytes() for v in vectors[offset : offset + 5000]], self.model)
        if not pgvector.enabled():
            self._segments(campaign, ids, vectors)

    def _segments(self, campaign: Campaign, ids: list[int], vectors: np.ndarray) -> None:
        """The sources' vector segments, as the worker writes them at a swap
        (once the rows are committed), and the merged library file and word
        counts it writes after a batch's last swap."""
        source_of = dict(KnowledgeChunk.objects.filter(campaign=campaign).values_list("pk", "source_id"))
        rows: dict[int, list[int]] = {}
        for row, pk in enumerate(ids):
            rows.setdefault(source_of[pk], []).append(row)
        versions = KnowledgeSource.objects.filter(pk__in=list(rows)).values_list("pk", "revision", "updated")

        def store() -> None:
            for version in versions:
                held = rows[version[0]]
                segments.store(
                    version, self.model, [ids[r] for r in held], [vectors[r].tobytes() for r in held], [None] * len(held)
                )
            segments.load(campaign.pk, self.model)
            termstats.keep(campaign.pk)

        transaction.on_commit(store)

    def direction(self) -> np.ndarray:
        if not hasattr(self, "_shared"):
            shared = np.random.default_rng(99).standard_normal(DIMENSIONS).astype(np.float32)
            self._shared = shared / np.linalg.norm(shared)
        return self._shared

    def texts(self, count: int, words: int = WORDS_PER_PASSAGE) -> list[str]:
        picks = self.rng.choice(VOCABULARY, size=(count, words), p=self.weights)
        return [" ".join(self.vocabulary[j] for j in row) + "." for row in picks]

    def query(self, campaign: Campaign) -> tuple[QueryInputs, np.ndarray]:
        names = self.texts(6, 2)
        state = {
            "scene": {"summary": self.texts(1, 14)[0], "location": names[0]},
            "entities": {
                f"e{i}": {"name": names[i].split()[0].capitalize(), "aliases": [names[i].split()[1]]}
                for i in range(1, 6)
            },
            "threads": {"t1": {"title": self.texts(1, 5)[0], "status": "open"}},
        }
        inputs = QueryInputs.build(state=state, recent=self.texts(4, 110), persona_name="Mara")
        vector = self.direction() * 8 + self.rng.standard_normal(DIMENSIONS).astype(np.float32)
        return inputs, vector / np.linalg.norm(vector)

def _vocabulary(rng: np.random.Generator) -> list[str]:
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5))))
        if word not in seen and word not in STOPWORDS:
            seen.add(word)
            words.append(word)
    return words


def regex_key_turns(count: int, *, scene: str, most: int = 20) -> list[float]:
    """Milliseconds of regex-key searching (World Info's TurnRegex, one
    deadline a turn) for each turn of a campaign of `count`
    regex keys, one per entry, from its first turn (its table empty) to the
    first turn that compiled nothing (at most `most` turns): the first turns
    compile what the turn's deadline allows, the last is what every later
    turn costs."""
    patterns = [f"/\\b(?:wyrm{i}|lanterns? of {i})\\b/i" for i in range(count)]
    table = regexkeys.Patterns(max_keys=count)
    timings = []
    for _ in range(most):
        before = table.compiles
        started = time.perf_counter()
        search = TurnRegex(table)
        for pattern in patterns:
            search(pattern, scene)
        timings.append((time.perf_counter() - started) * 1000)
        if table.compiles == before:
            break
    return timings
