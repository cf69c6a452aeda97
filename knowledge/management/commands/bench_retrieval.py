"""The whole retrieval step for one turn, timed, at three library sizes.

One turn's step is: query assembly from the state and the recent actions,
both candidate paths (lexical top 40 in the database; cosine over the whole
cached library matrix), admission, ranking, suppression, and injection
(contextbuild.inject plan, select and report against an 8,192-token budget).
The query-embedding call is excluded: the query vector is computed up front.

Scenarios, built in this order so the data is written once:

1. a campaign of 1,000 passages, alone in the instance;
2. a campaign of 2,000 passages in an instance holding 100,000;
3. one campaign holding all 100,000 (the other two are removed).

Synthetic passages are written through `knowledge.lexical.insert` and
`bulk_create`, inside one transaction that is rolled back at the end, so
nothing is left behind even if the command is interrupted. The first turn
of each scenario (which loads the library matrix into the process cache) is
reported separately from the steady-state median and p95.
"""

from __future__ import annotations

import statistics
import time
import uuid

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.utils import timezone

from contextbuild import inject
from knowledge import lexical
from knowledge.models import EmbeddingCalibration, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from knowledge.query import STOPWORDS, QueryInputs
from knowledge.retrieval import clear_cache, retrieve
from storyapp.models import Campaign, EndpointProfile

