"""Importers for delimited text: ``csv:PATH[?mapping]`` (commas) and ``tsv:PATH[?mapping]`` (tabs).

PATH is a file or a folder, whose ``*.csv`` (or ``*.tsv``) files, not its subfolders, are read
in name order. The first line of a file names its columns; every other row is one question
or one quarantine entry keyed ``<file name>#<row>`` (0-based, the header not counted). This
is how VLMEvalKit ships its benchmarks (MMBench, SEED-Bench, AI2D, MMStar: ``index``,
``question``, ``hint``, ``A`` ... ``D``, ``answer``, the picture as base64 in ``image``)::

    tsv:MMBench_DEV_EN.tsv?id=index&problem=[hint,question]&choices=[A,B,C,D]&image=image

Cells are text: an empty cell is no value; a cell holding a JSON or Python list
(``["1", "2"]``) is read as that list where a list is expected (``choices=options``). Pictures
are paths relative to the file's folder (or ``image_root``), or the picture itself as base64 or
a ``data:image/...;base64,`` URI; VLMEvalKit writes a picture once, and a row whose picture cell
holds another row's id (64 characters at most) shows that row's picture (``_SharedPictures``).
The mapping, its settings and how a row becomes a question are those of ``rows.py`` (shared with
``jsonl:`` and ``json:``).

Files are UTF-8 unless ``encoding=NAME`` says otherwise (``encoding=cp1252`` for what Excel
writes). A file whose header names a column twice, that is not in its encoding, or that the
``csv`` module cannot parse from some row on, is quarantined from there with the line number; a
row with more cells than the header has columns is quarantined alone.
"""

from __future__ import annotations

import codecs
import csv
import io
from pathlib import Path
from typing import Iterator

from pipelines.store.images import ImageRejected, ImageStore
from pipelines.store.records import QuarantineEntry, Record
from pipelines.ingest.sources import register_source
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.common import STAGE, ImportSourceError, one_line
from pipelines.ingest.importers.paths import MAX_IMAGE_TEXT_CHARS, find_data_files, image_in_text
from pipelines.ingest.importers.rows import (
    RowMapping,
    image_folder,
    row_record,
    unused_field_entries,
    watched_data_files,
    with_index_base,
)

# A cell may hold a picture as base64; the csv module's default limit is 128 KiB.
MAX_CELL_CHARS = MAX_IMAGE_TEXT_CHARS + 1024
DELIMITERS = {"csv": ",", "tsv": "\t"}


def _reader(kind: str):
    def watch(spec: SourceSpec, exclude: Path) -> list[Path] | None:
        return watched_data_files(spec, find_data_files(kind, spec.location), exclude)

    def iter_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
        files = find_data_files(kind, spec.location)
        mapping = RowMapping(spec.options, kind, extra_settings=("encoding",))  # raises before iteration starts
        encoding = text_encoding(spec.options.get("encoding"), kind)
        roots = {folder: image_folder(mapping, folder) for folder in {f.parent for f in files}}
        return with_index_base(
            lambda m: _iter_files(spec.text, kind, Path(spec.location).name, files, m, roots, images, encoding), mapping)

    iter_records.__name__ = iter_records.__qualname__ = f"iter_{kind}_records"
    return register_source(kind, usage=f"{kind}:PATH", query=True, watch=watch)(iter_records)


iter_csv_records = _reader("csv")
iter_tsv_records = _reader("tsv")


def text_encoding(name: str | None, kind: str) -> str:
    """The ``encoding=NAME`` setting as a codec name (UTF-8 when not given)."""
    if not name:
        return "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ImportSourceError(f"encoding={name!r} in {kind} mapping is not a text encoding Python knows (utf-8, cp1252, gbk, ...)") from None


def _iter_files(source: str, kind: str, source_name: str, files: list[Path], mapping: RowMapping,
                roots: dict[Path, Path], images: ImageStore, encoding: str = "utf-8") -> Iterator[Record]:
    for path in files:
        yield from _iter_file(source, kind, path, mapping, roots[path.parent], images, encoding)
    yield from unused_field_entries(source, source_name, mapping)


def _iter_file(source: str, kind: str, path: Path, mapping: RowMapping, root: Path, images: ImageStore,
               encoding: str = "utf-8") -> Iterator[Record]:
    meta = {"_file": path.stem}
    try:
        f = open(path, "rb")
    except OSError as exc:
        yield QuarantineEntry(source, path.name, STAGE, f"unreadable {kind.upper()} file", one_line(exc.strerror or exc, 200))
        return
    shared, pending = _SharedPictures(mapping, images), []
    with f:
        yield from _iter_rows(source, kind, path, f, mapping, meta, root, images, shared, pending, encoding)
    for key, row in pending:
        yield row_record(source, key, shared.take(row, meta, last=True), mapping, meta, root, images)


