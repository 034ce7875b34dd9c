"""64-bit DCT perceptual hash (the ``imagehash.phash`` algorithm), single and batched.

The hash: grayscale ("L"), Lanczos resize to 32x32, 2-D DCT-II, the top-left 8x8
coefficients, bit = coefficient > median of those 64, packed row-major with the first
coefficient as the most significant bit. This is bit-for-bit the layout of
``int(str(imagehash.phash(img)), 16)``.

Two pixel paths lead to the 32x32 input:
- exact (``fast=False``): imagehash's own, Pillow's Lanczos over the full-size grayscale
  image; the bits equal imagehash's.
- fast (the default): first shrink to the smallest size still at least twice the hash input,
  JPEGs in the DCT domain while decoding (``Image.draft``), other images by a box filter
  (Pillow's ``reducing_gap=2``), then the same Lanczos. Shrinking is what an image pyramid
  does before a high-quality resize; the bits differ from imagehash's in a few positions on
  some images (see ``bench/imagehash_speed.py``), and re-encoded or resized copies stay as
  close to their originals as on the exact path (``bench/dedup.py`` calibration).
On both paths 8-bit PNGs are inflated by libspng (``pyspng``: the same pixels as Pillow's
decoder in about 60% of its time); anything else, and any PNG libspng rejects, is decoded by
Pillow, which also words the error for a corrupt file.

``phash_files`` / ``image_signatures`` / ``phash_many`` decode in worker processes (decoding
and resizing a small picture is mostly C code that holds the GIL, so threads do not scale),
in contiguous slices, and run the DCT as two matrix products over the whole batch.

One documented difference from imagehash on both paths: a coefficient that is zero in exact
arithmetic (symmetric, sparse or blank drawings) is float noise of about 1e-12 in imagehash
(scipy's FFT), so its bit there is arbitrary; we round the coefficients to 1e-6 first, which
makes those bits deterministic (0) on every machine.
"""

from __future__ import annotations

import io
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pyspng
from PIL import Image

from ..parallel import contiguous_slices, forked_pool, worker_count

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


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# IHDR colour type -> libspng output format. Palettes are expanded to RGB and gray+alpha to
# RGBA (libspng has no gray+alpha output); Pillow's conversions of those to "L" give the
# same pixels as its own decoding would.
_SPNG_FORMATS = {0: "L", 2: "RGB", 3: "RGB", 4: "RGBA", 6: "RGBA"}


def _png_via_spng(data: bytes) -> Image.Image | None:
    """An 8-bit PNG decoded by libspng, as a Pillow image; None when Pillow should decode it.

    Transparency is left out, as Pillow's conversion to grayscale ignores it.
    """
    if len(data) < 33 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR" or data[24] != 8:
        return None
    spng_format = _SPNG_FORMATS.get(data[25])
    if spng_format is None:
        return None
    try:
        pixels = pyspng.load(data, spng_format)
    except Exception:  # libspng refuses: let Pillow decode it or word the error
        return None
    return Image.fromarray(pixels)


