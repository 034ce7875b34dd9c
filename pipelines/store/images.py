"""Content-addressed image store with validation of untrusted image bytes.

Images are stored once under ``images/<h[:2]>/<h>.<ext>`` where ``h`` is the sha256 of
the bytes as received. Bytes that are not a decodable image of an allowed format, or
that would decode to too many pixels (decompression bombs), are refused with
``ImageRejected`` whose message is a one-line reason.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from pipelines.store.atomic import atomic_write_bytes

ALLOWED_FORMATS = {"PNG": "png", "JPEG": "jpg", "GIF": "gif", "WEBP": "webp", "BMP": "bmp"}
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_PIXELS = 40_000_000
MAX_SIDE = 16_384


class ImageRejected(ValueError):
    """The bytes are not an acceptable image; the message says why."""


@dataclass(frozen=True)
class ImageInfo:
    image_hash: str
    format: str  # lower-case file extension: png, jpg, gif, webp, bmp
    width: int
    height: int
    size_bytes: int


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def inspect_image(data: bytes) -> ImageInfo:
    """Validate untrusted bytes as an image and describe them, without storing."""
    if not data:
        raise ImageRejected("empty image")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRejected(f"image of {len(data)} bytes exceeds {MAX_IMAGE_BYTES}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                fmt = im.format
                width, height = im.size
                if fmt not in ALLOWED_FORMATS:
                    raise ImageRejected(f"unsupported image format {fmt}")
                if width <= 0 or height <= 0 or width > MAX_SIDE or height > MAX_SIDE:
                    raise ImageRejected(f"image size {width}x{height} out of bounds")
                if width * height > MAX_PIXELS:
                    raise ImageRejected(f"image of {width}x{height} pixels is a decompression bomb")
                im.verify()
            # verify() does not decode pixel data; a full load catches truncated files.
            with Image.open(io.BytesIO(data)) as im:
                im.load()
    except ImageRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRejected(f"decompression bomb: {exc}") from None
    except Exception as exc:  # Pillow raises many types for corrupt data
        message = re.sub(r" at 0x[0-9a-fA-F]+", "", f"corrupt image: {type(exc).__name__}: {exc}")  # no object addresses
        raise ImageRejected(message.splitlines()[0]) from None
    return ImageInfo(sha256_hex(data), ALLOWED_FORMATS[fmt], width, height, len(data))


class ImageStore:
    """Images by content hash under one root folder."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def relative_path(self, image_hash: str, fmt: str) -> str:
        return f"{image_hash[:2]}/{image_hash}.{fmt}"

    def path(self, image_hash: str) -> Path:
        folder = self.root / image_hash[:2]
        for ext in ALLOWED_FORMATS.values():
            p = folder / f"{image_hash}.{ext}"
            if p.exists():
                return p
        raise FileNotFoundError(f"image {image_hash} is not in the store {self.root}")

    def has(self, image_hash: str) -> bool:
        try:
            self.path(image_hash)
            return True
        except FileNotFoundError:
            return False

    def get(self, image_hash: str) -> bytes:
        return self.read(image_hash)[0]

    def read(self, image_hash: str) -> tuple[bytes, str]:
        """(bytes, file extension) of a stored image, opening the candidates directly: one
        system call fewer per image than ``path`` + read, which counts over a million images."""
        folder = self.root / image_hash[:2]
        for ext in ALLOWED_FORMATS.values():
            try:
                with open(folder / f"{image_hash}.{ext}", "rb") as f:
                    return f.read(), ext
            except FileNotFoundError:
                continue
        raise FileNotFoundError(f"image {image_hash} is not in the store {self.root}")

    def put(self, data: bytes) -> ImageInfo:
        """Validate and store ``data``; idempotent. Raises ImageRejected."""
        info = inspect_image(data)
        target = self.root / self.relative_path(info.image_hash, info.format)
        if not target.exists():
            atomic_write_bytes(target, data, sweep=False, checksum=False)  # named by their hash; the build sweeps images/
        return info
