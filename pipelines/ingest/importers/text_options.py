"""Options written inside a text (``options_in_text=1``: the question's; ``options_in_text=FIELD``
or a ``choices`` field holding one text: that field's), and image placeholders.

``read_options(text)`` finds the labelled options at the end of a text and returns the stem
(the text before option A, right-stripped), the option texts and, when one option holds another
option's label, which (``held_label``); ``split_options(text)`` is (stem, options), or None.

A label is a capital letter (full-width ``Ａ`` too) written ``A.``, ``A．``, ``A)``, ``(A)``,
``（A）``, ``A:``, ``A：`` or ``A、``; it may start a line or follow other text on the same
line (``A. 1 B. 2 C. 3 D. 4``, ``...( )A. 6B. 9C. 12D. 18``, after a sentence's end
``... D, and E.(A) Painting I``), but not a Latin letter, a backslash, an abbreviation or a TeX
sub/superscript (``U.S.A.`` and ``x_A.`` are no labels). A label in parentheses may follow a
word with no space (``(B)is doubled(C) remains``): such a glued label joins a run only when it
makes the run longer than the runs without glued labels, and never starts one (``f(A) and
f(B)`` are notation). No label is ever inside math: ``$...$`` (within its line), ``\\(...\\)``,
``\\[...\\]`` as ``pipelines.tex_math.find_tex_math`` finds it, so a price is not
math (``(A) $501k (B) $534k``: a dollar before a digit that is not closed as math), or after an
unclosed ``\\begin{...}``. Options laid out as the rows of a LaTeX table (its first cell the
label, ``A & 稀盐酸 & …``) are the table's labels when the text has no run of labels outside it:
the table stays in the stem (its header says what the cells are) and the options are A, B, ...
At the start of a line a lower-case letter (``c.``, an OCR slip), a bare letter followed by a
space (``B $F$ ...``) or a letter in brackets that do not pair (``(A} was used``, ``[B)``) is a
label too, when every label of the run starts a line. A text with no run of capital labels may
have lower-case ones in brackets anywhere in a line (``Which? (a) cat (b) dog (c) bird``, or with
the closing bracket only, ``Which? a) cat b) dog``, ``Which? a)5 b)6``), when
the first starts a line or follows a question's or sentence's end: after a word they name a
figure's panels (GAOKAO-MM's ``如图 (a), … 如图 (b) 所示``); with a run of capital labels they
are the stem's (``statements (a)-(c)``).

The options are the longest run of labels A, B, C, ... in order (ties: the run that starts
last, so a stem mentioning "(A)" does not count); each option's text runs to the next label,
the last one's to the end, but for an evaluation prompt's instruction written after it
(``… (D) eel. Answer with the option letter.``: a sentence that tells the reader to answer,
select or choose an option or letter), which goes to the stem; the stem loses a header that
introduces the options (``Choices:``, ``Options:``, ``选项：``). Its ends lose white space,
separators (``;`` ``；`` ``,`` ``，``, and ``|`` unless the option's bars are paired, as in
``|x|``), a doubled label punctuation (``(A). 5``) and a dash before a word (``A - red``; ``- 5``
may be minus five), never a character inside math (``$a;b$``). An option with no text (drawn in the
figure) is its letter, so it stays visible as a label.

An option holds another option's label (``held_label``: We-Math's ``'; C. There is no obtuse
angle.;'``) when, outside math, its text has a separator (``;`` ``；`` ``|``) followed by a label
and text (``; C. There``). A comma is no such separator: ``points A, B, C.`` is prose. A letter
at an option's end is its text (``... to get Shape ;C.``, ``... angle ∠AB;E.``): when the
first-found run makes an option hold a label, or leaves one option without text among options
with text, a later label of the same letter is tried (``_sound_run``), as a reader skips the
``C.`` that ends a sentence; only when no such run exists is the label held (an option without
text whose label is glued to the text before it, ``... Shape ;C.; D. ...``, is held by that text).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from pipelines.tex_math import find_tex_math

_STRONG = re.compile(
    r"(?:(?P<open>[(（])(?P<inner>[A-ZＡ-Ｚ])[)）])"
    r"|(?:(?P<bare>[A-ZＡ-Ｚ])[.．)）:：、])"
)
_WEAK_AT_LINE_START = re.compile(
    r"(?m)^[ \t\u3000]*(?:(?P<lower>[a-z])[.．)）:：、]|(?P<spaced>[A-Z])[ \t](?=\S)"
    r"|(?P<slip>[(\[{（](?P<slipped>[A-Z])[)\]}）]))"  # brackets that do not pair: SceMQA's "(A} was used"
)
_NOT_BEFORE_LABEL = re.compile(r"[A-Za-z\\_^{]")
_ABBREVIATION_BEFORE = re.compile(r"(?:^|[^A-Za-z])[A-Z]\.\Z")  # the "S." of U.S.A.
# a picture named in a text by its number: MMMU's <image 1>, <image1>, <img 1>; CMMMU's <图片 1>
PLACEHOLDER = r"<(?:image|img|图片)[ _]?(\d+)>"
_PLACEHOLDER = re.compile(r"[ \t]*" + PLACEHOLDER, re.IGNORECASE)
# LLaVA's conversations: "<image>\nWhich shape is shown?", the picture named by no number
_UNNUMBERED_PLACEHOLDER = re.compile(r"[ \t]*<image>[ \t]*(?:\r?\n)?", re.IGNORECASE)
ONLY_PLACEHOLDER = re.compile(rf"^\s*{PLACEHOLDER}\s*$", re.IGNORECASE)  # an option that is a picture


@dataclass(frozen=True)
class _Label:
    start: int
    end: int
    index: int  # 0 for A
    strong: bool
    line_start: bool
    glued: bool = False  # "(C)" right after a word: "is doubled(C) remains"


def _letter_index(char: str) -> int:
    return ord(unicodedata.normalize("NFKC", char).upper()) - ord("A")


def _at_line_start(text: str, position: int) -> bool:
    line_begin = text.rfind("\n", 0, position) + 1
    return text[line_begin:position].strip(" \t\u3000") == ""


class _LineStarts:
    """``_at_line_start`` for many positions of one text, each in O(log n) (hostile texts are long)."""

    def __init__(self, text: str):
        self.begins = [0] + [m.end() for m in re.finditer("\n", text)]
        blank = re.compile("[ \t\u3000]*")
        self.content = {begin: blank.match(text, begin).end() for begin in self.begins}  # first other character

    def __call__(self, position: int) -> bool:
        begin = self.begins[bisect_right(self.begins, position) - 1]
        return position <= self.content[begin]


def _math_regions(text: str) -> list[tuple[int, int]]:
    """(start, end) of the TeX math of each line (inline math never spans lines here: a lone
    "$", a price, upsets one line at most), as the LaTeX stage finds it."""
    if "$" not in text and "\\" not in text:
        return []
    regions, offset = [], 0
    for line in text.split("\n"):
        regions += [(offset + m.start, offset + m.end) for m in find_tex_math(line)]
        offset += len(line) + 1
    return regions


def _inside(regions: list[tuple[int, int]], position: int) -> bool:
    """``regions`` are sorted and disjoint (``_math_regions``): one bisection."""
    i = bisect_right(regions, (position, float("inf"))) - 1
    return i >= 0 and regions[i][0] <= position < regions[i][1]


def _labels(text: str, regions: list[tuple[int, int]]) -> list[_Label]:
    found: dict[int, _Label] = {}
    at_line_start = _LineStarts(text)
    for match in _STRONG.finditer(text):
        start = match.start()
        glued = False
        if start > 0 and _NOT_BEFORE_LABEL.match(text[start - 1]):
            if not (match.group("open") and text[start - 1].isalpha()):
                continue
            glued = True
        if match.group("bare") and _ABBREVIATION_BEFORE.search(text[max(0, start - 3) : start]):
            continue
        letter = match.group("inner") or match.group("bare")
        found[start] = _Label(start, match.end(), _letter_index(letter), True, at_line_start(start), glued)
    for match in _WEAK_AT_LINE_START.finditer(text):
        group = next(name for name in ("lower", "spaced", "slip") if match.group(name))
        start = match.start(group)
        if start not in found:
            letter = match.group("slipped" if group == "slip" else group)
            found[start] = _Label(start, match.end(), _letter_index(letter), False, True)
    begins = [m.start() for m in re.finditer(r"\\begin\{", text)]
    ends = [m.start() for m in re.finditer(r"\\end\{", text)]
    return [
        label
        for _, label in sorted(found.items())
        if not _inside(regions, label.start) and bisect_left(begins, label.start) <= bisect_left(ends, label.start)
    ]


# (a) in brackets, or a) with its closing bracket only (its text may follow with no space, as
# after "(b)4" and "A)5"), not after a letter or an opening bracket, nor before another bracket
_LOWER_IN_BRACKETS = re.compile(r"[(（]([a-z])[)）]|(?<![\w(（\[])([a-z])[)）](?![)）])")
_ENDS = ".?!。？！"  # what ends a sentence or a question
_SENTENCE_END = re.compile(rf"[{_ENDS}:：][ \t\u3000]*\Z")


def _lower_labels(text: str, regions: list[tuple[int, int]]) -> list[_Label]:
    """Lower-case letters in brackets anywhere in a line (``(a) cat (b) dog (c) bird``, ``a) cat
    b) dog``), for a
    text with no run of capital labels: never after a letter, backslash or sub/superscript
    (``f(a)``), never inside math."""
    at_line_start = _LineStarts(text)
    return [
        _Label(m.start(), m.end(), ord(m.group(1) or m.group(2)) - ord("a"), True, at_line_start(m.start()))
        for m in _LOWER_IN_BRACKETS.finditer(text)
        if not (m.start() > 0 and _NOT_BEFORE_LABEL.match(text[m.start() - 1])) and not _inside(regions, m.start())
    ]


def _run_from(first: _Label, by_letter: dict[int, tuple[list[int], list[_Label]]]) -> list[_Label]:
    """Labels B, C, ... after ``first``, each the first one found after the previous; a run
    across lines takes labels that start a line (strong or weak), a free run strong ones
    (``by_letter``: the labels of the run's kind by letter, with their starts, for bisection)."""
    run = [first]
    while run[-1].index + 1 in by_letter:
        starts, labels = by_letter[run[-1].index + 1]
        i = bisect_left(starts, run[-1].end)
        if i == len(starts):
            break
        run.append(labels[i])
    return run


def _by_letter(labels: list[_Label]) -> dict[int, tuple[list[int], list[_Label]]]:
    found: dict[int, tuple[list[int], list[_Label]]] = {}
    for label in labels:  # in order of their starts
        starts, kept = found.setdefault(label.index, ([], []))
        starts.append(label.start)
        kept.append(label)
    return found


def _best_run(labels: list[_Label]) -> list[_Label]:
    runs = []
    on_lines = _by_letter([label for label in labels if label.line_start])
    free = _by_letter([label for label in labels if label.strong])
    for first in labels:
        if first.index != 0 or first.glued:
            continue
        if first.line_start:
            runs.append(_run_from(first, on_lines))
        if first.strong:
            runs.append(_run_from(first, free))
    return max(runs, key=lambda run: (len(run), all(label.line_start for label in run), run[0].start), default=[])


HELD_LABEL = "an option holds another option's label"  # the quarantine reason
_SEPARATORS = ";,|；，"
_LABEL_PUNCTUATION = ".．:：、"
_HELD_RUN = re.compile(r"[;；|][ \t\u3000]*(?:[(（][A-ZＡ-Ｚ][)）]|[A-ZＡ-Ｚ][.．:：、)）])\s+\S")


def _trimmed(text: str, start: int, end: int, regions: list[tuple[int, int]]) -> tuple[int, int]:
    """``text[start:end]`` without white space, separators and doubled label punctuation at
    its ends; nothing inside math is touched, and a ``|`` goes only while the bars are unpaired."""

    bars = sum(1 for i in range(start, end) if text[i] == "|" and not _inside(regions, i))

    def removable(i: int, at_start: bool) -> bool:
        char = text[i]
        if _inside(regions, i):
            return False
        if char.isspace() or (char in _SEPARATORS and char != "|"):
            return True
        if char == "|":
            return bars % 2 == 1
        # "(A). 5": a second label punctuation, followed by white space (".5" is a number);
        # "A - red": a dash, followed by white space and a word ("- 5" may be minus five)
        if at_start and char in "-–—":
            rest = text[i + 1 : end]
            return rest[:1].isspace() and rest.lstrip()[:1].isalpha()
        return at_start and char in _LABEL_PUNCTUATION and (i + 1 == end or text[i + 1].isspace())

    while start < end and removable(start, True):
        bars -= text[start] == "|"
        start += 1
    while end > start and removable(end - 1, False):
        bars -= text[end - 1] == "|"
        end -= 1
    return start, end


@dataclass(frozen=True)
class OptionsText:
    stem: str
    options: list[str]
    held_label: str | None  # "option B holds a label: ..." when an option holds another's label


def read_options(text: str) -> OptionsText | None:
    """The stem, option texts and held label (see the module docstring) of a text whose options
    are written in it, or None when it has no run of two labels or more."""
    if not isinstance(text, str):
        return None
    regions = _math_regions(text)
    labels = _labels(text, regions)
    run = _best_run([label for label in labels if not label.glued])
    with_glued = _best_run(labels)
    if len(with_glued) > len(run):
        run = with_glued
    if len(run) < 2:
        letters = _table_letters(text)
        if letters:
            return OptionsText(text.rstrip(), letters, None)
        labels = _lower_labels(text, regions)
        run = _best_run(labels)
        if len(run) < 2 or not (run[0].line_start or _SENTENCE_END.search(text, 0, run[0].start)):
            return None
    bodies = _bodies(text, run, regions)
    defect = _defect(text, run, bodies, regions)
    if defect is not None:
        sound = _sound_run(text, run, labels, regions)
        if sound is not None:
            run, bodies = sound, _bodies(text, sound, regions)
            defect = _defect(text, run, bodies, regions)
    options = [text[start:stop] or chr(ord("A") + label.index) for label, (start, stop) in zip(run, bodies)]
    stem = _OPTIONS_HEADER.sub("", text[: run[0].start]).rstrip()
    instruction = _INSTRUCTION.search(options[-1])
    if instruction is not None and instruction.start() > 0:
        # a prompt's instruction after the options is the stem's, not option D's text; the
        # sentence it ended loses its full stop when no other option has one ("eel.")
        options[-1] = options[-1][: instruction.start()].rstrip()
        if options[-1].endswith(".") and not any(option.endswith(".") for option in options[:-1]):
            options[-1] = options[-1][:-1].rstrip() or options[-1]
        stem = f"{stem}\n{instruction.group().strip()}" if stem else instruction.group().strip()
    return OptionsText(stem, options, defect)


# the header that introduces the options ("Question: …?\nChoices:", MathVista's, MathVerse's and
# MMStar's layouts): the options' own, not the question's
_OPTIONS_HEADER = re.compile(
    rf"(?:(?<=[\s{_ENDS}])|\A)(?:Answer\s+)?(?:Choices|Options)(?:\s+are)?\s*[:：]\s*\Z|选项\s*[:：]\s*\Z", re.IGNORECASE)


def without_options_header(text: str) -> str:
    """``text`` without the header at its end that introduces its options (``Choices are:``),
    where the options are read apart from the text (a page's list, its pictures)."""
    return _OPTIONS_HEADER.sub("", text).rstrip() or text

# an evaluation prompt's instruction written after the options (LLaVA's "Answer with the
# option's letter from the given choices directly.", MMMU's "Please select the correct answer
# from the options above."): a sentence of its own that names the options or their letters
_INSTRUCTION = re.compile(
    rf"(?:(?<=[{_ENDS}\n])\s*|\s+(?=Please\s))(?:Please\s+)?(?:Answer|Select|Choose|Pick|Respond|Reply)\b[^.?!\n]*"
    r"\b(?:letter|option|options|choice|choices)\b[^.?!\n]*[.?!。]?\s*\Z",
    re.IGNORECASE,
)


_TABULAR = re.compile(r"\\begin\{(tabular\*?|array)\}(.*?)\\end\{\1\}", re.DOTALL)
_ROW_DRESSING = re.compile(r"\\hline|\\(?:mathrm|text|textbf|mathbf)\s*|[{}$\s]")
_ROW_LABEL = re.compile(r"^[(（]?([A-Z])[)）]?[.．:：、]?$")


def _table_letters(text: str) -> list[str] | None:
    r"""The labels of options laid out as the rows of a LaTeX table, whose first cell is the
    row's label (GAOKAO-MM: ``选项 & (1)中物质 & … \\ A & 稀盐酸 & …``, ``$\mathrm{B}$ & …``):
    A, B, C, ... in order, two or more; the rows' cells are the options, read with the table's
    header, so the table stays in the question and the options are its labels."""
    best: list[str] = []
    for table in _TABULAR.finditer(text):
        letters: list[str] = []
        for row in table.group(2).split("\\\\"):
            cell = _ROW_DRESSING.sub("", row.split("&")[0])
            label = _ROW_LABEL.match(cell)
            if label and ord(label.group(1)) - ord("A") == len(letters):
                letters.append(label.group(1))
        if len(letters) >= 2 and len(letters) >= len(best):
            best = letters
    return best or None


def _bodies(text: str, run: list[_Label], regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, stop) of each option's text, trimmed (``_trimmed``)."""
    ends = [label.start for label in run[1:]] + [len(text)]
    return [_trimmed(text, label.end, end, regions) for label, end in zip(run, ends)]


def _defect(text: str, run: list[_Label], bodies: list[tuple[int, int]], regions: list[tuple[int, int]]) -> str | None:
    """Why this run cannot be the options (the held label, ``option B: '...'``), or None: an
    option holds a label with text after it (``; C. There is ...``), or an option without text
    among options with text has its label inside the text before it (``... Shape ;C.; D. ...``)."""
    empty = [start == stop for start, stop in bodies]
    for k, (label, (_, stop)) in enumerate(zip(run, bodies)):
        held = _held_label(text, label.end, stop, regions)
        if held is not None:
            return f"option {chr(ord('A') + label.index)}: {held}"
        if empty[k] and not all(empty) and k > 0 and not text[label.start - 1].isspace():
            before = run[k - 1]
            return f"option {chr(ord('A') + before.index)}: {text[before.end:label.end]!r}"
    return None


_SEARCH_READS = 8  # past reading the text this many times over, a text keeps its first-found run


def _sound_run(text: str, run: list[_Label], labels: list[_Label], regions: list[tuple[int, int]]) -> list[_Label] | None:
    """A run as long as ``run``, of labels of its kind, in which no option holds a label and
    options are all with text or all without; the first such in reading order, or None.

    The first label found of a letter can be that letter inside the option before it (We-Math's
    ``A. ... angle ∠AB;E.; B. ... angle ∠AB;C.; C. There is no obtuse angle.``): the label a
    reader reads is a later one."""
    on_lines = all(label.line_start for label in run)
    glued = any(label.glued for label in run)
    by_letter = _by_letter([label for label in labels
                            if (label.line_start if on_lines else label.strong) and (glued or not label.glued)])
    read, budget = 0, _SEARCH_READS * len(text) + 10_000

    def body(label: _Label, end: int) -> tuple[bool, bool]:
        """(holds no label, is empty) of the option from ``label`` to ``end``."""
        nonlocal read
        read += end - label.end
        if read > budget:
            raise _GiveUp
        start, stop = _trimmed(text, label.end, end, regions)
        return _held_label(text, label.end, stop, regions) is None, start == stop

    def extend(chosen: list[_Label], empties: frozenset[bool]) -> list[_Label] | None:
        if len(chosen) == len(run):
            sound, empty = body(chosen[-1], len(text))
            return chosen if sound and len(empties | {empty}) == 1 else None
        starts, candidates = by_letter.get(chosen[-1].index + 1, ([], []))
        for candidate in candidates[bisect_left(starts, chosen[-1].end):]:
            sound, empty = body(chosen[-1], candidate.start)
            if sound and len(empties | {empty}) == 1:
                found = extend([*chosen, candidate], empties | {empty})
                if found is not None:
                    return found
        return None

    try:
        for first in by_letter.get(0, ([], []))[1]:
            if not first.glued:
                found = extend([first], frozenset())
                if found is not None:
                    return found
    except _GiveUp:
        pass
    return None


class _GiveUp(Exception):
    """``_sound_run`` read the text ``_SEARCH_READS`` times over."""


def _held_label(text: str, start: int, stop: int, regions: list[tuple[int, int]]) -> str | None:
    """The option ``text[start:stop]`` (separators before it kept), shown, when it holds a label
    with text after it (``; C. There is ...``) outside math; else None."""
    body = text[start:stop]
    for match in _HELD_RUN.finditer(body):
        if not _inside(regions, start + match.start()):
            return repr(body)
    return None


_OWN_LABEL = re.compile(
    r"[ \t\u3000]*(?:[(（\[][ \t]*(?P<inner>[A-Za-zＡ-Ｚ]|\d{1,2})[ \t]*[)）\]]"
    r"|(?P<bare>[A-Za-zＡ-Ｚ]|\d{1,2})[ \t]*(?P<mark>[.．:：、)）]))(?P<after>[ \t\u3000]+|$)?"
)


def own_labels(options: list[str], places: list[int] | None = None) -> tuple[list[str], list[str]] | None:
    """(texts, labels) of options given as a list whose every item starts with the label of its
    own place (``places``: each one's, by default 0, 1, 2, ...), in one style (``A. 5`` ``B. 6``;
    ``(a) cat`` ``(b) dog``; ``(1) cat`` ``(2) dog``), or None. A label is followed by white
    space, or is in brackets (``1.5`` is a number). An option that is only its label keeps it."""
    if len(options) < 2 or not all(isinstance(option, str) for option in options):
        return None
    texts, labels, styles = [], [], set()
    for k, option in zip(places or range(len(options)), options):
        found = _OWN_LABEL.match(option)
        if found is None or (found.group("bare") and found.group("after") is None and found.group("mark") in ".:)"):
            return None  # "1.5", "A.5": a number, not a label (a full-width mark needs no space: "Ａ．甲")
        label = unicodedata.normalize("NFKC", found.group("inner") or found.group("bare"))
        if label not in (chr(ord("A") + k), chr(ord("a") + k), str(k + 1)):
            return None
        styles.add((label.isdigit(), label.islower(), found.group("mark") if found.group("bare") else "()"))
        texts.append(option[found.end():].strip() or label)
        labels.append(label)
    return (texts, labels) if len(styles) == 1 else None


def split_options(text: str) -> tuple[str, list[str]] | None:
    """(stem, option texts) of a text whose options are written in it, or None."""
    found = read_options(text)
    return None if found is None else (found.stem, found.options)


def held_label(option: str, own: int) -> str | None:
    """``option`` (the option at ``own``, given as a list item) holds another option's label
    (see the module docstring), or None."""
    found = _held_label(option, 0, len(option), _math_regions(option))
    return None if found is None else f"option {chr(ord('A') + own)}: {found}"


def strip_placeholders(text: str) -> tuple[str, list[int]]:
    """``text`` without ``<image1>`` / ``<image 1>`` placeholders, nor LLaVA's unnumbered
    ``<image>`` (with the line break after it), and the image numbers they named."""
    numbers = [int(n) for n in _PLACEHOLDER.findall(text)]
    stripped = _UNNUMBERED_PLACEHOLDER.sub("", text)
    if not numbers and stripped == text:
        return text, []
    return _PLACEHOLDER.sub("", stripped).strip(), numbers