DIMENSIONS = 384
WORDS_PER_PASSAGE = 110
PASSAGES_PER_SOURCE = 50
VOCABULARY = 20000
BUDGET = 8192
_SYLLABLES = "ka lo ri wen tha mar el dor ys ae bri gan hol vess tor un quel sar im ost pel cyr oth ban".split()


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = (
        "Median and p95 of the whole retrieval step for one turn (query assembly, lexical and "
        "semantic candidates, admission, ranking, suppression, injection; the query embedding "
        "excluded) for a 1,000-passage campaign, a 2,000-passage campaign in a 100,000-passage "
        "instance, and one 100,000-passage campaign, on the configured database. Everything it "
        "writes is rolled back."
    )

    def add_arguments(self, parser):
        parser.add_argument("--turns", type=int, default=40, help="Timed turns per scenario.")
        parser.add_argument("--total", type=int, default=100_000, help="Passages in the large instance.")
        parser.add_argument("--seed", type=int, default=11)

    def handle(self, *args, turns, total, seed, **options):
        self.rng = np.random.default_rng(seed)
        self.vocabulary = _vocabulary(self.rng)
        weights = 1.0 / (np.arange(VOCABULARY) + 100.0)
        self.weights = weights / weights.sum()
        self.stdout.write(f"Database: {connection.vendor}; {turns} timed turns per scenario")
        # Time the lexical search separately (it is knowledge.lexical's), by
        # wrapping the function retrieval calls for the length of the run.
        self._search, self._lexical = lexical.search, 0.0
        lexical.search = self._timed_search
        self._vacuum()
        try:
            with transaction.atomic():
                self._run(turns, total)
                raise _Rollback
        except _Rollback:
            pass
        finally:
            lexical.search = self._search
            clear_cache()
        self.stdout.write("Rolled back: nothing was kept.")

    # ------------------------------------------------------------------ run

    def _run(self, turns: int, total: int) -> None:
        owner = get_user_model().objects.create(username=f"bench-{uuid.uuid4().hex[:10]}")
        model = f"bench-embed-{uuid.uuid4().hex[:8]}"
        EmbeddingCalibration.objects.create(model=model, floor=0.3, measured_at=timezone.now())
        self.profile = EndpointProfile(name="bench", base_url="http://127.0.0.1:9/v1", embedding_model=model)
        self.model = model
        self.owner = owner

        small = self._campaign("1,000 alone", 1000)
        self._bench("1,000-passage campaign", small, turns)

        middle = self._campaign("2,000 in 100,000", 2000)
        filler = self._campaign("filler", total - 3000)
        self._bench(f"2,000-passage campaign, instance of {self._count():,}", middle, turns)

        for campaign in (small, middle):
            KnowledgeEmbedding.objects.filter(chunk__campaign=campaign).delete()
            KnowledgeChunk.objects.filter(campaign=campaign)._raw_delete(connection.alias)
            KnowledgeSource.objects.filter(campaign=campaign).delete()
        self._fill(filler, 3000, start=total - 3000)
        self._bench(f"one campaign of {self._count():,} passages", filler, turns)

    def _count(self) -> int:
        return KnowledgeChunk.objects.count()

    def _bench(self, label: str, campaign: Campaign, turns: int) -> None:
        self._analyze()
        queries = [self._query(campaign) for _ in range(5)]
        started = time.perf_counter()
        result = self._turn(campaign, *queries[0])
        cold = (time.perf_counter() - started) * 1000
        for query in queries[1:]:
            self._turn(campaign, *query)
        timings, lexical_ms = [], []
        for turn in range(turns):
            self._lexical = 0.0
            started = time.perf_counter()
            result = self._turn(campaign, *queries[turn % len(queries)])
            timings.append((time.perf_counter() - started) * 1000)
            lexical_ms.append(self._lexical * 1000)
        rest = sorted(t - lx for t, lx in zip(timings, lexical_ms, strict=True))
        timings.sort()
        p95 = timings[min(len(timings) - 1, int(round(0.95 * (len(timings) - 1))))]
        self.stdout.write(
            f"{label:<48} p50 {statistics.median(timings):7.1f} ms   p95 {p95:7.1f} ms   "
            f"first turn (loads the matrix) {cold:7.1f} ms   "
            f"[{result.generated} generated, {len(result.candidates)} admitted]\n"
            f"{'':<48} of which knowledge.lexical.search p50 {statistics.median(lexical_ms):7.1f} ms, "
            f"everything else p50 {statistics.median(rest):7.1f} ms"
        )

    def _timed_search(self, **kwargs):
        started = time.perf_counter()
        try:
            return self._search(**kwargs)
        finally:
            self._lexical += time.perf_counter() - started

    def _turn(self, campaign: Campaign, inputs: QueryInputs, vector: np.ndarray):
        result = retrieve(campaign_id=campaign.pk, profile=self.profile, query=inputs, query_vector=vector)
        ready = inject.plan(result, BUDGET)
        ready = inject.select(ready, BUDGET - ready.protected_tokens - 700)
        inject.report(ready)
        return result

    def _vacuum(self) -> None:
        """An earlier run's rolled-back rows are dead tuples that Postgres
        scans until vacuumed; start from clean tables so runs compare."""
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            for model in (KnowledgeSource, KnowledgeChunk, KnowledgeEmbedding):
                cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")

    def _analyze(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    # ------------------------------------------------------------------ data

    def _campaign(self, title: str, passages: int) -> Campaign:
        campaign = Campaign.objects.create(owner=self.owner, title=f"Bench {title}", persona_name="Mara")
        self._fill(campaign, passages, start=0)
        return campaign

    def _fill(self, campaign: Campaign, passages: int, *, start: int) -> None:
        """Sources of PASSAGES_PER_SOURCE passages, their chunks through the
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
                    passage_count=PASSAGES_PER_SOURCE,
                    indexed_at=now,
                )
                for i in range((passages + PASSAGES_PER_SOURCE - 1) // PASSAGES_PER_SOURCE)
            ],
            batch_size=1000,
        )
        if not sources[0].pk:
            sources = list(KnowledgeSource.objects.filter(campaign=campaign).order_by("-pk")[: len(sources)])
        batch = 5000
        for offset in range(0, passages, batch):
            count = min(batch, passages - offset)
            texts = self._texts(count)
            rows = [
                (
                    sources[(offset + i) // PASSAGES_PER_SOURCE].pk,
                    campaign.pk,
                    (offset + i) % PASSAGES_PER_SOURCE,
                    f"Bench {(offset + i) // PASSAGES_PER_SOURCE} > Part {(offset + i) % 7}",
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
        vectors[near] = self._direction() * 8 + vectors[near]
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for offset in range(0, len(ids), 5000):
            KnowledgeEmbedding.objects.bulk_create(
                [
                    KnowledgeEmbedding(chunk_id=pk, model=self.model, dimensions=DIMENSIONS, vector=v.tobytes())
                    for pk, v in zip(ids[offset : offset + 5000], vectors[offset : offset + 5000], strict=True)
                ],
                batch_size=2000,
            )

    def _direction(self) -> np.ndarray:
        if not hasattr(self, "_shared"):
            shared = np.random.default_rng(99).standard_normal(DIMENSIONS).astype(np.float32)
            self._shared = shared / np.linalg.norm(shared)
        return self._shared

    def _texts(self, count: int, words: int = WORDS_PER_PASSAGE) -> list[str]:
        picks = self.rng.choice(VOCABULARY, size=(count, words), p=self.weights)
        return [" ".join(self.vocabulary[j] for j in row) + "." for row in picks]

    def _query(self, campaign: Campaign) -> tuple[QueryInputs, np.ndarray]:
        names = self._texts(6, 2)
        state = {
            "scene": {"summary": self._texts(1, 14)[0], "location": names[0]},
            "entities": {
                f"e{i}": {"name": names[i].split()[0].capitalize(), "aliases": [names[i].split()[1]]}
                for i in range(1, 6)
            },
            "threads": {"t1": {"title": self._texts(1, 5)[0], "status": "open"}},
        }
        inputs = QueryInputs.build(state=state, recent=self._texts(4, 110), persona_name="Mara")
        vector = self._direction() * 8 + self.rng.standard_normal(DIMENSIONS).astype(np.float32)
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
