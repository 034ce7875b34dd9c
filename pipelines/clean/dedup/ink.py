"""Whether two pictures show the same drawing: the ink of one, aligned onto the other, must
coincide with it everywhere.

``compare_pictures(a, b)`` decides on the pictures' bytes:

1. normalize each picture (``ink_picture``): grey, the paper level (the most common grey) and
   the ink level (the darkest percentile) mapped to 0 and 1, so tinted or grey paper and faded
   ink read alike; cropped to its ink (specks of a few pixels ignored) and scaled so that the
   ink's longer side is ``WORK_SIDE`` pixels: margins and size no longer count. Where that
   reading may not be what a copy reads, a second one is kept: a paper of a middle grey read
   with the other polarity, the paper of its outer ring where the most common grey is a fill,
   a crop to its faint ink too, the page inside a darker surround (a scan's black margin, a
   page photographed on a table: ``page_box``) read alone (``compare_prepared`` tries them on a
   pair that differs);
2. align the second onto the first by ECC (``_ecc_affine``: OpenCV's ``findTransformECC``, an
   affine warp from the identity, on blurred ink, coarse then fine; ink boxes of other shapes
   that it does not align start again from their scale): a re-scan's small turn, shift and scale,
   the same both ways (``_trusted``: a warp that stretches one way more is another shape);
3. compare the ink: every ink pixel of one must have ink of the other within ``TOLERANCE``
   pixels, and ink as dark as it nearly: where it is darker by ``MARK`` than the least ink around
   it in the other (a fill), the other's must rise ``RISE`` of the way to it (a label written
   inside a shaded region is ink on ink, and the region there is flat; its thin strokes may be
   faint at the working size, so faint ink counts there too). Ink that does not is
   grouped into clusters (pixels within ``CLUSTER_GAP`` of each other); scattered JPEG or
   scanner specks make tiny clusters, next to the other's strokes; a label of a few characters,
   a number, an arrow or another drawing makes a cluster of ``LABEL_INK`` pixels or more, or
   one with ``APART_INK`` pixels on the other's paper (farther than ``APART`` from its ink: a
   small label; counted in the picture's own pixels where the working size shrank it, so a
   label small in a large figure counts as it does in a small one), and then the pictures are
   different;
4. for a pair that passes, compare again tile by tile (``_changed_ink``): each tile aligned on
   its own, a copy's strokes lie within ``FINE_TOLERANCE``; ink of each that the other lacks at
   one place (``CHANGED_INK`` pixels of both) is another label written there ('45°' for '60°'),
   which the whole picture's tolerance lets pass; ``CHANGED_INK_ONE_PIXEL`` for two pictures of
   one own pixel aligned by a shift (``_a_shift``), which no resampling sets apart, and such a
   pair is compared again at ``ONE_GRID_FINER`` times the working size. Where the working size
   shrank both pictures
   (``FINER_FROM``), the tiles are compared once more at the coarser one's own pixel
   (``_finer_look``): a label of a few pixels in a large figure is too small there for another
   digit's strokes to show;
5. for a pair that passes and whose decoded pixels are of one page (``_one_page``: over the union
   of their ink boxes, at the shift of a corner of those boxes, ``ONE_PAGE`` of the pixels read
   alike: a re-encode, another tone, another crop, another label; a re-scan's noise, blur and turn
   leave far fewer), both are read again over that box at their decoded pixels, where nothing
   resamples one against the other and a copy's pixels read alike: ``OWN_INK`` pixels at one
   place where one reads ``DARKER`` than the other (``_own_ink``) are a mark the other lacks
   ('cafe' / 'park' written at one place, '12' / '15' 6 px high in an 866-px figure, a label
   on a fill read as ink, which the tiles' count of each side's ink lets pass).

A pair that differs gets a second look (``_second_look``) at the lower of the two ink levels
and at the coarser picture's own pixel, as far as two copies of a small figure can agree: at the
alignment that scored best, and at one that leaves ``MISALIGNED`` times less unmatched ink. What
it forgives must be what resampling does: ink thicker than the coarser picture's pixel left
unmatched, or a blob against a thin line, still counts.
The verdict's ``measure`` holds the numbers it read. Everything but the finer look runs at the
working size, so a pair costs about the same whatever the pictures' sizes; the finer look, at
most ``FINER_MOST`` times that size, only for large pictures that pass. OpenCV is imported on
first use.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass, field, replace

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
APART_INK = 10  # this many of one cluster's pixels on the other's paper (a small label), in the
# picture's own pixels where the working size shrank it (``_apart_limit``), but at least
APART_FLOOR = 4  # working pixels
FAINT_APART = 0.35  # inkness from which ink on the other's bare paper counts (thin grey lines)
OTHER_DRAWING = 0.2  # share of a picture's ink left unmatched from which it is another drawing
MIN_CONTRAST = 24  # grey levels between paper and ink below which a picture is blank
RING = 2  # pixels: the outer ring of a picture, where its paper is (``_border_paper``)
RING_SHARE = 0.25  # a most common grey with less of the ring than this may be a fill
SURROUND_SHARE = 0.9  # share of the ring of one grey from which it may be a surround (``page_box``),
SURROUND_SIDE = 4  # and the pixels it must cover on some side
PAPER_SPREAD = 12  # greys either side of its level a paper may spread over
PAPER_SHARE = 0.1  # share of a picture's pixels from which a band of greys may be its paper
FAINT_BOX = 0.12  # inkness from which ink counts for a picture's second crop (``_other_box``)
BOX_MOVED = 0.05  # share of the page a side of that crop must move by, and
PAGE_BOX = 0.9  # the share of the page it must stay under
MID_GREY = 32  # a paper this close to the middle grey (128) is read both ways (``ink_picture``)
SPECK = 3  # ink components of fewer pixels (at decode size) do not count for the ink box
MAX_WARP_SCALE = 0.12  # an alignment that scales more than this, or
MAX_WARP_TURN = 4.0  # turns more than this (degrees), is not trusted, nor one that
MAX_WARP_STRETCH = 0.03  # stretches one way more than the other by this (log ratio of its
# scales) beyond what rounding a picture's sides to whole pixels can (``_stretch_limit``)
ASPECT_ALIKE = 0.05  # ink boxes whose aspects differ by less than this (log ratio) have one shape
COLOURFUL = 24  # a pixel whose channels differ from its grey by more than this is coloured
COLOURED_INK = 0.05  # a picture with fewer of its ink pixels coloured is grey
COLOUR_BLUR = 1.5  # pixels: colours are compared as regions (JPEG blurs the colour of a thin line)
COLOUR_CHANGE = 48  # colours (minus grey) further apart than this in some channel differ
RECOLOURED = 0.25  # share of the coloured ink both have whose colour differs: another picture
SETTLED = 0.5  # a pair whose clusters are under this share of the limits needs no (finer) alignment
REFINE_BELOW = 8  # an alignment leaving clusters under this many times the limits is refined
LEVELS_ALIKE = 1.1  # ink levels within this ratio are alike; a pair further apart that differs
LEVELS_APART = 2.0  # (and at most this far) is judged again at the lower level (``_second_look``)
STEPS = 64  # steps of inkness in which the ink around a pixel is read (``_steps``)
RISE = 0.3  # share of the way from the other's least ink around to this ink that its ink must rise
MARK = 0.2  # ink this much darker than the other's least ink around it is a mark to be found there
SOURCE_PIXEL = 2.0  # working pixels a picture's own pixel may span in a comparison (``_second_look``)
BLOB = 3  # working pixels (of the second look's canvases): ink holding a disc of this radius is a blob
MISALIGNED = 2.0  # an alignment leaving this many times more unmatched ink than another is not the pair's
FINE_TOLERANCE = 1  # pixels: a copy's ink lies within this of the other's once a tile is aligned
FINE_TILE = 16  # pixels: tiles aligned on their own, each by at most
FINE_REACH = 2  # pixels each way (chosen over the tile and its neighbours)
CHANGED_INK = 5  # pixels of each picture's ink unmatched so at one place: another label there
CHANGED_INK_ONE_PIXEL = 3  # the same, for two pictures of one own pixel (nothing resampled between them)
FINER_FROM = 1.5  # a pair whose pictures both have this many own pixels a working pixel is compared
FINER_MOST = 2.5  # again finer (``_finer_look``), at most this many times the working size
ONE_GRID_FINER = 2.0  # times the working size that two pictures of one grid are compared again at, at least
ALIKE = 0.05  # inkness by which two pixels of one page may differ and read alike (``_one_page``)
ONE_PAGE = 0.985  # share of two crops' pixels that read alike from which they are of one page
DARKER = 0.5  # inkness by which a pixel of one page reads darker than the other's: a mark there
OWN_INK = 2  # such pixels of one picture at one place, on one page: a mark the other lacks
ONE_GRID = 0.95  # share of two crops' pixels that read alike from which they are of one grid
# (``_one_grid``; real small figures: re-scans of one own pixel <= 0.91, a label added or changed >= 0.96)
ONE_GRID_SCALE = 0.01  # own pixels this close are one (log ratio: JPEG's ringing widens an ink box a pixel)


@dataclass(frozen=True)
class InkVerdict:
    same: bool
    kind: str  # identical, copy, added-ink, changed-ink, other-drawing, recoloured, blank, undecodable
    measure: dict = field(default_factory=dict)


@dataclass(frozen=True)
class InkPicture:
    """A picture's inkness (float32, 0..1) on a working canvas, its ink box's top-left corner."""

    inkness: np.ndarray
    ink_pixels: int
    contrast: float
    exact: bytes  # digest of the decoded pixels: equal pixels make identical pictures
    pixel: float = 1.0  # working pixels one of the decoded picture's pixels spans
    chroma: np.ndarray | None = None  # (h, w, 3) float32: colour minus its grey, on the canvas
    # (unblurred: ``_chroma`` blurs it for a comparison); None: grey
    # what the other picture's ink is compared against, made once per picture (``_surroundings``)
    surroundings: dict = field(default_factory=dict, compare=False, repr=False)
    dark_paper: bool = False  # its paper is dark, its ink lighter
    box: tuple[int, int, int, int] | None = field(default=None, compare=False, repr=False)  # cropped (decoded pixels)
    # a picture whose paper is a mid grey read with the other polarity (``ink_picture``)
    other_reading: InkPicture | None = field(default=None, compare=False, repr=False)
    # a picture whose most common grey is not the paper around it read with that paper
    border_reading: InkPicture | None = field(default=None, compare=False, repr=False)
    # a picture whose faint ink reaches beyond its ink box cropped to that too
    faint_reading: InkPicture | None = field(default=None, compare=False, repr=False)
    # a page inside a darker surround (a scan's black margin, a page photographed on a table)
    # read alone, from its own grey pixels (``page_box``)
    page_reading: InkPicture | None = field(default=None, compare=False, repr=False)
    # what it was read from, to be read again finer (``_finer``): the inkness of each grey level
    # and the decoded grey pixels
    table: np.ndarray | None = field(default=None, compare=False, repr=False)
    grey: np.ndarray | None = field(default=None, compare=False, repr=False)

    def other_readings(self) -> dict[str, InkPicture]:
        """Its other readings that it has, by field name."""
        return {name: reading for name in ("other_reading", "border_reading", "faint_reading", "page_reading")
                if (reading := getattr(self, name)) is not None}


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
    """(grey, RGB) pixels of a picture (uint8), transparency on white paper."""
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
            return np.asarray(rgb.convert("L")), np.asarray(rgb)
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise Undecodable(f"{type(exc).__name__}: {exc}") from None


def ink_picture(data: bytes) -> InkPicture:
    """The normalized ink of a picture (see the module docstring). Raises ``Undecodable``."""
    import hashlib

    grey, rgb = _decode(data)
    digest = hashlib.blake2b(np.ascontiguousarray(rgb).data, digest_size=16)  # the pixels, then their shape
    digest.update(np.asarray(rgb.shape).tobytes())
    exact = digest.digest()
    picture = _picture_of(grey, rgb, exact)
    page = page_box(grey)
    if page is not None:
        x0, y0, x1, y1 = page
        picture = replace(picture, page_reading=_picture_of(np.ascontiguousarray(grey[y0:y1, x0:x1]),
                                                            np.ascontiguousarray(rgb[y0:y1, x0:x1]), exact))
    return picture


def _picture_of(grey: np.ndarray, rgb: np.ndarray, exact: bytes) -> InkPicture:
    """The normalized ink of decoded pixels, with its other readings."""
    histogram = np.bincount(grey.ravel(), minlength=256).astype(np.float64)
    smooth = _smoothed(histogram)
    paper = float(np.argmax(smooth))
    dark_paper = paper < 128  # light drawing on dark paper: ink is what is lighter
    inkness, contrast = _ink_level(histogram, paper, dark_paper)
    picture = _read_ink(grey, rgb, inkness, contrast, exact, dark_paper)
    if abs(paper - 128) < MID_GREY:
        # a mid-grey paper is as likely a large fill (a cube's face) that a tint or a re-scan
        # moves across the middle: the other reading is kept for a picture read the other way
        picture = replace(picture, other_reading=_read_ink(
            grey, rgb, *_ink_level(histogram, paper, not dark_paper), exact, not dark_paper))
    border = _border_paper(grey, histogram, smooth, int(paper))
    if border is not None:
        picture = replace(picture, border_reading=_read_ink(
            grey, rgb, *_ink_level(histogram, float(border), border < 128), exact, border < 128))
    # grey lines near the box's level (a light grid around a filled cell) cross it in a copy whose
    # ink level moved: a second reading is cropped to the faint ink too
    wider = None if picture.box is None else _faint_box(grey, inkness, picture.box)
    if wider is not None:
        picture = replace(picture, faint_reading=_cropped(grey, rgb, inkness, contrast, wider, exact, dark_paper))
    return _with_grey(picture, grey)


def _with_grey(picture: InkPicture, grey: np.ndarray) -> InkPicture:
    """The picture and its other readings, each given the grey pixels it was read from (a page
    reading has its own)."""
    return replace(picture, grey=grey, **{name: _with_grey(reading, grey)
                                          for name, reading in picture.other_readings().items()
                                          if name != "page_reading"})


def _ring(grey: np.ndarray) -> np.ndarray:
    """The grey pixels of a picture's outer ring of ``RING`` pixels."""
    return np.concatenate([grey[:RING].ravel(), grey[-RING:].ravel(), grey[RING:-RING, :RING].ravel(),
                           grey[RING:-RING, -RING:].ravel()])


