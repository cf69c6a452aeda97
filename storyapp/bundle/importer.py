"""Storing a checked bundle as a new campaign, in one transaction, and
indexing its sources afterwards (here, or by the workers)."""

from __future__ import annotations

from django.db import transaction

from contextbuild.tokens import count_tokens
from knowledge import services as knowledge

from .. import campaigns, derivedjobs
from . import BundleError
from ..models import Action, Campaign, ContextSnapshot, DerivedJob, Memory, Summary
from .validate import validate


def import_bundle(bundle, *, owner) -> Campaign:
    """Creates the campaign; nothing is written unless the whole bundle is
    valid and the owner has room for it (quotas.OverQuota).

    Sources are stored unindexed here; the caller indexes them (see
    `import_and_index`), because indexing may call an embedding endpoint and
    must not hold the import's transaction open.
    """
    plan = validate(bundle)
    with transaction.atomic():
        campaigns.campaign_room(owner)
        return _write(plan, owner)


def _write(plan: dict, owner) -> Campaign:
    campaign = Campaign.objects.create(owner=owner, **plan["campaign"])
    created: dict[str, Action] = {}
    for ref, item in plan["actions"].items():
        parent = created.get(item.parent) if item.parent else None
        state = item.state if item.state is not None else (parent.state if parent is not None else plan["state"])
        created[ref] = Action.objects.create(
            campaign=campaign, parent=parent, depth=parent.depth + 1 if parent else 0, kind=item.kind,
            text=item.text, token_count=count_tokens(item.text), state=state, seat_name=item.seat_name,
        )
    if plan["head"] is not None:
        campaign.head = created[plan["head"]]
        campaign.save(update_fields=["head"])
    for source in plan["sources"]:
        options = {
            "campaign": campaign, "filename": source["filename"], "title": source["title"],
            "classification": source["classification"], "visibility": source["visibility"],
            "always_include": source["always_include"], "enabled": source["enabled"], "enqueue": False,
            "secret_seat": source["secret_seat"],
        }
        try:
            if source["book"] is not None:
                book = knowledge.lorebook_create(book=source["book"], metadata=source["metadata"], **options)
                _keep_entry_secrets(book, source["entry_secrets"])
            else:
                knowledge.source_create(text=source["text"], **options)
        except knowledge.DuplicateSource:
            continue  # the same text twice in one bundle: one source carries it
        except knowledge.ImportRefused as exc:
            raise BundleError(str(exc)) from exc  # a regex-key limit: nothing of the bundle is kept
    ContextSnapshot.objects.bulk_create(
        ContextSnapshot(
            action=created[s["action"]], report=s["report"], system_text=s["system"], story_text=s["story"],
            messages=s["messages"],
        )
        for s in plan["snapshots"]
    )
    _write_long_memory(campaign, plan, created)
    return campaign


def _keep_entry_secrets(book, secrets: dict[int, str]) -> None:
    """Makes each secret entry of the stored book known to its seat alone
    again; the book's entries are stored in the bundle's order."""
    by_seat: dict[str, list[int]] = {}
    for position, seat in secrets.items():
        by_seat.setdefault(seat, []).append(position)
    for seat, positions in by_seat.items():
        book.entries.filter(position__in=positions).update(secret_seat=seat)


def _write_long_memory(campaign: Campaign, plan: dict, created: dict[str, Action]) -> None:
    """Stores the summaries and memories on the new actions, each with its
    derived job marked done: the job's key is what the scheduler asks for,
    so the work is not redone, and the prompt looks for derived work only
    in a campaign that has jobs."""
    summaries: dict[str, Summary] = {}
    linked: set[int] = set()  # a job makes one summary; a repeated stretch keeps the first link
    for ref, item in plan["summaries"].items():
        start = created[item["starts_after"]] if item["starts_after"] else None
        job = _done_job(campaign, DerivedJob.Kind.SUMMARY, anchor=created[item["covers_through"]], start=start,
                        level=item["level"])
        summaries[ref] = Summary.objects.create(
            campaign=campaign, starts_after=start, covers_through=created[item["covers_through"]],
            level=item["level"], text=item["text"], token_count=count_tokens(item["text"]),
            job=None if job.pk in linked else job,
        )
        linked.add(job.pk)
    for item in plan["memories"]:
        anchor = created[item["anchor"]]
        if item["authority"] == Memory.Authority.RECORDED:
            _done_job(campaign, DerivedJob.Kind.MEMORIES, anchor=anchor)
        Memory.objects.create(
            campaign=campaign, anchor=anchor, summary=summaries.get(item["summary"] or ""),
            authority=item["authority"], text=item["text"], token_count=count_tokens(item["text"]),
        )


def _done_job(campaign: Campaign, kind: str, *, anchor: Action, start: Action | None = None, level: int = 0):
    job, _ = DerivedJob.objects.get_or_create(
        key=derivedjobs.job_key(kind, anchor.pk, start.pk if start else None, level),
        defaults={"campaign": campaign, "kind": kind, "anchor": anchor, "starts_after": start, "level": level,
                  "state": DerivedJob.State.DONE},
    )
    return job


def import_and_index(bundle, *, owner) -> Campaign:
    """Imports the bundle, then indexes its sources in this process (no worker
    needed); returns once every source is ready or failed."""
    campaign = import_bundle(bundle, owner=owner)
    for source in campaign.sources.order_by("id"):
        knowledge.source_index_now(source)
    return campaign


def import_and_queue(bundle, *, owner) -> Campaign:
    """Imports the bundle and queues its sources for the workers to index
    (the web import: the request returns at once)."""
    campaign = import_bundle(bundle, owner=owner)
    for source in campaign.sources.order_by("id"):
        knowledge.source_reindex(source=source)
    return campaign
