"""The text chunks of a PNG image (tEXt, zTXt, iTXt), where character cards
and NovelAI lorebooks travel.

Only what a card needs is checked: the signature, the chunks' lengths, and
the CRC of a card chunk (`chara`, `ccv3`); a broken image elsewhere does not
spoil the card it carries.
"""

from __future__ import annotations

import struct
import zlib

from knowledge.lorebooks.entries import LorebookError

PNG_FORMAT = "Character Card PNG"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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

