"""Hard cases for the picture verdict of dedup, made from the REAL figures of ``../shared/corpora``
(read in place, never copied; nothing generated here is written into the repository).

Each case is a pair of pictures, ``HardCase(kind, should_merge, a, b, origin)``:

copies (``should_merge=True``: the same picture, dedup must merge them)
    ``jpeg``      the figure re-encoded as JPEG, quality 60-90;
    ``resize``    the figure resized (70% for every other pair; else 50-150%, several filters);
    ``rescan``    a re-scan: grey, tinted paper and dark-grey ink, scaled 0.9-1.1, wider margins,
                  a turn of 0.45-0.75 degrees, a little blur, an uneven light, grain, JPEG 70-85;
    ``crop``      blank margins cut, widened, or the figure moved on a page of the same size
                  (the ink is never cut).
different (``should_merge=False``: another question's picture, dedup must never merge them)
    ``added_label``   the same figure with ONE added label ("75°", "x = 3", "4 cm", "2m", ...) in
                  the figure's own style: its font size matched to the height of the figure's
                  own text (connected components of ink), in the figure's ink colour, placed in
                  empty space near the drawing;
    ``other_label``   the same figure with one label and with another of the same kind at the
                  same place, in the figure's own style ("45°" / "60°", "x = 3" / "x = 5",
                  "4 cm" / "6 cm", ...): a is the figure with the first, b with the second;
    ``nearest_other`` the nearest OTHER real figure by a 64-bit average hash (the same picture
                  found twice in the corpora, byte- or pixel-identical or nearly so, is never
                  taken as "other");
    ``shared_frame``  one frame, different real figures inside: "Set A / Set B (/ Figure)"
                  panels, or a 3x3 grid with a "?"; every panel differs, or only one.

``a`` is the real file as the corpus has it (the frames, and other_label's first label, are drawn
here); ``b`` is made from the figure flattened on white (a labelled figure is always a PNG: only
the label differs). Same kind, n and seed: the same bytes (``cases``).

``measure(kinds, n, seed)`` runs the real ingest (a ``python:`` source, ``records`` below, allowed
by name in ``STEMFORGE_PYTHON_SOURCES`` for the call), the filter, image-index and dedup stages
in a temporary data home: each pair becomes two questions
with the same text and options and the same answer (a merge is counted when both land in one
group), and again with different answers (a ``near duplicate with a conflicting answer``
quarantine is counted). Every pair and variant has its own text ("Puzzle 17: ..."), so pairs
never meet each other in dedup.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

try:
    from support.corpora import CORPORA
except ImportError:  # loaded by path (a python: source) where tests/ is not on sys.path
    CORPORA = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora").resolve()

COPIES = ("jpeg", "resize", "rescan", "crop", "surround")
DIFFERENT = ("added_label", "label_on_fill", "nearest_other", "shared_frame", "other_label")
KINDS = COPIES + DIFFERENT
# each class's seed of its pairs: a class added later takes the next number, so that the pairs of
# every other class stay what they were
_CLASS_SEED = {kind: k + 1 for k, kind in enumerate(
    ("jpeg", "resize", "rescan", "crop", "added_label", "label_on_fill", "nearest_other", "shared_frame",
     "other_label", "surround"))}
SHOULD_MERGE = {k: k in COPIES for k in KINDS}
# goals of issue 29: share of pairs merged (copies at least, different pictures at most)
GOALS = {**{k: 0.98 for k in COPIES}, **{k: 0.0 for k in DIFFERENT}}

LABELS = ("75°", "45°", "30°", "x = 3", "x = 5", "y = 2", "4 cm", "6 cm", "2m", "5 m", "h = 7", "120°")
SUFFIXES = (".png", ".jpg", ".jpeg")
STEMS = {
    "shared_frame": "Which figure completes the pattern?",
    "nearest_other": "Which statement about the figure is true?",
}
DEFAULT_STEM = "Which figure completes the pattern?"
OPTIONS = ["Figure 1", "Figure 2", "Figure 3", "Figure 4"]


@dataclass(frozen=True)
class HardCase:
    kind: str
    should_merge: bool
    a: bytes
    b: bytes
    origin: str


# ---- the real figures ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    path: Path  # absolute
    sha: str

    @property
    def name(self) -> str:
        return self.path.relative_to(CORPORA).as_posix()

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def is_png(self) -> bool:
        return self.path.suffix.lower() == ".png"


@functools.lru_cache(maxsize=1)
def pool() -> tuple[Figure, ...]:
    """Every distinct (by bytes) picture file of the corpora, 64-2500 px a side, in path order."""
    if not CORPORA.is_dir():
        raise FileNotFoundError(f"the real corpora are not at {CORPORA} (see its README)")
    seen, out = set(), []
    for path in sorted(p for p in CORPORA.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file()):
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            with Image.open(io.BytesIO(data)) as im:
                w, h = im.size
        except Exception:  # noqa: BLE001 - a file that is not a picture is no figure
            continue
        if 64 <= min(w, h) and max(w, h) <= 2500:
            out.append(Figure(path, sha))
    return tuple(out)


def flat(data: bytes) -> Image.Image:
    """The picture as a reader sees it: RGB, transparency over white."""
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
            rgba = im.convert("RGBA")
            page = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(page, rgba).convert("RGB")
        return im.convert("RGB")


@functools.lru_cache(maxsize=256)
def _flat_of(path: Path) -> Image.Image:
    return flat(path.read_bytes())


def figure_image(fig: Figure) -> Image.Image:
    return _flat_of(fig.path).copy()


def background(im: Image.Image) -> np.ndarray:
    """The page colour: the median of the border pixels."""
    px = np.asarray(im, dtype=np.int16)
    border = np.concatenate([px[0], px[-1], px[:, 0], px[:, -1]])
    return np.median(border, axis=0)


def ink_mask(im: Image.Image, threshold: int = 60) -> np.ndarray:
    px = np.asarray(im, dtype=np.int16)
    return np.abs(px - background(im)).max(axis=2) > threshold


def ink_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom), right/bottom exclusive, of the ink; None when blank."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not len(rows):
        return None
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1


@functools.lru_cache(maxsize=8192)
def _suitable(path: Path) -> bool:
    """A figure to build cases from: some ink (0.2-50% of the page), 24 px or more of drawing
    each way, on a light page."""
    im = _flat_of(path)
    mask = ink_mask(im)
    box = ink_box(mask)
    if box is None:
        return False
    frac = mask.mean()
    bg = background(im)
    return 0.002 <= frac <= 0.5 and box[2] - box[0] >= 24 and box[3] - box[1] >= 24 and bg.mean() >= 180


def _ahash_of(path: Path) -> int:
    with Image.open(path) as im:
        im.draft("RGB", (64, 64))  # JPEG: decode at a reduced scale (same bits every run)
        data_im = im
        if data_im.mode in ("RGBA", "LA", "PA") or (data_im.mode == "P" and "transparency" in data_im.info):
            rgba = data_im.convert("RGBA")
            data_im = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
        grey = data_im.convert("L")
    small = np.asarray(grey.resize((8, 8), Image.Resampling.LANCZOS), dtype=np.float64).ravel()
    bits = small > small.mean()
    return int("".join("1" if b else "0" for b in bits), 2)


@functools.lru_cache(maxsize=1)
def ahashes() -> np.ndarray:
    """The 64-bit average hash (grey 8x8, above the mean) of every pool figure, uint64."""
    return np.array([_ahash_of(f.path) for f in pool()], dtype=np.uint64)


def _drawing_signature(im: Image.Image, side: int = 96) -> np.ndarray:
    """The drawing cut to its ink and squeezed to side x side, grey in [0, 1]."""
    box = ink_box(ink_mask(im)) or (0, 0, im.width, im.height)
    return np.asarray(im.crop(box).convert("L").resize((side, side), Image.Resampling.BOX), dtype=np.float64) / 255


@functools.lru_cache(maxsize=8192)
def _signature_of(path: Path) -> np.ndarray:
    return _drawing_signature(_flat_of(path))


SAME_DRAWING = 0.03  # mean difference of two drawing signatures below which they are one drawing


def same_drawing(x: Image.Image, y: Image.Image, tolerance: float = SAME_DRAWING) -> bool:
    """Whether two pictures are (nearly) one drawing: their ink, cut out and squeezed to one size,
    differs by less than ``tolerance`` on average. Used to keep the same figure found twice in the
    corpora (wemath's step questions share figures) out of the "other figure" classes."""
    if x.size == y.size and np.array_equal(np.asarray(x), np.asarray(y)):
        return True
    return float(np.abs(_drawing_signature(x) - _drawing_signature(y)).mean()) < tolerance


def _order(seed: int, kind: str) -> list[int]:
    """The pool, in the seeded order a kind draws its figures from."""
    rng = np.random.default_rng([seed, _CLASS_SEED[kind], 0x4A2D])
    return rng.permutation(len(pool())).tolist()


def _draw_figures(seed: int, kind: str) -> Iterator[Figure]:
    figs = pool()
    for i in _order(seed, kind):
        if _suitable(figs[i].path):
            yield figs[i]


def encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        im = im.convert("RGB")
        kw = {"quality": 92, **kw}
    else:
        kw = {"compress_level": 6, **kw}
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _like(fig: Figure) -> str:
    """The file format of a derived picture: the original's family (PNG stays PNG)."""
    return "PNG" if fig.is_png else "JPEG"


# ---- copies ------------------------------------------------------------------------------------


def make_jpeg(fig: Figure, rng: np.random.Generator) -> tuple[bytes, str]:
    quality = int(rng.integers(60, 91))
    return encode(figure_image(fig), "JPEG", quality=quality), f"quality {quality}"


RESIZE_SCALES = (0.5, 0.6, 0.75, 0.8, 0.9, 1.25, 1.5)
RESAMPLING = (("lanczos", Image.Resampling.LANCZOS), ("bicubic", Image.Resampling.BICUBIC),
              ("bilinear", Image.Resampling.BILINEAR))


def make_resize(fig: Figure, rng: np.random.Generator, i: int) -> tuple[bytes, str]:
    im = figure_image(fig)
    scale = 0.7 if i % 2 == 0 else float(RESIZE_SCALES[int(rng.integers(len(RESIZE_SCALES)))])
    name, method = RESAMPLING[int(rng.integers(len(RESAMPLING)))]
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    return encode(im.resize(size, method), _like(fig)), f"scale {scale:g} {name} {size[0]}x{size[1]}"


def make_rescan(fig: Figure, rng: np.random.Generator) -> tuple[bytes, str]:
    """Printed and scanned again: grey, scaled a little, on a wider sheet of tinted paper, turned
    about 0.6 degrees, blurred a little, lit unevenly, with grain, saved as JPEG."""
    grey = figure_image(fig).convert("L")
    scale = float(rng.uniform(0.9, 1.1))
    grey = grey.resize((max(8, round(grey.width * scale)), max(8, round(grey.height * scale))),
                       Image.Resampling.BICUBIC)
    w, h = grey.size
    margins = [round(float(rng.uniform(0.02, 0.08)) * (w if k % 2 == 0 else h)) + 2 for k in range(4)]
    sheet = Image.new("L", (w + margins[0] + margins[2], h + margins[1] + margins[3]), 255)
    sheet.paste(grey, (margins[0], margins[1]))
    angle = float(rng.uniform(0.45, 0.75)) * (1 if rng.random() < 0.5 else -1)
    sheet = sheet.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    blur = float(rng.uniform(0.4, 0.8))
    sheet = sheet.filter(ImageFilter.GaussianBlur(blur))
    v = np.asarray(sheet, dtype=np.float64) / 255.0
    paper = np.array([rng.uniform(236, 250), rng.uniform(230, 244), rng.uniform(212, 232)])
    ink = rng.uniform(22, 48)
    rgb = ink + v[..., None] * (paper - ink)
    yy, xx = np.mgrid[0:v.shape[0], 0:v.shape[1]]
    light = 1.0 + float(rng.uniform(-0.03, 0.03)) * (xx / max(1, v.shape[1] - 1) - 0.5) \
        + float(rng.uniform(-0.03, 0.03)) * (yy / max(1, v.shape[0] - 1) - 0.5)
    sigma = float(rng.uniform(3.0, 6.0))
    noise = rng.normal(0.0, sigma, v.shape)[..., None] + rng.normal(0.0, 1.0, rgb.shape)
    out = np.clip(rgb * light[..., None] + noise, 0, 255).round().astype(np.uint8)
    quality = int(rng.integers(70, 86))
    origin = (f"scale {scale:.2f}, margins {margins}, turn {angle:+.2f} deg, blur {blur:.2f}, "
              f"grain {sigma:.1f}, JPEG {quality}")
    return encode(Image.fromarray(out, "RGB"), "JPEG", quality=quality), origin


def make_crop(fig: Figure, rng: np.random.Generator, i: int) -> tuple[bytes, str]:
    """Blank margins cut or widened, or the drawing moved on a page of the same size."""
    im = figure_image(fig)
    mask = ink_mask(im)
    left, top, right, bottom = ink_box(mask)
    bg = tuple(int(c) for c in background(im).round())
    content = im.crop((left, top, right, bottom))
    cw, ch = content.size
    old = (left, top, im.width - right, im.height - bottom)
    mode = ("cut", "widen", "move")[i % 3]
    if mode == "cut" and max(old) < 6:
        mode = "widen"
    if mode == "move" and im.width - cw < 12 and im.height - ch < 12:
        mode = "widen"
    if mode == "cut":
        new = [max(2, round(m * float(rng.uniform(0.0, 0.6)))) for m in old]
        page = (cw + new[0] + new[2], ch + new[1] + new[3])
        at = (new[0], new[1])
    elif mode == "widen":
        new = [m + round(float(rng.uniform(0.05, 0.25)) * (im.width if k % 2 == 0 else im.height))
               for k, m in enumerate(old)]
        page = (cw + new[0] + new[2], ch + new[1] + new[3])
        at = (new[0], new[1])
    else:
        page = im.size
        room_x, room_y = im.width - cw, im.height - ch
        for _ in range(20):
            at = (int(rng.integers(0, room_x + 1)), int(rng.integers(0, room_y + 1)))
            if abs(at[0] - left) + abs(at[1] - top) >= max(4, (room_x + room_y) // 4):
                break
    out = Image.new("RGB", page, bg)
    out.paste(content, at)
    return encode(out, _like(fig)), f"{mode}: drawing {cw}x{ch} at {at} on {page[0]}x{page[1]} (was {(left, top)} on {im.width}x{im.height})"


def make_surround(fig: Figure, rng: np.random.Generator) -> tuple[bytes, str]:
    """The page on a darker surround: a scan's black margin, a photograph on a table, a
    screenshot's dark frame; each side 3-15% of the page, sometimes re-encoded as JPEG."""
    im = figure_image(fig)
    colour = tuple(int(c) for c in (rng.integers(0, 70, 3) if rng.random() < 0.6 else
                                    (rng.integers(90, 140), rng.integers(60, 100), rng.integers(30, 70))))
    sides = [round(float(rng.uniform(0.03, 0.15)) * (im.width if k % 2 == 0 else im.height)) + 2 for k in range(4)]
    out = Image.new("RGB", (im.width + sides[0] + sides[2], im.height + sides[1] + sides[3]), colour)
    out.paste(im, (sides[0], sides[1]))
    if rng.random() < 0.4:
        quality = int(rng.integers(75, 92))
        return encode(out, "JPEG", quality=quality), f"surround {colour}, sides {sides}, JPEG {quality}"
    return encode(out, "PNG"), f"surround {colour}, sides {sides}"


# ---- an added label ----------------------------------------------------------------------------


def _components(mask: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """(x, y, w, h, area) of the 8-connected components of ``mask``. scipy or OpenCV when
    installed, else a pure-Python flood fill: the components are the same either way."""
    try:
        from scipy import ndimage

        labels, count = ndimage.label(mask, structure=np.ones((3, 3), dtype=int))
        out = []
        for k, sl in enumerate(ndimage.find_objects(labels), start=1):
            if sl is None:
                continue
            area = int((labels[sl] == k).sum())
            out.append((sl[1].start, sl[0].start, sl[1].stop - sl[1].start, sl[0].stop - sl[0].start, area))
        return out
    except ImportError:
        pass
    try:
        import cv2

        count, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        return [tuple(int(v) for v in stats[k]) for k in range(1, count)]
    except ImportError:
        pass
    seen = np.zeros_like(mask, dtype=bool)
    out, H, W = [], mask.shape[0], mask.shape[1]
    for y0, x0 in zip(*np.nonzero(mask)):
        if seen[y0, x0]:
            continue
        stack, seen[y0, x0] = [(y0, x0)], True
        xs, ys, area = [x0, x0], [y0, y0], 0
        while stack:
            y, x = stack.pop()
            area += 1
            xs[0], xs[1], ys[0], ys[1] = min(xs[0], x), max(xs[1], x), min(ys[0], y), max(ys[1], y)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < H and 0 <= xx < W and mask[yy, xx] and not seen[yy, xx]:
                        seen[yy, xx] = True
                        stack.append((yy, xx))
        out.append((int(xs[0]), int(ys[0]), int(xs[1] - xs[0] + 1), int(ys[1] - ys[0] + 1), area))
    return out


def text_style(im: Image.Image) -> tuple[int | None, tuple[int, int, int]]:
    """The height in pixels of the figure's own characters (the median height of the ink's
    connected components shaped like a glyph: 7-60 px high, at most 1.3 times as wide as high,
    neither a hair nor a block; their 75th percentile, the height of capitals and digits) or None
    when it has fewer than two, and the colour of its ink (the median of the darkest third of the
    glyphs' ink, of all ink when there are none)."""
    dark = ink_mask(im, threshold=90)
    comps = [c for c in _components(dark)
             if 7 <= c[3] <= 60 and 2 <= c[2] <= 1.3 * c[3] and 0.12 <= c[4] / (c[2] * c[3]) <= 0.85]
    px = np.asarray(im, dtype=np.int16)
    if len(comps) >= 2:
        # capitals and digits are the taller glyphs: lower case, marks and broken strokes the rest
        height = int(round(np.percentile([c[3] for c in comps], 75)))
        sel = np.zeros_like(dark)
        for x, y, w, h, _ in comps:
            sel[y:y + h, x:x + w] = True
        ink = px[sel & dark]
    else:
        height = None
        ink = px[dark] if dark.any() else np.zeros((1, 3), dtype=np.int16)
    # the body of the strokes, not their anti-aliased edges: the darkest third
    lum = ink.mean(axis=1)
    colour = np.median(ink[lum <= np.percentile(lum, 33)], axis=0)
    return height, tuple(int(c) for c in np.round(colour))


@functools.lru_cache(maxsize=4)
def font_path(serif: bool) -> str:
    from matplotlib import font_manager

    return font_manager.findfont(font_manager.FontProperties(family="DejaVu Serif" if serif else "DejaVu Sans"))


def font_for(height: int, serif: bool) -> ImageFont.FreeTypeFont:
    """A DejaVu font whose digits are ``height`` pixels high."""
    probe = ImageFont.truetype(font_path(serif), 100)
    box = probe.getbbox("0123456789")
    size = max(6, round(100 * height / max(1, box[3] - box[1])))
    return ImageFont.truetype(font_path(serif), size)


def _integral(x: np.ndarray) -> np.ndarray:
    """The summed-area table of ``x``, a row and a column of zeros before it."""
    return np.pad(x.cumsum(0).cumsum(1), ((1, 0), (1, 0)))


def _box_sum(integral: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> int:
    H, W = integral.shape[0] - 1, integral.shape[1] - 1
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(W, x1), min(H, y1)
    return int(integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0])


def place_label(im: Image.Image, size: tuple[int, int], height: int,
                rng: np.random.Generator) -> tuple[int, int] | None:
    """Top-left corner of a ``size`` box in empty space near the drawing: no ink within a
    third of a text height around it, some ink within two text heights, inside the page by 3 px."""
    mask = ink_mask(im, threshold=40)
    integral = _integral(mask.astype(np.int64))
    w, h = size
    pad, near = max(2, height // 3), 2 * height
    step = max(2, height // 4)
    spots = []
    for y in range(3, im.height - h - 3, step):
        for x in range(3, im.width - w - 3, step):
            if _box_sum(integral, x - pad, y - pad, x + w + pad, y + h + pad) == 0 \
                    and _box_sum(integral, x - near, y - near, x + w + near, y + h + near) > 0:
                spots.append((x, y))
    if not spots:
        return None
    return spots[int(rng.integers(len(spots)))]


def _write_label(fig: Figure, rng: np.random.Generator, place) -> tuple[bytes, str] | None:
    """The figure with one label from ``LABELS`` in its own text style (height and ink colour,
    a serif or sans font), where ``place(im, size, height, colour, rng)`` puts it: (top-left
    corner, words on the spot for the origin) or None when it has no room. PNG, whatever the
    original: b is a's pixels and the label, nothing else differs."""
    im = figure_image(fig)
    height, colour = text_style(im)
    if height is None:
        return None
    label = LABELS[int(rng.integers(len(LABELS)))]
    serif = bool(rng.random() < 0.5)
    font = font_for(height, serif)
    left, top, right, bottom = font.getbbox(label)
    found = place(im, (right - left, bottom - top), height, colour, rng)
    if found is None:
        return None
    spot, where = found
    ImageDraw.Draw(im).text((spot[0] - left, spot[1] - top), label, font=font, fill=colour)
    style = "serif" if serif else "sans"
    return encode(im, "PNG"), f"label {label!r} at {spot}{where}, text {height} px, {style} {font.size} pt, ink {colour}"


def make_added_label(fig: Figure, rng: np.random.Generator) -> tuple[bytes, str] | None:
    def on_paper(im, size, height, colour, rng):
        spot = place_label(im, size, height, rng)
        return None if spot is None else (spot, "")

    return _write_label(fig, rng, on_paper)


# two labels a figure may give at one place (the second never a prefix of the first's strokes)
OTHER_LABELS = (("45°", "60°"), ("x = 3", "x = 5"), ("4 cm", "6 cm"), ("2m", "5 m"), ("75°", "30°"),
                ("h = 7", "y = 2"), ("120°", "150°"))


def pages_with_labels(im: Image.Image, spot: tuple[int, int], texts: Iterable[str], boxes: Iterable[tuple],
                      font: ImageFont.FreeTypeFont, colour: tuple[int, int, int]) -> list[Image.Image]:
    """A copy of ``im`` per text, the text written with its ink box's top-left corner at ``spot``
    (``boxes``: each text's bounding box in ``font``)."""
    pages = []
    for text, (left, top, _, _) in zip(texts, boxes):
        page = im.copy()
        ImageDraw.Draw(page).text((spot[0] - left, spot[1] - top), text, font=font, fill=colour)
        pages.append(page)
    return pages


def make_other_label(fig: Figure, rng: np.random.Generator) -> tuple[bytes, bytes, str] | None:
    """(a, b, origin): the figure with one label of ``OTHER_LABELS`` and with the other at the
    same place, in its own text style, where ``make_added_label`` would put one; PNG both."""
    im = figure_image(fig)
    height, colour = text_style(im)
    if height is None:
        return None
    first, second = OTHER_LABELS[int(rng.integers(len(OTHER_LABELS)))]
    serif = bool(rng.random() < 0.5)
    font = font_for(height, serif)
    boxes = [font.getbbox(text) for text in (first, second)]
    size = (max(r - left for left, _, r, _ in boxes), max(b - top for _, top, _, b in boxes))
    spot = place_label(im, size, height, rng)
    if spot is None:
        return None
    pages = [encode(page, "PNG") for page in pages_with_labels(im, spot, (first, second), boxes, font, colour)]
    style = "serif" if serif else "sans"
    return pages[0], pages[1], (f"label {first!r} / {second!r} at {spot}, text {height} px, {style} {font.size} pt, "
                                f"ink {colour}")


def place_on_fill(im: Image.Image, size: tuple[int, int], colour: tuple[int, int, int],
                  rng: np.random.Generator) -> tuple[tuple[int, int], int] | None:
    """(top-left corner, grey) of a ``size`` box, with a margin of 3 px, that lies wholly on one
    flat fill: a grey 30 or more levels from the page's, even within a standard deviation of 6,
    and 80 or more levels from the label's ``colour``, so that the label reads on it; None when
    the figure has no such fill."""
    grey = np.asarray(im.convert("L"), dtype=np.float64)
    page = float(np.mean(background(im)))
    ink = float(np.mean(colour))
    fill = (np.abs(grey - page) >= 30) & (np.abs(grey - ink) >= 80)

    w, h = size[0] + 6, size[1] + 6
    if w >= im.width or h >= im.height:
        return None

    def boxes(x: np.ndarray) -> np.ndarray:  # the sum over every w x h box, by its top-left corner
        return x[h:, w:] - x[:-h, w:] - x[h:, :-w] + x[:-h, :-w]

    area = w * h
    mean = boxes(_integral(grey)) / area
    flat = (boxes(_integral(fill.astype(np.int64))) == area) & (boxes(_integral(grey * grey)) / area - mean * mean <= 36)
    flat[1::2, :] = False  # every second row and column, as a grid of spots
    flat[:, 1::2] = False
    spots = [((int(x) + 3, int(y) + 3), int(round(mean[y, x]))) for y, x in zip(*np.nonzero(flat))]
    if not spots:
        return None
    return spots[int(rng.integers(len(spots)))]


def make_label_on_fill(fig: Figure, rng: np.random.Generator) -> tuple[bytes, str] | None:
    """One label in the figure's own text style written inside one of its filled regions (a
    shaded area, a coloured face): ink on ink, which a comparison of where there is ink misses."""
    def on_fill(im, size, height, colour, rng):
        found = place_on_fill(im, size, colour, rng)
        return None if found is None else (found[0], f" on a fill of grey {found[1]}")

    return _write_label(fig, rng, on_fill)


# ---- another figure ------------------------------------------------------------------------------


# Pairs that the rule of ``same_drawing`` lets through but that a reader may take for one drawing
# (the same shape drawn again, other proportions and line widths, no label differing), so never
# "other figures". Found by looking at all 60 nearest_other pairs of seed 0; the other 59 differ
# by what is drawn (other shapes, curves, values, or labels and marks one of them lacks).
REVIEWED_SAME = frozenset({
    frozenset({"wemath/data/2steps/image/190-1.png", "wemath/data/2steps/image/191-1.png"}),
})


def nearest_other(fig_index: int, taken: set[int]) -> tuple[int, int] | None:
    """(pool index, hamming) of the figure nearest to pool figure ``fig_index`` by average hash
    that is another drawing (never the same picture found twice) and fit to use."""
    figs, hashes = pool(), ahashes()
    dist = np.bitwise_count(hashes ^ hashes[fig_index])
    me = figure_image(figs[fig_index])
    for j in np.lexsort((np.arange(len(figs)), dist)).tolist():
        if j == fig_index or j in taken:
            continue
        if frozenset({figs[fig_index].name, figs[j].name}) in REVIEWED_SAME:
            continue
        if not _suitable(figs[j].path) or same_drawing(me, _flat_of(figs[j].path)):
            continue
        return j, int(dist[j])
    return None


# ---- a shared frame --------------------------------------------------------------------------------


def _fit(im: Image.Image, box: tuple[int, int]) -> Image.Image:
    """The drawing cut to its ink (a small border kept) and scaled to fit ``box``."""
    ib = ink_box(ink_mask(im)) or (0, 0, im.width, im.height)
    im = im.crop((max(0, ib[0] - 3), max(0, ib[1] - 3), min(im.width, ib[2] + 3), min(im.height, ib[3] + 3)))
    scale = min(box[0] / im.width, box[1] / im.height)
    return im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.Resampling.LANCZOS)


def draw_frame(layout: str, contents: list[Image.Image], headings: list[str]) -> Image.Image:
    sans = ImageFont.truetype(font_path(False), 20)
    if layout == "panels":
        n = len(contents)
        pw, ph, gap, head = 240, 220, 24, 34
        page = Image.new("RGB", (gap + n * (pw + gap), ph + head + 2 * gap), (255, 255, 255))
        d = ImageDraw.Draw(page)
        for k, content in enumerate(contents):
            x0, y0 = gap + k * (pw + gap), gap + head
            d.text((x0 + pw // 2, gap + head // 2), headings[k], font=sans, fill=(0, 0, 0), anchor="mm")
            d.rectangle([x0, y0, x0 + pw, y0 + ph], outline=(0, 0, 0), width=2)
            fitted = _fit(content, (pw - 24, ph - 24))
            page.paste(fitted, (x0 + (pw - fitted.width) // 2 + 1, y0 + (ph - fitted.height) // 2 + 1))
        return page
    cell, margin = 120, 16
    page = Image.new("RGB", (3 * cell + 2 * margin, 3 * cell + 2 * margin), (255, 255, 255))
    d = ImageDraw.Draw(page)
    for k in range(4):
        d.line([margin + k * cell, margin, margin + k * cell, margin + 3 * cell], fill=(0, 0, 0), width=2)
        d.line([margin, margin + k * cell, margin + 3 * cell, margin + k * cell], fill=(0, 0, 0), width=2)
    for k, content in enumerate(contents):
        x0, y0 = margin + (k % 3) * cell, margin + (k // 3) * cell
        fitted = _fit(content, (cell - 20, cell - 20))
        page.paste(fitted, (x0 + (cell - fitted.width) // 2 + 1, y0 + (cell - fitted.height) // 2 + 1))
    big = ImageFont.truetype(font_path(False), 56)
    d.text((margin + 2 * cell + cell // 2, margin + 2 * cell + cell // 2), "?", font=big, fill=(0, 0, 0), anchor="mm")
    return page


def make_shared_frame(draws: Iterator[Figure], rng: np.random.Generator, i: int) -> tuple[bytes, bytes, str]:
    layout = "panels" if i % 2 == 0 else "grid"
    changed = "all" if (i // 2) % 2 == 0 else "one"
    if layout == "panels":
        n = 2 if rng.random() < 0.5 else 3
        headings = ["Set A", "Set B", "Figure"][:n]
    else:
        n, headings = 8, []
    figs = [next(draws) for _ in range(n)]
    others = [next(draws) for _ in range(n if changed == "all" else 1)]
    second = others if changed == "all" else figs[:-1] + others
    a = draw_frame(layout, [figure_image(f) for f in figs], headings)
    b = draw_frame(layout, [figure_image(f) for f in second], headings)
    names = lambda fs: ", ".join(f.name for f in fs)  # noqa: E731
    return (encode(a, "PNG"), encode(b, "PNG"),
            f"{layout} ({' / '.join(headings) or '3x3 with ?'}), {changed} differ: [{names(figs)}] vs [{names(second)}]")


# ---- cases -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _cases(kind: str, n: int, seed: int) -> tuple[HardCase, ...]:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    out: list[HardCase] = []
    draws = _draw_figures(seed, kind)
    figs = pool()
    index_of = {f.sha: k for k, f in enumerate(figs)}
    taken: set[int] = set()
    used: list[np.ndarray] = []  # drawing signatures of the figures this kind's pairs hold

    def fresh(*paths: Path) -> bool:
        """No figure of another pair is the same drawing (the same picture found twice in the
        corpora), so pairs of one block are different questions from each other."""
        sigs = [_signature_of(p) for p in paths]
        if any(float(np.abs(u - sig).mean()) < SAME_DRAWING for sig in sigs for u in used):
            return False
        used.extend(sigs)
        return True

    i = 0
    while len(out) < n:
        rng = np.random.default_rng([seed, _CLASS_SEED[kind], i])
        if kind == "shared_frame":
            a, b, origin = make_shared_frame(draws, rng, i)
            out.append(HardCase(kind, False, a, b, origin))
            i += 1
            continue
        try:
            fig = next(draws)
        except StopIteration:
            raise ValueError(f"only {len(out)} {kind} cases can be made from the corpora") from None
        made = None
        if kind != "nearest_other" and not fresh(fig.path):
            continue
        if kind == "jpeg":
            made = make_jpeg(fig, rng)
        elif kind == "resize":
            made = make_resize(fig, rng, i)
        elif kind == "rescan":
            made = make_rescan(fig, rng)
        elif kind == "crop":
            made = make_crop(fig, rng, i)
        elif kind == "surround":
            made = make_surround(fig, rng)
        elif kind == "added_label":
            made = make_added_label(fig, rng)
        elif kind == "label_on_fill":
            made = make_label_on_fill(fig, rng)
        elif kind == "other_label":
            made = make_other_label(fig, rng)
        elif kind == "nearest_other":
            k = index_of[fig.sha]
            if k in taken:
                continue
            found = nearest_other(k, taken)
            if found is not None and fresh(fig.path, figs[found[0]].path):
                j, d = found
                taken.update((k, j))
                other = figs[j]
                made = (other.data, f"nearest other: {other.name}, average-hash hamming {d}")
        if made is None:
            continue  # no room for a label, no other figure: the next figure
        a, b, how = made if len(made) == 3 else (fig.data, *made)
        out.append(HardCase(kind, SHOULD_MERGE[kind], a, b, f"{fig.name}: {how}"))
        i += 1
    return tuple(out)


def cases(kind: str, n: int, seed: int = 0) -> list[HardCase]:
    """``n`` pairs of ``kind`` (one of ``KINDS``), the same bytes for the same seed."""
    return list(_cases(kind, int(n), int(seed)))


# ---- questions, the real stages, per-class figures --------------------------------------------------


VARIANTS = ("same", "different")  # the answers of the pair's two questions


def layout(kinds: Iterable[str], n: int) -> list[tuple[str, int, str, str]]:
    """(kind, pair, variant, side) of each record ``records`` yields, in order."""
    return [(kind, i, variant, side) for kind in kinds for i in range(n) for variant in VARIANTS for side in "ab"]


def _records(kinds: list[str], n: int, seed: int, block: bool = False) -> Iterator[dict]:
    number = 0
    blocks = {(kind, variant): k + 1 for k, (kind, variant) in enumerate((k, v) for k in kinds for v in VARIANTS)}
    for kind, i, variant, side in layout(kinds, n):
        case = _cases(kind, n, seed)[i]
        if side == "a":
            number += 1
        answer = i % 4 if side == "a" or variant == "same" else (i + 1) % 4
        yield {
            "question": f"Puzzle {blocks[kind, variant] if block else number}: {STEMS.get(kind, DEFAULT_STEM)}",
            "options": list(OPTIONS), "answer": answer,
            "image": case.a if side == "a" else case.b,
            "subject": "math", "skill": f"hard case {kind}",
        }


def _canonical():
    """This module as ``support.hard_cases`` (the ``python:`` importer loads a file under another
    name: going through one module keeps one cache of figures per process)."""
    name = "support.hard_cases"
    if name not in sys.modules:
        tests = str(Path(__file__).resolve().parents[1])
        if tests not in sys.path:
            sys.path.insert(0, tests)
        __import__(name)
    return sys.modules[name]


def records(kinds: str = ",".join(KINDS), n: str = "5", seed: str = "0", block: str = "0") -> Iterator[dict]:
    """A ``python:`` source: every pair of ``kinds`` (comma-separated) as questions, ``layout`` order;
    ``block=1``: one text for all pairs of a kind and variant."""
    return _canonical()._records(kinds.split(","), int(n), int(seed), block == "1")


NEAR_CONFLICT = "near duplicate with a conflicting answer"
PYTHON_SOURCES_ENV = "STEMFORGE_PYTHON_SOURCES"  # pipelines.ingest.importers.python_source.ALLOWED_ENV


def measure(kinds: Iterable[str] = KINDS, n: int = 60, seed: int = 0, home=None, block: bool = False) -> dict[str, dict]:
    """Per kind: pairs; ``merged`` (same answers: both questions in one group); ``conflicts``
    (different answers: a question of the pair quarantined as a near duplicate with a conflicting
    answer); ``both_kept`` (different answers: both kept, neither merged nor quarantined);
    ``lost`` (questions that did not reach dedup or were quarantined for another reason);
    ``cross`` (questions of two different pairs put in one group: never right, only possible with
    ``block``); ``examples`` (origins of wrong verdicts). Runs the real ingest, filter,
    image-index and dedup stages on a temporary data home (or ``home``).

    ``block``: all pairs of a kind and variant share one text (``n`` > 32 makes a block larger than
    dedup's ``small_block``, where only pairs with close hashes are compared), as the 448 rows of
    one generic text of a real puzzle corpus; else every pair has its own text."""
    import tempfile

    from pipelines.clean.stage import dedup_stage, filter_stage, image_index_stage
    from pipelines.ingest.spec import parse_source_spec
    from pipelines.ingest.stage import land_source
    from pipelines.settings import BuildSettings
    from pipelines.store.home import DataHome
    from pipelines.store.images import ImageStore
    from pipelines.store.lake import read_lake

    import polars as pl

    kinds = list(kinds)
    module = _canonical()
    for kind in kinds:
        module._cases(kind, n, seed)  # made once, in this module's cache
    # the operator's allow-list of python: sources (issue 30): this module, by name, for this call
    saved = os.environ.get(PYTHON_SOURCES_ENV)
    os.environ[PYTHON_SOURCES_ENV] = ",".join(filter(None, [saved, module.__name__]))
    with tempfile.TemporaryDirectory(prefix="stemforge-hard-cases-") as tmp:
        home = DataHome(Path(home or tmp).resolve())
        try:
            spec = parse_source_spec(f"python:{module.__name__}:records?kinds={','.join(kinds)}&n={n}&seed={seed}"
                                     f"&block={int(block)}")
            outcome = land_source(spec, home, ImageStore(home.images))
        finally:
            if saved is None:
                os.environ.pop(PYTHON_SOURCES_ENV, None)
            else:
                os.environ[PYTHON_SOURCES_ENV] = saved
        filter_stage(home)
        image_index_stage(home)
        dedup_stage(home, BuildSettings(home=str(home.root), sources=(spec.text,), seed=seed))
        kept = read_lake(home, "deduplicated").select("source_key", "question_id")
        dups = read_lake(home, "duplicates").select("source_key", "kept_question_id")
        qpath = home.lake / "quarantine" / "dedup.parquet"
        quarantine = pl.read_parquet(qpath) if qpath.exists() else pl.DataFrame({"source_key": [], "reason": []})
    group = dict(zip(kept["source_key"].to_list(), kept["question_id"].to_list()))
    group.update(zip(dups["source_key"].to_list(), dups["kept_question_id"].to_list()))
    reasons = dict(zip(quarantine["source_key"].to_list(), quarantine["reason"].to_list()))
    key = {slot: f"records#{p}" for p, slot in enumerate(layout(kinds, n))}
    members: dict[str, list[tuple[str, int]]] = {}
    for (kind, i, _, _), k in key.items():
        if k in group:
            members.setdefault(group[k], []).append((kind, i))
    cross = {kind: 0 for kind in kinds}
    for found in members.values():
        for x in range(len(found)):
            for y in range(x + 1, len(found)):
                if found[x] != found[y]:
                    cross[found[x][0]] += 1
    out = {}
    for kind in kinds:
        row = {"pairs": n, "merged": 0, "conflicts": 0, "both_kept": 0, "lost": 0, "cross": cross[kind],
               "examples": [], "should_merge": SHOULD_MERGE[kind], "goal": GOALS[kind]}
        for i in range(n):
            same = key[(kind, i, "same", "a")], key[(kind, i, "same", "b")]
            diff = key[(kind, i, "different", "a")], key[(kind, i, "different", "b")]
            for k in (*same, *diff):
                if k not in group and reasons.get(k) != NEAR_CONFLICT:
                    row["lost"] += 1
            merged = same[0] in group and group.get(same[0]) == group.get(same[1])
            conflict = any(reasons.get(k) == NEAR_CONFLICT for k in diff)
            both = all(k in group for k in diff) and group[diff[0]] != group[diff[1]]
            row["merged"] += merged
            row["conflicts"] += conflict
            row["both_kept"] += both
            if merged != SHOULD_MERGE[kind] or (conflict and not SHOULD_MERGE[kind]):
                if len(row["examples"]) < 5:
                    origin = _cases(kind, n, seed)[i].origin
                    row["examples"].append(origin if len(origin) <= 240 else origin[:237] + "...")
        row["rate"] = row["merged"] / n if n else 0.0
        row["met"] = row["cross"] == 0 and (
            row["rate"] >= row["goal"] if row["should_merge"] else row["merged"] == 0 and row["conflicts"] == 0)
        out[kind] = row
    out["_ingest"] = {"questions": outcome.questions, "quarantined": outcome.quarantined}
    return out
