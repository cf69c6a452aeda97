"""Gathering what one turn's prompt is built from.

`contextbuild` never fetches, so this module reads the lineage window, the
state at the position, the previous narration's refusals and the endpoint's
settings, turns them into plain records, and hands them over.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext

from django.db import DatabaseError, connection, transaction

from contextbuild import records, smallwindow, summaries
from contextbuild.builder import effective_budget
from contextbuild.tokens import count_tokens
from endpoints import samplers
from endpoints import window as server_window
from endpoints.embeddings import for_retrieval
from endpoints.models import EndpointProfile
from knowledge.query import QUERY_ACTIONS, Query, QueryInputs, assemble
from knowledge.retrieval import retrieve, semantic_floor
from knowledge.selectors import library_stamp, seat_secrets

from . import derivedjobs, lineage, modelprose, recall, selectors, worldinfo_turn
from .summaries import summary_chain
from .models import Action, Campaign, ContextSnapshot, DerivedJob, Whisper

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
        cast=cast(campaign),
        director_note=campaign.director_note,
    )


def cast(campaign: Campaign) -> tuple[records.Seat, ...]:
    """Who is at a shared story's table: each player's seat, then the game
    master's persona if they play one. Empty while the story has no
    players, so a lone reader's prompt is as it always was."""
    seats = tuple(records.Seat(name=name, description=description) for name, description in selectors.seats(campaign))
    if seats and campaign.persona_name.strip():
        # Described in the persona section already.
        seats += (records.Seat(name=campaign.persona_name, game_master=True),)
    return seats


def settings_record(
    profile: EndpointProfile, *, campaign: Campaign | None = None, budget: int | None = None
) -> records.ModelSettings:
    """The profile's settings, with the campaign's own temperature and reply
    length where the reader set them; the reply never exceeds what the
    profile allows, nor what a small window affords."""
    temperature = profile.temperature
    max_output_tokens = profile.max_output_tokens
    if campaign is not None and campaign.temperature is not None:
        temperature = campaign.temperature
    if campaign is not None and campaign.max_output_tokens:
        max_output_tokens = min(campaign.max_output_tokens, profile.max_output_tokens)
    window_budget = effective_budget(budget if budget is not None else profile.context_token_budget,
                                  server_window.window_for(profile))
    return records.ModelSettings(
        model=profile.chat_model,
        api_mode=profile.api_mode,
        temperature=temperature,
        # A small window affords a shorter reply, so the story keeps its share (contextbuild.smallwindow).
        max_output_tokens=smallwindow.reply_cap(max_output_tokens, window_budget),
        configured_max_output_tokens=max_output_tokens,
        context_token_budget=budget if budget is not None else profile.context_token_budget,
        instruct_template=profile.template_name,
        reasoning_reserve=profile.reasoning_reserve_tokens,
        samplers=samplers.chosen(profile.samplers, campaign.sampler_overrides if campaign is not None else None),
    )


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
    narrating: Action | None = None,
) -> records.TurnInputs:
    """The inputs for a narration that continues the lineage ending at `position`.

    `player_text` is a reader's action not yet stored (the `build_context`
    command's preview); a stored turn's player action is already the position.
    `narrating` is the narration being written (None for a preview): its
    World Info rolls are seeded by how many narrations the position has
    besides it. `with_knowledge=False` skips retrieval and World Info, for
    measuring the rest alone.
    """
    known = server_window.window_for(profile)
    settings = settings_record(profile, campaign=campaign, budget=budget)
    window = lineage.window_covering(
        campaign.pk, position.pk if position else None, settings.context_token_budget
    )
    record = campaign_record(campaign)
    # At a shared table the game master's seat-less actions are its persona's.
    unseated = campaign.persona_name.strip() if record.cast else ""
    history = tuple(modelprose.history_record(a, unseated=unseated) for a in window if a.in_story)
    last_narration = next((a for a in reversed(window) if a.kind == Action.Kind.AI and a.in_story), None)
    refusals = tuple(str(r) for r in (last_narration.state_rejections if last_narration else []) or [])
    state = campaign.state_at(position)
    anchor = history_anchor(last_narration)
    # Derived work exists only once a turn has finished; until then the
    # lineage walk below it would be wasted.
    has_derived = position is not None and DerivedJob.objects.filter(campaign=campaign).exists()
    lineage_ids = lineage.ids(campaign.pk, position.pk) if has_derived else frozenset()
    query = query_inputs(campaign, position=position, state=state, player_text=player_text, window=window)
    search = for_retrieval(profile)
    search["embed_query"] = recall.remembering(search["embed_query"])
    # Read once for the turn's retrieval, lorebooks and secrets; the query
    # assembled once for lore and memories.
    library = library_stamp(campaign.pk) if with_knowledge else None
    assembled = assemble(query) if with_knowledge else None
    knowledge = knowledge_for(campaign, query, search, library, assembled) if with_knowledge else None
    lore = (
        worldinfo_turn.world_info_for(
            campaign, position=position, window=window, state=state, narrating=narrating,
            player_text=player_text, budget_tokens=effective_budget(settings.context_token_budget, known),
            by_meaning=knowledge.lore_by_meaning, library=library,
        )
        if with_knowledge else worldinfo_turn.TurnWorldInfo()
    )
    return records.TurnInputs(
        campaign=record,
        settings=settings,
        history=history,
        history_total=(position.depth + 1 if position else 0) + (1 if player_text.strip() else 0),
        player_text=player_text.strip(),
        summary=(
            summaries.as_prompt_summary(
                summary_chain(campaign.pk, lineage_ids),
                limit_tokens=int(server_window.effective_budget(profile) * summaries.PROMPT_SHARE), count=count_tokens,
            )
            if has_derived else None
        ),
        memories=(
            memories_for(campaign, assembled, search, lineage_ids=lineage_ids,
                         before_depth=_replayed_from(anchor, window))
            if has_derived and with_knowledge else ()
        ),
        knowledge=knowledge,
        world_info=lore.result,
        world_info_titles=lore.titles or {},
        world_info_hidden=lore.hidden,
        secrets=secrets_for(campaign, library),
        narrative_state=state,
        state_refusals=refusals,
        window=known,
        derived=tuple(n.as_record() for n in derivedjobs.notices(campaign.pk, lineage_ids)) if has_derived else (),
        token_ratio=profile.token_ratio,
        history_anchor=anchor,
    )