def page_box(grey: np.ndarray, resampled: bool = False) -> tuple[int, int, int, int] | None:
    """The box of a page lying in a darker surround: a scan's black margin, a page photographed
    on a table, a screenshot's frame, or a scanner that pads a figure with its darkest large area.
    The surround is the picture's outer ring when ``SURROUND_SHARE`` of it is of one grey, and
    every pixel of that grey (within ``PAPER_SPREAD``) connected to it; what is left must be
    ``SURROUND_SIDE`` pixels inside the picture on some side, and its own outer ring mostly
    (``RING_SHARE``) of a paper lighter than the surround. None otherwise (most figures: their
    ring is their paper, and nothing on the page is lighter). Edge lines mostly of the
    surround's grey are the surround's (a JPEG rings along the page's edge); ``resampled``: the
    pixels were decoded at a reduced scale, and edge lines that blend the paper with the
    surround are left out too (``_unblended``)."""
    h, w = grey.shape
    if min(h, w) <= 4 * RING:
        return None
    ring = _ring(grey)
    level = int(np.median(ring))
    if np.count_nonzero(np.abs(ring.astype(np.int16) - level) <= PAPER_SPREAD) < SURROUND_SHARE * ring.size:
        return None
    if np.count_nonzero(grey > level + PAPER_SPREAD) < PAPER_SHARE * grey.size:
        return None
    cv2 = _cv2()
    near = (np.abs(grey.astype(np.int16) - level) <= PAPER_SPREAD).view(np.uint8)
    _, labels = cv2.connectedComponents(np.ascontiguousarray(near), connectivity=4)
    outer = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    inside = ~np.isin(labels, outer[outer > 0])
    rows, cols = np.flatnonzero(inside.sum(axis=1) > SPECK), np.flatnonzero(inside.sum(axis=0) > SPECK)
    if not rows.size or not cols.size:
        return None
    x0, y0, x1, y1 = int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1
    # an edge line mostly of the surround's grey is the surround: a JPEG's ringing along the
    # page's edge leaves more than a speck of other greys in it
    while x1 - x0 > 4 * RING and y1 - y0 > 4 * RING:
        if 2 * np.count_nonzero(near[y0, x0:x1]) > x1 - x0:
            y0 += 1
        elif 2 * np.count_nonzero(near[y1 - 1, x0:x1]) > x1 - x0:
            y1 -= 1
        elif 2 * np.count_nonzero(near[y0:y1, x0]) > y1 - y0:
            x0 += 1
        elif 2 * np.count_nonzero(near[y0:y1, x1 - 1]) > y1 - y0:
            x1 -= 1
        else:
            break
    if min(x1 - x0, y1 - y0) <= 4 * RING:
        return None
    paper = _page_paper(grey[y0:y1, x0:x1], level)
    if paper is None:
        return None
    if resampled:
        x0, y0, x1, y1 = _unblended(grey, (x0, y0, x1, y1), level, paper)
        if min(x1 - x0, y1 - y0) <= 4 * RING or _page_paper(grey[y0:y1, x0:x1], level) is None:
            return None
    if max(x0, y0, w - x1, h - y1) < SURROUND_SIDE:
        return None
    return x0, y0, x1, y1


def _unblended(grey: np.ndarray, box: tuple[int, int, int, int], level: int, paper: int) -> tuple[int, int, int, int]:
    """A page's box without the edge lines that are a blend of its paper with the surround:
    mostly of greys between the two, with paper inside them. A picture decoded at a reduced
    scale (a JPEG's draft) blends a page's edge that falls between two of its pixels; the
    picture's own pixels are left as they are (a page may have lines of its own at its edge)."""
    x0, y0, x1, y1 = box

    def blend(edge: tuple, inside: tuple) -> int:
        """1 if the edge line is such a blend, else 0."""
        line, within = grey[edge], grey[inside].astype(np.int16)
        between = np.count_nonzero((line > level + PAPER_SPREAD) & (line < paper - PAPER_SPREAD))
        on_paper = np.count_nonzero(np.abs(within - paper) <= PAPER_SPREAD)
        return int(2 * between > line.size and 2 * on_paper > line.size)

    across, down = slice(x0, x1), slice(y0, y1)
    y0, y1 = y0 + blend((y0, across), (y0 + 1, across)), y1 - blend((y1 - 1, across), (y1 - 2, across))
    x0, x1 = x0 + blend((down, x0), (down, x0 + 1)), x1 - blend((down, x1 - 1), (down, x1 - 2))
    return x0, y0, x1, y1


def _page_paper(page: np.ndarray, level: int) -> int | None:
    """The paper of a page in a surround of grey ``level``: the page's most common grey lighter
    than the surround, when ``RING_SHARE`` of the page's ring is lighter than the surround too (a
    frame line drawn at the page's edge, or a blend of the paper with the surround, may hold as
    much of the ring as the paper; a drawing on a dark field has that field around it); None
    otherwise."""
    lighter = _smoothed(np.bincount(page.ravel(), minlength=256).astype(np.float64))
    lighter[:min(256, level + PAPER_SPREAD + 1)] = 0
    paper = int(np.argmax(lighter))
    page_ring = _ring(page)
    if paper <= level + PAPER_SPREAD or np.count_nonzero(page_ring > level + PAPER_SPREAD) < RING_SHARE * page_ring.size:
        return None
    return paper


