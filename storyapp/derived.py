"""Work derived from the story after each turn: summaries and memories.

A finished narration schedules (on commit) the memories of its accepted
state events, and a summary of the stretch that fell out of the history
window. Each piece of work is a DerivedJob anchored in the action tree; the
Celery task that runs it is a thin wrapper around `run`, which may be
delivered twice, retried with backoff, or outlived by an edit: the work
checks its anchor is still there and writes its result in one transaction.

What was derived is used only on its own lineage (contextbuild.summaries),
and an edit or an in-place retry withdraws what was derived from the changed
action, so the work is redone rather than leaked into the new story.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from contextbuild import memories as recorded_memories
from contextbuild import records, summaries
from contextbuild.builder import token_scale
from contextbuild.tokens import count_tokens
from endpoints import window
from endpoints.client import endpoint_for
from endpoints.embeddings import EmbeddingFailed, EmbeddingUnavailable, embed, model_for, model_of, profile_for
from endpoints.errors import ModelFailure
from endpoints.streaming import stream_reply

from lifecycle import policy, sending

from . import lineage
from .models import Action, Campaign, ContextSnapshot, DerivedJob, Memory, Summary

log = logging.getLogger(__name__)

#: The longest summary reply asked for (a summary of 150-220 words fits),
#: and the least: at a tenth of the budget in between, so a small window is
#: not filled by its own summaries.
SUMMARY_REPLY_TOKENS = 400
SUMMARY_REPLY_MIN = 160
#: A summary's sampling: faithful rather than inventive.
SUMMARY_TEMPERATURE = 0.3
#: Unfinished or failed jobs the report and the play page mention.
NOTICED_JOBS = 5
#: The task that runs a job (storyapp.tasks), named: it imports this module.
DERIVE = "storyapp.tasks.derive"
REEMBED = "storyapp.tasks.reembed_memories"


# ---------------------------------------------------------------- reading


def stored_summaries(campaign_id: int) -> list[summaries.StoredSummary]:
    rows = Summary.objects.filter(campaign_id=campaign_id).values_list(
        "id", "starts_after_id", "covers_through_id", "covers_through__depth", "level", "text", "token_count"
    )
    return [summaries.StoredSummary(*row) for row in rows]


def summary_chain(campaign_id: int, lineage_ids) -> tuple[summaries.StoredSummary, ...]:
    return summaries.chain(stored_summaries(campaign_id), lineage_ids)


@dataclass(frozen=True)
class Notice:
    kind: str
    state: str
    attempts: int
    error: str
    anchor: int

    def as_record(self) -> dict:
        return {"kind": self.kind, "state": self.state, "attempts": self.attempts, "error": self.error,
                "anchor": self.anchor}


def notices(campaign_id: int, lineage_ids) -> list[Notice]:
    """This lineage's derived work that is not done: failed, waiting or running."""
    rows = (
        DerivedJob.objects.filter(campaign_id=campaign_id)
        .exclude(state=DerivedJob.State.DONE)
        .order_by("-updated")
        .values_list("kind", "state", "attempts", "error", "anchor_id")[:50]
    )
    return [Notice(*row) for row in rows if row[4] in lineage_ids][:NOTICED_JOBS]


# ------------------------------------------------------------- scheduling


def _set(job_id: int, *, only=(), at: datetime | None = None, **fields) -> int:
    """Updates a job and its `updated` time, now or `at` (a queryset update
    does not touch auto_now, and staleness is read off it); `only` limits
    the update to jobs in those states. Returns how many rows changed."""
    jobs = DerivedJob.objects.filter(pk=job_id)
    if only:
        jobs = jobs.filter(state__in=only)
    return jobs.update(updated=at or timezone.now(), **fields)


def _key(kind: str, anchor_id: int, start_id: int | None, level: int) -> str:
    return f"{kind}:{anchor_id}:{start_id or 'root'}:{level}"


