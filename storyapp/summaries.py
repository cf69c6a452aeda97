"""Summaries of the story that fell out of the prompt's history window.

When enough of the lineage has dropped out of the window a summary job
covers it, and when the chain of summaries outgrows its share of the budget
a merge job folds them into one of a higher level (contextbuild.summaries
holds the rules; this module stores, schedules and asks the model).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from contextbuild import instruct
from contextbuild import summaries as summary_rules
from contextbuild.builder import token_scale
from contextbuild.tokens import count_tokens
from endpoints import reasoning, samplers, slots, window
from endpoints.models import EndpointLease
from endpoints.client import endpoint_for
from endpoints.streaming import stream_reply

from . import derivedjobs, lineage, memories, modelprose
from .models import Action, Campaign, ContextSnapshot, DerivedJob, Memory, Summary

#: The longest summary reply asked for (a summary of 150-220 words fits),
#: and the least: at a tenth of the budget in between, so a small window is
#: not filled by its own summaries.
SUMMARY_REPLY_TOKENS = 400


SUMMARY_REPLY_MIN = 160


#: A summary's sampling: faithful rather than inventive.
SUMMARY_TEMPERATURE = 0.3


def stored_summaries(campaign_id: int) -> list[summary_rules.StoredSummary]:
    rows = Summary.objects.filter(campaign_id=campaign_id).values_list(
        "id", "starts_after_id", "covers_through_id", "covers_through__depth", "level", "text", "token_count"
    )
    return [summary_rules.StoredSummary(*row) for row in rows]


def summary_chain(campaign_id: int, lineage_ids) -> tuple[summary_rules.StoredSummary, ...]:
    return summary_rules.chain(stored_summaries(campaign_id), lineage_ids)


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


def schedule(campaign: Campaign, *, position: Action) -> None:
    """Queues a merge when the chain outgrew its share of the budget, and a
    summary when enough of the lineage fell out of the window (see
    `contextbuild.summaries.due`); both positions are read off the tree, so an undo
    rewinds them."""
    ids = lineage.ids(campaign.pk, position.pk)
    picked = summary_rules.chain(stored_summaries(campaign.pk), ids)
    profile = endpoint_for(campaign)
    if profile is None:
        return
    budget = window.effective_budget(profile)
    plan = summary_rules.merge_plan(picked, limit_tokens=int(budget * summary_rules.CHAIN_SHARE))
    if plan:
        derivedjobs.enqueue(derivedjobs.job_for(campaign.pk, DerivedJob.Kind.SUMMARY, anchor_id=plan[-1].covers_through,
                      start_id=plan[0].starts_after, level=max(p.level for p in plan) + 1))
    dropped = _dropped_through(position)
    summarized = picked[-1] if picked else None
    if dropped is None or dropped.pk not in ids:
        return
    if summary_rules.due(summarized_depth=summarized.through_depth if summarized else None,
                     dropped_through_depth=dropped.depth):
        if _in_progress(campaign.pk, start_id=summarized.covers_through if summarized else None):
            return
        derivedjobs.enqueue(derivedjobs.job_for(campaign.pk, DerivedJob.Kind.SUMMARY, anchor_id=dropped.pk,
                      start_id=summarized.covers_through if summarized else None))


def _in_progress(campaign_id: int, *, start_id: int | None) -> bool:
    """Whether a summary from this start is already queued or running: it
    will cover what fits and schedule the rest."""
    now = timezone.now()
    in_flight = DerivedJob.objects.in_flight().filter(
        campaign_id=campaign_id, kind=DerivedJob.Kind.SUMMARY, level=0, starts_after_id=start_id,
    )
    return in_flight.exclude(pk__in=in_flight.stale(now).values("pk")).exists()


def _reply_tokens(profile) -> int:
    return max(SUMMARY_REPLY_MIN, min(SUMMARY_REPLY_TOKENS, window.effective_budget(profile) // 10))


def _ask(profile, messages: tuple[dict, ...], campaign: Campaign) -> str:
    """The model's whole reply to a summary request, without its thinking:
    in the narrations' template and samplers, at the summaries' own temperature."""
    prompt_text = ""
    if profile.api_mode == profile.ApiMode.COMPLETIONS and profile.template_name == instruct.PLAIN:
        # A base model continues a document: it is asked for the summary by its label.
        prompt_text = "\n\n".join(m["content"] for m in messages) + "\n\nSummary:"
    elif profile.api_mode == profile.ApiMode.COMPLETIONS:
        prompt_text = instruct.render(list(messages), profile.template_name)
    # After the narrations: a one-slot server serves the reader first.
    with slots.held(profile, EndpointLease.Kind.DERIVED):
        return reasoning.visible("".join(
            stream_reply(
                profile, messages=list(messages), prompt_text=prompt_text,
                temperature=SUMMARY_TEMPERATURE, max_tokens=_reply_tokens(profile),
                samplers=samplers.chosen(profile.samplers, campaign.sampler_overrides),
                prompt_tokens=count_tokens(prompt_text or "\n".join(m["content"] for m in messages)),
            )
        ))


def _stretch(job: DerivedJob) -> list[Action]:
    start_depth = job.starts_after.depth if job.starts_after else -1
    actions = lineage.window(job.campaign_id, job.anchor_id, job.anchor.depth - start_depth)
    if job.starts_after and (not actions or actions[0].parent_id != job.starts_after_id):
        return []
    return [a for a in actions if a.in_story]


def _capacity(profile) -> int:
    """Tokens a summary request may take: the turn's budget, minus the reply,
    priced as the prompt builder prices ours against the server's."""
    budget = window.effective_budget(profile)
    return int((budget - _reply_tokens(profile)) / token_scale(profile.token_ratio))


