"""Reactions of the story machinery to events it does not start.

1. The workers' periodic sweep (lifecycle.signals.periodic_sweep):
   narrations and derived jobs that a lost message or a dead worker left
   hanging are sent again (or, having cost too many workers, failed), and
   log-in failure counts that have run out are deleted, shared campaigns'
   rounds and turns whose timer ran out move on, and their event logs keep
   a day.
2. An endpoint profile or a campaign's endpoint changes: memories embedded
   with another model are re-embedded in the background.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_save

from knowledge.services import campaigns_using
from lifecycle.signals import periodic_sweep

from . import campaignevents, derivedjobs, logins, memories, narration, turnorder
from .models import Campaign, EndpointProfile

log = logging.getLogger(__name__)


def connect() -> None:
    periodic_sweep.connect(narration.on_sweep, dispatch_uid="storyapp_narration_sweep")
    periodic_sweep.connect(derivedjobs.on_sweep, dispatch_uid="storyapp_derived_sweep")
    periodic_sweep.connect(logins.on_sweep, dispatch_uid="storyapp_logins_sweep")
    periodic_sweep.connect(turnorder.on_sweep, dispatch_uid="storyapp_turnorder_sweep")
    periodic_sweep.connect(campaignevents.on_sweep, dispatch_uid="storyapp_campaignevents_sweep")
    post_save.connect(_profile_saved, sender=EndpointProfile, dispatch_uid="storyapp_profile_saved")
    post_save.connect(_campaign_saved, sender=Campaign, dispatch_uid="storyapp_campaign_saved")


def _refresh(campaign_ids) -> None:
    try:
        memories.refresh(campaign_ids=campaign_ids)
    except Exception:
        log.exception("Could not queue re-embedding of memories after a model change")


def _profile_saved(sender, instance, **kwargs) -> None:
    transaction.on_commit(lambda: _refresh(campaigns_using(instance)))


def _campaign_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created or (update_fields is not None and "endpoint" not in update_fields):
        return
    transaction.on_commit(lambda: _refresh([instance.pk]))
