"""Normalization shared by the importers: subjects, grades, skills, splits, errors.

Conventions (helper brief): subjects are science, technology, engineering, math; grades are
slugs like ``grade-3``, ``pre-k``, ``kindergarten``, ``algebra-1``; technology has no grade;
skills are slugs.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from dataclasses import replace
from typing import Any, Mapping, Sequence

from pipelines.store.images import ImageRejected, ImageStore
from pipelines.store.records import SUBJECTS, RawQuestion, validate_raw_question

STAGE = "import"


class ImportSourceError(ValueError):
    """An import source that cannot be read at all; the message is one line."""


class ImageStoreFailure(OSError):
    """Writing to the image store failed (disk full, permissions): stops the import."""


class RecordProblem(ValueError):
    """One record cannot be used. ``reason`` is a short, stable category (the quarantine
    ``reason``, e.g. ``image file not found``); ``detail`` holds this record's specifics
    (the path, the value), so that reasons group."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


# Names other corpora use for our four subjects. Anything else is outside STEM and is
# quarantined with a reason (the importers take an override where it makes sense).
SUBJECT_ALIASES: dict[str, str] = {
    "science": "science",
    "natural science": "science",
    "natural sciences": "science",
    "physics": "science",
    "chemistry": "science",
    "biology": "science",
    "earth science": "science",
    "technology": "technology",
    "tech": "technology",
    "computer science": "technology",
    "information technology": "technology",
    "engineering": "engineering",
    "math": "math",
    "maths": "math",
    "mathematics": "math",
}

SPLIT_ALIASES: dict[str, str] = {
    "train": "train",
    "training": "train",
    "valid": "valid",
    "val": "valid",
    "validation": "valid",
    "dev": "valid",
    "test": "test",
    "testing": "test",
}

_ROMAN = {"i": "1", "ii": "2", "iii": "3"}
_GRADE_NUMBER = re.compile(
    r"^(?:grade|gr|g|class|year|level)?[-. ]*(\d{1,2})(?:st|nd|rd|th)?(?:[-. ]*grade)?$"
)
_GRADE_NAMES = {
    "k": "kindergarten",
    "kg": "kindergarten",
    "kindergarten": "kindergarten",
    "grade-k": "kindergarten",
    "pre-k": "pre-k",
    "prek": "pre-k",
    "pre-kindergarten": "pre-k",
    "prekindergarten": "pre-k",
    "preschool": "pre-k",
    "pre-calculus": "precalculus",
    "precalculus": "precalculus",
}


