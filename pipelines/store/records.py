"""The records that flow between stages, and their Arrow schemas.

A source (crawler parse step or importer) yields ``RawQuestion`` and ``QuarantineEntry``
objects. Images are never carried inline: they live in the content-addressed
``ImageStore`` and records refer to them by ``image_hash`` (sha256 of the stored bytes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Union

import polars as pl
import pyarrow as pa

SUBJECTS = ("science", "technology", "engineering", "math")

RAW_QUESTION_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_key", pa.string(), nullable=False),
        pa.field("subject", pa.string(), nullable=False),
        pa.field("grade", pa.string()),
        pa.field("skill", pa.string(), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
        pa.field("problem_image", pa.string()),
        pa.field("choices", pa.list_(pa.string())),
        pa.field("choice_images", pa.list_(pa.string())),
        pa.field("answer_idx", pa.int64(), nullable=False),
        pa.field("source_split", pa.string()),
        pa.field("extra", pa.string(), nullable=False),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_key", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
    ]
)


@dataclass(frozen=True)
class RawQuestion:
    """One parsed multiple-choice question, before any cleaning.

    Exactly one of ``choices`` (text options) and ``choice_images`` (image hashes) is set.
    ``answer_idx`` is 0-based in the source's option order; -1 means the source does not
    publish the answer (e.g. the public STEM test split).
    """

    source: str
    source_key: str
    subject: str
    grade: str | None
    skill: str
    problem: str
    problem_image: str | None = None
    choices: tuple[str, ...] | None = None
    choice_images: tuple[str, ...] | None = None
    answer_idx: int = -1
    source_split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_key": self.source_key,
            "subject": self.subject,
            "grade": self.grade,
            "skill": self.skill,
            "problem": self.problem,
            "problem_image": self.problem_image,
            "choices": list(self.choices) if self.choices is not None else None,
            "choice_images": list(self.choice_images) if self.choice_images is not None else None,
            "answer_idx": int(self.answer_idx),
            "source_split": self.source_split,
            "extra": json.dumps(self.extra, sort_keys=True, ensure_ascii=False),
        }

    @property
    def num_choices(self) -> int:
        return len(self.choices if self.choices is not None else self.choice_images or ())


@dataclass(frozen=True)
class QuarantineEntry:
    """A record, page or file that could not be used, with the stage and the reason."""

    source: str
    source_key: str
    stage: str
    reason: str
    detail: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_key": self.source_key,
            "stage": self.stage,
            "reason": self.reason,
            "detail": self.detail,
        }


Record = Union[RawQuestion, QuarantineEntry]


# C0 controls except tab, LF and CR; DEL; C1 controls. NUL is not here: it quarantines.
_STRAY_CONTROL_CHARACTERS = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# UTF-8 read as Latin-1 or cp1252: a lead byte's character (Â..ô) followed by a continuation byte's
# (U+0080..U+00BF, or what cp1252 shows for 0x80..0x9F); only such texts go to ftfy, so a lone C1
# control is stripped below, not read as a cp1252 sign
_MOJIBAKE_HINT = re.compile(
    "[\u00c2-\u00f4][\u0080-\u00bf\u20ac\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039"
    "\u0152\u017d\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u017e\u0178]"
)


# Word's Symbol font: its characters land in the private use area at U+F020 + their code
# (SceMQA's 'scattered \uf061-particle' is an α-particle). The letters and the mathematical
# signs of the Symbol encoding; the rest of the area (other fonts' pictures) stays as written.
_SYMBOL_FONT = {
    **{0xF000 + code: chr(code) for code in range(0x20, 0x40)},
    **{0xF000 + code: letter for code, letter in zip(range(0x41, 0x5B), "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ")},
    **{0xF000 + code: letter for code, letter in zip(range(0x61, 0x7B), "αβχδεφγηιϕκλμνοπθρστυϖωξψζ")},
    **{0xF000 + code: sign for code, sign in zip(range(0xA3, 0xBC), "≤⁄∞ƒ♣♦♥♠↔←↑→↓°±″≥×∝∂•÷≠≡≈")},
    0xF022: "∀", 0xF024: "∃", 0xF027: "∋", 0xF02A: "∗", 0xF02D: "−", 0xF040: "≅", 0xF05B: "[", 0xF05C: "∴",
    0xF05D: "]", 0xF05E: "⊥", 0xF07B: "{", 0xF07C: "|", 0xF07D: "}", 0xF07E: "∼", 0xF0A2: "′", 0xF0C6: "∅",
    0xF0C7: "∩", 0xF0C8: "∪", 0xF0CC: "⊂", 0xF0CE: "∈", 0xF0CF: "∉", 0xF0D0: "∠", 0xF0D1: "∇", 0xF0D5: "∏",
    0xF0D6: "√", 0xF0D7: "⋅", 0xF0D8: "¬", 0xF0D9: "∧", 0xF0DA: "∨", 0xF0DE: "⇒", 0xF0DB: "⇔", 0xF0E5: "∑",
    0xF0F2: "∫",
}
_SYMBOL_FONT_RANGE = re.compile("[\uf020-\uf0ff]")


def clean_text(text: str) -> str:
    """Mojibake repaired (UTF-8 decoded as Latin-1/cp1252, e.g. ``fâ\\x80²`` -> ``f′``, with
    ftfy's ``fix_encoding``, which leaves correct text alone), Word's Symbol-font characters
    read as the letters and signs they show (``\\uf061`` -> ``α``, ``\\uf070`` -> ``π``), then
    stray control characters removed."""
    if _MOJIBAKE_HINT.search(text):
        import ftfy

        text = ftfy.fix_encoding(text)
    if _SYMBOL_FONT_RANGE.search(text):
        text = text.translate(_SYMBOL_FONT)
    return _STRAY_CONTROL_CHARACTERS.sub("", text)


def with_clean_text(q: RawQuestion) -> RawQuestion:
    """``q`` with its text and options cleaned (``clean_text``: mojibake repaired, stray
    control characters other than tab, LF, CR and NUL removed). Every source lands through
    this and ``validate_raw_question``: a NUL quarantines the record."""
    problem = clean_text(q.problem) if q.problem else q.problem
    choices = q.choices
    if choices is not None:
        choices = tuple(clean_text(c) if isinstance(c, str) else c for c in choices)
    if problem == q.problem and choices == q.choices:
        return q
    return replace(q, problem=problem, choices=choices)


def validate_raw_question(q: RawQuestion) -> str | None:
    """Return why ``q`` is structurally unusable, or None when it is fine."""
    if q.problem and "\x00" in q.problem:
        return "NUL character in the question text"
    if q.choices is not None:
        for i, c in enumerate(q.choices):
            if isinstance(c, str) and "\x00" in c:
                return f"NUL character in option {i}"
    if not q.problem and q.problem_image is None:
        return "empty question: no text and no image"
    has_text = q.choices is not None
    has_pics = q.choice_images is not None
    if has_text == has_pics:
        return "options must be either all text or all images"
    n = q.num_choices
    if not 2 <= n <= 5:
        return f"{n} options; a question needs 2 to 5"
    if has_text and any((c is None or not str(c).strip()) for c in q.choices):
        return "an option is empty"
    if not (-1 <= q.answer_idx < n):
        return f"answer index {q.answer_idx} out of range for {n} options"
    if q.subject not in SUBJECTS:
        return f"unknown subject {q.subject!r}"
    if not q.skill:
        return "missing skill"
    return None


def split_records(records: Iterable[Record]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Tag each record's row with 'question' or 'quarantine'."""
    for r in records:
        if isinstance(r, RawQuestion):
            yield "question", r.to_row()
        else:
            yield "quarantine", r.to_row()


IMAGES_SCHEMA = {
    "image_hash": pl.String,
    "format": pl.String,
    "width": pl.Int64,
    "height": pl.Int64,
    "phash": pl.UInt64,
    "path": pl.String,
    "size_bytes": pl.Int64,
    "thumbnail": pl.Binary,  # 16x16 grey thumbnail: confirms near-equal images beyond the 64-bit hash
    # the figure without its margins (dedup/phash.py): a re-scanned or re-cropped copy matches it
    "content_phash": pl.UInt64,
    "content_thumbnail": pl.Binary,  # 16x16 RGB
    "content_box": pl.List(pl.UInt16),  # [left, top, right, bottom], permille of the page
    "colours": pl.Binary,  # colour histogram: a green and a teal square differ here, not in grey
}


def num_options() -> pl.Expr:
    """A question's number of options, text or picture."""
    return pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len())
