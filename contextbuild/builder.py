"""Assembling one narrator turn's prompt under a token budget.

The prompt is a conversation (DESIGN §6):

    system     narrator rules, state rule, campaign canon, knowledge framing
               rule, always-included Canon, AI instructions, persona, plot
               essentials, then the length hint and the state reminder
    history    the newest actions that fit, one message each: the reader's
               actions as `user`, the narrations as `assistant`
    turn       the last `user` message: the live sections from least to most
               volatile (author's note, summary, retrieved knowledge
               (Inspiration, Reference, Canon), memories, narrative state,
               state refusals), then the reader's action, last

Chat models learn who is speaking from the roles, so the reader's words and
the narrator's never blur into one voice; the model writes a new assistant
message instead of continuing a document, which is what kept it from copying
the prompt's bracketed hints into the story. The hints themselves sit in the
system message, where a model reads instructions. The reader's action is the
last thing the model reads, and everything before the last message changes
only when history has to make room (see `_fit_history`), so a server's prompt
cache reuses all of it from one turn to the next.

`api_mode = completions` renders the same content as one text with turn
labels, for models without a chat template (`render_completion`).

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

#: Added to the reply cap when reserving room for the reply: it absorbs what
#: the token ratio below does not (a chat template's extra tokens, say).
OUTPUT_SAFETY_MARGIN = 64
#: What a chat template adds around one message (ChatML's
#: `<|im_start|>user\n` and `<|im_end|>\n`, Llama 3's headers): five tokens.
MESSAGE_OVERHEAD = 5
#: The template's opening of the reply (`<|im_start|>assistant\n`).
REPLY_PRIMING = 5
#: Our tokenizer (cl100k) and the serving model's disagree by a few percent.
#: Until the server's own count is measured, prompts are priced this much
#: above our count; once measured, the measured ratio plus RATIO_MARGIN.
UNMEASURED_RATIO = 1.08
RATIO_MARGIN = 0.03
#: When history must drop its oldest actions, it drops more than it has to (at
#: least this share of its room, or the newest SLACK_MESSAGES' worth), and
#: keeps that starting point (the anchor) while the story grows into the
#: slack: the prompt's prefix, which a server's cache reuses, then changes
#: once every few turns instead of on every turn.
HISTORY_SLACK = 0.25
SLACK_MESSAGES = 4
#: How many of the largest protected parts an overflow message names.
OVERFLOW_PARTS = 5

USER = "user"
ASSISTANT = "assistant"
SYSTEM = "system"

#: The most of the budget the recalled memories and the narrative state may
#: take: both are protected (never dropped for history), so each is bounded,
#: and with the summary's share (storyapp.prompting) a small window still
#: leaves room for the story.
MEMORY_SHARE = 0.10
STATE_SHARE = 0.20

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
    campaign, settings = inputs.campaign, inputs.settings
    separator = count_tokens(rules.SEPARATOR)
    budget = effective_budget(settings.context_token_budget, inputs.window)
    output_reserve = max(0, settings.max_output_tokens) + OUTPUT_SAFETY_MARGIN
    scale = token_scale(inputs.token_ratio)
    capacity = max(0, math.floor((budget - output_reserve) / scale))

    knowledge = inject.plan(inputs.knowledge or KnowledgeResult(), budget)
    system = _present(
        _section("narrator", campaign.narrator_prompt.strip() or rules.DEFAULT_NARRATOR_PROMPT),
        _section("state_rule", rules.STATE_RULE),
        _section("campaign_canon", rules.render_canon(campaign)),
        *knowledge.protected,
        _section("ai_instructions", campaign.ai_instructions.strip()),
        _section("persona", rules.render_persona(campaign.persona)),
        _section("plot_essentials", _headed("Plot essentials:", campaign.plot_essentials)),
        _section("length_hint", length_hint(settings.max_output_tokens, campaign.narration_length)),
        _section("state_reminder", rules.EMIT_REMINDER),
    )
    authors_note = campaign.authors_note.strip()
    note = _section("authors_note", f"[Author's note: {authors_note}]" if authors_note else "")
    summary_text = inputs.summary.text if inputs.summary is not None else ""
    summary = _section("story_summary", _headed("Story summary:", summary_text))
    recalled = _memories_within(inputs.memories, int(budget * MEMORY_SHARE))
    memories = _section("used_memories", _memories_text(recalled))
    state = _section("narrative_state",
                     rules.render_state(inputs.narrative_state, limit_tokens=int(budget * STATE_SHARE)))
    refusals = _section("state_refusals", rules.render_refusals(inputs.state_refusals))
    player = _section("player_input", inputs.player_text.strip())
    past = inputs.history
    if player is None and past and past[-1].kind != "ai":
        # The reader's stored action is the one this turn answers: it ends
        # the prompt and, like a pending one, is never dropped for room.
        latest = past[-1]
        player = Section("player_input", latest.text, latest.tokens if latest.tokens is not None else count_tokens(latest.text))
        past = past[:-1]
    # A turn with no new action (Continue, or the story's first narration)
    # still ends on a user message: a chat model answers the last one.
    cue = None if player is not None else _section(
        "turn_cue", rules.CONTINUE_CUE if past else rules.BEGIN_CUE
    )
    live = _present(note, summary, memories, state, refusals)

    protected = [*system, *live, *_present(player, cue)]
    # The system message, the turn's message, the reply's priming, and a
    # possible opening cue before a history that starts with a narration.
    opening = _section("opening_cue", rules.BEGIN_CUE)
    fixed = 2 * MESSAGE_OVERHEAD + REPLY_PRIMING + opening.tokens + MESSAGE_OVERHEAD
    reserved = sum(s.tokens + separator for s in protected) + fixed
    if reserved >= capacity:
        raise ContextOverflow(_overflow_message(
            protected, reserved, output_reserve, budget, settings.context_token_budget, scale
        ))
    available = capacity - reserved

    knowledge = inject.select(knowledge, available)
    history = _fit_history(past, available - knowledge.spent, anchor=inputs.history_anchor)
    turn = _present(note, summary, *reversed(knowledge.sections), memories, state, refusals)
    conversation = _conversation(history.actions, turn, player or cue, opening)
    messages = ({"role": SYSTEM, "content": rules.SEPARATOR.join(s.text for s in system)}, *conversation)
    system_text = messages[0]["content"]
    story_text = render_transcript(messages[1:])
    prompt_text = render_completion(messages) if settings.api_mode == "completions" else ""
    total = (
        _joined_tokens(system, separator) + MESSAGE_OVERHEAD
        + history.spent
        + (opening.tokens + MESSAGE_OVERHEAD if history.actions and history.actions[0].kind == "ai" else 0)
        + _joined_tokens([*turn, *_present(player or cue)], separator) + MESSAGE_OVERHEAD
        + REPLY_PRIMING
    )
    return BuiltContext(
        system_text=system_text,
        story_text=story_text,
        messages=messages,
        prompt_text=prompt_text,
        report={
            "sections": [
                {"label": s.label, "block": block, "text": s.text, "tokens": s.tokens}
                for block, sections in (
                    ("system", system),
                    ("history", _history_sections(history.actions)),
                    ("turn", [*turn, *_present(player or cue)]),
                )
                for s in sections
            ],
            "prompt": {
                "system": system_text,
                "story": story_text,
                "mode": settings.api_mode,
                "messages": [dict(m) for m in messages],
                "text": prompt_text,
            },
            "tokens": {
                "total": total,
                "budget": budget,
                "configured_budget": settings.context_token_budget,
                "output_reserve": output_reserve,
                "prompt_capacity": capacity,
                "ratio_budgeted": round(scale, 4),
                "ratio_on_profile": inputs.token_ratio,
                "protected": reserved,
                "available_for_history": available,
                "history_spent": history.spent,
                "knowledge_spent": knowledge.spent,
                "unused": available - knowledge.spent - history.spent,
                "server_prompt_tokens": None,
                "ratio": None,
            },
            "window": _window_record(inputs.window, capped=budget < settings.context_token_budget),
            "memories": {
                "used": [_memory_record(m) for m in recalled],
                "dropped": [_memory_record(m) for m in [m for m in inputs.memories if m.text.strip()][len(recalled):]],
            },
            "summary": _summary_record(inputs.summary) if summary is not None else None,
            "derived": [dict(job) for job in inputs.derived],
            # The narrative state as sent: what the narrator was told is true.
            "state": copy.deepcopy(inputs.narrative_state) if isinstance(inputs.narrative_state, dict) else {},
            "knowledge": inject.report(knowledge),
            "history": {
                "included": len(history.actions) + (1 if player is not None else 0),
                "total": inputs.history_total,
                "oldest_truncated": history.truncated,
                "included_ids": [action.id for action in history.actions]
                + ([inputs.history[-1].id] if len(past) < len(inputs.history) else []),
                "anchor": history.actions[0].id if history.actions else None,
                "anchor_kept": history.anchor_kept,
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
    """The stored actions that made it in, oldest first, each with its count;
    `spent` includes each one's message overhead."""

    actions: tuple[HistoryAction, ...]
    spent: int
    truncated: bool
    anchor_kept: bool = False


