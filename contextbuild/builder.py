"""Assembling one narrator turn's prompt under a token budget.

Layout (DESIGN §6):

    system  narrator rules, state rule, campaign canon, knowledge framing rule,
            always-included Canon, AI instructions, persona, plot essentials
    story   history (newest actions that fit, the author's note three actions
            from the end), then the live sections from least to most volatile:
            summary, retrieved knowledge (Inspiration, Reference, Canon),
            memories, narrative state, length hint, state refusals, and the
            state reminder last

Fixed sections come first because prompt caching reuses a shared prefix: a
section that changes near the top re-prices everything below it, and below it
is the history, most of the prompt. Changing sections follow the history, most
volatile last, which also gives the most authoritative ones the recency a
model weights most: the section read last settles a conflict.

Every text is counted once, and a joined text is costed as its pieces plus
one token per blank line between them. That keeps a turn over a long story
cheap, and since a merge across a blank line can only shorten the real
encoding, every figure in the report is an upper bound: the safe side of a
budget.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import inject, rules
from .lengths import length_hint
from .records import (
    INFERRED,
    HistoryAction,
    KnowledgeResult,
    Memory,
    Section,
    Summary,
    TurnInputs,
    Window,
)
from .tokens import count_tokens, truncate_to_last_tokens

AUTHORS_NOTE_DEPTH = 3
#: Added to the reply cap when reserving room for the reply. It absorbs the
#: drift between this tokenizer and the serving model's; fixed, because what it
#: covers does not grow with the budget.
OUTPUT_SAFETY_MARGIN = 64
#: How many of the largest protected parts an overflow message names.
OVERFLOW_PARTS = 5

MEMORIES_HEADING = (
    "Memories from earlier in the story. Lines marked [inferred] are "
    "interpretation, not established fact — do not treat them as settled truth:"
)


class ContextOverflow(Exception):
    """The protected context alone does not fit in the budget.

    Protected means the rules, the campaign canon, the narrative state, the
    reader's input and the reply reserve. None of them may be dropped to make
    room, so there is no honest prompt to build, and saying why is the answer.
    """


@dataclass(frozen=True)
class BuiltContext:
    system_text: str
    story_text: str
    report: dict


def effective_budget(configured: int, window: Window | None) -> int:
    """The budget a prompt is priced against: a verified window caps it.

    An unverified window cannot cap anything, since nobody knows what the
    server reads; it is only recorded.
    """
    if window is not None and window.verified and window.tokens is not None:
        return min(configured, window.tokens)
    return configured


def build_context(inputs: TurnInputs) -> BuiltContext:
    """Builds the prompt and the report the inspector stores with the turn.

    1. Price the budget: the configured one, capped by a verified window.
    2. Build every protected section, counting each once.
    3. Reserve the reply (`max_output_tokens` + margin) before any history is
       chosen; fail with `ContextOverflow` if the protected part cannot fit.
    4. Let retrieved knowledge spend its share of what is left.
    5. Fill the rest with history, newest first; the pending reader input is
       already paid for and always goes in last.
    6. Lay out the sections and report what each cost.
    """
    campaign, settings = inputs.campaign, inputs.settings
    separator = count_tokens(rules.SEPARATOR)
    budget = effective_budget(settings.context_token_budget, inputs.window)

    knowledge = inject.plan(inputs.knowledge or KnowledgeResult(), budget)
    system = _present(
        _section("narrator", campaign.narrator_prompt.strip() or rules.DEFAULT_NARRATOR_PROMPT),
        _section("state_rule", rules.STATE_RULE),
        _section("campaign_canon", rules.render_canon(campaign)),
        *knowledge.protected,
        _section("ai_instructions", campaign.ai_instructions.strip()),
        _section("persona", rules.render_persona(campaign.persona)),
        _section("plot_essentials", _headed("Plot essentials:", campaign.plot_essentials)),
    )
    authors_note = campaign.authors_note.strip()
    note = _section("authors_note", f"[Author's note: {authors_note}]" if authors_note else "")
    summary_text = inputs.summary.text if inputs.summary is not None else ""
    summary = _section("story_summary", _headed("Story summary:", summary_text))
    memories = _section("used_memories", _memories_text(inputs.memories))
    state = _section("narrative_state", rules.render_state(inputs.narrative_state))
    hint = length_hint(settings.max_output_tokens, campaign.narration_length)
    tail = _present(
        _section("length_hint", hint),
        _section("state_refusals", rules.render_refusals(inputs.state_refusals)),
        _section("state_reminder", rules.EMIT_REMINDER),
    )
    player = _section("player_input", inputs.player_text.strip())

    protected = [*system, *_present(note, summary, memories, state, player), *tail]
    reserved = sum(s.tokens + separator for s in protected)
    output_reserve = max(0, settings.max_output_tokens) + OUTPUT_SAFETY_MARGIN
    if reserved + output_reserve >= budget:
        raise ContextOverflow(_overflow_message(
            protected, reserved, output_reserve, budget, settings.context_token_budget
        ))
    available = budget - reserved - output_reserve

    knowledge = inject.select(knowledge, available)
    history = _fit_history(inputs.history, available - knowledge.spent, separator)
    pieces = [(action.text, action.tokens) for action in history.actions]
    if player is not None:
        pieces.append((player.text, player.tokens))

    story = [
        *_history_sections(pieces, note, separator),
        *_present(summary, *reversed(knowledge.sections), memories, state),
        *tail,
    ]
    system_text = rules.SEPARATOR.join(s.text for s in system)
    story_text = rules.SEPARATOR.join(s.text for s in story)
    return BuiltContext(
        system_text=system_text,
        story_text=story_text,
        report={
            "sections": [
                {"label": s.label, "block": block, "text": s.text, "tokens": s.tokens}
                for block, sections in (("system", system), ("story", story))
                for s in sections
            ],
            "prompt": {"system": system_text, "story": story_text},
            "tokens": {
                "total": _joined_tokens(system, separator) + _joined_tokens(story, separator),
                "budget": budget,
                "configured_budget": settings.context_token_budget,
                "output_reserve": output_reserve,
                "protected": reserved,
                "available_for_history": available,
                "history_spent": history.spent,
                "knowledge_spent": knowledge.spent,
                "unused": available - knowledge.spent - history.spent,
            },
            "window": _window_record(inputs.window, capped=budget < settings.context_token_budget),
            "memories": {"used": [_memory_record(m) for m in inputs.memories if m.text.strip()]},
            "summary": _summary_record(inputs.summary) if summary is not None else None,
            "derived": [dict(job) for job in inputs.derived],
            "knowledge": inject.report(knowledge),
            "history": {
                "included": len(pieces),
                "total": inputs.history_total,
                "oldest_truncated": history.truncated,
                "included_ids": [action.id for action in history.actions],
            },
            "settings": {
                "model": settings.model,
                "api_mode": settings.api_mode,
                "temperature": settings.temperature,
                "max_output_tokens": settings.max_output_tokens,
                "context_token_budget": settings.context_token_budget,
            },
        },
    )


@dataclass(frozen=True)
class _History:
    """The stored actions that made it in, oldest first, each with its count."""

    actions: tuple[HistoryAction, ...]
    spent: int
    truncated: bool


def _fit_history(actions: tuple[HistoryAction, ...], budget: int, separator: int) -> _History:
    """The newest actions whose text and separators fit in `budget`.

    Walks back from the newest and stops at the first that does not fit, so
    the story stays contiguous and only the actions that fit are ever counted.
    If even the newest alone is too long, its end is kept: the latest words are
    what the next turn continues from.
    """
    chosen: list[HistoryAction] = []
    spent = 0
    truncated = False
    for action in reversed(actions):
        tokens = action.tokens if action.tokens is not None else count_tokens(action.text)
        if spent + tokens + separator <= budget:
            chosen.append(replace(action, tokens=tokens))
            spent += tokens + separator
            continue
        if not chosen and budget > separator:
            text = truncate_to_last_tokens(action.text, budget - separator)
            chosen.append(replace(action, text=text, tokens=count_tokens(text)))
            spent = chosen[0].tokens + separator
            truncated = True
        break
    chosen.reverse()
    return _History(tuple(chosen), spent, truncated)


def _history_sections(
    pieces: list[tuple[str, int]], note: Section | None, separator: int
) -> list[Section]:
    """The history, split around the author's note when there is one.

    The note goes AUTHORS_NOTE_DEPTH actions from the end: near enough to the
    reply to steer it, not so near that it reads as the latest event.
    """
    if note is None:
        return _present(_joined("history", pieces, separator))
    split = max(0, len(pieces) - AUTHORS_NOTE_DEPTH)
    return _present(
        _joined("history", pieces[:split], separator),
        note,
        _joined("recent_history", pieces[split:], separator),
    )


def _joined(label: str, pieces: list[tuple[str, int]], separator: int) -> Section | None:
    """Pieces joined by blank lines, costed from their counts (an upper bound)."""
    if not pieces:
        return None
    text = rules.SEPARATOR.join(text for text, _ in pieces)
    tokens = sum(tokens for _, tokens in pieces) + separator * (len(pieces) - 1)
    return Section(label, text, tokens)


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


def _memories_text(memories: tuple[Memory, ...]) -> str:
    """Retrieved memories, inferred ones marked as such.

    The narrator decides what is established from what it is shown, and an
    unlabelled guess beside the recorded story is how a guess becomes canon.
    """
    lines = [
        f"- [inferred] {m.text.strip()}" if m.authority == INFERRED else f"- {m.text.strip()}"
        for m in memories
        if m.text.strip()
    ]
    return _headed(MEMORIES_HEADING, "\n".join(lines))


def _window_record(window: Window | None, *, capped: bool) -> dict:
    """What the server was found to accept, or "not checked" when nobody probed
    it, so a turn built blind is identifiable afterwards."""
    window = window or Window(verified=False, tokens=None, source="unknown", detail="not checked")
    return {
        "verified": window.verified,
        "tokens": window.tokens,
        "source": window.source,
        "model_max": window.model_max,
        "detail": window.detail,
        "capped": capped,
    }


def _summary_record(summary: Summary) -> dict:
    return {
        "text": summary.text.strip(),
        "covers_through": summary.covers_through,
        "covers_actions": summary.covers_actions,
    }


def _memory_record(memory: Memory) -> dict:
    return {
        "text": memory.text.strip(),
        "authority": memory.authority,
        "score": memory.score,
        "source_action": memory.source_action,
    }


def _overflow_message(
    protected: list[Section], reserved: int, output_reserve: int, budget: int, configured: int
) -> str:
    """Names what the protected context spends and what the reader can change."""
    largest = sorted(protected, key=lambda s: s.tokens, reverse=True)[:OVERFLOW_PARTS]
    parts = ", ".join(f"{s.label} {s.tokens}" for s in largest)
    if budget < configured:
        advice = (
            f"That budget is what this server was found to accept (the setting is "
            f"{configured}), so raising the setting alone will not help: load the "
            "model with a larger window, lower the maximum reply length, or shorten "
            "the campaign's canon, instructions and persona."
        )
    else:
        advice = (
            "Raise the context budget, lower the maximum reply length, or shorten "
            "the campaign's canon, instructions and persona."
        )
    return (
        f"The protected context needs {reserved + output_reserve} tokens "
        f"({reserved} of prompt plus {output_reserve} reserved for the reply) but "
        f"the context budget is {budget}. Largest parts (tokens): {parts}. {advice}"
    )
