"""One command for the figures that matter to a reader, each as median and p95.

It builds its own data on the configured database and leaves nothing behind (the timed work runs in a
transaction that is rolled back; the one file a separate worker process must see is committed and deleted
after):

- prompt assembly for a 2,000-action story (lineage window and prompt build), and again with its derived work
  (a memory per narration, a summary every 40 actions: the lineage walk, the summary chain and memory recall);
- turn overhead: from the submit request to the first byte of the chat request reaching the loopback model
  server, for an empty library and for a large one. The narration task runs in this process where the turn's
  transaction commits, so the figure is Loremaster's own work: the view up to the commit, the turn's writes,
  the lineage, retrieval, the prompt and the client call; the broker hop to a worker, and the page the view
  draws after the commit (which a worker does not wait for), are not in it;
- retrieval for one turn at 1k / 10k / 100k passages, lexical only and with the semantic path (query vector
  given, as bench_retrieval does);
- key matching for a campaign at the regex-key limit, its first turn and a turn once its keys are compiled;
- import throughput: MB/s to ready lexically, passages/s embedded against the loopback demo server;
- the local embedding model (all-MiniLM-L6-v2, when requirements-local.txt is installed): passages/s embedded
  in batches of ~300-token passages, the query embedding's time, and an import to ready with it (hub
  measurement included);
- the play page rendered for a 1,000-action story;
- the World Info engine (bench_worldinfo): 2,500 and 250 entries against a 450-word scene; a 2,000-action
  window rendered in each instruct template (bench_templates);
- the peak memory a fresh worker process adds while indexing a 5 MB file, above its baseline with the tokenizer.

`--quick` uses fewer runs, and 10k instead of 100k passages, to finish in under two minutes. It never fails on
a figure: it prints them. `--database-only` leaves out the figures no database changes (the World Info engine,
the instruct templates, regex key matching, the local model's own speed), for a second run on another engine.
`--instance` then measures a 1M-passage instance (10 campaigns x 100,000 passages, `manage.py bench_instance`:
built once in a database of its own and kept, its first and next turns timed in fresh processes).
"""

from __future__ import annotations

import itertools
import json
import logging
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from unittest import mock

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client, TestCase, override_settings
from django.urls import reverse
from django.utils import timezone

from contextbuild import build_context
from contextbuild.tokens import count_tokens, encoding
from demomodel import DemoModelServer
from endpoints import localembed
from endpoints.embeddings import for_retrieval
from endpoints.models import EmbeddingCalibration, EndpointProfile
from knowledge import pgvector
from knowledge import services as knowledge_services
from knowledge.benchdata import SyntheticLibrary, regex_key_turns
from knowledge.lexical import postgres as lexical_postgres
from knowledge.management.commands.bench_import import generated_markdown
from storyapp.management.commands.bench_templates import template_rows, template_summary
from storyapp.management.commands.bench_worldinfo import world_info_rows, world_info_summary
from knowledge.models import KnowledgeSource
from knowledge.retrieval import clear_cache, retrieve
from storyapp import prompting, turnorder
from storyapp.celery import app as celery_app
from storyapp.models import Action, Campaign, DerivedJob, Memory, Summary

PARAGRAPH = (
    "The rain came sideways off the harbour, and the lanterns along the quay swung on their hooks. "
    "Mara kept her hood low and counted the barrels stacked by the customs house, twice, because "
    "the first count had come out one short and that was the kind of mistake that got people hanged."
)


#: The figure groups `--only` picks from ("retrieval" includes the large library's turn overhead).
ONLY = ("prompt assembly", "long memory", "play page", "turn overhead", "retrieval", "regex keys", "import",
        "local embeddings", "worker memory")


class _Rollback(Exception):
    pass


@dataclass
class Figure:
    name: str
    unit: str
    median: float
    p95: float
    runs: int
    note: str = ""


def figure(name: str, unit: str, samples: list[float], note: str = "") -> Figure:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Figure(name, unit, statistics.median(ordered), p95, len(ordered), note)


def timed(function, runs: int) -> list[float]:
    """Milliseconds for each of `runs` calls, after one untimed warm-up call."""
    function()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