def one_line(text: Any, limit: int = 300) -> str:
    """Collapse ``text`` to a single line of at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def list_literal(text: str) -> list | None:
    """The list a text writes as a JSON or Python literal (MMMU's ``"['$6', '$7']"``, a CSV
    cell's ``["1", "2"]``), or None when the text is not one."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            return None
    return parsed if isinstance(parsed, list) else None


def slugify(text: str) -> str:
    """``"Compare strengths of magnetic forces"`` -> ``compare-strengths-of-magnetic-forces``."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")


def normalize_subject(raw: Any, aliases: Mapping[str, str] = SUBJECT_ALIASES) -> str:
    """Map a corpus's subject name to one of SUBJECTS or raise RecordProblem."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise RecordProblem("missing subject")
    if not isinstance(raw, str):
        raise RecordProblem("subject is not text", one_line(repr(raw), 60))
    key = " ".join(raw.replace("_", " ").replace("-", " ").split()).casefold()
    subject = aliases.get(key)
    if subject is None:
        subject = aliases.get(raw.strip())
    if subject not in SUBJECTS:
        raise RecordProblem("subject outside STEM", one_line(raw, 60))
    return subject


def normalize_grade(raw: Any, subject: str) -> str | None:
    """``grade1`` -> ``grade-1``, ``K`` -> ``kindergarten``, ``Algebra II`` -> ``algebra-2``.

    Technology has no grade (None). Empty or missing grades are None.
    """
    if subject == "technology" or raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        if not 0 <= raw <= 12 or raw != int(raw):  # NaN fails the range test
            raise RecordProblem("grade is not a school grade", repr(raw))
        return "kindergarten" if int(raw) == 0 else f"grade-{int(raw)}"
    if not isinstance(raw, str):
        raise RecordProblem("grade is not text", one_line(repr(raw), 60))
    text = " ".join(raw.strip().lower().replace("_", " ").split())
    if not text:
        return None
    match = _GRADE_NUMBER.match(text)
    if match:
        number = int(match.group(1))
        return "kindergarten" if number == 0 else f"grade-{number}"
    slug = slugify(text)
    if slug in _GRADE_NAMES:
        return _GRADE_NAMES[slug]
    algebra = re.fullmatch(r"algebra-?(1|2|i|ii)", slug)
    if algebra:
        return f"algebra-{_ROMAN.get(algebra.group(1), algebra.group(1))}"
    return slug or None


def normalize_skill(raw: Any) -> str:
    if raw is None or not isinstance(raw, (str, int)) or isinstance(raw, bool):
        if raw is None:
            raise RecordProblem("missing skill")
        raise RecordProblem("skill is not text", one_line(repr(raw), 60))
    slug = slugify(str(raw))
    if not slug:
        raise RecordProblem("skill has no ASCII letters or digits", one_line(raw, 60))
    return slug


def normalize_split(raw: Any) -> str | None:
    """train/val/validation/dev/test -> train/valid/test; anything else -> None."""
    if not isinstance(raw, str):
        return None
    return SPLIT_ALIASES.get(raw.strip().lower())


def store_image(images: ImageStore, data: Any, what: str) -> str:
    """Put untrusted image bytes in the store and return their hash, or raise RecordProblem."""
    if isinstance(data, dict) and "bytes" in data:  # Hugging Face Image feature: {bytes, path}
        data = data["bytes"]
    if data is None:
        raise RecordProblem(f"{what} is missing")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise RecordProblem(f"{what} is {type(data).__name__}, not image bytes")
    try:
        return images.put(bytes(data)).image_hash
    except ImageRejected as exc:
        raise RecordProblem(f"{what} rejected: {one_line(exc, 200)}") from None
    except OSError as exc:
        raise ImageStoreFailure(f"cannot write to the image store {images.root}: {one_line(exc, 200)}") from exc


PLACEHOLDER_HASH = "0" * 64
IDENTICAL_OPTIONS = "identical options"


def identical_options(choices: Sequence[Any] | None) -> tuple[int, int] | None:
    """The first two text options that are the same text but for white space (We-Math
    ``2steps_313``: the key's text is also a distractor), or None. Case is not folded:
    ``$Mg$`` and ``$mg$`` (SceMQA Physics #100) are different options."""
    seen: dict[str, int] = {}
    for i, text in enumerate(choices or ()):
        if not isinstance(text, str):
            continue
        key = " ".join(text.split())
        if key in seen:
            return seen[key], i
        seen[key] = i
    return None


def finish_question(
    draft: RawQuestion,
    images: ImageStore,
    problem_image: Any = None,
    choice_images: Sequence[Any] | None = None,
) -> RawQuestion:
    """Validate ``draft`` and store its images; raise RecordProblem if it is unusable.

    ``draft`` carries PLACEHOLDER_HASH where an image will go, so that structural
    problems are found before any image of a doomed record is written to the store.
    Two identical text options (``identical_options``) make it unusable: a model told that
    one answer is right can rule out both copies.
    """
    reason = validate_raw_question(draft)
    if reason is not None:
        raise RecordProblem(reason)
    twins = identical_options(draft.choices)
    if twins is not None:
        first, second = twins
        raise RecordProblem(IDENTICAL_OPTIONS, one_line(f"options {first + 1} and {second + 1}: {draft.choices[first]!r}", 160))
    problem_hash = store_image(images, problem_image, "question image") if draft.problem_image else None
    choice_hashes = None
    if draft.choice_images is not None:
        choice_hashes = tuple(
            store_image(images, data, f"image of option {i}") for i, data in enumerate(choice_images or ())
        )
    return replace(draft, problem_image=problem_hash, choice_images=choice_hashes)
