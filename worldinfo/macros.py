"""Macros filled in keys and contents before they are matched or inserted.

SillyTavern runs `substituteParams` over every key before matching it and
over an entry's content once it activates, so a key `{{user}}'s Room`
matches the reader's own name. Loremaster hands the values in
(`Inputs.macros`, names such as "user" and "char"); a macro it was not given
stays as written, since guessing a value would insert a wrong one.
"""

from __future__ import annotations

import re

_BRACED = re.compile(r"\{\{\s*([A-Za-z_][\w]*)\s*\}\}")
#: SillyTavern's older angle-bracket spellings and the macro each stands for.
_ANGLED = {"<USER>": "user", "<BOT>": "char", "<CHAR>": "char"}
_ANGLED_PATTERN = re.compile("|".join(re.escape(k) for k in _ANGLED), re.IGNORECASE)


def lowered(macros: dict[str, str]) -> dict[str, str]:
    """The macro table with case-insensitive names, as SillyTavern's are."""
    return {str(name).lower(): str(value) for name, value in macros.items()}


def fill(text: str, macros: dict[str, str]) -> str:
    """`text` with every known macro filled; `macros` from `lowered`."""
    if not macros or ("{{" not in text and "<" not in text):
        return text

    def braced(match: re.Match) -> str:
        return macros.get(match.group(1).lower(), match.group(0))

    def angled(match: re.Match) -> str:
        return macros.get(_ANGLED[match.group(0).upper()], match.group(0))

    return _ANGLED_PATTERN.sub(angled, _BRACED.sub(braced, text))
