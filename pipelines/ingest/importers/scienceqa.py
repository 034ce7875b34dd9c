"""Importer for ScienceQA (``problems.json`` and its images; REFERENCE.md section 4).

``scienceqa:PATH`` where PATH is ``problems.json`` or the folder holding it. The file is one
JSON object keyed by question id, read whole (about 20k questions, tens of MB); records are
then produced one at a time. ``source_key`` is ``problems.json#<0-based position in the dict>``.

Images: a question whose ``image`` is set (usually ``image.png``) has it at
``<folder>/images/<split>/<qid>/<image>`` (the GitHub release) or at
``<folder>/<split>/<qid>/<image>`` (some mirrors); both are searched in that order, and no
path may leave the folder. Text-only questions (``image`` null) are still yielded; the
filter stage drops them with its own reason.

Subjects: ScienceQA has ``natural science``, ``social science`` and ``language science``.
``SCIENCEQA_SUBJECTS`` maps only ``natural science`` to ``science``; the others are
quarantined as "subject outside STEM". Callers may pass their own ``subject_map``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, RawQuestion, Record
from pipelines.ingest.sources import register_source, walk_files
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.answers import parse_answer
from pipelines.ingest.importers.common import (
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
from pipelines.ingest.importers.paths import is_single_component, read_image_file, resolve_inside

PROBLEMS_FILE = "problems.json"
SCIENCEQA_SUBJECTS: dict[str, str] = {"natural science": "science"}
EXTRA_FIELDS = ("hint", "lecture", "solution", "task", "topic", "category")


def find_problems_file(location: str | Path) -> Path:
    path = Path(location)
    if path.is_dir():
        path = path / PROBLEMS_FILE
    if not path.is_file():
        raise ImportSourceError(f"scienceqa: {path} is not a file (expected {PROBLEMS_FILE} or its folder)")
    return path


def watch_scienceqa(spec: SourceSpec, exclude: Path) -> list[Path] | None:
    return walk_files(find_problems_file(spec.location).parent, exclude)


@register_source("scienceqa", usage="scienceqa:PATH", watch=watch_scienceqa)
def iter_scienceqa_records(
    spec: SourceSpec, images: ImageStore, subject_map: Mapping[str, str] = SCIENCEQA_SUBJECTS
) -> Iterator[Record]:
    problems_file = find_problems_file(spec.location)  # raises before iteration starts
    return _iter_problems(spec.text, problems_file, images, subject_map)


def _iter_problems(
    source: str, problems_file: Path, images: ImageStore, subject_map: Mapping[str, str]
) -> Iterator[Record]:
    name = problems_file.name
    try:
        with open(problems_file, "rb") as f:
            problems = json.load(f)
    except (ValueError, RecursionError, OSError) as exc:
        yield QuarantineEntry(source, name, STAGE, f"unreadable {name}: {one_line(exc, 200)}")
        return
    if not isinstance(problems, dict):
        yield QuarantineEntry(source, name, STAGE, f"{name} is a JSON {type(problems).__name__}, expected an object keyed by question id")
        return
    aliases = {" ".join(k.split()).casefold(): v for k, v in subject_map.items()}
    for position, (qid, item) in enumerate(problems.items()):
        key = f"{name}#{position}"
        try:
            yield _question(source, key, str(qid), item, problems_file.parent, images, aliases)
        except RecordProblem as exc:
            detail = f"qid {one_line(qid, 80)}" + (f": {exc.detail}" if exc.detail else "")
            yield QuarantineEntry(source, key, STAGE, exc.reason, detail)
        except ImageStoreFailure:
            raise
        except Exception as exc:  # a problem must never stop the import
            yield QuarantineEntry(
                source, key, STAGE, f"unexpected {type(exc).__name__}: {one_line(exc, 160)}", f"qid {one_line(qid, 80)}"
            )


def _question(
    source: str, key: str, qid: str, item: Any, folder: Path, images: ImageStore, aliases: Mapping[str, str]
) -> RawQuestion:
    if not isinstance(item, dict):
        raise RecordProblem(f"problem is a JSON {type(item).__name__}, expected an object")
    subject = normalize_subject(item.get("subject"), aliases)
    question = item.get("question")
    if question is not None and not isinstance(question, str):
        raise RecordProblem("question is not text")
    choices = item.get("choices")
    if not choices:
        raise RecordProblem("not multiple choice: no options")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise RecordProblem("choices must be a list of texts")
    answer = parse_answer(item.get("answer"), choices, len(choices), answer_format="index")
    raw_skill = next((item.get(f) for f in ("skill", "category", "topic") if item.get(f)), None)
    raw_split = item.get("split")
    image_name = item.get("image")
    image_bytes = _image(folder, raw_split, qid, image_name) if image_name else None
    extra = {"qid": qid}
    extra.update({f: item[f] for f in EXTRA_FIELDS if item.get(f) not in (None, "")})
    if normalize_split(raw_split) is None and raw_split is not None:
        extra["split"] = raw_split
    draft = RawQuestion(
        source=source,
        source_key=key,
        subject=subject,
        grade=normalize_grade(item.get("grade"), subject),
        skill=normalize_skill(raw_skill),
        problem=question or "",
        problem_image=PLACEHOLDER_HASH if image_bytes is not None else None,
        choices=tuple(choices),
        answer_idx=answer,
        source_split=normalize_split(raw_split),
        extra=extra,
    )
    return finish_question(draft, images, image_bytes)


def _image(folder: Path, split: Any, qid: str, image_name: Any) -> bytes:
    if not isinstance(image_name, str) or not is_single_component(image_name):
        raise RecordProblem(f"image name {one_line(repr(image_name), 80)} is not a plain file name")
    if not isinstance(split, str) or not is_single_component(split):
        raise RecordProblem(f"split {one_line(repr(split), 40)} cannot locate the image folder")
    if not is_single_component(qid):
        raise RecordProblem(f"question id {one_line(repr(qid), 40)} cannot locate the image folder")
    tried = []
    for relative in (f"images/{split}/{qid}/{image_name}", f"{split}/{qid}/{image_name}"):
        path = resolve_inside(folder, relative)
        if path.is_file():
            return read_image_file(path, relative)
        tried.append(relative)
    raise RecordProblem(f"image not found at {' or '.join(tried)}")
