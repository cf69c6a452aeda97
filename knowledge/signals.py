"""Reactions to events outside this app.

1. An endpoint profile or a campaign's endpoint changes: passages embedded
   with another model are re-embedded in the background (storyapp follows
   with its memories on its own).
2. The workers' periodic sweep (lifecycle.signals.periodic_sweep): index
   jobs of dead workers and lost messages are sent again.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_save

from lifecycle.signals import periodic_sweep
from endpoints.models import EndpointProfile
from storyapp.models import Campaign

from . import services
from .services import liveness

log = logging.getLogger(__name__)


def connect() -> None:
    post_save.connect(_profile_saved, sender=EndpointProfile, dispatch_uid="knowledge_profile_saved")
    post_save.connect(_campaign_saved, sender=Campaign, dispatch_uid="knowledge_campaign_saved")
    periodic_sweep.connect(liveness.on_sweep, dispatch_uid="knowledge_sweep")


def _safely(function, **kwargs) -> None:
    try:
        function(**kwargs)
    except Exception:
        log.exception("Could not queue re-embedding after a model change")


def _profile_saved(sender, instance, **kwargs) -> None:
    transaction.on_commit(lambda: _safely(services.embeddings_refresh_for_profile, profile_id=instance.pk))


def _campaign_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created or (update_fields is not None and "endpoint" not in update_fields):
        return
    transaction.on_commit(lambda: _safely(services.embeddings_refresh, campaign_ids=[instance.pk]))
