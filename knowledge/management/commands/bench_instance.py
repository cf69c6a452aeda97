"""A large instance, measured the way a reader meets it: `--campaigns`
campaigns of `--passages` synthetic passages each (384-dimension vectors,
knowledge.benchdata), built once in a database of its own and kept with
`--keep`; then, each in a fresh process, as a worker after a restart:

- the first turn's retrieval in one campaign (nothing of its library in the
  process yet), and the process's start to that answer;
- the next turns' retrieval, median and p95;
- the process's resident memory after its first turn and after the rest;
- the database's size on disk and the time the instance took to build;
- on PostgreSQL, `--workers` processes importing generated Markdown into
  campaigns of their own at once, through the real indexing path.

On SQLite the instance is a database file in its own var directory
(`--dir`); on PostgreSQL a database named after the configured one with
`_instance` appended. `--pgvector off` measures a PostgreSQL that has
pgvector on the numpy path (LOREMASTER_PGVECTOR=off in the measuring
processes). `manage.py bench --instance` runs this with its defaults, the
1M-passage instance (10 x 100,000). Figures are printed, never judged.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection
from django.utils import timezone

from contextbuild.tokens import encoding
from endpoints.models import EmbeddingCalibration
from knowledge import pgvector, services
from knowledge.benchdata import SyntheticLibrary
from knowledge.management.commands.bench_import import generated_markdown
from knowledge.models import KnowledgeSource
from knowledge.retrieval import retrieve
from storyapp.models import Campaign

MODEL = "bench-instance-embed"
OWNER = "bench-instance"


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Command(BaseCommand):
    help = "Builds (or reuses) a large instance in a database of its own and times first and later turns in fresh processes."

    def add_arguments(self, parser):
        parser.add_argument("--campaigns", type=int, default=10)
        parser.add_argument("--passages", type=int, default=100_000, help="Passages per campaign.")
        parser.add_argument("--turns", type=int, default=30, help="Turns timed after the first.")
        parser.add_argument("--keep", action="store_true", help="Reuse an instance built with the same sizes.")
        parser.add_argument("--pgvector", choices=("on", "off"), default="on")
        parser.add_argument("--workers", type=int, default=10, help="Parallel importers (PostgreSQL; 0 for none).")
        parser.add_argument("--dir", default="", help="The instance's var directory (SQLite's database file).")
        parser.add_argument("--child", choices=("build", "turns", "import"), help=argparse.SUPPRESS)
        parser.add_argument("--campaign", type=int, default=0, help=argparse.SUPPRESS)
        parser.add_argument("--megabytes", type=float, default=2.0, help="Each importer's file (MB).")

    def handle(self, *args, child: str | None, **options):
        if child:
            result = getattr(self, f"_child_{child}")(**options)
            self.stdout.write(json.dumps(result))
            return
        self._parent(**options)

    # ------------------------------------------------------------ parent

    def _parent(self, *, campaigns, passages, turns, keep, pgvector, workers, dir, megabytes, **_):
        engine = connection.vendor
        env = dict(os.environ)
        if engine == "postgresql":
            name = f"{connection.settings_dict['NAME']}_instance"
            env["DATABASE_URL"] = self._database_url(name)
            env["LOREMASTER_VAR_DIR"] = dir or str(Path(settings.VAR_DIR) / "bench-instance-pg")
        else:
            name = ""
            env["LOREMASTER_VAR_DIR"] = dir or str(Path(settings.VAR_DIR) / "bench-instance")
        env["LOREMASTER_PGVECTOR"] = pgvector
        marker = Path(env["LOREMASTER_VAR_DIR"]) / f"instance-{name or 'sqlite'}.json"
        wanted = {"campaigns": campaigns, "passages": passages}
        built = json.loads(marker.read_text()) if keep and marker.exists() else None
        reused = built is not None and {k: built.get(k) for k in wanted} == wanted
        if not reused:
            if engine == "postgresql":
                self._recreate(name)
            else:
                (Path(env["LOREMASTER_VAR_DIR"]) / "loremaster.sqlite3").unlink(missing_ok=True)
            Path(env["LOREMASTER_VAR_DIR"]).mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env=env, check=True,
                           cwd=settings.BASE_DIR)
            # Built with pgvector where the database has it, so the same
            # instance is measured either way.
            build_env = {**env, "LOREMASTER_PGVECTOR": "on"}
            built = {**wanted, **self._run(build_env, "build", campaigns=campaigns, passages=passages)}
            marker.write_text(json.dumps(built))
        # Asked for and in the database: a PostgreSQL without the extension serves the numpy path.
        asked = engine == "postgresql" and pgvector == "on"
        with_pgvector = asked and built.get("pgvector", False)
        label = engine + (" + pgvector" if with_pgvector else "")
        if asked and not with_pgvector:
            label += " (no pgvector in this database: the numpy path)"
        self.stdout.write(
            f"Instance on {label}: {campaigns} campaigns x {passages:,} passages "
            f"({campaigns * passages:,}), built in {built['build_seconds']:.0f} s"
            f"{' (kept from an earlier run)' if reused else ''}; "
            f"database on disk {built['database_mb'] if engine == 'sqlite' else self._size(name):,.0f} MB"
        )
        if not with_pgvector:
            # The mapped files are a cache a worker writes at each swap; where
            # they are missing (a wiped var, another machine), the first
            # reader rebuilds them from the database, once.
            rebuilt = self._run(env, "turns", campaign=built["campaign_ids"][0], turns=1)
            self.stdout.write(
                f"  first turn of the first fresh process (which builds the library's files where they are "
                f"missing): {rebuilt['first_ms']:.0f} ms"
            )
        started = time.perf_counter()
        measured = self._run(env, "turns", campaign=built["campaign_ids"][0], turns=turns)
        process = (time.perf_counter() - started) * 1000
        self.stdout.write(
            f"  first turn in a fresh process: retrieval {measured['first_ms']:.0f} ms "
            f"(process start to answer {measured['start_to_answer_ms']:.0f} ms, of which the tokenizer's load "
            f"{measured['tokenizer_ms']:.0f} ms, done at a worker's start; whole child {process:.0f} ms)\n"
            f"  next {turns} turns: retrieval p50 {measured['p50_ms']:.1f} ms, p95 {measured['p95_ms']:.1f} ms\n"
            f"  process RSS: {measured['rss_first_mb']:.0f} MB after the first turn, "
            f"{measured['rss_last_mb']:.0f} MB after {turns + 1} (baseline {measured['rss_start_mb']:.0f} MB)"
        )
        if engine == "postgresql" and workers:
            self._parallel_import(env, workers, megabytes)

    def _parallel_import(self, env, workers: int, megabytes: float) -> None:
        started = time.perf_counter()
        children = [
            subprocess.Popen(
                [sys.executable, "manage.py", "bench_instance", "--child", "import", "--campaign", str(i),
                 "--megabytes", str(megabytes)],
                env=env, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, text=True,
            )
            for i in range(workers)
        ]
        results = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
        wall = time.perf_counter() - started
        total = sum(r["megabytes"] for r in results)
        rates = sorted(r["megabytes"] / r["seconds"] for r in results)
        self.stdout.write(
            f"  {workers} importers at once: {total:.0f} MB in {wall:.1f} s, {total / wall:.2f} MB/s together; "
            f"each {statistics.median(rates):.2f} MB/s (median), {rates[0]:.2f}-{rates[-1]:.2f}"
        )

    def _run(self, env, child: str, **options) -> dict:
        argv = [sys.executable, "manage.py", "bench_instance", "--child", child]
        for key, value in options.items():
            argv += [f"--{key}", str(value)]
        output = subprocess.run(argv, env=env, cwd=settings.BASE_DIR, check=True, capture_output=True, text=True).stdout
        return json.loads(output.strip().splitlines()[-1])

    def _database_url(self, name: str) -> str:
        s = connection.settings_dict
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{name}"

    def _recreate(self, name: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cursor.execute(f'CREATE DATABASE "{name}"')

    def _size(self, name: str) -> float:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(%s)", [name])
            return cursor.fetchone()[0] / 1e6

    # ------------------------------------------------------------ children

    def _child_build(self, *, campaigns, passages, **_) -> dict:
        started = time.perf_counter()
        owner, _ = get_user_model().objects.get_or_create(username=OWNER, defaults={"is_active": False})
        EmbeddingCalibration.objects.update_or_create(model=MODEL, defaults={"floor": 0.3, "measured_at": timezone.now()})
        data = SyntheticLibrary(owner=owner, model=MODEL)
        ids = []
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous = OFF")
        with pgvector.bulk_load():
            for i in range(campaigns):
                ids.append(data.campaign(f"instance {i + 1}", passages).pk)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        size = 0.0
        if connection.vendor == "sqlite":
            size = Path(connection.settings_dict["NAME"]).stat().st_size / 1e6
        return {"campaign_ids": ids, "build_seconds": time.perf_counter() - started, "database_mb": size,
                "pgvector": pgvector.enabled()}

    def _child_turns(self, *, campaign, turns, **_) -> dict:
        begun = time.perf_counter()
        encoding()  # a worker loads it at start (ops.worker), before any turn
        tokenizer = (time.perf_counter() - begun) * 1000
        rss_start = _rss_mb()
        record = Campaign.objects.get(pk=campaign)
        data = SyntheticLibrary(owner=record.owner, model=MODEL, seed=5)
        queries = [data.query(record) for _ in range(5)]
        samples = []
        for turn in range(turns + 1):
            inputs, vector = queries[turn % len(queries)]
            started = time.perf_counter()
            retrieve(campaign_id=campaign, query=inputs, embedding_model=MODEL, query_vector=vector)
            samples.append((time.perf_counter() - started) * 1000)
            if turn == 0:
                answered = (time.perf_counter() - begun) * 1000
                rss_first = _rss_mb()
        rest = sorted(samples[1:])
        return {
            "first_ms": samples[0], "start_to_answer_ms": answered, "tokenizer_ms": tokenizer,
            "p50_ms": statistics.median(rest), "p95_ms": rest[min(len(rest) - 1, round(0.95 * (len(rest) - 1)))],
            "rss_start_mb": rss_start, "rss_first_mb": rss_first, "rss_last_mb": _rss_mb(),
        }

    def _child_import(self, *, campaign, megabytes, **_) -> dict:
        owner, _ = get_user_model().objects.get_or_create(username=f"{OWNER}-importer", defaults={"is_active": False})
        target = Campaign.objects.create(owner=owner, title=f"Importer {campaign}")
        text = generated_markdown(int(megabytes * 1_000_000), seed=100 + campaign)
        services.count_tokens("load the tokenizer before timing")
        started = time.perf_counter()
        source = services.source_create(campaign=target, filename=f"import-{campaign}.md", text=text, enqueue=False)
        source = services.source_index_now(source)
        seconds = time.perf_counter() - started
        assert source.index_state == KnowledgeSource.IndexState.READY, source.error
        return {"megabytes": len(text.encode()) / 1e6, "seconds": seconds}
