"""The text chunks of a PNG image (tEXt, zTXt, iTXt), where character cards
and NovelAI lorebooks travel.

Only what a card needs is checked: the signature, the chunks' lengths, and
the CRC of a card chunk (`chara`, `ccv3`); a broken image elsewhere does not
spoil the card it carries.

Compressed text is a decompression bomb waiting to happen (400 MB of zeros
fit in 400 KB), so only the chunks a reader looks for are inflated at all,
and never past `text_limit` bytes for the whole file: the inflater stops at
the limit rather than finding out afterwards.
"""

from __future__ import annotations

import struct
import zlib

from knowledge.lorebooks.entries import LorebookError

PNG_FORMAT = "Character Card PNG"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: The text chunks anything here reads: a card (`chara`, `ccv3`) and a
#: NovelAI lorebook image (`naidata`). Others (Software, Comment, ...) are
#: skipped unread.
CARD_KEYWORDS = frozenset({"chara", "ccv3", "naidata"})
#: Checked CRCs: the chunks whose text is the card itself.
_CHECKED_KEYWORDS = ("chara", "ccv3")
#: The most text a PNG's chunks may hold once inflated, all chunks together
#: (the default of LOREMASTER_PNG_TEXT_MAX_BYTES): a large card with an
#: embedded book is well under 1 MB.
PNG_TEXT_LIMIT = 8 * 1024 * 1024
#: A card has one or two text chunks; an image with hundreds is not a card.
MAX_TEXT_CHUNKS = 64
_TEXT_KINDS = (b"tEXt", b"zTXt", b"iTXt")


class _TooMuchText(Exception):
    """A chunk would inflate past what is left of the file's text limit."""


def read_png_text(
    data: bytes, *, keywords: frozenset[str] = CARD_KEYWORDS, text_limit: int = PNG_TEXT_LIMIT
) -> list[tuple[str, str]]:
    """The (keyword, text) of every tEXt, zTXt and iTXt chunk whose keyword
    (case-insensitively) is in `keywords`, in order.

    1. The signature must be PNG's; reading stops at IEND.
    2. A text chunk of another keyword is skipped without inflating it; over
       MAX_TEXT_CHUNKS text chunks of any keyword, the image is refused.
    3. The kept chunks' texts together may not pass `text_limit` bytes: the
       inflater is told how much room is left and stops there, so a bomb
       costs at most the limit, and is refused by name.
    4. A card chunk whose CRC does not match is refused by name (its text is
       what we read); other chunks' CRCs are not checked.
    """
    if not isinstance(data, (bytes, bytearray)) or not data.startswith(PNG_SIGNATURE):
        raise LorebookError(PNG_FORMAT, "the file is not a PNG image (its signature is wrong)")
    texts, seen, room = [], 0, text_limit
    for kind, body, crc in _chunks(memoryview(data)):
        if kind == b"IEND":
            break
        if kind not in _TEXT_KINDS:
            continue
        seen += 1
        if seen > MAX_TEXT_CHUNKS:
            raise LorebookError(
                PNG_FORMAT, f"the image holds more than {MAX_TEXT_CHUNKS} text chunks; a character card has one or two"
            )
        keyword = bytes(body[:80]).partition(b"\0")[0].decode("latin-1")
        if keyword.lower() not in keywords:
            continue
        label = f"{kind.decode('latin-1')} chunk “{keyword}”"
        if keyword.lower() in _CHECKED_KEYWORDS and crc != zlib.crc32(kind + body):
            raise LorebookError(PNG_FORMAT, f"the {label} is damaged (its CRC does not match)", field=keyword)
        try:
            text = _text_chunk(kind, bytes(body), room)
        except _TooMuchText:
            raise LorebookError(
                PNG_FORMAT,
                f"this PNG's text chunks inflate past {_size(text_limit)}; a character card needs far less",
                field=keyword,
            ) from None
        if text is None:
            raise LorebookError(PNG_FORMAT, f"the {label} will not decompress", field=keyword)
        room -= len(text)
        texts.append((keyword, text))
    return texts


def _chunks(data: memoryview):
    """(kind, body, crc) of each chunk after the signature; the bodies are
    views, so skipping an image's pixel data copies nothing."""
    offset = len(PNG_SIGNATURE)
    while offset < len(data):
        if offset + 8 > len(data):
            raise LorebookError(PNG_FORMAT, f"the image is cut short at byte {offset}")
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        crc_bytes = data[offset + 8 + length : offset + 12 + length]
        if len(body) < length or len(crc_bytes) < 4:
            raise LorebookError(PNG_FORMAT, f"the {kind.decode('latin-1')} chunk is cut short")
        offset += 12 + length
        yield kind, body, struct.unpack(">I", crc_bytes)[0]


def _text_chunk(kind: bytes, body: bytes, room: int) -> str | None:
    """A text chunk's text (None when compressed text is broken), at most
    `room` bytes of it before decoding, else _TooMuchText."""
    _keyword, _, rest = body.partition(b"\0")
    try:
        if kind == b"tEXt":
            return _within(rest, room).decode("latin-1")
        if kind == b"zTXt":
            return _inflate(rest[1:], room).decode("latin-1")
        compressed, rest = rest[:1] == b"\1", rest[2:]
        _language, _, rest = rest.partition(b"\0")
        _translated, _, text = rest.partition(b"\0")
        return (_inflate(text, room) if compressed else _within(text, room)).decode("utf-8")
    except (zlib.error, UnicodeDecodeError):
        return None


def _within(text: bytes, room: int) -> bytes:
    if len(text) > room:
        raise _TooMuchText
    return text


def _inflate(compressed: bytes, room: int) -> bytes:
    """The inflated bytes, asking zlib for at most one byte past `room`: more
    than `room` means the chunk is too large, whatever it would have grown to."""
    inflater = zlib.decompressobj()
    inflated = inflater.decompress(compressed, room + 1)
    if len(inflated) > room:
        raise _TooMuchText
    if not inflater.eof:
        raise zlib.error("incomplete or truncated stream")
    return inflated


def _size(limit: int) -> str:
    """A limit as the pages print sizes (1 MB = 1,048,576 bytes)."""
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if limit >= scale:
            return f"{limit / scale:.3g} {unit}"
    return f"{limit} bytes"
