"""A new campaign from a SillyTavern character card (issue 14).

A card is a character someone wrote for a chat: the narrator is to play it,
and the reader is the "you" it talks to. So a card maps onto a campaign as:

- its name → the title;
- the chosen greeting (first message, or an alternate one) → the opening
  scene, which `story_open` makes the story's first narration;
- "You play {name}.", then its description, personality and example
  dialogue → the AI instructions, the campaign text the system prompt
  carries for the narrator (contextbuild.builder, section
  `ai_instructions`); the persona fields are the reader's own character,
  which a card does not describe;
- its scenario → the plot essentials;
- the card's words are someone else's, so the description and the scenario
  are framed as imported text, as library passages are (`rules.frame_imported`:
  a line saying what they are, `<imported>` … `</imported>`, and nothing in
  them that passes for one of the prompt's markers);
- its book → the campaign's first library source, Canon, even when empty,
  since the source's metadata keeps the card's fields as they arrived.

SillyTavern's macros are filled in as SillyTavern fills them for a chat with
the reader: {{char}} and <BOT> become the card's name, {{user}} and <USER>
"you". Everything lands in fields the reader can read and edit in the
campaign's settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from contextbuild import rules
from knowledge import services as knowledge
from knowledge.lorebooks import Lorebook, LorebookError, read, unreadable
from knowledge.lorebooks.cards import fill_macros

from . import campaigns, services
from .models import Campaign

class CardRefused(Exception):
    """This file cannot start a campaign; the message says why, for the
    reader. Nothing was stored."""


@dataclass(frozen=True)
class CardCampaign:
    """What a card makes: the campaign's fields, and the book for its library."""

    title: str
    opening_text: str
    ai_instructions: str
    plot_essentials: str
    book: Lorebook


def size_check(*, filename: str, size: int) -> None:
    """The library's upload limit, so a card is as large as any lorebook may
    be; the view asks before reading the upload, the function after."""
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if size > limit:
        raise CardRefused(
            f"{filename}: the file is {knowledge.human_size(size)}, over the {knowledge.human_size(limit)} limit. "
            "Nothing was stored."
        )


def card_of(*, filename: str, data: bytes) -> Lorebook:
    """The card the file holds, or CardRefused naming what the file is
    instead: another lorebook format (which belongs in a library), a broken
    card (the reader's error names its field), or no format at all."""
    size_check(filename=filename, size=len(data))
    try:
        book = read(data, name=filename, png_text_limit=settings.LOREMASTER_PNG_TEXT_MAX_BYTES)
    except LorebookError as exc:
        if exc.format_name.startswith("Character Card"):
            raise CardRefused(f"{filename}: {exc}. Nothing was stored.") from exc
        raise CardRefused(f"{filename} is not a character card ({exc}). Nothing was stored.") from exc
    if book is None:
        raise CardRefused(
            f"{filename} is not a character card: {unreadable(data, name=filename)}. "
            "Upload the card's .png or .json file."
        )
    if book.card is None:
        raise CardRefused(
            f"{filename}: this is a {book.format} file, not a character card; import it in a campaign's library."
        )
    return book


def campaign_fields(book: Lorebook, *, greeting: int = 0) -> CardCampaign:
    """The campaign a card makes (see the module docstring). `greeting` 0 is
    the first message, n the n-th alternate greeting; one the card does not
    have is refused."""
    card = book.card
    greetings = (card.first_message, *card.alternate_greetings)
    if not 0 <= greeting < len(greetings):
        others = len(card.alternate_greetings)
        raise CardRefused(
            f"This card has {others} alternate greeting{'s' if others != 1 else ''}, so there is no greeting {greeting}: "
            f"choose 0 (its first message){f' to {others}' if others else ''}."
        )
    # The name is the card's too: one line, with nothing in it that passes for a marker.
    name = " ".join(rules.neutralise(card.name).split()) or "Unnamed character"

    def filled(text: str) -> str:
        return fill_macros(text.replace("\r\n", "\n").strip(), name=name)

    example = card.extras.get("mes_example")
    parts = [
        filled(card.description),
        f"Personality: {filled(card.personality)}" if card.personality.strip() else "",
        # Cards write example dialogue as a chat log (<START> blocks); it shows how the character speaks.
        f"Example dialogue, for {name}'s voice (not events of this story):\n{filled(example)}"
        if isinstance(example, str) and example.strip() else "",
    ]
    described = "\n\n".join(part for part in parts if part)
    scenario = filled(card.scenario)
    return CardCampaign(
        title=name[:200],
        opening_text=filled(greetings[greeting]),
        ai_instructions=f"You play {name}."
        + (f"\n\n{rules.frame_imported(described, framing=rules.CARD_FRAMING)}" if described else ""),
        plot_essentials=rules.frame_imported(scenario, framing=rules.CARD_SCENARIO_FRAMING) if scenario else "",
        book=book,
    )


@transaction.atomic
def campaign_from_card(*, owner, filename: str, data: bytes, greeting: int = 0) -> Campaign:
    """Starts a campaign from a character card file, all or nothing.

    1. Refuse over the reader's campaign quota (quotas.OverQuota), or a file
       that is no usable card (CardRefused), before anything is written.
    2. Create the campaign from the card's fields.
    3. Store the card's book in its library (queued for indexing on commit).
    4. Open the story: the greeting becomes the first narration.
    """
    campaigns.campaign_room(owner)
    fields = campaign_fields(card_of(filename=filename, data=data), greeting=greeting)
    campaign = Campaign.objects.create(
        owner=owner,
        title=fields.title,
        opening_text=fields.opening_text,
        ai_instructions=fields.ai_instructions,
        plot_essentials=fields.plot_essentials,
    )
    try:
        knowledge.lorebook_create(campaign=campaign, filename=filename, book=fields.book, enqueue=True)
    except knowledge.ImportRefused as exc:
        # Not expected in a new, empty library; the reader still gets a reason, and nothing is kept.
        raise CardRefused(f"{filename}: {exc}") from exc
    services.story_open(campaign=campaign, now=timezone.now())
    return campaign
