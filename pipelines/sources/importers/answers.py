"""Reading an answer given as a letter, a 0-based index or the option's text.

``parse_answer`` returns the 0-based index of the correct option or raises ``AnswerError``
with a one-line reason. With ``answer_format="auto"`` every reading that applies is tried;
when two readings point at different options (e.g. answer ``"1"`` with options
``["1", "2"]``: index 1, or the text of option 0) the answer is refused as ambiguous rather
than guessed; choose ``letter``, ``index`` or ``text`` explicitly to resolve it.
"""

from __future__ import annotations

import math
import re
import string
from typing import Any, Sequence

from .common import RecordProblem, one_line

ANSWER_FORMATS = ("auto", "letter", "index", "text")

_LETTER = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*)?"
    r"[(\[]?\s*([a-z])\s*[)\]]?\s*[.:)]?$",
    re.IGNORECASE,
)
_LETTER_WITH_TEXT = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+)?answer(?:\s+is)?\s*[:\-]?\s*)?[(\[]?([a-z])[)\].:]\s+(.+)$",
    re.IGNORECASE | re.DOTALL,
)
_INDEX = re.compile(r"^\s*\d+\s*$")


class AnswerError(RecordProblem):
    """The answer cannot be read as exactly one option."""


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _shown(value: Any) -> str:
    return one_line(repr(value), 80)


def parse_answer(
    value: Any,
    option_texts: Sequence[str] | None,
    num_options: int,
    labels: Sequence[str] | None = None,
    answer_format: str = "auto",
) -> int:
    """The 0-based option index that ``value`` designates.

    ``option_texts`` are the text options (None for image options); ``labels`` are the
    option labels when the source names them (e.g. the keys of ``{"A": ..., "B": ...}``),
    by default A, B, C, ... .
    """
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer format {answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}")
    if value is None or (isinstance(value, str) and not value.strip()):
        raise AnswerError("missing answer")
    if isinstance(value, bool) or isinstance(value, (list, dict, tuple)):
        raise AnswerError(f"answer {_shown(value)} is not a single letter, index or option text")
    if labels is None:
        labels = list(string.ascii_uppercase[:num_options])
    label_index = {str(label).strip().casefold(): i for i, label in enumerate(labels)}

    readings: list[tuple[str, int]] = []
    if isinstance(value, (int, float)):
        if answer_format not in ("auto", "index"):
            raise AnswerError(f"answer {_shown(value)} is a number, expected {answer_format}")
        if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
            raise AnswerError(f"answer {_shown(value)} is not a whole-number index")
        readings.append(("index", int(value)))
    elif isinstance(value, str):
        text = value.strip()
        if answer_format in ("auto", "index") and _INDEX.match(text):
            readings.append(("index", int(text)))
        if answer_format in ("auto", "letter"):
            letter = _LETTER.match(text)
            if letter:
                readings.append(("letter", label_index.get(letter.group(1).casefold(), num_options)))
            elif text.casefold() in label_index:
                readings.append(("letter", label_index[text.casefold()]))
            else:
                with_text = _LETTER_WITH_TEXT.match(text)
                if with_text and option_texts is not None:
                    i = label_index.get(with_text.group(1).casefold())
                    if i is not None and i < len(option_texts) and _norm(option_texts[i]) == _norm(with_text.group(2)):
                        readings.append(("letter", i))
        if answer_format in ("auto", "text") and option_texts is not None:
            matches = [i for i, opt in enumerate(option_texts) if _norm(opt) == _norm(text)]
            if len(matches) > 1:
                raise AnswerError(f"answer {_shown(value)} matches {len(matches)} options' text")
            if matches:
                readings.append(("text", matches[0]))
    else:
        raise AnswerError(f"answer {_shown(value)} is not a letter, an index or an option's text")

    in_range = [(kind, i) for kind, i in readings if 0 <= i < num_options]
    distinct = sorted({i for _, i in in_range})
    if len(distinct) == 1:
        return distinct[0]
    if len(distinct) > 1:
        described = ", ".join(f"as {kind} option {i}" for kind, i in in_range)
        raise AnswerError(f"ambiguous answer {_shown(value)}: {described}")
    if readings:
        raise AnswerError(f"answer {_shown(value)} out of range for {num_options} options")
    wanted = "a letter, a 0-based index or an option's text" if answer_format == "auto" else f"a valid {answer_format}"
    raise AnswerError(f"answer {_shown(value)} is not {wanted}")
