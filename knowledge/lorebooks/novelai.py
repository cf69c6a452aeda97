"""NovelAI lorebooks: `.lorebook` files, and the books inside `.story` and
`.scenario` files.

A `.lorebook` is `{"lorebookVersion": 1..6, "entries": [...], "settings",
"categories": [...]}`. Version 1 entries carry only `text`, `displayName`,
`keys`, `searchRange`, `enabled`, `forceActivation`, `contextConfig` and
`lastUpdatedAt`; later versions add `id`, `category` (a category id),
`keyRelative`, `nonStoryActivatable`, `loreBiasGroups` and
`contextConfig.maximumTrimType`, and the book gains `categories` with their
own defaults and bias groups. Every field may be missing. A `.scenario` has
the book at `lorebook`; a `.story` (`storyContainerVersion`) at
`content.lorebook`, where `content` is an object in the files seen, or a
JSON string (current stories keep their text in `content.document`, a
base64 binary the lorebook does not need). Either is named by its title.
NovelAI's "export as image" puts a `.lorebook`'s JSON, base64-encoded, in a
PNG's `naidata` text chunk.

SillyTavern imports a `.lorebook` too (convertNovelLorebook in
public/scripts/world-info.js): what it sets from an entry (its `order`
from `contextConfig.budgetPriority`, 0 without one; its comment from
`displayName`) is kept under SillyTavern's names, so the World Info engine
applies it.
"""

from __future__ import annotations

import base64
import binascii
import json

from .entries import Entry, Lorebook, LorebookError, kind_of, split_keys, strict_flag

FORMAT = "NovelAI lorebook"

# The name NovelAI gives a new entry: with no text and no keys, such an entry
# is the editor's untouched placeholder. A named entry is kept even when empty.
PLACEHOLDER_NAME = "New Lorebook Entry"
# The entry fields that become the record's own; everything else is kept.
_USED = {"displayName", "text", "keys", "enabled", "forceActivation"}


def parse_lorebook(data: dict, *, name: str) -> Lorebook:
    """The entries of a `.lorebook` file's decoded JSON.

    1. Check the book's shape (an object with an `entries` list).
    2. Name the categories by id, so an entry's category is kept readable.
    3. Read each entry; an entry with neither keys nor text nor a name of
       its own is NovelAI's "New Lorebook Entry" placeholder and is skipped
       with a count.
    """
    if not isinstance(data, dict):
        raise LorebookError(FORMAT, f"expected an object, found {kind_of(data)}")
    version = data.get("lorebookVersion")
    raw_entries = data.get("entries", [])
    if raw_entries is None:
        raw_entries = []
    if not isinstance(raw_entries, list):
        raise LorebookError(FORMAT, f"“entries” must be a list, found {kind_of(raw_entries)}", field="entries")

    categories = _categories(data.get("categories"))
    entries, skipped = [], 0
    for index, raw in enumerate(raw_entries):
        entry = _entry(raw, index, categories)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)

    notes = []
    if not raw_entries:
        notes.append("empty lorebook")
    if skipped:
        notes.append(f"{skipped} placeholder entr{'y' if skipped == 1 else 'ies'} with no keys and no text skipped")

    extras = {key: value for key, value in data.items() if key != "entries"}
    label = FORMAT if version is None else f"{FORMAT} v{version}"
    return Lorebook(format=label, name=name, entries=tuple(entries), extras=extras, notes=tuple(notes))


def parse_story(data: dict, *, name: str) -> Lorebook:
    """The lorebook embedded in a `.scenario` (`lorebook`) or a `.story`
    (`content.lorebook`). A story whose content is not JSON (the binary
    document format) is refused by name rather than misread."""
    if not isinstance(data, dict):
        raise LorebookError("NovelAI story", f"expected an object, found {kind_of(data)}")
    if "scenarioVersion" in data or "lorebook" in data:
        kind, book = "NovelAI scenario", data.get("lorebook")
        meta = {key: data[key] for key in ("scenarioVersion", "title", "description", "tags") if key in data}
    elif "storyContainerVersion" in data or "content" in data:
        kind = "NovelAI story"
        content = _story_content(data.get("content"))
        book = content.get("lorebook")
        meta = {"storyContainerVersion": data.get("storyContainerVersion")}
        metadata = data.get("metadata")
        if isinstance(metadata, dict):
            meta.update({key: metadata[key] for key in ("title", "description", "id") if key in metadata})
    else:
        raise LorebookError("NovelAI story", "neither a .scenario (“lorebook”) nor a .story (“content”)")

    if book is None:
        title = meta.get("title")
        title = title.strip() if isinstance(title, str) and title.strip() else name
        return Lorebook(format=kind, name=title, entries=(), extras=meta, notes=("empty lorebook",))
    if not isinstance(book, dict):
        raise LorebookError(kind, f"the lorebook must be an object, found {kind_of(book)}", field="lorebook")
    inner = parse_lorebook(book, name=name)
    title = meta.get("title")
    return Lorebook(
        format=f"{kind} ({inner.format})",
        name=title.strip() if isinstance(title, str) and title.strip() else name,
        entries=inner.entries,
        extras={**meta, "lorebook": inner.extras},
        notes=inner.notes,
    )


