"""A campaign as a version 1 bundle: its settings, the finished part of its
action tree and head, its sources, snapshots and long memory."""

from __future__ import annotations

from knowledge.lorebooks.stored import expand

from ..models import Action, Campaign, ContextSnapshot, Membership, Memory, Summary
from . import FORMAT, VERSION


def export(campaign: Campaign) -> dict:
    actions = list(Action.objects.filter(campaign=campaign).order_by("depth", "id"))
    kept = _exportable(actions)
    head = Action.objects.filter(pk=campaign.head_id).first()
    while head is not None and head.pk not in kept:
        head = head.parent
    sources = campaign.sources.order_by("id")
    snapshots = ContextSnapshot.objects.filter(action__campaign=campaign, action_id__in=kept).order_by("action_id")
    return {
        "format": FORMAT,
        "version": VERSION,
        "campaign": {
            "title": campaign.title,
            "narrator_prompt": campaign.narrator_prompt,
            "ai_instructions": campaign.ai_instructions,
            "plot_essentials": campaign.plot_essentials,
            "authors_note": campaign.authors_note,
            "persona": {
                "name": campaign.persona_name,
                "pronouns": campaign.persona_pronouns,
                "description": campaign.persona_description,
            },
            "narration_length": campaign.narration_length,
            "canon": {"rules": campaign.canon_rules, "forbidden_status_changes": campaign.forbidden_status_changes},
        },
        "seats": _seats(campaign),
        "narrative_state": campaign.state_at(head),
        "actions": [
            {
                "id": _ref(a.pk),
                "parent": _ref(a.parent_id) if a.parent_id else None,
                "kind": a.kind,
                "text": a.text,
                "seat_name": a.seat_name,
                "state": a.state,
            }
            for a in actions
            if a.pk in kept
        ],
        "head": _ref(head.pk) if head is not None else None,
        "sources": [
            {
                "title": s.title,
                "filename": s.original_filename,
                "classification": s.classification,
                "visibility": s.visibility,
                "always_include": s.always_include,
                "enabled": s.enabled,
                **({"secret_seat": s.secret_seat} if s.secret_seat else {}),
                "text": s.content,
                **({"lorebook": _lorebook(s)} if s.is_lorebook else {}),
            }
            for s in sources
        ],
        "snapshots": [
            {
                "action": _ref(s.action_id), "report": s.report, "system": s.system_text, "story": s.story_text,
                "messages": s.messages,
            }
            for s in snapshots
        ],
        **_long_memory(campaign, kept),
    }


def _seats(campaign: Campaign) -> list[dict]:
    """The campaign's seats as text: its members' (never who holds them) and
    those an earlier import brought that no member holds now."""
    seats = [
        {"name": name, "description": description, "role": role}
        for name, description, role in Membership.objects.filter(campaign=campaign).exclude(seat_name="")
        .values_list("seat_name", "seat_description", "role")
    ]
    held = {seat["name"] for seat in seats}
    return seats + [dict(seat) for seat in campaign.imported_seats if seat.get("name") not in held]


def _ref(pk: int) -> str:
    return f"a{pk}"


def _summary_ref(pk: int) -> str:
    return f"s{pk}"


def _long_memory(campaign: Campaign, kept: set[int]) -> dict:
    """The summaries and memories of the exported actions; one whose anchor
    (or whose summary) is not exported has nothing to be anchored to."""
    summaries = [
        s for s in Summary.objects.filter(campaign=campaign).order_by("covers_through__depth", "level", "id")
        if s.covers_through_id in kept and (s.starts_after_id is None or s.starts_after_id in kept)
    ]
    exported = {s.pk for s in summaries}
    memories = [
        m for m in Memory.objects.filter(campaign=campaign).order_by("id")
        if m.anchor_id in kept and (m.summary_id is None or m.summary_id in exported)
    ]
    return {
        "summaries": [
            {
                "id": _summary_ref(s.pk), "starts_after": _ref(s.starts_after_id) if s.starts_after_id else None,
                "covers_through": _ref(s.covers_through_id), "level": s.level, "text": s.text,
            }
            for s in summaries
        ],
        "memories": [
            {
                "anchor": _ref(m.anchor_id), "authority": m.authority, "text": m.text,
                "summary": _summary_ref(m.summary_id) if m.summary_id else None,
            }
            for m in memories
        ],
    }


def _exportable(actions: list[Action]) -> set[int]:
    """Finished actions whose ancestors are all finished: a failed or
    unfinished narration is not part of any story worth carrying over."""
    kept: set[int] = set()
    for action in actions:  # parents come first: ordered by depth
        finished = action.status in (Action.Status.DONE, Action.Status.STOPPED) and action.text.strip()
        if finished and (action.parent_id is None or action.parent_id in kept):
            kept.add(action.pk)
    return kept


def _lorebook(source) -> dict:
    """A lorebook source's entries and what its file kept: an optional key,
    additive to version 1, so a book comes back with its keys and flags
    (and an entry known to one seat alone with that seat)."""
    return {
        "format": source.format,
        "metadata": source.metadata,
        "entries": [
            {
                "title": e.title, "text": e.text, "keys": e.keys, "secondary_keys": e.secondary_keys,
                "regex_keys": e.regex_keys, "enabled": e.enabled, "constant": e.constant, "extras": expand(e.extras),
                **({"secret_seat": e.secret_seat} if e.secret_seat else {}),
            }
            for e in source.entries.order_by("position")
        ],
    }
