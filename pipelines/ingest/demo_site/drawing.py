"""Pillow drawings for the demo site's image specs: small, fast, deterministic.

Each drawing shows what its question asks (how many objects, where the hands of the clock
are, which pole faces which, which lamp is lit...), so a model that sees the image can
answer and a model that reads only the text cannot. ``render(spec)`` encodes it as PNG,
or JPEG (quality 80) for the ``jpeg`` variant, or PNG at 3/4 scale for ``resize``, or a
JPEG of the page printed and scanned again for ``rescan``.
"""

from __future__ import annotations

import io
import math
import unicodedata
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from pipelines.ingest.demo_site.imagespec import ImageSpec
from pipelines.ingest.demo_site.rng import Rng

RGB = {
    "red": (220, 50, 47), "blue": (38, 110, 210), "green": (46, 160, 67), "orange": (240, 140, 20),
    "purple": (130, 70, 180), "pink": (230, 100, 170), "teal": (20, 150, 150), "brown": (140, 90, 40),
    "yellow": (235, 200, 20), "gray": (128, 128, 128), "black": (0, 0, 0), "white": (255, 255, 255),
}
INK = (30, 30, 30)


@lru_cache(maxsize=16)
def font(size: int = 13):
    return ImageFont.load_default(size=size)


def _canvas(w: int, h: int, bg=(255, 255, 255)):
    im = Image.new("RGB", (w, h), bg)
    return im, ImageDraw.Draw(im)


def _text_c(d, xy, text, size=13, fill=INK):
    # the bundled font has no accented letters: draw "café" as "cafe"
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch))
    d.text(xy, text, fill=fill, font=font(size), anchor="mm")


def _regular(cx, cy, r, n, rot=0.0):
    return [(cx + r * math.cos(rot + 2 * math.pi * j / n - math.pi / 2),
             cy + r * math.sin(rot + 2 * math.pi * j / n - math.pi / 2)) for j in range(n)]


def _star(cx, cy, r, rot=0.0):
    pts = []
    for j in range(10):
        rr = r if j % 2 == 0 else r * 0.45
        a = rot + math.pi * j / 5 - math.pi / 2
        pts.append((cx + rr * math.cos(a), cy + rr * math.sin(a)))
    return pts


def draw_figure(d, name: str, cx: float, cy: float, r: float, color, rot: float = 0.0):
    """One small figure (used for counting, patterns and shape questions)."""
    if name in ("circle", "dot"):
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=color, outline=INK)
    elif name == "oval":
        d.ellipse([cx - r, cy - r * 0.6, cx + r, cy + r * 0.6], fill=color, outline=INK)
    elif name == "square":
        d.polygon(_regular(cx, cy, r * 1.2, 4, math.pi / 4 + rot * 0.2), fill=color, outline=INK)
    elif name == "rectangle":
        d.rectangle([cx - r, cy - r * 0.55, cx + r, cy + r * 0.55], fill=color, outline=INK)
    elif name == "triangle":
        d.polygon(_regular(cx, cy, r, 3, rot * 0.3), fill=color, outline=INK)
    elif name == "pentagon":
        d.polygon(_regular(cx, cy, r, 5, rot), fill=color, outline=INK)
    elif name == "hexagon":
        d.polygon(_regular(cx, cy, r, 6, rot), fill=color, outline=INK)
    elif name == "octagon":
        d.polygon(_regular(cx, cy, r, 8, rot), fill=color, outline=INK)
    elif name == "trapezoid":
        d.polygon([(cx - r, cy + r * 0.6), (cx + r, cy + r * 0.6), (cx + r * 0.5, cy - r * 0.6), (cx - r * 0.5, cy - r * 0.6)], fill=color, outline=INK)
    elif name == "rhombus":
        d.polygon([(cx, cy - r), (cx + r * 0.7, cy), (cx, cy + r), (cx - r * 0.7, cy)], fill=color, outline=INK)
    elif name == "star":
        d.polygon(_star(cx, cy, r, rot * 0.2), fill=color, outline=INK)
    elif name == "heart":
        d.ellipse([cx - r, cy - r * 0.8, cx, cy + r * 0.1], fill=color)
        d.ellipse([cx, cy - r * 0.8, cx + r, cy + r * 0.1], fill=color)
        d.polygon([(cx - r * 0.97, cy - r * 0.2), (cx + r * 0.97, cy - r * 0.2), (cx, cy + r)], fill=color)
    elif name == "sun":
        for j in range(8):
            a = 2 * math.pi * j / 8 + rot
            d.line([(cx + r * 0.6 * math.cos(a), cy + r * 0.6 * math.sin(a)), (cx + r * math.cos(a), cy + r * math.sin(a))], fill=RGB["orange"], width=2)
        d.ellipse([cx - r * 0.55, cy - r * 0.55, cx + r * 0.55, cy + r * 0.55], fill=RGB["yellow"], outline=INK)
    elif name == "balloon":
        d.ellipse([cx - r * 0.6, cy - r, cx + r * 0.6, cy + r * 0.4], fill=color, outline=INK)
        d.line([(cx, cy + r * 0.4), (cx + r * 0.1, cy + r)], fill=INK)
    elif name == "flower":
        for j in range(5):
            a = 2 * math.pi * j / 5 + rot
            px, py = cx + r * 0.5 * math.cos(a), cy + r * 0.5 * math.sin(a)
            d.ellipse([px - r * 0.4, py - r * 0.4, px + r * 0.4, py + r * 0.4], fill=color)
        d.ellipse([cx - r * 0.3, cy - r * 0.3, cx + r * 0.3, cy + r * 0.3], fill=RGB["yellow"])
    else:
        d.rectangle([cx - r, cy - r, cx + r, cy + r], outline=INK)


