"""TeX math a text already holds: ``find_tex_math`` finds its regions (``$x$``, ``$$x$$``,
``\\( x \\)``, ``\\[ x \\]``, ``\\begin{name}...\\end{name}``), ``extract_math`` lists their TeX and
``changed_math`` says which of a text's formulas another text no longer holds.

One definition for every stage: the importers read options around it (a label is never inside
math, a price is no math), the LaTeX stage keeps it byte for byte, and the checks compare it.
The rules (prices, paragraph breaks, unclosed delimiters) are in ``pipelines.clean.latex.convert``'s
module docstring.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TexMath:
    """A region of TeX math already in a text: ``text[start:end]`` as written."""

    start: int
    end: int
    delimiter: str  # "$", "$$", "\\(", "\\[" or "env" (a \begin{...}...\end{...} block)
    inner: str      # the TeX inside the delimiters; for "env" the whole block

    def output(self, text: str) -> str:
        """The region as conversion writes it: ``$``/``$$`` become ``\\( \\)``/``\\[ \\]``."""
        if self.delimiter == "$":
            return "\\( " + self.inner + " \\)"
        if self.delimiter == "$$":
            return "\\[ " + self.inner + " \\]"
        return text[self.start:self.end]


# a backslash pair (an environment's \begin{name} / \end{name}, or any escaped character) or a $
_TEX_SCAN_RE = re.compile(r"\\(?:(?P<env>begin|end)\{(?P<name>[A-Za-z]+\*?)\}|(?P<esc>.))|(?P<dollar>\$)", re.S)
_AMOUNT_RE = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")
_BLANK_LINE_RE = re.compile(r"\n[^\S\n]*\n")


def _dollar_content_ok(content: str) -> bool:
    """Whether the text between two dollars can be TeX math: not blank, no paragraph break,
    no other math delimiter inside, every environment opened inside also closed inside."""
    if not content.strip() or _BLANK_LINE_RE.search(content):
        return False
    open_envs: list[str] = []
    for m in _TEX_SCAN_RE.finditer(content):
        if m.group("env") == "begin":
            open_envs.append(m.group("name"))
        elif m.group("env") == "end":
            if not open_envs or open_envs.pop() != m.group("name"):
                return False
        elif m.group("esc") is not None and m.group("esc") in "()[]":
            return False
    return not open_envs


def _inline_dollars_ok(text: str, opening: int, closing: int) -> bool:
    content = text[opening + 1:closing]
    after = text[closing + 1:closing + 3]
    if after[:1].isascii() and after[:1].isdigit():
        return False  # "$5 and $7": a dollar before a number is a price, never a closing one
    if after in ("\\(", "\\["):
        return False  # a price whose number was converted: "$\( 3 \times 4 \)"
    if _AMOUNT_RE.match(content) and content[-1].isspace():
        return False  # "costs $5 and $x$": the first dollar is a price
    return _dollar_content_ok(content)


def find_tex_math(text: str) -> list[TexMath]:
    """Every region of TeX math already in ``text``, left to right (see the module docstring)."""
    return scan_tex_math(text)[0]


def scan_tex_math(text: str) -> tuple[list[TexMath], int | None]:
    """(the math regions, where the first \\( or \\[ that is never closed starts, or None)."""
    if "$" not in text and "\\" not in text:
        return [], None
    dollars: list[int] = []
    openings: list[tuple[int, str]] = []
    closings: dict[str, list[int]] = {"\\(": [], "\\[": []}
    env_end: dict[int, int] = {}
    open_envs: dict[str, list[int]] = {}
    for m in _TEX_SCAN_RE.finditer(text):
        if m.group("dollar"):
            dollars.append(m.start())
            openings.append((m.start(), "$"))
        elif m.group("env") == "begin":
            open_envs.setdefault(m.group("name"), []).append(m.start())
            openings.append((m.start(), "env"))
        elif m.group("env") == "end":
            if open_envs.get(m.group("name")):
                env_end[open_envs[m.group("name")].pop()] = m.end()
        elif m.group("esc") in ("(", "["):
            openings.append((m.start(), "\\" + m.group("esc")))
        elif m.group("esc") in (")", "]"):
            closings["\\(" if m.group("esc") == ")" else "\\["].append(m.start())
    is_dollar = set(dollars)
    found: list[TexMath] = []
    unclosed = None
    pos = 0
    for start, kind in openings:
        if start < pos:
            continue
        if kind == "env":
            if start in env_end:
                pos = env_end[start]
                found.append(TexMath(start, pos, "env", text[start:pos]))
        elif kind != "$":
            ends = closings[kind]
            i = bisect.bisect_left(ends, start + 2)
            if i < len(ends):
                pos = ends[i] + 2
                found.append(TexMath(start, pos, kind, text[start + 2:ends[i]]))
            elif unclosed is None:
                unclosed = start
        elif start + 1 in is_dollar:  # $$ ... $$
            pos = start + 2
            i = bisect.bisect_right(dollars, start + 1)
            if i < len(dollars):
                closing = dollars[i]
                if closing + 1 in is_dollar and _dollar_content_ok(text[start + 2:closing]):
                    pos = closing + 2
                    found.append(TexMath(start, pos, "$$", text[start + 2:closing]))
        else:
            i = bisect.bisect_right(dollars, start)
            if i < len(dollars) and _inline_dollars_ok(text, start, dollars[i]):
                pos = dollars[i] + 1
                found.append(TexMath(start, pos, "$", text[start + 1:dollars[i]]))
    return found, unclosed


def extract_math(text: str) -> list[str]:
    """The TeX of every math region of ``text``, in order, whatever its delimiters (``$x$``,
    ``\\( x \\)`` and ``\\(x\\)`` all give ``x``; an environment gives its whole block)."""
    return [m.inner.strip() for m in find_tex_math(text)]


def changed_math(before: str, after: str) -> list[str]:
    """The math of ``before`` that ``after`` no longer holds, in order (conversion may add
    formulas between the old ones, never change or drop one)."""
    after_math = extract_math(after)
    missing, j = [], 0
    for formula in extract_math(before):
        k = j
        while k < len(after_math) and after_math[k] != formula:
            k += 1
        if k == len(after_math):
            missing.append(formula)
        else:
            j = k + 1
    return missing
