"""Character cards (V1, V2, V3), as JSON or inside a PNG, into a `Lorebook`.

A card is a character (the fields that can start a campaign: description,
personality, scenario, first message, alternate greetings) and, from V2
on, a `character_book` whose entries become the Lorebook's entries.

The shapes met in real files:
- V1 has its fields at the top level: `name`, `description`, ... or, from
  Pygmalion-era tools, `char_name`, `char_persona`, `world_scenario`,
  `char_greeting`, `example_dialogue`. No `spec`.
- V2 and V3 are `{"spec": "chara_card_v2" | "chara_card_v3", "data": {...}}`.
  SillyTavern writes hybrids that also carry the V1 fields at the top level
  (its own default card, Seraphina, is one); `data` wins.
- A PNG holds the card base64-encoded in a text chunk: `chara` (V2) or
  `ccv3` (V3). SillyTavern writes both, the `ccv3` one a V3 copy of the
  same card, and reads `ccv3` first; so do we. The keyword is matched
  case-insensitively, and the version is read from the decoded `spec`, never
  from the chunk's name (a `chara` chunk may hold a V3 card).

The PNG's chunks are read in `png`, the book's entries in `cardbook`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import replace

from knowledge.lorebooks.cardbook import read_book
from knowledge.lorebooks.entries import CharacterCard, Lorebook, LorebookError
from knowledge.lorebooks.png import PNG_FORMAT, PNG_TEXT_LIMIT, read_png_text
from knowledge.lorebooks.sillytavern import json_type

SPECS = {"chara_card_v2": "V2", "chara_card_v3": "V3"}

# V1 field → the Pygmalion-era name for the same thing.
V1_ALIASES = {
    "name": "char_name",
    "description": "char_persona",
    "personality": "",
    "scenario": "world_scenario",
    "first_mes": "char_greeting",
    "mes_example": "example_dialogue",
}
# Fields that become the CharacterCard's own; the rest of `data` is extras.
_CARD_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "alternate_greetings",
)
_ASSET_URI_LIMIT = 512


def parse_card_json(data: dict, *, name: str) -> Lorebook:
    """The card in a decoded card JSON, any version.

    1. Tell the version: `spec` with a `data` object is V2 or V3; no `spec`
       is V1 (its fields at the top level).
    2. Read the character's fields (`data` wins over top-level V1 copies).
    3. Read the `character_book`, if any, into entries.
    """
    if not isinstance(data, dict):
        raise LorebookError(
            "Character Card", f"the file holds a JSON {json_type(data)}, not an object"
        )
    spec = data.get("spec")
    version, fields, top_level, notes = _card_fields(data)
    format_name = f"Character Card {version}"

    card = _card(fields, format_name=format_name, fallback_name=name)
    if top_level:
        card.extras["top_level"] = top_level
    if spec is not None:
        card.extras["spec"] = spec
        card.extras["spec_version"] = data.get("spec_version")

    book = fields.get("character_book")
    entries, book_extras = read_book(book, format_name=format_name, version=version)
    if book is None:
        notes.append("no character book")
    elif not entries:
        notes.append("empty lorebook")
    return Lorebook(
        format=format_name,
        name=card.name,
        entries=entries,
        extras={"character_book": book_extras} if book is not None else {},
        notes=tuple(notes),
        card=card,
    )


def _card_fields(data: dict) -> tuple[str, dict, dict, list[str]]:
    """The card's version, its fields (`data` over top-level V1 copies), the
    top-level fields a V2/V3 hybrid carries beside `data`, and notes."""
    spec = data.get("spec")
    inner = data.get("data")
    notes = []
    if isinstance(inner, dict) and (spec is None or isinstance(spec, str)):
        version = SPECS.get(spec)
        if version is None:
            version = (
                "V3" if "group_only_greetings" in inner or "assets" in inner else "V2"
            )
            told = (
                f"unknown card spec {spec!r}"
                if spec is not None
                else "no card spec beside the “data” object"
            )
            notes.append(f"{told}: read as {version}")
        fields = {
            key: value
            for key, value in data.items()
            if key in V1_ALIASES and key not in inner
        }
        fields.update(inner)
        top_level = {
            key: value
            for key, value in data.items()
            if key not in ("spec", "spec_version", "data") and key not in inner
        }
    elif spec is not None and not (isinstance(spec, str) and spec in SPECS):
        raise LorebookError(
            "Character Card",
            f"unknown card spec {spec!r} and no “data” object",
            field="spec",
        )
    elif spec is not None:
        raise LorebookError(
            f"Character Card {SPECS[spec]}",
            "the card has no “data” object",
            field="data",
        )
    else:
        version = "V1"
        fields = {card_field: _v1_value(data, card_field) for card_field in V1_ALIASES}
        fields.update(
            {
                key: value
                for key, value in data.items()
                if key not in V1_ALIASES.values()
            }
        )
        top_level = {}
    return version, fields, top_level, notes


def parse_card_png(data: bytes, *, name: str, text_limit: int = PNG_TEXT_LIMIT) -> Lorebook:
    """The card inside a PNG; its text chunks inflate to at most `text_limit` bytes (png)."""
    return parse_card_texts(read_png_text(data, text_limit=text_limit), name=name)


def parse_card_texts(texts: list[tuple[str, str]], *, name: str) -> Lorebook:
    """The card in a PNG's text chunks: the `ccv3` chunk if there is one,
    else `chara`; decoded from base64 and read as JSON by `parse_card_json`.
    A chunk that will not decode falls back to the other one, with a note;
    when none decodes, the first fault is the error."""
    chunks = {}
    for keyword, text in texts:
        chunks.setdefault(keyword.lower(), (keyword, text))
    candidates = [chunks[key] for key in ("ccv3", "chara") if key in chunks]
    if not candidates:
        raise LorebookError(
            PNG_FORMAT,
            "the image holds no character card (no “chara” or “ccv3” text chunk)",
        )
    first_error = None
    for keyword, text in candidates:
        try:
            card = _decode_card_text(keyword, text)
        except LorebookError as error:
            first_error = first_error or error
            continue
        book = parse_card_json(card, name=name)
        if first_error is not None:
            book = replace(
                book,
                notes=(*book.notes, f"ignored an unreadable card chunk: {first_error}"),
            )
        return book
    raise first_error


def _decode_card_text(keyword: str, text: str) -> dict:
    """Base64 → UTF-8 → JSON object (a chunk holding bare JSON is read too).
    Its size is already bounded by the PNG's text limit; its depth is not."""
    stripped = text.strip()
    if stripped.startswith("{"):
        raw = stripped.encode("utf-8")
    else:
        compact = "".join(stripped.split())
        try:
            raw = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise LorebookError(
                PNG_FORMAT,
                f"the “{keyword}” chunk is not base64-encoded",
                field=keyword,
            ) from None
    try:
        card = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LorebookError(
            PNG_FORMAT,
            f"the “{keyword}” chunk does not hold JSON ({error})",
            field=keyword,
        ) from None
    except RecursionError:
        raise LorebookError(PNG_FORMAT, f"the “{keyword}” chunk nests too deeply to be a card", field=keyword) from None
    if not isinstance(card, dict):
        raise LorebookError(
            PNG_FORMAT,
            f"the “{keyword}” chunk holds a JSON {json_type(card)}",
            field=keyword,
        )
    return card