def parse_image_text(text: str, *, name: str) -> Lorebook:
    """A lorebook NovelAI embedded in an image ("export as image"): the
    PNG's `naidata` text chunk, the lorebook's JSON in base64 (as
    SillyTavern's importWorldInfo reads it)."""
    label = f"{FORMAT} image"
    stripped = text.strip()
    try:
        compact = "".join(stripped.split())
        raw = stripped if stripped.startswith("{") else _b64(compact + "=" * (-len(compact) % 4))
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, binascii.Error, RecursionError):
        raise LorebookError(label, "the “naidata” chunk does not hold a lorebook in base64 JSON", field="naidata") from None
    if not isinstance(data, dict) or "entries" not in data:
        raise LorebookError(label, f"the “naidata” chunk holds {kind_of(data)} without “entries”, not a lorebook", field="naidata")
    return parse_lorebook(data, name=name)


def _story_content(content) -> dict:
    """A `.story`'s `content`: an object, or that object as a JSON string
    (optionally base64). Anything else is the binary format."""
    if isinstance(content, dict):
        return content
    if isinstance(content, str):
        for decode in (lambda text: text, _b64):
            try:
                decoded = json.loads(decode(content))
            except (ValueError, UnicodeDecodeError, binascii.Error):
                continue
            if isinstance(decoded, dict):
                return decoded
    raise LorebookError(
        "NovelAI story",
        "this story's content is binary or compressed; that story format is not supported — "
        "export the lorebook from NovelAI as a .lorebook file instead",
        field="content",
    )


def _b64(text: str) -> str:
    return base64.b64decode(text, validate=True).decode("utf-8")


def _categories(raw) -> dict:
    """Category id → its name (or the id, if unnamed), for the categories
    that are well formed; the full list stays in the book's extras."""
    named = {}
    for category in raw if isinstance(raw, list) else ():
        if isinstance(category, dict) and category.get("id"):
            named[category["id"]] = category.get("name") or category["id"]
    return named


def _entry(raw, index: int, categories: dict) -> Entry | None:
    if not isinstance(raw, dict):
        raise LorebookError(FORMAT, f"an entry must be an object, found {kind_of(raw)}", entry=index)
    label = raw.get("displayName") if isinstance(raw.get("displayName"), str) and raw.get("displayName") else index

    text = raw.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise LorebookError(FORMAT, f"text must be a string, found {kind_of(text)}", entry=label, field="text")

    keys = raw.get("keys", [])
    if keys is None:
        keys = []
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise LorebookError(FORMAT, "keys must be a list of strings", entry=label, field="keys")
    plain, patterns = split_keys(keys)

    display = raw.get("displayName")
    if display is not None and not isinstance(display, str):
        raise LorebookError(FORMAT, f"displayName must be a string, found {kind_of(display)}", entry=index, field="displayName")
    if not text.strip() and not plain and not patterns and (display or "").strip() in ("", PLACEHOLDER_NAME):
        return None
    title = (display or "").strip() or (plain[0] if plain else patterns[0] if patterns else f"Entry {index + 1}")

    extras = {key: value for key, value in raw.items() if key not in _USED}
    extras.update(_sillytavern_fields(raw, display or ""))
    category = raw.get("category")
    if category:
        extras["categoryName"] = categories.get(category, category)
    return Entry(
        title=title,
        text=text,
        keys=plain,
        regex_keys=patterns,
        enabled=strict_flag(raw, "enabled", default=True, format_name=FORMAT, entry=label),
        constant=strict_flag(raw, "forceActivation", format_name=FORMAT, entry=label),
        extras=extras,
    )


def _sillytavern_fields(raw: dict, display: str) -> dict:
    """What convertNovelLorebook sets from the entry, by SillyTavern's names."""
    config = raw.get("contextConfig")
    priority = config.get("budgetPriority") if isinstance(config, dict) else None
    valid = isinstance(priority, (int, float)) and not isinstance(priority, bool)
    return {"comment": display, "addMemo": bool(display.strip()), "selective": False, "order": priority if valid else 0}
