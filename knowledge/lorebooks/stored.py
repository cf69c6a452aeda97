"""An entry's extras as the database keeps them: only what the file gave.

A World Info entry read from an old or minimal file has every field of
SillyTavern's template filled in with its default (knowledge.lorebooks.
sillytavern), with the names of the filled ones and three readable labels
beside: about 1 KB an entry that the file never held, which made a
100,000-entry book of 5 MB take 147 MB (issue 23). So the row keeps the
file's own fields and `expand` puts the filled ones back on reading: the
source page, the export and the key matching see the same extras as before.

`compact` marks what it shrank with a `defaulted` list (empty, or the
filled fields whose value is not the template's, such as a card book's
position): an entry without one was never filled and is stored whole.
Pure Python, like the importers.
"""

from __future__ import annotations

from .sillytavern import ENTRY_DEFAULTS, LOGIC_NAMES, MUTABLE, POSITION_NAMES, ROLE_NAMES, entry_default, enum_name

#: The readable labels the importers add beside numbered settings, rebuilt on reading.
LABELS = {"position_name": ("position", POSITION_NAMES), "selectiveLogic_name": ("selectiveLogic", LOGIC_NAMES),
          "role_name": ("role", ROLE_NAMES)}
#: The fields a filled entry always has, in the order the importer writes them.
FILLED_ORDER = (*ENTRY_DEFAULTS, "displayIndex")


def _default(name: str, extras: dict):
    if name == "displayIndex":
        return extras.get("uid")
    return entry_default(name) if name in MUTABLE else ENTRY_DEFAULTS[name]


def _is_default(name: str, value, extras: dict) -> bool:
    if name != "displayIndex" and name not in ENTRY_DEFAULTS:
        return False
    default = _default(name, extras)
    return value == default and type(value) is type(default)  # False is not 0 in the exported JSON


def compact(extras: dict) -> dict:
    """The extras to store: without the defaults the import filled in and
    the labels, when the entry was filled (it has `defaulted`)."""
    extras = expand(extras)
    if "defaulted" not in extras:
        return dict(extras)
    filled = set(extras["defaulted"])
    stored, kept_filled = {}, []
    for name, value in extras.items():
        if name == "defaulted" or (name in LABELS and value == _label(name, extras)):
            continue
        if name in filled and _is_default(name, value, extras):
            continue
        stored[name] = value
        if name in filled:
            kept_filled.append(name)
    stored["defaulted"] = kept_filled
    return stored


def expand(stored: dict) -> dict:
    """The extras as the importer made them, from what `compact` stored."""
    if "defaulted" not in stored:
        return dict(stored)
    extras = {"uid": stored["uid"]} if "uid" in stored else {}
    filled = set(stored["defaulted"])
    for name in FILLED_ORDER:
        if name in stored:
            extras[name] = stored[name]
        else:
            extras[name] = _default(name, stored)
            filled.add(name)
    extras.update({name: value for name, value in stored.items() if name != "defaulted"})
    for name in LABELS:
        extras.setdefault(name, _label(name, extras))
    extras["defaulted"] = [name for name in FILLED_ORDER if name in filled] + sorted(filled - set(FILLED_ORDER))
    return extras


def _label(name: str, extras: dict) -> str:
    field, names = LABELS[name]
    return enum_name(names, extras.get(field))
