"""Importer for the public STEM release layout (REFERENCE.md section 1).

``stem-parquet:PATH`` where PATH is the release folder (holding ``data/``), the ``data/``
folder itself, or one shard. Shards are read one row batch at a time with pyarrow, one row
group after the other (a real release is 47 GB in 98 shards), reading only the release's
columns. A shard that cannot be opened or lacks a column becomes one quarantine entry keyed
by its file name and the import goes on with the next shard. A row group whose pages are
corrupt quarantines each of its unread rows under its own key (``<file>#<row>``), so that
questions + quarantined rows still account for every row of a readable shard.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq

from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, RawQuestion, Record
from pipelines.ingest.sources import register_source
from pipelines.ingest.spec import SourceSpec
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
    one_line,
)

STEM_COLUMNS = (
    "subject",
    "grade",
    "skill",
    "pic_choice",
    "pic_prob",
    "problem",
    "problem_pic",
    "choices",
    "choices_pic",
    "answer_idx",
)
SHARD_NAME = re.compile(r"^(train|valid|test)-(\d{5})-of-(\d{5})\.parquet$")
_SPLIT_PREFIX = re.compile(r"^([a-z]+)(?:[-_.]|$)", re.IGNORECASE)
_SPLIT_ORDER = {"train": 0, "valid": 1, "test": 2}
# Rows per batch: release rows carry PNG bytes (about 45 kB on average), so a batch of 64
# rows keeps a few MB in memory whatever the shard size.
BATCH_ROWS = 64


def shard_split(name: str) -> str | None:
    """``train-00003-of-00058.parquet`` -> ``train``; other names by their first word."""
    match = SHARD_NAME.match(name)
    if match:
        return match.group(1)
    prefix = _SPLIT_PREFIX.match(name)
    return normalize_split(prefix.group(1)) if prefix else None


def find_shards(location: str | Path) -> list[Path]:
    """The shards under a release folder, its ``data/`` folder, or one shard file."""
    path = Path(location)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ImportSourceError(f"stem-parquet path {path} is neither a folder nor a file")
    folder = path / "data" if (path / "data").is_dir() else path
    shards = [p for p in folder.glob("*.parquet") if p.is_file() and not p.name.startswith(".")]
    if not shards:
        raise ImportSourceError(f"no .parquet shards in {folder}")
    return _in_release_order(shards)


def _in_release_order(shards: list[Path]) -> list[Path]:
    return sorted(shards, key=lambda p: (_SPLIT_ORDER.get(shard_split(p.name) or "", 3), p.name))


def irregular_shards(location: str | Path) -> list[Path]:
    """Entries named like shards that are not regular files (FIFOs, devices, dangling links):
    never opened, but quarantined with a reason rather than skipped silently."""
    path = Path(location)
    if not path.is_dir():
        return []
    folder = path / "data" if (path / "data").is_dir() else path
    return [p for p in folder.glob("*.parquet") if not p.is_file() and not p.is_dir() and not p.name.startswith(".")]


def watch_shards(spec: SourceSpec, exclude: Path) -> list[Path]:
    key = answer_key_path(spec.location)
    return list(find_shards(spec.location)) + ([key] if key.is_file() else [])


ANSWER_KEY_NAME = "test_answer_key.jsonl"


def answer_key_path(location: str | Path) -> Path:
    """``test_answer_key.jsonl`` beside the release's ``data/`` folder."""
    path = Path(location)
    folder = path if path.is_dir() else path.parent
    if folder.name == "data" and not (folder / "data").is_dir():
        folder = folder.parent
    return folder / ANSWER_KEY_NAME


def read_answer_key(location: str | Path, shards: list[Path]) -> dict[str, int]:
    """``<shard>#<row>`` -> answer index of the release's hidden test answers, from its
    ``test_answer_key.jsonl`` (line ``index`` = the row's position in the test split, test shards
    in name order); empty without the file or when a test shard cannot be sized."""
    import json

    path = answer_key_path(location)
    if not path.is_file():
        return {}
    try:
        by_index = {int(r["index"]): int(r["answer_idx"])
                    for r in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())}
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    keys: dict[str, int] = {}
    offset = 0
    for shard in sorted((p for p in shards if shard_split(p.name) == "test"), key=lambda p: p.name):
        try:
            rows = pq.ParquetFile(shard).metadata.num_rows
        except Exception:  # an unreadable shard: the positions after it are unknown
            break
        for row in range(rows):
            if offset + row in by_index:
                keys[f"{shard.name}#{row}"] = by_index[offset + row]
        offset += rows
    return keys


@register_source("stem-parquet", usage="stem-parquet:PATH", watch=watch_shards, deduplicated=True)
def iter_stem_parquet_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    """The release's rows, each with the release's split (``source_split``); test answers the
    release hides (``answer_idx`` -1) are read from its ``test_answer_key.jsonl`` when it has one.
    A release is deduplicated by its maker: dedup keeps every row of it (``deduplicated``)."""
    shards = find_shards(spec.location)  # raises before iteration starts
    records = _iter_shards(spec.text, _in_release_order(shards + irregular_shards(spec.location)), images)
    key = read_answer_key(spec.location, shards)
    return _with_answer_key(records, key) if key else records


def _with_answer_key(records: Iterator[Record], key: dict[str, int]) -> Iterator[Record]:
    import dataclasses

    for record in records:
        answer = key.get(record.source_key) if isinstance(record, RawQuestion) and record.answer_idx == -1 else None
        options = len(record.choices or record.choice_images or ()) if answer is not None else 0
        if answer is not None and 0 <= answer < options:
            record = dataclasses.replace(record, answer_idx=answer)
        yield record


