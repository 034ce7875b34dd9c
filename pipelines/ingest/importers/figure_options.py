"""Options drawn only in the figure (``figure_options=``), for a question with one picture and
no options of its own (none in its text with ``options_in_text``, none in its ``choices``
field, no option pictures).

The setting says where the letters come from; nothing is read from the picture:

- ``none`` (the default): such a question is quarantined (``no options in the text`` /
  ``not multiple choice: no options``).
- ``named``: the letters its text names, when it names a run from A (2 to 5 letters) after a
  word of choosing (select, choose, pick, answer, option(s), choice(s), 选项, 选择):
  ``Select from A–E``, ``options A-D``, ``choose from A to D``, ``Choose A, B, C or D.``,
  ``answer with A, B, C, or D``, ``从A~D中选择``; a list must end there (``.``, ``,``, ``)``,
  the end of the text), and so must a dash range (or go on with 中). A text that names none stays quarantined: ``Points A, B, C and D lie
  on a circle`` and ``the shortest path from A to D`` name points, not options.
- ``A-D`` (any last letter from B to E): every such question has these letters (a corpus whose
  options are always drawn in the figure, four of them).

Either way the question's options are the letters themselves (``A``, ``B``, ...), which the
dataset stages keep in order as figure labels (``pipelines.dataset.option_order``), and a letter
answer names one of them. The text is kept whole: it is what tells a reader where the options
are. The same letters for every row can also be given as a constant list, ``choices='A,B,C,D'``
(see ``rows.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.ingest.importers.common import ImportSourceError

LAST_LETTER = "E"  # at most five options: the STEM release's 2 to 5
_CHOOSING = r"(?:select|choose|pick|answer|options?|choices?|选项|选择|选出)"
_LETTER = r"[(（]?((?-i:[A-EＡ-Ｅ]))[)）]?"  # capitals only, whatever the flags
_END = r"(?=\s*(?:[.。?？!！;；:：,，)）]|$))"
_RANGES = (
    # Select from A–E, options A-D, 选项A～D: a dash or a tilde, a word of choosing before it
    re.compile(_CHOOSING + r"[^.?!。？！\n]{0,40}?(?<![A-Za-z])" + _LETTER + r"\s*[-–—~～〜]\s*" + _LETTER + r"(?![A-Za-z])"
               + r"(?=\s*(?:[.。?？!！;；:：,，)）中]|$))", re.IGNORECASE),
    # choose from A to D, options A through E (never "the path from A to D")
    re.compile(r"(?:(?:select|choose|pick)(?:\s+(?:one|an?\s+answer|the\s+answer|an?\s+option))?\s+(?:from|among)|options|choices)"
               r"\s+" + _LETTER + r"\s+(?:to|through|thru)\s+" + _LETTER + r"(?![A-Za-z])", re.IGNORECASE),
    # 从A~D中选择, 在A-E中选出
    re.compile(r"(?<![A-Za-z])" + _LETTER + r"\s*[-–—~～〜至到]\s*" + _LETTER + r"\s*(?:中|里)?\s*(?:选|挑)"),
)
_LIST = re.compile(
    _CHOOSING + r"[^.?!。？！\n]{0,40}?(?<![A-Za-z])(" + _LETTER + r"(?:\s*[,，、]\s*" + _LETTER + r")*"
    + r"(?:\s*[,，、]?\s*(?:or|and|或|和)\s*" + _LETTER + r")?)(?![A-Za-z])" + _END,
    re.IGNORECASE,
)
_ONE_LETTER = re.compile(r"[A-EＡ-Ｅ]")


def _index(letter: str) -> int:
    return ord(letter.upper()) - ord("A") if letter.isascii() else ord(letter) - ord("Ａ")


def _letters(count: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(count)]


def named_letters(text: str) -> list[str] | None:
    """The option letters ``text`` names (a run from A, 2 to 5 of them; see the module
    docstring), or None. The last naming in the text counts."""
    if not isinstance(text, str):
        return None
    found = None
    for pattern in _RANGES:
        for match in pattern.finditer(text):
            first, last = _index(match.group(1)), _index(match.group(2))
            if first == 0 and last >= 1 and (found is None or match.start() > found[0]):
                found = (match.start(), last + 1)
    for match in _LIST.finditer(text):
        letters = [_index(m.group(0)) for m in _ONE_LETTER.finditer(match.group(1))]
        if letters == list(range(len(letters))) and len(letters) >= 2 and (found is None or match.start() > found[0]):
            found = (match.start(), len(letters))
    return _letters(found[1]) if found else None


@dataclass(frozen=True)
class FigureOptions:
    text: str  # as written: "named" or "A-D"
    count: int | None  # the constant letters' count; None for "named"

    def letters(self, problem: str) -> list[str] | None:
        """The options of a question with none of its own, or None (left quarantined)."""
        return _letters(self.count) if self.count is not None else named_letters(problem)


def parse_figure_options(value: str | None, kind: str) -> FigureOptions | None:
    """The ``figure_options`` setting, or None for ``none`` / unset; ImportSourceError if malformed."""
    if value in (None, "", "none"):
        return None
    if value == "named":
        return FigureOptions(value, None)
    match = re.fullmatch(r"A-([B-E])", value)
    if match:
        return FigureOptions(value, _index(match.group(1)) + 1)
    raise ImportSourceError(
        f"figure_options={value!r} in {kind} mapping: expected none, named, or letters A-B to A-{LAST_LETTER}"
    )