def _smoothed(histogram: np.ndarray) -> np.ndarray:
    """A grey histogram averaged over 5 levels: its peak is the paper's level, not a lone grey."""
    return np.convolve(histogram, np.ones(5) / 5, mode="same")


def _border_paper(grey: np.ndarray, histogram: np.ndarray, smooth: np.ndarray, paper: int) -> int | None:
    """The grey of the paper around a drawing where it is not the most common grey: the most
    common grey of the picture's outer ring of ``RING`` pixels, when the most common grey
    (``paper``) barely reaches that ring (under ``RING_SHARE`` of it) and the ring's grey is a
    paper of the page too (``PAPER_SHARE`` of its pixels within ``PAPER_SPREAD`` greys); None
    otherwise. A flat fill may cover more of the page than its paper (a grid of red cells on a
    page in a gradient), and another copy of the figure with more page around it reads the
    page as paper."""
    if min(grey.shape) <= 2 * RING:
        return None
    ring = _ring(grey)
    around = np.bincount(ring, minlength=256).astype(np.float64)
    border = int(np.argmax(_smoothed(around)))
    if abs(border - paper) <= PAPER_SPREAD:
        return None
    low, high = max(0, border - PAPER_SPREAD), min(256, border + PAPER_SPREAD + 1)
    if histogram[low:high].sum() < PAPER_SHARE * histogram.sum():
        return None
    if around[max(0, paper - PAPER_SPREAD):paper + PAPER_SPREAD + 1].sum() >= RING_SHARE * around.sum():
        return None
    return low + int(np.argmax(smooth[low:high]))


def _ink_level(histogram: np.ndarray, paper: float, dark_paper: bool) -> tuple[np.ndarray | None, float]:
    """(inkness of each grey level, the ink level) of a picture whose paper is the grey ``paper``,
    its ink darker than it (lighter on ``dark_paper``); the inkness is None where the ink level
    is under ``MIN_CONTRAST`` (a blank picture)."""
    # what each grey level reads (float32, as on the pixels): the pixels' values are these,
    # looked up by their grey, and their statistics those of the histogram
    greys = np.arange(256, dtype=np.float32)
    signed = (greys - paper) if dark_paper else (paper - greys)
    present = histogram > 0
    # the ink level among the pixels clearly off the paper: it does not move with how much of
    # the page is paper (a copy cut to its ink, or given wider margins)
    darkest = float(signed[present].max())
    strong = present & (signed >= max(MIN_CONTRAST, 0.3 * darkest))
    strong = np.repeat(signed[strong], histogram[strong].astype(np.int64))  # those pixels' values
    ink_level = float(np.percentile(strong, 90)) if strong.size else darkest
    if ink_level < MIN_CONTRAST:
        return None, ink_level
    # of each grey level; ink darker than the ink level reads above 1 (a label on a dark fill)
    return np.maximum(signed / ink_level, 0.0).astype(np.float32), ink_level


def _read_ink(grey: np.ndarray, rgb: np.ndarray, inkness: np.ndarray | None, contrast: float, exact: bytes,
              dark_paper: bool) -> InkPicture:
    """The ink of a picture read with ``inkness`` (``_ink_level``), cropped to its box."""
    # grey strokes near the ink level count for the box
    found = None if inkness is None else _ink_box(_levels_where(grey, inkness >= NEAR_LEVEL))
    if found is None:
        return InkPicture(_blank().inkness, 0, contrast, exact, dark_paper=dark_paper)
    return _cropped(grey, rgb, inkness, contrast, found, exact, dark_paper)


def _cropped(grey: np.ndarray, rgb: np.ndarray, inkness: np.ndarray, contrast: float,
             found: tuple[int, int, int, int], exact: bytes, dark_paper: bool) -> InkPicture:
    """The ink of a picture read with ``inkness``, cropped to the box ``found`` (x0, y0, x1, y1)
    and scaled to the working size."""
    cv2 = _cv2()
    x0, y0, x1, y1 = found
    box_grey = np.ascontiguousarray(grey[y0:y1, x0:x1])
    box = cv2.LUT(box_grey, inkness)
    scale = _working_scale(*box.shape)
    canvas = _scaled_canvas(box, scale, MARGIN)
    box_rgb = rgb[y0:y1, x0:x1]
    ink_mask = _levels_where(box_grey, inkness >= INK_LEVEL).view(bool)
    chroma = None
    # a picture whose ink is (nearly) all grey is grey: tinted paper or a grey copy has no colours
    if ink_mask.any():
        ink_colour = _minus_grey(box_rgb[ink_mask].astype(np.float32))
        if (np.abs(ink_colour).max(axis=1) > COLOURFUL).mean() > COLOURED_INK:
            colour = _minus_grey(box_rgb.astype(np.float32))
            # blurred when a comparison first reads it (``_chroma``): most never do
            chroma = _scaled_canvas(colour, scale, MARGIN)
    return InkPicture(canvas, int((canvas >= INK_LEVEL).sum()), contrast, exact, float(scale), chroma,
                      dark_paper=dark_paper, box=found, table=inkness)


def _working_scale(height: int, width: int) -> float:
    """The scale of an ink box of ``height`` x ``width`` pixels to the working size: WORK_SIDE²
    pixels whatever its shape (a wide strip of panels keeps its labels legible), its longer side
    at most MAX_ASPECT times WORK_SIDE."""
    return min(WORK_SIDE / np.sqrt(height * width), MAX_ASPECT * WORK_SIDE / max(height, width))


