"""Assembling one narrator turn's prompt under a token budget.

The prompt is a conversation (DESIGN §6):

    system     World Info before, narrator rules, the cast of a shared
               story, state rule, campaign canon,
               knowledge framing rule, always-included Canon, AI
               instructions, persona, plot essentials, World Info after,
               then the length hint and the state reminder
    history    the newest actions that fit, one message each: the reader's
               actions as `user`, the narrations as `assistant`
    turn       the last `user` message: the live sections from least to most
               volatile (World Info's author's-note top, the author's note,
               its bottom, the game master's director's note, summary,
               retrieved knowledge
               (Inspiration, Reference, Canon), memories, narrative state,
               state refusals), then the reader's action, last

Chat models learn who is speaking from the roles, so the reader's words and
the narrator's never blur into one voice; the model writes a new assistant
message instead of continuing a document, which is what kept it from copying
the prompt's bracketed hints into the story. The hints themselves sit in the
system message, where a model reads instructions. The reader's action is the
last thing the model reads, and everything before the last message changes
only when history has to make room (see `history.fit_history`), so a server's prompt
cache reuses all of it from one turn to the next.

World Info entries at depth N are messages of their own role N messages
from the end (contextbuild.placement), so they change only the last N
messages. World Info entries (lorebook sources) are chosen by the World
Info budget (a share of the window, SillyTavern's rule); prose sources by
retrieval within what remains; the always-include cap applies to prose
Canon only (placement.BUDGET_RULE).

`api_mode = completions` renders the same messages as one text in the
model's instruct template (`instruct.render`; "plain" labels for base models).

Every text is counted once. A joined text is costed as its pieces plus one
token per blank line between them, and every message as its text plus
MESSAGE_OVERHEAD for the chat template's markers. A merge across a blank line
can only shorten the real encoding, so every figure in the report is an upper
bound: the safe side of a budget.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

from . import inject, instruct, placement, rules, smallwindow
from .history import History, fit_history, history_sections
from .layout import SYSTEM, conversation, render_transcript
from .lengths import length_hint
from .memories import memories_text, memories_within
from .records import HistoryAction, KnowledgeResult, Memory, Section, TurnInputs, Window
from .report import memory_record, overflow_message, summary_record, window_record
from .tokens import MESSAGE_OVERHEAD, count_tokens

#: Added to the reply cap when reserving room for the reply: it absorbs what
#: the token ratio below does not (a chat template's extra tokens, say).
OUTPUT_SAFETY_MARGIN = 64
#: The template's opening of the reply (`<|im_start|>assistant\n`).
REPLY_PRIMING = 5
#: Our tokenizer (cl100k) and the serving model's disagree by a few percent.
#: Until the server's own count is measured, prompts are priced this much
#: above our count; once measured, the measured ratio plus RATIO_MARGIN.
UNMEASURED_RATIO = 1.08
RATIO_MARGIN = 0.03

#: The most of the budget the recalled memories and the narrative state may
#: take: both are protected (never dropped for history), so each is bounded,
#: and with the summary's share (storyapp.prompting) a small window still
#: leaves room for the story.
MEMORY_SHARE = 0.10
STATE_SHARE = 0.20

#: The section of the game master's direction, and the audience its report
#: entry is marked for: no player's inspector may show it.
DIRECTOR_NOTE = "director_note"
GAME_MASTER = "gm"



class ContextOverflow(Exception):
    """The protected context alone does not fit in the budget.

    Protected means the rules, the campaign canon, the narrative state, the
    reader's input and the reply reserve. None of them may be dropped to make
    room, so there is no honest prompt to build, and saying why is the answer.
    """


@dataclass(frozen=True)
class BuiltContext:
    """The prompt as sent: `messages` for a chat endpoint, `prompt_text` (the
    same content as one labelled text) for a completions endpoint.
    `system_text` is the system message and `story_text` the conversation
    after it, rendered with turn labels, for reading and searching."""

    system_text: str
    story_text: str
    report: dict
    messages: tuple[dict, ...] = ()
    prompt_text: str = ""


def effective_budget(configured: int, window: Window | None) -> int:
    """The budget a prompt is priced against: a verified window caps it.

    An unverified window cannot cap anything, since nobody knows what the
    server reads; it is only recorded.
    """
    if window is not None and window.verified and window.tokens is not None:
        return min(configured, window.tokens)
    return configured


def token_scale(ratio: float | None) -> float:
    """How much more the server counts than we do, with a margin: the
    measured ratio (never trusted below 1 by more than the margin), or the
    unmeasured default."""
    if ratio is None or ratio <= 0:
        return UNMEASURED_RATIO
    return max(1.0, min(ratio, 2.0)) + RATIO_MARGIN


def build_context(inputs: TurnInputs) -> BuiltContext:
    """Builds the prompt and the report the inspector stores with the turn.

    1. Price the budget: the configured one, capped by a verified window, less
       the reply reserve (`max_output_tokens` + margin), divided by how much
       more the server counts than we do (`token_scale`).
    2. Build every protected part, counting each once: the system message,
       the live sections and the reader's action, and the messages' overhead.
    3. Fail with `ContextOverflow` if the protected part cannot fit.
    4. Let retrieved knowledge spend its share of what is left.
    5. Fill the rest with history, newest first, from a stable anchor.
    6. Lay out the messages and report what each part cost.
    """
    priced = _price(inputs)
    knowledge = inject.plan(inputs.knowledge or KnowledgeResult(), priced.budget)
    placed = placement.place(inputs.world_info, hidden=inputs.world_info_hidden)
    parts = _protected_parts(inputs, knowledge, placed, budget=priced.budget)
    reserved = _reserved(parts, priced, configured=inputs.settings.context_token_budget)
    available = priced.capacity - reserved

    knowledge = inject.select(knowledge, available)
    history = fit_history(parts.past, available - knowledge.spent, anchor=inputs.history_anchor)
    turn = _present(
        placed.an_top, parts.note, placed.an_bottom, parts.director, parts.summary, *reversed(knowledge.sections),
        parts.memories, parts.state, parts.refusals,
    )
    messages = (
        {"role": SYSTEM, "content": rules.SEPARATOR.join(s.text for s in parts.system)},
        *placement.insert_at_depth(conversation(history.actions, turn, parts.last, parts.opening), placed),
    )
    built = BuiltContext(
        system_text=messages[0]["content"],
        story_text=render_transcript(messages[1:]),
        messages=messages,
        prompt_text=_completion_text(messages, inputs, parts) if inputs.settings.api_mode == "completions" else "",
        report={},
    )
    report = _report(
        inputs, priced, parts, knowledge, history, turn, placed, built=built, reserved=reserved, available=available
    )
    return replace(built, report=report)


def _completion_text(messages, inputs: TurnInputs, parts: _Parts) -> str:
    """The conversation in the model's template; "Continue" ends on the last
    narration's own text, so the model goes on with it."""
    goes_on = parts.cue is not None and parts.cue.text == rules.CONTINUE_CUE
    conversation_ = instruct.continuing(list(messages), rules.CONTINUE_CUE) if goes_on else list(messages)
    return instruct.render(conversation_, inputs.settings.instruct_template,
                           continue_last=goes_on and conversation_[-1]["role"] == "assistant")


