"""Gathering what one turn's prompt is built from.

`contextbuild` never fetches, so this module reads the lineage window, the
state at the position, the previous narration's refusals and the endpoint's
settings, turns them into plain records, and hands them over.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from contextbuild import records, summaries
from contextbuild.builder import effective_budget as capped_budget
from contextbuild.tokens import count_tokens
from knowledge.embeddings import for_retrieval

from . import derived, lineage, modelclient, recall
from .models import Action, Campaign, ContextSnapshot, DerivedJob, EndpointProfile
from .services import current_state, in_story

log = logging.getLogger(__name__)


def campaign_record(campaign: Campaign) -> records.Campaign:
    return records.Campaign(
        title=campaign.title,
        narrator_prompt=campaign.narrator_prompt,
        ai_instructions=campaign.ai_instructions,
        plot_essentials=campaign.plot_essentials,
        authors_note=campaign.authors_note,
        persona=records.Persona(
            name=campaign.persona_name,
            pronouns=campaign.persona_pronouns,
            description=campaign.persona_description,
        ),
        narration_length=campaign.narration_length,
        canon_rules=tuple(campaign.canon_rules),
        forbidden_status_changes=tuple((c["from"], c["to"]) for c in campaign.forbidden_status_changes),
    )


def settings_record(
    profile: EndpointProfile, *, campaign: Campaign | None = None, budget: int | None = None
) -> records.ModelSettings:
    """The profile's settings, with the campaign's own temperature and reply
    length where the reader set them; the reply never exceeds what the
    profile allows."""
    temperature = profile.temperature
    max_output_tokens = profile.max_output_tokens
    if campaign is not None and campaign.temperature is not None:
        temperature = campaign.temperature
    if campaign is not None and campaign.max_output_tokens:
        max_output_tokens = min(campaign.max_output_tokens, profile.max_output_tokens)
    return records.ModelSettings(
        model=profile.chat_model,
        api_mode=profile.api_mode,
        temperature=temperature,
        max_output_tokens=max_output_tokens,
        context_token_budget=budget if budget is not None else profile.context_token_budget,
    )


#: Kept below a window the server named: our tokenizer (cl100k) undercounts
#: some models' tokens by a few percent.
LEARNED_WINDOW_MARGIN = 0.10
#: When the server refused a prompt without naming its window, the next
#: budget is this share of the one that overflowed; each refusal shrinks it.
OVERFLOW_SHRINK = 0.85


def learn_window(profile: EndpointProfile, *, told: int | None, budget: int) -> int:
    """Records what an overflow taught about the server's window: the size it
    named, or a budget smaller than the one that overflowed. Only ever
    lowers it, so the next turn (and Retry) fits. Returns the new limit."""
    limit = told if told else int(budget * OVERFLOW_SHRINK)
    current = EndpointProfile.objects.filter(pk=profile.pk).values_list("learned_window_tokens", flat=True).first()
    if current:
        limit = min(limit, current)
    EndpointProfile.objects.filter(pk=profile.pk).update(learned_window_tokens=limit)
    profile.learned_window_tokens = limit
    return limit


def probed(profile: EndpointProfile) -> EndpointProfile:
    """The profile with what its server says it accepts, asking the server
    only when nothing is cached (a new or re-saved profile, or one whose
    last turn failed)."""
    if profile.probed_at is None:
        store_probe(profile, modelclient.probe_window(profile))
    return profile


def store_probe(profile: EndpointProfile, found: modelclient.ServerWindow) -> None:
    profile.probed_window_tokens = found.tokens
    profile.probed_window_source = found.source[:100]
    profile.probed_window_detail = found.detail[:300]
    profile.probed_at = timezone.now()
    EndpointProfile.objects.filter(pk=profile.pk).update(
        probed_window_tokens=found.tokens, probed_window_source=profile.probed_window_source,
        probed_window_detail=profile.probed_window_detail, probed_at=profile.probed_at,
    )


def forget_probe(profile: EndpointProfile) -> None:
    """Asks the server again before the next turn: it failed, or it changed."""
    EndpointProfile.objects.filter(pk=profile.pk).update(probed_at=None)
    profile.probed_at = None


def window_for(profile: EndpointProfile) -> records.Window | None:
    """What is known of the server's window: what it said when probed, and
    what an overflow taught (kept a margin below it), the smaller winning;
    None when nothing is known. A probe that found nothing is recorded as
    unverified, so the report says the window was asked for and not given."""
    known = []
    if profile.probed_window_tokens:
        known.append(records.Window(
            verified=True, tokens=profile.probed_window_tokens,
            source=profile.probed_window_source, detail=profile.probed_window_detail,
        ))
    if profile.learned_window_tokens:
        learned = profile.learned_window_tokens
        known.append(records.Window(
            verified=True,
            tokens=int(learned * (1 - LEARNED_WINDOW_MARGIN)),
            source="the server's overflow error",
            detail=f"the server refused a longer prompt; its window is {learned:,} tokens, "
            f"budgeted {int(LEARNED_WINDOW_MARGIN * 100)} % below it",
        ))
    if known:
        return min(known, key=lambda w: w.tokens)
    if profile.probed_at is not None:
        return records.Window(
            verified=False, tokens=None, source=profile.probed_window_source or "unknown",
            detail=profile.probed_window_detail or "the server does not say what it accepts",
        )
    return None


def effective_budget(profile: EndpointProfile, campaign: Campaign) -> int:
    """The budget a prompt really has: the setting, capped by a verified
    window (as the builder caps it). Derived work sizes itself by this, so
    a summary made for an 8,192 setting never fills a 2,048 window."""
    return capped_budget(settings_record(profile, campaign=campaign).context_token_budget, window_for(profile))


#: How fast the recorded ratio follows a new measurement downwards; upwards
#: it follows at once, since undercounting is what overflows a window.
RATIO_SMOOTHING = 0.3


def record_token_ratio(profile: EndpointProfile, *, ours: int, servers: int) -> float | None:
    """Stores the server's prompt tokens per one of ours, as measured on this
    turn. Returns the measured ratio (None for a count too small to tell)."""
    if ours < 50 or servers <= 0:
        return None
    measured = servers / ours
    current = EndpointProfile.objects.filter(pk=profile.pk).values_list("token_ratio", flat=True).first()
    ratio = measured if not current else max(measured, (1 - RATIO_SMOOTHING) * current + RATIO_SMOOTHING * measured)
    EndpointProfile.objects.filter(pk=profile.pk).update(token_ratio=round(ratio, 4))
    profile.token_ratio = round(ratio, 4)
    return round(measured, 4)


def history_anchor(narration: Action | None):
    """The first history action of the last narration's prompt (see
    contextbuild's `_fit_history`), or None."""
    if narration is None:
        return None
    # Only the one key: a report holds the whole prompt.
    anchor = ContextSnapshot.objects.filter(action=narration).values_list("report__history__anchor", flat=True).first()
    return anchor if isinstance(anchor, (int, str)) and not isinstance(anchor, bool) else None