def _job(campaign_id: int, kind: str, *, anchor_id: int, start_id: int | None = None, level: int = 0) -> DerivedJob | None:
    """The job for this work, queued; None when it is already done or under way.

    A failed job asked for again is queued again with fresh attempts, so a
    summarizer that was down is retried by the next turn rather than never.
    """
    job, created = DerivedJob.objects.get_or_create(
        key=_key(kind, anchor_id, start_id, level),
        defaults={"campaign_id": campaign_id, "kind": kind, "anchor_id": anchor_id, "starts_after_id": start_id,
                  "level": level},
    )
    if created:
        return job
    if _set(job.pk, only=[DerivedJob.State.FAILED], state=DerivedJob.State.QUEUED, attempts=0):
        return job
    # Queued or running, and untouched for STALE_AFTER: its message was lost
    # (a broker that refused it) or its worker killed without a redelivery.
    # A running job beats; a job waiting for its next attempt is dated at
    # that attempt (`_failed`).
    if DerivedJob.objects.stale(timezone.now()).filter(pk=job.pk).exists():
        _set(job.pk, state=DerivedJob.State.QUEUED)
        return job
    return None


def _enqueue(job: DerivedJob | None) -> None:
    if job is not None:
        _send(job.pk)


def _send(job_id: int) -> None:
    # Robust: a broker that cannot take the message must not fail the turn
    # that asked; the job stays queued and is sent again once it is stale.
    sending.send_on_commit(DERIVE, job_id, robust=True)


def after_narration(action_id: int) -> None:
    """Schedules what a finished narration gives rise to. Called on commit,
    so the jobs see the stored narration."""
    action = Action.objects.filter(pk=action_id, status=Action.Status.DONE).select_related("campaign").first()
    if action is None:
        return
    with transaction.atomic():
        _enqueue(_job(action.campaign_id, DerivedJob.Kind.MEMORIES, anchor_id=action.pk))
        schedule_summaries(action.campaign, position=action)
        resend_stale(action.campaign_id, now=timezone.now())


def resend_stale(campaign_id: int | None = None, *, now: datetime) -> None:
    """Sends stale jobs again, of one story (each of its turns sweeps) or of
    all (the workers' background sweep), so work whose message was lost is
    done soon after STALE_AFTER."""
    stale = DerivedJob.objects.stale(now)
    if campaign_id is not None:
        stale = stale.filter(campaign_id=campaign_id)
    for job_id in stale.values_list("pk", flat=True)[:100]:
        _set(job_id, state=DerivedJob.State.QUEUED)
        _send(job_id)


def on_sweep(sender=None, *, now: datetime, **kwargs) -> None:
    """The workers' periodic sweep (lifecycle.signals.periodic_sweep)."""
    with transaction.atomic():
        resend_stale(now=now)


def _dropped_through(position: Action) -> Action | None:
    """The newest action the position's prompt left out of its history."""
    anchor_id = (
        ContextSnapshot.objects.filter(action=position).values_list("report__history__anchor", flat=True).first()
    )
    if not isinstance(anchor_id, int) or isinstance(anchor_id, bool):
        return None
    anchor = Action.objects.filter(pk=anchor_id, campaign_id=position.campaign_id).first()
    if anchor is None or anchor.parent_id is None:
        return None
    return Action.objects.filter(pk=anchor.parent_id).first()


def schedule_summaries(campaign: Campaign, *, position: Action) -> None:
    """Queues a merge when the chain outgrew its share of the budget, and a
    summary when enough of the lineage fell out of the window (see
    `summaries.due`); both positions are read off the tree, so an undo
    rewinds them."""
    ids = lineage.ids(campaign.pk, position.pk)
    picked = summaries.chain(stored_summaries(campaign.pk), ids)
    profile = endpoint_for(campaign)
    if profile is None:
        return
    budget = window.effective_budget(profile)
    merge = summaries.merge_plan(picked, limit_tokens=int(budget * summaries.CHAIN_SHARE))
    if merge:
        _enqueue(_job(campaign.pk, DerivedJob.Kind.SUMMARY, anchor_id=merge[-1].covers_through,
                      start_id=merge[0].starts_after, level=max(p.level for p in merge) + 1))
    dropped = _dropped_through(position)
    summarized = picked[-1] if picked else None
    if dropped is None or dropped.pk not in ids:
        return
    if summaries.due(summarized_depth=summarized.through_depth if summarized else None,
                     dropped_through_depth=dropped.depth):
        if _in_progress(campaign.pk, start_id=summarized.covers_through if summarized else None):
            return
        _enqueue(_job(campaign.pk, DerivedJob.Kind.SUMMARY, anchor_id=dropped.pk,
                      start_id=summarized.covers_through if summarized else None))


