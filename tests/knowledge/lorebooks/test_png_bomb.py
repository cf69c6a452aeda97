"""A PNG decompression bomb (issue 23, finding 1): a card whose compressed
text chunk inflates to 64 MB is refused by name, having inflated no more than
the file's text limit; chunks no reader looks for are never inflated."""

import base64
import functools
import json
import time
import tracemalloc
import zlib

import pytest

from knowledge.lorebooks import read
from knowledge.lorebooks.entries import LorebookError
from knowledge.lorebooks.png import MAX_TEXT_CHUNKS, read_png_text
from tests.knowledge.lorebooks.test_cards import V2, png, text_chunk

BOMB_BYTES = 64 * 1024 * 1024


@functools.cache
def zeros_deflated(size: int = BOMB_BYTES) -> bytes:
    """`size` zero bytes deflated (about 64 KB for 64 MB), written in pieces
    so the test itself never holds the 64 MB."""
    packer, piece = zlib.compressobj(9), b"0" * (1024 * 1024)
    return b"".join(packer.compress(piece) for _ in range(size // len(piece))) + packer.flush()


def bomb(kind: bytes = b"zTXt", keyword: bytes = b"chara") -> bytes:
    if kind == b"zTXt":
        return png((b"zTXt", keyword + b"\0\0" + zeros_deflated()))
    return png((b"iTXt", keyword + b"\0\1\0\0\0" + zeros_deflated()))


@pytest.mark.parametrize("kind", [b"zTXt", b"iTXt"])
def test_a_bomb_in_a_card_chunk_is_refused_naming_the_limit_with_memory_bounded(kind):
    data = bomb(kind)
    assert len(data) < 100_000
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(LorebookError) as caught:
            read_png_text(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "this PNG's text chunks inflate past 8 MB; a character card needs far less" in str(caught.value)
    assert peak < 30 * 1024 * 1024
    assert time.monotonic() - started < 2


def test_the_limit_counts_every_card_chunk_together():
    card = text_chunk("chara", V2)
    size = len(card[1]) - len(b"chara\0")
    assert len(read_png_text(png(card), text_limit=size)) == 1
    with pytest.raises(LorebookError, match="inflate past"):
        read_png_text(png(card, text_chunk("ccv3", V2)), text_limit=size * 2 - 1)


def test_a_chunk_no_reader_looks_for_is_skipped_uninflated_however_large():
    data = png((b"zTXt", b"Comment\0\0" + zeros_deflated()), text_chunk("chara", V2))
    started = time.monotonic()
    assert [keyword for keyword, _ in read_png_text(data)] == ["chara"]
    assert time.monotonic() - started < 0.5


def test_an_image_of_hundreds_of_text_chunks_is_refused():
    chunks = [(b"tEXt", b"Comment\0hello")] * (MAX_TEXT_CHUNKS + 1)
    with pytest.raises(LorebookError, match=f"more than {MAX_TEXT_CHUNKS} text chunks"):
        read_png_text(png(*chunks, text_chunk("chara", V2)))


def test_a_truncated_compressed_chunk_is_refused_as_broken():
    encoded = base64.b64encode(json.dumps(V2).encode())
    with pytest.raises(LorebookError, match="will not decompress"):
        read_png_text(png((b"zTXt", b"chara\0\0" + zlib.compress(encoded)[:-6])))


def test_a_card_nested_too_deeply_is_refused_not_crashed():
    deep = base64.b64encode(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(LorebookError, match="nests too deeply"):
        read(png((b"tEXt", b"chara\0" + deep)), name="deep.png")


def test_the_limit_is_what_the_caller_passes():
    with pytest.raises(LorebookError, match="inflate past 1 KB"):
        read(png(text_chunk("chara", V2)), name="seren.png", png_text_limit=1024)