def _scatter(rng: Rng, n: int, x0, y0, w, h, cells_per_row: int):
    rows = max(1, math.ceil(max(n, 1) * 1.4 / cells_per_row))
    cw, ch = w / cells_per_row, h / rows
    cells = rng.sample(range(cells_per_row * rows), n)
    return [(x0 + (c % cells_per_row + 0.5) * cw + rng.randint(-3, 3), y0 + (c // cells_per_row + 0.5) * ch + rng.randint(-3, 3), min(cw, ch)) for c in cells]


def k_objects(p):
    shape, n, color, seed = p
    rng = Rng(seed)
    im, d = _canvas(200, 200)
    for x, y, s in _scatter(rng, n, 6, 6, 188, 188, 5):
        draw_figure(d, shape, x, y, s * 0.38, RGB[color], rng.random())
    return im


def k_two_groups(p):
    shape, a, b, color, seed = p
    rng = Rng(seed)
    im, d = _canvas(256, 140)
    for x0, n in ((6, a), (140, b)):
        d.rounded_rectangle([x0, 6, x0 + 110, 134], 8, outline=INK)
        for x, y, s in _scatter(rng, n, x0 + 4, 10, 102, 120, 3):
            draw_figure(d, shape, x, y, s * 0.35, RGB[color], rng.random())
    _text_c(d, (128, 70), "+", 24)
    return im


def k_shape(p):
    shape, color, seed = p
    rng = Rng(seed)
    im, d = _canvas(160, 160)
    r = rng.randint(38, 62)
    draw_figure(d, shape, 80 + rng.randint(-12, 12), 80 + rng.randint(-12, 12), r, RGB[color], rng.random() * 0.6)
    return im


def k_fraction(p):
    kind, den, num, color, seed = p
    rng = Rng(seed)
    im, d = _canvas(180, 180)
    shaded = set(rng.sample(range(den), num))
    if kind == "circle":
        start = rng.randint(0, 90)
        for j in range(den):
            a0 = start + 360 * j / den
            d.pieslice([15, 15, 165, 165], a0, a0 + 360 / den, fill=RGB[color] if j in shaded else (255, 255, 255), outline=INK, width=2)
    else:
        w = 160 / den
        for j in range(den):
            d.rectangle([10 + j * w, 50, 10 + (j + 1) * w, 130], fill=RGB[color] if j in shaded else (255, 255, 255), outline=INK, width=2)
    return im


def k_bars(p):
    title, labels, values, color, seed = p
    rng = Rng(seed)
    n = len(labels)
    w, h = 64 + 56 * n, 220
    im, d = _canvas(w, h)
    top = max(values)
    step = 1 if top <= 10 else 5 if top <= 30 else 10
    vmax = ((top + step - 1) // step + 1) * step
    x0, y0, y1 = 40, 28, 180
    _text_c(d, (w // 2, 12), title, 13)
    for v in range(0, vmax + 1, step):
        y = y1 - (y1 - y0) * v / vmax
        d.line([(x0 - 4, y), (w - 8, y)], fill=(225, 225, 225) if v else INK)
        d.text((x0 - 6, y), str(v), fill=INK, font=font(10), anchor="rm")
    d.line([(x0, y0), (x0, y1)], fill=INK)
    bw = 34 + rng.randint(-4, 4)
    for j, (lab, v) in enumerate(zip(labels, values)):
        cx = x0 + 30 + 56 * j
        d.rectangle([cx - bw // 2, y1 - (y1 - y0) * v / vmax, cx + bw // 2, y1], fill=RGB[color], outline=INK)
        _text_c(d, (cx, y1 + 12 + 12 * (j % 2)), lab, 10)
    return im


def k_clock(p):
    hh, mm, seed = p
    rng = Rng(seed)
    im, d = _canvas(170, 170)
    rim = RGB[rng.choice(("red", "blue", "green", "purple", "teal"))]
    d.ellipse([5, 5, 165, 165], fill=(255, 255, 255), outline=rim, width=6)
    c = 85
    for j in range(60):
        a = math.radians(6 * j - 90)
        r0 = 66 if j % 5 else 60
        d.line([(c + r0 * math.cos(a), c + r0 * math.sin(a)), (c + 72 * math.cos(a), c + 72 * math.sin(a))], fill=INK, width=1 if j % 5 else 2)
    for j in range(1, 13):
        a = math.radians(30 * j - 90)
        _text_c(d, (c + 50 * math.cos(a), c + 50 * math.sin(a)), str(j), 13)
    ah = math.radians(30 * (hh % 12) + mm / 2 - 90)
    am = math.radians(6 * mm - 90)
    d.line([(c, c), (c + 34 * math.cos(ah), c + 34 * math.sin(ah))], fill=INK, width=5)
    d.line([(c, c), (c + 58 * math.cos(am), c + 58 * math.sin(am))], fill=INK, width=3)
    d.ellipse([c - 4, c - 4, c + 4, c + 4], fill=INK)
    return im


def _number_line(d, x0, x1, y, start, stop, step, every=1):
    d.line([(x0 - 8, y), (x1 + 8, y)], fill=INK, width=2)
    d.polygon([(x1 + 12, y), (x1 + 4, y - 4), (x1 + 4, y + 4)], fill=INK)
    d.polygon([(x0 - 12, y), (x0 - 4, y - 4), (x0 - 4, y + 4)], fill=INK)
    n = (stop - start) // step
    for j in range(n + 1):
        x = x0 + (x1 - x0) * j / n
        d.line([(x, y - 6), (x, y + 6)], fill=INK, width=1)
        if j % every == 0:
            v = start + j * step
            d.text((x, y + 16), str(v), fill=INK, font=font(11), anchor="mm")


def k_numberline(p):
    start, stop, step, v, seed = p
    rng = Rng(seed)
    im, d = _canvas(280, 70)
    _number_line(d, 20, 260, 30, start, stop, step)
    x = 20 + 240 * (v - start) / (stop - start)
    col = RGB[rng.choice(("red", "blue", "green"))]
    d.ellipse([x - 6, 24, x + 6, 36], fill=col, outline=INK)
    return im


def k_array(p):
    r, q, color, seed = p
    rng = Rng(seed)
    sx, sy = rng.randint(20, 34), rng.randint(20, 34)
    im, d = _canvas(sx * q + 20, sy * r + 20)
    shape = rng.choice(("circle", "square", "star", "heart", "triangle"))
    size = min(sx, sy) * rng.randint(28, 42) / 100
    for a in range(r):
        for b in range(q):
            draw_figure(d, shape, 10 + sx * (b + 0.5), 10 + sy * (a + 0.5), size, RGB[color])
    return im


def k_angle(p):
    deg, seed = p
    rng = Rng(seed)
    im, d = _canvas(220, 140)
    bx, by, r = 110, 118, 95
    # protractor
    d.pieslice([bx - r, by - r, bx + r, by + r], 180, 360, fill=(245, 245, 225), outline=(150, 150, 120))
    for a in range(0, 181, 10):
        ra = math.radians(180 + a)
        d.line([(bx + (r - 8) * math.cos(ra), by + (r - 8) * math.sin(ra)), (bx + r * math.cos(ra), by + r * math.sin(ra))], fill=(120, 120, 100))
        if a % 30 == 0:
            d.text((bx + (r - 18) * math.cos(ra), by + (r - 18) * math.sin(ra)), str(a), fill=(90, 90, 70), font=font(9), anchor="mm")
    ra = math.radians(180 + deg)
    d.line([(bx, by), (bx - r - 5, by)], fill=RGB["blue"], width=3)
    d.line([(bx, by), (bx + (r + 5) * math.cos(ra), by + (r + 5) * math.sin(ra))], fill=RGB["blue"], width=3)
    _text_c(d, (bx - r - 5, by + 12), "A", 12)
    _text_c(d, (bx, by + 12), "B", 12)
    _text_c(d, (bx + (r + 14) * math.cos(ra), by + (r + 14) * math.sin(ra)), "C", 12)
    return im


def k_triangle(p):
    a, b, seed = p
    rng = Rng(seed)
    im, d = _canvas(240, 170)
    ax, ay, bx, by = 20, 150, 220, 150
    ta, tb = math.tan(math.radians(a)), math.tan(math.radians(b))
    cx = (ax * ta + bx * tb) / (ta + tb)
    cy = ay - (cx - ax) * ta
    if cy < 10:
        s = (150 - 10) / (150 - cy)
        cx, cy = ax + (cx - ax) * s, 10
        bx = ax + (bx - ax) * s
    # a mid-tone fill: a pale one makes two different triangles nearly equal in grey thumbnails
    d.polygon([(ax, ay), (bx, by), (cx, cy)], fill=(160, 200, 245), outline=INK)
    _text_c(d, (ax - 8, ay + 8), "A")
    _text_c(d, (bx + 8, by + 8), "B")
    _text_c(d, (cx, cy - 8 if cy > 14 else cy + 6), "C")
    _text_c(d, (ax + 30, ay - 10), f"{a}\u00b0", 11)
    _text_c(d, (bx - 28, by - 10), f"{b}\u00b0", 11)
    _text_c(d, (cx, cy + 22), "?", 12, RGB["red"])
    rng.next()
    return im


def k_grid_rect(p):
    w, h, color, seed = p
    rng = Rng(seed)
    cols, rows = max(10, w + 2), max(8, h + 2)
    cell = 18
    im, d = _canvas(cols * cell + 1, rows * cell + 1)
    ox, oy = rng.randint(0, cols - w), rng.randint(0, rows - h)
    d.rectangle([ox * cell, oy * cell, (ox + w) * cell, (oy + h) * cell], fill=RGB[color])
    for x in range(cols + 1):
        d.line([(x * cell, 0), (x * cell, rows * cell)], fill=(170, 170, 170))
    for y in range(rows + 1):
        d.line([(0, y * cell), (cols * cell, y * cell)], fill=(170, 170, 170))
    d.rectangle([ox * cell, oy * cell, (ox + w) * cell, (oy + h) * cell], outline=INK, width=2)
    return im


def _plane(d, size, lo, hi):
    n = hi - lo
    s = (size - 20) / n

    def at(x, y):
        return 10 + (x - lo) * s, 10 + (hi - y) * s

    for v in range(lo, hi + 1):
        d.line([at(v, lo), at(v, hi)], fill=(220, 220, 220))
        d.line([at(lo, v), at(hi, v)], fill=(220, 220, 220))
    d.line([at(lo, max(lo, 0)), at(hi, max(lo, 0))], fill=INK, width=2)
    d.line([at(max(lo, 0), lo), at(max(lo, 0), hi)], fill=INK, width=2)
    for v in range(lo, hi + 1):
        if v:
            x, y = at(v, max(lo, 0))
            d.text((x, y + 7), str(v), fill=INK, font=font(8), anchor="mm")
            x, y = at(max(lo, 0), v)
            d.text((x - 7, y), str(v), fill=INK, font=font(8), anchor="mm")
    return at


def k_line_graph(p):
    m, b, seed = p
    rng = Rng(seed)
    im, d = _canvas(180, 180)
    at = _plane(d, 180, -6, 6)
    pts = [(x / 4, m * x / 4 + b) for x in range(-24, 25)]
    pts = [at(x, y) for x, y in pts if -6 <= y <= 6]
    d.line(pts, fill=RGB[rng.choice(("blue", "red", "green", "purple"))], width=3)
    return im


def k_coord(p):
    x, y, label, lo, seed = p
    rng = Rng(seed)
    im, d = _canvas(180, 180)
    at = _plane(d, 180, lo, 6 if lo == 0 else 6)
    px, py = at(x, y)
    col = RGB[rng.choice(("red", "blue", "purple"))]
    # dashed guides to both axes: a point's position must show in a small grey thumbnail too
    for ex, ey in (at(x, 0), at(0, y)):
        steps = max(1, int(max(abs(ex - px), abs(ey - py)) // 4))
        for j in range(0, steps, 2):
            f0, f1 = j / steps, min(1.0, (j + 1) / steps)
            d.line([(px + (ex - px) * f0, py + (ey - py) * f0), (px + (ex - px) * f1, py + (ey - py) * f1)], fill=col, width=2)
    d.ellipse([px - 6, py - 6, px + 6, py + 6], fill=col)
    d.text((px + 6, py - 8), label, fill=col, font=font(12))
    return im


def k_spinner(p):
    cols, seed = p
    rng = Rng(seed)
    im, d = _canvas(170, 170)
    n = len(cols)
    start = rng.randint(0, 359)
    for j, col in enumerate(cols):
        d.pieslice([10, 10, 160, 160], start + 360 * j / n, start + 360 * (j + 1) / n, fill=RGB[col], outline=INK, width=2)
    a = math.radians(rng.randint(0, 359))
    d.line([(85, 85), (85 + 55 * math.cos(a), 85 + 55 * math.sin(a))], fill=INK, width=4)
    d.ellipse([79, 79, 91, 91], fill=INK)
    return im


def k_pattern(p):
    seq, color, seed = p
    n = len(seq)
    im, d = _canvas(40 * (n + 1) + 10, 60)
    rng = Rng(seed)
    for j, s in enumerate(seq):
        draw_figure(d, s, 25 + 40 * j, 30, 14, RGB[color])
    x = 25 + 40 * n
    d.rectangle([x - 16, 14, x + 16, 46], outline=INK, width=2)
    _text_c(d, (x, 30), "?", 18)
    rng.next()
    return im


def k_inequality(p):
    b, op, seed = p
    rng = Rng(seed)
    im, d = _canvas(300, 70)
    _number_line(d, 20, 280, 32, -10, 10, 1, every=2)
    x = 20 + 260 * (b + 10) / 20
    col = RGB[rng.choice(("blue", "red", "purple"))]
    end = 290 if op in (">", "\u2265") else 10
    d.line([(x, 32), (end, 32)], fill=col, width=5)
    d.polygon([(end, 32), (end - 8 if end > x else end + 8, 26), (end - 8 if end > x else end + 8, 38)], fill=col)
    closed = op in ("\u2264", "\u2265")
    d.ellipse([x - 6, 26, x + 6, 38], fill=col if closed else (255, 255, 255), outline=col, width=2)
    return im


def k_square_model(p):
    n, color, seed = p
    rng = Rng(seed)
    cell = max(8, rng.randint(90, 170) // n)
    gap = rng.randint(0, 3)
    im, d = _canvas(n * cell + 21, n * cell + 21)
    base = RGB[color]
    style = rng.below(3)
    for a in range(n):
        for b in range(n):
            if style == 0:
                fill = base
            elif style == 1:
                fill = base if (a + b) % 2 else tuple(min(255, v + 70) for v in base)
            else:
                fill = tuple(min(255, v + 10 * ((a * 7 + b * 3 + rng.below(4)) % 5)) for v in base)
            d.rectangle([10 + b * cell + gap, 10 + a * cell + gap, 10 + (b + 1) * cell, 10 + (a + 1) * cell], fill=fill, outline=INK if style else (255, 255, 255))
    return im


# Pole colours far apart in grey level too (the usual red and blue have the same luminance,
# so a grey thumbnail would tell the poles apart only by their small letters).
POLE_FILL = {"N": (190, 30, 40), "S": (95, 165, 240)}


def _magnet(d, x, y, w, h, poles):
    half = w // 2
    for j, pole in enumerate(poles):
        col = POLE_FILL[pole]
        d.rectangle([x + j * half, y, x + (j + 1) * half, y + h], fill=col, outline=INK)
        _text_c(d, (x + j * half + half // 2, y + h // 2), pole, 16, (255, 255, 255))


def k_magnets(p):
    left, right, seed = p
    rng = Rng(seed)
    length, thick = rng.randint(70, 120), rng.randint(28, 46)
    gap = rng.randint(14, 40)
    im, d = _canvas(2 * length + gap + 20, 130)
    y0, y1 = rng.randint(5, 120 - thick), rng.randint(5, 120 - thick)
    if rng.below(2):
        y1 = y0
    _magnet(d, 10, y0, length, thick, left)
    _magnet(d, 10 + length + gap, y1, length, thick, right)
    return im


def k_magnet_pairs(p):
    d1, d2, unit_, seed = p
    rng = Rng(seed)
    im, d = _canvas(300, 170)
    poles = rng.choice((("NS", "SN"), ("SN", "NS"), ("NS", "NS")))
    for row, (dist, label) in enumerate(((d1, "Pair 1"), (d2, "Pair 2"))):
        y = 20 + 75 * row
        d.text((5, y - 14), label, fill=INK, font=font(11))
        gap = 12 * dist
        _magnet(d, 10, y, 90, 30, poles[0])
        _magnet(d, 100 + gap, y, 90, 30, poles[1])
        d.line([(100, y + 42), (100 + gap, y + 42)], fill=INK)
        _text_c(d, (100 + gap / 2, y + 52), f"{dist} {unit_}", 10)
    return im


def _label(d, w, h, text):
    _text_c(d, (w // 2, h - 12), text, 12)


def _silhouette(d, name: str, rng: Rng):
    """A recognisable outline for a named thing, in a 160x130 box."""
    col = RGB[rng.choice(("blue", "green", "orange", "purple", "teal", "brown"))]
    if name in ("beaker",):
        d.polygon([(50, 20), (110, 20), (108, 110), (52, 110)], outline=INK, width=3)
        d.rectangle([54, 70, 106, 108], fill=(150, 200, 255))
    elif name == "test tube":
        d.rounded_rectangle([70, 10, 90, 115], 10, outline=INK, width=3)
        d.rectangle([73, 70, 87, 105], fill=(150, 220, 150))
    elif name == "graduated cylinder":
        d.rectangle([68, 10, 92, 112], outline=INK, width=3)
        for y in range(20, 110, 8):
            d.line([(68, y), (78, y)], fill=INK)
        d.rectangle([56, 110, 104, 116], fill=INK)
    elif name == "magnifying glass":
        d.ellipse([40, 15, 100, 75], outline=INK, width=6)
        d.line([(92, 68), (125, 108)], fill=col, width=10)
    elif name in ("balance",):
        d.line([(80, 20), (80, 100)], fill=INK, width=4)
        d.line([(35, 35), (125, 35)], fill=INK, width=3)
        for x in (35, 125):
            d.arc([x - 22, 40, x + 22, 75], 0, 180, fill=INK, width=3)
        d.rectangle([55, 100, 105, 108], fill=INK)
    elif name == "thermometer":
        d.rounded_rectangle([74, 10, 86, 95], 6, outline=INK, width=2)
        d.ellipse([68, 88, 92, 112], fill=RGB["red"], outline=INK)
        d.rectangle([77, 50, 83, 92], fill=RGB["red"])
    elif name == "dropper":
        d.ellipse([68, 10, 92, 40], fill=RGB["red"], outline=INK)
        d.polygon([(72, 38), (88, 38), (82, 110), (78, 110)], outline=INK, width=2)
    elif name == "flask":
        d.polygon([(72, 10), (88, 10), (88, 45), (120, 110), (40, 110), (72, 45)], outline=INK, width=3)
        d.polygon([(55, 80), (105, 80), (118, 108), (42, 108)], fill=(255, 200, 150))
    elif name in ("monitor", "laptop"):
        d.rectangle([30, 15, 130, 80], fill=(40, 40, 60), outline=INK, width=3)
        if name == "monitor":
            d.rectangle([72, 80, 88, 100], fill=INK)
            d.rectangle([55, 100, 105, 106], fill=INK)
        else:
            d.polygon([(20, 84), (140, 84), (150, 104), (10, 104)], fill=(160, 160, 170), outline=INK)
    elif name == "keyboard":
        d.rounded_rectangle([15, 40, 145, 95], 5, fill=(210, 210, 210), outline=INK)
        for r in range(4):
            for c in range(11):
                d.rectangle([20 + 11.5 * c, 45 + 12 * r, 29 + 11.5 * c, 54 + 12 * r], fill=(250, 250, 250), outline=INK)
    elif name == "mouse":
        d.ellipse([55, 15, 105, 105], fill=(220, 220, 220), outline=INK, width=2)
        d.line([(80, 15), (80, 50)], fill=INK, width=2)
        d.line([(55, 50), (105, 50)], fill=INK, width=2)
    elif name in ("printer", "scanner"):
        d.rectangle([25, 40, 135, 95], fill=(200, 200, 205), outline=INK, width=2)
        if name == "printer":
            d.rectangle([45, 15, 115, 40], fill=(255, 255, 255), outline=INK)
            d.rectangle([45, 80, 115, 110], fill=(255, 255, 255), outline=INK)
        else:
            d.rectangle([30, 30, 130, 40], fill=(120, 120, 130), outline=INK)
    elif name == "smartphone":
        d.rounded_rectangle([58, 8, 102, 112], 8, fill=(30, 30, 30))
        d.rectangle([62, 18, 98, 100], fill=(90, 160, 230))
    elif name == "webcam":
        d.ellipse([50, 15, 110, 75], fill=(60, 60, 60))
        d.ellipse([68, 33, 92, 57], fill=(20, 60, 140))
        d.polygon([(70, 75), (90, 75), (100, 105), (60, 105)], fill=(90, 90, 90))
    elif name == "speaker":
        d.rectangle([50, 10, 110, 110], fill=(70, 50, 40), outline=INK)
        d.ellipse([62, 50, 98, 86], fill=(30, 30, 30))
        d.ellipse([72, 20, 88, 36], fill=(30, 30, 30))
    elif name == "microphone":
        d.rounded_rectangle([66, 10, 94, 65], 14, fill=(150, 150, 160), outline=INK)
        d.arc([56, 35, 104, 80], 0, 180, fill=INK, width=3)
        d.line([(80, 80), (80, 105)], fill=INK, width=3)
        d.line([(62, 105), (98, 105)], fill=INK, width=3)
    elif name in ("USB flash drive",):
        d.rounded_rectangle([40, 40, 110, 80], 6, fill=col)
        d.rectangle([110, 48, 135, 72], fill=(200, 200, 200), outline=INK)
    elif name in ("hard disk drive", "solid-state drive"):
        d.rectangle([30, 15, 130, 110], fill=(180, 180, 190), outline=INK, width=2)
        if name == "hard disk drive":
            d.ellipse([45, 25, 115, 95], fill=(220, 220, 230), outline=INK)
            d.line([(120, 100), (85, 60)], fill=INK, width=3)
        else:
            d.rectangle([45, 35, 115, 65], fill=(40, 40, 40))
    elif name == "CD":
        d.ellipse([25, 5, 135, 115], fill=(220, 225, 235), outline=INK)
        d.ellipse([70, 50, 90, 70], fill=(255, 255, 255), outline=INK)
    elif name == "SD card":
        d.polygon([(50, 10), (100, 10), (110, 20), (110, 110), (50, 110)], fill=(40, 40, 120))
        d.rectangle([55, 15, 95, 30], fill=(230, 200, 60))
    elif name == "floppy disk":
        d.rectangle([35, 10, 125, 110], fill=(40, 40, 40))
        d.rectangle([55, 10, 105, 40], fill=(190, 190, 190))
        d.rectangle([48, 65, 112, 108], fill=(245, 245, 245))
    elif name == "lever":
        d.polygon([(80, 80), (65, 110), (95, 110)], fill=col)
        d.line([(20, 95), (140, 65)], fill=INK, width=5)
        d.rectangle([22, 70, 42, 90], fill=RGB["gray"])
    elif name == "pulley":
        d.line([(80, 5), (80, 25)], fill=INK, width=3)
        d.ellipse([60, 25, 100, 65], fill=col, outline=INK)
        d.line([(60, 45), (60, 110)], fill=INK, width=2)
        d.line([(100, 45), (100, 90)], fill=INK, width=2)
        d.rectangle([88, 90, 112, 112], fill=RGB["gray"])
    elif name == "inclined plane":
        d.polygon([(15, 110), (145, 110), (145, 40)], fill=col, outline=INK)
        d.rectangle([95, 55, 115, 75], fill=RGB["gray"])
    elif name == "wheel and axle":
        d.ellipse([35, 15, 125, 105], outline=INK, width=6)
        d.ellipse([72, 52, 88, 68], fill=INK)
        for a in range(0, 360, 45):
            r = math.radians(a)
            d.line([(80, 60), (80 + 42 * math.cos(r), 60 + 42 * math.sin(r))], fill=INK, width=2)
    elif name == "wedge":
        d.polygon([(50, 20), (110, 20), (80, 110)], fill=col, outline=INK)
    elif name == "screw":
        d.rectangle([55, 10, 105, 25], fill=RGB["gray"])
        pts = [(70 if j % 2 == 0 else 90, 25 + 7 * j) for j in range(12)]
        d.line(pts, fill=INK, width=3)
        d.polygon([(70, 102), (90, 102), (80, 115)], fill=INK)
    else:
        # living things and materials: a coloured blob whose outline depends on the name
        h = sum(map(ord, name))
        shape = ("circle", "hexagon", "rhombus", "oval", "pentagon", "star")[h % 6]
        draw_figure(d, shape, 80, 60, 42, col, (h % 7) / 7)


def _named(p, w=160, h=150):
    name, seed = p
    rng = Rng(seed)
    im, d = _canvas(w, h)
    _silhouette(d, name, rng)
    _label(d, w, h, name)
    return im


def k_thermometer(p):
    v, unit_, seed = p
    rng = Rng(seed)
    im, d = _canvas(110, 240)
    lo, hi, step = (-20, 50, 10) if unit_ == "C" else (0, 110, 10)
    x = 45

    def y_of(t):
        return 200 - 170 * (t - lo) / (hi - lo)

    d.rounded_rectangle([x - 8, 20, x + 8, 205], 8, fill=(255, 255, 255), outline=INK, width=2)
    d.ellipse([x - 15, 198, x + 15, 228], fill=RGB["red"], outline=INK)
    d.rectangle([x - 4, y_of(v), x + 4, 205], fill=RGB["red"])
    for t in range(lo, hi + 1, 2 if unit_ == "C" else 2):
        y = y_of(t)
        major = t % step == 0
        d.line([(x + 8, y), (x + (20 if major else 13), y)], fill=INK)
        if major:
            d.text((x + 24, y), str(t), fill=INK, font=font(10), anchor="lm")
    _text_c(d, (x + 40, 10), f"\u00b0{unit_}", 11)
    rng.next()
    return im


def k_thermometers(p):
    labels, temps, unit_, seed = p
    ims = [k_thermometer((t, unit_, seed + j)) for j, t in enumerate(temps)]
    im, d = _canvas(110 * len(ims), 262)
    for j, (lab, sub) in enumerate(zip(labels, ims)):
        im.paste(sub, (110 * j, 0))
        _text_c(d, (110 * j + 45, 250), lab, 14)
    return im


def k_moon(p):
    phase, seed = p
    rng = Rng(seed)
    im, d = _canvas(150, 150, (10, 15, 40))
    for _ in range(12):
        x, y = rng.randint(0, 149), rng.randint(0, 149)
        d.point((x, y), fill=(250, 250, 250))
    box = [25, 25, 125, 125]
    lit, dark = (240, 240, 210), (45, 45, 60)
    d.ellipse(box, fill=dark)
    j = ("new moon", "waxing crescent", "first quarter", "waxing gibbous", "full moon", "waning gibbous", "third quarter", "waning crescent").index(phase)
    if j == 4:
        d.ellipse(box, fill=lit)
    elif j != 0:
        waxing = j < 4
        d.pieslice(box, -90, 90, fill=lit) if waxing else d.pieslice(box, 90, 270, fill=lit)
        frac = abs(4 - j) / 4  # 0.25 gibbous .. 0.75 crescent
        half = 50 * abs(1 - 2 * (1 - frac)) if j not in (2, 6) else 0
        if j in (1, 7):  # crescent: cover with dark ellipse on the lit side
            d.ellipse([75 - half, 25, 75 + half, 125], fill=dark)
        elif j in (3, 5):  # gibbous: add lit ellipse on the dark side
            d.ellipse([75 - half, 25, 75 + half, 125], fill=lit)
    return im


def k_cylinder(p):
    v, cap, seed = p
    rng = Rng(seed)
    im, d = _canvas(130, 260)
    x0, x1, top, bot = 40, 80, 20, 230

    def y_of(t):
        return bot - (bot - top) * t / cap

    d.rectangle([x0, y_of(v), x1, bot], fill=(150, 200, 255))
    d.line([(x0, y_of(v)), (x1, y_of(v))], fill=(30, 90, 200), width=2)
    d.line([(x0, top - 10), (x0, bot)], fill=INK, width=2)
    d.line([(x1, top - 10), (x1, bot)], fill=INK, width=2)
    d.rectangle([x0 - 15, bot, x1 + 15, bot + 8], fill=INK)
    minor = cap // 50
    for t in range(0, cap + 1, minor):
        y = y_of(t)
        major = t % (cap // 5) == 0
        d.line([(x1, y), (x1 - (14 if major else 7), y)], fill=INK)
        if major and t:
            d.text((x1 + 4, y), str(t), fill=INK, font=font(10), anchor="lm")
    _text_c(d, (105, 10), "mL", 11)
    rng.next()
    return im


def k_circuit(p):
    closed, kind, seed = p
    rng = Rng(seed)
    im, d = _canvas(240, 190)
    x0, y0 = 20 + rng.randint(0, 30), 25 + rng.randint(0, 25)
    x1, y1 = x0 + rng.randint(130, 190), y0 + rng.randint(90, 130)
    x1, y1 = min(x1, 230), min(y1, 180)
    wire = (180, 90, 30)
    d.line([(x0, y0), (x1, y0)], fill=wire, width=3)
    d.line([(x0, y1), (x1, y1)], fill=wire, width=3)
    d.line([(x0, y0), (x0, y1)], fill=wire, width=3)
    d.line([(x1, y0), (x1, y1)], fill=wire, width=3)
    # battery on the left side
    by = (y0 + y1) // 2 + rng.randint(-10, 10)
    d.rectangle([x0 - 12, by - 20, x0 + 12, by + 20], fill=(60, 60, 60))
    d.rectangle([x0 - 6, by - 26, x0 + 6, by - 20], fill=(200, 160, 30))
    _text_c(d, (x0, by), "+", 12, (255, 255, 255))
    # bulb on the top wire
    bx = x0 + (x1 - x0) * rng.randint(35, 65) // 100
    d.ellipse([bx - 15, y0 - 22, bx + 15, y0 + 8], fill=(255, 250, 200), outline=INK)
    d.rectangle([bx - 8, y0 + 6, bx + 8, y0 + 14], fill=(150, 150, 150))
    # switch or gap on the bottom wire
    sx = x0 + (x1 - x0) * rng.randint(30, 70) // 100
    d.rectangle([sx - 20, y1 - 4, sx + 20, y1 + 4], fill=(255, 255, 255))
    if kind == "switch":
        d.ellipse([sx - 22, y1 - 3, sx - 16, y1 + 3], fill=INK)
        d.ellipse([sx + 16, y1 - 3, sx + 22, y1 + 3], fill=INK)
        end = (sx + 19, y1) if closed else (sx + 12, y1 - 26)
        d.line([(sx - 19, y1), end], fill=INK, width=3)
    elif closed:
        d.line([(sx - 20, y1), (sx + 20, y1)], fill=wire, width=3)
    return im


def k_balance(p):
    a, b, heavier, seed = p
    rng = Rng(seed)
    im, d = _canvas(240, 170)
    tilt = 14 if heavier == 0 else -14
    d.polygon([(120, 60), (100, 150), (140, 150)], fill=(120, 120, 130))
    lx, ly, rx, ry = 40, 60 + tilt, 200, 60 - tilt
    d.line([(lx, ly), (rx, ry)], fill=INK, width=4)
    for x, y, name in ((lx, ly, a), (rx, ry, b)):
        d.line([(x, y), (x - 20, y + 30)], fill=INK)
        d.line([(x, y), (x + 20, y + 30)], fill=INK)
        d.arc([x - 28, y + 20, x + 28, y + 44], 0, 180, fill=INK, width=3)
        _fruit(d, name, x, y + 22)
        _text_c(d, (x, y + 56), name, 12)
    rng.next()
    return im


# Each fruit has its own outline and a colour of its own grey level, so two balances that
# hold the fruits the other way round look different, not only in their small labels.
FRUIT_FILL = {"apple": (200, 30, 40), "orange": (245, 140, 20), "lemon": (245, 225, 60),
              "pear": (120, 185, 60), "plum": (80, 30, 100), "peach": (250, 200, 175)}


def _fruit(d, name, x, y):
    col = FRUIT_FILL.get(name, RGB["gray"])
    if name == "lemon":
        d.ellipse([x - 17, y - 10, x + 17, y + 10], fill=col, outline=INK)
    elif name == "pear":
        d.ellipse([x - 7, y - 16, x + 7, y - 2], fill=col, outline=INK)
        d.ellipse([x - 12, y - 6, x + 12, y + 12], fill=col, outline=INK)
    elif name == "plum":
        d.ellipse([x - 9, y - 12, x + 9, y + 10], fill=col, outline=INK)
    elif name == "orange":
        d.ellipse([x - 15, y - 15, x + 15, y + 13], fill=col, outline=INK)
    else:
        d.ellipse([x - 13, y - 13, x + 13, y + 11], fill=col, outline=INK)
        if name == "peach":
            d.arc([x - 10, y - 13, x + 4, y + 11], 300, 60, fill=INK, width=1)
    if name in ("apple", "pear", "peach"):
        d.line([(x, y - (16 if name == "pear" else 13)), (x + 2, y - 20)], fill=(90, 60, 30), width=2)


def k_map(p):
    a, b, direction, seed = p
    rng = Rng(seed)
    im, d = _canvas(240, 200, (235, 245, 225))
    for x in range(0, 240, 30):
        d.line([(x, 0), (x, 200)], fill=(215, 225, 205))
    for y in range(0, 200, 30):
        d.line([(0, y), (240, y)], fill=(215, 225, 205))
    cx, cy = 110 + rng.randint(-10, 10), 105 + rng.randint(-10, 10)
    dx, dy = {"north": (0, -60), "south": (0, 60), "east": (70, 0), "west": (-70, 0)}[direction]
    for (x, y, name, col) in ((cx, cy, a, RGB["red"]), (cx + dx, cy + dy, b, RGB["blue"])):
        d.rectangle([x - 8, y - 8, x + 8, y + 8], fill=col, outline=INK)
        _text_c(d, (x, y + 16), name, 11)
    # compass rose
    d.line([(215, 20), (215, 50)], fill=INK, width=2)
    d.line([(200, 35), (230, 35)], fill=INK, width=2)
    d.polygon([(215, 14), (211, 24), (219, 24)], fill=INK)
    _text_c(d, (215, 8), "N", 10)
    _text_c(d, (215, 58), "S", 10)
    _text_c(d, (236, 35), "E", 10)
    _text_c(d, (194, 35), "W", 10)
    return im


def k_cars(p):
    d1, t1, d2, t2, seed = p
    rng = Rng(seed)
    im, d = _canvas(300, 140)
    lane = rng.randint(45, 75)
    top = rng.randint(20, 40)
    for row, (dist, label) in enumerate(((d1, "car A"), (d2, "car B"))):
        y = top + lane * row
        col = RGB[rng.choice(("red", "blue", "green", "orange"))]
        d.rounded_rectangle([10, y - 12, 50, y + 4], 4, fill=col)
        d.ellipse([14, y, 24, y + 10], fill=INK)
        d.ellipse([36, y, 46, y + 10], fill=INK)
        length = 1.2 * dist
        d.line([(55, y), (55 + length, y)], fill=INK, width=2)
        d.polygon([(60 + length, y), (52 + length, y - 5), (52 + length, y + 5)], fill=INK)
        d.text((55, y + 8), f"{label}: {dist} m in {t1 if row == 0 else t2} s", fill=INK, font=font(10))
    return im


def _gear(d, cx, cy, r, teeth, col):
    pts = []
    for j in range(teeth * 2):
        a = math.pi * j / teeth
        rr = r if j % 2 == 0 else r * 0.8
        pts.append((cx + rr * math.cos(a), cy + rr * math.sin(a)))
    d.polygon(pts, fill=col, outline=INK)
    d.ellipse([cx - 5, cy - 5, cx + 5, cy + 5], fill=INK)


def k_gears(p):
    n, first, seed = p
    rng = Rng(seed)
    im, d = _canvas(80 * n + 20, 130)
    for j in range(n):
        _gear(d, 50 + 80 * j, 70, 40, 12, RGB[rng.choice(("gray", "orange", "teal", "blue"))])
    # rotation arrow on the first gear
    if first == "clockwise":
        d.arc([5, 25, 95, 115], 200, 300, fill=RGB["red"], width=3)
        d.polygon([(80, 30), (68, 26), (74, 38)], fill=RGB["red"])
    else:
        d.arc([5, 25, 95, 115], 240, 340, fill=RGB["red"], width=3)
        d.polygon([(20, 30), (32, 26), (26, 38)], fill=RGB["red"])
    _text_c(d, (50, 120), "first", 10)
    _text_c(d, (50 + 80 * (n - 1), 120), "last", 10)
    return im


def k_bridges(p):
    labels, heights, seed = p
    rng = Rng(seed)
    im, d = _canvas(70 * len(labels) + 10, 200)
    for j, (lab, h) in enumerate(zip(labels, heights)):
        x = 20 + 70 * j
        col = RGB[rng.choice(("red", "blue", "green", "orange", "purple"))]
        for k in range(h):
            d.rectangle([x, 170 - 28 * (k + 1), x + 40, 170 - 28 * k], fill=col, outline=INK)
        _text_c(d, (x + 20, 185), lab, 13)
    d.line([(0, 170), (70 * len(labels) + 10, 170)], fill=INK, width=2)
    return im


def k_keys(p):
    keys, seed = p
    rng = Rng(seed)
    widths = [18 + 11 * len(k) for k in keys]
    im, d = _canvas(sum(widths) + 30 * len(keys) + 10, 80)
    x = 10
    for j, (k, w) in enumerate(zip(keys, widths)):
        d.rounded_rectangle([x, 15, x + w, 65], 6, fill=(240, 240, 240), outline=INK, width=2)
        _text_c(d, (x + w / 2, 40), k, 16)
        x += w
        if j < len(keys) - 1:
            _text_c(d, (x + 15, 40), "+", 18)
            x += 30
    rng.next()
    return im


def k_fileicon(p):
    ext, seed = p
    rng = Rng(seed)
    im, d = _canvas(130, 150)
    col = RGB[rng.choice(("blue", "green", "orange", "purple", "red"))]
    d.polygon([(30, 10), (85, 10), (105, 30), (105, 140), (30, 140)], fill=(250, 250, 250), outline=INK)
    d.polygon([(85, 10), (85, 30), (105, 30)], fill=(200, 200, 200), outline=INK)
    d.rectangle([22, 80, 113, 110], fill=col)
    _text_c(d, (67, 95), ext, 16, (255, 255, 255))
    return im


def k_gate(p):
    g, seed = p
    rng = Rng(seed)
    im, d = _canvas(200, 120)
    col = RGB[rng.choice(("blue", "teal", "purple"))]
    inputs = (60,) if g == "NOT" else (45, 75)
    for y in inputs:
        d.line([(10, y), (60, y)], fill=INK, width=2)
    bubble = g in ("NAND", "NOR", "NOT")
    if g in ("AND", "NAND"):
        d.rectangle([55, 25, 95, 95], fill=col)
        d.pieslice([60, 25, 130, 95], -90, 90, fill=col)
        out = 130
    elif g == "NOT":
        d.polygon([(55, 25), (55, 95), (115, 60)], fill=col)
        out = 115
    else:
        d.pieslice([20, 25, 140, 95], -90, 90, fill=col)
        d.ellipse([38, 25, 72, 95], fill=(255, 255, 255))
        out = 140
        if g == "XOR":
            d.arc([28, 25, 62, 95], -90, 90, fill=INK, width=3)
    if bubble:
        d.ellipse([out, 54, out + 12, 66], fill=(255, 255, 255), outline=INK, width=2)
        out += 12
    d.line([(out, 60), (190, 60)], fill=INK, width=2)
    return im


def k_leds(p):
    bits, seed = p
    rng = Rng(seed)
    n = len(bits)
    im, d = _canvas(50 * n + 20, 100)
    lit = RGB[rng.choice(("yellow", "green", "red"))]
    for j, b in enumerate(bits):
        x = 35 + 50 * j
        d.ellipse([x - 18, 20, x + 18, 56], fill=lit if b else (60, 60, 60), outline=INK, width=2)
        _text_c(d, (x, 78), str(2 ** (n - 1 - j)), 12)
    return im


def k_flowshape(p):
    shape, seed = p
    rng = Rng(seed)
    im, d = _canvas(200, 150)
    hi = RGB[rng.choice(("orange", "teal", "pink"))]
    cx, cy = 100, 75
    if shape == "terminator":
        d.rounded_rectangle([45, 50, 155, 100], 25, fill=hi, outline=INK, width=2)
    elif shape == "process":
        d.rectangle([45, 50, 155, 100], fill=hi, outline=INK, width=2)
    elif shape == "decision":
        d.polygon([(cx, 30), (160, cy), (cx, 120), (40, cy)], fill=hi, outline=INK)
    elif shape == "data":
        d.polygon([(65, 50), (165, 50), (135, 100), (35, 100)], fill=hi, outline=INK)
    elif shape == "connector":
        d.ellipse([75, 50, 125, 100], fill=hi, outline=INK, width=2)
    else:
        d.polygon([(45, 50), (155, 50), (155, 95), (128, 88), (100, 100), (72, 110), (45, 100)], fill=hi, outline=INK)
    d.line([(cx, 5), (cx, 30 if shape == "decision" else 50)], fill=INK, width=2)
    d.line([(cx, 120 if shape == "decision" else 100), (cx, 145)], fill=INK, width=2)
    return im


def k_network(p):
    top, n, seed = p
    rng = Rng(seed)
    im, d = _canvas(200, 180)
    cx, cy, r = 100, 90, 65
    nodes = [(cx + r * math.cos(2 * math.pi * j / n), cy + r * math.sin(2 * math.pi * j / n)) for j in range(n)]
    edges = []
    if top == "star":
        nodes.append((cx, cy))
        edges = [(j, n) for j in range(n)]
    elif top == "ring":
        edges = [(j, (j + 1) % n) for j in range(n)]
    elif top == "mesh":
        edges = [(a, b) for a in range(n) for b in range(a + 1, n)]
    elif top == "bus":
        nodes = [(25 + 150 * j / (n - 1), 60 if j % 2 else 130) for j in range(n)]
        d.line([(15, 95), (185, 95)], fill=INK, width=4)
        for x, y in nodes:
            d.line([(x, y), (x, 95)], fill=INK, width=2)
    else:  # tree
        nodes = [(100, 25), (55, 85), (145, 85)] + [(30 + 45 * j, 150) for j in range(n - 3 + 1)]
        edges = [(0, 1), (0, 2)] + [(1 if j < 2 else 2, 3 + j) for j in range(len(nodes) - 3)]
    for a, b in edges:
        d.line([nodes[a], nodes[b]], fill=INK, width=2)
    col = RGB[rng.choice(("blue", "green", "purple"))]
    for x, y in nodes:
        d.rectangle([x - 10, y - 8, x + 10, y + 8], fill=col, outline=INK)
    return im


def k_labelled_figures(p):
    """A row of figures, each with its label under it: the options of the question are
    these labels, so the picture alone says which figure each option is."""
    shapes, labels, color, seed = p
    rng = Rng(seed)
    im, d = _canvas(90 * len(shapes), 130)
    for j, (shape, label) in enumerate(zip(shapes, labels)):
        cx = 90 * j + 45
        draw_figure(d, shape, cx + rng.randint(-4, 4), 52 + rng.randint(-4, 4), 30, RGB[color], rng.random() * 0.6)
        _text_c(d, (cx, 112), label, 16)
    return im


KINDS = {
    "objects": k_objects, "two_groups": k_two_groups, "shape": k_shape, "fraction": k_fraction, "bars": k_bars,
    "clock": k_clock, "numberline": k_numberline, "array": k_array, "angle": k_angle, "triangle": k_triangle,
    "grid_rect": k_grid_rect, "line_graph": k_line_graph, "coord": k_coord, "spinner": k_spinner,
    "pattern": k_pattern, "inequality": k_inequality, "square_model": k_square_model, "magnets": k_magnets,
    "magnet_pairs": k_magnet_pairs, "tool": _named, "icon": _named, "device": _named, "machine": _named,
    "thermometer": k_thermometer, "thermometers": k_thermometers, "moon": k_moon, "cylinder": k_cylinder,
    "circuit": k_circuit, "balance": k_balance, "map": k_map, "cars": k_cars, "gears": k_gears,
    "bridges": k_bridges, "keys": k_keys, "fileicon": k_fileicon, "gate": k_gate, "leds": k_leds,
    "flowshape": k_flowshape, "network": k_network,
    "labelled_figures": k_labelled_figures,
}


def draw(spec: ImageSpec) -> Image.Image:
    try:
        fn = KINDS[spec.kind]
    except KeyError:
        raise ValueError(f"unknown image kind {spec.kind!r}") from None
    return fn(spec.params)


BACKGROUNDS = ((255, 255, 255), (250, 248, 240), (240, 246, 255), (245, 255, 245), (255, 246, 246), (248, 248, 248))


MAX_SIDE = 320


def stage(im: Image.Image, seed: int) -> Image.Image:
    """Place a drawing on a page the way sites vary their pictures: scale, margins, offset,
    paper colour and a faint shading differ per question (from the spec's seed), so two
    questions that ask the same thing still have perceptually different images."""
    rng = Rng(seed ^ 0x5EED5EED)
    scale = 0.75 + 0.5 * rng.random()
    w, h = max(1, round(im.width * scale)), max(1, round(im.height * scale))
    pad_w, pad_h = rng.randint(4, 12 + w // 2), rng.randint(4, 12 + h // 2)
    shrink = min(1.0, MAX_SIDE / max(w + pad_w, h + pad_h))
    if shrink < 1.0:
        w, h = max(1, round(w * shrink)), max(1, round(h * shrink))
        pad_w, pad_h = max(2, round(pad_w * shrink)), max(2, round(pad_h * shrink))
    if (w, h) != im.size:
        im = im.resize((w, h), Image.BILINEAR)
    bg = BACKGROUNDS[rng.below(len(BACKGROUNDS))]
    W, H = w + pad_w, h + pad_h
    shade = _shading(W, H, rng.randint(0, 359), rng.randint(12, 48))
    page = Image.merge("RGB", [Image.new("L", (W, H), c) for c in bg])
    page = Image.composite(Image.new("RGB", (W, H), (110, 110, 120)), page, shade)
    mask = im.convert("L").point(lambda v: 0 if v >= 250 else 255)
    page.paste(im, (rng.below(pad_w + 1), rng.below(pad_h + 1)), mask)
    return page


@lru_cache(maxsize=64)
def _gradient(angle: int) -> Image.Image:
    return Image.linear_gradient("L").rotate(angle, resample=Image.BILINEAR, expand=False, fillcolor=128)


def _shading(w: int, h: int, angle: int, strength: int) -> Image.Image:
    """A faint linear shading (0..strength) across the page at ``angle`` degrees."""
    g = _gradient(angle - angle % 6).resize((w, h), Image.BILINEAR)
    return g.point(lambda v: v * strength // 255)


def _seed_of(spec: ImageSpec) -> int:
    last = spec.params[-1] if spec.params else 0
    if isinstance(last, int) and not isinstance(last, bool):
        return last
    return int(spec.content_key, 16)


RESCAN_SCALE = (0.92, 1.08)
RESCAN_SIDE = (-0.03, 0.04)  # per side, as a share of the page: cut (negative) or widened
RESCAN_GRAIN = 3.0           # standard deviation of the scanner's noise, grey levels
RESCAN_QUALITY = 72


def rescan(page: Image.Image, seed: int) -> Image.Image:
    """The page printed and scanned again: rescaled a little, each margin cut or widened a
    little (the paper goes on: a widened margin repeats the page's edge), with grain.
    Deterministic from ``seed``."""
    import numpy as np

    rng = Rng(seed ^ 0x5CA1AB1E)
    scale = RESCAN_SCALE[0] + (RESCAN_SCALE[1] - RESCAN_SCALE[0]) * rng.random()
    im = page.resize((max(8, round(page.width * scale)), max(8, round(page.height * scale))), Image.BILINEAR)
    w, h = im.size
    lo, hi = RESCAN_SIDE
    left, top, right, bottom = (round((lo + (hi - lo) * rng.random()) * (w if k % 2 == 0 else h)) for k in range(4))
    pixels = np.asarray(im, dtype=np.float64)
    pixels = pixels[max(0, -top): h - max(0, -bottom), max(0, -left): w - max(0, -right)]
    pad = ((max(0, top), max(0, bottom)), (max(0, left), max(0, right)), (0, 0))
    pixels = np.pad(pixels, pad, mode="edge")
    grain = np.random.default_rng(rng.next()).normal(0.0, RESCAN_GRAIN, pixels.shape)
    return Image.fromarray(np.clip(pixels + grain, 0, 255).round().astype(np.uint8))


def render(spec: ImageSpec) -> bytes:
    im = stage(draw(spec), _seed_of(spec))
    buf = io.BytesIO()
    if spec.variant == "jpeg":
        im.save(buf, "JPEG", quality=80)
    elif spec.variant == "rescan":
        rescan(im, _seed_of(spec)).save(buf, "JPEG", quality=RESCAN_QUALITY)
    elif spec.variant == "resize":
        im = im.resize((max(1, im.width * 3 // 4), max(1, im.height * 3 // 4)), Image.LANCZOS)
        im.save(buf, "PNG", compress_level=3)
    else:
        im.save(buf, "PNG", compress_level=3)
    return buf.getvalue()