def summarize(job: DerivedJob) -> None:
    profile = derivedjobs.campaign_profile(job)
    stretch = _stretch(job)
    if not stretch:
        derivedjobs.done(job, "Nothing left to summarize: the stretch is gone or empty.")
        return
    protagonist = job.campaign.persona_name
    request = summary_rules.summary_request(
        [modelprose.history_record(a) for a in stretch],
        protagonist=protagonist, capacity=_capacity(profile), count=count_tokens,
    )
    reply = summary_rules.parse_reply(_ask(profile, request.messages, job.campaign))
    if not reply.text:
        raise derivedjobs.Unusable("The model returned an empty summary.")
    through = request.covered[-1].id
    with transaction.atomic():
        if not derivedjobs.still_mine(job):
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
        derivedjobs.done(job)
        _supersede(job, by=summary)
    memories.embed_or_note(job, summary.facts.all())
    _continue(job)


def _supersede(job: DerivedJob, *, by: Summary) -> None:
    """Earlier summary jobs from the same start that did not finish are
    settled by this one: the story has its summary from there, and their
    failures no longer concern the reader."""
    others = DerivedJob.objects.filter(
        campaign_id=job.campaign_id, kind=DerivedJob.Kind.SUMMARY, level=0, starts_after_id=job.starts_after_id,
    ).exclude(pk=job.pk).exclude(state=DerivedJob.State.DONE)
    others.update(state=DerivedJob.State.DONE, error=f"Superseded by summary #{by.pk}.", updated=timezone.now())


def merge(job: DerivedJob) -> None:
    profile = derivedjobs.campaign_profile(job)
    ids = lineage.ids(job.campaign_id, job.anchor_id)
    start_depth = job.starts_after.depth if job.starts_after else -1
    parts = [
        p for p in summary_rules.chain(stored_summaries(job.campaign_id), ids)
        if p.through_depth > start_depth and p.level < job.level
    ]
    if len(parts) < 2 or parts[0].starts_after != job.starts_after_id or parts[-1].covers_through != job.anchor_id:
        derivedjobs.done(job, "The parts to merge changed; nothing was merged.")
        return
    reply = summary_rules.parse_reply(
        _ask(profile, summary_rules.merge_request(parts, protagonist=job.campaign.persona_name), job.campaign)
    )
    if not reply.text:
        raise derivedjobs.Unusable("The model returned an empty summary.")
    with transaction.atomic():
        if not derivedjobs.still_mine(job):
            return
        Summary.objects.create(
            campaign_id=job.campaign_id, starts_after_id=job.starts_after_id, covers_through_id=job.anchor_id,
            level=job.level, text=reply.text, token_count=count_tokens(reply.text), job=job,
        )
        derivedjobs.done(job)
    _continue(job)


def _continue(job: DerivedJob) -> None:
    """More may be due: the rest of a long stretch, or a merge."""
    campaign = Campaign.objects.filter(pk=job.campaign_id).select_related("head").first()
    if campaign is not None and campaign.head is not None:
        with transaction.atomic():
            schedule(campaign, position=campaign.head)
