"""Text normalization and content identity of quiz questions.

Normalization is deliberately conservative: it removes only differences that never change
what a question asks (Unicode normalization form, white space, zero-width characters,
case). Digits, operators, math symbols and punctuation are kept byte for byte, and NFKC is
never applied (it would turn ``x²`` into ``x2`` and ``½`` into ``1⁄2``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache
from typing import Sequence

from pipelines.clean.latex.convert import find_tex_math

# Zero-width and invisible formatting characters that editors and web pages insert.
_INVISIBLE = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u2060\ufeff\u180e\u00ad\u2061\u2062\u2063\u2064"), None
)

# Characters that carry mathematical meaning besides digits: all of Unicode's math symbols
# (category Sm) and "other numbers" (superscripts, subscripts, vulgar fractions), Greek letters,
# and the ASCII/typographic characters that act as operators in quiz texts.
_MATH_ASCII = set("+-*/^=<>%()[]{}°′″|!")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")


def normalize_text(text: str | None) -> str:
    """Canonical form of a question or option text for identity and similarity.

    NFC, zero-width characters removed, case folded, every run of Unicode white space
    (NBSP, thin and ideographic spaces included) collapsed to one ASCII space, trimmed.
    """
    if not text:
        return ""
    s = unicodedata.normalize("NFC", text).translate(_INVISIBLE).casefold()
    # casefold can produce sequences that are no longer composed (e.g. "İ" -> "i̇").
    s = unicodedata.normalize("NFC", s)
    return " ".join(s.split())


@lru_cache(maxsize=None)
def _is_math_char(ch: str) -> bool:
    if ch in _MATH_ASCII:
        return True
    cat = unicodedata.category(ch)
    if cat in ("Sm", "No"):
        return True
    return "\u0370" <= ch <= "\u03ff"


def math_tokens(normalized: str) -> tuple[str, ...]:
    """The numbers and math symbols of a normalized text, in order, white space ignored.

    Two texts can only be near duplicates when these are equal: "3 + 4" and "3 + 5" differ,
    "3 + 4" and "3+4" do not.
    """
    tokens: list[str] = []
    pos = 0
    for m in _NUMBER_RE.finditer(normalized):
        tokens.extend(ch for ch in normalized[pos : m.start()] if _is_math_char(ch))
        tokens.append(m.group())
        pos = m.end()
    tokens.extend(ch for ch in normalized[pos:] if _is_math_char(ch))
    return tuple(tokens)


# ---- canonical text: what near-duplicate confirmation compares ----------------------------
#
# Two texts are the same question when their canonical forms are equal. The canonical form
# drops what never changes what a text asks: white space, case, sentence punctuation, the
# punctuation of an option label ("A", "(A)", "A.", "Ａ．" all become "a"; a label before an
# option's text is dropped), and TeX notation that typesets the same: math delimiters ($, $$,
# \( \), \[ \]; which dollars are math is the LaTeX stage's rule), spacing commands, \left /
# \right and the \big sizes, \dfrac / \tfrac, braces around a single-token argument (\frac ab =
# \frac{a}{b}, x^2 = x^{2}), \text / \mathrm around words, and the common Unicode forms of TeX
# symbols (× = \times, − = -, ² = ^{2}, ° = ^{\circ}). Every word, number, unit and symbol stays,
# so texts that differ in one content word ("green" / "teal") stay different. Two numbers that
# only white space or punctuation separates stay apart ("2, 3" is not "23").

_LABEL_ONLY = re.compile(r"^[\(\[（［]?\s*([A-Ha-hＡ-Ｈａ-ｈ])\s*[\)\]）］.．:：、]?$")
_LABEL_PREFIX = re.compile(r"^(?:[\(\[（［]\s*[A-Ha-hＡ-Ｈａ-ｈ]\s*[\)\]）］]|[A-Ha-hＡ-Ｈａ-ｈ][\)\]）］.．:：、])\s+(?=\S)")
_TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\s+|.", re.S)
_NEEDS_TEX = re.compile(r"[\\$^_{}~×÷−–·⋅≤≥≠±∞π°′²³∠△→]")
_SEPARATOR = "\x1f"

_TEX_ALIASES = {
    r"\dfrac": r"\frac", r"\tfrac": r"\frac", r"\cfrac": r"\frac", r"\dbinom": r"\binom", r"\tbinom": r"\binom",
    r"\le": r"\leq", r"\ge": r"\geq", r"\leqslant": r"\leq", r"\geqslant": r"\geq", r"\ne": r"\neq",
    r"\lbrace": r"\{", r"\rbrace": r"\}", r"\to": r"\rightarrow", r"\gets": r"\leftarrow", r"\land": r"\wedge",
    r"\lor": r"\vee", r"\lnot": r"\neg", r"\ldots": r"\dots", r"\dotsc": r"\dots", r"\dotsb": r"\cdots",
    r"\lvert": "|", r"\rvert": "|", r"\vert": "|", r"\mid": "|", r"\lt": "<", r"\gt": ">", r"\$": "$",
    r"\%": "%", r"\&": "&",
}
# spacing, sizing and style commands that typeset nothing of their own
_TEX_INVISIBLE = frozenset((
    r"\left", r"\right", r"\middle", r"\big", r"\Big", r"\bigg", r"\Bigg", r"\bigl", r"\bigr", r"\Bigl", r"\Bigr",
    r"\biggl", r"\biggr", r"\Biggl", r"\Biggr", r"\displaystyle", r"\textstyle", r"\scriptstyle", r"\limits",
    r"\nolimits", r"\quad", r"\qquad", r"\,", r"\;", r"\:", r"\!", "\\ ", r"\>", r"\enspace", r"\thinspace",
    r"\medspace", r"\thickspace", r"\negthinspace", r"\mathstrut", r"\(", r"\)", r"\[", r"\]", "~",
))

_TEX_TEXT = frozenset((r"\text", r"\textrm", r"\mathrm", r"\mbox", r"\textnormal", r"\operatorname", r"\textit", r"\mathit"))
_TEX_ARITY = {r"\frac": 2, r"\binom": 2, r"\sqrt": 1, r"\overline": 1, r"\underline": 1, r"\vec": 1, r"\hat": 1,
              r"\bar": 1, r"\widehat": 1, r"\overrightarrow": 1, r"\mathbf": 1, r"\boldsymbol": 1, r"\pmb": 1,
              r"\hspace": 1, "^": 1, "_": 1}
_TEX_DROPPED_WITH_ARGUMENT = frozenset((r"\hspace",))
_UNICODE_TEX = {
    "×": r"\times", "÷": r"\div", "−": "-", "–": "-", "·": r"\cdot", "⋅": r"\cdot", "≤": r"\leq", "≥": r"\geq",
    "≠": r"\neq", "±": r"\pm", "∞": r"\infty", "π": r"\pi", "∠": r"\angle", "△": r"\triangle", "→": r"\rightarrow",
    "′": "'",
}
_UNICODE_SCRIPTS = {"²": "2", "³": "3", "°": r"\circ"}
# sentence punctuation: dropped (a separator between two digits)
_SENTENCE = frozenset(".,;:!?¿¡\"“”„«»‘’…—")


def _canonical_tokens(tokens: list[str], pos: int, stop: str | None, out: list[str]) -> int:
    """Append the canonical tokens of ``tokens[pos:]`` to ``out`` until ``stop`` (a closing
    brace) or the end; returns the position after it."""
    n = len(tokens)
    while pos < n:
        tok = tokens[pos]
        pos += 1
        if tok == stop:
            return pos
        if tok.isspace():
            out.append(" ")
            continue
        tok = _TEX_ALIASES.get(tok, tok)
        if tok in _TEX_INVISIBLE:
            if tok in (r"\left", r"\right", r"\middle") or tok.startswith((r"\big", r"\Big")):
                while pos < n and tokens[pos].isspace():
                    pos += 1
                if pos < n and tokens[pos] == ".":
                    pos += 1  # \left. and \right. show nothing
            continue
        if tok in _UNICODE_SCRIPTS:
            out.extend(("^", "{", _UNICODE_SCRIPTS[tok], "}"))
            continue
        if tok in _UNICODE_TEX:
            tok = _UNICODE_TEX[tok]
            if not tok.startswith("\\"):
                out.append(tok)
                continue
        if tok in _TEX_TEXT:
            pos = _argument(tokens, pos, out, braced=False)
            continue
        arity = _TEX_ARITY.get(tok)
        if arity is not None:
            if tok in _TEX_DROPPED_WITH_ARGUMENT:
                pos = _argument(tokens, pos, [], braced=True)
                continue
            out.append(tok)
            if tok == r"\sqrt":
                while pos < n and tokens[pos].isspace():
                    pos += 1
                if pos < n and tokens[pos] == "[":
                    out.append("[")
                    depth, pos = 1, pos + 1
                    inner: list[str] = []
                    start = pos
                    while pos < n and depth:
                        depth += {"[": 1, "]": -1}.get(tokens[pos], 0)
                        pos += 1
                    _canonical_tokens(tokens[start:pos - 1], 0, None, inner)
                    out.extend(inner)
                    out.append("]")
            for _ in range(arity):
                pos = _argument(tokens, pos, out, braced=True)
            continue
        if tok == "{":
            inner = []
            pos = _canonical_tokens(tokens, pos, "}", inner)
            if inner:
                out.append("{")
                out.extend(inner)
                out.append("}")
            continue
        out.append(tok if tok.startswith("\\") else tok.casefold())
    return pos


def _argument(tokens: list[str], pos: int, out: list[str], braced: bool) -> int:
    """One argument (a brace group or a single token), canonical, braced or bare."""
    n = len(tokens)
    while pos < n and tokens[pos].isspace():
        pos += 1
    inner: list[str] = []
    if pos < n and tokens[pos] == "{":
        pos = _canonical_tokens(tokens, pos + 1, "}", inner)
    elif pos < n:
        _canonical_tokens(tokens[pos:pos + 1], 0, None, inner)
        pos += 1
    if braced:
        out.append("{")
        out.extend(inner)
        out.append("}")
    else:
        out.extend(inner)
    return pos


def _finish(tokens: list[str]) -> str:
    """Drop white space and sentence punctuation; keep a separator where they stood between two
    digits, and a decimal point written without spaces."""
    kept: list[str] = []
    gap = False
    for i, tok in enumerate(tokens):
        if tok == " " or tok in _SENTENCE:
            if tok == "." and not gap and kept and kept[-1][-1:].isdigit() and i + 1 < len(tokens) \
                    and tokens[i + 1][:1].isdigit():
                kept.append(tok)
                continue
            if tok == "!" and kept and (kept[-1][-1:].isdigit() or kept[-1] in (")", "}")):
                kept.append(tok)  # a factorial
                continue
            gap = True
            continue
        if gap and kept and kept[-1][-1:].isdigit() and tok[:1].isdigit():
            kept.append(_SEPARATOR)
        gap = False
        kept.append(tok)
    out = []
    for i, tok in enumerate(kept):
        out.append(tok)
        if tok[:1] == "\\" and tok[1:2].isalpha() and i + 1 < len(kept) and kept[i + 1][:1].isalpha():
            out.append(" ")  # \pi r is not \pir
    return "".join(out)


def _dollars_as_delimiters(text: str) -> str:
    """``$...$`` / ``$$...$$`` math as ``\\( \\)`` / ``\\[ \\]``; a dollar that opens no math (a
    price: "$5 and $6") stays a dollar. Which dollars are math is the LaTeX stage's rule
    (``latex.find_tex_math``)."""
    out, pos = [], 0
    for region in find_tex_math(text):
        if region.delimiter in ("$", "$$"):
            opening, closing = ("\\(", "\\)") if region.delimiter == "$" else ("\\[", "\\]")
            out.append(text[pos:region.start] + opening + region.inner + closing)
            pos = region.end
    out.append(text[pos:])
    return "".join(out)


def _strip_label(text: str) -> str:
    only = _LABEL_ONLY.match(text)
    if only:
        return unicodedata.normalize("NFKC", only.group(1))
    return _LABEL_PREFIX.sub("", text, count=1)


_MAX_TEX_NESTING = 100  # brace and bracket groups; _canonical_tokens recurses once or twice per level


def _nesting(tokens: list[str]) -> int:
    depth = deepest = 0
    for tok in tokens:
        if tok in ("{", "["):
            depth += 1
            deepest = max(deepest, depth)
        elif tok in ("}", "]") and depth:
            depth -= 1
    return deepest


@lru_cache(maxsize=1 << 16)
def canonical_text(text: str | None, option: bool = False) -> str:
    """The form near-duplicate confirmation compares (see the comment above); ``option=True``
    also removes the punctuation of an option label."""
    if not text:
        return ""
    s = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
    s = " ".join(s.split())
    if option:
        s = _strip_label(s)
    if _NEEDS_TEX.search(s):
        if "$" in s:
            s = _dollars_as_delimiters(s)
        tokens: list[str] = []
        tex = _TEX_TOKEN.findall(s)
        if _nesting(tex) <= _MAX_TEX_NESTING:
            _canonical_tokens(tex, 0, None, tokens)
        else:  # deeper than any formula (hostile): compared as written, never parsed recursively
            tokens = [tok if tok.startswith("\\") else tok.casefold() for tok in tex]
    else:
        tokens = list(s.casefold())
    return unicodedata.normalize("NFC", _finish(tokens))


def _options_key(choices: Sequence[str] | None, choice_images: Sequence[str] | None) -> str:
    if choices is not None:
        return "t:" + "\x1f".join(sorted(normalize_text(c) for c in choices))
    if choice_images is not None:
        return "i:" + "\x1f".join(sorted(choice_images))
    return "-"


def question_identity(
    problem: str | None,
    problem_image: str | None,
    choices: Sequence[str] | None,
    choice_images: Sequence[str] | None,
) -> str:
    """The content identity of a question: normalized text, image content hashes and the
    multiset of its options (sorted, so that option order does not matter)."""
    return "\x1e".join(
        (
            normalize_text(problem),
            problem_image or "-",
            _options_key(choices, choice_images),
        )
    )


def question_id_of(
    problem: str | None,
    problem_image: str | None,
    choices: Sequence[str] | None,
    choice_images: Sequence[str] | None,
) -> str:
    """16 lowercase hex characters: the start of the sha256 of ``question_identity``."""
    identity = question_identity(problem, problem_image, choices, choice_images)
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