class Command(BaseCommand):
    help = "Prints Loremaster's key figures (median and p95): prompt assembly, turn overhead, retrieval, import, page render, worker memory."

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="Fewer runs and at most 10k passages (under two minutes).")
        parser.add_argument("--database-only", action="store_true",
                            help="Only the figures a database changes (for a second run on another engine).")
        parser.add_argument("--only", choices=ONLY, help="Only this group of figures (its data is still built).")
        parser.add_argument("--json", dest="json_file", metavar="FILE", help="Also write the figures to FILE as JSON.")
        parser.add_argument("--instance", action="store_true",
                            help="Then the 1M-passage instance (manage.py bench_instance, kept between runs).")

    def handle(self, *args, quick: bool, database_only: bool, json_file: str | None, only: str | None = None,
               instance: bool = False, **options):
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError("This database is not migrated yet: run `manage.py migrate`, then the bench.")
        self._vacuum()
        self.quick = quick
        self.only = only
        self.database_only = database_only
        self.runs = 8 if quick else 30
        self.sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
        started = time.perf_counter()
        self.figures: list[Figure] = []
        self.skipped: list[str] = []
        self.tag = uuid.uuid4().hex[:8]
        with DemoModelServer(port=0, chunk_delay=0) as server:
            self.server = server
            try:
                # The test client's host name, allowed for this process only;
                # and the bench reader's turn rate unbounded: its turns
                # (twice 31 in a full run) would pass the per-reader limit
                # (quotas, 30 a minute by default) and stop the bench
                # on a refusal. The quota is still counted in every turn timed.
                rates = {**settings.LOREMASTER_READER_RATES, "turns": sys.maxsize}
                with override_settings(ALLOWED_HOSTS=["testserver"], LOREMASTER_READER_RATES=rates), \
                        transaction.atomic():
                    self._in_rollback()
                    raise _Rollback
            except _Rollback:
                pass
            finally:
                clear_cache()
            if self._wanted("worker memory"):
                self._worker_memory()
        world_info, templates = ([], []) if database_only or only else (world_info_rows(self.runs), template_rows(self.runs))
        self.figures += [figure(name, "ms", samples, note) for name, samples, note in world_info + templates]
        self._print(time.perf_counter() - started)
        if not (database_only or only):
            self.stdout.write(world_info_summary(world_info) + "\n" + template_summary(templates))
        if json_file:
            with open(json_file, "w") as out:
                json.dump({"database": connection.vendor, "quick": quick, "figures": [asdict(f) for f in self.figures]},
                          out, indent=2)
        if instance:
            call_command("bench_instance", keep=True, stdout=self.stdout)

    # ------------------------------------------------------------ the runs

    def _in_rollback(self) -> None:
        self.owner = get_user_model().objects.create(username=f"bench-{self.tag}")
        self.profile = EndpointProfile.objects.create(
            name=f"bench-{self.tag}", base_url=self.server.base_url, chat_model="demo-narrator",
            embedding_model="", context_token_budget=8192, max_output_tokens=300,
        )
        if self._wanted("prompt assembly"):
            self._prompt_assembly(2_000)
        if self._wanted("long memory"):
            self._long_memory(2_000)
        if self._wanted("play page"):
            self._play_page(1_000)
        if self._wanted("turn overhead"):
            empty = Campaign.objects.create(owner=self.owner, title="Bench: empty library", endpoint=self.profile)
            self._turn_overhead(empty, "empty library")
        if self._wanted("retrieval"):
            self._retrieval_and_large_overhead()
        if not self.database_only and self._wanted("regex keys"):
            self._regex_keys(settings.KNOWLEDGE_REGEX_KEYS_PER_CAMPAIGN)
        if self._wanted("import"):
            self._import_throughput()
        if self._wanted("local embeddings"):
            self._local_embeddings()

    def _wanted(self, group: str) -> bool:
        return self.only is None or self.only == group

    def _story(self, length: int, title: str) -> Campaign:
        campaign = Campaign.objects.create(owner=self.owner, title=title, endpoint=self.profile, plot_essentials=PARAGRAPH)
        tokens = count_tokens(PARAGRAPH) + 3
        parent = None
        for depth in range(length):
            parent = Action.objects.create(
                campaign=campaign, parent=parent, depth=depth, text=f"{depth}. {PARAGRAPH}", token_count=tokens,
                kind=Action.Kind.PLAYER if depth % 2 == 0 else Action.Kind.AI,
            )
        campaign.head = parent
        campaign.save()
        self._analyze()
        return campaign

    def _prompt_assembly(self, length: int) -> None:
        campaign = self._story(length, "Bench: prompt assembly")

        def assemble():
            build_context(prompting.turn_inputs(campaign, self.profile, position=campaign.head, with_knowledge=False))

        self.figures.append(figure(f"prompt assembly, {length:,}-action story", "ms", timed(assemble, self.runs),
                                   "lineage window + prompt build, no retrieval"))

    def _long_memory(self, length: int) -> None:
        """The turn's inputs and prompt when the story has its derived work:
        a memory for every narration and a summary every 40 actions, all on
        the lineage (so the lineage walk, the summary chain and recall are
        timed, with lore retrieval on an empty library)."""
        campaign = self._story(length, "Bench: long memory")
        chain = list(Action.objects.filter(campaign=campaign).order_by("depth"))
        start = None
        for end in chain[39::40]:
            Summary.objects.create(campaign=campaign, starts_after=start, covers_through=end, text=PARAGRAPH,
                                   token_count=count_tokens(PARAGRAPH))
            start = end
        Memory.objects.bulk_create(
            Memory(campaign=campaign, anchor=a, authority=Memory.Authority.RECORDED,
                   text=f"The lantern {a.depth} went out at the customs house.", token_count=12)
            for a in chain if a.kind == Action.Kind.AI
        )
        DerivedJob.objects.create(campaign=campaign, kind=DerivedJob.Kind.MEMORIES, anchor=chain[-1],
                                  key=f"bench-{self.tag}", state=DerivedJob.State.DONE)
        self._analyze()

        def assemble():
            build_context(prompting.turn_inputs(campaign, self.profile, position=campaign.head,
                                                player_text="I relight the lantern at the customs house."))

        memories = len(chain) // 2
        self.figures.append(figure(
            f"prompt assembly with long memory, {length:,} actions", "ms", timed(assemble, self.runs),
            f"{memories:,} memories, {len(chain) // 40} summaries, recall and an empty library's retrieval",
        ))

    def _play_page(self, length: int) -> None:
        campaign = self._story(length, "Bench: play page")
        client = self._client()
        url = reverse("campaign_play", args=[campaign.pk])

        def render():
            response = client.get(url)
            assert response.status_code == 200, response.status_code

        self.figures.append(figure(f"play page render, {length:,}-action story", "ms", timed(render, self.runs)))

    def _turn_overhead(self, campaign: Campaign, label: str) -> None:
        client = self._client()
        url = reverse("turn_submit", args=[campaign.pk])
        eager = celery_app.conf.task_always_eager
        celery_app.conf.task_always_eager = True
        # A line per eager task (Celery's, and the hosted JSON log's) would bury the table.
        task_logs = [logging.getLogger(name) for name in ("celery.app.trace", "loremaster.task")]
        levels = [log.level for log in task_logs]
        for log in task_logs:
            log.setLevel(logging.WARNING)
        samples = []
        committed = []
        submit = turnorder.submit

        def submit_and_commit(**kwargs):
            # Where a live turn's transaction commits and queues its narration:
            # here the bench's rollback transaction holds the queueing back
            # until after the page is drawn, which a reader's turn does not wait for.
            submit(**kwargs)
            committed.append(time.perf_counter())

        try:
            for run in range(self.runs + 1):
                self.server.clear_requests()
                committed.clear()
                with mock.patch.object(turnorder, "submit", submit_and_commit), \
                        TestCase.captureOnCommitCallbacks(execute=False) as queued:
                    started = time.perf_counter()
                    response = client.post(url, {"text": f"I look around, turn {run}."}, HTTP_HX_REQUEST="true")
                assert response.status_code == 200, response.content[:300]
                sent = time.perf_counter()
                for callback in queued:
                    callback()
                chats = [r for r in self.server.requests() if r["path"].endswith("/chat/completions")]
                assert chats, "the narration never reached the model server"
                if run:
                    samples.append((committed[0] - started + chats[0]["received"] - sent) * 1000)
        finally:
            celery_app.conf.task_always_eager = eager
            for log, level in zip(task_logs, levels, strict=True):
                log.setLevel(level)
        self.figures.append(figure(f"turn overhead, {label}", "ms", samples,
                                   "submit request to the model server's first byte; broker hop and page excluded"))

    def _retrieval_and_large_overhead(self) -> None:
        model = f"bench-embed-{self.tag}"
        EmbeddingCalibration.objects.create(model=model, floor=0.3, measured_at=timezone.now())
        data = SyntheticLibrary(owner=self.owner, model=model)
        semantic = EndpointProfile(name="bench-semantic", base_url=self.server.base_url, embedding_model=model)
        campaign = None
        for size in self.sizes:
            campaign = data.campaign(f"{size:,} passages", size)
            campaign.endpoint = self.profile
            campaign.save()
            self._analyze()
            queries = [data.query(campaign) for _ in range(5)]
            for label, profile in (("lexical", None), ("lexical + semantic", semantic)):
                turn = itertools.count()

                def one(profile=profile, turn=turn, queries=queries, campaign=campaign):
                    inputs, vector = queries[next(turn) % len(queries)]
                    retrieve(campaign_id=campaign.pk, query=inputs, query_vector=vector, **for_retrieval(profile))

                self.figures.append(figure(f"retrieval, {size:,} passages, {label}", "ms", timed(one, self.runs)))
        self._turn_overhead(campaign, f"{self.sizes[-1]:,}-passage library")

    def _regex_keys(self, count: int) -> None:
        """Key matching at the regex-key limit, against a 2,800-character scene:
        the first turn (compiling what its deadline allows), then compiled."""
        runs = [regex_key_turns(count, scene=PARAGRAPH * 10) for _ in range(3 if self.quick else 8)]
        note = f"all compiled by turn {max(len(r) for r in runs) - 1}"
        self.figures.append(figure(f"key matching, {count:,} regex keys, first turn", "ms", [r[0] for r in runs], note))
        self.figures.append(figure(f"key matching, {count:,} regex keys, once compiled", "ms", [r[-1] for r in runs]))

    def _import_throughput(self) -> None:
        megabytes = 1.0 if self.quick else 5.0
        runs = 3
        lexical, embedded = [], []
        campaign = Campaign.objects.create(owner=self.owner, title="Bench: import", endpoint=self.profile)
        knowledge_services.count_tokens("load the tokenizer before timing")
        for run in range(runs):
            text = generated_markdown(int(megabytes * 1_000_000), seed=20 + run)
            started = time.perf_counter()
            source = knowledge_services.source_create(campaign=campaign, filename=f"bench-{run}.md", text=text, enqueue=False)
            source = knowledge_services.source_index_now(source)
            assert source.index_state == KnowledgeSource.IndexState.READY, source.error
            lexical.append(len(text.encode()) / 1_000_000 / (time.perf_counter() - started))
        embedding = EndpointProfile.objects.create(
            name=f"bench-embed-{self.tag}", base_url=self.server.base_url, chat_model="demo-narrator",
            embedding_model="demo-embed",
        )
        embed_campaign = Campaign.objects.create(owner=self.owner, title="Bench: embedded import", endpoint=embedding)
        for run in range(runs):
            text = generated_markdown(200_000 if self.quick else 500_000, seed=40 + run)
            started = time.perf_counter()
            source = knowledge_services.source_create(campaign=embed_campaign, filename=f"embed-{run}.md", text=text, enqueue=False)
            source = knowledge_services.source_index_now(source)
            assert source.index_state == KnowledgeSource.IndexState.READY, source.error
            embedded.append(source.passage_count / (time.perf_counter() - started))
        self.figures.append(figure(f"import to ready, lexical ({megabytes:.0f} MB files)", "MB/s", lexical))
        self.figures.append(figure("import to ready, embedded (loopback demo server)", "passages/s", embedded))

    def _local_embeddings(self) -> None:
        model = localembed.MINILM
        why = localembed.missing(model)
        if why:
            self.skipped.append(f"local embeddings: skipped, {why}")
            return
        if not self.database_only:
            self._local_model_speed(model)
        profile = EndpointProfile.objects.create(
            name=f"bench-local-{self.tag}", base_url=self.server.base_url, chat_model="demo-narrator", embedding_model=model,
        )
        campaign = Campaign.objects.create(owner=self.owner, title="Bench: local embeddings", endpoint=profile)
        imported = []
        for run in range(2):
            started = time.perf_counter()
            source = knowledge_services.source_create(
                campaign=campaign, filename=f"local-{run}.md", text=generated_markdown(100_000, seed=90 + run),
                enqueue=False,
            )
            source = knowledge_services.source_index_now(source)
            assert source.index_state == KnowledgeSource.IndexState.READY and not source.error, source.error
            imported.append(source.passage_count / (time.perf_counter() - started))
        self.figures.append(figure(f"import to ready, embedded with {model}", "passages/s", imported))

    def _local_model_speed(self, model: str) -> None:
        """The model's own speed, which no database changes."""
        # 300-token passages (cl100k), the size the reference figures are for.
        tokens = encoding().encode(generated_markdown(400_000, seed=80))
        passages = [encoding().decode(tokens[i : i + 300]) for i in range(0, 300 * 128, 300)]
        localembed.encode(model, passages[:4])  # the model loads once per process; not what is timed
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            localembed.encode(model, passages)
            rates.append(len(passages) / (time.perf_counter() - started))
        tokens = statistics.median(count_tokens(p) for p in passages)
        self.figures.append(figure(
            f"local embedding, {model}, batched", "passages/s", rates,
            f"{len(passages)} passages of median {tokens:.0f} tokens, batches of {localembed.BATCH_SIZE}",
        ))
        scene = PARAGRAPH
        self.figures.append(figure(f"local embedding, {model}, one query", "ms", timed(
            lambda: localembed.encode(model, [scene]), 30,
        )))

    def _worker_memory(self) -> None:
        """In fresh processes, as a worker would be: the growth above the
        process's own baseline (tokenizer loaded) while indexing 5 MB. The
        source must be committed for the child to see it; it is deleted after."""
        owner = get_user_model().objects.create(username=f"bench-memory-{self.tag}", is_active=False)
        samples = []
        try:
            campaign = Campaign.objects.create(owner=owner, title="Bench: worker memory")
            for run in range(1 if self.quick else 3):
                source = knowledge_services.source_create(
                    campaign=campaign, filename=f"memory-{run}.md", text=generated_markdown(5_000_000, seed=60 + run),
                    enqueue=False,
                )
                output = subprocess.run(
                    [sys.executable, str(settings.BASE_DIR / "manage.py"), "bench_import", "--child", str(source.pk)],
                    check=True, capture_output=True, text=True,
                ).stdout
                report = json.loads(output.strip().splitlines()[-1])
                samples.append(report["peak_mb"] - report["baseline_mb"])
                self.memory_baseline = report["baseline_mb"]
        finally:
            Campaign.objects.filter(owner=owner).delete()
            owner.delete()
        self.figures.append(figure("worker peak memory indexing 5 MB, above baseline", "MB", samples,
                                   f"baseline {self.memory_baseline:.0f} MB with the tokenizer loaded"))

    # ------------------------------------------------------------ helpers

    def _client(self) -> Client:
        """A logged-in test client; its requests go through the whole middleware stack."""
        client = Client()
        client.force_login(self.owner)
        return client

    def _vacuum(self) -> None:
        """On PostgreSQL, the passage tables cleared of what earlier runs
        wrote and rolled back: their dead rows stay in the GIN index until a
        vacuum (an empty table's 413 MB index made a 1,000-passage search
        take 710 ms instead of 25)."""
        if connection.vendor != "postgresql":
            return
        tables = ["knowledge_knowledgechunk", "knowledge_knowledgeembedding"] + ([pgvector.TABLE] if pgvector.enabled() else [])
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"VACUUM {table}")

    def _analyze(self) -> None:
        """Fresh planner statistics for rows written a moment ago (a live
        instance's autovacuum keeps them current), and on PostgreSQL the GIN
        index's pending list merged, as a large write's commit does
        (lexical.postgres.refresh_statistics): in the bench's rollback
        transaction no commit comes, so the searches would read the
        unsorted pending list a live instance has merged by then."""
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [lexical_postgres.INDEX_NAME])
            cursor.execute("ANALYZE")

    def _print(self, elapsed: float) -> None:
        width = max(len(f.name) for f in self.figures)
        self.stdout.write(f"Loremaster bench on {connection.vendor}{' (quick)' if self.quick else ''}, {elapsed:.0f} s")
        self.stdout.write(f"{'figure':<{width}}  {'median':>10}  {'p95':>10}  {'unit':<10} runs  note")
        for f in self.figures:
            self.stdout.write(f"{f.name:<{width}}  {f.median:>10.2f}  {f.p95:>10.2f}  {f.unit:<10} {f.runs:>4}  {f.note}")
        for line in self.skipped:
            self.stdout.write(line)
