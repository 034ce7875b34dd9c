"""Answer extraction for generative models: ONE chain of rules, tried in order.

Before the rules, a ``<think>...</think>`` block is removed and white space is trimmed; an
empty response fails. With k options lettered A, B, ... the rules are:

1. ``exact-letter``: the whole response is one letter, optionally in parentheses or
   followed by ``.``, ``)`` or ``:`` (``B``, ``(b)``, ``C.``); any case.
2. ``answer-phrase``: "answer: X", "answer is X", "answer is (X)", "Answer: option X",
   "answer is: **X**" (the word "answer" in any case, X an upper-case letter not followed
   by another letter).
3. ``parenthesized-letter``: an upper-case letter in parentheses, ``(X)``, anywhere.
4. ``option-text``: an option's text appears in the response as a whole phrase
   (case-insensitive, white space collapsed); options whose text is part of another matched
   option's text ("red" inside "dark red") do not count. Text options only.
5. ``option-number``: the whole response is a 1-based option number ("2", "Option 2.").

The first rule that finds any candidate decides: exactly one candidate within range is the
answer; several different candidates (e.g. "(A) or (B)") or a letter/number out of range
make the sample FAILED with the reason, without trying weaker rules. When no rule finds a
candidate the sample fails with ``no answer found``. A failed extraction is prediction -1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from pipelines.evaluation.models.base import OPTION_LETTERS

RULES = ("exact-letter", "answer-phrase", "parenthesized-letter", "option-text", "option-number")

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_EXACT_LETTER = re.compile(r"^\(?([A-Za-z])\s*[).:]?$")
_ANSWER_PHRASE = re.compile(
    r"(?i:\banswer)(?:\s+(?i:is))?\s*[:：]?[\s*]*(?:(?i:option)\s+)?\(?([A-Z])(?![A-Za-z])"
)
_PARENTHESIZED = re.compile(r"\(([A-Z])\)")
_NUMBER = re.compile(r"^(?i:option\s*)?(\d+)\s*[.)]?$")


@dataclass(frozen=True)
class Extraction:
    index: int  # 0-based option, -1 = failed
    rule: str | None  # the rule that decided (None when no rule found a candidate)
    error: str | None = None


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def _decide(rule: str, candidates: list[int], k: int, shown: list[str]) -> Extraction:
    distinct = sorted(set(candidates))
    if len(distinct) > 1:
        return Extraction(-1, rule, f"ambiguous ({rule}): {', '.join(sorted(set(shown)))}")
    index = distinct[0]
    if not 0 <= index < k:
        return Extraction(-1, rule, f"answer {shown[0]} out of range for {k} options ({rule})")
    return Extraction(index, rule)


def extract_answer(response: str | None, num_options: int, options: Sequence[str] | None = None) -> Extraction:
    """Apply the rule chain to a model's response; ``options`` are the option texts (None for image options)."""
    if response is None:
        return Extraction(-1, None, "empty response")
    text = _THINK.sub(" ", response).strip().strip("*").strip()
    if not text:
        return Extraction(-1, None, "empty response")

    match = _EXACT_LETTER.match(text)
    if match:
        letter = match.group(1).upper()
        return _decide("exact-letter", [OPTION_LETTERS.index(letter)], num_options, [letter])

    letters = _ANSWER_PHRASE.findall(text)
    if letters:
        return _decide("answer-phrase", [OPTION_LETTERS.index(c) for c in letters], num_options, letters)

    letters = _PARENTHESIZED.findall(text)
    if letters:
        return _decide("parenthesized-letter", [OPTION_LETTERS.index(c) for c in letters], num_options, letters)

    if options:
        normalized = _normalize(text)
        matched = []
        for index, option in enumerate(options):
            needle = _normalize(option)
            if needle and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", normalized):
                matched.append((index, needle))
        matched = [
            (index, needle)
            for index, needle in matched
            if not any(needle != other and needle in other for _, other in matched)
        ]
        if matched:
            return _decide(
                "option-text", [i for i, _ in matched], num_options, [OPTION_LETTERS[i] for i, _ in matched]
            )

    match = _NUMBER.match(text)
    if match:
        number = int(match.group(1))
        return _decide("option-number", [number - 1], num_options, [match.group(1)])

    return Extraction(-1, None, "no answer found")
