"""What each seat's character alone knows, as sections of the prompt.

A shared story can give one player's character knowledge the others lack:
a lore source or entry marked for the seat, or a whisper from the game
master. The narrator reads each seat's secrets in one section of the system
message, headed "Known only to <seat>", with the rule that it never tells
them to the other characters. The section carries its audience (the seat),
so the inspector shows it to that seat's player and the game master alone.

Secrets are protected (never dropped for history), so together they are
bounded by SHARE of the budget; what does not fit is reported, not lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import rules
from .records import Secret, Section
from .tokens import count_tokens

#: The most of the budget every seat's secrets together may take.
SHARE = 0.10
#: The section label of a seat's secrets (its audience names the seat).
LABEL = "seat_secrets"

RULE = (
    "Known only to {seat}: what follows is that character's alone. Let it shape what {seat} does "
    "and notices, but never tell it to the other characters or narrate it where they learn it, "
    "unless {seat} reveals it in the story."
)


@dataclass(frozen=True)
class Placed:
    sections: tuple[Section, ...] = ()
    used: tuple[dict, ...] = ()
    dropped: tuple[dict, ...] = ()


def _item(secret: Secret) -> str:
    title = rules.provenance_field(secret.title)
    where = "whispered by the game master" if secret.origin == "whisper" else "lore"
    return f"[{title} · {where}]\n{secret.text.strip()}" if title else f"[{where}]\n{secret.text.strip()}"


def place(secrets: tuple[Secret, ...], *, budget: int) -> Placed:
    """One section per seat, in the order seats first appear in `secrets`;
    each secret is kept while the running total stays within SHARE of the
    budget (a smaller later one may still fit)."""
    cap = max(0, int(budget * SHARE))
    spent = 0
    by_seat: dict[str, list[Secret]] = {}
    used: list[dict] = []
    dropped: list[dict] = []
    for secret in secrets:
        seat = secret.seat.strip()
        if not seat or not secret.text.strip():
            continue
        tokens = count_tokens(_item(secret))
        record = {"seat": seat, "title": secret.title, "origin": secret.origin, "tokens": tokens}
        if spent + tokens > cap:
            dropped.append(record)
            continue
        spent += tokens
        by_seat.setdefault(seat, []).append(secret)
        used.append(record)
    sections = []
    for seat, kept in by_seat.items():
        name = rules.provenance_field(seat) or "this character"
        text = rules.frame_imported("\n\n".join(_item(s) for s in kept), framing=RULE.format(seat=name))
        sections.append(Section(LABEL, text, count_tokens(text), audience=seat))
    return Placed(tuple(sections), tuple(used), tuple(dropped))


def report(placed: Placed) -> dict:
    return {"used": [dict(r) for r in placed.used], "dropped": [dict(r) for r in placed.dropped]}
