"""The compiled image kernels (dedup/image_kernel.py) against the plain NumPy code they replaced,
bit for bit, on real pictures of every kind the descriptors meet (JPEG colour and grey, transparent
PNG, a very wide strip, a palette PNG, a single pixel, noise), and the grey shortcut of the content
crop against converting the crop itself."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from pipelines.clean.dedup import phash
from pipelines.clean.dedup.phash import COLOUR_SIDE, CONTENT_WORK_SIDE, colour_histogram, content_box
from support.corpora import CORPORA, REPO

CORPUS_PICTURES = (
    "scemqa/Multiple_Choice/Chemistry/86.jpg",          # JPEG, coloured
    "scemqa/Multiple_Choice/Math/29.jpg",               # JPEG, grey
    "scemqa/Multiple_Choice/Biology/1.png",             # PNG RGBA, transparent margins
    "opendsa-html/Exercises/MengBridgeCourse/BagsCheckpointImages/Checkpoint4_Q1_Answer1F_Wrong3.png",  # 1914x154
    "gaokao-mm/Data/2010-2023_Chemistry_MCQs/2010-2023_Chemistry_MCQs_23_0.png",  # PNG RGB, 707x92
    "scemqa/Multiple_Choice/Chemistry_extra/7.png",     # PNG RGB, reduced 5x for the box
    "opendsa-html/Exercises/CMP/DatatypeCM.png",        # PNG RGBA, coloured
)


def _encoded(im: Image.Image, fmt: str = "PNG", **params) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **params)
    return buf.getvalue()


def _synthetic() -> dict[str, bytes]:
    y, x = np.mgrid[0:70, 0:90]
    palette = Image.fromarray(((x // 9 + 2 * (y // 7)) % 6).astype(np.uint8), "P")
    palette.putpalette([255, 255, 255, 200, 30, 30, 30, 140, 60, 20, 60, 200, 240, 200, 40, 0, 0, 0])
    y, x = np.mgrid[0:40, 0:3000]
    wide = np.stack([(x * 7 + y) % 256, np.full_like(x, 250), (x // 50 % 2) * 200], -1).astype(np.uint8)
    noise = np.random.default_rng(7).integers(0, 256, (90, 130, 3), dtype=np.uint8)
    return {
        "palette_transparent": _encoded(palette, transparency=0),
        "single_pixel": _encoded(Image.new("RGB", (1, 1), (200, 30, 30))),
        "very_wide": _encoded(Image.fromarray(wide)),
        "noise_jpeg": _encoded(Image.fromarray(noise), "JPEG", quality=85),
    }


def _all_encoded() -> dict[str, bytes]:
    return {**{rel: (CORPORA / rel).read_bytes() for rel in CORPUS_PICTURES}, **_synthetic()}


def _pictures() -> list[tuple[str, np.ndarray]]:
    """The arrays the kernels see in ``_content_of_image``: the page (opaque RGB), the work copy
    reduced to about CONTENT_WORK_SIDE and the COLOUR_SIDE copy, per picture."""
    out = []
    for name, data in _all_encoded().items():
        with Image.open(io.BytesIO(data)) as im:
            full = phash._opaque_rgb(im)
            work = full.reduce(max(1, min(full.size) // CONTENT_WORK_SIDE))
            colour = work.resize((COLOUR_SIDE, COLOUR_SIDE), Image.Resampling.BOX)
            out += [(f"{name} page", np.asarray(full)), (f"{name} work", np.asarray(work)),
                    (f"{name} colour", np.asarray(colour))]
    return out


def _numpy_channel_step(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    step = np.maximum(a, b)
    step -= np.minimum(a, b)
    return np.maximum(np.maximum(step[..., 0], step[..., 1]), step[..., 2])


def _numpy_content_box(a: np.ndarray) -> tuple[int, int, int, int]:
    """content_box as it was in NumPy before the kernel."""
    h, w = a.shape[:2]
    strength = np.zeros((h, w), dtype=np.int32)
    if w > 1:
        dx = _numpy_channel_step(a[:, 1:], a[:, :-1])
        strength[:, 1:] += dx
        strength[:, :-1] += dx
    if h > 1:
        dy = _numpy_channel_step(a[1:], a[:-1])
        strength[1:, :] += dy
        strength[:-1, :] += dy
    strength -= 2 * phash.EDGE_FLOOR
    np.maximum(strength, 0, out=strength)
    columns = strength.sum(axis=0, dtype=np.int64)
    total = int(columns.sum(dtype=np.int64))
    if total <= 0:
        return 0, 0, w, h

    def bounds(mass: np.ndarray) -> tuple[int, int]:
        cumulative = np.cumsum(mass) / total
        lo = int(np.searchsorted(cumulative, phash.EDGE_TAIL, side="right"))
        hi = int(np.searchsorted(cumulative, 1.0 - phash.EDGE_TAIL, side="left")) + 1
        return lo, max(hi, lo + 1)

    left, right = bounds(columns)
    top, bottom = bounds(strength.sum(axis=1, dtype=np.int64))
    return left, top, right, bottom


def _numpy_colour_histogram(rgb: np.ndarray) -> np.ndarray:
    """colour_histogram as it was in NumPy before the kernel (one np.bincount)."""
    a = rgb.reshape(-1, 3)
    top = np.maximum(np.maximum(a[:, 0], a[:, 1]), a[:, 2])
    saturation = top - np.minimum(np.minimum(a[:, 0], a[:, 1]), a[:, 2])
    coloured = saturation >= phash.COLOUR_SATURATION
    count = int(np.count_nonzero(coloured))
    mass = max(count, phash.COLOUR_FLOOR * len(a))
    if not count:
        return np.zeros(phash.COLOUR_BINS, dtype=np.float64) / mass
    a = a[coloured].astype(np.float64)
    top, saturation = top[coloured].astype(np.float64), saturation[coloured].astype(np.float64)
    r, g, b = a.T
    hue = np.where(top == r, ((g - b) / saturation) % 6, np.where(top == g, (b - r) / saturation + 2,
                                                                    (r - g) / saturation + 4)) / 6.0
    position = hue * phash.COLOUR_BINS - 0.5
    lower = np.floor(position).astype(np.int64)
    weight = position - lower
    bins = np.concatenate([lower % phash.COLOUR_BINS, (lower + 1) % phash.COLOUR_BINS])
    out = np.bincount(bins, weights=np.concatenate([1.0 - weight, weight]), minlength=phash.COLOUR_BINS)
    return out / mass


def _numpy_paper_colour(pixels: np.ndarray) -> tuple[int, int, int]:
    ring = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    n = len(ring)
    middle = np.partition(ring, (n // 2 - 1, n // 2), axis=0)
    return tuple(int(v) for v in (middle[n // 2 - 1].astype(np.int64) + middle[n // 2]) // 2)


PICTURES = _pictures()


@pytest.mark.parametrize("name,pixels", PICTURES, ids=[name for name, _ in PICTURES])
def test_kernels_equal_the_numpy_code_they_replaced(name, pixels):
    assert content_box(pixels) == _numpy_content_box(pixels)
    want = _numpy_colour_histogram(pixels)
    got = colour_histogram(pixels)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert (phash._kernels().colour_bytes(pixels, phash.COLOUR_BINS, phash.COLOUR_SATURATION, phash.COLOUR_FLOOR)
            .tobytes() == np.clip(np.rint(want * 255), 0, 255).astype(np.uint8).tobytes())
    assert phash._paper_colour(pixels) == _numpy_paper_colour(pixels)


def test_the_pictures_cover_the_cases():
    names = {name.split(" ")[0] for name, _ in PICTURES}
    assert len(names) == len(CORPUS_PICTURES) + len(_synthetic())
    coloured = [name for name, pixels in PICTURES if name.endswith("colour") and colour_histogram(pixels).any()]
    assert len(coloured) >= 3  # the hue arithmetic runs, not only the grey shortcut
    shapes = [pixels.shape[:2] for _, pixels in PICTURES]
    assert (1, 1) in shapes and any(w >= 10 * h for h, w in shapes)


@pytest.mark.parametrize("name", ["scemqa/Multiple_Choice/Chemistry_extra/7.png", "very_wide", "single_pixel",
                                  "gaokao-mm/Data/2010-2023_Chemistry_MCQs/2010-2023_Chemistry_MCQs_23_0.png"])
def test_grey_of_the_page_cropped_equals_the_grey_of_the_crop(name):
    """The content's grey hash input cut from the page's grey (the shortcut taken for RGB PNGs)
    equals converting the padded RGB crop."""
    with Image.open(io.BytesIO(_all_encoded()[name])) as im:
        im = im.convert("RGB")
    pixels = np.asarray(im)
    shortcut = phash._content_of_image(im, pixels, im.convert("L"))
    plain = phash._content_of_image(im)
    for got, want in zip(shortcut, plain):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_loading_the_descriptors_does_not_load_numba():
    code = "import sys, pipelines.clean.dedup.phash; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
