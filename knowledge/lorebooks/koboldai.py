"""KoboldAI world info: story saves, United's `worldinfo_v2`, bare arrays.

A KoboldAI story save is `{"gamestarted", "prompt", "memory", "actions",
"worldinfo": [{key, keysecondary, content, comment, folder, selective,
constant}], "wifolders_d": {"<folder uid>": {"name", "collapsed"}},
"wifolders_l": [...]}`; saves converted from other tools carry only `key`
and `content`, and KoboldAI Lite's add `keyanti`, `probability`, `wigroup`
and `widisabled` (its switch: a disabled entry arrives disabled).
KoboldAI United also saves `worldinfo_v2`, `{"folders": {name: [uids]},
"entries": {uid: {title, key: [...], keysecondary: [...], folder: name,
content, type, ...}}}`, which is the richer copy of the same entries and
is read instead of the old list; United's "export world info" writes that
object on its own, `{"folders", "entries"}`. An entry of `type` "constant"
or "commentator" is constant, as United's loader makes it. A save with no
`worldinfo` (KoboldAI's own sample story) is an empty book with a note; its
`memory` and `authorsnote` are kept with the book. A world info
file is a bare array of the same entries (KoboldAI's own exporter writes AI
Dungeon's `keys`/`entry` names, read too).

The blank entry KoboldAI keeps at the end of each folder for a new one (no
keys, no text, no title, `init: false`) is skipped with a count; an entry
with a title of its own is kept even when it is still empty.

Keys are comma strings that KoboldAI matches as lowercase substrings,
never as words or regexes: they are kept as written, and each entry
records `match: "substring"`.
"""

from __future__ import annotations

from .entries import Entry, Lorebook, LorebookError, kind_of, strict_flag

FORMAT = "KoboldAI world info"
# The title United gives an entry it creates empty.
PLACEHOLDER_TITLE = "New World Info Entry"
NO_WORLD_INFO = "a KoboldAI story save with no world info: the book is empty (the story itself is not imported)"

_USED = {"key", "keys", "keysecondary", "content", "entry", "constant", "widisabled"}


def parse(data, *, name: str) -> Lorebook:
    """The world info of a KoboldAI save or world info file.

    1. Find the entries: `worldinfo_v2.entries` when present, else the
       save's `worldinfo` list, else the bare array.
    2. Name the folders (old saves by uid, United by name).
    3. Read each entry; a blank one (no keys, no text) is skipped and counted.
    """
    notes = []
    if isinstance(data, list):
        raw_entries, folders, extras, label = list(enumerate(data)), {}, {}, FORMAT
    elif isinstance(data, dict):
        raw_entries, folders, label, note = _from_save(data)
        if note:
            notes.append(note)
        extras = {
            key: data[key]
            for key in ("wifolders_d", "wifolders_l", "gamestarted", "anotetemplate", "memory", "authorsnote")
            if key in data
        }
        if label.endswith("(v2)"):
            v2 = data["worldinfo_v2"] if isinstance(data.get("worldinfo_v2"), dict) else data
            extras["worldinfo_v2_folders"] = v2.get("folders", {})
    else:
        raise LorebookError(FORMAT, f"expected a story save or a list of entries, found {kind_of(data)}")

    entries, skipped = [], 0
    for index, raw in raw_entries:
        entry = _entry(raw, index, folders, label)
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)

    if not raw_entries:
        notes.insert(0, "empty lorebook")
    if skipped:
        notes.append(f"{skipped} blank entr{'y' if skipped == 1 else 'ies'} with no keys and no text skipped")
    return Lorebook(format=label, name=name, entries=tuple(entries), extras=extras, notes=tuple(notes))


