"""Real image files for hostile-input tests: small valid PNGs and decompression bombs (PNGs
and GIFs whose headers declare far more pixels than the few bytes that follow)."""

from __future__ import annotations

import functools
import io
import struct
import zlib

from PIL import Image, ImageDraw

from pipelines.store.images import MAX_IMAGE_BYTES, MAX_SIDE



def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _png_from_rows(width: int, height: int, rows_zlib: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", rows_zlib) + _chunk(b"IEND", b"")


def real_png(seed: int = 0, size: int = 48) -> bytes:
    """A small, valid, distinct PNG drawn with Pillow."""
    im = Image.new("RGB", (size, size), (255, 255, 255))
    d = ImageDraw.Draw(im)
    for i in range(6):
        v = (seed * 37 + i * 53) % 251
        xs, ys = sorted(((v * 7 + i * 5) % size, (v * 11) % size)), sorted(((v * 3) % size, (v * 13 + i) % size))
        d.rectangle([xs[0], ys[0], xs[1], ys[1]], fill=((v * 5) % 256, (v * 29) % 256, (v * 71) % 256))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def declared_png(width: int, height: int) -> bytes:
    """A PNG header declaring ``width x height`` pixels with a 10-byte pixel stream (68 bytes)."""
    return _png_from_rows(width, height, zlib.compress(b"\x00" * 10))


@functools.lru_cache(maxsize=None)
def inflating_png(side: int) -> bytes:
    """A complete, valid PNG of ``side x side`` black pixels: tiny on disk, huge decoded."""
    packer = zlib.compressobj(9)
    row = b"\x00" * (1 + 3 * side)
    stream = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    return _png_from_rows(side, side, stream)


@functools.lru_cache(maxsize=None)
def _text_bomb() -> bytes:
    return zlib.compress(b"a" * (100 * 1024 * 1024), 9)  # 100 MB in about 100 kB


@functools.lru_cache(maxsize=None)
def ancillary_bomb_png(kind: bytes) -> bytes:
    """A valid 8x8 PNG with a zTXt or iCCP chunk that inflates to 100 MB."""
    bomb = _text_bomb()
    payload = (b"Comment\x00\x00" if kind == b"zTXt" else b"icc\x00\x00") + bomb
    base = real_png(1, 8)
    return base[:33] + _chunk(kind, payload) + base[33:]  # right after IHDR


def huge_screen_gif() -> bytes:
    buf = io.BytesIO()
    Image.new("P", (4, 4)).save(buf, "GIF")
    data = bytearray(buf.getvalue())
    data[6:10] = struct.pack("<HH", 65535, 65535)  # logical screen width and height
    return bytes(data)


def oversized_png() -> bytes:
    """A decodable PNG padded past MAX_IMAGE_BYTES with a private ancillary chunk."""
    base = real_png(2, 8)
    return base[:33] + _chunk(b"prVt", b"\x00" * (MAX_IMAGE_BYTES + 16)) + base[33:]


def bomb_images() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, a word the refusal reason must contain)."""
    return {
        "png-declares-50000x50000": (declared_png(50_000, 50_000), "bomb"),
        "png-declares-16385x1": (declared_png(MAX_SIDE + 1, 1), "out of bounds"),
        "png-inflates-to-49-megapixels": (inflating_png(7000), "bomb"),
        "gif-screen-65535x65535": (huge_screen_gif(), "bomb"),
        "png-ztxt-inflates-to-100mb": (ancillary_bomb_png(b"zTXt"), "too large"),
        "png-iccp-inflates-to-100mb": (ancillary_bomb_png(b"iCCP"), "too large"),
        "png-truncated": (real_png(3)[:-30], "corrupt"),
        "not-an-image": (b"<svg onload=alert(1)>", "corrupt"),
        "empty": (b"", "empty"),
    }
