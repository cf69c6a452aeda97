"""A Celery worker's life, as ops sees it: on start it requeues the index
jobs its dead predecessors left running and sends again those they had
fetched, follows the instance's default
embedding model, loads the tokenizer, and starts the sweeper; on shutdown
it removes its heartbeat row."""

from __future__ import annotations

import logging

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from contextbuild.tokens import encoding

from knowledge import services
from lifecycle import workers
from storyapp import memories
from storyapp.celery import app
from storyapp.models import Campaign

from . import sweeper

log = logging.getLogger(__name__)


def connect() -> None:
    worker_ready.connect(_worker_ready, dispatch_uid="ops_worker_ready")
    worker_shutdown.connect(_worker_shutdown, dispatch_uid="ops_worker_shutdown")


def _worker_ready(sender=None, **kwargs) -> None:
    name = workers.this_worker()
    queues = sorted(q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", None) or [])
    try:
        if not queues or app.conf.task_default_queue in queues:
            services.jobs_reclaim(now=timezone.now(), restarted_worker=name)
        else:  # a narrator: the index jobs' messages were never its to lose
            services.jobs_recover(now=timezone.now(), restarted_worker=name)
    except Exception:
        log.exception("Could not requeue orphaned index jobs")
    if settings.LOREMASTER_EMBEDDING_MODEL.strip():
        # The instance default may have changed since the last start, and no
        # profile was saved to say so.
        try:
            follow_instance_default()
        except Exception:
            log.exception("Could not queue re-embedding after a model change")
    # cl100k's tables take 0.3-0.9 s to load: at start, not in the first
    # reader's turn after a restart.
    encoding()
    sweeper.start(name, queues)


def follow_instance_default() -> None:
    """Queues re-embeds (passages and memories) for the campaigns whose
    profile names no model."""
    names_none = Q(endpoint__embedding_model="") | Q(endpoint__isnull=True)
    campaign_ids = list(Campaign.objects.filter(names_none).values_list("pk", flat=True))
    services.embeddings_refresh(campaign_ids=campaign_ids)
    memories.refresh(campaign_ids=campaign_ids)


def _worker_shutdown(sender=None, **kwargs) -> None:
    sweeper.stop()
    try:
        sweeper.gone(name=workers.this_worker())
    except Exception:
        log.exception("Could not remove the worker heartbeat")
