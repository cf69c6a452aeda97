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

Where Loremaster departs from SillyTavern, on purpose: rolls are seeded
(worldinfo.rolls), not `Math.random()`; the budget counts every entry taken
in earlier passes, where SillyTavern counts only their recursion text (so a
`preventRecursion` entry escaped it); `ignore_budget` is read as SillyTavern
1.12.7 reads `ignoreBudget`; a group member that lost in one group is out of
the running in its others, and "already fired" means a member of that
group fired, not one with the same group string; an edited entry's timers
are dropped (SillyTavern keeps the stale effect until it ends); macros are
filled in the keys group scoring counts; the character filter compares
names without case and reads no tags; content decorators (`@@activate`)
are not read; activation by meaning is tried after the keys (the outcome is
SillyTavern's, the decision says "key" when a key matched).

Entries are told apart by `Entry.key`, which must be unique in one
evaluation. The prepared book (worldinfo.prepared) is reused while the
entries, books and macros are equal: a caller that hands the same Entry
objects each turn pays its preparation once.
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
from worldinfo.prepared import Book, Item, fixed_refusal, prepared
from worldinfo.records import Count, Decision, Entry, Inputs, RegexSearch, Result
from worldinfo.rolls import roll

#: Most contents whose probe hits (and indexes) a prepared book keeps.
CONTENTS_KEPT = 20_000
#: Most skipped decisions a prepared book keeps for later turns (rolls vary by seed).
SKIPPED_KEPT = 20_000
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
    book: Book
    out: set[int] = field(default_factory=set)
    taken: dict[str, Taken] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    skipped: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)
    hits: dict[tuple[str, bool], set[int]] = field(default_factory=dict)
    used: int = 0
    overflowed: bool = False
    passes: int = 0
    level: int = 0
    notes: list[str] = field(default_factory=list)

    def skip(self, entry: Entry, how: str, reason: str, until: int | None = None, *, weak: bool = False) -> None:
        """Record why an entry is out; a later pass's reason replaces an
        earlier one, except a weak one (excluded from recursion, or turned
        away by a group that already fired), which says less than what the
        entry's earlier pass found."""
        if weak and entry.key in self.skipped:
            return
        self.skipped[entry.key] = (how, reason, until)

    def part_hits(self, part: str, case_sensitive: bool) -> set[int]:
        """The items with a primary key's probe in this part: for a
        recursion chunk, the union of its contents' (kept with the book,
        since contents come back turn after turn)."""
        memo = (part, case_sensitive)
        found = self.hits.get(memo)
        if found is None:
            pieces = self.buffer.pieces.get(part)
            if pieces is None:
                found = self._hits(part, case_sensitive, keep=False)
            else:
                kept = self.book.content_hits
                found = set()
                for piece in pieces:
                    piece_hits = kept.get((piece, case_sensitive))
                    if piece_hits is None:
                        if len(kept) > CONTENTS_KEPT:
                            kept.clear()
                        piece_hits = kept[(piece, case_sensitive)] = self._hits(piece, case_sensitive, keep=True)
                    found |= piece_hits
            self.hits[memo] = found
        return found

    def _hits(self, text: str, case_sensitive: bool, *, keep: bool) -> set[int]:
        probes = self.book.probes[case_sensitive]
        found = set()
        for probe in probes.keys() & self.matcher.index(self.matcher.text(text, case_sensitive), keep=keep).subs:
            found.update(probes[probe])
        return found


def evaluate(inputs: Inputs, *, count: Count, regex_search: RegexSearch | None = None) -> Result:
    """Which entries go into this turn's prompt and where, every entry's
    decision, and the timed state to store with the narration."""
    settings = turn_settings.combine(list(inputs.books.values()))
    timers = timed.check(inputs.timed, inputs.entries, inputs.chat_length)
    macros = lowered(inputs.macros)
    book = prepared(inputs, macros)
    buffer = ScanBuffer(inputs.messages, inputs.sources)
    run = Evaluation(inputs=inputs, count=count, settings=settings, book=book,
                     matcher=Matcher(regex_search, kept=book.content_indexes, pieces=buffer.pieces),
                     budget=turn_settings.budget(settings, inputs.budget_tokens), macros=macros,
                     timers=timers, buffer=buffer)
    cooling = [run.book.by_key[key] for key in timers.cooldown if key in run.book.by_key]
    for item in run.book.checked + cooling:
        refusal = fixed_refusal(item.entry, inputs, timers)
        if refusal:
            run.skip(item.entry, *refusal)
            run.out.add(item.index)
    if run.book.items:
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
    levels = list(run.book.delay_levels)
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
                             for item in _live(run, state)) if c is not None]
        found.sort(key=lambda c: (not run.timers.is_sticky(c.item.entry), c.item.index))
        new = _take(run, _settle_groups(run, found))
        for_recursion = [t for t in new if not t.item.entry.prevent_recursion]
        state, current_level = _next_state(run, state, for_recursion, levels, current_level)
        if state:
            run.buffer.add_recursion([t.content for t in for_recursion])


