"""Whether two pictures show the same drawing: the ink of one, aligned onto the other, must
coincide with it everywhere.

``compare_pictures(a, b)`` decides on the pictures' bytes:

1. normalize each picture (``ink_picture``): grey, the paper level (the most common grey) and
   the ink level (the darkest percentile) mapped to 0 and 1, so tinted or grey paper and faded
   ink read alike; cropped to its ink (specks of a few pixels ignored) and scaled so that the
   ink's longer side is ``WORK_SIDE`` pixels: margins and size no longer count;
2. align the second onto the first with OpenCV's ``findTransformECC`` (an affine warp from the
   identity, on blurred ink, coarse then fine): a re-scan's small turn, shift and scale;
3. compare the ink: every ink pixel of one must have ink of the other within ``TOLERANCE``
   pixels. Ink that does not is grouped into clusters (pixels within ``CLUSTER_GAP`` of each
   other); scattered JPEG or scanner specks make tiny clusters, next to the other's strokes; a
   label of a few characters, a number, an arrow or another drawing makes a cluster of
   ``LABEL_INK`` pixels or more, or one with ``APART_INK`` pixels on the other's paper (farther
   than ``APART`` from its ink: a small label), and then the pictures are different.

The verdict's ``measure`` holds the numbers it read. Everything runs at the working size, so a
pair costs about the same whatever the pictures' sizes. OpenCV is imported on first use.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

WORK_SIDE = 400  # pixels: the ink box is scaled to this many pixels squared
MAX_ASPECT = 4  # and its longer side to at most this many times WORK_SIDE
MARGIN = 6  # pixels of paper kept around the ink box at the working size
MAX_DECODE_PIXELS = 2_000_000  # larger pictures are shrunk to this before normalizing (the ink
# box then still has several times the working size's pixels)
INK_LEVEL = 0.5  # inkness (0 paper .. 1 ink) from which a pixel is ink
NEAR_LEVEL = 0.25  # inkness that counts as "ink nearby" for the other picture's ink
FAINT_LEVEL = 0.5  # inkness from which an unmatched pixel counts (for its inkness)
TOLERANCE = 2  # pixels: a copy's ink lies within this of the other's
CLUSTER_GAP = 3  # pixels: unmatched ink this close is one cluster (the characters of a label)
LABEL_INK = 22  # unmatched ink pixels in one cluster that make the pictures different, or
TRACE_LEVEL = 0.08  # inkness of a trace of ink (paper is below)
APART = 4  # pixels: unmatched ink farther than this from all the other's ink is on its paper
APART_INK = 10  # this many of one cluster's pixels on the other's paper (a small label)
FAINT_APART = 0.35  # inkness from which ink on the other's bare paper counts (thin grey lines)
OTHER_DRAWING = 0.2  # share of a picture's ink left unmatched from which it is another drawing
MIN_CONTRAST = 24  # grey levels between paper and ink below which a picture is blank
SPECK = 3  # ink components of fewer pixels (at decode size) do not count for the ink box
MAX_WARP_SCALE = 0.12  # an alignment that scales more than this, or
MAX_WARP_TURN = 4.0  # turns more than this (degrees), is not trusted
COLOURFUL = 24  # a pixel whose channels differ from its grey by more than this is coloured
COLOURED_INK = 0.05  # a picture with fewer of its ink pixels coloured is grey
COLOUR_BLUR = 1.5  # pixels: colours are compared as regions (JPEG blurs the colour of a thin line)
COLOUR_CHANGE = 48  # colours (minus grey) further apart than this in some channel differ
RECOLOURED = 0.25  # share of the coloured ink both have whose colour differs: another picture
SETTLED = 0.5  # a pair whose clusters are under this share of the limits needs no (finer) alignment
REFINE_BELOW = 8  # an alignment leaving clusters under this many times the limits is refined


@dataclass(frozen=True)
class InkVerdict:
    same: bool
    kind: str  # identical, copy, added-ink, other-drawing, blank, undecodable
    measure: dict = field(default_factory=dict)


@dataclass(frozen=True)
class InkPicture:
    """A picture's inkness (float32, 0..1) on a working canvas, its ink box's top-left corner."""

    inkness: np.ndarray
    ink_pixels: int
    contrast: float
    exact: bytes  # digest of the decoded pixels: equal pixels make identical pictures
    chroma: np.ndarray | None = None  # (h, w, 3) float32: colour minus its grey, on the canvas; None: grey


class Undecodable(ValueError):
    pass


def _cv2():
    """OpenCV, on one thread: the same sums in the same order on every machine, and dedup
    already runs beside other work."""
    import cv2

    if cv2.getNumThreads() != 1:
        cv2.setNumThreads(1)
    return cv2


def _decode(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(grey float32, RGB uint8) pixels of a picture, transparency on white paper."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            shrink = max(1.0, np.sqrt(im.width * im.height / MAX_DECODE_PIXELS))
            target = (int(im.width / shrink), int(im.height / shrink))
            im.draft("RGB", target)  # JPEGs: shrink while decoding
            if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
                rgba = im.convert("RGBA")
                paper = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                im = Image.alpha_composite(paper, rgba)
            rgb = im.convert("RGB")
            if rgb.width * rgb.height > MAX_DECODE_PIXELS:
                rgb = rgb.resize(target, Image.Resampling.BOX)
            return np.asarray(rgb.convert("L"), dtype=np.float32), np.asarray(rgb)
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise Undecodable(f"{type(exc).__name__}: {exc}") from None


def ink_picture(data: bytes) -> InkPicture:
    """The normalized ink of a picture (see the module docstring). Raises ``Undecodable``."""
    import hashlib

    cv2 = _cv2()

    grey, rgb = _decode(data)
    exact = hashlib.blake2b(rgb.tobytes() + np.asarray(rgb.shape).tobytes(), digest_size=16).digest()
    histogram = np.bincount(np.clip(grey, 0, 255).astype(np.int64).ravel(), minlength=256).astype(np.float64)
    smooth = np.convolve(histogram, np.ones(5) / 5, mode="same")
    paper = float(np.argmax(smooth))
    dark_paper = paper < 128  # light drawing on dark paper: ink is what is lighter
    signed = (grey - paper) if dark_paper else (paper - grey)
    # the ink level among the pixels clearly off the paper: it does not move with how much of
    # the page is paper (a copy cut to its ink, or given wider margins)
    darkest = float(signed.max())
    strong = signed[signed >= max(MIN_CONTRAST, 0.3 * darkest)]
    ink_level = float(np.percentile(strong, 90)) if strong.size else darkest
    contrast = ink_level
    if contrast < MIN_CONTRAST:
        return InkPicture(_blank().inkness, 0, contrast, exact)
    inkness = np.clip(signed / ink_level, 0.0, 1.0).astype(np.float32)
    mask = (inkness >= NEAR_LEVEL).astype(np.uint8)  # grey strokes near the ink level count for the box
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    kept = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= SPECK) + 1
    if not len(kept):
        return InkPicture(_blank().inkness, 0, contrast, exact)
    x0 = int(stats[kept, cv2.CC_STAT_LEFT].min())
    y0 = int(stats[kept, cv2.CC_STAT_TOP].min())
    x1 = int((stats[kept, cv2.CC_STAT_LEFT] + stats[kept, cv2.CC_STAT_WIDTH]).max())
    y1 = int((stats[kept, cv2.CC_STAT_TOP] + stats[kept, cv2.CC_STAT_HEIGHT]).max())
    box = inkness[y0:y1, x0:x1]
    # the ink box gets WORK_SIDE² pixels whatever its shape (a wide strip of panels keeps its
    # labels legible), its longer side at most MAX_ASPECT times WORK_SIDE
    scale = min(WORK_SIDE / np.sqrt(box.shape[0] * box.shape[1]), MAX_ASPECT * WORK_SIDE / max(box.shape))
    size = (max(1, round(box.shape[1] * scale)), max(1, round(box.shape[0] * scale)))
    resized = cv2.resize(box, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    canvas = np.zeros((size[1] + 2 * MARGIN, size[0] + 2 * MARGIN), np.float32)
    canvas[MARGIN:MARGIN + size[1], MARGIN:MARGIN + size[0]] = resized
    colour = rgb[y0:y1, x0:x1].astype(np.float32)
    colour -= colour.mean(axis=2, keepdims=True)
    chroma = None
    ink_mask = inkness[y0:y1, x0:x1] >= INK_LEVEL
    # a picture whose ink is (nearly) all grey is grey: tinted paper or a grey copy has no colours
    if (np.abs(colour[ink_mask]).max(axis=1) > COLOURFUL).mean() > COLOURED_INK if ink_mask.any() else False:
        chroma = np.zeros((*canvas.shape, 3), np.float32)
        chroma[MARGIN:MARGIN + size[1], MARGIN:MARGIN + size[0]] = cv2.GaussianBlur(cv2.resize(
            colour, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR), (0, 0), COLOUR_BLUR)
    return InkPicture(canvas, int((canvas >= INK_LEVEL).sum()), contrast, exact, chroma)


def _blank() -> InkPicture:
    return InkPicture(np.zeros((2 * MARGIN, 2 * MARGIN), np.float32), 0, 0.0, b"")


def _on_common_canvas(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both canvases padded (right and bottom) to the same size."""
    height, width = max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])

    def padded(x: np.ndarray) -> np.ndarray:
        if x.shape == (height, width):
            return x
        out = np.zeros((height, width), np.float32)
        out[:x.shape[0], :x.shape[1]] = x
        return out

    return padded(a), padded(b)


