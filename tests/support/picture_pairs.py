"""Pairs of pictures made from REAL figures (``../shared/corpora``) for the picture verdict's
tests and ``bench/ink_verdict.py``: copies (re-encoded, resized, re-scanned, other margins) and
different pictures (one added label, the nearest other figure by average hash, other figures in
a shared frame). Deterministic from a seed."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

CORPORA = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora").resolve()
FOLDERS = ("wemath/data", "gaokao-mm/Data", "scemqa/Multiple_Choice", "opendsa-html/Exercises")
LABELS = ("75°", "x = 3", "4 cm", "45°", "2m", "∠1 = 50°", "12", "AB", "3.5", "y = 2x", "60°")
COPIES = ("jpeg", "resize", "rescan", "margins", "tone")
DIFFERENT = ("label", "relabel", "nearest", "frame")


def font_path() -> str:
    import matplotlib

    return str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")


FILLED_INK = 0.3  # a page whose ink (darker than its paper by 60 grey levels) covers more is filled


def filled(im: Image.Image) -> bool:
    """Mostly filled rather than a line drawing: a photo, a grid of filled cells, a dark page."""
    grey = np.asarray(im.convert("L"), dtype=np.int16)
    paper = int(np.percentile(grey, 90))
    return paper < 160 or float((grey < paper - 60).mean()) > FILLED_INK


SMALL_SIDE = 130  # px (the geometric mean of width and height): a small figure, whose own pixel
# spans three or more of the verdict's working pixels; 115 of the corpora's figures are


def real_figures(limit: int, seed: int, only_filled: bool = False, only_small: bool = False) -> list[Path]:
    """``limit`` real figures (40 px or more each way) in a seeded order; ``only_filled``: only
    mostly filled ones (``filled``); ``only_small``: only small ones (``SMALL_SIDE``)."""
    paths = sorted(p for folder in FOLDERS for p in (CORPORA / folder).rglob("*")
                   if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    random.Random(seed).shuffle(paths)
    out = []
    for path in paths:
        try:
            with Image.open(path) as im:
                small = (im.width * im.height) ** 0.5 < SMALL_SIDE
                if min(im.size) >= 40 and (not only_small or small) and \
                        (not only_filled or filled(rgb(path.read_bytes()))):
                    out.append(path)
        except Exception:
            continue
        if len(out) == limit:
            break
    return out


def rgb(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as im:
        if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
            rgba = im.convert("RGBA")
            return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
        return im.convert("RGB")


def png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def jpeg(im: Image.Image, quality: int) -> bytes:
    buf = io.BytesIO()
    im.convert("RGB").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def paper_colour(im: Image.Image) -> tuple[int, int, int]:
    grey = np.asarray(im.convert("L"))
    level = int(np.bincount(grey.ravel(), minlength=256).argmax())
    pixels = np.asarray(im)[grey == level]
    return tuple(int(v) for v in np.median(pixels, axis=0))


def rescan(im: Image.Image, rng: random.Random) -> bytes:
    grey = im.convert("L")
    tint = np.array([0.97, 0.93, 0.84])  # yellowed paper
    page = np.asarray(grey, dtype=np.float64)[..., None] * tint[None, None, :]
    page = Image.fromarray(np.clip(page, 0, 255).astype(np.uint8))
    paper = paper_colour(page)
    page = page.rotate(rng.choice((-0.6, 0.6)), resample=Image.BICUBIC, expand=True, fillcolor=paper)
    w, h = page.size
    pad = [round(rng.uniform(0.04, 0.12) * (w if k % 2 == 0 else h)) for k in range(4)]
    framed = Image.new("RGB", (w + pad[0] + pad[2], h + pad[1] + pad[3]), paper)
    framed.paste(page, (pad[0], pad[1]))
    framed = framed.filter(ImageFilter.GaussianBlur(0.6))
    noisy = np.asarray(framed, dtype=np.float64) + np.random.default_rng(rng.randrange(1 << 30)).normal(
        0, 4.0, (framed.height, framed.width, 1))
    return jpeg(Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)), 85)


TONE_GAMMAS = (0.7, 1.4)  # a lighter and a darker tone curve


def toned(im: Image.Image, gamma: float) -> bytes:
    """The figure through another tone curve (a scanner's or a conversion's): each channel's
    value v becomes 255 * (v / 255) ** gamma."""
    curve = [round(255 * (v / 255) ** gamma) for v in range(256)]
    return png(im.point(curve * 3))


def ink_box(im: Image.Image) -> tuple[int, int, int, int]:
    grey = np.asarray(im.convert("L"), dtype=np.int64)
    paper = int(np.bincount(grey.ravel(), minlength=256).argmax())
    ink = np.abs(grey - paper) > 60
    ys, xs = np.nonzero(ink)
    if not len(xs):
        return 0, 0, im.width, im.height
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def margins(im: Image.Image, rng: random.Random) -> bytes:
    x0, y0, x1, y1 = ink_box(im)
    if rng.random() < 0.5:  # cut to the ink, a few pixels left
        return png(im.crop((max(0, x0 - 3), max(0, y0 - 3), min(im.width, x1 + 3), min(im.height, y1 + 3))))
    pad = [round(rng.uniform(0.05, 0.25) * (im.width if k % 2 == 0 else im.height)) for k in range(4)]
    out = Image.new("RGB", (im.width + pad[0] + pad[2], im.height + pad[1] + pad[3]), paper_colour(im))
    out.paste(im, (pad[0], pad[1]))
    return png(out)


def text_height(im: Image.Image) -> int:
    """The median height of the figure's character-sized ink components (its text), or a share
    of its size when it has none."""
    import cv2

    grey = np.asarray(im.convert("L"), dtype=np.int64)
    paper = int(np.bincount(grey.ravel(), minlength=256).argmax())
    ink = (np.abs(grey - paper) > 60).astype(np.uint8)
    _, _, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    h = stats[1:, cv2.CC_STAT_HEIGHT]
    w = stats[1:, cv2.CC_STAT_WIDTH]
    chars = h[(h >= 6) & (h <= 0.12 * im.height) & (w <= 1.5 * h) & (w >= 0.2 * h)]
    if len(chars) >= 2:
        return int(np.median(chars))
    return max(8, round(0.05 * max(im.size)))


def ink_colour(im: Image.Image) -> tuple[int, int, int]:
    grey = np.asarray(im.convert("L"))
    dark = grey <= np.percentile(grey, 1)
    return tuple(int(v) for v in np.median(np.asarray(im)[dark], axis=0))


def add_label(im: Image.Image, rng: random.Random) -> bytes:
    """One label in the figure's ink colour at its text height, on paper inside (or beside) the
    figure's ink box."""
    height = text_height(im)
    font = ImageFont.truetype(font_path(), max(8, round(height * 1.35)))
    text = rng.choice(LABELS)
    probe = ImageDraw.Draw(im)
    left, top, right, bottom = probe.textbbox((0, 0), text, font=font)
    tw, th = right - left, bottom - top
    x0, y0, x1, y1 = ink_box(im)
    spot = paper_spot(im, rng, tw, th)
    if spot is None:  # no paper inside: beside the ink box
        spot = (max(0, x0), max(0, min(im.height - th - 1, y1 + 2)))
    x, y = spot
    out = im.copy()
    ImageDraw.Draw(out).text((x - left, y - top), text, font=font, fill=ink_colour(im))
    return png(out)


