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

With `--first-turn N` (repeatable) it measures instead the first turn of a
fresh process: a campaign of N passages is written and committed (its
vector segments written as the worker writes them at a swap), then a child
process (`--first-turn-child`) starts, runs one retrieval and reports the
retrieval call's time, its RSS (private and file-backed) and how the cosine
search over the mapped segments compares with one concatenated matrix; the
parent times process start to answer. It runs again with the var
directory's segments and term counts removed (a wiped var: the first turn
rebuilds them from the database). The campaign is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.utils import timezone

from contextbuild import inject, tokens
from endpoints.embeddings import for_retrieval
from endpoints.models import EmbeddingCalibration, EndpointProfile
from knowledge import lexical, segments
from knowledge.benchdata import PASSAGES_PER_SOURCE, SyntheticLibrary
from knowledge.models import KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from knowledge.query import QueryInputs
from knowledge.retrieval import clear_cache, library, retrieve
from storyapp.models import Campaign

BUDGET = 8192


def _best_of(call, times: int = 7) -> float:
    """The fastest of a few runs, in ms (the call is warm after the first)."""
    best = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _status() -> dict[str, float]:
    """This process's resident memory from /proc, in MB."""
    found = {"VmRSS": 0.0, "RssAnon": 0.0, "RssFile": 0.0}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in found:
                found[name] = int(value.split()[0]) / 1024
    return found


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
        parser.add_argument(
            "--first-turn", type=int, action="append", default=[], metavar="N",
            help="Time a fresh process's first turn over a committed campaign of N passages (repeatable).",
        )
        parser.add_argument(
            "--per-source", type=int, default=PASSAGES_PER_SOURCE,
            help="Passages per source in the --first-turn campaign.",
        )
        parser.add_argument("--first-turn-child", type=int, help=argparse.SUPPRESS)
        parser.add_argument("--model", default="", help=argparse.SUPPRESS)

    def handle(self, *args, turns, total, seed, first_turn, per_source, first_turn_child, model, **options):
        self.seed = seed
        if first_turn_child:
            return self._child(first_turn_child, model)
        if first_turn:
            return self._first_turns(first_turn, per_source)
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
        self.data = SyntheticLibrary(owner=owner, model=model, seed=self.seed)

        small = self.data.campaign("1,000 alone", 1000)
        self._bench("1,000-passage campaign", small, turns)

        middle = self.data.campaign("2,000 in 100,000", 2000)
        filler = self.data.campaign("filler", total - 3000)
        self._bench(f"2,000-passage campaign, instance of {self._count():,}", middle, turns)

        for campaign in (small, middle):
            KnowledgeEmbedding.objects.filter(chunk__campaign=campaign).delete()
            KnowledgeChunk.objects.filter(campaign=campaign)._raw_delete(connection.alias)
            KnowledgeSource.objects.filter(campaign=campaign).delete()
        self.data.fill(filler, 3000, start=total - 3000)
        self._bench(f"one campaign of {self._count():,} passages", filler, turns)

    # ------------------------------------------------------- first turn

    def _first_turns(self, sizes: list[int], per_source: int) -> None:
        self.stdout.write(f"Database: {connection.vendor}; first turn of a fresh process, {per_source} passages a source")
        owner = get_user_model().objects.create(username=f"bench-{uuid.uuid4().hex[:10]}")
        model = f"bench-embed-{uuid.uuid4().hex[:8]}"
        calibration = EmbeddingCalibration.objects.create(model=model, floor=0.3, measured_at=timezone.now())
        data = SyntheticLibrary(owner=owner, model=model, seed=self.seed, per_source=per_source)
        try:
            for size in sizes:
                campaign = data.campaign(f"first turn {size}", size)
                self._analyze()
                with_files = self._fresh_turn(campaign, model, size)
                shutil.rmtree(segments.database_dir(), ignore_errors=True)
                self._fresh_turn(campaign, model, size, label="var wiped (segments rebuilt)")
                self._fresh_turn(campaign, model, size, label="again, rebuilt files mapped")
                self.stdout.write(
                    f"{'':<34} cosine top-40: by segment {with_files['by_segment_ms']:.2f} ms, "
                    f"one concatenated matrix {with_files['concatenated_ms']:.2f} ms ({with_files['segments']} segments)"
                )
                self._drop(campaign)
        finally:
            calibration.delete()
            owner.delete()

    def _fresh_turn(self, campaign: Campaign, model: str, size: int, label: str = "segments written at the swap"):
        command = [sys.executable, sys.argv[0], "bench_retrieval", "--first-turn-child", str(campaign.pk), "--model", model]
        started = time.perf_counter()
        answer = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
        wall = (time.perf_counter() - started) * 1000
        result = json.loads(answer.stdout.strip().splitlines()[-1])
        self.stdout.write(
            f"{size:>7,} passages, {label:<32} retrieval call {result['retrieval_ms']:7.1f} ms "
            f"(tokenizer loaded before it, {result['tokenizer_ms']:.0f} ms)   "
            f"process start → answer {wall:7.0f} ms   RSS {result['rss_mb']:.0f} MB "
            f"(private {result['anon_mb']:.0f}, mapped files {result['file_mb']:.0f})"
        )
        return result

    def _child(self, campaign_id: int, model: str) -> None:
        """One retrieval in this fresh process; its figures as one JSON line."""
        campaign = Campaign.objects.get(pk=campaign_id)
        data = SyntheticLibrary(owner=campaign.owner, model=model, seed=self.seed)
        self.profile = EndpointProfile(name="bench", base_url="http://127.0.0.1:9/v1", embedding_model=model)
        inputs, vector = data.query(campaign)
        # The tokenizer's tables (about 0.4 s to load) are the process's, not
        # the library's: a worker has them from its first prompt.
        started = time.perf_counter()
        tokens.encoding()
        tokenizer = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        self._turn(campaign, inputs, vector)
        took = (time.perf_counter() - started) * 1000
        loaded = library.library_for(campaign_id, model)
        unit = vector / np.linalg.norm(vector)
        by_segment = _best_of(lambda: loaded.top(unit, library.SEMANTIC_CANDIDATES))
        status = _status()  # before the concatenated copy below, which is private memory
        whole = library.Library(loaded.stamp, [segments.Segment(loaded.source_ids, loaded.chunk_ids, loaded.shares, loaded.matrix)])
        concatenated = _best_of(lambda: whole.top(unit, library.SEMANTIC_CANDIDATES))
        self.stdout.write(json.dumps({
            "retrieval_ms": took, "tokenizer_ms": tokenizer, "rss_mb": status["VmRSS"], "anon_mb": status["RssAnon"],
            "file_mb": status["RssFile"], "by_segment_ms": by_segment, "concatenated_ms": concatenated,
            "segments": len(loaded.segments),
        }))

    def _drop(self, campaign: Campaign) -> None:
        ids = list(KnowledgeSource.objects.filter(campaign=campaign).values_list("pk", flat=True))
        KnowledgeEmbedding.objects.filter(chunk__campaign=campaign).delete()
        KnowledgeChunk.objects.filter(campaign=campaign)._raw_delete(connection.alias)
        KnowledgeSource.objects.filter(campaign=campaign).delete()
        campaign.delete()
        for pk in ids:
            segments.forget(pk)

    def _count(self) -> int:
        return KnowledgeChunk.objects.count()

    def _bench(self, label: str, campaign: Campaign, turns: int) -> None:
        self._analyze()
        queries = [self.data.query(campaign) for _ in range(5)]
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
        result = retrieve(campaign_id=campaign.pk, query=inputs, query_vector=vector, **for_retrieval(self.profile))
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
