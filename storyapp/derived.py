"""Work derived from the story after each turn: summaries and memories.

A finished narration schedules (on commit) the memories of its accepted
state events, and a summary of the stretch that fell out of the history
window. Each piece of work is a DerivedJob anchored in the action tree
(`derivedjobs`); the Celery task that runs it is a thin wrapper around
`run`, which may be delivered twice, retried with backoff, or outlived by
an edit: the work checks its anchor is still there and writes its result in
one transaction (`summaries`, `memories`).

What was derived is used only on its own lineage (contextbuild.summaries),
and an edit or an in-place retry withdraws what was derived from the changed
action, so the work is redone rather than leaked into the new story.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from endpoints.errors import ModelFailure

from . import derivedjobs, lineage, memories, summaries
from .models import Action, DerivedJob, Memory, Summary

log = logging.getLogger(__name__)


def after_narration(action_id: int) -> None:
    """Schedules what a finished narration gives rise to. Called on commit,
    so the jobs see the stored narration. A narration held for the game
    master's review waits for their approval (storyapp.review): memories
    and summaries of it would tell the players its story, in later prompts
    and their inspectors, before they may read it, or before an edit."""
    action = (Action.objects.filter(pk=action_id, status=Action.Status.DONE, held_for_review=False)
              .select_related("campaign").first())
    if action is None:
        return
    with transaction.atomic():
        derivedjobs.enqueue(derivedjobs.job_for(action.campaign_id, DerivedJob.Kind.MEMORIES, anchor_id=action.pk))
        summaries.schedule(action.campaign, position=action)
        derivedjobs.resend_stale(action.campaign_id, now=timezone.now())


def withdraw_from(action: Action) -> None:
    """What was derived from `action` goes: the summaries that cover it or
    any later action below it (and their inferred memories), and its own
    recorded memories. The marks rewind with them, being tree positions,
    and the work is queued again."""
    below = lineage.subtree_ids(action.campaign_id, action.pk)
    Summary.objects.filter(campaign_id=action.campaign_id, covers_through_id__in=below).delete()
    Memory.objects.filter(anchor=action).delete()
    DerivedJob.objects.filter(campaign_id=action.campaign_id, kind=DerivedJob.Kind.SUMMARY,
                              anchor_id__in=below).delete()
    DerivedJob.objects.filter(anchor=action, kind=DerivedJob.Kind.MEMORIES).delete()
    if action.kind == Action.Kind.AI and action.status == Action.Status.DONE:
        transaction.on_commit(lambda: after_narration(action.pk), robust=True)


def run(job_id: int, *, final_attempt: bool) -> None:
    """Runs one job. A failure is stored on the job (and so seen by the
    report, the play page and the monitor); unless this was the last
    attempt it raises RetryLater. Never raises into a turn: turns do not
    wait for derived work."""
    job = derivedjobs.claim(job_id)
    if job is None:
        return
    try:
        with DerivedJob.objects.filter(pk=job.pk).beating():
            if job.kind == DerivedJob.Kind.MEMORIES:
                memories.remember(job)
            elif job.level == 0:
                summaries.summarize(job)
            else:
                summaries.merge(job)
    except (ModelFailure, derivedjobs.Unusable) as exc:
        # The reader's words are stored; what the server said goes to the log.
        log.warning("Derived job %s failed: %s Server: %s", job.pk, exc, getattr(exc, "detail", "") or "(nothing)")
        derivedjobs.failed(job, str(exc), final=final_attempt)
    except Exception as exc:
        log.exception("Derived job %s failed", job.pk)
        derivedjobs.failed(job, f"{type(exc).__name__}: {exc}", final=final_attempt)
