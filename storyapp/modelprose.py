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


def text_for_model(action: Action) -> str:
    """The action's text as a model should read it: a seat's action headed
    with the seat's name ("Mara: I open the door"), so the narrator knows
    which of the players acts."""
    if action.kind != Action.Kind.AI:
        return f"{action.seat_name}: {action.text}" if action.seat_name else action.text
    if DISCLAIMER not in action.text:
        return action.text
    return action.text.replace(DISCLAIMER, "").strip()


def history_record(action: Action) -> records.HistoryAction:
    """The action for a prompt's history; its stored count is kept only for
    the text it counted."""
    text = text_for_model(action)
    return records.HistoryAction(
        id=action.pk, kind=action.kind, text=text, tokens=action.token_count if text == action.text else None
    )