def _align(fixed: np.ndarray, moving: np.ndarray, factor: float, blur: float, steps: int,
           start: np.ndarray | None = None) -> tuple[np.ndarray, float] | None:
    """The affine warp that maps ``fixed``'s pixels into ``moving`` and ECC's correlation, found
    on blurred ink at ``factor`` times the working size from ``start`` (the identity); None when
    ECC does not converge."""
    cv2 = _cv2()

    f = cv2.GaussianBlur(cv2.resize(fixed, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA), (0, 0), blur)
    m = cv2.GaussianBlur(cv2.resize(moving, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA), (0, 0), blur)
    warp = np.eye(2, 3, dtype=np.float32) if start is None else start.copy()
    warp[:, 2] *= factor
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, steps, 1e-4)
    try:
        rho, warp = cv2.findTransformECC(f, m, warp, cv2.MOTION_AFFINE, criteria, None, 1)
    except cv2.error:
        return None
    warp[:, 2] /= factor
    return warp, float(rho)


def _trusted(warp: np.ndarray) -> bool:
    linear = warp[:, :2].astype(np.float64)
    singular = np.linalg.svd(linear, compute_uv=False)
    turn = np.degrees(np.arctan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1]))
    return bool(np.all(np.abs(singular - 1.0) <= MAX_WARP_SCALE) and abs(turn) <= MAX_WARP_TURN)