def _cost(action: HistoryAction) -> int:
    return action.tokens + MESSAGE_OVERHEAD


def _fit_history(actions: tuple[HistoryAction, ...], budget: int, *, anchor=None) -> _History:
    """The newest actions that fit in `budget`, as one contiguous stretch.

    When everything fits, everything goes in. Otherwise the stretch starts at
    the previous turn's first action (`anchor`) if all from there still fits,
    so the prompt's prefix is the one the server cached last turn. When it
    does not (or there is none), the oldest actions are dropped until the rest
    leaves room for about two more turns (HISTORY_SLACK of the room at least,
    half at most), and that start is the next anchor.
    If even the newest action alone is too long, its end is kept: the latest
    words are what the next turn continues from.
    """
    counted = [
        replace(a, tokens=a.tokens if a.tokens is not None else count_tokens(a.text)) for a in actions
    ]
    suffix = [0] * (len(counted) + 1)
    for index in range(len(counted) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + _cost(counted[index])
    if suffix[0] <= budget:
        return _History(tuple(counted), suffix[0], False, anchor_kept=anchor is not None)
    ids = [a.id for a in counted]
    if anchor in ids and suffix[ids.index(anchor)] <= budget:
        start = ids.index(anchor)
        return _History(tuple(counted[start:]), suffix[start], False, anchor_kept=True)
    # Room for at least two more turns (four messages the size of the
    # newest), within a quarter to a half of the budget.
    recent = sum(_cost(a) for a in counted[-SLACK_MESSAGES:])
    room = budget - min(max(int(budget * HISTORY_SLACK), recent), budget // 2)
    start = next((i for i in range(len(counted)) if suffix[i] <= room), len(counted))
    if start < len(counted):
        return _History(tuple(counted[start:]), suffix[start], False)
    if not counted or budget <= MESSAGE_OVERHEAD:
        return _History((), 0, False)
    newest = counted[-1]
    if _cost(newest) <= budget:
        return _History((newest,), _cost(newest), False)
    text = truncate_to_last_tokens(newest.text, budget - MESSAGE_OVERHEAD)
    kept = replace(newest, text=text, tokens=count_tokens(text))
    return _History((kept,), _cost(kept), True)


def _role(action: HistoryAction) -> str:
    return ASSISTANT if action.kind == "ai" else USER


def _conversation(
    actions: tuple[HistoryAction, ...],
    turn: list[Section],
    last: Section,
    opening: Section,
) -> list[dict]:
    """The messages after the system message, alternating user and assistant.

    Chat templates that insist on alternation (Mistral's, Gemma's) refuse two
    messages of one role in a row, so consecutive actions of one role are
    joined into one message, and a history that opens with a narration (a
    campaign's opening text) is preceded by the opening cue as the reader's.
    """
    messages: list[dict] = []
    for action in actions:
        role = _role(action)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += rules.SEPARATOR + action.text
        else:
            messages.append({"role": role, "content": action.text})
    if messages and messages[0]["role"] == ASSISTANT:
        messages.insert(0, {"role": USER, "content": opening.text})
    content = rules.SEPARATOR.join(s.text for s in [*turn, last])
    if messages and messages[-1]["role"] == USER:
        messages[-1]["content"] += rules.SEPARATOR + content
    else:
        messages.append({"role": USER, "content": content})
    return messages


def _history_sections(actions: tuple[HistoryAction, ...]) -> list[Section]:
    """The history as report sections: one per action, labelled by speaker."""
    return [
        Section("narration" if action.kind == "ai" else "player_action", action.text, action.tokens)
        for action in actions
    ]


#: How each role is labelled when the conversation is one text.
TURN_LABELS = {USER: "Reader", ASSISTANT: "Narrator"}


def render_transcript(messages) -> str:
    """The conversation as one text with turn labels ("Reader:", "Narrator:")."""
    return rules.SEPARATOR.join(f"{TURN_LABELS[m['role']]}: {m['content']}" for m in messages)


def render_completion(messages) -> str:
    """The prompt for a completions endpoint: the system text, the labelled
    conversation, and the narrator's label the model continues from.
    `stop` sequences at the reader's label end the reply (COMPLETION_STOP)."""
    system, rest = messages[0]["content"], messages[1:]
    return f"{system}{rules.SEPARATOR}{render_transcript(rest)}{rules.SEPARATOR}{TURN_LABELS[ASSISTANT]}:"


#: Where a completions model's reply ends: when it starts the reader's turn.
COMPLETION_STOP = (f"\n{TURN_LABELS[USER]}:", f"\n\n{TURN_LABELS[USER]}:")


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


def _memories_within(memories: tuple[Memory, ...], limit: int) -> tuple[Memory, ...]:
    """The best-ranked memories whose lines fit in `limit` tokens (at least
    the first, cut if it alone is too long): memories are never dropped for
    history, so they are bounded here instead."""
    kept: list[Memory] = []
    used = count_tokens(MEMORIES_HEADING)
    for memory in memories:
        if not memory.text.strip():
            continue
        cost = count_tokens(memory.text) + 4
        if used + cost > limit:
            if not kept:
                kept.append(replace(memory, text=truncate_to_last_tokens(memory.text, max(1, limit - used - 4))))
            break
        kept.append(memory)
        used += cost
    return tuple(kept)


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
        "parts": [dict(part) for part in summary.parts],
    }


def _memory_record(memory: Memory) -> dict:
    return {
        "text": memory.text.strip(),
        "authority": memory.authority,
        "score": memory.score,
        "source_action": memory.source_action,
        "id": memory.id,
        "admitted_by": memory.admitted_by,
    }


def _overflow_message(
    protected: list[Section], reserved: int, output_reserve: int, budget: int, configured: int, scale: float
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
    needed = math.ceil(reserved * scale) + output_reserve
    return (
        f"The protected context needs {needed} tokens "
        f"({reserved} of prompt, about {math.ceil(reserved * scale)} as the server counts them, plus "
        f"{output_reserve} reserved for the reply) but the context budget is {budget}. "
        f"Largest parts (tokens): {parts}. {advice}"
    )
