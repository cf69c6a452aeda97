"""One turn's World Info: SillyTavern's `checkWorldInfo`, pass by pass.

`evaluate` scans the story for every entry, activates those whose keys are
found (or that are constant, sticky, or admitted by meaning), settles the
inclusion groups, rolls probability, takes entries into the budget, and
goes on while the passes find something: recursion (activated contents
scanned again, `recursive` on), min activations (one message further back
per pass until enough entries fired), and the "delay until recursion"
levels still waiting. Then it places the activated entries and writes the
timed effects the next turn continues from.

When several books feed one turn, the turn-level settings combine by one
rule (worldinfo.settings): the most permissive value — recursion if any book
has it, the largest max recursion steps with 0 (unlimited) winning, the
largest min activations and its depth limit, the largest budget share and
the largest cap with 0 (no cap) winning. Per-entry defaults come from the
entry's own book.

The budget counts, as SillyTavern's does, every entry taken (constants
too) in the order taken: sticky ones first, then by order. An entry that
would reach the budget is left out and ends the taking, except entries that
ignore the budget, which are still taken. (SillyTavern counts the tokens of
the joined text; Loremaster adds each entry's own count, which the caller
made once.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldinfo import settings as turn_settings
from worldinfo import timed
from worldinfo.activation import Candidate, consider
from worldinfo.buffer import ScanBuffer
from worldinfo.groups import Member, filter_groups
from worldinfo.macros import fill, lowered
from worldinfo.matching import Matcher, score
from worldinfo.placement import place
from worldinfo.prepared import Item, fixed_refusal, prepare_items
from worldinfo.records import Count, Decision, Entry, Inputs, RegexSearch, Result
from worldinfo.rolls import roll

# SillyTavern's scan_state.
NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = range(4)


@dataclass
class Taken:
    item: Item
    candidate: Candidate
    content: str
    tokens: int
    level: int


@dataclass
class Evaluation:
    """The state one evaluation carries from pass to pass."""

    inputs: Inputs
    count: Count
    matcher: Matcher
    settings: turn_settings.TurnSettings
    budget: int
    macros: dict[str, str]
    timers: timed.Timers
    buffer: ScanBuffer
    items: list[Item] = field(default_factory=list)
    taken: dict[str, Taken] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    skipped: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)
    used: int = 0
    overflowed: bool = False
    passes: int = 0
    level: int = 0
    notes: list[str] = field(default_factory=list)

    def skip(self, entry: Entry, how: str, reason: str, until: int | None = None, *, weak: bool = False) -> None:
        """Record why an entry is out; a later pass's reason replaces an
        earlier one, except a weak one (excluded from recursion), which says
        less than what the entry's first pass found."""
        if weak and entry.key in self.skipped:
            return
        self.skipped[entry.key] = (how, reason, until)


def evaluate(inputs: Inputs, *, count: Count, regex_search: RegexSearch | None = None) -> Result:
    """Which entries go into this turn's prompt and where, every entry's
    decision, and the timed state to store with the narration."""
    settings = turn_settings.combine(list(inputs.books.values()))
    timers = timed.check(inputs.timed, inputs.entries, inputs.chat_length)
    run = Evaluation(inputs=inputs, count=count, matcher=Matcher(regex_search), settings=settings,
                     budget=turn_settings.budget(settings, inputs.budget_tokens), macros=lowered(inputs.macros),
                     timers=timers, buffer=ScanBuffer(inputs.messages, inputs.sources))
    for item in prepare_items(inputs, run.macros, timers):
        refusal = fixed_refusal(item.entry, inputs, timers)
        if refusal:
            run.skip(item.entry, *refusal)
        else:
            run.items.append(item)
    if run.items:
        _scan(run)
    taken = list(run.taken.values())
    state = timed.settle(timers, [t.item.entry for t in taken])
    return Result(
        insertions=place([(t.item.entry, t.content) for t in taken]),
        decisions=_decisions(run, taken, state), budget=run.budget, used=run.used, timed=state,
        scanned_depth=settings.scan_depth + run.buffer.skew, passes=run.passes, notes=tuple(run.notes),
    )


def _scan(run: Evaluation) -> None:
    """SillyTavern's pass loop, with its rules for the next pass."""
    levels = sorted({int(e.delay_until_recursion) for e in run.inputs.entries if e.delay_until_recursion})
    current_level = levels.pop(0) if levels else 0
    state = INITIAL
    steps = run.settings.max_recursion_steps
    while state:
        if steps and steps <= run.passes:
            run.notes.append(f"stopped at the most recursion steps ({steps})")
            break
        run.passes += 1
        if state == RECURSION:
            run.level += 1
        found = [c for c in (consider(item, state == RECURSION, state == MIN_ACTIVATIONS, current_level, run)
                             for item in run.items if item.entry.key not in run.taken
                             and item.entry.key not in run.failed) if c is not None]
        found.sort(key=lambda c: (not c.item.sticky, c.item.index))
        new = _take(run, _settle_groups(run, found, state))
        for_recursion = [t for t in new if not t.item.entry.prevent_recursion]
        state, current_level = _next_state(run, state, for_recursion, levels, current_level)
        if state:
            run.buffer.add_recursion("\n".join(t.content for t in for_recursion))