def turn_inputs(
    campaign: Campaign,
    profile: EndpointProfile,
    *,
    position: Action | None,
    player_text: str = "",
    budget: int | None = None,
    with_knowledge: bool = True,
) -> records.TurnInputs:
    """The inputs for a narration that continues the lineage ending at `position`.

    `player_text` is a reader's action not yet stored (the `build_context`
    command's preview); a stored turn's player action is already the position.
    `with_knowledge=False` skips retrieval, for measuring the rest alone.
    """
    known = window_for(profile)
    settings = settings_record(profile, campaign=campaign, budget=budget)
    window = lineage.window_covering(
        campaign.pk, position.pk if position else None, settings.context_token_budget
    )
    history = tuple(
        records.HistoryAction(id=a.pk, kind=a.kind, text=a.text, tokens=a.token_count)
        for a in window
        if in_story(a)
    )
    last_narration = next((a for a in reversed(window) if a.kind == Action.Kind.AI and in_story(a)), None)
    refusals = tuple(str(r) for r in (last_narration.state_rejections if last_narration else []) or [])
    state = current_state(campaign, position)
    anchor = history_anchor(last_narration)
    # Derived work exists only once a turn has finished; until then the
    # lineage walk below it would be wasted.
    has_derived = position is not None and DerivedJob.objects.filter(campaign=campaign).exists()
    lineage_ids = lineage.ids(campaign.pk, position.pk) if has_derived else frozenset()
    query = query_inputs(campaign, position=position, state=state, player_text=player_text)
    search = for_retrieval(profile)
    search["embed_query"] = recall.remembering(search["embed_query"])
    return records.TurnInputs(
        campaign=campaign_record(campaign),
        settings=settings,
        history=history,
        history_total=(position.depth + 1 if position else 0) + (1 if player_text.strip() else 0),
        player_text=player_text.strip(),
        summary=(
            summaries.as_prompt_summary(
                derived.summary_chain(campaign.pk, lineage_ids),
                limit_tokens=int(effective_budget(profile, campaign) * summaries.PROMPT_SHARE), count=count_tokens,
            )
            if has_derived else None
        ),
        memories=(
            memories_for(campaign, query, search, lineage_ids=lineage_ids,
                         before_depth=_replayed_from(anchor, window))
            if has_derived and with_knowledge else ()
        ),
        knowledge=knowledge_for(campaign, query, search) if with_knowledge else None,
        narrative_state=state,
        state_refusals=refusals,
        window=known,
        derived=tuple(n.as_record() for n in derived.notices(campaign.pk, lineage_ids)) if has_derived else (),
        token_ratio=profile.token_ratio,
        history_anchor=anchor,
    )


