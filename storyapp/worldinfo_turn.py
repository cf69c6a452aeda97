"""One turn's World Info: the campaign's lorebook entries through the
engine (worldinfo.engine), fed this lineage's messages and timers.

The engine is pure, so this module only gathers its inputs as values:

- the entries and book settings (knowledge.worldinfo.loading, cached per
  campaign on the library stamp) and the compiled regex keys, searched
  under one deadline for the whole turn;
- the lineage's in-story messages, newest first, each with its speaker's
  name (the persona's for the reader's actions, the card's or "Narrator"
  for the narrations);
- the timed effects stored on the position (each action carries its
  lineage's, as it carries the narrative state), so Undo, Redo, Retry, an
  edit and a branch each continue their own timers;
- the seed of the probability rolls: the campaign, the position and the
  attempt (how many narrations the position already has), so Retry rolls
  again and the inspector's record can be reproduced;
- the campaign's texts an entry's `match…` flags scan, mapped onto
  SillyTavern's (see SCAN_SOURCES and the README).

Timed effects count in actions: `chat_length` is the lineage's length at
the narration being written (its depth), so a decision's `until` is the
action depth where the effect ends.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contextbuild import rules
from contextbuild.tokens import count_tokens
from knowledge.worldinfo.loading import Books, TurnRegex, books_for
from worldinfo.engine import evaluate
from worldinfo.records import CONTINUE, NORMAL, RETRY, Inputs, Message, Result, ScanSources, TimedState

from . import modelprose
from .models import Action, Campaign

#: The narrator's name in the scan text and for {{char}}, when the campaign
#: did not come from a character card.
NARRATOR = "Narrator"
#: Which campaign text stands for which of SillyTavern's scan sources.
SCAN_SOURCES = {
    "persona_description": "the persona's description",
    "character_description": "the narrator prompt",
    "character_personality": "the AI instructions",
    "scenario": "the plot essentials, the narrative state and its scene",
    "character_depth_prompt": "the author's note",
    "creator_notes": "the card's creator notes",
}


def attempt_of(campaign: Campaign, position: Action | None, narrating: Action | None) -> int:
    """How many narrations the position (None: the story's start) already
    has besides the one being written: a Retry's narration is a new one, so
    its rolls differ."""
    others = Action.objects.filter(campaign=campaign, parent=position, kind=Action.Kind.AI)
    if narrating is not None:
        others = others.exclude(pk=narrating.pk).filter(pk__lt=narrating.pk)
    return others.count()


def generation_of(position: Action | None, attempt: int, *, player_text: str) -> str:
    """SillyTavern's generation type: a narration after a narration is a
    continue, a further narration of one position a regenerate."""
    if player_text.strip():
        return NORMAL
    if position is not None and position.kind == Action.Kind.AI:
        return CONTINUE
    return RETRY if attempt else NORMAL


def _messages(window: list[Action], *, persona: str, narrator: str, player_text: str) -> tuple[Message, ...]:
    told = [Message(name=persona, text=player_text.strip())] if player_text.strip() else []
    for action in reversed(window):
        if action.in_story:
            name = narrator if action.kind == Action.Kind.AI else persona
            told.append(Message(name=name, text=modelprose.text_for_model(action)))
    return tuple(told)


def _sources(campaign: Campaign, state: dict, books: Books) -> ScanSources:
    scenario = "\n".join(t for t in (campaign.plot_essentials.strip(), rules.render_state(state)) if t)
    return ScanSources(
        persona_description=campaign.persona_description,
        character_description=campaign.narrator_prompt,
        character_personality=campaign.ai_instructions,
        scenario=scenario,
        character_depth_prompt=campaign.authors_note,
        creator_notes=books.creator_notes,
    )


@dataclass(frozen=True)
class TurnWorldInfo:
    """This turn's World Info result, the books' titles and the books
    whose entries are for the narrator only."""

    result: Result | None = None
    titles: dict[str, str] | None = None
    hidden: frozenset[str] = frozenset()


def world_info_for(
    campaign: Campaign,
    *,
    position: Action | None,
    window: list[Action],
    state: dict,
    budget_tokens: int,
    narrating: Action | None = None,
    player_text: str = "",
    by_meaning: tuple = (),
    library: tuple[tuple, frozenset] | None = None,
) -> TurnWorldInfo:
    """This turn's World Info, with no result when the campaign has no
    lorebook entries in an enabled, ready source. `by_meaning` are the
    lorebook passages (chunk ids) the semantic path admitted; `library` the
    library's stamp this turn (knowledge.selectors.library_stamp), when read
    already."""
    books, patterns = books_for(campaign.pk, stamp=library)
    if not books.entries:
        return TurnWorldInfo()
    passages = books.passages or {}
    persona = campaign.persona_name.strip() or "You"
    narrator = books.card_name.strip() or NARRATOR
    attempt = attempt_of(campaign, position, narrating)
    depth = position.depth + 1 if position is not None else 0
    inputs = Inputs(
        entries=books.entries,
        books=books.settings or {},
        messages=_messages(window, persona=persona, narrator=narrator, player_text=player_text),
        chat_length=depth + (1 if player_text.strip() else 0),
        budget_tokens=budget_tokens,
        seed=f"{campaign.pk}:{position.pk if position is not None else 0}:{attempt}",
        timed=TimedState.from_stored(position.world_info_timers if position is not None else None),
        sources=_sources(campaign, state, books),
        by_meaning=frozenset(passages[c] for c in by_meaning if c in passages),
        names=tuple(n for n in (campaign.persona_name.strip(), books.card_name.strip()) if n),
        macros={"user": persona, "char": narrator},
        generation=generation_of(position, attempt, player_text=player_text),
    )
    search = TurnRegex(patterns)
    result = evaluate(inputs, count=count_tokens, regex_search=search)
    return TurnWorldInfo(
        result=replace(result, notes=(*result.notes, *search.notes())), titles=dict(books.titles or {}),
        hidden=books.hidden,
    )

