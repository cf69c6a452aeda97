"""What one member may read of a narration's stored context (the inspector).

A snapshot holds everything the narrator was given: narrator-only lore,
each seat's secrets, the game master's direction. The game master reads
all of it; a player reads what is public and their own seat's secrets; a
watcher reads what is public. The rest is taken out here, on the server,
before a template sees it: a section not for the reader becomes a note
that it was withheld, and the same passages are cut out of the messages
as sent, each leaving the same note.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from contextbuild.leaks import GAME_MASTER, NARRATOR
from contextbuild.rules import HIDDEN_MARKER

from .access import Place

NOTICES = {
    NARRATOR: "[Withheld: narrator-only lore, for the narrator alone.]",
    GAME_MASTER: "[Withheld: the game master's direction to the narrator.]",
}
SEAT_NOTICE = "[Withheld: what another character alone knows.]"
HELD_NOTICE = "[Withheld: a narration the game master is still reviewing.]"


@dataclass(frozen=True)
class Viewer:
    game_master: bool
    seat: str = ""

    @classmethod
    def of(cls, place: Place) -> Viewer:
        return cls(game_master=place.is_game_master, seat=place.seat_name if place.may_act else "")

    def may_read(self, audience: str) -> bool:
        if self.game_master or not audience:
            return True
        return audience not in (NARRATOR, GAME_MASTER) and audience == self.seat


def notice(audience: str) -> str:
    return NOTICES.get(audience, SEAT_NOTICE)


def section_audience(section: dict) -> str:
    """Who a report section is for: its own audience, or the narrator for
    World Info from a narrator-only book (its framing line says so)."""
    audience = str(section.get("audience") or "")
    if audience:
        return audience
    text = str(section.get("text") or "")
    if str(section.get("label") or "").startswith("world_info") and text.partition("\n")[0].endswith(HIDDEN_MARKER):
        return NARRATOR
    return ""


def _dicts(value) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _withheld_texts(report: dict, viewer: Viewer, held: tuple[str, ...]) -> list[tuple[str, str]]:
    """Each text in the prompt the viewer may not read, with its note;
    longest first, so a passage inside a withheld section goes with it.
    `held` are narrations not yet approved that a later prompt replayed."""
    found = [(text, HELD_NOTICE) for text in held]
    knowledge = report.get("knowledge") if isinstance(report.get("knowledge"), dict) else {}
    for used in _dicts(knowledge.get("used")):
        if used.get("visibility") == "hidden" and not viewer.may_read(NARRATOR):
            found += [(str(used.get(k) or ""), notice(NARRATOR)) for k in ("rendered", "text")]
    for section in _dicts(report.get("sections")):
        audience = section_audience(section)
        if not viewer.may_read(audience):
            found.append((str(section.get("text") or ""), notice(audience)))
    return sorted({(t, n) for t, n in found if t.strip()}, key=lambda pair: len(pair[0]), reverse=True)


def redact(text: str, withheld: list[tuple[str, str]]) -> str:
    for secret, note in withheld:
        text = text.replace(secret, note)
    return text


def report_for(report, viewer: Viewer, *, held: tuple[str, ...] = ()) -> dict:
    """The stored report as this viewer may read it (the same shape)."""
    report = report if isinstance(report, dict) else {}
    if viewer.game_master:
        return report
    withheld = _withheld_texts(report, viewer, held)
    shown = copy.deepcopy(report)
    sections = []
    for section in _dicts(shown.get("sections")):
        audience = section_audience(section)
        if viewer.may_read(audience):
            section["text"] = redact(str(section.get("text") or ""), withheld)
        else:
            section["text"], section["withheld"] = notice(audience), True
        sections.append(section)
    shown["sections"] = sections
    knowledge = shown.get("knowledge") if isinstance(shown.get("knowledge"), dict) else {}
    for part in ("used", "dropped", "suppressed", "rejections"):
        if part in knowledge:
            knowledge[part] = [r for r in _dicts(knowledge[part]) if r.get("visibility") != "hidden"]
    world_info = shown.get("world_info") if isinstance(shown.get("world_info"), dict) else {}
    for part in ("activated", "skipped"):
        if part in world_info:
            world_info[part] = [r for r in _dicts(world_info[part]) if not r.get("narrator_only")]
    secrets = shown.get("secrets") if isinstance(shown.get("secrets"), dict) else {}
    for part in ("used", "dropped"):
        if part in secrets:
            secrets[part] = [r for r in _dicts(secrets[part]) if viewer.may_read(str(r.get("seat") or NARRATOR))]
    # The prompt as one text repeats every section; the messages below are its redacted copy.
    prompt = shown.get("prompt") if isinstance(shown.get("prompt"), dict) else {}
    shown["prompt"] = {key: prompt.get(key, "") for key in ("mode", "template")}
    return shown


def messages_for(messages: list[dict], report, viewer: Viewer, *, held: tuple[str, ...] = ()) -> list[dict]:
    """The messages as sent (storyapp.inspector.messages), with what the
    viewer may not read cut out and a note in its place."""
    if viewer.game_master:
        return messages
    withheld = _withheld_texts(report if isinstance(report, dict) else {}, viewer, held)
    shown = []
    for message in messages:
        content = redact(message["content"], withheld)
        shown.append({**message, "content": content, "withheld": content != message["content"],
                      "hidden": False})
    return shown