@dataclass(frozen=True)
class _Pricing:
    """What the prompt may cost (step 1): `capacity` is the prompt's room in
    our own tokens, after the reply reserve and the server's count ratio."""

    budget: int
    output_reserve: int
    scale: float
    capacity: int


def _price(inputs: TurnInputs) -> _Pricing:
    settings = inputs.settings
    budget = effective_budget(settings.context_token_budget, inputs.window)
    output_reserve = max(0, settings.max_output_tokens) + max(0, settings.reasoning_reserve) + OUTPUT_SAFETY_MARGIN
    scale = token_scale(inputs.token_ratio)
    capacity = max(0, math.floor((budget - output_reserve) / scale))
    return _Pricing(budget, output_reserve, scale, capacity)


@dataclass(frozen=True)
class _Parts:
    """The parts no history is dropped for (step 2), each counted once, and
    the history left to fit once the reader's stored action is taken off."""

    system: list[Section]
    note: Section | None
    director: Section | None
    world_info: placement.Placed
    summary: Section | None
    memories: Section | None
    state: Section | None
    refusals: Section | None
    player: Section | None
    cue: Section | None
    opening: Section
    recalled: tuple[Memory, ...]
    past: tuple[HistoryAction, ...]

    @property
    def last(self) -> Section:
        """What ends the prompt: the reader's action, or the turn's cue."""
        return self.player or self.cue

    @property
    def protected(self) -> list[Section]:
        live = _present(self.world_info.an_top, self.note, self.world_info.an_bottom, self.director, self.summary,
                        self.memories, self.state, self.refusals)
        return [*self.system, *live, *_present(self.player, self.cue)]


