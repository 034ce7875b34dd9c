"""Importers for released corpora: sources that yield RawQuestion and QuarantineEntry records.

``iter_import_records(spec, images)`` reads a file source with the reader its kind registered
(``@register_source`` in its module, see ``pipelines.ingest.sources``):

- ``stem-parquet:PATH``: the public STEM release (``stem_parquet``);
- ``scienceqa:PATH``: ScienceQA's ``problems.json`` and its images (``scienceqa``);
- ``jsonl:PATH[?mapping]``: one question per line with a field mapping (``jsonl``);
- ``json:PATH[?mapping]``: JSON files, an array, an object of arrays or an object of records
  keyed by id (``json_file``);
- ``python:MODULE:FUNCTION[?query]``: records yielded by a function (``python_source``).

The last three share the mapping and the row conversion of ``rows``. Records carry
``source = spec.text`` and ``source_key = "<file name>#<0-based row or line>"``.
Images go into the ImageStore. A record that cannot be used becomes a QuarantineEntry with
stage ``import``, a short stable reason and the specifics in ``detail``; it never stops the
import. A source that cannot be read at all (missing path, no shards, unknown mapping field)
raises ``ImportSourceError`` when ``iter_import_records`` is called, before any record is
produced (a ``python:`` function that raises does so while the records are read).
"""

from __future__ import annotations

from typing import Iterator

from pipelines.store.images import ImageStore
from pipelines.store.records import Record
from pipelines.ingest.sources import source_kinds
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.answers import AnswerError, parse_answer
from pipelines.ingest.importers.common import (
    ImageStoreFailure,
    ImportSourceError,
    RecordProblem,
    normalize_grade,
    normalize_subject,
    slugify,
)
from pipelines.ingest.importers.json_file import iter_json_records
from pipelines.ingest.importers.jsonl import iter_jsonl_records
from pipelines.ingest.importers.paths import UnsafePath, resolve_inside
from pipelines.ingest.importers.python_source import iter_python_records
from pipelines.ingest.importers.scienceqa import SCIENCEQA_SUBJECTS, iter_scienceqa_records
from pipelines.ingest.importers.stem_parquet import find_shards, iter_stem_parquet_records



def importer_kinds() -> tuple[str, ...]:
    return tuple(name for name, kind in source_kinds().items() if not kind.web)


def iter_import_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    """Records of an importer source, streamed; raises ImportSourceError at once if unusable."""
    kind = source_kinds().get(spec.kind)
    if kind is None or kind.read is None:
        raise ImportSourceError(f"source {spec.text!r} is not an importer source ({', '.join(importer_kinds())})")
    return kind.read(spec, images)


__all__ = [
    "SCIENCEQA_SUBJECTS",
    "AnswerError",
    "ImageStoreFailure",
    "ImportSourceError",
    "RecordProblem",
    "UnsafePath",
    "find_shards",
    "importer_kinds",
    "iter_import_records",
    "iter_json_records",
    "iter_jsonl_records",
    "iter_python_records",
    "iter_scienceqa_records",
    "iter_stem_parquet_records",
    "normalize_grade",
    "normalize_subject",
    "parse_answer",
    "resolve_inside",
    "slugify",
]