def _scaled_canvas(box: np.ndarray, scale: float, margin: int) -> np.ndarray:
    """``box`` (float32, grey or with channels) scaled by ``scale``, with ``margin`` pixels of
    paper (zeros) around it."""
    cv2 = _cv2()
    size = (max(1, round(box.shape[1] * scale)), max(1, round(box.shape[0] * scale)))
    canvas = np.zeros((size[1] + 2 * margin, size[0] + 2 * margin, *box.shape[2:]), np.float32)
    canvas[margin:margin + size[1], margin:margin + size[0]] = cv2.resize(
        box, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    return canvas


def _levels_where(grey: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Where a picture's grey levels hold in ``table`` (a boolean of each level), as uint8 0/1."""
    return _cv2().LUT(grey, table.astype(np.uint8))


def _ink_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) of a mask's pixels (uint8 0/1), specks of fewer than ``SPECK`` pixels
    left out; None where there are none."""
    cv2 = _cv2()
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    kept = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= SPECK) + 1
    if not len(kept):
        return None
    return (int(stats[kept, cv2.CC_STAT_LEFT].min()), int(stats[kept, cv2.CC_STAT_TOP].min()),
            int((stats[kept, cv2.CC_STAT_LEFT] + stats[kept, cv2.CC_STAT_WIDTH]).max()),
            int((stats[kept, cv2.CC_STAT_TOP] + stats[kept, cv2.CC_STAT_HEIGHT]).max()))


def _faint_box(grey: np.ndarray, inkness: np.ndarray,
               box: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """The box of a picture's faint ink where it is another crop than ``box``, that of its ink
    (``_other_box``); None otherwise. Its components are only labelled where some faint ink lies
    beyond ``box`` by ``BOX_MOVED`` of the page (the box of faint ink holds that of ink)."""
    cv2 = _cv2()
    height, width = grey.shape
    x0, x1 = max(0, int(box[0] - BOX_MOVED * width)), min(width, int(np.ceil(box[2] + BOX_MOVED * width)))
    y0, y1 = max(0, int(box[1] - BOX_MOVED * height)), min(height, int(np.ceil(box[3] + BOX_MOVED * height)))
    mask = _levels_where(grey, inkness >= FAINT_BOX)
    if cv2.countNonZero(mask) == cv2.countNonZero(mask[y0:y1, x0:x1]):
        return None
    wider = _ink_box(mask)
    return wider if wider is not None and _other_box(box, wider, grey.shape) else None


def _other_box(box: tuple[int, int, int, int], wider: tuple[int, int, int, int], shape: tuple[int, int]) -> bool:
    """Whether the box of a picture's faint ink is another crop than that of its ink: a side
    ``BOX_MOVED`` of the page away, and under ``PAGE_BOX`` of the page (the faint ink is not
    the page's own shading)."""
    height, width = shape
    moved = max(abs(box[0] - wider[0]) / width, abs(box[2] - wider[2]) / width,
                abs(box[1] - wider[1]) / height, abs(box[3] - wider[3]) / height)
    area = (wider[2] - wider[0]) * (wider[3] - wider[1]) / (height * width)
    return moved > BOX_MOVED and area < PAGE_BOX


def _minus_grey(colour: np.ndarray) -> np.ndarray:
    """``colour - colour.mean(axis=-1, keepdims=True)`` of float32 RGB channels holding whole
    numbers (0..255), in place and bit for bit without NumPy's slow reduction over a short axis:
    the channels' float32 sum is exact in any order, and one float32 division by 3 rounds it as
    the mean does (so for every sum 0..765)."""
    grey = colour[..., 0] + colour[..., 1]
    grey += colour[..., 2]
    grey /= np.float32(3)
    colour -= grey[..., None]
    return colour


def _chroma(picture: InkPicture) -> np.ndarray:
    """A coloured picture's colours as compared: its ``chroma`` blurred by ``COLOUR_BLUR`` (inside
    the margin), made once per picture."""
    found = picture.surroundings.get("chroma")
    if found is None:
        cv2 = _cv2()
        height, width = picture.chroma.shape[0] - 2 * MARGIN, picture.chroma.shape[1] - 2 * MARGIN
        found = np.zeros_like(picture.chroma)
        found[MARGIN:MARGIN + height, MARGIN:MARGIN + width] = cv2.GaussianBlur(
            np.ascontiguousarray(picture.chroma[MARGIN:MARGIN + height, MARGIN:MARGIN + width]), (0, 0), COLOUR_BLUR)
        picture.surroundings["chroma"] = found
    return found


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
    found = _ecc_affine(f, m, warp, steps, 1e-4)
    if found is None:
        return None
    rho, warp = found
    warp[:, 2] /= factor
    return warp, rho


def _ecc_affine(template: np.ndarray, image: np.ndarray, warp: np.ndarray, steps: int,
                eps: float) -> tuple[float, np.ndarray] | None:
    """(correlation, warp) by the enhanced correlation coefficient (Evangelidis and Psarakis,
    2008): OpenCV's ``findTransformECC`` for ``MOTION_AFFINE`` without masks, step for step (the
    same warps to 1e-2 pixel on real pairs), in NumPy at under a quarter of its time (on 150 of
    the paper-scale bench's alignments: 0.58 s CPU against OpenCV 4.13's 2.57 s). None where
    OpenCV raises (no overlap, no convergence)."""
    cv2 = _cv2()

    height, width = template.shape
    image = np.ascontiguousarray(image, np.float32)
    template = np.ascontiguousarray(template, np.float32)
    dx = np.array([[-0.5, 0.0, 0.5]], np.float32)
    # the picture and its gradients warped at once, as one three-channel picture: OpenCV
    # interpolates each channel as it would alone (the same values)
    stacked = cv2.merge([image, cv2.filter2D(image, -1, dx), cv2.filter2D(image, -1, dx.T)])
    ones = np.ones(image.shape, np.uint8)
    xs = np.broadcast_to(np.arange(width, dtype=np.float32), (height, width))
    ys = np.broadcast_to(np.arange(height, dtype=np.float32)[:, None], (height, width))
    linear, nearest = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP
    # one buffer of float64 rows: 0-5 the Jacobian (products in float32, as NumPy makes them, then
    # widened), 6 the warped picture less its mean, 7 the template less its mean; their products
    # (Hessian, projections and correlation) are one symmetric product, 8 x 8
    rows = np.empty((8, height * width), np.float64)
    planes = rows.reshape(8, height, width)
    last_mask = None
    warp = warp.astype(np.float32)
    rho, last_rho = -1.0, -eps
    step = 1
    while step <= steps and abs(rho - last_rho) >= eps:
        moved = cv2.warpAffine(stacked, warp, (width, height), flags=linear)
        warped, gx, gy = moved[..., 0], moved[..., 1], moved[..., 2]
        mask = cv2.warpAffine(ones, warp, (width, height), flags=nearest).view(bool)
        count = int(np.count_nonzero(mask))
        if not count:
            return None
        image_mean, image_std = _mean_std(warped[mask])
        if last_mask is None or not np.array_equal(mask, last_mask):  # the template's part seen
            template_mean, template_std = _mean_std(template[mask])
            planes[7] = np.where(mask, template - np.float32(template_mean), np.float32(0))
            last_mask = mask
        planes[6] = np.where(mask, warped - np.float32(image_mean), warped)
        image_norm, template_norm = np.sqrt(count) * image_std, np.sqrt(count) * template_std
        for row, (gradient, coordinate) in enumerate(((gx, xs), (gy, xs), (gx, ys), (gy, ys))):
            np.multiply(gradient, coordinate, out=planes[row], dtype=np.float32, casting="unsafe")
        planes[4], planes[5] = gx, gy
        # OpenCV's product, on its one thread: NumPy's would run on every core of BLAS
        products = cv2.mulTransposed(rows, False)
        hessian, image_projection, template_projection = products[:6, :6], products[:6, 6], products[:6, 7]
        try:
            hessian_inv = np.linalg.inv(hessian)
        except np.linalg.LinAlgError:
            return None
        correlation = float(products[7, 6])
        if not image_norm * template_norm > 0:  # a flat picture: no correlation to climb (NaN in OpenCV)
            return None
        last_rho, rho = rho, correlation / (image_norm * template_norm)
        if not np.isfinite(rho):
            return None
        projected = hessian_inv @ image_projection
        lambda_d = correlation - template_projection @ projected
        if lambda_d <= 0.0:  # the correlation would be minimized: uncorrelated pictures
            return None
        lambda_n = image_norm * image_norm - image_projection @ projected
        # the Jacobian's projection of (lambda_n / lambda_d) template - picture, by linearity
        delta = hessian_inv @ ((lambda_n / lambda_d) * template_projection - image_projection)
        warp[0, 0] += delta[0]
        warp[1, 0] += delta[1]
        warp[0, 1] += delta[2]
        warp[1, 1] += delta[3]
        warp[0, 2] += delta[4]
        warp[1, 2] += delta[5]
        step += 1
    return rho, warp


def _mean_std(x: np.ndarray) -> tuple[float, float]:
    """``x.mean(dtype=np.float64)`` and ``x.std(dtype=np.float64)`` of a 1-D array, the sum
    made once: ``std`` is given the mean as it computes it (the same sum over the count)."""
    mean = np.add.reduce(x, dtype=np.float64, keepdims=True) / x.size
    return float(mean[0]), float(x.std(dtype=np.float64, mean=mean))


def _trusted(warp: np.ndarray, stretch_limit: float) -> bool:
    """Whether an alignment is one a copy can need: a small turn, shift and scale, and a scale
    that is (nearly) the same both ways. Re-encoding, resizing and re-scanning keep a drawing's
    shape; a warp that stretches it turns a square into an oblong and changes its angles (the
    demo's two bar magnets, 110 x 46 and 100 x 53 px: stretched 0.22 one way over the other)."""
    linear = warp[:, :2].astype(np.float64)
    singular = np.linalg.svd(linear, compute_uv=False)
    turn = np.degrees(np.arctan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1]))
    stretch = float(np.log(singular[0] / singular[1])) if singular[1] > 0 else np.inf
    return bool(np.all(np.abs(singular - 1.0) <= MAX_WARP_SCALE) and abs(turn) <= MAX_WARP_TURN
                and stretch <= stretch_limit)


def _stretch_limit(a: InkPicture, b: InkPicture) -> float:
    """How much an alignment of ``a`` and ``b`` may stretch one way more than the other:
    ``MAX_WARP_STRETCH``, and what a resize's rounding of each side to whole pixels can add (a
    pixel over the shortest side of the two ink boxes, in decoded pixels: half a pixel at each
    end; a copy of a 20 px strip resized to 70% comes out up to 0.04 stretched). Measured on
    the copies of bench/ink_verdict.py (seeds 0 and 1, --filled, --small): at most 0.022.
    Every picture with ink has its box; one without adds no rounding."""
    sides = [side for picture in (a, b) if picture.box is not None
             for side in (picture.box[2] - picture.box[0], picture.box[3] - picture.box[1])]
    return MAX_WARP_STRETCH + (1.0 / max(1, min(sides)) if sides else 0.0)


@functools.lru_cache(maxsize=None)
def _disc(radius: int) -> np.ndarray:
    cv2 = _cv2()
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1,) * 2)


def _paper(canvas: np.ndarray, level: float) -> np.ndarray:
    """Where a canvas's paper (``1 - canvas``) reaches ``level`` (0.25 or 0.5), as uint8 0/1:
    ``canvas <= 1 - level``, exactly what ``(1.0 - canvas) >= level`` reads in float32 (a canvas
    above 1 - level >= 0.5 loses nothing in 1 - canvas, and rounding never crosses ``level``),
    without the subtracted canvas."""
    return (canvas <= 1.0 - level).view(np.uint8)


def _surroundings(canvas: np.ndarray, paper: bool = False) -> tuple[np.ndarray, ...]:
    """(peak, around, floor) of a canvas's ink: the most ink within ``TOLERANCE`` of each pixel,
    where there is a trace of ink within ``APART`` (0/1), and the least ink within ``APART``, as
    uint8 (peak and floor in steps of ``1 / STEPS`` of inkness, ``_steps``). Of its paper
    (``paper``): (where the other's paper finds paper within ``TOLERANCE``, 0/1, None): paper is
    judged by its clusters alone (``holes``)."""
    cv2 = _cv2()
    if paper:
        return cv2.dilate(_paper(canvas, NEAR_LEVEL), _disc(TOLERANCE)), None
    steps = _steps(canvas)
    around = cv2.dilate((canvas >= TRACE_LEVEL).view(np.uint8), _disc(APART))
    return cv2.dilate(steps, _disc(TOLERANCE)), around, cv2.erode(steps, _disc(APART))


def _steps(canvas: np.ndarray) -> np.ndarray:
    """A canvas's inkness in whole steps of ``1 / STEPS`` (rounded down, up to 255 steps), uint8:
    a step count reaches ``NEAR_LEVEL * STEPS`` exactly where the inkness reaches ``NEAR_LEVEL``,
    and the most or least of them around a pixel is that of the inkness, rounded down."""
    out = np.minimum(canvas, np.float32(255 / STEPS))
    out *= np.float32(STEPS)
    return out.astype(np.uint8)


def _missing(strong: np.ndarray, canvas: np.ndarray, peak: np.ndarray, floor: np.ndarray,
             faint: np.ndarray | None = None) -> np.ndarray:
    """A canvas's ink that finds no ink of the other within ``TOLERANCE``, as uint8 0/1: its
    strong ink (``strong``, 0/1) where the other's ``peak`` there does not reach ``NEAR_LEVEL``;
    and, where the other is a fill (its ``floor``, the least ink within ``APART``, reaches
    ``TRACE_LEVEL``), its ink (strong, or ``faint``) darker than that floor by ``MARK`` where the
    other's ink does not rise ``RISE`` of the way from its floor to this ink. A copy's line,
    blurred or faded, still rises from its fill; a label written on a fill of a lighter grey
    finds the other's fill flat, however thin and faint its strokes became at the working size."""
    near = NEAR_LEVEL * STEPS
    found = peak >= near
    missing = np.greater(strong, found)
    on_fill = (strong if faint is None else faint).view(bool) & ~missing.view(bool)
    on_fill &= floor >= np.uint8(np.ceil(TRACE_LEVEL * STEPS))
    if on_fill.any():
        at = np.flatnonzero(on_fill)
        low = floor.ravel()[at].astype(np.float32)
        rise = canvas.ravel()[at] * np.float32(STEPS) - low
        short = (rise >= np.float32(MARK * STEPS)) & (peak.ravel()[at] < low + np.float32(RISE) * rise)
        missing.ravel()[at[short]] = True
    return missing.view(np.uint8)


