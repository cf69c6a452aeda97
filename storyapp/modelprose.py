"""The story as a model is given it: stored narrations without what the
scripted demo narrator wrote for the reader alone.

The demo narrator opens each narration with a disclaimer that it is not an
AI. It is for the page; in a prompt's history a real model takes it for the
story's voice and copies it (a campaign switched from the demo to a model
opened its next three narrations with it). So it is cut wherever stored
narrations reach a model: the turn's history, the retrieval query and the
summarizer. The stored prose keeps it, so the page still says who wrote it.
"""

from __future__ import annotations

from contextbuild import records
from demomodel import DISCLAIMER

from .models import Action


def text_for_model(action: Action, *, unseated: str = "") -> str:
    """The action's text as a model should read it: a seat's action headed
    with the seat's name ("Mara: I open the door"), so the narrator knows
    which of the players acts; `unseated` names who speaks in an action
    sent from no seat (none: it goes bare, as a lone reader's always has)."""
    if action.kind != Action.Kind.AI:
        speaker = action.seat_name or unseated
        return f"{speaker}: {action.text}" if speaker else action.text
    if DISCLAIMER not in action.text:
        return action.text
    return action.text.replace(DISCLAIMER, "").strip()


def history_record(action: Action, *, unseated: str = "") -> records.HistoryAction:
    """The action for a prompt's history; its stored count is kept only for
    the text it counted."""
    text = text_for_model(action, unseated=unseated)
    return records.HistoryAction(
        id=action.pk, kind=action.kind, text=text, tokens=action.token_count if text == action.text else None
    )
