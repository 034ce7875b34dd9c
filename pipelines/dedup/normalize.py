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