def _surroundings_of(picture: InkPicture, shape: tuple[int, int], paper: bool) -> tuple[np.ndarray | None, ...]:
    """``_surroundings`` of a picture's canvas padded to ``shape``, made once per picture: the
    canvas keeps ``MARGIN`` (> ``APART``) pixels of bare paper, so dilating before padding gives
    what dilating after does (the padding is paper)."""
    found = picture.surroundings.get(paper)
    if found is None:
        found = picture.surroundings[paper] = _surroundings(picture.inkness, paper)
    if found[0].shape == shape:
        return found
    padded = []
    for mask in found:
        if mask is None:
            padded.append(None)
            continue
        out = np.full(shape, 1 if paper else 0, mask.dtype)
        out[:mask.shape[0], :mask.shape[1]] = mask
        padded.append(out)
    return tuple(padded)


def _levels(canvas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(strong ink, faint ink, paper as ink) of a canvas, uint8 0/1: what ``_unmatched`` reads of
    it (``canvas >= INK_LEVEL``, ``canvas >= FAINT_APART``, ``1 - canvas >= INK_LEVEL``)."""
    return (canvas >= INK_LEVEL).view(np.uint8), (canvas >= FAINT_APART).view(np.uint8), _paper(canvas, INK_LEVEL)


def _unmatched(missing: np.ndarray, faint: np.ndarray | None = None,
               around: np.ndarray | None = None, thick: int = 0) -> tuple[int, int, int]:
    """(unmatched ink of one canvas, that of its largest cluster, the most of a cluster's that
    lies apart from all of the other's ink), in pixels of full ink. ``missing``: its strong ink
    that the other's does not match (uint8 0/1, ``_missing``); ``faint``: its faint ink, which
    counts too on the other's bare paper (``around`` 0: a drawing in thin grey lines where the
    other has none); None: it does not. ``around`` None: no apart (0). ``thick`` > 0: only the
    unmatched ink that holds a disc of that radius counts (a morphological opening)."""
    cv2 = _cv2()

    extra = missing.view(bool)
    if faint is not None:
        extra = extra.copy()
        extra |= np.greater(faint, around)
    if thick:
        extra = cv2.morphologyEx(extra.view(np.uint8), cv2.MORPH_OPEN, _disc(thick)).view(bool)
    total = int(np.count_nonzero(extra))
    if not total:
        return 0, 0, 0
    extra = extra.view(np.uint8)
    # the clusters of the unmatched ink's box (with room for the gap): the same as on the canvas
    x, y, w, h = cv2.boundingRect(extra)
    x0, y0 = max(0, x - CLUSTER_GAP), max(0, y - CLUSTER_GAP)
    x1, y1 = min(extra.shape[1], x + w + CLUSTER_GAP), min(extra.shape[0], y + h + CLUSTER_GAP)
    extra = extra[y0:y1, x0:x1]
    count, labels = cv2.connectedComponents(cv2.dilate(extra, _disc(CLUSTER_GAP)), connectivity=8)
    mass = np.bincount(labels[extra.view(bool)], minlength=count)
    if around is None:
        return total, int(mass[1:].max(initial=0)), 0
    apart = np.bincount(labels[np.greater(extra, around[y0:y1, x0:x1])], minlength=count)
    return total, int(mass[1:].max(initial=0)), int(apart[1:].max(initial=0))


def _outside(picture: InkPicture, warp: np.ndarray, shape: tuple[int, int]) -> int:
    """Ink pixels of ``picture`` (the moving one) that the warp (fixed -> moving) places outside
    the fixed canvas by more than its margin and ``TOLERANCE``: ink the comparison on that canvas
    would never see."""
    points = picture.surroundings.get("ink")
    if points is None:  # the ink's coordinates (as float64), once per picture
        ys, xs = np.nonzero(picture.inkness >= INK_LEVEL)
        points = picture.surroundings["ink"] = (xs.astype(np.float64), ys.astype(np.float64))
    xs, ys = points
    if not len(xs):
        return 0
    (p, q), (r, t) = warp[:, :2].astype(np.float64)
    determinant = p * t - q * r
    dx, dy = xs - float(warp[0, 2]), ys - float(warp[1, 2])
    first, second = (t * dx - q * dy) / determinant, (p * dy - r * dx) / determinant
    height, width = shape
    slack = MARGIN + TOLERANCE
    out = (first < -slack) | (first > width - 1 + slack) | (second < -slack) | (second > height - 1 + slack)
    return int(np.count_nonzero(out))


def _recoloured(a: InkPicture, b: InkPicture, fixed: np.ndarray, warp: np.ndarray,
                moved_ink: np.ndarray | None = None) -> float | None:
    """The share of the ink both pictures have where one is coloured and their colours differ,
    once aligned; None when either picture is grey (a grey copy of a coloured figure is a copy).
    ``moved_ink``: ``b``'s canvas already warped so, when known."""
    cv2 = _cv2()

    if a.chroma is None or b.chroma is None:
        return None
    height, width = fixed.shape
    second = np.zeros((height, width, 3), np.float32)
    second[:b.chroma.shape[0], :b.chroma.shape[1]] = _chroma(b)
    second = cv2.warpAffine(second, warp, (width, height), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    if moved_ink is None:
        moved_ink = cv2.warpAffine(_padded(b.inkness, fixed.shape), warp, (width, height),
                                   flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    # only the pixels where both have ink count: read the colours there alone (``a``'s canvas
    # holds all of ``fixed``'s ink, its padding none)
    both = np.nonzero((fixed >= INK_LEVEL) & (moved_ink >= INK_LEVEL))
    first, second = _chroma(a)[both], second[both]
    coloured = (_channel_max(np.abs(first)) > COLOURFUL) | (_channel_max(np.abs(second)) > COLOURFUL)
    if coloured.sum() < LABEL_INK:
        return None
    differs = _channel_max(np.abs(first - second)) > COLOUR_CHANGE
    return round(float((differs & coloured).sum() / coloured.sum()), 3)


def _channel_max(x: np.ndarray) -> np.ndarray:
    """``x.max(axis=-1)`` of an (..., 3) array, without NumPy's slow reduction over a short axis."""
    return np.maximum(np.maximum(x[..., 0], x[..., 1]), x[..., 2])


def _padded(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    if x.shape == shape:
        return x
    out = np.zeros(shape, np.float32)
    out[:x.shape[0], :x.shape[1]] = x
    return out


@dataclass(frozen=True)
class _Judgement:
    """What judging one alignment read: ``score`` (clusters in units of the limits, then all
    unmatched ink), the warp and ECC's correlation (None: as they lie), the unmatched ink of
    each side, and the canvases compared."""

    score: tuple[float, int]
    warp: np.ndarray
    rho: float | None
    extra_a: int
    cluster_a: int
    apart_a: int
    extra_b: int
    cluster_b: int
    apart_b: int
    holes: int
    fixed: np.ndarray
    moved: np.ndarray


def _judge(a: InkPicture, fixed: np.ndarray, fixed_levels: tuple, b: InkPicture, moving: np.ndarray,
           warp: np.ndarray, rho: float | None, thick: int = 0) -> _Judgement:
    """``b`` (its canvas padded: ``moving``) warped onto ``a`` (``fixed``, its ``_levels``) and
    their ink compared; ``thick``: only unmatched ink that holds a disc of that radius counts."""
    cv2 = _cv2()
    fixed_ink, fixed_paper = _surroundings_of(a, fixed.shape, False), _surroundings_of(a, fixed.shape, True)
    fixed_strong, fixed_faint, fixed_hole = fixed_levels
    if rho is None:  # as they lie: both pictures' surroundings are known
        moved = moving
        moved_ink, moved_paper = _surroundings_of(b, fixed.shape, False), _surroundings_of(b, fixed.shape, True)
    else:
        moved = cv2.warpAffine(moving, warp, fixed.shape[::-1], flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
        moved_ink, moved_paper = _surroundings(moved), _surroundings(moved, paper=True)
    moved_strong, moved_faint, moved_hole = _levels(moved)
    extra_a, cluster_a, apart_a = _unmatched(_missing(fixed_strong, fixed, moved_ink[0], moved_ink[2], fixed_faint),
                                             fixed_faint, moved_ink[1], thick)
    extra_b, cluster_b, apart_b = _unmatched(_missing(moved_strong, moved, fixed_ink[0], fixed_ink[2], moved_faint),
                                             moved_faint, fixed_ink[1], thick)
    # paper where the other has ink all around: a letter or mark cut out of a filled shape
    _, holes_a, _ = _unmatched(np.greater(fixed_hole, moved_paper[0]).view(np.uint8))
    _, holes_b, _ = _unmatched(np.greater(moved_hole, fixed_paper[0]).view(np.uint8))
    # ink the warp moves off the canvas lies apart from all of the other's ink (a label at an
    # edge); as they lie, on one canvas, none is
    outside = 0 if rho is None else _outside(b, warp, fixed.shape)
    extra_b += outside
    apart_b = max(apart_b, outside)
    # in units of the decision: a cluster of LABEL_INK, or one with its side's apart limit
    score = (max(max(cluster_a, cluster_b, holes_a, holes_b) / LABEL_INK,
                 apart_a / _apart_limit(a), apart_b / _apart_limit(b)),
             extra_a + extra_b)
    return _Judgement(score, warp, rho, extra_a, cluster_a, apart_a, extra_b, cluster_b, apart_b,
                      max(holes_a, holes_b), fixed, moved)


def _apart_limit(picture: InkPicture) -> float:
    """Working pixels of one cluster on the other's bare paper from which ``picture`` shows a mark
    the other lacks: ``APART_INK`` of its own pixels where the working size shrank it (a 6-pixel
    "60°" in an 866-pixel figure is 7 working pixels), never under ``APART_FLOOR``. Copies leave
    no ink on bare paper: JPEG's and a scanner's specks lie next to strokes or are single pixels."""
    return max(float(APART_FLOOR), APART_INK * min(1.0, picture.pixel) ** 2)


def _darkened(canvas: np.ndarray, gain: float) -> np.ndarray:
    """A canvas read at an ink level ``gain`` (>= 1) times lower: its inkness times ``gain``,
    exactly what normalizing it at that level gives."""
    return canvas * np.float32(gain)


def _alone(canvas: np.ndarray, picture: InkPicture, pixel: float = 1.0) -> InkPicture:
    """A picture of this canvas alone (its surroundings made for this pair), read as ``picture``,
    one of its own pixels spanning ``pixel`` of the canvas's."""
    return InkPicture(canvas, int((canvas >= INK_LEVEL).sum()), picture.contrast, picture.exact, pixel)


def _blobs_unmatched(canvas: np.ndarray, other: np.ndarray) -> int:
    """The largest cluster of a canvas's blobs (ink that holds a disc of ``BLOB`` pixels) that
    finds no blob of the other (ink that holds a disc of ``BLOB - 1`` pixels, at ``NEAR_LEVEL``)
    within ``TOLERANCE``: a dot or a filled mark where the other has at most a thin line."""
    cv2 = _cv2()
    blobs = cv2.morphologyEx((canvas >= INK_LEVEL).view(np.uint8), cv2.MORPH_OPEN, _disc(BLOB))
    if not blobs.any():
        return 0
    support = cv2.morphologyEx((other >= NEAR_LEVEL).view(np.uint8), cv2.MORPH_OPEN, _disc(BLOB - 1))
    missing = np.greater(blobs, cv2.dilate(support, _disc(TOLERANCE)))
    return _unmatched(missing.view(np.uint8))[1]


def _second_look(a: InkPicture, b: InkPicture, fixed: np.ndarray, moving: np.ndarray,
                 best: _Judgement) -> tuple[_Judgement, dict] | None:
    """``best``'s alignment judged again as the two pictures can still agree, and what was
    changed; None when nothing would be. Two things a copy of a small figure cannot keep:

    - its ink level: a figure's ink level is its darkest ink's; resizing or re-scanning a small
      figure greys its thin black lines while its filled areas keep their grey, so the copy's
      fills read darker and cross the ink threshold where the original's do not. Both are read
      at the lower level (when the levels differ by ``LEVELS_ALIKE`` to ``LEVELS_APART``);
    - its detail: where a picture's own pixel spans more than ``SOURCE_PIXEL`` working pixels, an
      edge it resampled is off by a fraction of that pixel, more than ``TOLERANCE``, and the
      clusters' limits are smaller than that pixel. Both canvases are shrunk so that the coarser
      picture's pixel spans ``SOURCE_PIXEL`` working pixels, unless the two are of one grid
      (``_one_grid``), where nothing was resampled. What no resampling explains still
      counts against the shrunk look's limits, as a cluster: ink left unmatched at the working
      size (at the common level) that holds a disc of more than one of the coarser picture's
      pixels (a dot moved to the next tick: ``changed["thick"]``), and a blob of one where the
      other has at most a thin line (a switch drawn on a wire: ``changed["blobs"]``)."""
    cv2 = _cv2()
    changed = {}
    high, low = max(a.contrast, b.contrast), min(a.contrast, b.contrast)
    if low > 0 and LEVELS_ALIKE * low <= high <= LEVELS_APART * low:
        changed["levels"] = round(high / low, 3)
        if a.contrast > b.contrast:
            fixed = _darkened(fixed, high / low)
        else:
            moving = _darkened(moving, high / low)
    coarse = max(a.pixel, b.pixel)
    warp = best.warp
    at_working_size = fixed, moving
    if coarse > SOURCE_PIXEL and not _one_grid(a, b, warp, fixed.shape):
        factor = SOURCE_PIXEL / coarse
        size = (max(1, round(fixed.shape[1] * factor)), max(1, round(fixed.shape[0] * factor)))
        # shrunk, the canvases' margins of paper would be narrower than an alignment's shift and
        # the tolerance: the paper at their edge would read as holes in the other's ink. They
        # get MARGIN pixels of paper again, and the warp the same origin.
        border = ((MARGIN, MARGIN), (MARGIN, MARGIN))
        fixed = np.pad(cv2.resize(fixed, size, interpolation=cv2.INTER_AREA), border)
        moving = np.pad(cv2.resize(moving, size, interpolation=cv2.INTER_AREA), border)
        warp = warp.copy()
        warp[:, 2] *= np.float32(factor)
        warp[:, 2] += ((np.eye(2) - warp[:, :2].astype(np.float64)) @ np.full(2, float(MARGIN))).astype(np.float32)
        changed["pixel"] = round(coarse, 2)
    if not changed:
        return None
    # at the working size, apart ink is counted as there (``_apart_limit``); shrunk, by the limit
    pixels = (1.0, 1.0) if "pixel" in changed else (a.pixel, b.pixel)
    judged = _judge(_alone(fixed, a, pixels[0]), fixed, _levels(fixed), _alone(moving, b, pixels[1]), moving, warp,
                    best.rho)
    if "pixel" in changed and judged.score[0] < 1:
        # what the shrunk look forgave must be what resampling does: ink left unmatched at the
        # working size that is thicker than the coarser picture's pixel, or a blob where the
        # other has at most a thin line, is not
        blobs = max(_blobs_unmatched(judged.fixed, judged.moved), _blobs_unmatched(judged.moved, judged.fixed))
        fixed, moving = at_working_size
        thick = _judge(_alone(fixed, a), fixed, _levels(fixed), _alone(moving, b), moving, best.warp, best.rho,
                       thick=int(coarse) + 1)
        for name, cluster in (("blobs", blobs), ("thick", max(thick.cluster_a, thick.cluster_b))):
            if cluster:
                changed[name] = cluster
                judged = replace(judged, score=(max(judged.score[0], cluster / LABEL_INK), judged.score[1]))
    return replace(judged, warp=best.warp), changed


def _one_grid(a: InkPicture, b: InkPicture, warp: np.ndarray, shape: tuple[int, int]) -> bool:
    """Whether two pictures are of one grid: of one own pixel (within ``ONE_GRID_SCALE``), aligned
    by a shift, and their decoded pixels reading alike on ``ONE_GRID`` of their ink boxes
    (``_one_page``: a re-encode, other margins, a label added or changed). Nothing resampled one
    against the other, so their edges agree at the working size and the second look has no
    detail to forgive: shrunk, a 6-px 'cm' and 'in.' read alike."""
    if abs(np.log(a.pixel / b.pixel)) > ONE_GRID_SCALE or not _a_shift(warp, shape):
        return False
    page = _one_page(a, b)
    return page is not None and page[1] >= ONE_GRID


def _changed_ink(fixed: np.ndarray, moved: np.ndarray) -> int:
    """The most ink that both canvases have at one place (a cluster, ``CLUSTER_GAP``) and the
    other lacks there, each side's counted apart (the least of the two): strong ink that finds no
    ink of the other (at ``NEAR_LEVEL``) within ``FINE_TOLERANCE``, each ``FINE_TILE`` tile shifted
    by the whole pixels (at most ``FINE_REACH``) that leave its 3x3 tiles the least such ink.

    ``TOLERANCE`` absorbs what one alignment of the whole picture leaves, and so lets another
    label written at the same place pass ('45°' for '60°', 'cm' for 'in.': their strokes lie
    within 2 pixels of each other's). Aligned tile by tile, a copy's strokes lie within a pixel;
    where they do not (a re-scan's blur thickens them, a resize thins them), the ink left is one
    copy's alone. Another label leaves ink of each that the other lacks, at one place."""
    cv2 = _cv2()
    tile, reach = FINE_TILE, FINE_REACH
    h, w = fixed.shape
    rows, cols = -(-h // tile), -(-w // tile)

    def grid(mask: np.ndarray, pad: int = 0) -> np.ndarray:
        out = np.zeros((rows * tile + 2 * pad, cols * tile + 2 * pad), bool)
        out[pad:pad + h, pad:pad + w] = mask
        return out

    disc = _disc(FINE_TOLERANCE)
    fixed_strong, fixed_bare = grid(fixed >= INK_LEVEL), ~grid(cv2.dilate(fixed, disc) >= NEAR_LEVEL)
    moved_strong = grid(moved >= INK_LEVEL, reach)
    moved_bare = ~grid(cv2.dilate(moved, disc) >= NEAR_LEVEL, reach)
    shifts = sorted(((dy, dx) for dy in range(-reach, reach + 1) for dx in range(-reach, reach + 1)),
                    key=lambda s: (abs(s[0]) + abs(s[1]), s))  # a tie keeps the smaller shift

    def missing(dy: int, dx: int) -> tuple[np.ndarray, np.ndarray]:
        y, x = reach - dy, reach - dx
        window = (slice(y, y + rows * tile), slice(x, x + cols * tile))
        return fixed_strong & moved_bare[window], moved_strong[window] & fixed_bare

    least = choice = None
    for k, shift in enumerate(shifts):
        of_fixed, of_moved = missing(*shift)
        # each tile's mean, exact in float32 (a power of two of pixels), times its pixels
        mean = cv2.resize(np.bitwise_or(of_fixed, of_moved).view(np.uint8).astype(np.float32), (cols, rows),
                          interpolation=cv2.INTER_AREA)
        around = cv2.boxFilter(np.rint(mean * np.float32(tile * tile)), -1, (3, 3), normalize=False,
                               borderType=cv2.BORDER_CONSTANT)
        if least is None:
            least, choice = around, np.zeros((rows, cols), np.int32)
        else:
            choice[around < least] = k
            least = np.minimum(least, around)
    lacking_fixed = np.zeros((rows * tile, cols * tile), bool)
    lacking_moved = np.zeros_like(lacking_fixed)
    for k in np.unique(choice).tolist():
        chosen = np.repeat(np.repeat(choice == k, tile, axis=0), tile, axis=1)
        of_fixed, of_moved = missing(*shifts[k])  # again: cheaper than keeping every shift's masks
        lacking_fixed |= of_fixed & chosen
        lacking_moved |= of_moved & chosen
    of_fixed, of_moved = _per_cluster(lacking_fixed[:h, :w], lacking_moved[:h, :w])
    return int(np.minimum(of_fixed, of_moved).max(initial=0))


def _own_ink(fixed: np.ndarray, moved: np.ndarray) -> int:
    """The most pixels that one canvas has at one place (a cluster, ``CLUSTER_GAP``) reading
    ``DARKER`` than the other's same pixel: for canvases of one page at their decoded pixels,
    where a copy's pixels read alike (none such in 248 real figures' JPEG copies, quality 60-90)
    and the strokes of a label that the other lacks, or covers, are there to count."""
    return int(max(counts.max(initial=0) for counts in _per_cluster(fixed - moved >= DARKER, moved - fixed >= DARKER)))


def _per_cluster(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pixels of each of two masks in each cluster of their union (pixels within
    ``CLUSTER_GAP`` of each other), one count per cluster; empty where both are."""
    either = np.ascontiguousarray(first | second).view(np.uint8)
    if not either.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cv2 = _cv2()
    count, labels = cv2.connectedComponents(cv2.dilate(either, _disc(CLUSTER_GAP)), connectivity=8)
    return (np.bincount(labels[first], minlength=count)[1:], np.bincount(labels[second], minlength=count)[1:])


def _finer(picture: InkPicture, factor: float, margin: int) -> np.ndarray:
    """The picture's ink read again from its grey pixels as it was read, at ``factor`` times
    the working size, with ``margin`` pixels of paper."""
    x0, y0, x1, y1 = picture.box
    box = _cv2().LUT(np.ascontiguousarray(picture.grey[y0:y1, x0:x1]), picture.table)
    return _scaled_canvas(box, picture.pixel * factor, margin)


def _own_pixel_factor(a: InkPicture, b: InkPicture) -> float:
    """Times the working size at which the coarser of two pictures is at its own pixel, at most
    ``FINER_MOST``."""
    return min(FINER_MOST, 1.0 / max(a.pixel, b.pixel))


def _one_grid_factor(a: InkPicture, b: InkPicture) -> float:
    """The same for two pictures of one grid, at least ``ONE_GRID_FINER``: no resampling between
    them to forgive, finer than their own pixel still shows a digit's strokes that the working
    size blends ('3' / '5' 9 working pixels high)."""
    return max(_own_pixel_factor(a, b), ONE_GRID_FINER)


def _finer_look(a: InkPicture, b: InkPicture, warp: np.ndarray, rho: float | None,
                one_grid: bool = False) -> tuple[float, int] | None:
    """(factor, ``_changed_ink``) of two pictures that the working size shrank, read again from
    their grey pixels at the coarser one's own pixel (at most ``FINER_MOST`` times the working size)
    and aligned by ``warp``; None where that is not ``FINER_FROM`` times finer. A label of a few
    pixels in a large figure ('x = 3' / 'x = 5', 10 px high in a 1,476-px figure) is 4 working
    pixels high, too few for strokes of another digit to show."""
    factor = _one_grid_factor(a, b) if one_grid else _own_pixel_factor(a, b)
    if factor < FINER_FROM or a.grey is None or b.grey is None or a.box is None or b.box is None:
        return None
    cv2 = _cv2()
    margin = int(np.ceil(MARGIN * factor))
    fixed, moving = _on_common_canvas(_finer(a, factor, margin), _finer(b, factor, margin))
    # the working canvas's x is the finer one's (x - offset) / factor
    offset = np.full(2, margin - factor * MARGIN)
    finer = warp.astype(np.float64).copy()
    finer[:, 2] = factor * finer[:, 2] + (np.eye(2) - finer[:, :2]) @ offset
    finer = finer.astype(np.float32)

    def changed_at(w: np.ndarray) -> int:
        moved = cv2.warpAffine(moving, w, fixed.shape[::-1], flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
        return _changed_ink(fixed, moved)

    found = _changed_ink(fixed, moving) if rho is None else changed_at(finer)
    if found >= CHANGED_INK:
        # what the working size's alignment left is a working pixel or two, more than a tile's
        # reach here: aligned again at this size, the least is the pair's
        refined = _align(fixed, moving, 0.5, 1.0, 15, start=finer)
        if refined is not None and _trusted(refined[0], _stretch_limit(a, b)):
            found = min(found, changed_at(refined[0]))
    return round(factor, 2), found


def _a_shift(warp: np.ndarray, shape: tuple[int, int]) -> bool:
    """Whether an alignment is a shift on a canvas of ``shape``: its turn and scale move no corner
    more than ``TOLERANCE`` from where the shift alone puts it (a tile aligned on its own takes up
    the rest)."""
    h, w = shape
    corners = np.array([[w, h], [w, -h], [-w, h], [-w, -h]], np.float64) / 2
    moved = corners @ (warp[:, :2].astype(np.float64) - np.eye(2)).T
    return float(np.hypot(moved[:, 0], moved[:, 1]).max()) <= TOLERANCE


def _one_page(a: InkPicture, b: InkPicture) -> tuple[tuple[int, int], float, tuple[np.ndarray, np.ndarray]] | None:
    """(the whole pixels by which ``b``'s decoded pixels lie from ``a``'s, the share of the pixels
    of their ink boxes that read alike there, within ``ALIKE``, and the two read there:
    ``_on_one_page``) at the shift of the corners of their ink boxes that the most read alike;
    None where either has no box. Two crops of one page
    (re-encoded, retoned, a label that reaches past the other's ink box) are scaled to the working
    size apart, yet their pixels are on one grid and read alike but for a label; a re-scan's
    noise, blur and turn, or a resize, leave far fewer alike."""
    if a.box is None or b.box is None or a.grey is None or b.grey is None:
        return None
    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = a.box, b.box
    best = None
    for shift in dict.fromkeys((dx, dy) for dx in (bx0 - ax0, bx1 - ax1) for dy in (by0 - ay0, by1 - ay1)):
        one, other = _on_one_page(a, b, shift)
        alike = float(np.count_nonzero(np.abs(one - other) <= ALIKE) / one.size)
        if best is None or alike > best[1]:
            best = shift, alike, (one, other)
    return best


def _on_one_page(a: InkPicture, b: InkPicture, shift: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Both pictures read from their grey pixels over one box, the union of their ink boxes
    (``b``'s taken ``shift`` pixels off), at their decoded pixels: two canvases on one grid that
    need no alignment."""
    cv2 = _cv2()
    dx, dy = shift
    x0, y0 = min(a.box[0], b.box[0] - dx), min(a.box[1], b.box[1] - dy)
    x1, y1 = max(a.box[2], b.box[2] - dx), max(a.box[3], b.box[3] - dy)
    h, w = y1 - y0, x1 - x0

    def read(picture: InkPicture, ox: int, oy: int) -> np.ndarray:
        box = np.zeros((h, w), np.float32)  # past the page: paper
        page_h, page_w = picture.grey.shape
        top, left = max(0, y0 + oy), max(0, x0 + ox)
        bottom, right = min(page_h, y1 + oy), min(page_w, x1 + ox)
        if bottom > top and right > left:
            box[top - y0 - oy:bottom - y0 - oy, left - x0 - ox:right - x0 - ox] = cv2.LUT(
                np.ascontiguousarray(picture.grey[top:bottom, left:right]), picture.table)
        return box

    return read(a, 0, 0), read(b, dx, dy)


def _scaled_start(fixed: tuple[int, int], moving: tuple[int, int]) -> np.ndarray | None:
    """Where ECC starts a second time for two ink boxes of other shapes: the fixed canvas scaled
    by the ratio of the boxes' longer sides, centred on the moving one; None for boxes of one
    shape. A turn makes a long strip's box taller, not longer, and scaled to the working area it
    comes out shorter than the original by more than ECC climbs from the identity (a 0.6° turn
    of a 525x62 strip: 4% of 1,600 working pixels, 30 pixels at its ends)."""
    fixed_h, fixed_w = (size - 2 * MARGIN for size in fixed)
    moving_h, moving_w = (size - 2 * MARGIN for size in moving)
    if fixed_h < 1 or moving_h < 1 or abs(np.log((fixed_w / fixed_h) / (moving_w / moving_h))) < ASPECT_ALIKE:
        return None
    scale = moving_w / fixed_w if max(fixed_w, moving_w) >= max(fixed_h, moving_h) else moving_h / fixed_h
    if abs(scale - 1.0) > MAX_WARP_SCALE:
        return None
    warp = np.zeros((2, 3), np.float32)
    warp[0, 0] = warp[1, 1] = scale
    warp[0, 2] = MARGIN + moving_w / 2 - scale * (MARGIN + fixed_w / 2)
    warp[1, 2] = MARGIN + moving_h / 2 - scale * (MARGIN + fixed_h / 2)
    return warp


def _read_alike(a: InkPicture, b: InkPicture) -> tuple[InkPicture, InkPicture]:
    """Two pictures read with the same polarity where one of them can be read either way: a
    figure whose largest area is a mid-grey fill has it for paper, and a darker copy of it
    (re-scanned, on tinted paper) reads that fill as dark paper and its white as ink. The dark
    one is read as on light paper first."""
    if a.dark_paper == b.dark_paper:
        return a, b
    dark, light = (a, b) if a.dark_paper else (b, a)
    if dark.other_reading is not None:
        dark = dark.other_reading
    elif light.other_reading is not None:
        light = light.other_reading
    else:
        return a, b
    return (dark, light) if a.dark_paper else (light, dark)


def _fixed_first(a: InkPicture, b: InkPicture) -> bool:
    """Whether ``a`` is the pair's fixed picture, the one the other is warped onto: the coarser
    one (more working pixels to one of its own), then the one with less ink, then the smaller
    digest. A verdict so depends on the two pictures only, never on which is named first."""
    return (-a.pixel, a.ink_pixels, a.exact) <= (-b.pixel, b.ink_pixels, b.exact)


def _judged_both_ways(a: InkPicture, b: InkPicture) -> bool:
    """Pictures with the same own pixel (re-encoded, retoned, another label at one place): no
    way round is the better one, so a pair is the same picture only if it is so either way."""
    return a.pixel == b.pixel


# measures of one picture each: swapped back when ``b`` was the fixed one
_OF_EACH = (("ink_a", "ink_b"), ("extra_a", "extra_b"), ("cluster_a", "cluster_b"), ("apart_a", "apart_b"))


def _as_named(measure: dict) -> dict:
    """A measure taken with the second picture fixed, told of the pictures as they were named."""
    swapped = dict(measure)
    for first, second in _OF_EACH:
        if first in measure:
            swapped[first], swapped[second] = measure[second], measure[first]
    if "apart_limits" in measure:
        swapped["apart_limits"] = measure["apart_limits"][::-1]
    if measure.get("turn"):
        swapped["turn"] = -measure["turn"]
    return swapped


def compare_prepared(a: InkPicture, b: InkPicture) -> InkVerdict:
    """The verdict on two normalized pictures (``ink_picture``): read with their most common
    grey for paper and cropped to their ink; where they differ so, read again where either has
    another reading: with the paper around its drawing (``_border_paper``), cropped to its faint
    ink too (``_other_box``). The same picture if a reading is.

    The alignment warps one picture onto the other, so the pair is always judged one way round
    (``_fixed_first``: the coarser fixed, which on the bench's real pairs loses no copy and merges
    no more relabels than the original fixed did), and pictures of one own pixel both ways
    (``_judged_both_ways``); the measure names ``a`` and ``b`` as given."""
    if a.exact == b.exact:
        return InkVerdict(True, "identical", {})
    swapped = not _fixed_first(a, b)
    fixed, moving = (b, a) if swapped else (a, b)
    verdict = _compare_fixed_first(fixed, moving)
    if verdict.same and _judged_both_ways(fixed, moving):
        other_way = _compare_fixed_first(moving, fixed)
        if not other_way.same:
            verdict, swapped = other_way, not swapped
    return replace(verdict, measure=_as_named(verdict.measure)) if swapped else verdict


def _compare_fixed_first(a: InkPicture, b: InkPicture) -> InkVerdict:
    verdict = _compare_readings(a, b)
    if verdict.same or verdict.kind == "recoloured":
        return verdict
    for reading, first, second in (("border", a.border_reading, b.border_reading),
                                   ("faint", a.faint_reading, b.faint_reading)):
        if first is None and second is None:
            continue
        other = _compare_readings(first or a, second or b)
        if other.same and other.kind == "copy":  # not two readings that find no ink
            return replace(other, measure={**other.measure, "reading": reading})
    if a.page_reading is not None or b.page_reading is not None:
        # the page without its surround, with every reading it has (it has no page reading)
        other = _compare_fixed_first(a.page_reading or a, b.page_reading or b)
        if other.same and other.kind == "copy":
            return replace(other, measure={**other.measure, "page": True})
    return verdict


def _compare_readings(a: InkPicture, b: InkPicture) -> InkVerdict:
    a, b = _read_alike(a, b)
    if not a.ink_pixels or not b.ink_pixels:
        same = not a.ink_pixels and not b.ink_pixels
        return InkVerdict(same, "blank" if same else "other-drawing",
                          {"ink_a": a.ink_pixels, "ink_b": b.ink_pixels})
    fixed, moving = _on_common_canvas(a.inkness, b.inkness)
    fixed_levels = _levels(fixed)
    best = tightest = None

    def judge(warp: np.ndarray, rho: float | None) -> tuple[float, int]:
        nonlocal best, tightest
        judged = _judge(a, fixed, fixed_levels, b, moving, warp, rho)
        if best is None or judged.score < best.score:
            best = judged
        if tightest is None or judged.score[1] < tightest.score[1]:
            tightest = judged
        return judged.score

    # as they lie first (most copies: re-encoded, resized, other margins); then aligned by ECC at
    # a quarter of the working size (a re-scan's turn and shift); then, for a pair that is
    # nearly a copy, refined at half the working size
    stretch_limit = _stretch_limit(a, b)

    def trusted(found: tuple[np.ndarray, float] | None) -> bool:
        return found is not None and _trusted(found[0], stretch_limit)

    def aligned_from(start: np.ndarray | None) -> None:
        coarse = _align(fixed, moving, 0.25, 1.5, 50, start=start)
        if trusted(coarse) and judge(*coarse)[0] >= SETTLED and best.score[0] < REFINE_BELOW:
            fine = _align(fixed, moving, 0.5, 1.0, 15, start=coarse[0])
            if trusted(fine) and judge(*fine)[0] >= SETTLED and best.score[0] < REFINE_BELOW:
                finest = _align(fixed, moving, 1.0, 1.0, 10, start=fine[0])
                if trusted(finest):
                    judge(*finest)

    if judge(np.eye(2, 3, dtype=np.float32), None)[0] >= SETTLED:
        aligned_from(None)
        # no alignment from the identity did better than none: boxes of other shapes start
        # from their scale (a turned strip)
        start = _scaled_start(a.inkness.shape, b.inkness.shape) if best.rho is None else None
        if start is not None:
            aligned_from(start)
    changed = {}
    if best.score[0] >= 1:
        # an alignment that leaves MISALIGNED times less unmatched ink than the best-scoring one
        # is looked at too: a copy whose levels differ (a colour read darker) leaves one large
        # cluster where it lines up, and the many small clusters of a misalignment score lower
        looks = (best, tightest) if tightest.score[1] * MISALIGNED <= best.score[1] else (best,)
        for judged in looks:
            second = _second_look(a, b, fixed, moving, judged)
            if second is not None and second[0].score[0] < 1:
                best, changed = second
                break
    warp, rho = best.warp, best.rho
    linear = warp[:, :2].astype(np.float64)
    measure = {
        "ink_a": a.ink_pixels, "ink_b": b.ink_pixels,
        "extra_a": best.extra_a, "extra_b": best.extra_b, "cluster_a": best.cluster_a, "cluster_b": best.cluster_b,
        "apart_a": best.apart_a, "apart_b": best.apart_b, "holes": best.holes,
        "aligned": rho is not None,
        "ecc": None if rho is None else round(rho, 3),
        "shift": round(float(np.hypot(*warp[:, 2])), 1),
        "turn": round(float(np.degrees(np.arctan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1]))), 2),
    }
    measure.update(changed)
    limits = [round(_apart_limit(a), 2), round(_apart_limit(b), 2)]
    if "pixel" not in changed and min(limits) < APART_INK:
        measure["apart_limits"] = limits
    if best.score[0] < 1:
        one_pixel = a.pixel == b.pixel and _a_shift(warp, fixed.shape)
        if one_pixel or "pixel" not in changed:
            if one_pixel:
                # one own pixel, aligned by a shift (a re-encode, another tone, other margins,
                # another label at one place): nothing resamples one against the other, so a
                # copy's ink coincides at the working size, small figures' too (seen: at most 2
                # pixels of each at one place; re-scans turned 0.6 degrees are not on one grid)
                cv2 = _cv2()
                moved = moving if rho is None else cv2.warpAffine(
                    moving, warp, fixed.shape[::-1], flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
                measure["changed_ink"], limit = _changed_ink(fixed, moved), CHANGED_INK_ONE_PIXEL
            else:
                # not at the coarser picture's pixel (the shrunk look): a demo number line of 5-px
                # labels, shrunk from 5.8 working pixels a pixel, left 8 of each against its copy
                measure["changed_ink"], limit = _changed_ink(best.fixed, best.moved), CHANGED_INK
            if measure["changed_ink"] >= limit:
                return InkVerdict(False, "changed-ink", measure)
            finer = None if changed else _finer_look(a, b, warp, rho, one_pixel)
            if finer is not None:
                measure["finer"], measure["changed_ink_finer"] = finer
                if finer[1] >= limit:
                    return InkVerdict(False, "changed-ink", measure)
        page = _one_page(a, b)
        if page is not None and page[1] >= ONE_PAGE:
            # the pixels of one page but for a few: read over one box at their decoded pixels,
            # a few of one reading darker at one place are a mark the other does not have
            measure["page_shift"], measure["page_alike"] = list(page[0]), round(page[1], 4)
            measure["own_ink"] = _own_ink(*page[2])
            if measure["own_ink"] >= OWN_INK:
                return InkVerdict(False, "changed-ink", measure)
        # colours are read on the canvases at their own size
        recoloured = _recoloured(a, b, fixed, warp) if "pixel" in changed else \
            _recoloured(a, b, best.fixed, warp, best.moved)
        if recoloured is not None:
            measure["recoloured"] = recoloured
            if recoloured > RECOLOURED:
                return InkVerdict(False, "recoloured", measure)
        return InkVerdict(True, "copy", measure)
    unmatched_share = max(best.extra_a / a.ink_pixels, best.extra_b / b.ink_pixels)
    measure["unmatched"] = round(unmatched_share, 3)
    return InkVerdict(False, "other-drawing" if unmatched_share > OTHER_DRAWING else "added-ink", measure)


def closeness(measure: dict) -> tuple[int, int, int]:
    """How closely the ink of two pictures judged the same coincides, from the verdict's
    ``measure`` (smaller: closer): whether the second look was needed, the largest cluster of
    unmatched ink (or hole), all the unmatched ink. An identical pair (no measure) is closest."""
    second_look = any(name in measure for name in ("levels", "pixel", "blobs", "thick"))
    largest = max(measure.get("cluster_a", 0), measure.get("cluster_b", 0), measure.get("holes", 0))
    return int(second_look), largest, measure.get("extra_a", 0) + measure.get("extra_b", 0)


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
