"""Where activated entries go, as SillyTavern builds the prompt.

SillyTavern sorts the activated entries by order, highest first (a stable
sort, so ties keep their activation order), then puts each at the front of
its position's list: the final text runs from the lowest order to the
highest, and among equal orders the later-activated entry comes first. At
depth, one list per (depth, role), in the order those pairs first appear in
that sort; entries merged with a newline. An entry whose content is empty
adds nothing.
"""

from __future__ import annotations

from worldinfo.records import AFTER, AN_BOTTOM, AN_TOP, AT_DEPTH, BEFORE, EM_BOTTOM, EM_TOP, Insertion

_POSITIONS = (BEFORE, AFTER, AN_TOP, AN_BOTTOM, EM_TOP, EM_BOTTOM)


def place(activated: list[tuple[object, str]]) -> tuple[Insertion, ...]:
    """Insertions for (entry, filled content) pairs in activation order."""
    lists: dict[object, list[tuple[str, str]]] = {}
    for entry, content in sorted(activated, key=lambda pair: -pair[0].order):
        if not content:
            continue
        slot = (AT_DEPTH, entry.depth, entry.role) if entry.position == AT_DEPTH else entry.position
        lists.setdefault(slot, []).insert(0, (entry.key, content))
    insertions = [_insertion(position, lists[position]) for position in _POSITIONS if position in lists]
    insertions += [_insertion(AT_DEPTH, items, slot[1], slot[2])
                   for slot, items in lists.items() if isinstance(slot, tuple)]
    return tuple(insertions)


def _insertion(position: int, items: list[tuple[str, str]], depth: int = 0, role: int = 0) -> Insertion:
    """One place's text; `entries` holds the entry keys in the text's order."""
    return Insertion(position=position, text="\n".join(text for _, text in items), depth=depth, role=role,
                     entries=tuple(key for key, _ in items))
