"""Reading an answer given as a letter, an index (0-based, or 1-based for a whole source) or
the option's text.

``parse_answer`` returns the 0-based index of the correct option or raises ``AnswerError``
with a stable reason (and the value in its detail). With ``answer_format="auto"`` every
reading that applies is tried; when two readings point at different options (e.g. answer
``"1"`` with options ``["1", "2"]``: index 1, or the text of option 0) the answer is refused
as ambiguous rather than guessed; choose ``letter``, ``index`` or ``text`` explicitly to
resolve it.

Options the source numbers itself (labels ``1``, ``2``, ...: ``["(1) cat", "(2) dog"]`` or
``{"1": ..., "2": ...}``) are named by their numbers: with ``auto`` the text ``"2"`` (or ``(2)``)
is option ``(2)``, not the 0-based index 2; a number (not a text) is read both ways and refused
when the two differ.

A number read as an index counts from ``index_base``: 0, or 1 with ``answer_format="index1"``
or when a whole source's answers prove it (``IndexAnswers``, ``rows.with_index_base``).

With ``answer_format="letter"`` the letter may be followed by an explanation (``D``,
``D. because ...``, ``(D) ...``, ``D: ...``, ``D ...``): the first letter is the answer.
A letter may be wrapped as real answer fields wrap it (``_bare``: full-width ``Ｂ``, TeX
``$\\mathrm{B}$`` or ``\\boxed{B}``, Markdown ``**B**``, Chinese exams' ``【答案】B``, ``故选B``,
``B选项``), unless the answer is an option's own text (``$a$``).
A list of one answer is that answer. Several answers (``["A", "C"]``, ``"BD"``,
``"(A, D) ..."``) cannot be held by one ``answer_idx`` and are refused as ``several answers``.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from typing import Any, Sequence

from pipelines.ingest.importers.common import RecordProblem, one_line

ANSWER_FORMATS = ("auto", "letter", "index", "index1", "text")

_LETTER = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+)?(?:answer|ans\.?|option|choice)(?:\s+is)?\s*[:\-]?\s*)?"
    r"[(\[]?\s*([a-z])\s*[)\]]?\s*[.:)。]?$",
    re.IGNORECASE,
)
_LETTER_WITH_TEXT = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+)?answer(?:\s+is)?\s*[:\-]?\s*)?[(\[]?([a-z])[)\].:]\s+(.+)$",
    re.IGNORECASE | re.DOTALL,
)
_LETTER_EXPLAINED = re.compile(r"^[(\[（]?([a-z])[)\]）]?(?=$|[\s.:：;；,，、)\-–—])", re.IGNORECASE)
_LETTER_LIST = re.compile(
    r"^[(\[（]?\s*[a-z](?:(?:\s*[,，、;；&/]\s*|\s+and\s+)[a-z])+\s*[)\]）]?(?=$|[\s.:：;,)])", re.IGNORECASE
)
_LETTER_RUN = re.compile(r"^[A-Z](?:\s*[A-Z])+$")
_INDEX = re.compile(r"^\s*(\d+)(?:\.0+)?\s*$")  # "2", or "2.0" as pandas writes an integer column holding a NaN
_NUMBER_LABEL = re.compile(r"^[(（\[]?\s*(\d{1,2})\s*[)）\]]?\s*[.．]?$")


# what wraps a letter in real answer fields: TeX (``$\\mathrm{B}$``, ``\\boxed{B}``, ``\\(B\\)``),
# Markdown bold, and Chinese exams' words for "answer" / "choose" / "option" (``【答案】B``,
# ``答案：B``, ``故选B``, ``B选项``)
_TEX_WRAPPER = re.compile(r"^(?:\$+(.*?)\$+|\\\((.*)\\\)|\\(?:boxed|text|mathrm|textbf|mathbf|rm)\s*\{(.*)\}|\*\*(.*)\*\*)$", re.DOTALL)
_CHINESE_PREFIX = re.compile(r"^(?:【答案】|【解答】)?\s*(?:正确答案|答案|故选|应选|选)?\s*(?:是|为)?\s*[:]?\s*")
_CHINESE_SUFFIX = re.compile(r"\s*(?:选项|项)\s*[.。]?$")


def _bare(text: str) -> str:
    """An answer text without the wrapping around its letter (``_TEX_WRAPPER``, the Chinese
    words), full-width letters and brackets made ASCII (``Ｂ``, ``（B）``); other texts as they are."""
    bare = unicodedata.normalize("NFKC", text).strip()
    bare = _CHINESE_SUFFIX.sub("", _CHINESE_PREFIX.sub("", bare, count=1), count=1).strip()
    while (wrapped := _TEX_WRAPPER.match(bare)) is not None:
        bare = next(group for group in wrapped.groups() if group is not None).strip()
    return bare


class AnswerError(RecordProblem):
    """The answer cannot be read as exactly one option."""


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _shown(value: Any) -> str:
    return one_line(repr(value), 80)


def several_letters(text: str, label_index: dict[str, int]) -> list[str] | None:
    """The labels of an answer naming several options (``BD``, ``A, C``, ``(A and D) ...``),
    or None when ``text`` does not name two or more distinct known labels."""
    if _LETTER_RUN.match(text):
        letters = re.findall(r"[A-Z]", text)
    elif match := _LETTER_LIST.match(text):
        letters = re.findall(r"(?<![a-z])[a-z](?![a-z])", match.group(0), re.IGNORECASE)
    else:
        return None
    if len({x.casefold() for x in letters}) < 2 or any(x.casefold() not in label_index for x in letters):
        return None
    return letters


class IndexAnswers:
    """What a source's answers read as indices have shown of their base: an index 0 proves it
    0-based; an index equal to its question's option count (the option after the last, 0-based)
    with no 0 anywhere proves it 1-based (``one_based``)."""

    def __init__(self):
        self.zero = 0
        self.past_last = 0

    def saw(self, index: int, num_options: int) -> None:
        self.zero += index == 0
        self.past_last += index == num_options

    def one_based(self) -> bool:
        return self.zero == 0 and self.past_last > 0


def parse_answer(
    value: Any,
    option_texts: Sequence[str] | None,
    num_options: int,
    labels: Sequence[str] | None = None,
    answer_format: str = "auto",
    index_base: int = 0,
    indices: IndexAnswers | None = None,
    slots: Sequence[int] | None = None,
) -> int:
    """The 0-based option index that ``value`` designates.

    ``option_texts`` are the text options (None for image options); ``labels`` are the
    option labels when the source names them (e.g. the keys of ``{"A": ..., "B": ...}``),
    by default A, B, C, ... . A number read as an index counts from ``index_base`` (1 with
    ``answer_format="index1"``); ``indices`` is told every such number (``IndexAnswers``).
    """
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer format {answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}")
    if isinstance(value, (list, tuple)):
        if len(value) > 1:
            raise AnswerError("several answers", _shown(value))
        value = value[0] if value else None
    if value is None or (isinstance(value, str) and not value.strip()):
        raise AnswerError("missing answer")
    if isinstance(value, (bool, dict, list, tuple)):
        raise AnswerError("answer is not a single letter, index or option text", _shown(value))
    if answer_format == "index1":
        answer_format, index_base = "index", 1
    if labels is None:
        labels = list(string.ascii_uppercase[:num_options])
    label_index = {str(label).strip().casefold(): i for i, label in enumerate(labels)}
    # options the source numbers itself ("(1) cat", "(2) dog"): a number names its label
    numbered = all(str(label).strip().isdigit() for label in labels)

    readings: list[tuple[str, int]] = []
    several = None
    slot_count = num_options if slots is None else slots[-1] + 1
    empty = set() if slots is None else set(range(slot_count)) - set(slots)
    empty_named = []

    def option_of_slot(i: int) -> int:
        if slots is None:
            return i
        if i in empty:
            empty_named.append(i)
        return slots.index(i) if i in slots else num_options

    def option_of_letter(letter: str) -> int:
        found = label_index.get(letter.casefold())
        if found is None and len(letter) == 1 and letter.isalpha() and ord(letter.upper()) - ord("A") in empty:
            empty_named.append(ord(letter.upper()) - ord("A"))
        return num_options if found is None else found

    if isinstance(value, (int, float)):
        if answer_format not in ("auto", "index"):
            raise AnswerError(f"answer is a number, expected {answer_format}", _shown(value))
        if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
            raise AnswerError("answer is not a whole-number index", _shown(value))
        readings.append(("index", option_of_slot(int(value) - index_base)))
        if indices is not None:
            indices.saw(int(value), slot_count)
        if numbered and answer_format == "auto":
            readings.append(("label", label_index.get(str(int(value)), num_options)))
    elif isinstance(value, str):
        text = value.strip()
        # the options whose text the answer is
        matches = [] if option_texts is None else [i for i, opt in enumerate(option_texts) if _norm(opt) == _norm(text)]
        whole = _INDEX.match(text)
        if answer_format in ("auto", "index") and whole and not (numbered and answer_format == "auto"):
            readings.append(("index", option_of_slot(int(whole.group(1)) - index_base)))
            if indices is not None:
                indices.saw(int(whole.group(1)), slot_count)
        number = _NUMBER_LABEL.match(text) if numbered and answer_format in ("auto", "letter") else None
        if number:
            readings.append(("label", label_index.get(str(int(number.group(1))), num_options)))
        if answer_format in ("auto", "letter"):
            bare = _bare(text)
            if bare != text and matches:
                bare = text  # an option's own text ("$a$" among "$b$", "$a$"): no letter is unwrapped from it
            letter = _LETTER.match(bare)
            if letter:
                readings.append(("letter", option_of_letter(letter.group(1))))
            elif bare.casefold() in label_index:
                readings.append(("letter", label_index[bare.casefold()]))
            else:
                several = several_letters(bare, label_index)
                with_text = _LETTER_WITH_TEXT.match(bare)
                explained = _LETTER_EXPLAINED.match(bare)
                if with_text and option_texts is not None and several is None:
                    i = label_index.get(with_text.group(1).casefold())
                    if i is not None and i < len(option_texts) and _norm(option_texts[i]) == _norm(with_text.group(2)):
                        readings.append(("letter", i))
                if answer_format == "letter" and explained and several is None and not readings:
                    readings.append(("letter", option_of_letter(explained.group(1))))
        if answer_format in ("auto", "text") and option_texts is not None:
            if len(matches) > 1:
                raise AnswerError("answer matches several options' text", _shown(value))
            if matches:
                readings.append(("text", matches[0]))
    else:
        raise AnswerError("answer is not a letter, an index or an option's text", _shown(value))

    in_range = [(kind, i) for kind, i in readings if 0 <= i < num_options]
    distinct = sorted({i for _, i in in_range})
    if len(distinct) == 1:
        return distinct[0]
    if len(distinct) > 1:
        described = ", ".join(f"as {kind} option {i}" for kind, i in in_range)
        raise AnswerError("ambiguous answer", f"{_shown(value)}: {described}")
    if several is not None:
        raise AnswerError("several answers", _shown(value))
    if empty_named:
        raise AnswerError("answer is an empty option", f"{_shown(value)}: slot {empty_named[0]} of the options is empty")
    if readings:
        raise AnswerError("answer out of range", f"{_shown(value)} for {num_options} options")
    wanted = ("a letter, a 0-based index or an option's text" if answer_format == "auto"
              else f"a valid {answer_format}{' (1-based)' if index_base else ''}")
    raise AnswerError(f"answer is not {wanted}", _shown(value))