def _v1_value(data: dict, field: str):
    if field in data:
        return data[field]
    alias = V1_ALIASES[field]
    return data.get(alias) if alias else None


def _card(fields: dict, *, format_name: str, fallback_name: str) -> CharacterCard:
    """The character: its own fields checked as text, the rest as extras."""
    texts = {}
    for field in ("name", "description", "personality", "scenario", "first_mes"):
        value = fields.get(field)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise LorebookError(
                format_name,
                f"the {field} is a {json_type(value)}, not text",
                field=field,
            )
        texts[field] = value
    greetings = fields.get("alternate_greetings")
    if greetings is None:
        greetings = []
    elif isinstance(greetings, str):
        greetings = [greetings]
    if not isinstance(greetings, list) or not all(
        isinstance(greeting, str) for greeting in greetings
    ):
        raise LorebookError(
            format_name,
            "the alternate greetings are not a list of texts",
            field="alternate_greetings",
        )
    extras = {
        key: value
        for key, value in fields.items()
        if key not in _CARD_FIELDS and key != "character_book"
    }
    if "assets" in extras:
        extras["assets"] = _assets(extras["assets"])
    if isinstance(extras.get("tags"), str):
        extras["tags"] = [
            tag.strip() for tag in extras["tags"].split(",") if tag.strip()
        ]
    return CharacterCard(
        name=texts["name"].strip() or fallback_name,
        description=texts["description"],
        personality=texts["personality"],
        scenario=texts["scenario"],
        first_message=texts["first_mes"],
        alternate_greetings=tuple(
            greeting for greeting in greetings if greeting.strip()
        ),
        extras=extras,
    )


