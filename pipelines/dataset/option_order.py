"""Whether a question's option order carries meaning, so the shuffle must keep it.

Two kinds of option lists keep their order:

- ``kept-order:figure-labels``: every option is only the label of its own position
  (``A`` ``B`` ``C``; ``(a)`` ``(b)``; ``Ａ．`` ``Ｂ．``; ``I`` ``II`` ``III``; ``1`` ``2``;
  ``①`` ``②``; ``甲`` ``乙``): the real options are drawn in the picture under those labels,
  so the option at position D must stay the picture's option D.
- ``kept-order:refers-to-options``: some option points at other options ("All of the
  above", "None of these", "Both A and B", "B and C only", "以上都不对"), which only reads
  right with the options in their original places.

Everything else (including every list of image options) is ``shuffled``. The decision
depends on the option texts alone, so it can be memoized per distinct option list.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Sequence

SHUFFLED = "shuffled"
FIGURE_LABELS = "kept-order:figure-labels"
REFERS_TO_OPTIONS = "kept-order:refers-to-options"
KEPT_ORDER_PREFIX = "kept-order:"

ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X")
HEAVENLY_STEMS = "甲乙丙丁戊己庚辛壬癸"
CJK_NUMERALS = "一二三四五六七八九十"

_TEX_WRAPPER = re.compile(r"\\(?:mathrm|text|textbf|mathbf|textrm|mathit|textit|rm|bf)\s*\{([^{}]*)\}")
_TEX_DELIMITERS = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$")
# a label with its usual dressing: (A)  [A]  A.  A)  A:  A、  and the bare token
_DRESSED_LABEL = re.compile(r"^[(\[]\s*([^()\[\]\s]+)\s*[)\]]\s*[.:]?$|^([^()\[\]\s.:、)]+)\s*[.:、)]?$")

_LONGEST_LABEL = len("( VIII ).")

_TAIL_WORD = (
    r"(?:answers?|options?|choices?|statements?|responses?|are|is|correct|true|right|wrong|incorrect|false"
    r"|apply|applies|mentioned|listed|given|possible|of|the|these|above|three|four|five|two)"
)
# the whole option is the reference ("None of the above", "All of these are correct"), so a
# sentence about things in the stem ("All of these animals are mammals") is not one
_REFERENCE_PHRASE = re.compile(
    r"^(?:all|none|both|neither|either|any)\s+(?:of\s+)?(?:the\s+)?"
    r"(?:above|these|those|them|preceding|foregoing|previous|others?|given|listed|options?|choices?|answers?)\b"
    rf"(?:\s+{_TAIL_WORD}\b)*\s*[.!]?$"
    r"|^(?:all|none|both|neither)\s+(?:of\s+)?(?:the\s+)?(?:above|other|previous|preceding|given|listed)\s+"
    rf"(?:options?|choices?|answers?|statements?|responses?)\b(?:\s+{_TAIL_WORD}\b)*\s*[.!]?$"
    r"|^(?:all|both)\s+(?:two|three|four|five|2|3|4|5)(?:\s+(?:are\s+)?(?:correct|true|right))?\s*[.!]?$"
    r"|^(?:all|none)\s+(?:are|is)\s+(?:correct|true|right|wrong|incorrect|false)\s*[.!]?$"
    r"|^no\s+(?:other\s+)?(?:option|choice|answer)s?\s+(?:above\s*|(?:is|are)\s+(?:correct|true|right))\s*[.!]?$"
    r"|^(?:neither|both|all|none|either)\s*[.!]?$",
    re.IGNORECASE,
)
# "以上都对", "以上说法均不正确", "都不对", "上述选项都正确" ("上述流程…" is a statement, not one)
_CHINESE_REFERENCE = re.compile(
    r"^以上(?:.{0,6}(?:都|均|皆|全|各项|选项|答案|说法|几项|三项|四项)|[。.]?$)"
    r"|^(?:上述|前述)(?:说法|选项|答案|各项|几项|三项|四项|.{0,2}(?:都|均|皆|全)(?:不)?(?:对|正确|错误|错|是))"
    r"|^(?:都|均|皆)(?:不)?(?:对|正确|错误|错|是)|^全(?:部|都)?(?:不)?(?:对|正确)"
)
_CHINESE_LETTERS = re.compile(
    r"^[A-Ea-e](?:\s*[、和与及,，]?\s*[A-Ea-e]){1,4}\s*(?:两项|三项|都|均|皆|选项)+.*$"
    r"|^[A-Ea-e](?:\s*[、和与及]\s*[A-Ea-e]){1,4}\s*[。.]?$"
)
# every reference pattern above is anchored at the start and begins with one of these
_REFERENCE_STARTS = frozenset("abcdeno([以上前都均皆全")
_LETTER = re.compile(r"(?<![A-Za-z])[A-Ea-e](?![A-Za-z])")


def _strip_tex(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _TEX_WRAPPER.sub(r"\1", text)
    return _TEX_DELIMITERS.sub("", text)


def _plain(text: str) -> str:
    """NFKC with white space collapsed; TeX stays (a letter in math is a variable, not an option)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split())


