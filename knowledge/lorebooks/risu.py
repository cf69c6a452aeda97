"""RisuAI lorebook exports into a `Lorebook`.

RisuAI exports a lorebook as `{"type": "risu", "ver": 1, "data": [{key,
secondkey, comment, content, mode, insertorder, alwaysActive, selective,
useRegex, folder, ...}]}`. `key` and `secondkey` are comma strings;
`comment` is the title; `alwaysActive` means always included. An item of
`mode` "folder" is a folder, not lore: its `comment` names it and the
entries whose `folder` is its `key` carry that name. SillyTavern imports
these files the same way (convertRisuLorebook in
public/scripts/world-info.js), which is where the field meanings come from;
what that converter sets (`order` from `insertorder`, `probability` from
`activationPercent`, the comment) is kept under SillyTavern's names too,
so the World Info engine applies it.
"""

from __future__ import annotations

from .entries import Entry, Lorebook, LorebookError, compiles_as_pattern, is_regex_key, key_line, kind_of, split_keys

FORMAT = "RisuAI lorebook"

_USED = {"key", "secondkey", "comment", "content", "alwaysActive"}


def parse(data: dict, *, name: str) -> Lorebook:
    """The entries of a Risu lorebook export, in the file's order; its
    folders become the entries' `folderName`."""
    if not isinstance(data, dict):
        raise LorebookError(FORMAT, f"expected an object, found {kind_of(data)}")
    items = data.get("data")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise LorebookError(FORMAT, f"“data” must be a list, found {kind_of(items)}", field="data")
    for index, raw in enumerate(items):
        if not isinstance(raw, dict):
            raise LorebookError(FORMAT, f"an entry must be an object, found {kind_of(raw)}", entry=index)
    folders = {
        raw.get("key"): raw.get("comment") or raw.get("key")
        for raw in items
        if raw.get("mode") == "folder" and isinstance(raw.get("key"), str)
    }
    entries = tuple(_entry(raw, index, folders) for index, raw in enumerate(items) if raw.get("mode") != "folder")
    own_name = data.get("name")
    return Lorebook(
        format=FORMAT,
        name=own_name.strip() if isinstance(own_name, str) and own_name.strip() else name,
        entries=entries,
        extras={key: value for key, value in data.items() if key != "data"},
        notes=() if entries else ("empty lorebook",),
    )


def _entry(raw: dict, index: int, folders: dict) -> Entry:
    comment = raw.get("comment")
    label = comment.strip() if isinstance(comment, str) and comment.strip() else index
    texts = {}
    for field in ("key", "secondkey", "content"):
        value = raw.get(field)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise LorebookError(FORMAT, f"{field} must be text, found {kind_of(value)}", entry=label, field=field)
        texts[field] = value
    keys = key_line(texts["key"])
    if raw.get("useRegex") is True:
        # Risu's regex keys are written bare; written `/…/`, they are Loremaster's regex keys.
        keys = [key if is_regex_key(key) or not compiles_as_pattern(key) else f"/{key}/" for key in keys]
    plain, patterns = split_keys(keys)
    secondary_plain, secondary_patterns = split_keys(key_line(texts["secondkey"]))

    constant = raw.get("alwaysActive", False)
    if constant is None:
        constant = False
    if not isinstance(constant, bool):
        raise LorebookError(FORMAT, f"alwaysActive must be true or false, found {kind_of(constant)}", entry=label, field="alwaysActive")

    extras = {key: value for key, value in raw.items() if key not in _USED}
    extras.update(_sillytavern_fields(raw))
    if raw.get("folder") in folders:
        extras["folderName"] = folders[raw["folder"]]
    return Entry(
        title=label if isinstance(label, str) else (plain[0] if plain else f"Entry {index + 1}"),
        text=texts["content"],
        keys=plain,
        secondary_keys=secondary_plain + secondary_patterns,
        regex_keys=patterns,
        constant=constant,
        extras=extras,
    )


def _sillytavern_fields(raw: dict) -> dict:
    """What convertRisuLorebook sets from the entry, by SillyTavern's names."""
    comment = raw.get("comment")
    fields = {"comment": comment if isinstance(comment, str) else "", "addMemo": True}
    for name, st_name in (("insertorder", "order"), ("activationPercent", "probability")):
        value = raw.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            fields[st_name] = value
    if "probability" in fields:
        fields["useProbability"] = True
    return fields
