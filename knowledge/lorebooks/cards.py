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
- A book entry's real SillyTavern settings (position, depth, probability,
  groups, timers) live in its `extensions`; they are read as SillyTavern's
  `convertCharacterBook` reads them and kept by SillyTavern's names, so a
  card's book and a World Info file carry the same extras.
- SillyTavern sets `use_regex: true` on every entry it exports ("ST keys
  are always regex") whatever the keys are, and its `ccv3` copy carries
  that flag into V3. So `use_regex` never turns a plain word into a
  pattern: a key written `/…/flags` is a regex key in any version, and in a
  V3 entry with `use_regex` a key that uses regex syntax (and compiles) is
  kept as the pattern `/key/`; plain keys stay plain either way.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import zlib
from dataclasses import replace

from knowledge.lorebooks.entries import (
    CharacterCard,
    Entry,
    Lorebook,
    LorebookError,
    is_regex_key,
)
from knowledge.lorebooks.sillytavern import (
    LOGIC_NAMES,
    POSITION_NAMES,
    ROLE_NAMES,
    enum_name,
    json_type,
    parse_entry,
    read_flag,
)

PNG_FORMAT = "Character Card PNG"
BOOK_FORMAT = "Character book (V2 lorebook)"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
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
# Characters that make a key a pattern rather than a word (for V3 `use_regex`).
_REGEX_SYNTAX = re.compile(r"[\\^$|()\[\]{}*+?]")

# How SillyTavern's convertCharacterBook reads a book entry's extensions:
# SillyTavern's name ← the extension's name, and the default when absent.
_EXTENSION_SETTINGS = (
    ("excludeRecursion", "exclude_recursion", False),
    ("preventRecursion", "prevent_recursion", False),
    ("delayUntilRecursion", "delay_until_recursion", False),
    ("probability", "probability", 100),
    ("useProbability", "useProbability", True),
    ("depth", "depth", 4),
    ("selectiveLogic", "selectiveLogic", 0),
    ("group", "group", ""),
    ("groupOverride", "group_override", False),
    ("groupWeight", "group_weight", 100),
    ("scanDepth", "scan_depth", None),
    ("caseSensitive", "case_sensitive", None),
    ("matchWholeWords", "match_whole_words", None),
    ("useGroupScoring", "use_group_scoring", None),
    ("automationId", "automation_id", ""),
    ("role", "role", 0),
    ("vectorized", "vectorized", False),
    ("sticky", "sticky", None),
    ("cooldown", "cooldown", None),
    ("delay", "delay", None),
)
# Book entry fields the spec defines; anything else an entry carries is kept as is.
_BOOK_ENTRY_FIELDS = (
    "keys",
    "secondary_keys",
    "content",
    "enabled",
    "constant",
    "insertion_order",
    "case_sensitive",
    "name",
    "priority",
    "id",
    "comment",
    "selective",
    "position",
    "use_regex",
    "extensions",
)


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
    format_name = f"Character Card {version}"

    card = _card(fields, format_name=format_name, fallback_name=name)
    if top_level:
        card.extras["top_level"] = top_level
    if spec is not None:
        card.extras["spec"] = spec
        card.extras["spec_version"] = data.get("spec_version")

    book = fields.get("character_book")
    entries, book_extras = _book(book, format_name=format_name, version=version)
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


def parse_character_book(data: dict, *, name: str) -> Lorebook:
    """A character book saved on its own, outside any card: Chub's lorebook
    download and card editors' "export lorebook" write the V2 spec's
    `character_book` object (`{"name", "scan_depth", "token_budget",
    "extensions", "entries": [{keys, secondary_keys, content, enabled,
    insertion_order, ...}]}`). It looks like a World Info file but its
    entries use the card's names, so the card's book reader reads it."""
    entries, extras = _book(data, format_name=BOOK_FORMAT, version="V2", where="")
    own_name = data.get("name")
    return Lorebook(
        format=BOOK_FORMAT,
        name=own_name.strip() if isinstance(own_name, str) and own_name.strip() else name,
        entries=entries,
        extras=extras,
        notes=() if entries else ("empty lorebook",),
    )


def parse_card_png(data: bytes, *, name: str) -> Lorebook:
    """The card inside a PNG: the `ccv3` text chunk if there is one, else
    `chara`; decoded from base64 and read as JSON by `parse_card_json`.
    A chunk that will not decode falls back to the other one, with a note;
    when none decodes, the first fault is the error."""
    chunks = {}
    for keyword, text in read_png_text(data):
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


def read_png_text(data: bytes) -> list[tuple[str, str]]:
    """The (keyword, text) of every tEXt, zTXt and iTXt chunk, in order.

    The signature must be PNG's; a card chunk whose CRC does not match is
    refused by name (its text is what we read), other chunks' CRCs are not
    checked (a broken image does not spoil the card). Reading stops at IEND.
    """
    if not isinstance(data, (bytes, bytearray)) or not data.startswith(PNG_SIGNATURE):
        raise LorebookError(
            PNG_FORMAT, "the file is not a PNG image (its signature is wrong)"
        )
    texts = []
    offset = len(PNG_SIGNATURE)
    while offset < len(data):
        if offset + 8 > len(data):
            raise LorebookError(PNG_FORMAT, f"the image is cut short at byte {offset}")
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        crc_bytes = data[offset + 8 + length : offset + 12 + length]
        if len(body) < length or len(crc_bytes) < 4:
            raise LorebookError(
                PNG_FORMAT, f"the {kind.decode('latin-1')} chunk is cut short"
            )
        offset += 12 + length
        if kind == b"IEND":
            break
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        chunk_name = kind.decode("latin-1")
        keyword, text = _text_chunk(kind, body)
        label = f"{chunk_name} chunk “{keyword}”"
        if struct.unpack(">I", crc_bytes)[0] != zlib.crc32(
            kind + body
        ) and keyword.lower() in ("chara", "ccv3"):
            raise LorebookError(
                PNG_FORMAT,
                f"the {label} is damaged (its CRC does not match)",
                field=keyword,
            )
        if text is None:
            raise LorebookError(
                PNG_FORMAT, f"the {label} will not decompress", field=keyword
            )
        texts.append((keyword, text))
    return texts


def _text_chunk(kind: bytes, body: bytes) -> tuple[str, str | None]:
    """A text chunk's keyword and text (None when compressed text is broken)."""
    keyword, _, rest = body.partition(b"\0")
    keyword = keyword.decode("latin-1")
    try:
        if kind == b"tEXt":
            return keyword, rest.decode("latin-1")
        if kind == b"zTXt":
            return keyword, zlib.decompress(rest[1:]).decode("latin-1")
        compressed, rest = rest[:1] == b"\1", rest[2:]
        _language, _, rest = rest.partition(b"\0")
        _translated, _, text = rest.partition(b"\0")
        return keyword, (zlib.decompress(text) if compressed else text).decode("utf-8")
    except (zlib.error, UnicodeDecodeError):
        return keyword, None


def _decode_card_text(keyword: str, text: str) -> dict:
    """Base64 → UTF-8 → JSON object (a chunk holding bare JSON is read too)."""
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


def _book(book, *, format_name: str, version: str, where: str = "character_book.") -> tuple[tuple[Entry, ...], dict]:
    """The book's entries, and its other fields (name, scan_depth, ...)."""
    if book is None:
        return (), {}
    if not isinstance(book, dict):
        raise LorebookError(
            format_name,
            f"the character book is a {json_type(book)}, not an object",
            field="character_book",
        )
    raw_entries = book.get("entries")
    if raw_entries is None:
        raw_entries = []
    elif isinstance(raw_entries, dict):
        raw_entries = list(raw_entries.values())
    if not isinstance(raw_entries, list):
        raise LorebookError(
            format_name,
            f"the character book's entries are a {json_type(raw_entries)}, not a list",
            field=f"{where}entries",
        )
    entries = tuple(
        _book_entry(raw, index=index, format_name=format_name, version=version)
        for index, raw in enumerate(raw_entries)
    )
    return entries, {key: value for key, value in book.items() if key != "entries"}


def _book_entry(raw, *, index: int, format_name: str, version: str) -> Entry:
    """One book entry, read as SillyTavern's convertCharacterBook reads it.

    1. Turn it into a World Info entry (its settings from `extensions`) and
       read that with the World Info reader, for the same checks and extras.
    2. Put back the card's own names: its field names in errors, the title
       (`name`, else `comment`, else the first key), and the entry fields
       World Info does not have (`id`, `name`, `priority`, `use_regex`, ...).
    3. For a V3 `use_regex` entry, keys in regex syntax become patterns.
    """
    if not isinstance(raw, dict):
        raise LorebookError(
            format_name, f"the entry is a {json_type(raw)}, not an object", entry=index
        )
    uid = raw.get("id", index)
    extensions = raw.get("extensions")
    if extensions is None:
        extensions = {}
    if not isinstance(extensions, dict):
        raise LorebookError(
            format_name,
            f"the extensions are a {json_type(extensions)}, not an object",
            entry=uid,
            field="extensions",
        )
    world_info = {
        "uid": uid,
        "key": raw.get("keys"),
        "keysecondary": raw.get("secondary_keys"),
        "comment": raw.get("comment") or "",
        "content": raw.get("content"),
        "constant": raw.get("constant"),
        "selective": raw.get("selective") or False,
        "order": _default(raw.get("insertion_order"), 100),
        "disable": _disabled(raw, format_name=format_name, uid=uid),
        "displayIndex": _default(extensions.get("display_index"), index),
    }
    position = extensions.get("position")
    world_info["position"] = (
        position
        if position is not None
        else (0 if raw.get("position") == "before_char" else 1)
    )
    defaulted = []
    for st_name, extension_name, default in _EXTENSION_SETTINGS:
        value = extensions.get(extension_name)
        if st_name == "caseSensitive" and value is None:
            value = raw.get("case_sensitive")
        if value is None and default is not None:
            defaulted.append(st_name)
        world_info[st_name] = _default(value, default)
    world_info["addMemo"] = bool(raw.get("comment"))
    try:
        entry = parse_entry(world_info, uid=uid, format_name=format_name)
    except LorebookError as error:
        card_field = {
            "key": "keys",
            "keysecondary": "secondary_keys",
            "disable": "enabled",
        }.get(error.field, error.field)
        problem = str(error).split(": ", 1)[1]
        raise LorebookError(format_name, problem, entry=uid, field=card_field) from None

    extras = {key: value for key, value in entry.extras.items() if key != "defaulted"}
    extras.update(
        {
            key: value
            for key, value in raw.items()
            if key not in _BOOK_ENTRY_FIELDS
            or key
            in ("id", "name", "priority", "insertion_order", "use_regex", "extensions")
        }
    )
    if "position" in raw:
        extras["card_position"] = raw["position"]
    extras["position_name"] = enum_name(POSITION_NAMES, extras["position"])
    extras["selectiveLogic_name"] = enum_name(LOGIC_NAMES, extras["selectiveLogic"])
    extras["role_name"] = enum_name(ROLE_NAMES, extras["role"])
    if "position" not in extensions and "position" not in raw:
        defaulted.append("position")
    if defaulted:
        extras["defaulted"] = defaulted

    keys, regex_keys = entry.keys, entry.regex_keys
    if version == "V3" and read_flag(
        raw, "use_regex", False, format_name=format_name, uid=uid
    ):
        keys, promoted = _promote_regex_keys(keys)
        if promoted:
            regex_keys = regex_keys + promoted
            extras["regex_from_use_regex"] = list(promoted)

    title = next(
        (
            value.strip()
            for value in (raw.get("name"), raw.get("comment"))
            if isinstance(value, str) and value.strip()
        ),
        "",
    )
    return replace(
        entry,
        title=title or entry.title,
        keys=keys,
        regex_keys=regex_keys,
        extras=extras,
    )


def _disabled(raw: dict, *, format_name: str, uid) -> bool:
    """Whether a book entry is switched off: its `enabled` (the spec's
    name); a book written in SillyTavern's style with `disable` instead
    keeps that meaning rather than reading as enabled."""
    if "enabled" not in raw and "disable" in raw:
        return read_flag(raw, "disable", False, format_name=format_name, uid=uid)
    return not read_flag(raw, "enabled", True, format_name=format_name, uid=uid)


def _promote_regex_keys(
    keys: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Of a `use_regex` entry's plain keys, those written in regex syntax
    that compile, as `/key/` patterns; plain words stay plain keys."""
    plain, patterns = [], []
    for key in keys:
        if _REGEX_SYNTAX.search(key) and _compiles(key):
            pattern = f"/{key}/"
            patterns.append(pattern if is_regex_key(pattern) else key)
        else:
            plain.append(key)
    return tuple(plain), tuple(patterns)


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _default(value, default):
    return default if value is None else value

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
    Any other book is returned as it is."""
    if book.card is None:
        return book
    name = book.card.name.strip() or "the character"
    return replace(book, entries=tuple(
        replace(e, title=fill_macros(e.title, name=name), text=fill_macros(e.text, name=name)) for e in book.entries
    ))