def _in_progress(campaign_id: int, *, start_id: int | None) -> bool:
    """Whether a summary from this start is already queued or running: it
    will cover what fits and schedule the rest."""
    now = timezone.now()
    in_flight = DerivedJob.objects.in_flight().filter(
        campaign_id=campaign_id, kind=DerivedJob.Kind.SUMMARY, level=0, starts_after_id=start_id,
    )
    return in_flight.exclude(pk__in=in_flight.stale(now).values("pk")).exists()


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


# ---------------------------------------------------------------- running


def claim(job_id: int) -> DerivedJob | None:
    """The job, marked running with one more attempt; None when it is done,
    gone (an edit withdrew it meanwhile), or running in another worker (a
    second delivery of its message) unless that one is stale."""
    if not DerivedJob.objects.claim(job_id, now=timezone.now()):
        return None
    return DerivedJob.objects.select_related("campaign", "anchor", "starts_after").get(pk=job_id)


def run(job_id: int, *, final_attempt: bool) -> None:
    """Runs one job. A failure is stored on the job (and so seen by the
    report, the play page and the monitor); unless this was the last
    attempt it raises RetryLater. Never raises into a turn: turns do not
    wait for derived work."""
    job = claim(job_id)
    if job is None:
        return
    try:
        with DerivedJob.objects.filter(pk=job.pk).beating():
            if job.kind == DerivedJob.Kind.MEMORIES:
                _remember(job)
            elif job.level == 0:
                _summarize(job)
            else:
                _merge(job)
    except (ModelFailure, _Unusable) as exc:
        _failed(job, str(exc), final=final_attempt)
    except Exception as exc:
        log.exception("Derived job %s failed", job.pk)
        _failed(job, f"{type(exc).__name__}: {exc}", final=final_attempt)


class _Unusable(Exception):
    """A reply that cannot be used (an empty summary)."""


def _failed(job: DerivedJob, error: str, *, final: bool) -> None:
    """Stores the failure; unless it is final, the job waits for its next
    attempt, dated then, so the sweep does not take the wait for a loss."""
    countdown = policy.retry_in(job.attempts, final=final, max_attempts=DerivedJob.MAX_ATTEMPTS)
    if countdown is None:
        _set(job.pk, only=[DerivedJob.State.RUNNING], state=DerivedJob.State.FAILED, error=error[:2000])
        return
    if _set(job.pk, only=[DerivedJob.State.RUNNING], at=timezone.now() + timedelta(seconds=countdown),
            state=DerivedJob.State.QUEUED, error=error[:2000]):
        raise policy.RetryLater(error, countdown)


def _done(job: DerivedJob, note: str = "") -> None:
    _set(job.pk, state=DerivedJob.State.DONE, error=note)


def _still_mine(job: DerivedJob) -> bool:
    """Inside the write: the job is still this run's to finish (locked, not
    done by another delivery, its anchor not withdrawn by an edit)."""
    locked = DerivedJob.objects.select_for_update().filter(pk=job.pk, state=DerivedJob.State.RUNNING).first()
    return locked is not None and not Summary.objects.filter(job_id=job.pk).exists()