def _protected_parts(inputs: TurnInputs, knowledge: inject.Plan, placed: placement.Placed, *,
                     budget: int) -> _Parts:
    campaign, settings = inputs.campaign, inputs.settings
    small = smallwindow.is_small(budget)
    system = _present(
        placed.before,
        _section("narrator", campaign.narrator_prompt.strip()
                 or (rules.COMPACT_NARRATOR_PROMPT if small else rules.DEFAULT_NARRATOR_PROMPT)),
        _section("cast", rules.render_cast(campaign.cast)),
        _section("state_rule", rules.COMPACT_STATE_RULE if small else rules.STATE_RULE),
        _section("campaign_canon", rules.render_canon(campaign)),
        *knowledge.protected,
        _section("ai_instructions", campaign.ai_instructions.strip()),
        _section("persona", rules.render_persona(campaign.persona)),
        _section("plot_essentials", _headed("Plot essentials:", campaign.plot_essentials)),
        placed.after,
        _section("length_hint", length_hint(settings.max_output_tokens, campaign.narration_length)),
        _section("state_reminder", rules.EMIT_REMINDER),
    )
    authors_note = campaign.authors_note.strip()
    summary_text = inputs.summary.text if inputs.summary is not None else ""
    recalled = memories_within(inputs.memories, int(budget * MEMORY_SHARE))
    player = _section("player_input", inputs.player_text.strip())
    past = inputs.history
    if player is None and past and past[-1].kind != "ai":
        # The reader's stored action is the one this turn answers: it ends
        # the prompt and, like a pending one, is never dropped for room.
        latest = past[-1]
        player = Section("player_input", latest.text, latest.tokens if latest.tokens is not None else count_tokens(latest.text))
        past = past[:-1]
    return _Parts(
        system=system,
        note=_section("authors_note", f"[Author's note: {authors_note}]" if authors_note else ""),
        director=_section(DIRECTOR_NOTE, rules.render_director_note(campaign.director_note)),
        world_info=placed,
        summary=_section("story_summary", _headed("Story summary:", summary_text)),
        memories=_section("used_memories", memories_text(recalled)),
        state=_section("narrative_state",
                       rules.render_state(inputs.narrative_state, limit_tokens=int(budget * STATE_SHARE))),
        refusals=_section("state_refusals", rules.render_refusals(inputs.state_refusals)),
        player=player,
        # A turn with no new action (Continue, or the story's first narration)
        # still ends on a user message: a chat model answers the last one.
        cue=None if player is not None else _section(
            "turn_cue", rules.CONTINUE_CUE if past else rules.BEGIN_CUE
        ),
        opening=_section("opening_cue", rules.BEGIN_CUE),
        recalled=recalled,
        past=past,
    )


def _reserved(parts: _Parts, priced: _Pricing, *, configured: int) -> int:
    """What the protected parts cost with their messages (step 3); raises
    `ContextOverflow` when that leaves nothing for the rest."""
    separator = count_tokens(rules.SEPARATOR)
    # The system message, the turn's message, the reply's priming, and a
    # possible opening cue before a history that starts with a narration.
    fixed = 2 * MESSAGE_OVERHEAD + REPLY_PRIMING + parts.opening.tokens + MESSAGE_OVERHEAD
    reserved = sum(s.tokens + separator for s in parts.protected) + fixed + parts.world_info.depth_cost
    if reserved >= priced.capacity:
        raise ContextOverflow(overflow_message(
            parts.protected, reserved, priced.output_reserve, priced.budget, configured, priced.scale
        ))
    return reserved


