"""Importer for generic JSON Lines: one multiple-choice question per line.

``jsonl:PATH[?mapping]``. The mapping (``spec.options``) maps our field names to the input's
field names; a value in single quotes is a constant for every row (``subject='math'``); a
dotted name reaches into nested objects (``image=media.path``) when no field has that exact
name. ``answer_format`` (``auto`` | ``letter`` | ``index`` | ``text``) says how answers are
written; ``auto`` tries all and refuses ambiguous ones. Unmapped fields use the first of the
DEFAULT_NAMES found in the row.

Options are a list of texts (numbers are turned into text), or an object keyed by labels
(``{"A": "...", "B": "..."}``, whose keys then name the options for letter answers), or a list
of image paths under ``choice_images``. Image paths are relative to the file's folder and
may not leave it. Blank lines are not records and are skipped; every other line yields
one question or one quarantine entry keyed ``<file name>#<0-based line>`` (a line over
``MAX_LINE_BYTES`` is quarantined unread).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from ...images import ImageStore
from ...records import QuarantineEntry, RawQuestion, Record
from ..spec import SourceSpec
from .answers import ANSWER_FORMATS, parse_answer
from .common import (
    PLACEHOLDER_HASH,
    STAGE,
    ImageStoreFailure,
    ImportSourceError,
    RecordProblem,
    finish_question,
    normalize_grade,
    normalize_skill,
    normalize_split,
    normalize_subject,
    one_line,
)
from .paths import read_image_file, resolve_inside

DEFAULT_NAMES: dict[str, tuple[str, ...]] = {
    "problem": ("question", "problem", "text", "stem"),
    "choices": ("options", "choices"),
    "answer": ("answer", "label", "answer_idx", "answerKey"),
    "image": ("image", "image_path"),
    "choice_images": ("choice_images", "option_images"),
    "subject": ("subject",),
    "grade": ("grade", "level"),
    "skill": ("skill", "topic"),
    "split": ("split",),
    "id": ("id", "qid"),
}
FIELDS = tuple(DEFAULT_NAMES)
SETTINGS = ("answer_format",)
# Lines carry a question and image paths, never image bytes; a longer line is hostile or
# broken and is quarantined without being held in memory.
MAX_LINE_BYTES = 16 * 1024 * 1024
_CONSTANT = re.compile(r"^'(.*)'$", re.DOTALL)
_MISSING = object()


class JsonlMapping:
    """How to read our fields from one input row; built (and checked) once per import."""

    def __init__(self, options: Mapping[str, str]):
        unknown = sorted(k for k in options if k not in FIELDS and k not in SETTINGS)
        if unknown:
            raise ImportSourceError(
                f"unknown field {unknown[0]!r} in jsonl mapping; known fields: {', '.join(FIELDS + SETTINGS)}"
            )
        self.answer_format = options.get("answer_format", "auto") or "auto"
        if self.answer_format not in ANSWER_FORMATS:
            raise ImportSourceError(
                f"answer_format {self.answer_format!r} in jsonl mapping is not one of {', '.join(ANSWER_FORMATS)}"
            )
        self.constants: dict[str, str] = {}
        self.names: dict[str, tuple[str, ...]] = dict(DEFAULT_NAMES)
        for ours, theirs in options.items():
            if ours in SETTINGS:
                continue
            constant = _CONSTANT.match(theirs)
            if constant:
                self.constants[ours] = constant.group(1)
            elif not theirs:
                raise ImportSourceError(f"jsonl mapping gives field {ours!r} an empty name")
            else:
                self.names[ours] = (theirs,)

    def get(self, row: dict[str, Any], ours: str) -> Any:
        if ours in self.constants:
            return self.constants[ours]
        for name in self.names[ours]:
            value = _lookup(row, name)
            if value is not _MISSING:
                return value
        return None


def _lookup(row: dict[str, Any], name: str) -> Any:
    if name in row:
        return row[name]
    node: Any = row
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def iter_jsonl_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    path = Path(spec.location)
    if not path.is_file():
        raise ImportSourceError(f"jsonl: {path} is not a file")
    mapping = JsonlMapping(spec.options)  # raises before iteration starts
    return _iter_lines(spec.text, path, mapping, images)


def _physical_lines(f, limit: int) -> Iterator[bytes | None]:
    """The file's lines; None for a line longer than ``limit`` bytes (read past, never held whole)."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = f.readline(1 << 20)
            yield None
        else:
            yield line