def _reply_tokens(profile) -> int:
    return max(SUMMARY_REPLY_MIN, min(SUMMARY_REPLY_TOKENS, window.effective_budget(profile) // 10))


def _ask(profile, messages: tuple[dict, ...]) -> str:
    """The model's whole reply to a summary request."""
    prompt_text = ""
    if profile.api_mode == profile.ApiMode.COMPLETIONS:
        prompt_text = "\n\n".join(m["content"] for m in messages) + "\n\nSummary:"
    return "".join(
        stream_reply(
            profile, messages=list(messages), prompt_text=prompt_text,
            temperature=SUMMARY_TEMPERATURE, max_tokens=_reply_tokens(profile),
        )
    )


def _profile(job: DerivedJob):
    profile = endpoint_for(job.campaign)
    if profile is None:
        raise _Unusable("No model endpoint is configured for this campaign, so nothing can be summarized.")
    return profile


def _stretch(job: DerivedJob) -> list[Action]:
    from .services import in_story

    start_depth = job.starts_after.depth if job.starts_after else -1
    actions = lineage.window(job.campaign_id, job.anchor_id, job.anchor.depth - start_depth)
    if job.starts_after and (not actions or actions[0].parent_id != job.starts_after_id):
        return []
    return [a for a in actions if in_story(a)]


def _capacity(profile) -> int:
    """Tokens a summary request may take: the turn's budget, minus the reply,
    priced as the prompt builder prices ours against the server's."""
    budget = window.effective_budget(profile)
    return int((budget - _reply_tokens(profile)) / token_scale(profile.token_ratio))


def _summarize(job: DerivedJob) -> None:
    profile = _profile(job)
    stretch = _stretch(job)
    if not stretch:
        _done(job, "Nothing left to summarize: the stretch is gone or empty.")
        return
    protagonist = job.campaign.persona_name
    request = summaries.summary_request(
        [records.HistoryAction(id=a.pk, kind=a.kind, text=a.text, tokens=a.token_count) for a in stretch],
        protagonist=protagonist, capacity=_capacity(profile), count=count_tokens,
    )
    reply = summaries.parse_reply(_ask(profile, request.messages))
    if not reply.text:
        raise _Unusable("The model returned an empty summary.")
    through = request.covered[-1].id
    with transaction.atomic():
        if not _still_mine(job):
            return
        summary = Summary.objects.create(
            campaign_id=job.campaign_id, starts_after_id=job.starts_after_id, covers_through_id=through,
            level=0, text=reply.text, token_count=count_tokens(reply.text), job=job,
        )
        facts = [
            Memory(campaign_id=job.campaign_id, anchor_id=through, summary=summary,
                   authority=Memory.Authority.INFERRED, text=fact, token_count=count_tokens(fact))
            for fact in reply.facts
        ]
        Memory.objects.bulk_create(facts)
        _done(job)
        _supersede(job, by=summary)
    _embed_or_note(job, summary.facts.all())
    _continue(job)


def _supersede(job: DerivedJob, *, by: Summary) -> None:
    """Earlier summary jobs from the same start that did not finish are
    settled by this one: the story has its summary from there, and their
    failures no longer concern the reader."""
    others = DerivedJob.objects.filter(
        campaign_id=job.campaign_id, kind=DerivedJob.Kind.SUMMARY, level=0, starts_after_id=job.starts_after_id,
    ).exclude(pk=job.pk).exclude(state=DerivedJob.State.DONE)
    others.update(state=DerivedJob.State.DONE, error=f"Superseded by summary #{by.pk}.", updated=timezone.now())


def _merge(job: DerivedJob) -> None:
    profile = _profile(job)
    ids = lineage.ids(job.campaign_id, job.anchor_id)
    start_depth = job.starts_after.depth if job.starts_after else -1
    parts = [
        p for p in summaries.chain(stored_summaries(job.campaign_id), ids)
        if p.through_depth > start_depth and p.level < job.level
    ]
    if len(parts) < 2 or parts[0].starts_after != job.starts_after_id or parts[-1].covers_through != job.anchor_id:
        _done(job, "The parts to merge changed; nothing was merged.")
        return
    reply = summaries.parse_reply(
        _ask(profile, summaries.merge_request(parts, protagonist=job.campaign.persona_name))
    )
    if not reply.text:
        raise _Unusable("The model returned an empty summary.")
    with transaction.atomic():
        if not _still_mine(job):
            return
        Summary.objects.create(
            campaign_id=job.campaign_id, starts_after_id=job.starts_after_id, covers_through_id=job.anchor_id,
            level=job.level, text=reply.text, token_count=count_tokens(reply.text), job=job,
        )
        _done(job)
    _continue(job)


def _continue(job: DerivedJob) -> None:
    """More may be due: the rest of a long stretch, or a merge."""
    campaign = Campaign.objects.filter(pk=job.campaign_id).select_related("head").first()
    if campaign is not None and campaign.head is not None:
        with transaction.atomic():
            schedule_summaries(campaign, position=campaign.head)


def _remember(job: DerivedJob) -> None:
    narration = job.anchor
    report = ContextSnapshot.objects.filter(action=narration).values_list("report", flat=True).first() or {}
    events = ((report.get("state_events") or {}).get("applied")) or []
    texts = recorded_memories.recorded(events, narration.state or {}, protagonist=job.campaign.persona_name)
    with transaction.atomic():
        if not _still_mine(job):
            return
        Memory.objects.filter(anchor=narration, authority=Memory.Authority.RECORDED).delete()
        made = Memory.objects.bulk_create(
            Memory(campaign_id=job.campaign_id, anchor=narration, authority=Memory.Authority.RECORDED,
                   text=text, token_count=count_tokens(text))
            for text in texts
        )
        _done(job)
    _embed_or_note(job, made)


def _embed_or_note(job: DerivedJob, memories) -> None:
    """Embeds the new memories when the campaign has an embedding model. A
    failure leaves them to lexical recall and says so on the job."""
    memories = [m for m in memories if m.pk]
    profile = profile_for(job.campaign)
    if profile is None or not memories:
        return
    try:
        vectors = list(embed(profile, [m.text for m in memories]))
    except (EmbeddingFailed, EmbeddingUnavailable) as exc:
        _done(job, f"Stored without vectors (recalled by their words only): {exc}")
        return
    model = model_of(profile)
    for memory, vector in zip(memories, vectors, strict=True):
        Memory.objects.filter(pk=memory.pk).update(embedding=vector, embedding_model=model)


# ------------------------------------------------- re-embedding on a model change

#: Memories embedded per request (the local backend batches on its own).
REEMBED_BATCH = 64


def memories_refresh(*, campaign_ids) -> list[int]:
    """Queues a re-embed for each campaign holding memories whose vectors
    came from a model other than its current one; returns their ids. Recall
    reads only vectors of the current model, so until then the others are
    recalled by their words."""
    queued = []
    for campaign in Campaign.objects.filter(pk__in=list(campaign_ids)).select_related("endpoint"):
        model = model_for(campaign)
        if model and Memory.objects.filter(campaign=campaign).exclude(embedding_model=model).exists():
            sending.send_on_commit(REEMBED, campaign.pk, robust=True)
            queued.append(campaign.pk)
    return queued


def memories_reembed(campaign_id: int) -> int:
    """Embeds the campaign's memories with its current model, a batch at a
    time; returns how many. Idempotent: only a memory still carrying another
    model's vector (or none) is written, so a second delivery does nothing.
    An endpoint failure propagates for the task to retry."""
    campaign = Campaign.objects.filter(pk=campaign_id).select_related("endpoint").first()
    profile = profile_for(campaign) if campaign is not None else None
    model = model_of(profile)
    if not model:
        return 0
    done = 0
    stale = Memory.objects.filter(campaign_id=campaign_id).exclude(embedding_model=model)
    while batch := list(stale.order_by("pk").values_list("pk", "text")[:REEMBED_BATCH]):
        vectors = list(embed(profile, [text for _, text in batch]))
        for (pk, _), vector in zip(batch, vectors, strict=True):
            Memory.objects.filter(pk=pk).exclude(embedding_model=model).update(embedding=vector, embedding_model=model)
        done += len(batch)
    return done
