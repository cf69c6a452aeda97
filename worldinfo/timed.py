"""Sticky, cooldown and delay, as SillyTavern's WorldInfoTimedEffects
keeps them, over the lineage's TimedState instead of chat metadata.

Lengths are SillyTavern's `chat.length` (Inputs.chat_length). An effect
recorded at a length the chat has not passed since (a regeneration at the
same length) is dropped unless protected; one whose interval has passed is
dropped, and a sticky one that ends starts the entry's cooldown there,
protected. An effect whose entry was edited (another fingerprint) is
dropped: editing an entry resets its timers. One whose entry is absent (a
book not in this turn) is kept until its interval passes. Delay needs no
state: an entry with delay N is held while the chat is shorter than N.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worldinfo.records import Entry, TimedEffect, TimedState


@dataclass
class Timers:
    """The effects active in this evaluation and the state being written."""

    chat_length: int
    sticky: dict[str, TimedEffect] = field(default_factory=dict)
    cooldown: dict[str, TimedEffect] = field(default_factory=dict)
    state: dict[str, dict[str, TimedEffect]] = field(default_factory=dict)

    def is_sticky(self, entry: Entry) -> bool:
        return entry.key in self.sticky

    def is_cooling(self, entry: Entry) -> bool:
        return entry.key in self.cooldown

    def is_delayed(self, entry: Entry) -> bool:
        return bool(entry.delay) and self.chat_length < entry.delay


def check(state: TimedState, entries: tuple[Entry, ...], chat_length: int) -> Timers:
    """SillyTavern's checkTimedEffects: sticky first (its ends may start
    cooldowns), then cooldown."""
    timers = Timers(chat_length, state={"sticky": dict(state.sticky), "cooldown": dict(state.cooldown)})
    if not state.sticky and not state.cooldown:
        return timers
    by_key = {entry.key: entry for entry in entries}
    for kind, active in (("sticky", timers.sticky), ("cooldown", timers.cooldown)):
        stored = timers.state[kind]
        for key, effect in list(stored.items()):
            entry = by_key.get(key)
            if chat_length <= effect.start and not effect.protected:
                del stored[key]
            elif entry is None:
                if chat_length >= effect.end:
                    del stored[key]
            elif entry.fingerprint != effect.fingerprint or not getattr(entry, kind):
                del stored[key]
            elif chat_length >= effect.end:
                del stored[key]
                if kind == "sticky" and entry.cooldown:
                    timers.state["cooldown"][key] = _effect(entry, "cooldown", chat_length, protected=True)
            else:
                active[key] = effect
    return timers


def settle(timers: Timers, activated: list[Entry]) -> TimedState:
    """SillyTavern's setTimedEffects: an activated entry with sticky or
    cooldown starts that effect now, unless it already has one."""
    for entry in activated:
        for kind in ("sticky", "cooldown"):
            if getattr(entry, kind) and entry.key not in timers.state[kind]:
                timers.state[kind][entry.key] = _effect(entry, kind, timers.chat_length, protected=False)
    return TimedState(sticky=dict(timers.state["sticky"]), cooldown=dict(timers.state["cooldown"]))


def _effect(entry: Entry, kind: str, chat_length: int, *, protected: bool) -> TimedEffect:
    return TimedEffect(fingerprint=entry.fingerprint, start=chat_length,
                       end=chat_length + int(getattr(entry, kind)), protected=protected)