def _iter_lines(source: str, path: Path, mapping: JsonlMapping, images: ImageStore) -> Iterator[Record]:
    folder = path.parent
    with open(path, "rb") as f:
        for line_no, raw in enumerate(_physical_lines(f, MAX_LINE_BYTES)):
            key = f"{path.name}#{line_no}"
            if raw is None:
                yield QuarantineEntry(source, key, STAGE, f"line {line_no + 1} is longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                text = raw.decode("utf-8-sig" if line_no == 0 else "utf-8")
            except UnicodeDecodeError as exc:
                yield QuarantineEntry(source, key, STAGE, f"line {line_no + 1} is not UTF-8: {one_line(exc, 120)}")
                continue
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except (ValueError, RecursionError) as exc:
                yield QuarantineEntry(
                    source, key, STAGE, f"malformed JSON on line {line_no + 1}: {one_line(exc, 160)}",
                    one_line(text, 200),
                )
                continue
            try:
                yield _question(source, key, row, mapping, folder, images)
            except RecordProblem as exc:
                yield QuarantineEntry(source, key, STAGE, str(exc))
            except ImageStoreFailure:
                raise
            except Exception as exc:  # a record must never stop the import
                yield QuarantineEntry(
                    source, key, STAGE, f"unexpected {type(exc).__name__} reading line {line_no + 1}: {one_line(exc, 160)}"
                )


def _options(raw: Any) -> tuple[list[str] | None, list[str] | None]:
    """Option texts and their labels (None: default A, B, C...)."""
    if raw is None or raw == [] or raw == {} or raw == "":
        return None, None
    labels = None
    if isinstance(raw, dict):
        labels = [str(k) for k in raw]
        raw = list(raw.values())
    if not isinstance(raw, list):
        raise RecordProblem(f"options are a {type(raw).__name__}, expected a list")
    texts = []
    for i, option in enumerate(raw):
        if isinstance(option, str):
            texts.append(option)
        elif isinstance(option, (int, float)) and not isinstance(option, bool):
            texts.append(json.dumps(option))
        else:
            raise RecordProblem(f"option {i} is {type(option).__name__}, not text")
    return texts, labels


def _image_bytes(folder: Path, relative: Any, what: str) -> bytes:
    if not isinstance(relative, str):
        raise RecordProblem(f"{what} path {one_line(repr(relative), 80)} is not text")
    return read_image_file(resolve_inside(folder, relative), relative)


def _question(
    source: str, key: str, row: Any, mapping: JsonlMapping, folder: Path, images: ImageStore
) -> RawQuestion:
    if not isinstance(row, dict):
        raise RecordProblem(f"line is a JSON {type(row).__name__}, expected an object")
    texts, labels = _options(mapping.get(row, "choices"))
    image_paths = mapping.get(row, "choice_images")
    if image_paths in ([], "", {}):
        image_paths = None
    if image_paths is not None and not isinstance(image_paths, list):
        raise RecordProblem(f"choice_images are a {type(image_paths).__name__}, expected a list of paths")
    if texts is None and image_paths is None:
        raise RecordProblem("not multiple choice: no options")
    if texts is not None and image_paths is not None:
        raise RecordProblem("both text options and option images are given; a question has one kind")
    num_options = len(texts) if texts is not None else len(image_paths)
    answer = parse_answer(mapping.get(row, "answer"), texts, num_options, labels, mapping.answer_format)
    subject = normalize_subject(mapping.get(row, "subject"))
    problem = mapping.get(row, "problem")
    if problem is not None and not isinstance(problem, str):
        raise RecordProblem("question text is not text")
    split_raw = mapping.get(row, "split")
    extra: dict[str, Any] = {}
    row_id = mapping.get(row, "id")
    if row_id is not None:
        extra["id"] = row_id if isinstance(row_id, (str, int)) and not isinstance(row_id, bool) else json.dumps(row_id)
    if split_raw is not None and normalize_split(split_raw) is None:
        extra["split"] = split_raw
    image_path = mapping.get(row, "image")
    draft = RawQuestion(
        source=source,
        source_key=key,
        subject=subject,
        grade=normalize_grade(mapping.get(row, "grade"), subject),
        skill=normalize_skill(mapping.get(row, "skill")),
        problem=problem or "",
        problem_image=PLACEHOLDER_HASH if image_path not in (None, "") else None,
        choices=tuple(texts) if texts is not None else None,
        choice_images=(PLACEHOLDER_HASH,) * num_options if image_paths is not None else None,
        answer_idx=answer,
        source_split=normalize_split(split_raw),
        extra=extra,
    )
    problem_bytes = _image_bytes(folder, image_path, "image") if draft.problem_image else None
    choice_bytes = (
        [_image_bytes(folder, p, f"image of option {i}") for i, p in enumerate(image_paths)]
        if image_paths is not None
        else None
    )
    return finish_question(draft, images, problem_bytes, choice_bytes)