def _live(run: Evaluation, state: int) -> list[Item]:
    """The items this pass must look at, in SillyTavern's order: those
    always looked at, the sticky and the admitted by meaning, and those
    with a key's probe in their scan text; every other one has no key in
    it (its decision says so at the end)."""
    book = run.book
    chosen = set(book.always)
    chosen.update(book.by_key[key].index for key in run.timers.sticky if key in book.by_key)
    chosen.update(book.by_key[key].index for key in run.inputs.by_meaning
                  if key in book.by_key and book.by_key[key].vectorizable)
    for (scan_depth, book_depth, names, flags, case), members in book.readers.items():
        depth = run.buffer.depth(scan_depth, book_depth)
        for part in run.buffer.parts(depth, names, flags, state != MIN_ACTIVATIONS):
            chosen.update(members & run.part_hits(part, case))
    chosen -= run.out
    return [book.items[index] for index in sorted(chosen)]


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


def _settle_groups(run: Evaluation, found: list[Candidate]) -> list[Candidate]:
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

    lost, turned_away = filter_groups(members, earlier, score=key_score, draw=draw)
    for key, reason in lost.items():
        run.skip(by_key[key].item.entry, "group", reason, weak=key in turned_away)
    return [c for c in found if c.item.entry.key not in lost]


def _member(candidate: Candidate, run: Evaluation) -> Member:
    entry = candidate.item.entry
    return Member(key=entry.key, title=entry.title, groups=entry.groups, order=entry.order,
                  weight=entry.group_weight, prioritize=entry.group_override, scored=candidate.item.scored,
                  group_scoring=candidate.item.book_scoring or entry.use_group_scoring is True,
                  sticky=run.timers.is_sticky(entry),
                  timed_out=run.timers.is_cooling(entry) or run.timers.is_delayed(entry))


def _take(run: Evaluation, candidates: list[Candidate]) -> list[Taken]:
    """Probability, then the budget, in SillyTavern's order."""
    new = []
    for candidate in candidates:
        entry = candidate.item.entry
        chance = ""
        if entry.use_probability and entry.probability != 100 and not run.timers.is_sticky(entry):
            rolled = roll(run.inputs.seed, "probability", entry.key) * 100
            if rolled > entry.probability:
                run.failed.add(entry.key)
                run.out.add(candidate.item.index)
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
        run.out.add(candidate.item.index)
        run.skipped.pop(entry.key, None)
        new.append(taken)
    return new


def _decisions(run: Evaluation, taken: list[Taken], state) -> tuple[Decision, ...]:
    """Activated entries in the order taken, then every other entry in the
    order given; an entry no rule spoke for had no key in its scan text."""
    decisions = []
    for t in taken:
        entry = t.item.entry
        effect = state.sticky.get(entry.key) or state.cooldown.get(entry.key)
        decisions.append(_decision(entry, True, t.candidate.how, t.candidate.reason, t.tokens, t.level,
                                   effect.end if effect else None))
    given = list(_defaults(run))
    position = run.book.position
    for key in run.taken:
        given[position[key]] = None
    made = run.book.skipped
    if len(made) > SKIPPED_KEPT:
        made.clear()
    for key, reason in run.skipped.items():
        decision = made.get((key, reason))
        if decision is None:
            entry = run.book.by_key[key].entry
            decision = made[(key, reason)] = _decision(entry, False, *reason[:2], entry.tokens, 0, reason[2])
        given[position[key]] = decision
    decisions += [d for d in given if d is not None] if run.taken else given
    return tuple(decisions)


def _defaults(run: Evaluation) -> list[Decision]:
    """The "no key found" decision of every entry, in the order given, for
    this evaluation's scan depth (kept with the prepared book, stored only
    once whole, as another thread may read the book meanwhile)."""
    skew = run.buffer.skew
    defaults = run.book.decisions.get(skew)
    if defaults is None:
        defaults = []
        for item in run.book.given:
            depth = run.buffer.depth(item.scan_depth, item.book_depth)
            reason = (f"no key found (scan depth {depth})" if depth > 0
                      else "no key found (scan depth 0: nothing scanned)")
            defaults.append(_decision(item.entry, False, "no_key", reason, item.entry.tokens, 0, None))
        run.book.decisions[skew] = defaults
    return defaults


def _decision(entry: Entry, activated: bool, how: str, reason: str, tokens: int, level: int,
              until: int | None) -> Decision:
    return Decision(entry=entry.title, key=entry.key, book=entry.book, activated=activated, how=how,
                    reason=reason, position=entry.position, depth=entry.depth, role=entry.role,
                    order=entry.order, tokens=tokens, recursion_level=level, until=until)
