"""The story summary: what the summarizer is asked, how its reply is read,
and which stored summaries a prompt may use.

A story outgrows its history window; what falls out of it would be forgotten
unless it is summarized. Summaries are segments of one lineage: each covers
the actions after `starts_after` through `covers_through`. A prompt uses a
chain of segments that ends at the deepest summarized action on the current
lineage and walks back to the root, so an undone branch's summary is never
used, and an undo rewinds the summarizer's progress without any bookkeeping:
progress is a position in the tree, not a count.

When the chain itself grows past its budget, its oldest segments are merged
into one summary a level up (a summary of summaries), which covers their
whole stretch and is bound to the lineage the same way.

Everything here is pure: the worker loads rows, calls the model, and stores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from .records import HistoryAction, Summary
from .rules import strip_echoed_instructions
from .tokens import truncate_to_last_tokens

#: The summarizer's instructions begin with this, so a scripted test server
#: can tell a summary request from a narration.
SUMMARIZER_OPENING = "You keep the record of an interactive story."

SUMMARIZER_RULES = f"""\
{SUMMARIZER_OPENING} Summarize the passage you are given \
for a narrator who will continue the story without seeing it.
- Third person, past tense; call the protagonist by name ({{protagonist}}), \
never "you" or "I".
- Keep what later turns need: who is who, where things are, what was \
promised, found, lost, learned or decided, who died or changed. Leave out \
the prose's atmosphere.
- State only what the passage says happened. Invent nothing.
Reply in exactly this form:
Summary: one paragraph of at most {{words}} words.
Facts:
- one short fact per line (at most eight)"""

MERGE_RULES = f"""\
{SUMMARIZER_OPENING} Below are summaries of consecutive parts of one story, \
oldest first. Join them into one shorter summary for a narrator who will \
continue the story.
- Third person, past tense; call the protagonist by name ({{protagonist}}).
- Keep every name, place, promise, loss and death that later parts could \
need; drop what later parts made irrelevant.
- Invent nothing.
Reply in exactly this form:
Summary: one paragraph of at most {{words}} words."""

#: A summary's length in words, as asked; a summary is in every prompt.
SUMMARY_WORDS = 150
MERGED_WORDS = 220
#: Summarize the stretch that no longer fits once it is this many actions
#: past the last summary (the first stretch is summarized at once).
STRIDE = 4
#: The chain's share of the prompt budget before its oldest parts are merged,
#: and the most of the budget the prompt's summary may take whatever happens.
CHAIN_SHARE = 0.15
PROMPT_SHARE = 0.20
#: The most facts kept from one summary (each becomes an inferred memory).
MAX_FACTS = 8
MAX_FACT_CHARS = 240

_FACTS = re.compile(r"^\s*(?:\*\*)?facts?(?:\*\*)?\s*:\s*(?:\*\*)?\s*$", re.IGNORECASE | re.MULTILINE)
_SUMMARY_LABEL = re.compile(r"^\s*(?:\*\*)?summary(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


@dataclass(frozen=True)
class StoredSummary:
    """A summary row as plain values. `starts_after` is None for a summary
    that begins at the root; `through_depth` is `covers_through`'s depth."""

    id: int | str
    starts_after: int | str | None
    covers_through: int | str
    through_depth: int
    level: int
    text: str
    tokens: int

    def as_record(self) -> dict:
        return {
            "id": self.id,
            "level": self.level,
            "starts_after": self.starts_after,
            "covers_through": self.covers_through,
            "through_depth": self.through_depth,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class Reply:
    text: str
    facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """The messages for one summary, and the actions they cover (oldest first)."""

    messages: tuple[dict, ...]
    covered: tuple[HistoryAction, ...]


def _transcript(actions: Sequence[HistoryAction], protagonist: str) -> str:
    reader = f"{protagonist} (the reader)" if protagonist else "The reader"
    return "\n\n".join(
        f"{reader}: {a.text.strip()}" if a.kind == "player" else f"Narrator: {a.text.strip()}"
        for a in actions
        if a.text.strip()
    )


def summary_request(
    stretch: Sequence[HistoryAction],
    *,
    protagonist: str,
    capacity: int,
    count: Callable[[str], int],
) -> Request:
    """Asks for a summary of the oldest actions of `stretch` that fit in
    `capacity` tokens (at least one, cut from the front if it alone is too
    long), so a stretch of any length is summarized a window at a time."""
    system = SUMMARIZER_RULES.format(protagonist=protagonist or "the protagonist", words=SUMMARY_WORDS)
    room = capacity - count(system) - 20
    covered: list[HistoryAction] = []
    used = 0
    for action in stretch:
        cost = (action.tokens if action.tokens is not None else count(action.text)) + 6
        if covered and used + cost > room:
            break
        covered.append(action)
        used += cost
    text = _transcript(covered, protagonist)
    if used > room and room > 0:
        text = _tail_words(text, room)
    user = f"The passage:\n\n{text}"
    return Request(messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
                   covered=tuple(covered))


def merge_request(parts: Sequence[StoredSummary], *, protagonist: str) -> tuple[dict, ...]:
    system = MERGE_RULES.format(protagonist=protagonist or "the protagonist", words=MERGED_WORDS)
    body = "\n\n".join(f"Part {i}: {p.text.strip()}" for i, p in enumerate(parts, start=1))
    return ({"role": "system", "content": system}, {"role": "user", "content": body})


def _tail_words(text: str, tokens: int) -> str:
    """The end of `text` at roughly `tokens` tokens (words run about 1.3 tokens)."""
    words = text.split()
    keep = max(1, int(tokens / 1.4))
    return " ".join(words[-keep:])


def parse_reply(raw: str) -> Reply:
    """The summary and its facts, from a reply that may ignore the format.

    Small models drop labels, add bold, or end with a state block out of
    habit; whatever is not a fact is the summary, and an empty reply is an
    empty summary, which the worker treats as a failure.
    """
    text = strip_echoed_instructions(raw.split("<state>")[0]).strip()
    facts: list[str] = []
    split = _FACTS.search(text)
    if split:
        for line in text[split.end():].splitlines():
            fact = _BULLET.sub("", line).strip()
            if fact:
                facts.append(fact[:MAX_FACT_CHARS])
        text = text[: split.start()]
    text = _SUMMARY_LABEL.sub("", text.strip()).strip()
    return Reply(text=text, facts=tuple(dict.fromkeys(facts))[:MAX_FACTS])


def chain(summaries: Sequence[StoredSummary], lineage: Collection[int | str]) -> tuple[StoredSummary, ...]:
    """The segments a prompt uses, oldest first: from the deepest summary on
    the lineage back towards the root, at each point the one reaching
    furthest back (a merged summary over the parts it replaced).

    A summary is eligible only while the action it covers through is on the
    lineage; its start then is too, being an ancestor of it.
    """
    eligible = [s for s in summaries if s.covers_through in lineage]
    by_end: dict[int | str, list[StoredSummary]] = {}
    for s in eligible:
        by_end.setdefault(s.covers_through, []).append(s)
    ends = sorted(eligible, key=lambda s: (s.through_depth, s.level), reverse=True)
    if not ends:
        return ()
    picked: list[StoredSummary] = []
    cursor: int | str | None = ends[0].covers_through
    seen: set = set()
    while cursor is not None and cursor in by_end and cursor not in seen:
        seen.add(cursor)
        best = max(by_end[cursor], key=lambda s: (s.level, s.starts_after is None))
        picked.append(best)
        cursor = best.starts_after
    return tuple(reversed(picked))


def merge_plan(picked: Sequence[StoredSummary], *, limit_tokens: int) -> tuple[StoredSummary, ...]:
    """The oldest segments to merge, or () while the chain fits `limit_tokens`.

    Merging the oldest ones first keeps the recent past in finer detail,
    as a reader's memory of a long book does.
    """
    if len(picked) < 2 or sum(p.tokens for p in picked) <= limit_tokens:
        return ()
    parts: list[StoredSummary] = []
    for p in picked:
        parts.append(p)
        if len(parts) >= 2 and sum(x.tokens for x in parts) * 2 >= limit_tokens:
            break
    return tuple(parts)


def as_prompt_summary(
    picked: Sequence[StoredSummary], *, limit_tokens: int, count: Callable[[str], int]
) -> Summary | None:
    """One summary for the prompt: the chain's texts, oldest first, within
    `limit_tokens`.

    The summary is protected (never dropped for room), so it must be
    bounded whatever a model wrote: past the limit the oldest parts are
    left out (a merge will fold them in), and a newest part that alone is
    too long keeps its end, the most recent story.
    """
    kept: list[StoredSummary] = []
    used = 0
    for part in reversed(picked):
        if kept and used + part.tokens > limit_tokens:
            break
        kept.insert(0, part)
        used += part.tokens
    if not kept:
        return None
    text = "\n\n".join(p.text.strip() for p in kept if p.text.strip())
    if count(text) > limit_tokens:
        text = truncate_to_last_tokens(text, limit_tokens)
    last = kept[-1]
    return Summary(
        text=text,
        covers_through=last.covers_through,
        covers_actions=last.through_depth + 1,
        parts=tuple(p.as_record() for p in kept),
    )


def due(*, summarized_depth: int | None, dropped_through_depth: int | None) -> bool:
    """Whether the stretch that fell out of the window should be summarized
    now: at once the first time, then every STRIDE actions."""
    if dropped_through_depth is None:
        return False
    if summarized_depth is None:
        return True
    return dropped_through_depth - summarized_depth >= STRIDE