def _report(
    inputs: TurnInputs, priced: _Pricing, parts: _Parts, knowledge: inject.Plan, history: History,
    turn: list[Section], placed: placement.Placed, *, built: BuiltContext, reserved: int, available: int,
) -> dict:
    """What the inspector stores with the turn: every part as sent and what it cost (step 6)."""
    settings = inputs.settings
    separator = count_tokens(rules.SEPARATOR)
    ending = [*turn, *_present(parts.last)]
    total = (
        _joined_tokens(parts.system, separator) + MESSAGE_OVERHEAD
        + history.spent
        + (parts.opening.tokens + MESSAGE_OVERHEAD if history.actions and history.actions[0].kind == "ai" else 0)
        + _joined_tokens(ending, separator) + MESSAGE_OVERHEAD
        + REPLY_PRIMING
        + placed.depth_cost
    )
    return {
        "sections": [
            {"label": s.label, "block": block, "text": s.text, "tokens": s.tokens,
             **({"audience": GAME_MASTER} if s.label == DIRECTOR_NOTE else {})}
            for block, sections in (
                ("system", parts.system),
                ("history", history_sections(history.actions)),
                ("turn", ending),
                ("depth", [section for _, _, section in placed.at_depth]),
            )
            for s in sections
        ],
        "prompt": {
            "system": built.system_text,
            "story": built.story_text,
            "mode": settings.api_mode,
            "template": settings.instruct_template if settings.api_mode == "completions" else "",
            "messages": [dict(m) for m in built.messages],
            "text": built.prompt_text,
        },
        "tokens": {
            "total": total,
            "budget": priced.budget,
            "configured_budget": settings.context_token_budget,
            "output_reserve": priced.output_reserve,
            "prompt_capacity": priced.capacity,
            "ratio_budgeted": round(priced.scale, 4),
            "ratio_on_profile": inputs.token_ratio,
            "protected": reserved,
            "available_for_history": available,
            "history_spent": history.spent,
            "knowledge_spent": knowledge.spent,
            "unused": available - knowledge.spent - history.spent,
            "server_prompt_tokens": None,
            "ratio": None,
        },
        "window": window_record(inputs.window, capped=priced.budget < settings.context_token_budget),
        "memories": {
            "used": [memory_record(m) for m in parts.recalled],
            "dropped": [memory_record(m) for m in [m for m in inputs.memories if m.text.strip()][len(parts.recalled):]],
        },
        "summary": summary_record(inputs.summary) if parts.summary is not None else None,
        "derived": [dict(job) for job in inputs.derived],
        # Who was at the table; the director's note is in `sections`, marked for the game master alone.
        "cast": [{"name": seat.name, "description": seat.description, "game_master": seat.game_master}
                 for seat in inputs.campaign.cast],
        # The narrative state as sent: what the narrator was told is true.
        "state": copy.deepcopy(inputs.narrative_state) if isinstance(inputs.narrative_state, dict) else {},
        "knowledge": inject.report(knowledge),
        "world_info": placement.report(inputs.world_info, inputs.world_info_titles),
        "history": {
            "included": len(history.actions) + (1 if parts.player is not None else 0),
            "total": inputs.history_total,
            "oldest_truncated": history.truncated,
            "included_ids": [action.id for action in history.actions]
            + ([inputs.history[-1].id] if len(parts.past) < len(inputs.history) else []),
            "anchor": history.actions[0].id if history.actions else None,
            "anchor_kept": history.anchor_kept,
        },
        "settings": _settings_record(settings, small=smallwindow.is_small(priced.budget)),
        "window_advice": smallwindow.advice(
            prompt=total, story=history.spent, story_total=len(parts.past), story_kept=len(history.actions),
            reply=settings.max_output_tokens,
            configured_reply=settings.configured_max_output_tokens or settings.max_output_tokens, lore=knowledge.spent,
        ),
    }


def _settings_record(settings, *, small: bool) -> dict:
    """The model settings the prompt was built for, as the inspector shows them."""
    return {
        "model": settings.model,
        "api_mode": settings.api_mode,
        "temperature": settings.temperature,
        "max_output_tokens": settings.max_output_tokens,
        "configured_max_output_tokens": settings.configured_max_output_tokens or settings.max_output_tokens,
        "context_token_budget": settings.context_token_budget,
        "compact_rules": small,
    }


def _joined_tokens(sections: list[Section], separator: int) -> int:
    """Sections joined by blank lines, costed from their counts (an upper bound)."""
    return sum(s.tokens for s in sections) + separator * max(0, len(sections) - 1)


def _section(label: str, text: str) -> Section | None:
    return Section(label, text, count_tokens(text)) if text else None


def _present(*sections: Section | None) -> list[Section]:
    return [s for s in sections if s is not None]


def _headed(heading: str, body: str) -> str:
    body = body.strip()
    return f"{heading}\n{body}" if body else ""