def _assets(assets) -> list:
    """V3 assets without their payloads: type, name, ext, and the uri when
    it is a short reference (a `data:` URI of an embedded image is not)."""
    if not isinstance(assets, list):
        return []
    kept = []
    for asset in assets:
        if not isinstance(asset, dict):
            continue
        small = {key: asset[key] for key in ("type", "name", "ext") if key in asset}
        uri = asset.get("uri")
        if (
            isinstance(uri, str)
            and len(uri) <= _ASSET_URI_LIMIT
            and not uri.startswith("data:")
        ):
            small["uri"] = uri
        elif uri is not None:
            small["uri_omitted"] = True
        kept.append(small)
    return kept


# ------------------------------------------------------------------- macros

#: SillyTavern matches its macros case-insensitively.
CHAR_MACRO = re.compile(r"\{\{char\}\}|<bot>", re.IGNORECASE)
USER_MACRO = re.compile(r"\{\{user\}\}|<user>", re.IGNORECASE)
#: What may stand between a sentence's start and its first word: "*{{user}} wakes" starts one.
SENTENCE_START = re.compile(r"(?:^|[.!?]\s|\n)[\s*_\"“']*$")


def fill_macros(text: str, *, name: str) -> str:
    """The text as the narrator should read it: {{char}}/<BOT> the card's
    name, {{user}}/<USER> "you" ("You" where it starts a sentence), as
    SillyTavern fills them for a chat with the reader."""
    text = CHAR_MACRO.sub(lambda _: name, text)

    def you(match: re.Match) -> str:
        return "You" if SENTENCE_START.search(match.string, 0, match.start()) else "you"

    return USER_MACRO.sub(you, text)


def with_macros_filled(book: Lorebook) -> Lorebook:
    """A card's book with its entries' titles and texts filled in: the book
    is that character's, so {{char}} is known, and the narrator, which never
    sees SillyTavern's macros expanded, would otherwise read "{{user}}".
    Any other book is returned as it is.

    Keys are left as written. A text is prose the narrator reads, where
    {{user}} is "you"; a key is matched against the story's messages, where
    the reader goes by the persona's name, known only at the turn. So, as
    SillyTavern fills macros in every key before matching, the World Info
    engine fills a key's macros at match time (worldinfo.records.Inputs.
    macros), and a key `{{user}}'s Room` stays that key here and in export."""
    if book.card is None:
        return book
    name = book.card.name.strip() or "the character"
    return replace(book, entries=tuple(
        replace(e, title=fill_macros(e.title, name=name), text=fill_macros(e.text, name=name)) for e in book.entries
    ))
