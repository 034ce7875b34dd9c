"""Question templates ("families") of the demo site and the skills built from them.

A family turns three seeded generators into one question: ``t`` draws what the question
text depends on, ``c`` the content (images, numbers), ``o`` the options and their order.
Keeping them apart lets the generator plant templated non-duplicates (same text, other
image; or same text and image, other options) by swapping one generator.

Problem and option texts are built from segments: a ``str`` is prose (no math), a
``(unicode, latex)`` pair is one maximal formula span as a web page writes it and its
Mathpix-style LaTeX (without the ``\\( \\)`` delimiters). A page may already write a formula
in TeX (``tex``: ``$latex$`` or ``\\( latex \\)``); its pair is (that text, the TeX inside).

Every image spec carries a 32-bit ``seed`` drawn from ``c`` so that two questions never
share an image by accident: two questions are duplicates only when the generator says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pipelines.ingest.demo_site.imagespec import ImageSpec
from pipelines.ingest.demo_site.rng import Rng

# ---- CogME STEM taxonomy (REFERENCE.md section 3) -------------------------------------
OBJ, LIV, SUB, SHP, NUM = "Object", "Living thing", "Substance/Material", "Shape/Figure", "Number/Quantity"
DIA, SYM, FEM, PLC, TIM, CS = (
    "Diagram/Chart/Table", "Symbol/Formula", "Force/Energy/Motion", "Place/Direction", "Time", "Commonsense")
IDN, FEA, REL, QTY, MEA, SEQ, CAU, STR = (
    "Identity", "Feature", "Relationship", "Quantity", "Means", "Sequence/Pattern", "Causality", "Structure")
REC, GRA, REA = "Recall", "Grasping", "Reasoning"
TARGETS = (OBJ, LIV, SUB, SHP, NUM, DIA, SYM, FEM, PLC, TIM, CS)
CONTENTS = (IDN, FEA, REL, QTY, MEA, SEQ, CAU, STR)
THINKINGS = (REC, GRA, REA)


@dataclass(frozen=True, slots=True)
class Tags:
    target: tuple[str, ...]
    content: tuple[str, ...]
    thinking: str


@dataclass(slots=True)
class Content:
    segs: list            # problem text segments
    image: ImageSpec | None
    options: list         # each: list of segments (text option) or ImageSpec (image option)
    answer: int
    tags: Tags
    tkey: str             # text template id within the family
    # "shuffled", or "kept-order:<reason>" when the options only read right in this order
    # (labels of figures drawn in the picture; an option referring to the others)
    option_order: str = "shuffled"


def compose(segs) -> tuple[str, str, tuple]:
    """(text as shown, text with LaTeX applied, ((span, latex), ...)) of a segment list."""
    plain, latex, formulas = [], [], []
    for s in segs:
        if s.__class__ is str:
            plain.append(s)
            latex.append(s)
        else:
            plain.append(s[0])
            latex.append("\\( " + s[1] + " \\)")
            formulas.append(s)
    return "".join(plain), "".join(latex), tuple(formulas)


def num(n: int):
    """A number as a page shows it: negative numbers use U+2212 and are math."""
    return ("\u2212" + str(-n), "-" + str(-n)) if n < 0 else str(n)


GLYPH_FRACTIONS = {(1, 2): "\u00bd", (1, 3): "\u2153", (1, 4): "\u00bc", (3, 4): "\u00be", (2, 3): "\u2154"}


def frac(n: int, d: int, glyph: bool = False):
    if glyph and (n, d) in GLYPH_FRACTIONS:
        return (GLYPH_FRACTIONS[(n, d)], f"\\frac{{{n}}}{{{d}}}")
    return (f"{n}/{d}", f"\\frac{{{n}}}{{{d}}}")


def place(o: Rng, correct, distractors: list, k: int):
    """Shuffle ``correct`` among ``k - 1`` distractors; returns (options, answer index)."""
    opts = [correct]
    opts += distractors[: k - 1]
    o.shuffle(opts)
    for j, x in enumerate(opts):
        if x is correct:
            return opts, j
    raise AssertionError("unreachable")


def near_ints(o: Rng, value: int, count: int, lo: int, hi: int, spread: int = 3) -> list[int]:
    """``count`` distinct integers near ``value`` in [lo, hi], never equal to it."""
    out: list[int] = []
    width = spread
    while len(out) < count:
        cand = value + o.randint(-width, width)
        if lo <= cand <= hi and cand != value and cand not in out:
            out.append(cand)
        else:
            width += 1
            if width > 10 * (hi - lo + spread):
                lo, hi = lo - 10, hi + 10
    return out


def opt(text) -> list:
    return [text]


def pick_k(o: Rng, dist: tuple) -> int:
    """Draw a number of options from ((k, weight), ...)."""
    r = o.random()
    for k, w in dist:
        r -= w
        if r < 0:
            return k
    return dist[-1][0]


COLORS = ("red", "blue", "green", "orange", "purple", "pink", "teal", "brown")
COUNT_SHAPES = ("stars", "hearts", "circles", "squares", "triangles", "suns", "balloons", "flowers")
FLAT_SHAPES = ("circle", "triangle", "square", "rectangle", "pentagon", "hexagon", "trapezoid", "rhombus", "oval", "octagon")
NAMES = ("José", "Zoë", "Chloé", "Renée", "André", "Mia", "Liam", "Noah", "Ava", "Chen", "Aiyana", "Ibrahim", "Léa", "Mateo")
MONTHS = ("January", "February", "March", "April", "May", "September", "October", "November")

# ---- math -----------------------------------------------------------------------------


def fam_count_objects(t, c, o, sk, k):
    shape = t.choice(COUNT_SHAPES)
    hi = (5, 10, 20)[min(sk.level, 2)]
    n = c.randint(1, hi)
    color = c.choice(COLORS)
    image = ImageSpec("objects", (shape[:-1], n, color, c.seed32()))
    tv = t.below(2)
    segs = [f"How many {shape} are there?"] if tv == 0 else [f"Count the {shape}. How many are there?"]
    options, ans = place(o, opt(str(n)), [opt(str(x)) for x in near_ints(o, n, k - 1, 0, hi + 3, 2)], k)
    return Content(segs, image, options, ans, Tags((OBJ, NUM), (QTY,), GRA), f"count{tv}")


def fam_add_pictures(t, c, o, sk, k):
    shape = t.choice(COUNT_SHAPES)
    hi = (5, 10, 20)[min(sk.level, 2)]
    a, b = t.randint(1, hi // 2 + 1), t.randint(1, hi // 2 + 1)
    image = ImageSpec("two_groups", (shape[:-1], a, b, c.choice(COLORS), c.seed32()))
    tv = t.below(2)
    expr = (f"{a} + {b}", f"{a}+{b}")
    segs = ["What is ", expr, "? Use the picture."] if tv == 0 else ["Use the picture to find ", expr, "."]
    s = a + b
    options, ans = place(o, opt(str(s)), [opt(str(x)) for x in near_ints(o, s, k - 1, 0, 2 * hi, 2)], k)
    return Content(segs, image, options, ans, Tags((OBJ, NUM, SYM), (QTY,), REA), f"add{tv}")


def fam_identify_shape(t, c, o, sk, k):
    pool = FLAT_SHAPES[: 4 + min(sk.level, 3) * 2]
    shape = c.choice(pool)
    image = ImageSpec("shape", (shape, c.choice(COLORS), c.seed32()))
    tv = t.below(2)
    segs = ["What shape is this?"] if tv == 0 else ["Which shape is shown?"]
    wrong = [s for s in pool if s != shape]
    options, ans = place(o, opt(shape), [opt(x) for x in o.sample(wrong, k - 1)], k)
    return Content(segs, image, options, ans, Tags((SHP,), (IDN,), REC), f"shape{tv}")


def fam_select_shape(t, c, o, sk, k):
    pool = FLAT_SHAPES[: 4 + min(sk.level, 3) * 2]
    shape = t.choice(pool)
    segs = [f"Which shape is a {shape}?"] if t.below(2) == 0 else [f"Select the {shape}."]
    wrong = [s for s in pool if s != shape]
    imgs = [ImageSpec("shape", (s, c.choice(COLORS), c.seed32())) for s in [shape] + o.sample(wrong, k - 1)]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((SHP,), (IDN,), GRA), "select-shape")


def fam_fraction_shaded(t, c, o, sk, k):
    d = c.randint(2, (4, 8, 12)[min(sk.level, 2)])
    n = c.randint(1, d - 1)
    image = ImageSpec("fraction", (c.choice(("circle", "rectangle")), d, n, c.choice(COLORS), c.seed32()))
    segs = ["What fraction of the shape is shaded?"] if t.below(2) == 0 else ["What fraction of the shape is colored?"]
    glyph = sk.level == 0
    cands = []
    for nn, dd in ((d - n, d), (n, d + 1), (n + 1, d), (n, d - 1), (d, n), (n + 2, d + 2)):
        if 0 < nn and 1 < dd and (nn, dd) != (n, d) and (nn, dd) not in cands:
            cands.append((nn, dd))
    wrong = [opt(frac(x, y, glyph)) for x, y in o.sample(cands, min(k - 1, len(cands)))]
    options, ans = place(o, opt(frac(n, d, glyph)), wrong, k)
    return Content(segs, image, options, ans, Tags((SHP, NUM), (QTY, STR), GRA), "fraction")


def fam_bar_graph(t, c, o, sk, k):
    topics = (("fruit", ("apples", "bananas", "grapes", "pears", "plums")),
              ("sport", ("soccer", "tennis", "hockey", "swimming", "golf")),
              ("pet", ("dogs", "cats", "fish", "birds", "rabbits")),
              ("color", ("red", "blue", "green", "yellow", "purple")))
    topic, labels = t.choice(topics)
    labels = list(labels[: max(k, 3)])
    scale = (5, 10, 50)[min(sk.level, 2)]
    values = c.sample(range(1, scale + 1), len(labels))
    name = t.choice(NAMES)
    total = sum(values)
    date = f"{t.randint(1, 12)}/{t.randint(1, 28)}/{t.randint(2015, 2024)}"
    image = ImageSpec("bars", (f"Favorite {topic}", tuple(labels), tuple(values), c.choice(COLORS), c.seed32()))
    tv = t.below(3)
    if tv == 0:
        segs = [f"On {date}, {name} asked {total} classmates about their favorite {topic}. Which {topic} did the most classmates choose?"]
        best = labels[values.index(max(values))]
        options, ans = place(o, opt(best), [opt(x) for x in labels if x != best][: k - 1], k)
        tags = Tags((DIA, NUM), (QTY, REL), REA)
    elif tv == 1:
        segs = [f"{name} made a bar graph of favorite {topic}s. Which {topic} did the fewest people choose?"]
        worst = labels[values.index(min(values))]
        options, ans = place(o, opt(worst), [opt(x) for x in labels if x != worst][: k - 1], k)
        tags = Tags((DIA, NUM), (QTY, REL), REA)
    else:
        j = t.below(len(labels))
        segs = [f"Look at the bar graph. How many people chose {labels[j]}?"]
        v = values[j]
        options, ans = place(o, opt(str(v)), [opt(str(x)) for x in near_ints(o, v, k - 1, 0, scale + 5, 2)], k)
        tags = Tags((DIA, NUM), (QTY,), GRA)
    return Content(segs, image, options, ans, tags, f"bars{tv}")


def fam_read_clock(t, c, o, sk, k):
    step = (60, 30, 15, 5, 1)[min(sk.level, 4)]
    h = c.randint(1, 12)
    m = c.randint(0, 59) // step * step
    image = ImageSpec("clock", (h, m, c.seed32()))
    segs = ["What time is shown?"] if t.below(2) == 0 else ["What time does the clock show?"]
    wrong = []
    for dh, dm in o.sample(((0, 30), (1, 0), (-1, 15), (0, 15), (3, 0), (0, 45), (2, 30), (5, 0), (-2, 0), (6, 5)), 6):
        hh, mm = (h + dh - 1) % 12 + 1, (m + dm) % 60
        if (hh, mm) != (h, m) and (hh, mm) not in wrong:
            wrong.append((hh, mm))
    options, ans = place(o, opt(f"{h}:{m:02d}"), [opt(f"{a}:{b:02d}") for a, b in wrong[: k - 1]], k)
    return Content(segs, image, options, ans, Tags((TIM, NUM), (IDN,), GRA), "clock")


def fam_number_line(t, c, o, sk, k):
    level = min(sk.level, 3)
    step = (1, 2, 10, 1)[level]
    start = (0, 0, 0, -10)[level]
    stop = start + 10 * step
    v = start + c.randint(1, 9) * step
    image = ImageSpec("numberline", (start, stop, step, v, c.seed32()))
    segs = ["What number is shown on the number line?"] if t.below(2) == 0 else ["Which number does the dot show?"]
    wrong = [num(x) for x in near_ints(o, v, k - 1, start, stop, 2 * step) if x != v]
    options, ans = place(o, opt(num(v)), [opt(w) for w in wrong], k)
    return Content(segs, image, options, ans, Tags((NUM, DIA), (QTY, SEQ), GRA), "numberline")


def fam_array_multiplication(t, c, o, sk, k):
    r, q = c.randint(2, 5 + sk.level), c.randint(2, 6 + sk.level)
    image = ImageSpec("array", (r, q, c.choice(COLORS), c.seed32()))
    segs = ["Which multiplication sentence does the array show?"] if t.below(2) == 0 else ["Which multiplication sentence matches the array?"]

    def sentence(a, b):
        return [(f"{a} \u00d7 {b} = {a * b}", f"{a} \\times {b}={a * b}")]

    wrong_pairs = []
    for a, b in o.sample(((r + 1, q), (r, q + 1), (r - 1, q), (r, q - 1), (r + 2, q + 1), (r, q + 2), (r + 1, q + 1)), 5):
        if a > 0 and b > 0 and {a, b} != {r, q} and (a, b) not in wrong_pairs:
            wrong_pairs.append((a, b))
    options, ans = place(o, sentence(r, q), [sentence(a, b) for a, b in wrong_pairs[: k - 1]], k)
    return Content(segs, image, options, ans, Tags((SHP, SYM, NUM), (QTY, STR), REA), "array")


def fam_measure_angle(t, c, o, sk, k):
    deg = c.randint(2, 17) * 10
    image = ImageSpec("angle", (deg, c.seed32()))
    tv = t.below(2)
    if tv == 0:
        segs = ["What is the measure of ", ("\u2220ABC", "\\angle A B C"), "?"]
        wrong = near_ints(o, deg // 10, k - 1, 1, 18, 3)
        options, ans = place(o, [(f"{deg}\u00b0", f"{deg}^{{\\circ}}")],
                             [[(f"{w * 10}\u00b0", f"{w * 10}^{{\\circ}}")] for w in wrong], k)
        tags = Tags((SHP, NUM, SYM), (QTY,), GRA)
    else:
        segs = ["Is ", ("\u2220ABC", "\\angle A B C"), " acute, right, or obtuse?"]
        kind = "acute" if deg < 90 else "right" if deg == 90 else "obtuse"
        options, ans = place(o, opt(kind), [opt(x) for x in ("acute", "right", "obtuse") if x != kind][: k - 1], k)
        tags = Tags((SHP, SYM), (FEA,), GRA)
    return Content(segs, image, options, ans, tags, f"angle{tv}")


def fam_triangle_angles(t, c, o, sk, k):
    a, b = c.randint(3, 9) * 10, c.randint(2, 8) * 5
    cc = 180 - a - b
    image = ImageSpec("triangle", (a, b, c.seed32()))
    segs = ["In ", ("\u25b3ABC", "\\triangle A B C"), ", what is the measure of ", ("\u2220C", "\\angle C"), "?"]
    wrong = near_ints(o, cc // 5, k - 1, 1, 35, 4)
    options, ans = place(o, [(f"{cc}\u00b0", f"{cc}^{{\\circ}}")],
                         [[(f"{w * 5}\u00b0", f"{w * 5}^{{\\circ}}")] for w in wrong], k)
    return Content(segs, image, options, ans, Tags((SHP, NUM, SYM), (QTY, REL), REA), "triangle")


def fam_area_grid(t, c, o, sk, k):
    w, h = c.randint(2, 6 + sk.level), c.randint(2, 5 + sk.level)
    image = ImageSpec("grid_rect", (w, h, c.choice(COLORS), c.seed32()))
    tv = t.below(2)
    if tv == 0:
        segs = ["What is the area of the shaded rectangle?"]
        v = w * h
    else:
        segs = ["What is the perimeter of the shaded rectangle?"]
        v = 2 * (w + h)
    options, ans = place(o, opt(f"{v} square units" if tv == 0 else f"{v} units"),
                         [opt(f"{x} square units" if tv == 0 else f"{x} units") for x in near_ints(o, v, k - 1, 1, 200, 3)], k)
    return Content(segs, image, options, ans, Tags((SHP, NUM), (QTY, STR), REA), f"area{tv}")


def _line_eq(m: int, b: int):
    mt = {1: "", -1: "\u2212"}.get(m, str(m).replace("-", "\u2212"))
    ml = {1: "", -1: "-"}.get(m, str(m))
    if b == 0:
        return (f"y = {mt}x", f"y={ml} x")
    sign_t, sign_l = ("+", "+") if b > 0 else ("\u2212", "-")
    return (f"y = {mt}x {sign_t} {abs(b)}", f"y={ml} x{sign_l}{abs(b)}")


def fam_linear_graph(t, c, o, sk, k):
    m, b = t.choice((-3, -2, -1, 1, 2, 3)), t.randint(-4, 4)
    others = []
    for mm, bb in ((-m, b), (m, -b if b else 2), (m, b + 2), (m + 1 if m != -1 else 2, b), (-m, -b - 1)):
        if (mm, bb) != (m, b) and mm != 0 and (mm, bb) not in others:
            others.append((mm, bb))
    tv = t.below(2)
    if tv == 0:
        segs = ["Which graph shows ", _line_eq(m, b), "?"]
        imgs = [ImageSpec("line_graph", (mm, bb, c.seed32())) for mm, bb in [(m, b)] + others[: k - 1]]
        options, ans = place(o, imgs[0], imgs[1:], k)
        tags = Tags((DIA, SYM), (REL,), GRA)
        image = None
    else:
        image = ImageSpec("line_graph", (m, b, c.seed32()))
        segs = ["Which equation does the graph show?"]
        options, ans = place(o, [_line_eq(m, b)], [[_line_eq(mm, bb)] for mm, bb in others[: k - 1]], k)
        tags = Tags((DIA, SYM), (REL,), REA)
    return Content(segs, image, options, ans, tags, f"line{tv}")


def _point(x: int, y: int):
    def part(v):
        return ("\u2212" + str(-v), "-" + str(-v)) if v < 0 else (str(v), str(v))
    px, py = part(x), part(y)
    return (f"({px[0]}, {py[0]})", f"({px[1]}, {py[1]})")


def fam_coordinate_point(t, c, o, sk, k):
    lo = -5 if sk.level else 0
    x, y = c.randint(lo, 5), c.randint(lo, 5)
    label = t.choice("PQRSTK")
    image = ImageSpec("coord", (x, y, label, lo, c.seed32()))
    segs = [f"What are the coordinates of point {label}?"]
    wrong = []
    for xx, yy in o.sample(((y, x), (x + 1, y), (x, y - 1), (-x, y), (x, -y), (x - 1, y + 1), (x + 2, y), (x, y + 2)), 6):
        if (xx, yy) != (x, y) and (xx, yy) not in wrong:
            wrong.append((xx, yy))
    options, ans = place(o, [_point(x, y)], [[_point(a, b)] for a, b in wrong[: k - 1]], k)
    return Content(segs, image, options, ans, Tags((DIA, NUM, PLC), (REL, QTY), GRA), "coord")


def fam_spinner(t, c, o, sk, k):
    sectors = (4, 6, 8)[min(sk.level, 2)]
    colors = ("red", "blue", "green", "yellow")
    cols = tuple(c.choice(colors) for _ in range(sectors))
    target = t.choice(colors)
    if target not in cols:
        cols = (target,) + cols[1:]
    image = ImageSpec("spinner", tuple([cols, c.seed32()]))
    n = cols.count(target)
    segs = [f"The spinner is spun once. What is the probability of landing on {target}?"]
    wrong = []
    for nn in (sectors - n, n + 1, n - 1, n + 2, 1):
        if 0 < nn <= sectors and nn != n and nn not in wrong:
            wrong.append(nn)
    while len(wrong) < k - 1:
        wrong.append(n + 10 + len(wrong))
    options, ans = place(o, [frac(n, sectors)], [[frac(w, sectors)] for w in wrong[: k - 1]], k)
    return Content(segs, image, options, ans, Tags((DIA, NUM), (QTY, CAU), REA), "spinner")


def fam_pattern(t, c, o, sk, k):
    pool = ("circle", "triangle", "square", "star", "heart")
    period = 2 + min(sk.level, 2)
    unit = c.sample(pool, period)
    color = c.choice(COLORS)
    shown = 2 * period + c.below(period)
    seq = tuple(unit[j % period] for j in range(shown))
    answer = unit[shown % period]
    image = ImageSpec("pattern", (seq, color, c.seed32()))
    segs = ["What comes next?"] if t.below(2) == 0 else ["Which shape comes next in the pattern?"]
    wrong = [s for s in pool if s != answer]
    imgs = [ImageSpec("shape", (s, color, c.seed32())) for s in [answer] + o.sample(wrong, k - 1)]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, image, options, ans, Tags((SHP,), (SEQ,), REA), "pattern")


def fam_inequality(t, c, o, sk, k):
    ops = (("<", "<"), ("\u2264", "\\leq"), (">", ">"), ("\u2265", "\\geq"))
    j = t.below(4)
    b = t.randint(-6, 6)
    bt = ("\u2212" + str(-b), "-" + str(-b)) if b < 0 else (str(b), str(b))
    segs = ["Which number line shows ", (f"x {ops[j][0]} {bt[0]}", f"x {ops[j][1]} {bt[1]}"), "?"]
    alts = [(j, b)] + [(jj, bb) for jj, bb in ((j ^ 1, b), (j ^ 2, b), (j ^ 3, b), (j, b + 1)) if (jj, bb) != (j, b)]
    imgs = [ImageSpec("inequality", (bb, "<\u2264>\u2265"[jj], c.seed32())) for jj, bb in alts[:k]]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((DIA, SYM, NUM), (REL,), GRA), "inequality")


def fam_square_root(t, c, o, sk, k):
    n = c.randint(2, 9 + sk.level)
    image = ImageSpec("square_model", (n, c.choice(COLORS), c.seed32()))
    tv = t.below(2)
    if tv == 0:
        segs = ["The model is a square made of unit squares. Which expression gives the length of one side?"]
        correct = [(f"\u221a{n * n}", f"\\sqrt{{{n * n}}}")]
        wrong = [[(f"{n * n} \u00f7 2", f"{n * n} \\div 2")], [(f"{n * n}\u00b2", f"{n * n}^{{2}}")],
                 [(f"\u221a{n * n + 2 * n + 1}", f"\\sqrt{{{n * n + 2 * n + 1}}}")], [(f"{n * n} \u2212 {n}", f"{n * n}-{n}")]]
    else:
        segs = ["Which expression gives the number of unit squares in the model?"]
        correct = [(f"{n}\u00b2", f"{n}^{{2}}")]
        wrong = [[(f"{n} \u00d7 2", f"{n} \\times 2")], [(f"{n + 1}\u00b2", f"{n + 1}^{{2}}")],
                 [(f"2\u00b2 \u00d7 {n}", f"2^{{2}} \\times {n}")], [(f"\u221a{n}", f"\\sqrt{{{n}}}")]]
    options, ans = place(o, correct, o.sample(wrong, k - 1), k)
    return Content(segs, image, options, ans, Tags((SHP, SYM, NUM), (QTY, STR), REA), f"sqrt{tv}")


# ---- science --------------------------------------------------------------------------


def fam_magnets_attract(t, c, o, sk, k):
    left, right = c.choice(("NS", "SN")), c.choice(("NS", "SN"))
    image = ImageSpec("magnets", (left, right, c.seed32()))
    attract = left[1] != right[0]
    segs = ["Will these magnets attract or repel each other?"] if t.below(2) == 0 else ["Look at the magnets. Will they attract or repel?"]
    options, ans = place(o, opt("attract" if attract else "repel"), [opt("repel" if attract else "attract")], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM), (REL, CAU), REA), "magnets")


def fam_magnet_strength(t, c, o, sk, k):
    d1, d2 = c.sample((1, 2, 3, 4, 5, 6), 2)
    unit = t.choice(("cm", "in."))
    image = ImageSpec("magnet_pairs", (d1, d2, unit, c.seed32()))
    tv = t.below(2)
    strong = "Pair 1" if d1 < d2 else "Pair 2"
    weak = "Pair 2" if d1 < d2 else "Pair 1"
    if tv == 0:
        segs = ["Think about the magnetic force between the magnets in each pair. Which of the following statements is true?"]
        options, ans = place(o, opt(f"The magnetic force is stronger in {strong}."), [opt(f"The magnetic force is stronger in {weak}.")], 2)
    else:
        segs = ["The magnets in each pair are made of the same material. In which pair is the magnetic force weaker?"]
        options, ans = place(o, opt(weak), [opt(strong)], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM, NUM), (REL, CAU), REA), f"strength{tv}")


LAB_TOOLS = ("beaker", "test tube", "graduated cylinder", "magnifying glass", "balance", "thermometer", "dropper", "flask")


def fam_lab_tools(t, c, o, sk, k):
    tv = t.below(2)
    if tv == 0:
        tool = c.choice(LAB_TOOLS)
        image = ImageSpec("tool", (tool, c.seed32()))
        segs = ["Which laboratory tool is shown?"]
        options, ans = place(o, opt(tool), [opt(x) for x in o.sample([x for x in LAB_TOOLS if x != tool], k - 1)], k)
        return Content(segs, image, options, ans, Tags((OBJ,), (IDN,), REC), "tool0")
    tool = t.choice(LAB_TOOLS)
    segs = [f"Select the {tool}."]
    imgs = [ImageSpec("tool", (x, c.seed32())) for x in [tool] + o.sample([x for x in LAB_TOOLS if x != tool], k - 1)]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((OBJ,), (IDN,), GRA), "tool1")


def _deg(v: int, unit: str):
    return (f"{v}\u00b0{unit}", f"{v}^{{\\circ}} \\mathrm{{{unit}}}") if v >= 0 else (
        f"\u2212{-v}\u00b0{unit}", f"-{-v}^{{\\circ}} \\mathrm{{{unit}}}")


def fam_thermometer(t, c, o, sk, k):
    unit = t.choice(("C", "F"))
    v = c.randint(-10, 40) if unit == "C" else c.randint(10, 100)
    v -= v % (2 if sk.level else 5)
    image = ImageSpec("thermometer", (v, unit, c.seed32()))
    segs = ["What temperature does the thermometer show?"] if t.below(2) == 0 else ["Read the thermometer. What is the temperature?"]
    wrong = near_ints(o, v // 2, k - 1, -10, 60, 4)
    options, ans = place(o, [_deg(v, unit)], [[_deg(w * 2, unit)] for w in wrong], k)
    return Content(segs, image, options, ans, Tags((OBJ, NUM), (QTY,), GRA), "thermo")


def fam_thermal_energy(t, c, o, sk, k):
    thing = t.choice(("cup of cocoa", "bowl of soup", "glass of juice", "brick", "pot of water"))
    n = max(2, min(k, 3))
    temps = c.sample(range(5, 90, 5), n)
    labels = tuple("ABC"[:n])
    image = ImageSpec("thermometers", (labels, tuple(temps), "C", c.seed32()))
    tv = t.below(2)
    word = "more" if n == 2 else "the most"
    if tv == 0:
        segs = [f"Each {thing} has the same mass. Which {thing} has {word} thermal energy?"]
        best = temps.index(max(temps))
    else:
        word = "less" if n == 2 else "the least"
        segs = [f"Each {thing} has the same mass. Which {thing} has {word} thermal energy?"]
        best = temps.index(min(temps))
    names = [f"{thing} {x}" for x in labels]
    options, ans = place(o, opt(names[best]), [opt(x) for j, x in enumerate(names) if j != best], n)
    return Content(segs, image, options, ans, Tags((SUB, FEM, NUM), (REL, QTY), REA), f"thermal{tv}")


MATTER = {"solid": ("rock", "ice cube", "wooden block", "coin", "book", "crayon"),
          "liquid": ("milk", "water", "orange juice", "lemonade", "vinegar", "honey"),
          "gas": ("steam", "air in a balloon", "helium", "smoke", "bubbles of air", "fog")}


def fam_states_of_matter(t, c, o, sk, k):
    state = t.choice(("solid", "liquid", "gas"))
    segs = [f"Select the {state}."] if t.below(2) == 0 else [f"Which of these is a {state}?"]
    k = min(k, 3)
    others = [s for s in ("solid", "liquid", "gas") if s != state]
    items = [c.choice(MATTER[state])] + [c.choice(MATTER[s]) for s in o.sample(others, k - 1)]
    imgs = [ImageSpec("icon", (x, c.seed32())) for x in items]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((SUB, CS), (FEA, IDN), GRA), "matter")


LIVING = ("oak tree", "sunflower", "goldfish", "robin", "frog", "mushroom", "cactus", "butterfly")
NONLIVING = ("rock", "toy car", "chair", "cloud", "bicycle", "spoon", "kite", "shoe", "piñata")


def fam_living_things(t, c, o, sk, k):
    want_living = t.below(3) != 0
    segs = ["Select the living thing."] if want_living else ["Select the nonliving thing."]
    good, bad = (LIVING, NONLIVING) if want_living else (NONLIVING, LIVING)
    imgs = [ImageSpec("icon", (x, c.seed32())) for x in [c.choice(good)] + o.sample(bad, k - 1)]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((LIV, OBJ, CS), (FEA,), GRA), f"living{int(want_living)}")


MOON = ("new moon", "waxing crescent", "first quarter", "waxing gibbous", "full moon", "waning gibbous", "third quarter", "waning crescent")


def fam_moon_phase(t, c, o, sk, k):
    phase = c.choice(MOON)
    image = ImageSpec("moon", (phase, c.seed32()))
    segs = ["Which moon phase is shown?"] if t.below(2) == 0 else ["What is the phase of the Moon in the picture?"]
    options, ans = place(o, opt(phase), [opt(x) for x in o.sample([x for x in MOON if x != phase], k - 1)], k)
    return Content(segs, image, options, ans, Tags((OBJ, SHP, TIM), (IDN, SEQ), GRA), "moon")


def fam_volume_cylinder(t, c, o, sk, k):
    cap = (50, 100, 250)[min(sk.level, 2)]
    step = cap // 50
    v = c.randint(5, 48) * step
    image = ImageSpec("cylinder", (v, cap, c.seed32()))
    segs = ["What is the volume of the liquid in the graduated cylinder?"]
    options, ans = place(o, opt(f"{v} mL"), [opt(f"{w * step} mL") for w in near_ints(o, v // step, k - 1, 1, 50, 3)], k)
    return Content(segs, image, options, ans, Tags((OBJ, SUB, NUM), (QTY,), GRA), "volume")


def fam_circuit(t, c, o, sk, k):
    closed = c.below(2) == 1
    image = ImageSpec("circuit", (closed, c.choice(("switch", "gap")), c.seed32()))
    segs = ["Will the light bulb turn on?"] if t.below(2) == 0 else ["Look at the circuit. Will the bulb light up?"]
    options, ans = place(o, opt("yes" if closed else "no"), [opt("no" if closed else "yes")], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM, DIA), (CAU, STR), REA), "circuit")


def fam_closed_circuit(t, c, o, sk, k):
    segs = ["Which circuit is closed?"] if t.below(2) == 0 else ["In which circuit will the bulb light?"]
    imgs = [ImageSpec("circuit", (True, "switch", c.seed32()))] + [
        ImageSpec("circuit", (False, c.choice(("switch", "gap")), c.seed32())) for _ in range(k - 1)]
    options, ans = place(o, imgs[0], imgs[1:], k)
    return Content(segs, None, options, ans, Tags((DIA, FEM), (STR, CAU), GRA), "closed-circuit")


def fam_mass_balance(t, c, o, sk, k):
    a, b = c.sample(("apple", "orange", "pear", "lemon", "plum", "peach"), 2)
    heavier = c.below(2)
    image = ImageSpec("balance", (a, b, heavier, c.seed32()))
    segs = ["Look at the balance. Which fruit has more mass?"] if t.below(2) == 0 else ["Which object is heavier?"]
    win, lose = (a, b) if heavier == 0 else (b, a)
    options, ans = place(o, opt(f"the {win}"), [opt(f"the {lose}")], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM), (REL, QTY), REA), "balance")


DIRECTIONS = ("north", "south", "east", "west")


def fam_map_direction(t, c, o, sk, k):
    places = ("school", "park", "library", "museum", "zoo", "farm", "café", "bakery")
    a, b = t.sample(places, 2)
    d = c.choice(DIRECTIONS)
    image = ImageSpec("map", (a, b, d, c.seed32()))
    segs = [f"Look at the map. Which direction is the {b} from the {a}?"]
    options, ans = place(o, opt(d), [opt(x) for x in o.sample([x for x in DIRECTIONS if x != d], k - 1)], k)
    return Content(segs, image, options, ans, Tags((PLC, DIA), (REL,), GRA), "map")


def fam_speed_compare(t, c, o, sk, k):
    t1 = t2 = t.randint(2, 9)
    d1, d2 = c.sample(range(20, 200, 10), 2)
    image = ImageSpec("cars", (d1, t1, d2, t2, c.seed32()))
    segs = [f"Each car drove for {t1} seconds. Which car moved at a higher speed?"]
    options, ans = place(o, opt("car A" if d1 > d2 else "car B"), [opt("car B" if d1 > d2 else "car A")], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM, NUM), (QTY, REL), REA), "speed")


def fam_plant_growth(t, c, o, sk, k):
    plants = ("bean", "tomato", "pea", "corn", "basil")
    n = max(k, 3)
    labels = tuple(f"{p} plant" for p in plants[:n])
    values = c.sample(range(2, 30), n)
    name = t.choice(NAMES)
    month, day = t.choice(MONTHS), t.randint(1, 28)
    image = ImageSpec("bars", ("Height (cm)", labels, tuple(values), "green", c.seed32()))
    segs = [f"On {month} {day}, {name} measured the plants for a 3-page report. Which plant was the tallest?"] if t.below(2) == 0 else [
        f"{name} and/or a classmate measured each plant on {t.randint(1, 12)}/{t.randint(1, 28)}/2021. Which plant was the tallest?"]
    best = labels[values.index(max(values))]
    options, ans = place(o, opt(f"the {best}"), [opt(f"the {x}") for x in labels if x != best][: k - 1], k)
    return Content(segs, image, options, ans, Tags((LIV, DIA, NUM), (QTY, REL), REA), "plants")


# ---- engineering ----------------------------------------------------------------------


def fam_gears(t, c, o, sk, k):
    n = c.randint(2, 4)
    first = c.choice(("clockwise", "counterclockwise"))
    image = ImageSpec("gears", (n, first, c.seed32()))
    last = first if n % 2 == 1 else ("counterclockwise" if first == "clockwise" else "clockwise")
    segs = [f"The first gear turns {first}. Which way does the last gear turn?"]
    options, ans = place(o, opt(last), [opt("clockwise" if last != "clockwise" else "counterclockwise")], 2)
    return Content(segs, image, options, ans, Tags((OBJ, FEM), (CAU, STR), REA), "gears")


MACHINES = ("lever", "pulley", "inclined plane", "wheel and axle", "wedge", "screw")


def fam_simple_machine(t, c, o, sk, k):
    m = c.choice(MACHINES)
    image = ImageSpec("machine", (m, c.seed32()))
    segs = ["Which simple machine is shown?"] if t.below(2) == 0 else ["What kind of simple machine is this?"]
    options, ans = place(o, opt(m), [opt(x) for x in o.sample([x for x in MACHINES if x != m], k - 1)], k)
    return Content(segs, image, options, ans, Tags((OBJ, FEM), (IDN, MEA), REC), "machine")


def fam_design_tests(t, c, o, sk, k):
    n = max(k, 3)
    labels = tuple(f"Design {x}" for x in "ABCDE"[:n])
    values = c.sample(range(5, 60, 5), n)
    image = ImageSpec("bars", ("Weight held (kg)", labels, tuple(values), "orange", c.seed32()))
    tv = t.below(2)
    if tv == 0:
        segs = ["Engineers tested bridge designs and wrote a 3-page report. Which design held the most weight?"]
    else:
        segs = ["A team tested each design once and/or twice. Which design held the most weight?"]
    best = labels[values.index(max(values))]
    options, ans = place(o, opt(best), [opt(x) for x in labels if x != best][: k - 1], k)
    return Content(segs, image, options, ans, Tags((DIA, NUM, FEM), (QTY, MEA), REA), f"design{tv}")


def fam_bridge(t, c, o, sk, k):
    goal = t.choice(("shortest", "tallest"))
    heights = c.sample((1, 2, 3, 4, 5), k)
    labels = tuple("ABCDE"[:k])
    image = ImageSpec("bridges", (labels, tuple(heights), c.seed32()))
    segs = [f"The goal is the {goal} tower that stands on its own. Which tower meets the goal?"]
    j = heights.index(min(heights) if goal == "shortest" else max(heights))
    options, ans = place(o, opt(f"tower {labels[j]}"), [opt(f"tower {x}") for i, x in enumerate(labels) if i != j], k)
    return Content(segs, image, options, ans, Tags((OBJ, SHP), (FEA, MEA), GRA), "tower")


# ---- technology -----------------------------------------------------------------------

DEVICES = ("monitor", "keyboard", "mouse", "printer", "laptop", "smartphone", "webcam", "speaker", "microphone", "scanner")
INPUT_DEVICES = ("keyboard", "mouse", "webcam", "microphone", "scanner")
STORAGE = ("USB flash drive", "hard disk drive", "CD", "SD card", "floppy disk", "solid-state drive")


def fam_devices(t, c, o, sk, k):
    dev = c.choice(DEVICES)
    image = ImageSpec("device", (dev, c.seed32()))
    segs = ["What is the name of this device?"] if t.below(2) == 0 else ["Identify the hardware shown in the picture."]
    options, ans = place(o, opt(dev), [opt(x) for x in o.sample([x for x in DEVICES if x != dev], k - 1)], k)
    return Content(segs, image, options, ans, Tags((OBJ,), (IDN,), REC), "device")


def fam_io_devices(t, c, o, sk, k):
    want_input = t.below(2) == 0
    segs = ["Which of these is an input device?"] if want_input else ["Which of these is an output device?"]
    good = INPUT_DEVICES if want_input else tuple(d for d in DEVICES if d not in INPUT_DEVICES and d != "laptop" and d != "smartphone")
    bad = tuple(d for d in DEVICES if d not in good and d not in ("laptop", "smartphone"))
    imgs = [ImageSpec("device", (x, c.seed32())) for x in [c.choice(good)] + o.sample(bad, min(k - 1, len(bad)))]
    options, ans = place(o, imgs[0], imgs[1:], len(imgs))
    return Content(segs, None, options, ans, Tags((OBJ, CS), (FEA, MEA), GRA), f"io{int(want_input)}")


def fam_storage(t, c, o, sk, k):
    dev = c.choice(STORAGE)
    image = ImageSpec("device", (dev, c.seed32()))
    segs = ["Which storage device is shown in the image?"]
    options, ans = place(o, opt(dev), [opt(x) for x in o.sample([x for x in STORAGE if x != dev], k - 1)], k)
    return Content(segs, image, options, ans, Tags((OBJ,), (IDN,), REC), "storage")


SHORTCUTS = (("Ctrl", "C", "Copy"), ("Ctrl", "V", "Paste"), ("Ctrl", "Z", "Undo"), ("Ctrl", "X", "Cut"),
             ("Ctrl", "S", "Save"), ("Ctrl", "P", "Print"), ("Ctrl", "F", "Find"), ("Alt", "F4", "Close the window"))


def fam_shortcuts(t, c, o, sk, k):
    mod, key, action = c.choice(SHORTCUTS)
    image = ImageSpec("keys", ((mod, key), c.seed32()))
    segs = ["What does the keyboard shortcut in the picture do?"]
    options, ans = place(o, opt(action), [opt(x[2]) for x in o.sample([s for s in SHORTCUTS if s[2] != action], k - 1)], k)
    return Content(segs, image, options, ans, Tags((SYM, OBJ), (MEA,), GRA), "shortcut")


FILE_TYPES = ((".mp3", "an audio file"), (".jpg", "an image file"), (".docx", "a text document"),
              (".xlsx", "a spreadsheet"), (".mp4", "a video file"), (".zip", "a compressed archive"), (".exe", "a program"))


def fam_file_types(t, c, o, sk, k):
    ext, kind = c.choice(FILE_TYPES)
    image = ImageSpec("fileicon", (ext, c.seed32()))
    segs = ["What kind of file does this icon show?"]
    options, ans = place(o, opt(kind), [opt(x[1]) for x in o.sample([f for f in FILE_TYPES if f[1] != kind], k - 1)], k)
    return Content(segs, image, options, ans, Tags((SYM,), (IDN, FEA), GRA), "filetype")


GATES = ("AND", "OR", "NOT", "NAND", "NOR", "XOR")


def fam_logic_gates(t, c, o, sk, k):
    g = c.choice(GATES)
    image = ImageSpec("gate", (g, c.seed32()))
    segs = ["Which logic gate does this symbol represent?"]
    options, ans = place(o, opt(f"{g} gate"), [opt(f"{x} gate") for x in o.sample([x for x in GATES if x != g], k - 1)], k)
    return Content(segs, image, options, ans, Tags((SYM, DIA), (IDN,), REC), "gate")


def fam_binary(t, c, o, sk, k):
    bits = tuple(c.below(2) for _ in range(5))
    if not any(bits):
        bits = (1,) + bits[1:]
    v = int("".join(map(str, bits)), 2)
    image = ImageSpec("leds", (bits, c.seed32()))
    segs = ["Each lit lamp is a 1 and each dark lamp is a 0. What decimal number do the lamps show?"]
    options, ans = place(o, opt(str(v)), [opt(str(x)) for x in near_ints(o, v, k - 1, 0, 40, 3)], k)
    return Content(segs, image, options, ans, Tags((SYM, NUM), (QTY, STR), REA), "binary")


FLOW = (("terminator", "start or end"), ("process", "a process step"), ("decision", "a decision"),
        ("data", "input or output"), ("connector", "a connector"), ("document", "a document"))


def fam_flowchart(t, c, o, sk, k):
    shape, meaning = c.choice(FLOW)
    image = ImageSpec("flowshape", (shape, c.seed32()))
    segs = ["In a flowchart, what does the highlighted symbol mean?"]
    options, ans = place(o, opt(meaning), [opt(x[1]) for x in o.sample([f for f in FLOW if f[0] != shape], k - 1)], k)
    return Content(segs, image, options, ans, Tags((SYM, DIA), (IDN, MEA), GRA), "flowchart")


TOPOLOGIES = ("star", "ring", "bus", "mesh", "tree")


def fam_topology(t, c, o, sk, k):
    top = c.choice(TOPOLOGIES)
    image = ImageSpec("network", (top, c.randint(4, 6), c.seed32()))
    segs = ["Which network topology is shown in the diagram?"]
    options, ans = place(o, opt(f"{top} topology"), [opt(f"{x} topology") for x in o.sample([x for x in TOPOLOGIES if x != top], k - 1)], k)
    return Content(segs, image, options, ans, Tags((DIA,), (STR, IDN), GRA), "topology")


# ---- options whose order carries meaning (a shuffle must keep it) ---------------------

def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


FIGURE_LABELS = "kept-order:figure-labels"
REFERS_TO_OPTIONS = "kept-order:refers-to-options"
# how a page writes the label of option j: the picture shows the same labels
LABEL_STYLES = (("{L}", "{L}"), ("({L})", "({L})"), ("{L}.", "{L}"), ("({l})", "({l})"))


def fam_figure_labels(t, c, o, sk, k):
    """The options are only the labels A, B, C... of figures drawn in the picture."""
    pool = FLAT_SHAPES[: 4 + min(sk.level, 3) * 2]
    target = t.choice(pool)
    option_style, picture_style = LABEL_STYLES[t.below(len(LABEL_STYLES))]
    letters = "ABCDE"[:k]
    shapes = c.sample([s for s in pool if s != target], k - 1)
    answer = c.below(k)
    shapes.insert(answer, target)
    drawn = tuple(picture_style.format(L=x, l=x.lower()) for x in letters)
    image = ImageSpec("labelled_figures", (tuple(shapes), drawn, c.choice(COLORS), c.seed32()))
    tv = t.below(2)
    segs = [f"Which figure is {_a(target)}?"] if tv == 0 else [f"Look at the labelled figures. Which one is {_a(target)}?"]
    options = [opt(option_style.format(L=x, l=x.lower())) for x in letters]
    return Content(segs, image, options, answer, Tags((SHP,), (IDN,), GRA), f"labels{tv}", FIGURE_LABELS)


FACT_SHAPES = {"triangle": 3, "square": 4, "rectangle": 4, "pentagon": 5, "hexagon": 6, "octagon": 8}


def fam_shape_facts(t, c, o, sk, k):
    """The last option refers to the others: "All of the above", "None of these", "Both A and B"."""
    k = max(k, 3)
    shape = c.choice(tuple(FACT_SHAPES))
    n = FACT_SHAPES[shape]
    image = ImageSpec("shape", (shape, c.choice(COLORS), c.seed32()))
    wrong_n = [m for m in (3, 4, 5, 6, 8) if m != n]
    true_facts = [f"It has {n} sides.", f"It has {n} corners.", f"It is {_a(shape)}."]
    false_facts = [f"It has {o.choice(wrong_n)} sides.", f"It has {o.choice(wrong_n)} corners.",
                   f"It is {_a(o.choice([s for s in FACT_SHAPES if FACT_SHAPES[s] != n]))}."]
    segs = ["Which is true about the shape?"] if t.below(2) == 0 else ["Look at the shape. Which statement is true?"]
    case = c.below(3)
    if case == 0:  # every statement is true: the reference is the answer
        facts = o.sample(true_facts, k - 1)
        last = "Both A and B" if k == 3 and o.below(2) else o.choice(("All of the above", "All of these"))
        options, answer = facts + [last], k - 1
    elif case == 1:  # no statement is true
        facts = o.sample(false_facts, k - 1)
        options, answer = facts + [o.choice(("None of the above", "None of these"))], k - 1
    else:  # one true statement; the reference is a distractor
        facts = [o.choice(true_facts)] + o.sample(false_facts, k - 2)
        order = list(range(k - 1))
        o.shuffle(order)
        options = [facts[j] for j in order] + [o.choice(("All of the above", "None of the above"))]
        answer = order.index(0)
    return Content(segs, image, [opt(x) for x in options], answer, Tags((SHP, NUM), (FEA, QTY), REA), "facts",
                   REFERS_TO_OPTIONS)


# ---- text-only questions (planted: the pipeline must exclude them) ---------------------


def text_only(subject: str, t: Rng, c: Rng, o: Rng, k: int) -> Content:
    if subject == "math":
        a, b = c.randint(2, 12), c.randint(2, 12)
        if t.below(2) == 0:
            segs = ["What is ", (f"{a} \u00d7 {b}", f"{a} \\times {b}"), "?"]
            v = a * b
        else:
            segs = ["What is ", (f"{a * b} \u00f7 {b}", f"{a * b} \\div {b}"), "?"]
            v = a
        options, ans = place(o, opt(str(v)), [opt(str(x)) for x in near_ints(o, v, k - 1, 0, 200, 4)], k)
        return Content(segs, None, options, ans, Tags((NUM, SYM), (QTY,), REA), "text-only")
    if subject == "science":
        state = t.choice(("solid", "liquid", "gas"))
        segs = [f"Which of these is a {state}?"]
        others = [s for s in ("solid", "liquid", "gas") if s != state]
        k = min(k, 3)
        options, ans = place(o, opt(c.choice(MATTER[state])), [opt(c.choice(MATTER[s])) for s in others[: k - 1]], k)
        return Content(segs, None, options, ans, Tags((SUB,), (FEA,), REC), "text-only")
    if subject == "engineering":
        segs = ["Which material is the best conductor of electricity?"]
        good = c.choice(("copper", "aluminum", "silver"))
        options, ans = place(o, opt(good), [opt(x) for x in o.sample(["rubber", "wood", "glass", "plastic"], k - 1)], k)
        return Content(segs, None, options, ans, Tags((SUB,), (FEA,), REC), "text-only")
    pairs = (("CPU", "Central Processing Unit"), ("RAM", "Random Access Memory"), ("USB", "Universal Serial Bus"),
             ("URL", "Uniform Resource Locator"), ("HTML", "HyperText Markup Language"), ("GPU", "Graphics Processing Unit"))
    j = c.below(len(pairs))
    segs = [f"What does {pairs[j][0]} stand for?"]
    options, ans = place(o, opt(pairs[j][1]), [opt(p[1]) for p in o.sample([p for i, p in enumerate(pairs) if i != j], k - 1)], k)
    return Content(segs, None, options, ans, Tags((SYM,), (IDN,), REC), "text-only")


# ---- TeX math already on the page (MathJax sites), and prices in dollars -----------------


def tex(latex: str, dollars: bool):
    """Math a page already writes in TeX, as a MathJax site publishes it: ``$latex$`` or
    ``\\( latex \\)``. Its correct conversion keeps the TeX byte for byte as ``\\( latex \\)``."""
    return (f"${latex}$" if dollars else f"\\( {latex} \\)", latex)


UNIT_PRICES = ("4.50", "2.25", "1.50", "3.75", "0.80")


def fam_tex_on_page(t, c, o, sk, k):
    dollars = t.below(2) == 0
    tv = t.below(3)
    if tv == 0:
        # "r \cdot q +1 = n": an operator command next to spaced ASCII operators
        r, q = t.randint(2, 5 + sk.level), t.randint(2, 6 + sk.level)
        image = ImageSpec("array", (r, q, c.choice(COLORS), c.seed32()))
        segs = ["The array has ", tex(str(r), dollars), " rows and ", tex(str(q), dollars),
                " columns. One more dot is added. Which number sentence gives the number of dots?"]

        def sentence(a, b):
            return [tex(f"{a} \\cdot {b} +1 = {a * b + 1}", dollars)]

        wrong = [sentence(r, q + 1), sentence(r + 1, q), [tex(f"{r} + {q} +1 = {r + q + 1}", dollars)],
                 [tex(f"{r} \\cdot {q} = {r * q}", dollars)]]
        options, ans = place(o, sentence(r, q), o.sample(wrong, k - 1), k)
        tags = Tags((SHP, SYM, NUM), (QTY, STR), REA)
    elif tv == 1:
        # "2 a+2 b" (a coefficient glued to a variable) and "(a+b)^{2}", with Unicode math in the prose
        w, h = t.randint(2, 6 + sk.level), t.randint(2, 5 + sk.level)
        image = ImageSpec("grid_rect", (w, h, c.choice(COLORS), c.seed32()))
        segs = ["The shaded rectangle measures ", (f"{w} \u00d7 {h}", f"{w} \\times {h}"), " units, so ",
                tex(f"a={w}", dollars), " and ", tex(f"b={h}", dollars), ". Which expression gives its perimeter?"]
        wrong = [[tex("a b", dollars)], [tex("a+b", dollars)], [tex("(a+b)^{2}", dollars)], [tex("4 a+b", dollars)]]
        options, ans = place(o, [tex("2 a+2 b", dollars)], o.sample(wrong, k - 1), k)
        tags = Tags((SHP, SYM, NUM), (QTY, STR), REA)
    else:
        # prices in dollars next to dollar-delimited math: the prices stay prose
        fruits = ("apples", "pears", "plums", "peaches", "lemons")
        labels = fruits[: max(k, 3)]
        # drawn from t: bar graphs that differ only in bar heights can look alike, so no templated
        # sibling gets another graph
        values = t.sample(range(1, 11), len(labels))
        j = t.below(len(labels))
        price = t.choice(UNIT_PRICES)
        name = t.choice(NAMES)
        image = ImageSpec("bars", ("Fruit bought", tuple(labels), tuple(values), c.choice(COLORS), c.seed32()))
        segs = [f"{labels[j].capitalize()} cost ${price} each. The bar graph shows how many pieces of fruit {name} bought. "
                "If ", tex("n", True), f" is the number of {labels[j]}, ", tex(f"c = {price} n", True),
                f" is their cost in dollars. How much did {name} pay for the {labels[j]}?"]
        cents = round(float(price) * 100)

        def dollars_text(count):
            return opt(f"${count * cents // 100}.{count * cents % 100:02d}")

        n = values[j]
        options, ans = place(o, dollars_text(n), [dollars_text(m) for m in near_ints(o, n, k - 1, 1, 14, 3)], k)
        tags = Tags((DIA, NUM, SYM), (QTY,), REA)
        dollars = True
    return Content(segs, image, options, ans, tags, f"tex{tv}" + ("-dollars" if dollars else ""))


# ---- hard cases for dedup: colour that grey cannot see, fractions typed in TeX ---------------


def fam_colours(t, c, o, sk, k):
    """Questions about colour. Their templated siblings swap two colours in the words and the
    pictures (``Family.colour_variants``): a green and a teal square are nearly the same grey."""
    shape = t.choice(FLAT_SHAPES[:6])
    tv = t.below(2)
    if tv == 0:
        colour = t.choice(COLORS)
        segs = [f"Select the {shape} that is {colour}."]
        others = c.sample([x for x in COLORS if x != colour], k - 1)
        imgs = [ImageSpec("shape", (shape, x, c.seed32())) for x in [colour] + others]
        options, ans = place(o, imgs[0], imgs[1:], k)
        return Content(segs, None, options, ans, Tags((SHP,), (FEA,), GRA), "colour0")
    colour = c.choice(COLORS)
    image = ImageSpec("shape", (shape, colour, c.seed32()))
    segs = [f"What color is the {shape}?"]
    wrong = c.sample([x for x in COLORS if x != colour], k - 1)
    options, ans = place(o, opt(colour), [opt(x) for x in wrong], k)
    return Content(segs, image, options, ans, Tags((SHP,), (FEA,), REC), "colour1")


def fam_tex_fractions(t, c, o, sk, k):
    """A fraction model with its options typed in TeX on the page (``\\frac{n}{d}``)."""
    from fractions import Fraction

    d = c.randint(3, 8 + 2 * min(sk.level, 2))
    n = c.randint(1, d - 1)
    image = ImageSpec("fraction", (c.choice(("circle", "rectangle")), d, n, c.choice(COLORS), c.seed32()))
    dollars = t.below(2) == 0
    tv = t.below(2)

    def frac_tex(a, b):
        return f"\\frac{{{a}}}{{{b}}}"

    cands = [(Fraction(n, d), frac_tex(n, d)), (Fraction(d - n, d), frac_tex(d - n, d)),
             (Fraction(n, d + 1), frac_tex(n, d + 1)), (Fraction(n + 1, d), frac_tex(f"{n} + 1", d)),
             (1 - Fraction(n, d), f"1 - {frac_tex(n, d)}"), (Fraction(d, n), frac_tex(d, n)),
             (Fraction(n, d) / 2, f"\\frac{{1}}{{2}} \\cdot {frac_tex(n, d)}")]
    parts = f"The shape is cut into {d} equal parts. "
    if tv == 0:
        segs = [parts + "Which expression gives the shaded part of the shape?"]
        value, correct = cands[0]
        others = cands[1:]
    else:
        segs = [parts + "Which expression gives the part of the shape that is not shaded?"]
        value, correct = cands[4]
        others = cands[:4] + cands[5:]
    wrong, seen = [], {value}
    for v, x in o.sample(others, len(others)):
        if v not in seen:
            seen.add(v)
            wrong.append([tex(x, dollars)])
    options, ans = place(o, [tex(correct, dollars)], wrong[: k - 1], k)
    return Content(segs, image, options, ans, Tags((SHP, NUM, SYM), (QTY, STR), GRA), f"texfrac{tv}")


# ---- the catalog: families -> skills --------------------------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    subject: str
    fn: Callable
    grades: tuple[str, ...]
    stems: tuple[str, ...]     # skill slug stems
    kdist: tuple               # ((number of options, weight), ...)
    fixed_k: int | None = None
    colour_variants: bool = False  # templated siblings may swap colours in the words and the pictures


MATH_K = ((2, 0.34), (3, 0.52), (4, 0.14))
SCI_K = ((2, 0.05), (3, 0.55), (4, 0.4))
ENG_K = ((2, 0.45), (3, 0.55))
TECH_K = ((3, 0.1), (4, 0.8), (5, 0.1))
EARLY = ("pre-k", "kindergarten", "grade-1", "grade-2")

FAMILIES: tuple[Family, ...] = (
    # math: 18 families
    Family("count-objects", "math", fam_count_objects, EARLY, ("count-objects", "count-shapes", "count-to-10", "count-pictures", "how-many-are-there"), MATH_K),
    Family("add-with-pictures", "math", fam_add_pictures, ("kindergarten", "grade-1", "grade-2"), ("add-with-pictures", "addition-with-pictures", "add-two-groups", "addition-sentences-using-pictures"), MATH_K),
    Family("identify-shapes", "math", fam_identify_shape, EARLY, ("identify-shapes", "name-the-shape", "identify-2-dimensional-shapes", "shapes-of-everyday-objects"), MATH_K),
    Family("select-shapes", "math", fam_select_shape, EARLY, ("select-the-shape", "select-two-dimensional-shapes", "find-the-shape", "choose-the-shape"), MATH_K),
    Family("fractions-of-shapes", "math", fam_fraction_shaded, ("grade-1", "grade-2", "grade-3", "grade-4", "grade-5"), ("identify-fractions-of-shapes", "fractions-of-shapes", "what-fraction-is-shaded", "model-fractions-with-shapes"), MATH_K),
    Family("bar-graphs", "math", fam_bar_graph, ("grade-1", "grade-2", "grade-3", "grade-4", "grade-5", "grade-6"), ("read-bar-graphs", "interpret-bar-graphs", "bar-graphs", "data-in-bar-graphs"), MATH_K),
    Family("clocks", "math", fam_read_clock, ("grade-1", "grade-2", "grade-3"), ("read-clocks", "tell-time", "read-analog-clocks", "match-analog-clocks-and-times"), MATH_K),
    Family("number-lines", "math", fam_number_line, ("grade-1", "grade-2", "grade-3", "grade-6", "grade-7"), ("number-lines", "numbers-on-number-lines", "integers-on-number-lines", "graph-numbers-on-number-lines"), MATH_K),
    Family("arrays", "math", fam_array_multiplication, ("grade-2", "grade-3", "grade-4"), ("multiplication-sentences-for-arrays", "arrays", "multiply-using-arrays", "write-multiplication-sentences-for-arrays"), MATH_K),
    Family("tex-on-page", "math", fam_tex_on_page, ("grade-5", "grade-6", "grade-7", "algebra-1"), ("write-variable-expressions-for-models", "number-sentences-with-variables", "unit-price-word-problems", "evaluate-expressions-from-graphs"), MATH_K),
    Family("angles", "math", fam_measure_angle, ("grade-4", "grade-5", "grade-6", "grade-7", "geometry"), ("measure-angles", "classify-angles", "angles", "name-and-measure-angles"), MATH_K),
    Family("triangle-angles", "math", fam_triangle_angles, ("grade-7", "grade-8", "geometry"), ("find-missing-angles-in-triangles", "triangle-angle-sum", "angle-measures-in-triangles"), MATH_K),
    Family("area-perimeter", "math", fam_area_grid, ("grade-3", "grade-4", "grade-5", "grade-6"), ("area-of-rectangles", "perimeter-of-rectangles", "area-and-perimeter", "count-unit-squares-to-find-area"), MATH_K),
    Family("linear-graphs", "math", fam_linear_graph, ("grade-8", "algebra-1", "algebra-2", "precalculus"), ("graph-a-line-from-an-equation", "identify-graphs-of-linear-equations", "slope-intercept-form-graph", "write-an-equation-from-a-graph"), MATH_K),
    Family("coordinate-plane", "math", fam_coordinate_point, ("grade-5", "grade-6", "grade-7", "grade-8"), ("objects-on-a-coordinate-plane", "coordinate-plane", "graph-points-on-a-coordinate-plane", "quadrants"), MATH_K),
    Family("probability", "math", fam_spinner, ("grade-6", "grade-7", "grade-8", "algebra-2"), ("probability-of-simple-events", "spinner-probability", "find-probabilities", "theoretical-probability"), MATH_K, colour_variants=True),
    Family("patterns", "math", fam_pattern, EARLY, ("complete-a-pattern", "repeating-patterns", "find-the-next-shape-in-a-pattern", "growing-patterns"), MATH_K),
    Family("inequalities", "math", fam_inequality, ("grade-6", "grade-7", "grade-8", "algebra-1"), ("graph-inequalities-on-number-lines", "inequalities-on-number-lines", "solutions-to-inequalities", "write-inequalities-from-number-lines"), MATH_K),
    Family("squares-and-roots", "math", fam_square_root, ("grade-6", "grade-7", "grade-8", "algebra-1"), ("square-roots-using-models", "squares-and-square-roots", "perfect-squares", "exponents-with-models"), MATH_K),
    # science: 14 families
    Family("magnets-attract-repel", "science", fam_magnets_attract, ("grade-2", "grade-3", "grade-4", "grade-5"), ("will-these-magnets-attract-or-repel", "magnets-attract-or-repel", "identify-magnetic-forces"), SCI_K, 2),
    Family("magnetic-force-strength", "science", fam_magnet_strength, ("grade-3", "grade-5", "grade-6", "grade-8"), ("compare-strengths-of-magnetic-forces", "compare-magnitudes-of-magnetic-forces", "magnetic-force-and-distance"), SCI_K, 2),
    Family("laboratory-tools", "science", fam_lab_tools, ("grade-3", "grade-4", "grade-5", "grade-6", "grade-7", "grade-8"), ("identify-laboratory-tools", "laboratory-tools", "use-laboratory-tools"), SCI_K),
    Family("thermometers", "science", fam_thermometer, ("grade-2", "grade-3", "grade-4", "grade-5", "grade-6"), ("read-a-thermometer", "measure-temperature", "use-thermometers"), SCI_K),
    Family("thermal-energy", "science", fam_thermal_energy, ("grade-4", "grade-5", "grade-6", "grade-7", "grade-8"), ("compare-thermal-energy", "temperature-and-thermal-energy", "how-temperature-affects-thermal-energy"), SCI_K),
    Family("states-of-matter", "science", fam_states_of_matter, ("grade-2", "grade-3", "grade-4", "grade-5"), ("identify-solids-liquids-and-gases", "solids-liquids-and-gases", "states-of-matter"), SCI_K),
    Family("living-things", "science", fam_living_things, ("grade-2", "grade-3", "grade-4"), ("identify-living-and-nonliving-things", "living-and-nonliving-things", "characteristics-of-living-things"), SCI_K),
    Family("moon-phases", "science", fam_moon_phase, ("grade-3", "grade-5", "grade-6", "grade-8"), ("identify-phases-of-the-moon", "moon-phases", "lunar-cycle"), SCI_K),
    Family("measure-volume", "science", fam_volume_cylinder, ("grade-3", "grade-4", "grade-5", "grade-6"), ("measure-volume-with-graduated-cylinders", "read-graduated-cylinders", "measure-liquid-volume"), SCI_K),
    Family("circuits", "science", fam_circuit, ("grade-4", "grade-5", "grade-6"), ("will-the-bulb-light", "open-and-closed-circuits", "electric-circuits"), SCI_K, 2),
    Family("mass", "science", fam_mass_balance, ("grade-2", "grade-3", "grade-4"), ("compare-mass-with-a-balance", "use-a-pan-balance", "heavier-and-lighter"), SCI_K, 2),
    Family("maps", "science", fam_map_direction, ("grade-2", "grade-3", "grade-4", "grade-5"), ("use-cardinal-directions", "read-a-map-cardinal-directions", "directions-on-a-map"), SCI_K),
    Family("speed", "science", fam_speed_compare, ("grade-5", "grade-6", "grade-7", "grade-8"), ("compare-speeds", "identify-faster-objects", "speed-distance-and-time"), SCI_K, 2),
    Family("plant-data", "science", fam_plant_growth, ("grade-3", "grade-4", "grade-5", "grade-6", "grade-7"), ("interpret-plant-growth-data", "analyze-data-from-experiments", "read-science-bar-graphs"), SCI_K),
    # engineering: 6 families, one skill each
    Family("eng-circuits", "engineering", fam_circuit, ("grade-4",), ("identify-circuits-that-light-a-bulb",), ENG_K, 2),
    Family("eng-gears", "engineering", fam_gears, ("grade-6",), ("predict-the-motion-of-gears",), ENG_K, 2),
    Family("eng-machines", "engineering", fam_simple_machine, ("grade-3",), ("identify-simple-machines",), ENG_K),
    Family("eng-design-tests", "engineering", fam_design_tests, ("grade-5",), ("evaluate-tests-of-engineering-design-solutions",), ENG_K),
    Family("eng-towers", "engineering", fam_bridge, ("grade-7",), ("evaluate-design-solutions-against-goals",), ENG_K),
    Family("eng-closed-circuits", "engineering", fam_closed_circuit, ("grade-8",), ("complete-an-electric-circuit",), ENG_K),
    # technology: 9 families, one skill each (the first five on the ProProfs-like site)
    Family("tech-hardware", "technology", fam_devices, (None,), ("computer-hardware",), TECH_K),
    Family("tech-io", "technology", fam_io_devices, (None,), ("input-and-output-devices",), TECH_K),
    Family("tech-shortcuts", "technology", fam_shortcuts, (None,), ("keyboard-shortcuts",), TECH_K),
    Family("tech-files", "technology", fam_file_types, (None,), ("file-types-and-extensions",), TECH_K),
    Family("tech-storage", "technology", fam_storage, (None,), ("storage-devices",), TECH_K),
    Family("tech-gates", "technology", fam_logic_gates, (None,), ("logic-gates",), TECH_K),
    Family("tech-binary", "technology", fam_binary, (None,), ("binary-numbers",), TECH_K),
    Family("tech-flowcharts", "technology", fam_flowchart, (None,), ("flowchart-symbols",), TECH_K),
    Family("tech-networks", "technology", fam_topology, (None,), ("network-topologies",), TECH_K),
    # math, options in a fixed order: figure labels, options that refer to the others
    Family("figure-labels", "math", fam_figure_labels, EARLY, ("which-figure-is-it", "identify-labelled-figures", "find-the-labelled-shape"), MATH_K),
    Family("shape-facts", "math", fam_shape_facts, ("grade-1", "grade-2", "grade-3"), ("facts-about-shapes", "true-statements-about-shapes", "sides-and-corners-of-shapes"), MATH_K),
    # math, hard cases for dedup: colour variants, fractions typed in TeX
    Family("colors", "math", fam_colours, EARLY, ("identify-colors", "shapes-and-colors", "select-shapes-by-color"), MATH_K, colour_variants=True),
    Family("tex-fractions", "math", fam_tex_fractions, ("grade-3", "grade-4", "grade-5"), ("fraction-expressions-for-models", "write-fractions-for-shaded-parts", "fractions-not-shaded"), MATH_K),
)

PROPROFS_SKILLS = ("computer-hardware", "input-and-output-devices", "keyboard-shortcuts", "file-types-and-extensions", "storage-devices")

SKILL_QUALIFIERS = ("", "-up-to-10", "-up-to-20", "-with-pictures", "-word-problems", "-up-to-100", "-review",
                    "-using-models", "-in-the-real-world", "-challenge", "-up-to-1000", "-practice", "-level-2", "-level-3")