def _normalized(text: str) -> str:
    """``_plain`` with TeX delimiters and text wrappers removed (``$\\mathrm{C}$`` -> ``C``)."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    elif "\\" not in text and "$" not in text:
        return " ".join(text.split())
    return " ".join(_strip_tex(text).split())


def label_positions(text: str) -> frozenset[tuple[str, int]]:
    """Every (label scheme, 0-based position) the text can be the bare label of."""
    norm = _normalized(text)
    match = _DRESSED_LABEL.match(norm) if len(norm) <= _LONGEST_LABEL else None
    if not match:
        return frozenset()
    token = match.group(1) or match.group(2)
    found: set[tuple[str, int]] = set()
    if len(token) == 1 and "A" <= token <= "Z":
        found.add(("upper", ord(token) - ord("A")))
    if len(token) == 1 and "a" <= token <= "z":
        found.add(("lower", ord(token) - ord("a")))
    if token in ROMAN:
        found.add(("roman", ROMAN.index(token)))
    if token.upper() in ROMAN and token.islower():
        found.add(("lower-roman", ROMAN.index(token.upper())))
    if token.isascii() and token.isdigit() and 1 <= int(token) <= 20:
        found.add(("digit", int(token) - 1))
    if len(token) == 1 and token in HEAVENLY_STEMS:
        found.add(("stem", HEAVENLY_STEMS.index(token)))
    if len(token) == 1 and token in CJK_NUMERALS:
        found.add(("cjk", CJK_NUMERALS.index(token)))
    return frozenset(found)


SCHEME_PREFERENCE = ("upper", "lower", "digit", "roman", "lower-roman", "stem", "cjk")


def label_index(text: str | None, scheme: str | None = None) -> int | None:
    """The position a bare label names (``"(C)"`` -> 2) in ``scheme``, or in the first scheme
    of ``SCHEME_PREFERENCE`` it belongs to ("I" is a letter unless the scheme says roman)."""
    if text is None:
        return None
    positions = dict(label_positions(text))
    for candidate in (scheme,) if scheme else SCHEME_PREFERENCE:
        if candidate in positions:
            return positions[candidate]
    return None


def sequence_scheme(choices: Sequence[str]) -> str | None:
    """The label scheme in which option j is the label of position j for every j, or None."""
    if len(choices) < 2:
        return None
    schemes: set[str] | None = None
    for j, text in enumerate(choices):
        here = {s for s, i in label_positions(text) if i == j}
        schemes = here if schemes is None else schemes & here
        if not schemes:
            return None
    return next(s for s in SCHEME_PREFERENCE if s in schemes)


def is_label_sequence(choices: Sequence[str]) -> bool:
    return sequence_scheme(choices) is not None


def _letter_token(num_options: int) -> str:
    last = chr(ord("A") + max(num_options, 2) - 1)
    return rf"(?:\(\s*[A-{last}a-{last.lower()}]\s*\)|\[\s*[A-{last}a-{last.lower()}]\s*\]|[A-{last}]\b|[a-{last.lower()}]\b)"


@lru_cache(maxsize=16)
def _letters_reference(num_options: int) -> re.Pattern:
    token = _letter_token(num_options)
    joiner = r"\s*(?:,\s*(?:and|or|&)?|\band\b|\bor\b|\bnor\b|&)\s*"
    lead = r"(?:(?:both|only|either|neither|options?|choices?|answers?)\s+)?"
    tail = r"(?:\s+(?:only|both|are\s+(?:correct|true|right)|together))?"
    return re.compile(rf"^{lead}{token}(?:{joiner}{token})+{tail}\s*[.!]?$", re.IGNORECASE)


def refers_to_options(text: str, num_options: int) -> bool:
    """True when an option's text refers to other options of the same question."""
    norm = _plain(text)
    if not norm or norm[0].lower() not in _REFERENCE_STARTS:
        return False
    if _REFERENCE_PHRASE.match(norm) or _CHINESE_REFERENCE.match(norm):
        return True
    if _CHINESE_LETTERS.match(norm) or _letters_reference(num_options).match(norm):
        return _names_other_options(norm, num_options)
    return False


def _names_other_options(text: str, num_options: int) -> bool:
    """The letters of a reference ("A and C", "A、B都对") name distinct options in order."""
    positions = [ord(x.upper()) - ord("A") for x in _LETTER.findall(text)]
    return all(a < b for a, b in zip(positions, positions[1:])) and all(p < num_options for p in positions)


@lru_cache(maxsize=65536)
def _classify(choices: tuple[str, ...]) -> str:
    if is_label_sequence(choices):
        return FIGURE_LABELS
    if any(refers_to_options(c, len(choices)) for c in choices):
        return REFERS_TO_OPTIONS
    return SHUFFLED


def option_order(choices: Sequence[str | None] | None) -> str:
    """``shuffled`` or ``kept-order:<reason>`` for a question's text options (None: image options)."""
    if choices is None or any(c is None for c in choices):
        return SHUFFLED
    return _classify(tuple(choices))
