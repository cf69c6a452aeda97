"""Turning a stored context report into what the inspector shows.

Reads only the snapshot's report: the inspector must show what the narrator
was given then, not what the campaign's sources say now.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Colour groups for the budget picture, by section label.
GROUPS = {
    "narrator": "rules",
    "state_rule": "rules",
    "length_hint": "rules",
    "state_reminder": "rules",
    "campaign_canon": "canon",
    "knowledge_rule": "knowledge",
    "always_canon": "knowledge",
    "knowledge_canon": "knowledge",
    "knowledge_reference": "knowledge",
    "knowledge_inspiration": "knowledge",
    "ai_instructions": "campaign",
    "persona": "campaign",
    "plot_essentials": "campaign",
    "authors_note": "campaign",
    "history": "history",
    "recent_history": "history",
    "story_summary": "memory",
    "used_memories": "memory",
    "narrative_state": "state",
    "state_refusals": "state",
}


@dataclass(frozen=True)
class Bar:
    label: str
    tokens: int
    percent: float
    group: str


def budget_bars(report: dict) -> list[Bar]:
    """Each section's share of the budget, then the reply reserve and what was left unused."""
    tokens = report.get("tokens", {})
    budget = max(1, int(tokens.get("budget") or 1))
    sections = report.get("sections", [])
    bars = [
        Bar(s["label"], s["tokens"], 100 * s["tokens"] / budget, GROUPS.get(s["label"], "other"))
        for s in sections
    ]
    reserve = int(tokens.get("output_reserve") or 0)
    bars.append(Bar("reply reserve", reserve, 100 * reserve / budget, "reserve"))
    unused = max(0, budget - int(tokens.get("total") or 0) - reserve)
    bars.append(Bar("unused", unused, 100 * unused / budget, "unused"))
    return bars


def passage_key(record: dict) -> str:
    """A passage's identity across turns: the file and the passage in it."""
    name = record.get("filename") or record.get("title") or "source"
    return f"{name} · passage {int(record.get('chunk_index', 0)) + 1}"


def _keys(report: dict) -> dict[str, set[str]]:
    knowledge = report.get("knowledge") or {}
    memories = (report.get("memories") or {}).get("used") or []
    return {
        "sections": {s["label"] for s in report.get("sections", [])},
        "passages": {passage_key(p) for p in knowledge.get("used", [])},
        "memories": {m.get("text", "") for m in memories},
    }


def diff(report: dict, previous: dict | None) -> dict | None:
    """What entered and what left the prompt since the previous turn's snapshot."""
    if previous is None:
        return None
    now, before = _keys(report), _keys(previous)
    return {
        kind: {"entered": sorted(now[kind] - before[kind]), "left": sorted(before[kind] - now[kind])}
        for kind in now
    }