def _small_gray(im: Image.Image, fast: bool) -> np.ndarray:
    if fast and im.format == "JPEG":
        # Decode at the smallest 1/2^k scale that is still at least 2x the target, in grayscale.
        im.draft("L", (IMG_SIZE * 2, IMG_SIZE * 2))
    small = im.convert("L").resize(
        (IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS, reducing_gap=2.0 if fast else None
    )
    return np.asarray(small, dtype=np.uint8)


def _pixels_of_bytes(data: bytes, fast: bool = True, name: str = "image") -> np.ndarray:
    """The 32x32 uint8 hash input of encoded image bytes."""
    try:
        decoded = _png_via_spng(data)
        if decoded is not None:
            return _small_gray(decoded, fast)
        with Image.open(io.BytesIO(data)) as im:
            return _small_gray(im, fast)
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise PhashError(f"cannot hash {name}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _pixels_of_file(path: str | os.PathLike, fast: bool = True) -> np.ndarray:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PhashError(f"cannot hash {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    return _pixels_of_bytes(data, fast, str(path))


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


def phash_bytes(data: bytes, fast: bool = True) -> int:
    """The 64-bit perceptual hash of encoded image bytes, as a Python int."""
    return int(hashes_of_pixels(_pixels_of_bytes(data, fast))[0])


def image_signature_bytes(data: bytes, fast: bool = True) -> tuple[int, bytes]:
    """(64-bit perceptual hash, 256-byte thumbnail) of encoded image bytes, one decode."""
    pixels = _pixels_of_bytes(data, fast)
    return int(hashes_of_pixels(pixels)[0]), thumbnails_of_pixels(pixels)[0].tobytes()


def phash_image(image: Image.Image) -> int:
    """The 64-bit perceptual hash of an already opened image (imagehash's exact pixel path)."""
    return int(hashes_of_pixels(_small_gray(image, fast=False))[0])


# Below this many images per worker, forking workers costs more than it saves (break-even
# measured at ~32 small pictures per worker).
MIN_IMAGES_PER_WORKER = 64


def _pixels_of_slice(items: Sequence, from_files: bool, fast: bool) -> np.ndarray:
    """(n, 32, 32) uint8 hash inputs of a slice of files or encoded images (runs in a worker)."""
    out = np.empty((len(items), IMG_SIZE, IMG_SIZE), dtype=np.uint8)
    for i, item in enumerate(items):
        out[i] = _pixels_of_file(item, fast) if from_files else _pixels_of_bytes(item, fast)
    return out


def _batched(items: Sequence, from_files: bool, workers: int | None, fast: bool, batch: int, thumbnails: bool):
    out = np.empty(len(items), dtype=np.uint64)
    thumbs = np.empty((len(items), THUMB_BYTES), dtype=np.uint8) if thumbnails else None
    if workers is not None:  # a requested count, too, leaves each worker enough pictures
        workers = min(workers, len(items) // MIN_IMAGES_PER_WORKER)
    workers = worker_count(len(items), MIN_IMAGES_PER_WORKER, workers)
    with ExitStack() as stack:
        pool = stack.enter_context(forked_pool(workers)) if workers > 1 else None
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            if pool is None:
                pixels = _pixels_of_slice(chunk, from_files, fast)
            else:
                # one task per worker and contiguous slice: per-image tasks cost more than
                # decoding a small PNG
                slices = contiguous_slices(chunk, workers)
                parts = pool.map(_pixels_of_slice, slices, [from_files] * len(slices), [fast] * len(slices))
                pixels = np.concatenate(list(parts))
            out[start : start + len(chunk)] = hashes_of_pixels(pixels)
            if thumbs is not None:
                thumbs[start : start + len(chunk)] = thumbnails_of_pixels(pixels)
    return (out, thumbs) if thumbnails else out


def image_signatures(
    paths: Iterable[str | os.PathLike], workers: int | None = None, fast: bool = True, batch: int = 8192
) -> tuple[np.ndarray, np.ndarray]:
    """(perceptual hashes uint64 (n,), thumbnails uint8 (n, 256)) of image files, one decode each."""
    return _batched([str(p) for p in paths], True, workers, fast, batch, thumbnails=True)


def phash_files(
    paths: Iterable[str | os.PathLike], workers: int | None = None, fast: bool = True, batch: int = 8192
) -> np.ndarray:
    """Perceptual hashes of image files, as a uint64 array in the order of ``paths``.

    Raises PhashError (one line, naming the file) on the first unreadable image.
    """
    return _batched([str(p) for p in paths], True, workers, fast, batch, thumbnails=False)


def phash_many(
    blobs: Sequence[bytes], workers: int | None = None, fast: bool = True, batch: int = 8192
) -> np.ndarray:
    """Perceptual hashes of encoded images held in memory, as a uint64 array."""
    return _batched(list(blobs), False, workers, fast, batch, thumbnails=False)


def hamming(a: int, b: int) -> int:
    return (int(a) ^ int(b)).bit_count()


def hamming_array(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Element-wise Hamming distance between uint64 arrays (or an array and one hash)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.uint64(b) if np.isscalar(b) else np.asarray(b, dtype=np.uint64))
    return np.bitwise_count(x).astype(np.int64)


def phash_hex(value: int) -> str:
    """16 hex characters, the same text as ``str(imagehash.phash(...))``."""
    return f"{int(value):016x}"
