"""Importer for JSON Lines: one multiple-choice question per line.

``jsonl:PATH[?mapping]``; the mapping and how a row becomes a question are those of
``rows.py`` (shared with ``json:`` and ``python:``). Image paths are relative to the file's
folder (or ``image_root``) and may not leave it. Blank lines are not records and are skipped;
every other line yields one question or one quarantine entry keyed ``<file name>#<0-based
line>`` (a line over ``MAX_LINE_BYTES`` is quarantined unread, a line that is not UTF-8 with
its line number, a line that is an object of records keyed by id, ``{"v1_0": {...}, ...}``,
as such: the ``json:`` importer reads that layout). Control characters in texts and options (also escaped, ``\\u0000``) are handled
where every source lands (``records.with_clean_text`` and ``validate_raw_question``):
a NUL quarantines the record, any other control character is stripped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, Record
from pipelines.ingest.sources import register_source
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.common import STAGE, ImportSourceError, one_line
from pipelines.ingest.importers.json_file import looks_like_records
from pipelines.ingest.importers.paths import MAX_IMAGE_TEXT_CHARS
from pipelines.ingest.importers.rows import (
    DEFAULT_NAMES,
    FIELDS,
    RowMapping,
    image_folder,
    row_record,
    unused_field_entries,
    watched_data_files,
    with_index_base,
)

__all__ = ["DEFAULT_NAMES", "FIELDS", "MAX_LINE_BYTES", "iter_jsonl_records"]

# A line carries a question and its pictures' paths, or at most one picture of the largest size
# the image store takes as base64; a longer line is hostile or broken and is quarantined without
# being held in memory.
MAX_LINE_BYTES = MAX_IMAGE_TEXT_CHARS + 1024 * 1024
OBJECT_OF_RECORDS = "line is an object of records keyed by id (read the file with json:)"


def watch_jsonl(spec: SourceSpec, exclude: Path) -> list[Path] | None:
    return watched_data_files(spec, [Path(spec.location)], exclude)


@register_source("jsonl", usage="jsonl:PATH", query=True, watch=watch_jsonl)
def iter_jsonl_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    path = Path(spec.location)
    if not path.is_file():
        raise ImportSourceError(f"jsonl: {path} is not a file")
    mapping = RowMapping(spec.options, "jsonl")  # raises before iteration starts
    root = image_folder(mapping, path.parent)
    return with_index_base(lambda m: _iter_lines(spec.text, path, m, root, images), mapping)


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


def _iter_lines(source: str, path: Path, mapping: RowMapping, root: Path, images: ImageStore) -> Iterator[Record]:
    meta = {"_file": path.stem}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(_physical_lines(f, MAX_LINE_BYTES)):
            key = f"{path.name}#{line_no}"
            if raw is None:
                yield QuarantineEntry(source, key, STAGE, f"line longer than {MAX_LINE_BYTES} bytes", f"line {line_no + 1}")
                continue
            try:
                text = raw.decode("utf-8-sig" if line_no == 0 else "utf-8")
            except UnicodeDecodeError as exc:
                yield QuarantineEntry(source, key, STAGE, "line is not UTF-8", f"line {line_no + 1}: {one_line(exc, 120)}")
                continue
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except (ValueError, RecursionError) as exc:
                yield QuarantineEntry(
                    source, key, STAGE, "malformed JSON", f"line {line_no + 1}: {one_line(exc, 120)}: {one_line(text, 150)}"
                )
                continue
            if looks_like_records(row):  # a whole JSON file of records keyed by id on one line
                yield QuarantineEntry(source, key, STAGE, OBJECT_OF_RECORDS, f"line {line_no + 1}: {len(row)} records")
                continue
            yield row_record(source, key, row, mapping, meta, root, images)
    yield from unused_field_entries(source, path.name, mapping)
