"""Agnaistic memory books into a `Lorebook`.

A memory book is `{"kind": "memory", "name", "description", "entries":
[{name, entry, keywords, priority, weight, enabled}]}`: `entry` is the
text, `keywords` the keys, `name` the title. Its `entries` is a list like a
World Info file written by some tools, so the `kind` marks it; read as
World Info it would lose every key and text. SillyTavern imports these
books too (convertAgnaiMemoryBook in public/scripts/world-info.js), and
KoboldAI Lite (load_agnai_wi); they read the same fields. What that
converter makes of an entry (its `order` from `weight`, its comment from
`name`) is kept under SillyTavern's names, so the World Info engine applies
it; an entry some tools write with `constant: true` is constant.
"""

from __future__ import annotations

from .entries import Entry, Lorebook, LorebookError, kind_of, key_line, split_keys, strict_flag

FORMAT = "Agnai memory book"

_USED = {"name", "entry", "keywords", "enabled", "constant"}


def parse(data: dict, *, name: str) -> Lorebook:
    """The entries of a memory book's decoded JSON, in the file's order."""
    if not isinstance(data, dict):
        raise LorebookError(FORMAT, f"expected an object, found {kind_of(data)}")
    raw_entries = data.get("entries")
    if raw_entries is None:
        raw_entries = []
    if not isinstance(raw_entries, list):
        raise LorebookError(FORMAT, f"“entries” must be a list, found {kind_of(raw_entries)}", field="entries")
    entries = tuple(_entry(raw, index) for index, raw in enumerate(raw_entries))
    own_name = data.get("name")
    return Lorebook(
        format=FORMAT,
        name=own_name.strip() if isinstance(own_name, str) and own_name.strip() else name,
        entries=entries,
        extras={key: value for key, value in data.items() if key != "entries"},
        notes=() if entries else ("empty lorebook",),
    )


def _entry(raw, index: int) -> Entry:
    if not isinstance(raw, dict):
        raise LorebookError(FORMAT, f"an entry must be an object, found {kind_of(raw)}", entry=index)
    title = raw.get("name")
    if title is not None and not isinstance(title, str):
        raise LorebookError(FORMAT, f"name must be text, found {kind_of(title)}", entry=index, field="name")
    label = title.strip() if title and title.strip() else index

    text = raw.get("entry")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise LorebookError(FORMAT, f"entry must be text, found {kind_of(text)}", entry=label, field="entry")

    keywords = raw.get("keywords")
    if keywords is None:
        keywords = []
    elif isinstance(keywords, str):
        keywords = key_line(keywords)
    if not isinstance(keywords, list) or not all(isinstance(key, str) for key in keywords):
        raise LorebookError(FORMAT, "keywords must be a list of strings", entry=label, field="keywords")
    plain, patterns = split_keys(keywords)

    extras = {key: value for key, value in raw.items() if key not in _USED}
    extras.update(_sillytavern_fields(raw, title or ""))
    return Entry(
        title=(title or "").strip() or (plain[0] if plain else patterns[0] if patterns else f"Entry {index + 1}"),
        text=text,
        keys=plain,
        regex_keys=patterns,
        enabled=strict_flag(raw, "enabled", default=True, format_name=FORMAT, entry=label),
        constant=strict_flag(raw, "constant", format_name=FORMAT, entry=label),
        extras=extras,
    )


def _sillytavern_fields(raw: dict, title: str) -> dict:
    """What convertAgnaiMemoryBook sets from the entry, by SillyTavern's names."""
    fields = {"comment": title, "addMemo": bool(title), "selective": False}
    weight = raw.get("weight")
    if isinstance(weight, (int, float)) and not isinstance(weight, bool):
        fields["order"] = weight
    return fields