def _replayed_from(anchor, window: list[Action]) -> int:
    """The depth from which the prompt replays the story: the last prompt's
    history anchor, or (with none yet) the oldest action that could fit.
    Memories from there on would repeat what the history says."""
    depths = {a.pk: a.depth for a in window}
    if anchor in depths:
        return depths[anchor]
    return window[0].depth if window else 0


def query_inputs(campaign: Campaign, *, position: Action | None, state: dict, player_text: str = ""):
    """The retrieval query's inputs, as plain values: the state at the
    position, the newest lineage actions' texts (through `lineage`, so an
    undone branch never reaches the query) and the persona's name."""
    from knowledge.query import QUERY_ACTIONS, QueryInputs

    tail = lineage.tail(campaign.pk, position.pk if position else None, QUERY_ACTIONS)
    # Bounded to the query's token budget as a whole by knowledge.query.
    texts = [a.text for a in tail if in_story(a)]
    return QueryInputs.build(
        state=state,
        recent=texts,
        persona_name=campaign.persona_name,
        player_text=player_text.strip(),
    )


def knowledge_for(campaign: Campaign, query, search: dict) -> records.KnowledgeResult:
    """The campaign library's passages for this turn. Never fails the turn:
    an endpoint failure is already a note on the result, and anything else
    is logged and reported as a note with nothing supplied."""
    from knowledge.retrieval import retrieve

    # A savepoint only inside a transaction (a failed statement would poison
    # it); outside one, an atomic block would take SQLite's write lock for a read.
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    try:
        with guard:
            return retrieve(campaign_id=campaign.pk, query=query, **search)
    except DatabaseError as exc:
        log.exception("Retrieval failed for campaign %s", campaign.pk)
        return records.KnowledgeResult(
            semantic_note=f"Retrieval failed this turn ({type(exc).__name__}); nothing was supplied."
        )


def memories_for(campaign: Campaign, query, search: dict, *, lineage_ids, before_depth: int):
    """This lineage's memories for the turn, searched with lore's query and
    query vector (made once: `recall.remembering`). Like lore, never fails
    the turn."""
    from knowledge.query import assemble
    from knowledge.retrieval import semantic_floor

    assembled = assemble(query)
    vector = None
    if search["embed_query"] is not None and assembled.semantic_text.strip():
        vector, _ = search["embed_query"](assembled.semantic_text)
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    try:
        with guard:
            return recall.memories_for(
                campaign.pk, lineage_ids=lineage_ids, before_depth=before_depth, query=assembled,
                query_vector=vector, embedding_model=search["embedding_model"],
                floor=semantic_floor(search["embedding_model"]),
            )
    except DatabaseError:
        log.exception("Memory recall failed for campaign %s", campaign.pk)
        return ()
