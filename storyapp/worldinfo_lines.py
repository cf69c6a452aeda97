"""The inspector's World Info section, read from a stored report.

A book of a hundred entries makes a hundred decisions a turn, nearly all
"no key found": so the activated entries are listed one by one (where they
went, what they cost, why), and the rest are grouped by their reason, each
group folded, the commonest last. Plain values in (the report's
`world_info`, which an imported bundle may have malformed), plain values
out; nothing unreadable becomes a 500.
"""

from __future__ import annotations

from . import reportlines

#: Each reason an entry stayed out, in the reader's words, in the order the
#: groups are shown (the rarest and most telling first).
SKIPPED = {
    "budget": "Over the World Info budget",
    "group": "Lost its inclusion group",
    "probability": "Failed its probability roll",
    "cooldown": "Cooling down",
    "delay": "Delayed",
    "secondary": "Held back by its secondary keys",
    "filter": "Excluded by its character filter",
    "trigger": "Not for this kind of generation",
    "recursion_delay": "Waiting for recursion",
    "disabled": "Disabled",
    "no_key": "No key found",
}
#: Where an activated entry went, in the reader's words.
PLACES = {
    "before": "before the narrator's rules",
    "after": "after the narrator's rules",
    "an_top": "top of the author's note",
    "an_bottom": "bottom of the author's note",
    "em_top": "after the narrator's rules (example messages' top)",
    "em_bottom": "after the narrator's rules (example messages' bottom)",
}


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _item(raw: dict) -> dict:
    position = str(raw.get("position") or "")
    place = PLACES.get(position, position)
    if position == "at_depth":
        place = f"at depth {_int(raw.get('depth'))} as a {raw.get('role') or 'system'} message"
    until = raw.get("until")
    return {
        "entry": str(raw.get("entry") or "(untitled)"),
        "source": str(raw.get("source") or ""),
        "reason": str(raw.get("reason") or ""),
        "how": str(raw.get("how") or ""),
        "place": place,
        "order": _int(raw.get("order")),
        "tokens": _int(raw.get("tokens")),
        "until": until if isinstance(until, int) and not isinstance(until, bool) else None,
    }


def _items(value) -> list[dict]:
    return [_item(i) for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def world_info(value) -> dict | None:
    """The section's rows: the activated entries, the skipped ones grouped
    by reason, the budget line and the engine's notes; None for a report
    from before World Info (or a campaign without a lorebook)."""
    if not isinstance(value, dict):
        return None
    activated, skipped = _items(value.get("activated")), _items(value.get("skipped"))
    if not activated and not skipped:
        return None
    groups: dict[str, list[dict]] = {}
    for item in skipped:
        groups.setdefault(item["how"] if item["how"] in SKIPPED else "other", []).append(item)
    order = list(SKIPPED)
    ordered = sorted(groups.items(), key=lambda g: order.index(g[0]) if g[0] in order else len(order))
    notes = value.get("notes")
    budget, used = _int(value.get("budget")), _int(value.get("used"))
    return {
        "activated": activated,
        "groups": [{"how": how, "title": SKIPPED.get(how, "Other"), "items": items} for how, items in ordered],
        "considered": len(activated) + len(skipped),
        "budget_line": reportlines.world_info_line(
            considered=len(activated) + len(skipped), activated=len(activated), budget=budget, used=used,
        ),
        "rule": str(value.get("rule") or ""),
        "notes": [str(n) for n in notes if isinstance(n, str)] if isinstance(notes, list) else [],
    }
