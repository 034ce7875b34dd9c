"""Options written inside a question's text (``options_in_text=1``), and image placeholders.

``split_options(text)`` finds the labelled options at the end of a question text and returns
the stem (the text before option A, right-stripped) and the option texts, or None.

A label is a capital letter (full-width ``Ａ`` too) written ``A.``, ``A．``, ``A)``, ``(A)``,
``（A）``, ``A:``, ``A：`` or ``A、``; it may start a line or follow other text on the same
line (``A. 1 B. 2 C. 3 D. 4``, ``...( )A. 6B. 9C. 12D. 18``), but not a Latin letter, a
backslash, an abbreviation or a TeX sub/superscript (``U.S.A.`` and ``x_A.`` are no labels), and never inside
``$...$`` math (counted within the line) or an unclosed ``\\begin{...}`` (options laid out in a table are not parsed).
At the start of a line a lower-case letter (``c.``, an OCR slip) or a bare letter followed by a
space (``B $F$ ...``) is a label too, when every label of the run starts a line.

The options are the longest run of labels A, B, C, ... in order (ties: the run that starts
last, so a stem mentioning "(A)" does not count); each option's text runs to the next label,
the last one's to the end. An option with no text (drawn in the figure) is its letter, so it
stays visible as a label.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass

_STRONG = re.compile(
    r"(?:(?P<open>[(（])(?P<inner>[A-ZＡ-Ｚ])[)）])"
    r"|(?:(?P<bare>[A-ZＡ-Ｚ])[.．)）:：、])"
)
_WEAK_AT_LINE_START = re.compile(r"(?m)^[ \t\u3000]*(?:(?P<lower>[a-z])[.．)）:：、]|(?P<spaced>[A-Z])[ \t](?=\S))")
_NOT_BEFORE_LABEL = re.compile(r"[A-Za-z\\_^{]")
_ABBREVIATION_BEFORE = re.compile(r"(?:^|[^A-Za-z])[A-Z]\.\Z")  # the "S." of U.S.A.
_PLACEHOLDER = re.compile(r"[ \t]*<image[ _]?(\d+)>", re.IGNORECASE)


@dataclass(frozen=True)
class _Label:
    start: int
    end: int
    index: int  # 0 for A
    strong: bool
    line_start: bool


def _letter_index(char: str) -> int:
    return ord(unicodedata.normalize("NFKC", char).upper()) - ord("A")


def _at_line_start(text: str, position: int) -> bool:
    line_begin = text.rfind("\n", 0, position) + 1
    return text[line_begin:position].strip(" \t\u3000") == ""


def _labels(text: str) -> list[_Label]:
    found: dict[int, _Label] = {}
    for match in _STRONG.finditer(text):
        start = match.start()
        if start > 0 and (_NOT_BEFORE_LABEL.match(text[start - 1]) or _ABBREVIATION_BEFORE.search(text[max(0, start - 3) : start])):
            continue
        letter = match.group("inner") or match.group("bare")
        found[start] = _Label(start, match.end(), _letter_index(letter), True, _at_line_start(text, start))
    for match in _WEAK_AT_LINE_START.finditer(text):
        group = "lower" if match.group("lower") else "spaced"
        start = match.start(group)
        if start not in found:
            found[start] = _Label(start, match.end(), _letter_index(match.group(group)), False, True)
    dollars = [m.start() for m in re.finditer(r"(?<!\\)\$", text)]
    begins = [m.start() for m in re.finditer(r"\\begin\{", text)]
    ends = [m.start() for m in re.finditer(r"\\end\{", text)]
    def outside_math(position: int) -> bool:
        # inline math never spans lines here: a lone "$" (a price) upsets one line at most
        line_begin = text.rfind("\n", 0, position) + 1
        return (bisect_left(dollars, position) - bisect_left(dollars, line_begin)) % 2 == 0

    return [
        label
        for _, label in sorted(found.items())
        if outside_math(label.start) and bisect_left(begins, label.start) <= bisect_left(ends, label.start)
    ]


def _run_from(first: _Label, labels: list[_Label], lines_only: bool) -> list[_Label]:
    """Labels B, C, ... after ``first``, each the first one found after the previous; a run
    across lines takes labels that start a line (strong or weak), a free run strong ones."""
    run = [first]
    for label in labels:
        if label.start < run[-1].end or label.index != run[-1].index + 1:
            continue
        if (lines_only and label.line_start) or (not lines_only and label.strong):
            run.append(label)
    return run


def _best_run(labels: list[_Label]) -> list[_Label]:
    runs = []
    for first in labels:
        if first.index != 0:
            continue
        if first.line_start:
            runs.append(_run_from(first, labels, lines_only=True))
        if first.strong:
            runs.append(_run_from(first, labels, lines_only=False))
    return max(runs, key=lambda run: (len(run), all(label.line_start for label in run), run[0].start), default=[])


def split_options(text: str) -> tuple[str, list[str]] | None:
    """(stem, option texts) of a question whose options are written in its text, or None."""
    if not isinstance(text, str):
        return None
    run = _best_run(_labels(text))
    if len(run) < 2:
        return None
    options = []
    for label, following in zip(run, [*run[1:], None]):
        body = text[label.end : following.start if following else len(text)].strip()
        options.append(body or chr(ord("A") + label.index))
    return text[: run[0].start].rstrip(), options


def strip_placeholders(text: str) -> tuple[str, list[int]]:
    """``text`` without ``<image1>`` / ``<image 1>`` placeholders, and the image numbers they named."""
    numbers = [int(n) for n in _PLACEHOLDER.findall(text)]
    if not numbers:
        return text, []
    return _PLACEHOLDER.sub("", text).strip(), numbers
