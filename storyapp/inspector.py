"""Turning a stored context report into what the inspector shows.

Reads only the snapshot's report: the inspector must show what the narrator
was given then, not what the campaign's sources say now.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextbuild.narrative import NarrativeState
from contextbuild.rules import PROMPT_ENTITIES, PROMPT_THREADS
from contextbuild.rules import HIDDEN_MARKER

from . import reportlines, worldinfo_lines

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
    "cast": "campaign",
    "director_note": "campaign",
    "plot_essentials": "campaign",
    "authors_note": "campaign",
    "history": "history",
    "recent_history": "history",
    "player_input": "history",
    "turn_cue": "history",
    "story_summary": "memory",
    "used_memories": "memory",
    "narrative_state": "state",
    "state_refusals": "state",
    "world_info_before": "knowledge",
    "world_info_after": "knowledge",
    "world_info_an_top": "knowledge",
    "world_info_an_bottom": "knowledge",
}


#: What each section is, in the reader's words (the ids stay in the report).
LABELS = {
    "narrator": "Narrator rules",
    "state_rule": "How to report story state",
    "length_hint": "Reply length",
    "state_reminder": "State reminder",
    "campaign_canon": "Canon rules",
    "knowledge_rule": "How to use lore",
    "always_canon": "Lore: always-included canon",
    "knowledge_canon": "Lore: canon",
    "knowledge_reference": "Lore: reference",
    "knowledge_inspiration": "Lore: inspiration",
    "ai_instructions": "AI instructions",
    "persona": "Your character",
    "cast": "Who is present",
    "director_note": "Director's note (game master only)",
    "plot_essentials": "Plot essentials",
    "authors_note": "Author's note",
    "history": "Story so far",
    "recent_history": "Recent story",
    "player_input": "Your action",
    "turn_cue": "Cue to continue",
    "story_summary": "Story summary",
    "used_memories": "Memories",
    "narrative_state": "Current state",
    "state_refusals": "Refused state changes",
    "world_info_before": "World Info: before the narrator's rules",
    "world_info_after": "World Info: after the narrator's rules",
    "world_info_an_top": "World Info: top of the author's note",
    "world_info_an_bottom": "World Info: bottom of the author's note",
    "reply reserve": "Reserved for the reply",
    "unused": "Unused",
}


#: World Info's at-depth sections are labelled `world_info_depth_<n>_<role>`.
DEPTH_PREFIX = "world_info_depth_"


def label(section_id: str) -> str:
    if section_id.startswith(DEPTH_PREFIX):
        depth, _, role = section_id[len(DEPTH_PREFIX):].partition("_")
        return f"World Info: at depth {depth} ({role or 'system'} message)"
    return LABELS.get(section_id, section_id.replace("_", " ").capitalize())


def group(section_id: str) -> str:
    return "knowledge" if section_id.startswith(DEPTH_PREFIX) else GROUPS.get(section_id, "other")


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _dicts(value) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


#: Token figures that are ratios, not counts.
RATIOS = {"ratio", "ratio_budgeted", "ratio_on_profile", "ratio_learned"}
#: Counts that are absent, not zero, when a report lacks them.
OPTIONAL_COUNTS = {"server_prompt_tokens", "server_compared_to"}
#: The role names the inspector shows for each message.
SPEAKERS = {"system": "System", "user": "Reader", "assistant": "Narrator", "prompt": "Prompt (one text)"}


def _number(key: str, value):
    if key in RATIOS:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if key == "server_count_source":
        return str(value or "")
    if key in OPTIONAL_COUNTS and value is None:
        return None
    return _int(value)


def _sections(report: dict) -> list[dict]:
    """The report's sections, with the history's one-per-action sections
    shown as one "Story so far" row (a long story has hundreds)."""
    sections: list[dict] = []
    for section in _dicts(report.get("sections")):
        section_id = str(section.get("label") or "section")
        text = str(section.get("text") or "")
        block = str(section.get("block") or "")
        if block == "history":
            speaker = "Narrator" if section_id == "narration" else "Reader"
            if sections and sections[-1]["id"] == "history" and sections[-1]["block"] == "history":
                merged = sections[-1]
                merged["tokens"] += _int(section.get("tokens"))
                merged["text"] += f"\n\n{speaker}: {text}"
                merged["count"] += 1
                merged["label"] = f"{label('history')} ({merged['count']} messages)"
                continue
            section_id, text = "history", f"{speaker}: {text}"
        sections.append({
            "id": section_id, "label": label(section_id), "block": block,
            "tokens": _int(section.get("tokens")), "text": text, "count": 1,
        })
    # After merging: a merged history row holds narrator-only lore if any part does.
    for section in sections:
        section["hidden"] = HIDDEN_MARKER in section["text"]
    return sections


def messages(snapshot) -> list[dict]:
    """The messages as sent, for the inspector; a snapshot from before the
    prompt was a conversation shows its two texts as the two messages they were."""
    stored = _dicts(snapshot.messages)
    if not stored:
        stored = [{"role": "system", "content": snapshot.system_text}, {"role": "user", "content": snapshot.story_text}]
    return [
        {"role": str(m.get("role")), "speaker": SPEAKERS.get(str(m.get("role")), str(m.get("role"))),
         "content": str(m.get("content") or ""), "hidden": HIDDEN_MARKER in str(m.get("content") or "")}
        for m in stored
    ]


def _event_line(event: dict) -> str:
    """One applied state event in a line: its type, its id, then its other fields."""
    kind = str(event.get("type") or "event")
    head = f"{kind} {event['id']}" if isinstance(event.get("id"), str) else kind
    rest = [f"{key} {_plain(value)}" for key, value in event.items() if key not in ("type", "id") and value not in (None, "")]
    return f"{head}: {', '.join(rest)}" if rest else head


def _plain(value) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _state_events(value) -> dict | None:
    if not isinstance(value, dict):
        return None
    refused = value.get("refused")
    clamped = value.get("clamped")
    applied = _dicts(value.get("applied"))
    return {
        "applied": applied,
        "applied_lines": [_event_line(e) for e in applied],
        "refused": [str(r) for r in refused] if isinstance(refused, list) else [],
        "clamped": [str(c) for c in clamped] if isinstance(clamped, list) else [],
        "note": str(value.get("note") or ""),
    }


def _stretch(part: dict, previous: dict | None) -> str:
    """Which actions a summary part covers, in the reader's numbering (the
    first action is #1 of the story, one deeper than the root's depth 0).
    A part that starts where the previous one ended covers the actions
    between their depths."""
    through = _int(part.get("through_depth")) + 1
    if part.get("starts_after") is None:
        return f"actions 1–{through} of the story"
    if previous is not None and previous.get("covers_through") == part.get("starts_after"):
        return f"actions {_int(previous.get('through_depth')) + 2}–{through} of the story"
    return f"after action #{part.get('starts_after')}, up to the story's action {through}"


def _summary(value) -> dict | None:
    """The summary used, with each part's stretch. The report keeps one text
    (the parts' texts joined by blank lines, oldest first); it is shared out
    to the parts only when it splits into exactly as many paragraphs."""
    summary = _dict(value)
    text = str(summary.get("text") or "").strip()
    if not text:
        return None
    parts = [dict(p) for p in _dicts(summary.get("parts"))]
    for index, part in enumerate(parts):
        part["level"] = _int(part.get("level"))
        part["tokens"] = _int(part.get("tokens"))
        part["stretch"] = _stretch(part, parts[index - 1] if index else None)
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    shared = len(paragraphs) == len(parts)
    for part, paragraph in zip(parts, paragraphs if shared else [], strict=False):
        part["text"] = paragraph
    return {
        "text": text, "parts": parts, "texts_in_parts": shared,
        "covers_actions": _int(summary.get("covers_actions")), "covers_through": summary.get("covers_through"),
    }


def _memories(value) -> list[dict]:
    memories = _dicts(_dict(value).get("used"))
    for memory in memories:
        memory["text"] = str(memory.get("text") or "")
        memory["authority"] = str(memory.get("authority") or "")
        memory["admitted_by"] = str(memory.get("admitted_by") or "")
        score = memory.get("score")
        memory["score"] = score if isinstance(score, (int, float)) and not isinstance(score, bool) else None
    return memories


def _state(value) -> dict | None:
    """The narrative state sent, through the one parser every reader of a
    state uses, as plain rows; None for a report from before it was kept."""
    if not isinstance(value, dict):
        return None
    state = NarrativeState.from_document(value)
    # The prompt shows only the most recently touched (rules.render_state).
    shown = state.entities[-PROMPT_ENTITIES:]
    return {
        "summary": state.scene.summary,
        "location": state.scene.location,
        "inventory": list(state.inventory),
        "party": [{"name": seat.name, "location": seat.location, "inventory": list(seat.inventory)}
                  for seat in state.party],
        "entities": [
            {"id": e.id, "label": e.label, "status": e.status, "location": e.location, "items": list(e.items),
             "aliases": list(e.aliases)}
            for e in shown
        ],
        "entities_not_shown": [e.label for e in state.entities[: len(state.entities) - len(shown)]],
        "open_threads": [t.title or t.id for t in state.threads if t.is_open][-PROMPT_THREADS:],
        "resolved_threads": [t.title or t.id for t in state.threads if not t.is_open],
    }


#: How the report names each kind of derived work, for its health list.
DERIVED_KINDS = {"summary": "Summary", "memories": "Memories"}


def _derived(value) -> list[dict]:
    return [
        {"kind": DERIVED_KINDS.get(str(job.get("kind")), str(job.get("kind") or "Work")),
         "state": str(job.get("state") or ""), "attempts": _int(job.get("attempts")),
         "error": str(job.get("error") or ""), "anchor": job.get("anchor")}
        for job in _dicts(value)
    ]


def readable(report) -> dict:
    """The report with every part the inspector reads in the shape it expects.

    A snapshot can come from an imported bundle, so any part may be missing
    or malformed; what is unreadable is shown as absent, never as a 500.
    """
    report = _dict(report)
    tokens = {key: _number(key, value) for key, value in _dict(report.get("tokens")).items()}
    sections = _sections(report)
    knowledge = _dict(report.get("knowledge"))
    parts = {name: _dicts(knowledge.get(name)) for name in ("used", "dropped", "suppressed", "rejections")}
    for records in parts.values():
        for record in records:
            for key in ("title", "filename", "heading_path", "classification", "visibility"):
                record[key] = str(record.get(key) or "")
            record["passage_number"] = _int(record.get("passage")) or _int(record.get("chunk_index")) + 1
    generated, rejected, considered = (_int(knowledge.get(k)) for k in ("generated", "rejected", "considered"))
    admitted = max(0, generated - rejected)
    history, summary, derived = _dict(report.get("history")), _summary(report.get("summary")), _derived(report.get("derived"))
    return {
        **report,
        "tokens": tokens,
        "this_turn": reportlines.this_turn(tokens),
        "summary_line": reportlines.summary_line(
            summary, total=_int(history.get("total")), included=_int(history.get("included")),
            jobs=[job for job in derived if job["kind"] == DERIVED_KINDS["summary"]],
        ),
        "settings": _dict(report.get("settings")),
        "window": _dict(report.get("window")),
        "history": history,
        "summary": summary,
        "state_events": _state_events(report.get("state_events")),
        "memories": {"used": _memories(report.get("memories"))},
        # Reports from before long memory have neither key: say nothing
        # rather than "no summary".
        "long_memory": "summary" in report or "memories" in report,
        "state": _state(report.get("state")),
        "world_info": worldinfo_lines.world_info(report.get("world_info")),
        "derived": derived,
        "sections": sections,
        "knowledge": {
            **knowledge, **parts,
            "terms": [str(t) for t in knowledge.get("terms") or [] if isinstance(t, str)],
            "rank_terms": [str(t) for t in knowledge.get("rank_terms") or [] if isinstance(t, str)],
            "generated": generated, "rejected": rejected, "admitted": admitted, "considered": considered,
            "always": max(0, considered - admitted),
            "unlisted_rejections": max(0, rejected - len(parts["rejections"])),
        },
    }


@dataclass(frozen=True)
class Bar:
    label: str
    tokens: int
    percent: float
    group: str


def budget_bars(report: dict) -> list[Bar]:
    """Each section's share of the budget, then the reply reserve and what was left unused."""
    report = readable(report)
    tokens = report["tokens"]
    budget = max(1, tokens.get("budget", 0))
    bars = [
        Bar(s["label"], s["tokens"], min(100, 100 * s["tokens"] / budget), group(s["id"]))
        for s in report["sections"]
    ]
    reserve = tokens.get("output_reserve", 0)
    bars.append(Bar(label("reply reserve"), reserve, min(100, 100 * reserve / budget), "reserve"))
    unused = max(0, budget - tokens.get("total", 0) - reserve)
    bars.append(Bar(label("unused"), unused, 100 * unused / budget, "unused"))
    return bars


def passage_key(record: dict) -> str:
    """A passage's identity across turns: the file and the passage in it."""
    name = record.get("filename") or record.get("title") or "source"
    return f"{name} · passage {_int(record.get('chunk_index')) + 1}"


def _keys(report: dict) -> dict[str, set[str]]:
    report = readable(report)
    return {
        # By kind, not by label: "Story so far (10 messages)" is the same
        # section as last turn's "(8 messages)".
        "sections": {label(s["id"]) for s in report["sections"]},
        "passages": {passage_key(p) for p in report["knowledge"]["used"]},
        "memories": {str(m.get("text", "")) for m in report["memories"]["used"]},
        "lorebook": {e["entry"] for e in (report["world_info"] or {}).get("activated", [])},
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
