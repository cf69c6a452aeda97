"""A real Celery worker killed mid-job, then started again.

The worker runs as a subprocess against this test's database and broker
(the filesystem broker under LOREMASTER_VAR_DIR, or Redis). The demo model
server stalls the first embedding request, so the worker is caught inside
the job: past the claim and the chunking, before the swap. It is then
killed with SIGKILL, and a new worker must finish the job with the previous
passages searchable the whole time and no passage missing or doubled.
"""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from knowledge import lexical, services
from knowledge.models import IndexJob, KnowledgeChunk, KnowledgeEmbedding, KnowledgeSource
from storyapp.celery import app as celery_app
from tests.factories import CampaignFactory, EndpointProfileFactory

LORE = "\n\n".join(f"# Region {n}\n\n## Harbour {n}\n\nThe tide at harbour {n} runs high. " * 3 for n in range(40))
WAIT_SECONDS = 90


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    auth = quote(db["USER"] or "") + (f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Worker:
    def __init__(self, log: Path):
        self.log = log
        self.process = None

    def start(self):
        env = {**os.environ, "DATABASE_URL": _database_url(), "LOREMASTER_VAR_DIR": str(settings.VAR_DIR),
               "CELERY_TASK_ALWAYS_EAGER": "0"}
        out = self.log.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "storyapp", "worker", "--pool=solo", "--loglevel=INFO",
             "-n", f"kill-test-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle"],
            cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
        return self

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(condition, what: str, log: Path):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


@pytest.fixture
def real_broker():
    """Tasks go to the broker for a real worker, from an empty queue."""
    celery_app.conf.task_always_eager = False
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge("celery")
    yield
    celery_app.conf.task_always_eager = True


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_leaves_the_old_passages_and_a_restarted_one_finishes(alice, model, real_broker, tmp_path):
    profile = EndpointProfileFactory(base_url=model.base_url, timeout_seconds=60)
    campaign = CampaignFactory(owner=alice, endpoint=profile)
    source = services.source_index_now(
        services.source_create(campaign=campaign, filename="regions.md", text=LORE, enqueue=False)
    )
    old_ids = set(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True))
    expected = source.passage_count
    assert source.index_state == "ready" and expected > 10

    model.script_embeddings({"stall": 60})
    log = tmp_path / "worker.log"
    first = Worker(log).start()
    try:
        job = services.source_reindex(source=source)
        wait_for(lambda: IndexJob.objects.filter(pk=job.pk, step__startswith="Embedding").exists(),
                 "the worker to reach the embedding step", log)
        first.kill()

        job.refresh_from_db()
        source.refresh_from_db()
        assert job.state == IndexJob.State.RUNNING
        assert source.index_state == KnowledgeSource.IndexState.READY
        assert set(KnowledgeChunk.objects.filter(source=source).values_list("pk", flat=True)) == old_ids
        assert lexical.search(campaign_id=campaign.pk, terms=["harbour"], limit=5)

        model.reset()
        second = Worker(log).start()
        try:
            wait_for(lambda: IndexJob.objects.filter(pk=job.pk, state=IndexJob.State.DONE).exists(),
                     "the restarted worker to finish the job", log)
        finally:
            second.stop()
    finally:
        first.stop()

    job.refresh_from_db()
    source.refresh_from_db()
    chunks = KnowledgeChunk.objects.filter(source=source)
    assert job.attempts == 2
    assert source.index_state == KnowledgeSource.IndexState.READY and source.passage_count == expected
    assert sorted(chunks.values_list("index", flat=True)) == list(range(expected))
    assert not set(chunks.values_list("pk", flat=True)) & old_ids
    assert KnowledgeEmbedding.objects.filter(chunk__source=source).count() == expected
    assert KnowledgeChunk.objects.count() == expected