def _unmatched(ink: np.ndarray, other: np.ndarray, faint: bool = True) -> tuple[int, int, int]:
    """(unmatched ink of ``ink`` against ``other``, that of its largest cluster, the most of a
    cluster's that lies apart from all of ``other``'s ink), in pixels of full ink; ``faint``:
    faint ink on ``other``'s bare paper counts too."""
    cv2 = _cv2()

    present = (other >= NEAR_LEVEL).astype(np.uint8)
    near = cv2.dilate(present, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * TOLERANCE + 1,) * 2))
    anything = (other >= TRACE_LEVEL).astype(np.uint8)  # paper means no trace of ink at all
    around = cv2.dilate(anything, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * APART + 1,) * 2))
    # strong ink away from the other's ink, and faint ink on the other's bare paper (a drawing
    # in thin grey lines where the other has none)
    extra = ((ink >= INK_LEVEL) & (near == 0)) | ((ink >= FAINT_APART) & (around == 0) if faint else False)
    extra = extra.astype(np.uint8)
    total = int(extra.sum())
    if not total:
        return 0, 0, 0
    count, labels = cv2.connectedComponents(
        cv2.dilate(extra, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * CLUSTER_GAP + 1,) * 2)), connectivity=8)
    mass = np.bincount(labels[extra == 1], minlength=count)
    apart = np.bincount(labels[(extra == 1) & (around == 0)], minlength=count)
    return total, int(mass[1:].max(initial=0)), int(apart[1:].max(initial=0))