def secrets_for(campaign: Campaign, library: tuple[tuple, frozenset] | None = None) -> tuple[records.Secret, ...]:
    """What each seat alone knows: the game master's whispers, newest
    first, then the library's secrets (knowledge.selectors.seat_secrets;
    `library` is its stamp this turn, when read already)."""
    whispers = Whisper.objects.filter(campaign=campaign).values_list("seat_name", "text")
    return (
        *(records.Secret(seat=seat, text=text, origin="whisper") for seat, text in whispers),
        *seat_secrets(campaign.pk, stamp=library),
    )


def _replayed_from(anchor, window: list[Action]) -> int:
    """The depth from which the prompt replays the story: the last prompt's
    history anchor, or (with none yet) the oldest action that could fit.
    Memories from there on would repeat what the history says."""
    depths = {a.pk: a.depth for a in window}
    if anchor in depths:
        return depths[anchor]
    return window[0].depth if window else 0


def query_inputs(
    campaign: Campaign, *, position: Action | None, state: dict, player_text: str = "",
    window: list[Action] | None = None,
):
    """The retrieval query's inputs, as plain values: the state at the
    position, the newest lineage actions' texts (through `lineage`, so an
    undone branch never reaches the query; from the turn's `window` when it
    holds them) and the persona's name."""
    tail = lineage.tail(campaign.pk, position.pk if position else None, QUERY_ACTIONS, within=window)
    # Bounded to the query's token budget as a whole by knowledge.query.
    texts = [modelprose.text_for_model(a) for a in tail if a.in_story]
    return QueryInputs.build(
        state=state,
        recent=texts,
        persona_name=campaign.persona_name,
        player_text=player_text.strip(),
    )


def knowledge_for(
    campaign: Campaign, query, search: dict, library: tuple[tuple, frozenset] | None = None,
    assembled: Query | None = None,
) -> records.KnowledgeResult:
    """The campaign library's passages for this turn (`library`: its stamp,
    selectors.library_stamp, and `assembled` the query assembled, when the
    turn has them already). Never fails the turn:
    an endpoint failure is already a note on the result, and anything else
    is logged and reported as a note with nothing supplied."""
    # A savepoint only inside a transaction (a failed statement would poison
    # it); outside one, an atomic block would take SQLite's write lock for a read.
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    try:
        with guard:
            return retrieve(campaign_id=campaign.pk, query=query, stamp=library, assembled=assembled, **search)
    except DatabaseError as exc:
        log.exception("Retrieval failed for campaign %s", campaign.pk)
        return records.KnowledgeResult(
            semantic_note=f"Retrieval failed this turn ({type(exc).__name__}); nothing was supplied."
        )


def memories_for(campaign: Campaign, assembled: Query, search: dict, *, lineage_ids, before_depth: int):
    """This lineage's memories for the turn, searched with lore's assembled
    query and query vector (made once: `recall.remembering`). Like lore,
    never fails the turn."""
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
