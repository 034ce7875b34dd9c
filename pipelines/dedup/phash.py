"""64-bit DCT perceptual hash (the ``imagehash.phash`` algorithm), single and batched.

The hash: grayscale ("L"), Lanczos resize to 32x32, 2-D DCT-II, the top-left 8x8
coefficients, bit = coefficient > median of those 64, packed row-major with the first
coefficient as the most significant bit. This is bit-for-bit the layout of
``int(str(imagehash.phash(img)), 16)``.

``phash_files`` / ``phash_many`` are the fast path: images are decoded and resized in a
thread pool (Pillow releases the GIL while decoding and resampling), JPEGs are decoded at a
reduced scale straight to grayscale with ``Image.draft`` (DCT-domain downscaling, so a JPEG's
bits can differ from imagehash's by a few positions), and the DCT runs as two matrix products
over the whole batch. PNG/GIF/BMP/WEBP take exactly imagehash's pixel path. One documented difference: a
coefficient that is zero in exact arithmetic (symmetric, sparse or blank drawings) is float
noise of about 1e-12 in imagehash (scipy's FFT), so its bit there is arbitrary; we round the
coefficients to 1e-6 first, which makes those bits deterministic (0) on every machine.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from PIL import Image

HASH_SIZE = 8
IMG_SIZE = 32

_n = np.arange(IMG_SIZE)
_k = np.arange(HASH_SIZE)
# Unnormalized DCT-II basis restricted to the 8 lowest frequencies (scale does not affect
# the comparison with the median).
_DCT = np.cos(np.pi * _k[:, None] * (2 * _n[None, :] + 1) / (2 * IMG_SIZE))
_BIT_WEIGHTS = (np.uint64(1) << np.arange(63, -1, -1, dtype=np.uint64)).astype(np.uint64)


class PhashError(ValueError):
    """An image could not be hashed; the message says which and why."""


def _small_gray(im: Image.Image, fast_jpeg: bool) -> np.ndarray:
    if fast_jpeg and im.format == "JPEG":
        # Decode at the smallest 1/2^k scale that is still at least 2x the target, in grayscale.
        im.draft("L", (IMG_SIZE * 2, IMG_SIZE * 2))
    small = im.convert("L").resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS)
    return np.asarray(small, dtype=np.float64)


def _pixels_of_bytes(data: bytes, fast_jpeg: bool = True) -> np.ndarray:
    try:
        with Image.open(io.BytesIO(data)) as im:
            return _small_gray(im, fast_jpeg)
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise PhashError(f"cannot hash image: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _pixels_of_file(path: str | os.PathLike, fast_jpeg: bool = True) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return _small_gray(im, fast_jpeg)
    except Exception as exc:
        raise PhashError(f"cannot hash {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def hashes_of_pixels(pixels: np.ndarray) -> np.ndarray:
    """Perceptual hashes (uint64) of a batch of 32x32 grayscale images, shape (n, 32, 32)."""
    pixels = np.asarray(pixels, dtype=np.float64).reshape(-1, IMG_SIZE, IMG_SIZE)
    low = _DCT @ pixels @ _DCT.T  # (n, 8, 8)
    # Coefficients that are zero in exact arithmetic (symmetric or blank drawings) come out
    # as +-1e-12 noise; rounding makes their bits deterministic across BLAS builds.
    flat = np.round(low.reshape(len(pixels), HASH_SIZE * HASH_SIZE), 6)
    bits = flat > np.median(flat, axis=1, keepdims=True)
    return (bits.astype(np.uint64) * _BIT_WEIGHTS).sum(axis=1, dtype=np.uint64)


THUMB_SIDE = 16
THUMB_BYTES = THUMB_SIDE * THUMB_SIDE


def thumbnails_of_pixels(pixels: np.ndarray) -> np.ndarray:
    """(n, 256) uint8 grayscale 16x16 thumbnails: 2x2 means of the 32x32 hash input.

    The 64-bit hash is too coarse to tell apart sparse line drawings (two clocks, two
    circuits); the thumbnail confirms near-equality once the hash has proposed a pair.
    """
    pixels = np.asarray(pixels, dtype=np.float64).reshape(-1, IMG_SIZE, IMG_SIZE)
    small = pixels.reshape(len(pixels), THUMB_SIDE, 2, THUMB_SIDE, 2).mean(axis=(2, 4))
    return np.clip(np.rint(small), 0, 255).astype(np.uint8).reshape(len(pixels), THUMB_BYTES)


def thumbnail_distance(a: bytes | np.ndarray, b: bytes | np.ndarray) -> float:
    """Mean absolute gray-level difference of two thumbnails (0..255)."""
    x = np.frombuffer(a, dtype=np.uint8) if isinstance(a, (bytes, bytearray)) else np.asarray(a, dtype=np.uint8)
    y = np.frombuffer(b, dtype=np.uint8) if isinstance(b, (bytes, bytearray)) else np.asarray(b, dtype=np.uint8)
    return float(np.abs(x.astype(np.int16) - y.astype(np.int16)).mean())


def phash_bytes(data: bytes, fast_jpeg: bool = True) -> int:
    """The 64-bit perceptual hash of encoded image bytes, as a Python int."""
    return int(hashes_of_pixels(_pixels_of_bytes(data, fast_jpeg))[0])


def image_signature_bytes(data: bytes, fast_jpeg: bool = True) -> tuple[int, bytes]:
    """(64-bit perceptual hash, 256-byte thumbnail) of encoded image bytes, one decode."""
    pixels = _pixels_of_bytes(data, fast_jpeg)
    return int(hashes_of_pixels(pixels)[0]), thumbnails_of_pixels(pixels)[0].tobytes()


def phash_image(image: Image.Image) -> int:
    """The 64-bit perceptual hash of an already opened image (imagehash's exact pixel path)."""
    return int(hashes_of_pixels(_small_gray(image, fast_jpeg=False))[0])


def _default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _batched(loader, items: Sequence, workers: int | None, batch: int, thumbnails: bool = False):
    out = np.empty(len(items), dtype=np.uint64)
    thumbs = np.empty((len(items), THUMB_BYTES), dtype=np.uint8) if thumbnails else None
    if len(items):
        workers = workers or _default_workers()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for start in range(0, len(items), batch):
                chunk = items[start : start + batch]
                # one task per worker and contiguous slice: per-image futures cost more than
                # decoding a small PNG
                step = -(-len(chunk) // workers)
                slices = [chunk[k : k + step] for k in range(0, len(chunk), step)]
                parts = pool.map(lambda part: [loader(x) for x in part], slices)
                pixels = np.stack([p for part in parts for p in part])
                out[start : start + len(chunk)] = hashes_of_pixels(pixels)
                if thumbs is not None:
                    thumbs[start : start + len(chunk)] = thumbnails_of_pixels(pixels)
    return (out, thumbs) if thumbnails else out


def image_signatures(
    paths: Iterable[str | os.PathLike], workers: int | None = None, fast_jpeg: bool = True, batch: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """(perceptual hashes uint64 (n,), thumbnails uint8 (n, 256)) of image files, one decode each."""
    paths = [Path(p) for p in paths]
    return _batched(lambda p: _pixels_of_file(p, fast_jpeg), paths, workers, batch, thumbnails=True)


def phash_files(
    paths: Iterable[str | os.PathLike],
    workers: int | None = None,
    fast_jpeg: bool = True,
    batch: int = 4096,
) -> np.ndarray:
    """Perceptual hashes of image files, as a uint64 array in the order of ``paths``.

    Raises PhashError (one line, naming the file) on the first unreadable image.
    """
    paths = [Path(p) for p in paths]
    return _batched(lambda p: _pixels_of_file(p, fast_jpeg), paths, workers, batch)


def phash_many(
    blobs: Sequence[bytes], workers: int | None = None, fast_jpeg: bool = True, batch: int = 4096
) -> np.ndarray:
    """Perceptual hashes of encoded images held in memory, as a uint64 array."""
    return _batched(lambda b: _pixels_of_bytes(b, fast_jpeg), list(blobs), workers, batch)


def hamming(a: int, b: int) -> int:
    return (int(a) ^ int(b)).bit_count()


def hamming_array(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Element-wise Hamming distance between uint64 arrays (or an array and one hash)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.uint64(b) if np.isscalar(b) else np.asarray(b, dtype=np.uint64))
    return np.bitwise_count(x).astype(np.int64)


def phash_hex(value: int) -> str:
    """16 hex characters, the same text as ``str(imagehash.phash(...))``."""
    return f"{int(value):016x}"
