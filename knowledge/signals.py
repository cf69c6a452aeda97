"""Reactions to events outside this app: a model change, a worker's life.

1. An endpoint profile or a campaign's endpoint changes: passages and
   memories embedded with another model are re-embedded in the background.
2. A Celery worker starts: it requeues the jobs its dead predecessors left
   running, re-embeds what the instance's default embedding model (if set)
   does not match, then keeps a heartbeat row fresh (how the monitor knows a worker
   is alive on any broker) and sweeps for orphaned work (storyapp.liveness).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from storyapp import liveness

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = liveness.SWEEP_SECONDS
#: Held by the worker sweeping this period, in the cache every worker shares.
SWEEP_LOCK = "loremaster-sweep"

_stop = threading.Event()


def connect() -> None:
    from celery.signals import worker_ready, worker_shutdown
    from django.db.models.signals import post_save

    from endpoints.models import EndpointProfile
    from storyapp.models import Campaign

    post_save.connect(_profile_saved, sender=EndpointProfile, dispatch_uid="knowledge_profile_saved")
    post_save.connect(_campaign_saved, sender=Campaign, dispatch_uid="knowledge_campaign_saved")
    worker_ready.connect(_worker_ready, dispatch_uid="knowledge_worker_ready")
    worker_shutdown.connect(_worker_shutdown, dispatch_uid="knowledge_worker_shutdown")


def _safely(function, **kwargs) -> None:
    try:
        function(**kwargs)
    except Exception:
        log.exception("Could not queue re-embedding after a model change")


def _profile_saved(sender, instance, **kwargs) -> None:
    from storyapp import derived

    from . import services

    transaction.on_commit(lambda: _safely(services.embeddings_refresh_for_profile, profile_id=instance.pk))
    transaction.on_commit(lambda: _safely(derived.memories_refresh, campaign_ids=services.campaigns_using(instance)))


def _campaign_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created or (update_fields is not None and "endpoint" not in update_fields):
        return
    from storyapp import derived

    from . import services

    transaction.on_commit(lambda: _safely(services.embeddings_refresh, campaign_ids=[instance.pk]))
    transaction.on_commit(lambda: _safely(derived.memories_refresh, campaign_ids=[instance.pk]))


def _worker_ready(sender=None, **kwargs) -> None:
    from . import services

    name = services.worker_name()
    try:
        services.jobs_recover(now=timezone.now(), restarted_worker=name)
    except Exception:
        log.exception("Could not requeue orphaned index jobs")
    if settings.LOREMASTER_EMBEDDING_MODEL.strip():
        # The instance default may have changed since the last start, and no
        # profile was saved to say so.
        _safely(follow_instance_default)
    _stop.clear()
    queues = sorted(q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", None) or [])
    threading.Thread(target=_heartbeat_forever, args=(name, queues), name="knowledge-heartbeat", daemon=True).start()


def follow_instance_default() -> None:
    """Queues re-embeds for the campaigns whose profile names no model."""
    from django.db.models import Q

    from storyapp import derived
    from storyapp.models import Campaign

    from . import services

    names_none = Q(endpoint__embedding_model="") | Q(endpoint__isnull=True)
    campaign_ids = list(Campaign.objects.filter(names_none).values_list("pk", flat=True))
    services.embeddings_refresh(campaign_ids=campaign_ids)
    derived.memories_refresh(campaign_ids=campaign_ids)


def _worker_shutdown(sender=None, **kwargs) -> None:
    from . import services

    _stop.set()
    try:
        services.worker_gone(name=services.worker_name())
    except Exception:
        log.exception("Could not remove the worker heartbeat")


def _sweep() -> None:
    """Index jobs, narrations, summaries and memories whose broker message
    was lost or whose worker died are sent again from here, so nothing
    waits for a reader to reload a page (which never writes on GET). One
    worker sweeps each period; the others skip it."""
    from storyapp import derived, narration

    from . import services

    try:
        if not cache.add(SWEEP_LOCK, services.worker_name(), timeout=liveness.SWEEP_SECONDS * 0.8):
            return
    except Exception:
        log.warning("The cache is unreachable; sweeping without the lock")
    services.jobs_recover(now=timezone.now())
    services.jobs_resend_lost(now=timezone.now())
    with transaction.atomic():
        narration.recover_stale(now=timezone.now())
        derived.resend_stale()


def _heartbeat_forever(name: str, queues: list[str]) -> None:
    from endpoints import localembed

    from . import services

    local_models = [model for model in localembed.MODELS if not localembed.missing(model)]
    while not _stop.is_set():
        close_old_connections()
        try:
            services.worker_heartbeat(name=name, now=timezone.now(), queues=queues, local_models=local_models)
            _sweep()
        except Exception:
            log.exception("Worker heartbeat or sweep failed")
        finally:
            connections.close_all()
        _stop.wait(HEARTBEAT_SECONDS)