def paper_spot(im: Image.Image, rng: random.Random, tw: int, th: int) -> tuple[int, int] | None:
    """A place for a tw x th label on bare paper (3 px of it around) about the figure's ink box."""
    grey = np.asarray(im.convert("L"), dtype=np.int64)
    paper = int(np.bincount(grey.ravel(), minlength=256).argmax())
    busy = np.abs(grey - paper) > 30
    x0, y0, x1, y1 = ink_box(im)
    for _ in range(400):
        x = rng.randint(max(0, x0 - tw // 2), max(0, min(im.width - tw - 1, x1 - tw // 2)))
        y = rng.randint(max(0, y0 - th // 2), max(0, min(im.height - th - 1, y1 - th // 2)))
        area = busy[max(0, y - 3): y + th + 3, max(0, x - 3): x + tw + 3]
        if area.size and not area.any():
            return x, y
    return None


# labels of one size that a figure may give at one place: two questions that differ by one label
RELABELS = (("2 cm", "2 in."), ("45°", "60°"), ("x = 3", "x = 5"), ("AB", "CD"), ("4 cm", "4 m"), ("12", "15"),
            ("cafe", "park"))


def relabelled(im: Image.Image, rng: random.Random) -> tuple[bytes, bytes] | None:
    """The figure with one label and with another (``RELABELS``) at the same place, on its paper,
    in its ink colour at its text height; None when it has no paper for one."""
    first, second = rng.choice(RELABELS)
    font = ImageFont.truetype(font_path(), max(8, round(text_height(im) * 1.35)))
    probe = ImageDraw.Draw(im)
    boxes = [probe.textbbox((0, 0), text, font=font) for text in (first, second)]
    tw, th = max(b[2] - b[0] for b in boxes), max(b[3] - b[1] for b in boxes)
    spot = paper_spot(im, rng, tw, th)
    if spot is None:
        return None
    from support.hard_cases import pages_with_labels

    one, other = pages_with_labels(im, spot, (first, second), boxes, font, ink_colour(im))
    return png(one), png(other)


def average_hash(im: Image.Image) -> int:
    small = np.asarray(im.convert("L").resize((8, 8), Image.Resampling.BOX), dtype=np.float64)
    bits = (small > small.mean()).ravel()
    return int("".join("1" if b else "0" for b in bits), 2)


def framed(left: Image.Image, right: Image.Image, title: str) -> bytes:
    side = 220
    page = Image.new("RGB", (2 * side + 60, side + 70), (255, 255, 255))
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(font_path(), 18)
    draw.text((20, 10), title, font=font, fill=(0, 0, 0))
    for k, panel in enumerate((left, right)):
        x = 20 + k * (side + 20)
        draw.rectangle((x, 40, x + side, 40 + side), outline=(0, 0, 0), width=2)
        fit = panel.copy()
        fit.thumbnail((side - 10, side - 10))
        page.paste(fit, (x + (side - fit.width) // 2, 40 + (side - fit.height) // 2))
        draw.text((x + 5, 40 + side + 4), f"Set {'AB'[k]}", font=font, fill=(0, 0, 0))
    return png(page)


def make_pairs(paths: list[Path], seed: int):
    """(class, figure name, a bytes, b bytes) per figure and class."""
    from support.hard_cases import same_drawing

    rng = random.Random(seed)
    images = [(path, path.read_bytes()) for path in paths]
    pictures = [rgb(data) for _, data in images]
    hashes = [average_hash(im) for im in pictures]
    for k, ((path, data), im) in enumerate(zip(images, pictures)):
        name = str(path.relative_to(CORPORA))
        yield "jpeg", name, data, jpeg(im, rng.randint(60, 90))
        yield "resize", name, data, png(im.resize((max(1, round(im.width * 0.7)), max(1, round(im.height * 0.7))),
                                                   Image.Resampling.LANCZOS))
        yield "rescan", name, data, rescan(im, rng)
        yield "margins", name, data, margins(im, rng)
        yield "label", name, data, add_label(im, rng)
        # its own random stream: the other classes' pairs stay those of a seed
        two = relabelled(im, random.Random(f"{seed}-relabel-{k}"))
        if two is not None:
            yield "relabel", name, *two
        # the nearest other figure that is another drawing: a corpus holds the same figure twice
        # (SceMQA Math/139.jpg and 140.jpg differ by a column of paper), and that is a copy
        others = sorted((j for j in range(len(images)) if j != k and images[j][1] != data),
                        key=lambda j: (bin(hashes[j] ^ hashes[k]).count("1"), j))
        nearest = next((j for j in others if not same_drawing(pictures[j], im)), None)
        if nearest is not None:
            yield "nearest", name, data, images[nearest][1]
        # the next two figures, as long as they are other drawings than each other: a corpus
        # holds one figure twice (We-Math's step questions), and two frames around it are copies
        other = pictures[(k + 1) % len(pictures)]
        third = next((pictures[(k + j) % len(pictures)] for j in range(2, len(pictures))
                      if not same_drawing(pictures[(k + j) % len(pictures)], other)), None)
        if third is not None:
            yield "frame", name, framed(im, other, "Which figure completes the pattern?"), \
                framed(im, third, "Which figure completes the pattern?")
        # last, and without the shared generator: the other classes' pairs stay as they were
        yield "tone", name, data, toned(im, TONE_GAMMAS[k % len(TONE_GAMMAS)])
