"""Importer for JSON files holding many questions: ``json:PATH[?mapping]``.

PATH is a ``.json`` file or a folder, whose ``*.json`` files (not its subfolders) are read
in name order. A file is one of:

- an array of records;
- an object of arrays: every value of the object that is an array holds records, and its key
  is the pseudo-field ``_key`` (SceMQA's ``{"Math": [...], "Physics": [...]}`` maps
  ``subject=_key``); other values (``"keywords": "..."``) are ignored;
- an object of records keyed by id (``{"v1_0": {...}, "v1_1": {...}}``): an object none of
  whose values is an array, every value an object that looks like a record (it holds at least
  one text, number or boolean: a question has a text). Its key is ``_key``, and the record's
  ``id`` when it has no ``id`` field (mapped or by default name). An object whose values are
  objects of arrays or of objects only (``{"Math": {"questions": [...]}}``) is no such object:
  it is refused as a file without records, and ``records=Math.questions`` reads it.

- one record (IconQA's ``<id>/data.json``, a folder per question): an object holding the
  question text as a field of its own (``problem`` as mapped, or a default name) and no array of
  objects; its ``source_key`` is the file's name, and ``_key`` the name without ``.json``.

``files=PATTERN`` reads the files under PATH that match a glob pattern, in name order
(``files=*/data.json``; ``**`` reaches any depth), each named by its path under PATH, so a
folder per question keys every question apart; a constant picture path finds the picture beside
each file (``image='image.png'``).

``records=KEY`` (a ``*`` part passes through every item of an array or object:
``records=*.questions.diagramQuestions`` reads the records of every TQA lesson, keyed
``<file>#<lesson>/<id>``) reads only the array, or the object of records, at KEY (a dotted name reaches
into nested objects: GAOKAO-MM's ``{"keywords": ..., "example": [...]}`` is ``records=example``).
The pseudo-field ``_file`` is the file's name without ``.json``.

The mapping, the settings (``options_in_text``, ``image_root``, ``answer_format``,
``subjects``) and how a record becomes a question are those of ``rows.py``, shared with
``jsonl:``. Image paths resolve against the file's folder (or ``image_root``, relative to it)
and may not leave it. ``source_key`` is ``<file name>#<position>`` in an array (or the
``records`` array, whose key is then ``_key``), ``<file name>#<key>/<position>`` in an object
of arrays and ``<file name>#<key>`` in an object of records. A file that
cannot be read as one of these layouts is one quarantine entry keyed by its name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, Record
from pipelines.ingest.sources import register_source
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.common import STAGE, ImportSourceError, one_line
from pipelines.ingest.importers.paths import find_data_files
from pipelines.ingest.importers.rows import (
    RowMapping,
    image_folder,
    row_record,
    unused_field_entries,
    watched_data_files,
    with_index_base,
)

# A file is read whole; larger files are refused (quarantined) rather than exhausting memory.
MAX_JSON_BYTES = 1 << 30


def find_json_files(location: str | Path, pattern: str | None = None) -> list[Path]:
    """The data files of a ``json:`` source: the file itself, or a folder's ``*.json`` files, or
    with ``files=PATTERN`` the folder's files matching the glob pattern (``*/data.json``,
    ``**/*.json``), in name order."""
    if not pattern:
        return find_data_files("json", location)
    folder = Path(location)
    if not folder.is_dir():
        raise ImportSourceError(f"json: files={pattern} needs a folder; {folder} is not one")
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise ImportSourceError(f"json: files={pattern} must stay inside {folder}")
    files = sorted(p for p in folder.glob(pattern) if p.is_file() and not p.name.startswith("."))
    if not files:
        raise ImportSourceError(f"json: no files match {pattern} in {folder}")
    return files


def watch_json(spec: SourceSpec, exclude: Path) -> list[Path] | None:
    return watched_data_files(spec, find_json_files(spec.location, spec.options.get("files")), exclude)


@register_source("json", usage="json:PATH", query=True, watch=watch_json)
def iter_json_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    pattern = spec.options.get("files") or None
    files = find_json_files(spec.location, pattern)
    mapping = RowMapping(spec.options, "json", extra_settings=("records", "files"))  # raises before iteration starts
    records_key = spec.options.get("records") or None
    roots = {folder: image_folder(mapping, folder) for folder in {f.parent for f in files}}
    # files found by a pattern may share a name (one folder per question): each is named by its path
    names = {f: f.relative_to(spec.location).as_posix() if pattern else f.name for f in files}
    return with_index_base(
        lambda m: _iter_files(spec.text, Path(spec.location).name, files, names, m, records_key, roots, images), mapping)


def _iter_files(
    source: str,
    source_name: str,
    files: list[Path],
    names: dict[Path, str],
    mapping: RowMapping,
    records_key: str | None,
    roots: dict[Path, Path],
    images: ImageStore,
) -> Iterator[Record]:
    for path in files:
        name = names[path]
        try:
            arrays = _record_arrays(path, records_key, mapping.names["problem"])
        except _FileProblem as problem:
            yield QuarantineEntry(source, name, STAGE, problem.reason, problem.detail)
            continue
        if isinstance(arrays, _OneRecord):  # the file is one question: keyed by its name
            record_key = name.rsplit(".", 1)[0]
            meta = {"_file": path.stem, "_key": record_key, "_record_key": record_key}
            yield row_record(source, name, arrays.record, mapping, meta, roots[path.parent], images)
            continue
        for key, rows, where in arrays:
            if isinstance(rows, dict):  # an object of records: each filed under its own key
                for record_key, row in rows.items():
                    meta = {"_file": path.stem, "_key": record_key, "_record_key": record_key}
                    yield row_record(source, f"{name}#{where}{record_key}", row, mapping, meta, roots[path.parent], images)
                continue
            meta = {"_file": path.stem, "_key": key}
            prefix = f"{name}#{where}" if key is None or records_key else f"{name}#{key}/"
            for position, row in enumerate(rows):
                yield row_record(source, f"{prefix}{position}", row, mapping, meta, roots[path.parent], images)
    yield from unused_field_entries(source, source_name, mapping)


class _OneRecord(NamedTuple):
    record: dict


class _FileProblem(Exception):
    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def looks_like_records(value: Any) -> bool:
    """An object of records keyed by id: a non-empty object none of whose values is an array,
    each value an object holding at least one text, number or boolean (a record has a text;
    a wrapper of arrays or objects does not)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(
            isinstance(record, dict)
            and any(isinstance(field, (str, int, float, bool)) for field in record.values())
            for record in value.values()
        )
    )


def _document(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise _FileProblem(f"JSON file larger than {MAX_JSON_BYTES} bytes", f"{size} bytes")
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:
        raise _FileProblem("malformed JSON file", one_line(exc, 200)) from None
    except OSError as exc:
        raise _FileProblem("unreadable JSON file", one_line(exc.strerror or exc, 200)) from None


def is_one_record(document: Any, question_names: tuple[str, ...]) -> bool:
    """The file is one question (IconQA's ``<id>/data.json``): an object whose question text is
    a field of its own and none of whose arrays holds objects (a wrapper's arrays hold records)."""
    return (
        isinstance(document, dict)
        and any(isinstance(document.get(name), str) for name in question_names)
        and not any(isinstance(value, list) and any(isinstance(item, dict) for item in value) for value in document.values())
    )


def _record_arrays(path: Path, records_key: str | None, question_names: tuple[str, ...]):
    """(key, records) of every array of records in the file, key None for a top-level array;
    or (None, the object) for an object of records keyed by id; or the one record the file is."""
    document = _document(path)
    if records_key:
        found = _find(document, records_key)
        if not found:
            raise _FileProblem("records key not in the file", records_key)
        arrays = []
        for where, node in found:  # where: the items a "*" passed through ("3/"), "" without one
            if looks_like_records(node):
                arrays.append((records_key, {str(k): v for k, v in node.items()}, where))
            elif isinstance(node, list):
                arrays.append((records_key, node, where))
            elif "*" not in records_key.split("."):
                raise _FileProblem("records key is not an array", f"{records_key} is a {type(node).__name__}")
        return arrays
    if isinstance(document, list):
        return [(None, document, "")]
    if is_one_record(document, question_names):
        return _OneRecord(document)
    if isinstance(document, dict):
        arrays = [(str(key), value, "") for key, value in document.items() if isinstance(value, list)]
        if arrays:
            return arrays
        if looks_like_records(document):
            return [(None, {str(k): v for k, v in document.items()}, "")]
        raise _FileProblem("JSON object without arrays of records", ", ".join(map(str, document))[:200] or "empty object")
    raise _FileProblem("JSON file is neither an array nor an object of arrays", type(document).__name__)


def _find(document: Any, name: str) -> list[tuple[str, Any]]:
    """(where, node) of every node at the dotted path ``name``; a ``*`` part passes through every
    item of an array or value of an object (``*.questions.diagramQuestions``: TQA's lessons), and
    ``where`` names the items it passed ("3/"). [] when there is none."""
    if isinstance(document, dict) and name in document:
        return [("", document[name])]
    found = [("", document)]
    for part in name.split("."):
        step = []
        for where, node in found:
            if part == "*":
                items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
                step += [(f"{where}{key}/", item) for key, item in items]
            elif isinstance(node, dict) and part in node:
                step.append((where, node[part]))
        found = step
    return found