def _iter_rows(source: str, kind: str, path: Path, f, mapping: RowMapping, meta: dict, root: Path, images: ImageStore,
               shared: "_SharedPictures", pending: list, encoding: str = "utf-8") -> Iterator[Record]:
    rows = csv.reader(_text_lines(f, encoding), delimiter=DELIMITERS[kind])
    position, header = -1, None
    while True:
        try:
            cells = _next_row(rows)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            if encoding == "utf-8":
                reason, hint = "file is not UTF-8", "; encoding=NAME reads another encoding (Excel writes cp1252)"
            else:
                reason, hint = f"file is not {encoding}", ""
            yield QuarantineEntry(source, f"{path.name}#{position + 1}", STAGE, reason,
                                  f"from line {rows.line_num + 1}: {one_line(exc, 120)}{hint}")
            return
        except csv.Error as exc:
            yield QuarantineEntry(source, f"{path.name}#{position + 1}", STAGE, f"malformed {kind.upper()}",
                                  f"from line {rows.line_num}: {one_line(exc, 120)}")
            return
        if header is None:
            header = [name.strip() for name in cells]
            other = next((k for k, mark in DELIMITERS.items() if k != kind and mark in cells[0]), None)
            if len(header) == 1 and other is not None:
                yield QuarantineEntry(source, path.name, STAGE, f"header has one column; the file looks {other}-separated",
                                      f"read it as {other}:{path.name}")
                return
            repeated = sorted({name for name in header if name and header.count(name) > 1})
            if repeated:
                yield QuarantineEntry(source, path.name, STAGE, "header names a column twice", ", ".join(repeated)[:200])
                return
            continue
        if not any(cell.strip() for cell in cells):
            continue  # a blank line is not a record
        position += 1
        key = f"{path.name}#{position}"
        if len(cells) > len(header):
            yield QuarantineEntry(source, key, STAGE, "row has more cells than the header has columns",
                                  f"line {rows.line_num}: {len(cells)} cells, {len(header)} columns")
            continue
        row = {name: (cell if cell.strip() else None) for name, cell in zip(header, cells) if name}
        shared.remember(row, meta)
        taken = shared.take(row, meta)
        if taken is None:
            pending.append((key, row))  # its picture may be in a row further down
            continue
        yield row_record(source, key, taken, mapping, meta, root, images)


class _SharedPictures:
    """VLMEvalKit writes each picture once: another row showing it holds, in its picture cell, the
    id (``index``) of the row that has it, a cell of at most 64 characters (as its loader reads
    it). Pictures of rows with an id are stored as they are read, so such a row takes the
    picture from the store; a cell that names no row's id is a path like any other."""

    def __init__(self, mapping: RowMapping, images: ImageStore):
        self.mapping, self.images = mapping, images
        self.on = not {"image", "id"} & (set(mapping.constants) | set(mapping.field_lists))
        self.hash_of: dict[str, str] = {}

    def _picture_field(self, row: dict) -> str | None:
        return next((name for name in self.mapping.names["image"] if isinstance(row.get(name), str)), None)

    def remember(self, row: dict, meta: dict) -> None:
        field = self._picture_field(row) if self.on else None
        ident = self.mapping.get(row, "id", meta) if field else None
        if ident is None or len(row[field]) <= _SHORTEST_PICTURE:
            return
        data = image_in_text(row[field])
        if data is not None:
            try:
                self.hash_of[str(ident)] = self.images.put(data).image_hash
            except ImageRejected:
                pass  # the row's own import says why

    def take(self, row: dict, meta: dict, last: bool = False) -> dict | None:
        """``row`` with the picture of the row its picture cell names, when it names one read
        already; None when the cell may name a row not read yet (a short cell that is no path
        and not the row's own id); with ``last`` (every row read), ``row`` as it is."""
        field = self._picture_field(row) if self.on else None
        if field is None or len(row[field]) > _SHORTEST_PICTURE:
            return row
        found = self.hash_of.get(row[field].strip())
        if found is not None:
            return {**row, field: self.images.get(found)}
        if last or any(c in row[field] for c in "./\\") or row[field].strip() == str(self.mapping.get(row, "id", meta)):
            return row
        return None


_SHORTEST_PICTURE = 64


def _next_row(rows) -> list[str]:
    """The reader's next row, read with room for a picture in a cell; the csv module's limit is
    the process's, so it is put back at once for every other reader."""
    limit = csv.field_size_limit(MAX_CELL_CHARS)
    try:
        return next(rows)
    finally:
        csv.field_size_limit(limit)


def _text_lines(f, encoding: str = "utf-8") -> Iterator[str]:
    """The file's lines as text, decoded one at a time: a line that is not in ``encoding`` stops
    the file there, after the rows before it."""
    if encoding != "utf-8":
        yield from io.TextIOWrapper(f, encoding=encoding, newline="")
        return
    for number, raw in enumerate(f):
        yield raw.decode("utf-8-sig" if number == 0 else "utf-8")
