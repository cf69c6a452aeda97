"""Reading an uploaded file: its text, or the lorebook it holds, or the
reason it is refused; and the names, hash and sizes the library gives it.

Its own module, below the index job, because a worker reads the file now,
not the web request that received it (issue 23): the upload only stores it.
The content decides, not the name alone (knowledge.lorebooks.detect): a
character card saved as `.png`, a World Info file renamed `.txt` or a
NovelAI `.story` each arrive as the lorebook they are. A file named as a
lorebook that is not one is refused, naming the format, the entry and the
field at fault; a Markdown or text file whose text is not a lorebook is
read as text.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePath

from django.conf import settings
from django.core.exceptions import ValidationError
from django.template.defaultfilters import filesizeformat

from ..lorebooks import Lorebook, LorebookError, detect, unreadable
from ..models import ALWAYS_INCLUDE_CANON_ONLY, KnowledgeSource

Source = KnowledgeSource

ALLOWED_SUFFIXES = (".md", ".markdown", ".txt")
UNREAD_SUFFIX = (
    "{name}: Loremaster imports Markdown (.md, .markdown) and plain text (.txt), "
    "and lorebooks: SillyTavern World Info and character cards (.json, .png), NovelAI "
    "(.lorebook, .story, .scenario), AI Dungeon and KoboldAI (.json)."
)
#: Suffixes that mark a lorebook file; the content still decides (knowledge.lorebooks.detect).
LOREBOOK_SUFFIXES = (".json", ".png", ".lorebook", ".story", ".scenario")

class ImportRefused(Exception):
    """This file cannot be imported; the message says why, for the reader."""


class DuplicateSource(ImportRefused):
    def __init__(self, filename: str, existing: KnowledgeSource):
        self.existing = existing
        super().__init__(f"{filename}: the same text is already in this library as “{existing.title}”.")


def source_text_from_upload(*, filename: str, data: bytes) -> str:
    """The text of an uploaded file, or ImportRefused saying what is wrong."""
    name = PurePath(filename or "").name
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if not name.lower().endswith(ALLOWED_SUFFIXES):
        raise ImportRefused(f"{name or 'The file'}: only Markdown (.md, .markdown) and plain text (.txt) files can be imported.")
    if len(data) > limit:
        raise ImportRefused(f"{name}: the file is {human_size(len(data))}, over the {human_size(limit)} limit.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(
            f"{name}: the file is not UTF-8 text (undecodable byte at position {exc.start}). "
            "Save it as UTF-8 and upload it again."
        ) from exc
    if "\x00" in text:
        raise ImportRefused(f"{name}: the file contains binary data, not text.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ImportRefused(f"{name}: the file is empty.")
    return text


def human_size(n: int) -> str:
    """Sizes as the pages print them (Django's filesizeformat, 1 MB = 1,048,576
    bytes), so a limit reads the same in the hint and in the refusal."""
    return filesizeformat(n).replace("\xa0", " ")


#: A Markdown heading of level 1 or 2 near the top names the file better than its file name.
TITLE_HEADING = re.compile(r"^\s{0,3}#{1,2}\s+(.+?)\s*#*\s*$", re.MULTILINE)
TITLE_SEARCH_CHARS = 2000


def title_for(filename: str, text: str) -> str:
    """The file's first heading when it has one early on, else its file name without the extension."""
    match = TITLE_HEADING.search(text[:TITLE_SEARCH_CHARS])
    if match and match.group(1).strip():
        return match.group(1).strip()
    return PurePath(filename).stem or filename


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_upload(*, filename: str, data: bytes) -> str | Lorebook:
    """The file's text, or the lorebook it holds, or ImportRefused."""
    name = PurePath(filename or "").name
    lowered = name.lower()
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ImportRefused(f"{name}: the file is {human_size(len(data))}, over the {human_size(limit)} limit.")
    named_lorebook = lowered.endswith(LOREBOOK_SUFFIXES)
    try:
        book = detect.read(data, name=name, png_text_limit=settings.LOREMASTER_PNG_TEXT_MAX_BYTES)
    except LorebookError as exc:
        if named_lorebook or not lowered.endswith(ALLOWED_SUFFIXES):
            raise ImportRefused(f"{name}: {exc}. Nothing was imported from it.") from exc
        book = None  # text that happens to be JSON of no lorebook format
    if book is not None:
        return book
    if named_lorebook:
        raise ImportRefused(f"{name}: {unreadable(data, name=name)}. Nothing was imported from it.")
    if not lowered.endswith(ALLOWED_SUFFIXES):
        raise ImportRefused(UNREAD_SUFFIX.format(name=name or "The file"))
    return source_text_from_upload(filename=name, data=data)


def source_always_include_check(*, classification: str, always_include: bool) -> None:
    """Raises ImportRefused, with the reader's message, when a source with
    these settings would break the always-include rule (Canon only).

    The rule and its message are the model's check constraint; this asks it
    (one small query), so every write path refuses the way the library's
    form does, instead of the database answering with an IntegrityError.
    """
    rule = next(c for c in Source._meta.constraints if c.name == ALWAYS_INCLUDE_CANON_ONLY)
    try:
        rule.validate(Source, Source(classification=classification, always_include=always_include))
    except ValidationError as exc:
        raise ImportRefused(" ".join(exc.messages)) from exc
