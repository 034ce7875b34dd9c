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

import functools
import io
import os
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pyspng
from PIL import Image

from pipelines.parallel import contiguous_slices, forked_pool, worker_count

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


def _spng_pixels(data: bytes) -> np.ndarray | None:
    """The pixels of an 8-bit PNG decoded by libspng; None when Pillow should decode it.

    Transparency is left out, as Pillow's conversion to grayscale ignores it.
    """
    if len(data) < 33 or not data.startswith(_PNG_SIGNATURE) or data[12:16] != b"IHDR" or data[24] != 8:
        return None
    spng_format = _SPNG_FORMATS.get(data[25])
    if spng_format is None:
        return None
    try:
        return pyspng.load(data, spng_format)
    except Exception:  # libspng refuses: let Pillow decode it or word the error
        return None


def _png_via_spng(data: bytes) -> Image.Image | None:
    """``_spng_pixels`` as a Pillow image."""
    pixels = _spng_pixels(data)
    return None if pixels is None else Image.fromarray(pixels)


def _small_gray(im: Image.Image, fast: bool) -> np.ndarray:
    if fast and im.format == "JPEG":
        # Decode at the smallest 1/2^k scale that is still at least 2x the target, in grayscale.
        im.draft("L", (IMG_SIZE * 2, IMG_SIZE * 2))
    small = (im if im.mode == "L" else im.convert("L")).resize(
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


def _read(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb", buffering=0) as f:  # unbuffered: one read sized by fstat
            return f.readall()
    except OSError as exc:
        raise PhashError(f"cannot hash {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _pixels_of_file(path: str | os.PathLike, fast: bool = True) -> np.ndarray:
    return _pixels_of_bytes(_read(path), fast, str(path))


# ---- content signature: the picture without its margins, in colour --------------------------
#
# A re-scanned, re-cropped or re-padded copy of a figure moves its content on the page, which
# moves the 64-bit hash of the whole page by many bits. The content signature describes the
# figure itself: the box that holds nearly all of the page's edge strength (steps between
# neighbouring pixels, on a copy CONTENT_WORK_SIDE pixels across; page colour, faint shading
# and scanner grain have none),
# the perceptual hash of that box, and a 16x16 RGB thumbnail of it (colour: a green and a teal
# square are nearly the same grey).

CONTENT_WORK_SIDE = 128
EDGE_FLOOR = 24
EDGE_TAIL = 0.005
CONTENT_SIDE = 16
CONTENT_BYTES = CONTENT_SIDE * CONTENT_SIDE * 3


def _opaque_rgb(im: Image.Image) -> Image.Image:
    """RGB with transparent parts on white (a transparent margin is a margin); an RGB image
    itself, not a copy."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        rgba = im if im.mode == "RGBA" else im.convert("RGBA")
        page = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(page, rgba).convert("RGB")
    return im if im.mode == "RGB" else im.convert("RGB")


def _kernels():
    """``image_kernel``, imported on first use: it loads Numba, which Dagster definitions do not."""
    from pipelines.clean.dedup import image_kernel

    return image_kernel


def _uint8_pixels(rgb: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def content_box(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) pixel bounds of the drawn content of an (h, w, 3) uint8 image.

    Edge strength is the largest step in any colour channel to the next pixel, less
    EDGE_FLOOR (page shading and scanner grain stay below it); the box holds all but
    EDGE_TAIL of the strength on each side, so a faint detail at the border of the content
    (a pale map background) moves it little. The whole image when there is no edge."""
    return _kernels().content_bounds(_uint8_pixels(rgb), EDGE_FLOOR, EDGE_TAIL)


COLOUR_BINS = 16
COLOUR_SIDE = 48
COLOUR_SATURATION = 48   # max - min channel: below it a pixel is grey (paper, ink, shading)
COLOUR_FLOOR = 0.03      # the histogram's mass is the coloured share of the page, or this


def colour_histogram(rgb: np.ndarray) -> np.ndarray:
    """(COLOUR_BINS,) float64: the coloured pixels of an (h, w, 3) image by hue (soft bins), as a
    share of the coloured pixels, or of COLOUR_FLOOR of all pixels when fewer are coloured (a
    few JPEG-tinted pixels do not make a colour). Colours of the same grey have other hues (red,
    blue, purple, brown; green, teal; pink, orange); colours of the same hue have other greys."""
    return _kernels().colour_shares(_uint8_pixels(rgb), COLOUR_BINS, COLOUR_SATURATION, COLOUR_FLOOR)


def _paper_colour(pixels: np.ndarray) -> tuple[int, int, int]:
    """The median colour (per channel, rounded down) of the outermost pixel ring."""
    return _kernels().ring_median(_uint8_pixels(pixels))


@functools.lru_cache(maxsize=4096)
def _grey_of(colour: tuple[int, int, int]) -> int:
    """Pillow's grey ("L") of an RGB colour."""
    return Image.new("RGB", (1, 1), colour).convert("L").getpixel((0, 0))


def _page_in_surround(pixels: np.ndarray, full: Image.Image, grey: Image.Image | None,
                      resampled: bool = False) -> tuple[int, int, int, int] | None:
    """The box of a page lying in a darker surround (``ink.page_box``, the picture verdict's
    reading of it) in ``full``'s pixels, or None: a copy on a scan's black margin then has its
    original's content. ``pixels``, a reduced copy's, tell most figures apart first: their ring
    is white paper. ``grey``: ``full.convert("L")`` when that is at hand; ``resampled``: ``full``
    was decoded at a reduced scale (a JPEG's draft)."""
    from pipelines.clean.dedup.ink import PAPER_SPREAD, page_box

    if _grey_of(_paper_colour(pixels)) + PAPER_SPREAD >= 255:
        return None  # a ring this light: no page can be lighter than it
    return page_box(np.asarray(grey if grey is not None else full.convert("L")), resampled)


def _content_of_image(
    im: Image.Image, rgb_pixels: np.ndarray | None = None, grey: Image.Image | None = None, resampled: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(32x32 grey hash input of the content, 16x16x3 RGB thumbnail of it, box in permille of
    the page as uint16 [left, top, right, bottom], colour histogram of the page as uint8).
    ``rgb_pixels``: the pixels of ``im`` when it is RGB and they are at hand as an array;
    ``grey``: ``im.convert("L")`` when it is RGB and that is at hand; ``resampled``: ``im`` was
    decoded at a reduced scale.

    The box is found on a copy reduced by a whole factor to about CONTENT_WORK_SIDE pixels
    across; the content is cut from the image itself, so that its pixels do not depend on the
    size of the page around it."""
    full = _opaque_rgb(im)
    factor = max(1, min(full.size) // CONTENT_WORK_SIDE)
    if factor > 1:
        work = full.reduce(factor)  # whole pixels: a padded copy has the same box
        pixels = np.asarray(work)
    else:
        work = full
        pixels = rgb_pixels if rgb_pixels is not None and full is im else np.asarray(full)
    page = _page_in_surround(pixels, full, grey if full is im else None, resampled)
    if page is not None:  # the page alone: a scan's black margin is not part of its content
        full = full.crop(page)
        factor = max(1, min(full.size) // CONTENT_WORK_SIDE)
        work = full.reduce(factor) if factor > 1 else full
        pixels = np.asarray(work)
    scale = 1.0 / factor
    w, h = work.size
    left, top, right, bottom = content_box(pixels)
    box = np.array([round(1000 * left / w), round(1000 * top / h), round(1000 * right / w), round(1000 * bottom / h)],
                   dtype=np.uint16)
    # the box on the image itself; square, content centred, so that a thin figure is not
    # stretched (a pixel of box error would move a whole thumbnail row)
    x0, y0 = int(left / scale), int(top / scale)
    x1, y1 = min(full.width, max(x0 + 1, round(right / scale))), min(full.height, max(y0 + 1, round(bottom / scale)))
    side = max(x1 - x0, y1 - y0)
    paper = _paper_colour(pixels)
    offset = ((side - x1 + x0) // 2, (side - y1 + y0) // 2)
    crop = Image.new("RGB", (side, side), paper)
    crop.paste(full.crop((x0, y0, x1, y1)), offset)
    if grey is not None and full is im:
        # conversion to grey is per pixel: the grey of the padded crop is the padded crop of the grey
        grey_crop = Image.new("L", (side, side), _grey_of(paper))
        grey_crop.paste(grey.crop((x0, y0, x1, y1)), offset)
    else:
        grey_crop = crop.convert("L")
    gray = np.asarray(grey_crop.resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS, reducing_gap=2.0),
                      dtype=np.uint8)
    thumb = np.asarray(crop.resize((CONTENT_SIDE, CONTENT_SIDE), Image.Resampling.BOX, reducing_gap=2.0),
                       dtype=np.uint8)
    colours = _kernels().colour_bytes(
        _uint8_pixels(np.asarray(work.resize((COLOUR_SIDE, COLOUR_SIDE), Image.Resampling.BOX))),
        COLOUR_BINS, COLOUR_SATURATION, COLOUR_FLOOR)
    return gray, thumb, box, colours


def _described_bytes(data: bytes, fast: bool = True, name: str = "image"):
    """(32x32 hash input of the page, 32x32 hash input of the content, content RGB thumbnail,
    content box, colour histogram, (width, height)) of encoded image bytes, decoded once (a
    JPEG twice on the fast path: grey at the page hash's reduced scale, colour at the
    content's)."""
    try:
        pixels = _spng_pixels(data)
        if pixels is not None:
            decoded = Image.fromarray(pixels)
            if decoded.mode == "RGB":
                grey = decoded.convert("L")  # once, for the page and the content
                return (_small_gray(grey, fast), *_content_of_image(decoded, pixels, grey), decoded.size)
            return (_small_gray(decoded, fast), *_content_of_image(decoded), decoded.size)
        with Image.open(io.BytesIO(data)) as im:
            size = im.size
            jpeg_draft = fast and im.format == "JPEG"
            before = im.mode, im.info.get("transparency")
            page = _small_gray(im, fast)
            # decoding may change what _opaque_rgb reads (a GIF frame's mode, say): then decode afresh
            if not jpeg_draft and (im.mode, im.info.get("transparency")) == before:
                return (page, *_content_of_image(im), size)
        with Image.open(io.BytesIO(data)) as im:
            if jpeg_draft:
                im.draft("RGB", (CONTENT_WORK_SIDE, CONTENT_WORK_SIDE))
            return (page, *_content_of_image(im, resampled=im.size != size), size)
    except PhashError:
        raise
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise PhashError(f"cannot hash {name}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _descriptors_of_slice(items: Sequence, from_files: bool, fast: bool):
    n = len(items)
    page = np.empty((n, IMG_SIZE, IMG_SIZE), dtype=np.uint8)
    content = np.empty((n, IMG_SIZE, IMG_SIZE), dtype=np.uint8)
    thumbs = np.empty((n, CONTENT_SIDE, CONTENT_SIDE, 3), dtype=np.uint8)
    boxes = np.empty((n, 4), dtype=np.uint16)
    colours = np.empty((n, COLOUR_BINS), dtype=np.uint8)
    sizes = np.empty((n, 2), dtype=np.int64)
    for i, item in enumerate(items):
        data = _read(item) if from_files else item
        page[i], content[i], thumbs[i], boxes[i], colours[i], sizes[i] = _described_bytes(
            data, fast, str(item) if from_files else "image")
    return page, content, thumbs, boxes, colours, sizes


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


@dataclass(frozen=True)
class ImageDescriptors:
    """Per image (same order as the input): the page's 64-bit hash and 16x16 grey thumbnail,
    the content's 64-bit hash, 16x16 RGB thumbnail (768 bytes) and box (permille of the page),
    the page's colour histogram and its size."""

    phash: np.ndarray              # (n,) uint64
    thumbnail: np.ndarray          # (n, 256) uint8
    content_phash: np.ndarray      # (n,) uint64
    content_thumbnail: np.ndarray  # (n, 768) uint8
    content_box: np.ndarray        # (n, 4) uint16
    colours: np.ndarray            # (n, COLOUR_BINS) uint8: colour histogram, 255 = the whole mass
    width: np.ndarray              # (n,) int64: pixels, as the file declares them
    height: np.ndarray             # (n,) int64


def _described(items: Sequence, from_files: bool, workers: int | None, fast: bool, batch: int,
               progress: Callable[[int, int], None] | None = None) -> ImageDescriptors:
    n = len(items)
    out = ImageDescriptors(
        np.empty(n, dtype=np.uint64), np.empty((n, THUMB_BYTES), dtype=np.uint8), np.empty(n, dtype=np.uint64),
        np.empty((n, CONTENT_BYTES), dtype=np.uint8), np.empty((n, 4), dtype=np.uint16),
        np.empty((n, COLOUR_BINS), dtype=np.uint8), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
    )
    if workers is not None:
        workers = min(workers, n // MIN_IMAGES_PER_WORKER)
    workers = worker_count(n, MIN_IMAGES_PER_WORKER, workers)
    _kernels().compile_kernels()  # before forking: the workers share the machine code
    with ExitStack() as stack:
        pool = stack.enter_context(forked_pool(workers)) if workers > 1 else None
        for start in range(0, n, batch):
            chunk = items[start : start + batch]
            if pool is None:
                parts = [_descriptors_of_slice(chunk, from_files, fast)]
            else:
                slices = contiguous_slices(chunk, workers)
                parts = list(pool.map(_descriptors_of_slice, slices, [from_files] * len(slices), [fast] * len(slices)))
            page, content, thumbs, boxes, colours, sizes = (np.concatenate([p[k] for p in parts]) for k in range(6))
            end = start + len(chunk)
            out.phash[start:end] = hashes_of_pixels(page)
            out.thumbnail[start:end] = thumbnails_of_pixels(page)
            out.content_phash[start:end] = hashes_of_pixels(content)
            out.content_thumbnail[start:end] = thumbs.reshape(len(chunk), CONTENT_BYTES)
            out.content_box[start:end] = boxes
            out.colours[start:end] = colours
            out.width[start:end], out.height[start:end] = sizes[:, 0], sizes[:, 1]
            if progress is not None:
                progress(end, n)
    return out


def image_descriptors(
    paths: Iterable[str | os.PathLike], workers: int | None = None, fast: bool = True, batch: int = 8192,
    progress: Callable[[int, int], None] | None = None,
) -> ImageDescriptors:
    """Page and content signatures and sizes of image files, one decode each (two for JPEG on
    the fast path: the page hash decodes grey at reduced scale, as ``phash_files`` does).
    ``progress(done, total)`` is called after each ``batch`` of files."""
    return _described([str(p) for p in paths], True, workers, fast, batch, progress)


def describe_bytes(data: bytes, fast: bool = True) -> ImageDescriptors:
    """``image_descriptors`` of one encoded image held in memory."""
    return _described([data], False, 1, fast, 1)


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