def _iter_shards(source: str, shards: list[Path], images: ImageStore) -> Iterator[Record]:
    for shard in shards:
        yield from _iter_shard(source, shard, images)


def _iter_shard(source: str, shard: Path, images: ImageStore) -> Iterator[Record]:
    name = shard.name
    if not shard.is_file():  # opening a FIFO would block; a device could be endless
        what = "a dangling link" if not shard.exists() else "not a regular file"
        yield QuarantineEntry(source, name, STAGE, f"unreadable Parquet shard: {what}")
        return
    try:
        parquet = pq.ParquetFile(shard)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for broken files
        yield QuarantineEntry(source, name, STAGE, f"unreadable Parquet shard: {one_line(exc, 200)}")
        return
    with parquet:
        present = set(parquet.schema_arrow.names)
        missing = [c for c in STEM_COLUMNS if c not in present]
        if missing:
            yield QuarantineEntry(
                source, name, STAGE, f"shard is missing columns: {', '.join(missing)}",
                f"columns present: {', '.join(parquet.schema_arrow.names)}",
            )
            return
        split = shard_split(name)
        first_row = 0
        for group in range(parquet.metadata.num_row_groups):
            group_rows = parquet.metadata.row_group(group).num_rows
            yield from _iter_row_group(source, parquet, name, group, first_row, group_rows, split, images)
            first_row += group_rows


def _iter_row_group(
    source: str,
    parquet: pq.ParquetFile,
    name: str,
    group: int,
    first_row: int,
    group_rows: int,
    split: str | None,
    images: ImageStore,
) -> Iterator[Record]:
    # One row group at a time: iterating the whole file at once lets pyarrow read ahead
    # and hold several row groups in memory.
    row = first_row
    try:
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=list(STEM_COLUMNS))
        while True:
            try:
                rows = next(batches).to_pylist()
            except StopIteration:
                return
            for values in rows:
                yield _row_record(source, f"{name}#{row}", values, split, images)
                row += 1
    except ImageStoreFailure:
        raise
    except Exception as exc:  # corrupt pages: the rest of this row group is lost, not the shard
        reason = f"row group {group} of the shard is unreadable: {one_line(exc, 200)}"
        for lost in range(row, first_row + group_rows):
            yield QuarantineEntry(source, f"{name}#{lost}", STAGE, reason)


def _row_record(source: str, key: str, values: dict[str, Any], split: str | None, images: ImageStore) -> Record:
    try:
        return _row_question(source, key, values, split, images)
    except RecordProblem as exc:
        return QuarantineEntry(source, key, STAGE, exc.reason, exc.detail)
    except ImageStoreFailure:
        raise
    except Exception as exc:  # a row must never stop the import
        return QuarantineEntry(source, key, STAGE, f"unexpected {type(exc).__name__}: {one_line(exc, 160)}")


def _row_question(source: str, key: str, values: dict[str, Any], split: str | None, images: ImageStore) -> RawQuestion:
    choices, choices_pic = values["choices"], values["choices_pic"]
    problem_pic = values["problem_pic"]
    for column, value in (("choices", choices), ("choices_pic", choices_pic)):
        if value is not None and not isinstance(value, list):  # a wrong schema: iterating would split text or bytes
            raise RecordProblem(f"{column} is {type(value).__name__}, expected a list")
    if (choices is None) == (choices_pic is None):
        state = "both are set" if choices is not None else "both are null"
        raise RecordProblem(f"release invariant violated: exactly one of choices / choices_pic must be set, {state}")
    for flag in ("pic_choice", "pic_prob"):
        if not isinstance(values[flag], bool):
            raise RecordProblem(f"{flag} is {values[flag]!r}, not a boolean")
    if values["pic_choice"] != (choices_pic is not None):
        raise RecordProblem(
            f"release invariant violated: pic_choice is {values['pic_choice']} but choices_pic is "
            f"{'set' if choices_pic is not None else 'null'}"
        )
    if values["pic_prob"] != (problem_pic is not None):
        raise RecordProblem(
            f"release invariant violated: pic_prob is {values['pic_prob']} but problem_pic is "
            f"{'set' if problem_pic is not None else 'null'}"
        )
    if choices is not None and not all(isinstance(c, str) for c in choices):
        raise RecordProblem("an option in choices is not text")
    problem = values["problem"]
    if problem is not None and not isinstance(problem, str):
        raise RecordProblem("problem is not text")
    answer = values["answer_idx"]
    if answer is None or isinstance(answer, bool) or not isinstance(answer, int):
        raise RecordProblem(f"answer_idx is {answer!r}, not an integer")
    subject = values["subject"]
    if not isinstance(subject, str):
        raise RecordProblem(f"subject is {subject!r}, not text")
    subject = subject.strip().lower()
    draft = RawQuestion(
        source=source,
        source_key=key,
        subject=subject,
        grade=normalize_grade(values["grade"], subject),
        skill=normalize_skill(values["skill"]),
        problem=problem or "",
        problem_image=PLACEHOLDER_HASH if problem_pic is not None else None,
        choices=tuple(choices) if choices is not None else None,
        choice_images=(PLACEHOLDER_HASH,) * len(choices_pic) if choices_pic is not None else None,
        answer_idx=answer,
        source_split=split,
    )
    return finish_question(draft, images, problem_pic, choices_pic)