def _from_save(data: dict):
    """(index, entry) pairs, folder names by id, the format label and a
    note, from a story save."""
    v2 = data.get("worldinfo_v2")
    if v2 is None and "worldinfo" not in data and isinstance(data.get("folders"), dict):
        v2 = data  # United's "export world info" file: the v2 object on its own
    if isinstance(v2, dict) and v2.get("entries"):
        raw = v2["entries"]
        if not isinstance(raw, dict):
            raise LorebookError(f"{FORMAT} (v2)", f"“entries” must be an object, found {kind_of(raw)}", field="worldinfo_v2.entries")
        note = "the save's older “worldinfo” copy was ignored in favour of “worldinfo_v2”" if data.get("worldinfo") else ""
        return list(raw.items()), {}, f"{FORMAT} (v2)", note
    if v2 is not None and not isinstance(v2, dict):
        raise LorebookError(f"{FORMAT} (v2)", f"“worldinfo_v2” must be an object, found {kind_of(v2)}", field="worldinfo_v2")

    if "worldinfo" not in data:
        if is_story_save(data):
            return [], {}, FORMAT, NO_WORLD_INFO
        raise LorebookError(FORMAT, "a story save without “worldinfo”", field="worldinfo")
    raw = data["worldinfo"]
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise LorebookError(FORMAT, f"“worldinfo” must be a list, found {kind_of(raw)}", field="worldinfo")
    folders = {}
    raw_folders = data.get("wifolders_d")
    if isinstance(raw_folders, dict):
        for uid, folder in raw_folders.items():
            if isinstance(folder, dict) and folder.get("name"):
                folders[str(uid)] = folder["name"]
    return list(enumerate(raw)), folders, FORMAT, ""


def is_story_save(data) -> bool:
    """A story save by its story: the opening `prompt` and the `actions`
    that followed (a list in KoboldAI's saves, an object in United's). Its
    own sample story, like any save written before the reader added world
    info, has no `worldinfo` at all."""
    return isinstance(data, dict) and isinstance(data.get("prompt"), str) and isinstance(data.get("actions"), (list, dict))


def _entry(raw, index, folders: dict, format_name: str) -> Entry | None:
    if not isinstance(raw, dict):
        raise LorebookError(format_name, f"an entry must be an object, found {kind_of(raw)}", entry=index)
    comment = raw.get("title") or raw.get("comment")
    label = comment.strip() if isinstance(comment, str) and comment.strip() else index

    key_field = "key" if "key" in raw or "keys" not in raw else "keys"
    keys = _keys(raw.get(key_field), format_name, label, key_field)
    secondary = _keys(raw.get("keysecondary"), format_name, label, "keysecondary")

    text_field = next((field for field in ("content", "entry", "manual_text") if raw.get(field) is not None), "content")
    text = raw.get(text_field) or ""
    if not isinstance(text, str):
        raise LorebookError(format_name, f"{text_field} must be a string, found {kind_of(text)}", entry=label, field=text_field)
    if not keys and not text.strip() and (label if isinstance(label, str) else "") in ("", PLACEHOLDER_TITLE):
        return None

    constant = strict_flag(raw, "constant", format_name=format_name, entry=label)
    # United's loader makes "constant" and "commentator" entries constant whatever their flag says.
    if raw.get("type") in ("constant", "commentator"):
        constant = True
    # KoboldAI Lite switches an entry off with `widisabled`; the others have no such flag.
    enabled = not strict_flag(raw, "widisabled", format_name=format_name, entry=label)

    extras = {field: value for field, value in raw.items() if field not in _USED | {"title", "comment"}}
    if isinstance(raw.get("comment"), str) and raw.get("title"):
        extras["comment"] = raw["comment"]
    extras["match"] = "substring"
    folder = raw.get("folder")
    if folder is not None and folder != "root":
        extras["folderName"] = folders.get(str(folder), str(folder))
    title = comment.strip() if isinstance(comment, str) and comment.strip() else (keys[0] if keys else f"Entry {index + 1 if isinstance(index, int) else index}")
    return Entry(
        title=title, text=text, keys=keys, secondary_keys=secondary, enabled=enabled, constant=constant, extras=extras
    )


def _keys(raw, format_name: str, label, field: str) -> tuple[str, ...]:
    """A comma string (or United's list) as trimmed keys, duplicates once."""
    if raw is None:
        return ()
    if isinstance(raw, str):
        parts = raw.split(",")
    elif isinstance(raw, list) and all(isinstance(key, str) for key in raw):
        parts = raw
    else:
        raise LorebookError(format_name, f"{field} must be a comma-separated string, found {kind_of(raw)}", entry=label, field=field)
    keys = []
    for part in parts:
        key = part.strip()
        if key and key not in keys:
            keys.append(key)
    return tuple(keys)