def _outside(moving: np.ndarray, warp: np.ndarray, shape: tuple[int, int]) -> int:
    """Ink pixels of ``moving`` that the warp (fixed -> moving) places outside the fixed canvas
    by more than its margin and ``TOLERANCE``: ink the comparison on that canvas would never see."""
    ys, xs = np.nonzero(moving >= INK_LEVEL)
    if not len(xs):
        return 0
    linear = warp[:, :2].astype(np.float64)
    points = np.linalg.solve(linear, np.stack([xs - float(warp[0, 2]), ys - float(warp[1, 2])]))
    height, width = shape
    slack = MARGIN + TOLERANCE
    out = ((points[0] < -slack) | (points[0] > width - 1 + slack)
           | (points[1] < -slack) | (points[1] > height - 1 + slack))
    return int(out.sum())


def _recoloured(a: InkPicture, b: InkPicture, fixed: np.ndarray, warp: np.ndarray) -> float | None:
    """The share of the ink both pictures have where one is coloured and their colours differ,
    once aligned; None when either picture is grey (a grey copy of a coloured figure is a copy)."""
    cv2 = _cv2()

    if a.chroma is None or b.chroma is None:
        return None
    height, width = fixed.shape
    first = np.zeros((height, width, 3), np.float32)
    first[:a.chroma.shape[0], :a.chroma.shape[1]] = a.chroma
    second = np.zeros((height, width, 3), np.float32)
    second[:b.chroma.shape[0], :b.chroma.shape[1]] = b.chroma
    second = cv2.warpAffine(second, warp, (width, height), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    moved_ink = cv2.warpAffine(_padded(b.inkness, fixed.shape), warp, (width, height),
                               flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    both = (fixed >= INK_LEVEL) & (moved_ink >= INK_LEVEL)
    coloured = both & ((np.abs(first).max(axis=2) > COLOURFUL) | (np.abs(second).max(axis=2) > COLOURFUL))
    if coloured.sum() < LABEL_INK:
        return None
    differs = np.abs(first - second).max(axis=2) > COLOUR_CHANGE
    return round(float((differs & coloured).sum() / coloured.sum()), 3)


def _padded(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    if x.shape == shape:
        return x
    out = np.zeros(shape, np.float32)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def compare_prepared(a: InkPicture, b: InkPicture) -> InkVerdict:
    """The verdict on two normalized pictures (``ink_picture``)."""
    cv2 = _cv2()

    if a.exact == b.exact:
        return InkVerdict(True, "identical", {})
    if not a.ink_pixels or not b.ink_pixels:
        same = not a.ink_pixels and not b.ink_pixels
        return InkVerdict(same, "blank" if same else "other-drawing",
                          {"ink_a": a.ink_pixels, "ink_b": b.ink_pixels})
    fixed, moving = _on_common_canvas(a.inkness, b.inkness)
    side = fixed.shape[::-1]
    best = None

    def judge(warp: np.ndarray, rho: float | None) -> tuple[int, int]:
        nonlocal best
        moved = cv2.warpAffine(moving, warp, side, flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
        extra_a, cluster_a, apart_a = _unmatched(fixed, moved)
        extra_b, cluster_b, apart_b = _unmatched(moved, fixed)
        # paper where the other has ink all around: a letter or mark cut out of a filled shape
        _, holes_a, _ = _unmatched(1.0 - fixed, 1.0 - moved, faint=False)
        _, holes_b, _ = _unmatched(1.0 - moved, 1.0 - fixed, faint=False)
        # ink the warp moves off the canvas lies apart from all of the other's ink (a label at an edge)
        outside = _outside(moving, warp, fixed.shape)
        extra_b += outside
        apart_b = max(apart_b, outside)
        # in units of the decision: a cluster of LABEL_INK, or one with APART_INK apart from all ink
        score = (max(max(cluster_a, cluster_b, holes_a, holes_b) / LABEL_INK, max(apart_a, apart_b) / APART_INK),
                 extra_a + extra_b)
        if best is None or score < best[0]:
            best = (score, (warp, rho), extra_a, cluster_a, apart_a, extra_b, cluster_b, apart_b,
                    max(holes_a, holes_b))
        return score

    # as they lie first (most copies: re-encoded, resized, other margins); then aligned by ECC at
    # a quarter of the working size (a re-scan's turn and shift); then, for a pair that is
    # nearly a copy, refined at half the working size
    if judge(np.eye(2, 3, dtype=np.float32), None)[0] >= SETTLED:
        coarse = _align(fixed, moving, 0.25, 1.5, 50)
        if coarse is not None and _trusted(coarse[0]) and judge(*coarse)[0] >= SETTLED and best[0][0] < REFINE_BELOW:
            fine = _align(fixed, moving, 0.5, 1.0, 15, start=coarse[0])
            if fine is not None and _trusted(fine[0]) and judge(*fine)[0] >= SETTLED and best[0][0] < REFINE_BELOW:
                finest = _align(fixed, moving, 1.0, 1.0, 10, start=fine[0])
                if finest is not None and _trusted(finest[0]):
                    judge(*finest)
    (score, _), (warp, rho), extra_a, cluster_a, apart_a, extra_b, cluster_b, apart_b, holes = best
    linear = warp[:, :2].astype(np.float64)
    measure = {
        "ink_a": a.ink_pixels, "ink_b": b.ink_pixels,
        "extra_a": extra_a, "extra_b": extra_b, "cluster_a": cluster_a, "cluster_b": cluster_b,
        "apart_a": apart_a, "apart_b": apart_b, "holes": holes,
        "aligned": rho is not None,
        "ecc": None if rho is None else round(rho, 3),
        "shift": round(float(np.hypot(*warp[:, 2])), 1),
        "turn": round(float(np.degrees(np.arctan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1]))), 2),
    }
    if score < 1:
        recoloured = _recoloured(a, b, fixed, warp)
        if recoloured is not None:
            measure["recoloured"] = recoloured
            if recoloured > RECOLOURED:
                return InkVerdict(False, "recoloured", measure)
        return InkVerdict(True, "copy", measure)
    unmatched_share = max(extra_a / a.ink_pixels, extra_b / b.ink_pixels)
    measure["unmatched"] = round(unmatched_share, 3)
    return InkVerdict(False, "other-drawing" if unmatched_share > OTHER_DRAWING else "added-ink", measure)


def compare_pictures(a: bytes, b: bytes) -> InkVerdict:
    """Whether pictures ``a`` and ``b`` (image file bytes) show the same drawing (see the module
    docstring); ``same`` is False for pictures that cannot be decoded (unless byte-equal)."""
    if a == b:
        return InkVerdict(True, "identical", {})
    try:
        first, second = ink_picture(a), ink_picture(b)
    except Undecodable as exc:
        return InkVerdict(False, "undecodable", {"error": str(exc)[:200]})
    return compare_prepared(first, second)