def _next_state(run: Evaluation, state: int, for_recursion: list[Taken], levels: list[int],
                current_level: int) -> tuple[int, int]:
    recursive = run.settings.recursive and not run.overflowed
    following = NONE
    if recursive and (for_recursion or (state == MIN_ACTIVATIONS and run.buffer.recursion)):
        following = RECURSION
    wanted = run.settings.min_activations
    if not following and not run.overflowed and wanted > 0 and len(run.taken) < wanted:
        depth = run.settings.scan_depth + run.buffer.skew
        limit = run.settings.min_activations_depth_max
        if not ((limit > 0 and depth > limit) or depth > len(run.inputs.messages)):
            following = MIN_ACTIVATIONS
            run.buffer.advance()
        else:
            run.notes.append(f"min activations not reached ({len(run.taken)} of {wanted}) at depth {depth}")
    if not following and levels:
        following = RECURSION
        current_level = levels.pop(0)
    return following, current_level


def _settle_groups(run: Evaluation, found: list[Candidate], state: int) -> list[Candidate]:
    """The candidates left once SillyTavern's inclusion-group rules ran."""
    grouped = [c for c in found if c.item.entry.groups]
    if not grouped:
        return found
    earlier = {}
    for taken in run.taken.values():
        for group in taken.item.entry.groups:
            earlier.setdefault(group, taken.item.entry.title)
    by_key = {c.item.entry.key: c for c in grouped}
    members = [_member(c, run) for c in grouped]

    def key_score(key: str) -> int:
        item = by_key[key].item
        parts = by_key[key].parts
        primary = [run.matcher.match(k, parts, item.case_sensitive) if k else "missing" for k in item.keys]
        second = [run.matcher.match(k, parts, item.case_sensitive) if k else "missing" for k in item.secondary]
        return score(item.entry.logic, primary, second)

    def draw(group: str) -> float:
        return roll(run.inputs.seed, "group", group, run.passes)

    lost = filter_groups(members, earlier, score=key_score, draw=draw)
    for key, reason in lost.items():
        run.skip(by_key[key].item.entry, "group", reason)
    return [c for c in found if c.item.entry.key not in lost]


def _member(candidate: Candidate, run: Evaluation) -> Member:
    entry = candidate.item.entry
    return Member(key=entry.key, title=entry.title, groups=entry.groups, order=entry.order,
                  weight=entry.group_weight, prioritize=entry.group_override, scored=candidate.item.scored,
                  group_scoring=candidate.item.book_scoring or entry.use_group_scoring is True,
                  sticky=candidate.item.sticky,
                  timed_out=run.timers.is_cooling(entry) or run.timers.is_delayed(entry))


def _take(run: Evaluation, candidates: list[Candidate]) -> list[Taken]:
    """Probability, then the budget, in SillyTavern's order."""
    new = []
    for candidate in candidates:
        entry = candidate.item.entry
        chance = ""
        if entry.use_probability and entry.probability != 100 and not candidate.item.sticky:
            rolled = roll(run.inputs.seed, "probability", entry.key) * 100
            if rolled > entry.probability:
                run.failed.add(entry.key)
                run.skip(entry, "probability", f"failed its {entry.probability} % roll (rolled {rolled:.1f})")
                continue
            chance = f"; passed its {entry.probability} % roll (rolled {rolled:.1f})"
        content = fill(entry.content, run.macros)
        tokens = entry.tokens if content == entry.content else run.count(content)
        if not entry.ignore_budget and (run.overflowed or run.used + tokens >= run.budget):
            if not run.overflowed:
                run.notes.append(f"World Info budget ({run.budget:,} tokens) reached after {len(run.taken)} entries")
            run.overflowed = True
            run.skip(entry, "budget", f"over the World Info budget ({run.budget:,} tokens)")
            continue
        run.used += tokens
        candidate.reason += chance
        taken = Taken(candidate.item, candidate, content, tokens, run.level)
        run.taken[entry.key] = taken
        run.skipped.pop(entry.key, None)
        new.append(taken)
    return new


def _decisions(run: Evaluation, taken: list[Taken], state) -> tuple[Decision, ...]:
    decisions = []
    for t in taken:
        entry = t.item.entry
        effect = state.sticky.get(entry.key) or state.cooldown.get(entry.key)
        decisions.append(_decision(entry, True, t.candidate.how, t.candidate.reason, t.tokens, t.level,
                                   effect.end if effect else None))
    for entry in run.inputs.entries:
        if entry.key in run.skipped:
            how, reason, until = run.skipped[entry.key]
            decisions.append(_decision(entry, False, how, reason, entry.tokens, 0, until))
    return tuple(decisions)


def _decision(entry: Entry, activated: bool, how: str, reason: str, tokens: int, level: int,
              until: int | None) -> Decision:
    return Decision(entry=entry.title, key=entry.key, book=entry.book, activated=activated, how=how,
                    reason=reason, position=entry.position, depth=entry.depth, role=entry.role,
                    order=entry.order, tokens=tokens, recursion_level=level, until=until)
