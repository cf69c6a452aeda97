"""Which format a file is, read off its content, never its name alone.

Readers' files arrive renamed, with a `.json` that could be anything, or a
character card saved as `.png`; so the bytes decide. None means the file is
not a lorebook at all (Markdown or plain text go the usual way); a JSON file
that is no format Loremaster knows gets a refusal that lists the ones it does.
"""

from __future__ import annotations

import json

from . import agnai, aidungeon, cardbook, cards, koboldai, novelai, risu, sillytavern
from .entries import Lorebook, LorebookError
from .png import PNG_SIGNATURE, PNG_TEXT_LIMIT, read_png_text

KNOWN = ("SillyTavern World Info, character cards (V1, V2, V3, as JSON or PNG) and their books, NovelAI "
         "lorebooks (JSON or PNG), stories and scenarios, AI Dungeon story cards and world info, KoboldAI world "
         "info, Agnai memory books, RisuAI lorebooks")
CARD_FIELDS = {"first_mes", "char_name", "char_persona", "char_greeting"}


def read(data: bytes, *, name: str, png_text_limit: int = PNG_TEXT_LIMIT) -> Lorebook | None:
    """The file as a Lorebook, None when it is not JSON or a PNG (text), or
    LorebookError when it is JSON or a PNG of no format Loremaster reads.
    A PNG's text chunks inflate to at most `png_text_limit` bytes in all."""
    if data.startswith(PNG_SIGNATURE):
        return _parse_png(data, name=name, text_limit=png_text_limit)
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    except RecursionError:
        raise LorebookError("JSON", "the file nests too deeply to be a lorebook") from None
    return parse(document, name=name)


def parse(document, *, name: str) -> Lorebook:
    """A decoded JSON document, by the fields that mark each format."""
    if isinstance(document, list):
        return _parse_list(document, name=name)
    if not isinstance(document, dict):
        raise LorebookError("JSON", f"a {type(document).__name__} is not a lorebook; Loremaster reads {KNOWN}")
    if _is_card(document):
        return cards.parse_card_json(document, name=name)
    if "lorebookVersion" in document:
        return novelai.parse_lorebook(document, name=name)
    if "storyContainerVersion" in document or "scenarioVersion" in document:
        return novelai.parse_story(document, name=name)
    if "worldinfo" in document or "worldinfo_v2" in document:
        return koboldai.parse(document, name=name)
    if document.get("kind") == "memory" and "entries" in document:
        return agnai.parse(document, name=name)
    if document.get("type") == "risu" and "data" in document:
        return risu.parse(document, name=name)
    if isinstance(document.get("folders"), dict) and isinstance(document.get("entries"), dict):
        return koboldai.parse(document, name=name)  # United's world info export
    if _is_character_book(document):
        return cardbook.parse_character_book(document, name=name)
    if isinstance(document.get("entries"), (dict, list)) or document.get("entries", 0) is None:
        return sillytavern.parse_world_info(document, name=name)
    if any(key in document for key in ("storyCards", "worldInfo", "worldInfos", "cards")):
        return aidungeon.parse(document, name=name)
    if isinstance(document.get("lorebook"), dict):
        return novelai.parse_story(document, name=name)
    if koboldai.is_story_save(document):
        return koboldai.parse(document, name=name)  # a save with no world info: an empty book, noted
    raise LorebookError("JSON", f"this is not a format Loremaster reads; it reads {KNOWN}")


def _is_card(document: dict) -> bool:
    spec = document.get("spec")
    if isinstance(spec, str) and spec.startswith("chara_card"):
        return True
    return bool(CARD_FIELDS & document.keys()) or (
        isinstance(document.get("data"), dict) and "first_mes" in document["data"]
    )


def _parse_png(data: bytes, *, name: str, text_limit: int) -> Lorebook:
    """A character card (`chara`, `ccv3`), or a NovelAI lorebook image
    (`naidata`) when the image holds no card. The chunks are read once."""
    texts = read_png_text(data, text_limit=text_limit)
    keywords = {keyword.lower(): text for keyword, text in texts}
    if "naidata" in keywords and not {"chara", "ccv3"} & keywords.keys():
        return novelai.parse_image_text(keywords["naidata"], name=name)
    return cards.parse_card_texts(texts, name=name)


def _is_character_book(document: dict) -> bool:
    """A card's book saved on its own (Chub, card editors): World Info's
    shape, but entries named as the card spec names them (`keys`,
    `insertion_order`) and never World Info's `key`."""
    entries = document.get("entries")
    items = entries.values() if isinstance(entries, dict) else entries if isinstance(entries, list) else ()
    items = [item for item in items if isinstance(item, dict)]
    return (
        bool(items)
        and not any("key" in item for item in items)
        and all("keys" in item or "insertion_order" in item for item in items)
    )


def _parse_list(document: list, *, name: str) -> Lorebook:
    """Bare arrays: AI Dungeon's cards (`value`) and world info (`entry`),
    or its scenarios (each with its cards), KoboldAI's world info (`key`
    and `content`)."""
    first = next((item for item in document if isinstance(item, dict)), None)
    if first is None:
        if document:
            raise LorebookError("JSON", f"a list of {type(document[0]).__name__} is not a lorebook; Loremaster reads {KNOWN}")
        raise LorebookError("JSON", f"an empty list is not a lorebook; Loremaster reads {KNOWN}")
    if "content" in first and ("key" in first or "keysecondary" in first):
        return koboldai.parse(document, name=name)
    if "keys" in first or "value" in first or "entry" in first:
        return aidungeon.parse(document, name=name)
    if aidungeon.is_scenario(first):
        return aidungeon.parse_scenarios(document, name=name)
    raise LorebookError("JSON", f"this list is not a format Loremaster reads; it reads {KNOWN}")
