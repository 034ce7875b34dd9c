"""Reading an importer source in tests: its records split into questions and quarantine entries."""

from __future__ import annotations

from pipelines.ingest.importers import iter_import_records
from pipelines.ingest.spec import parse_source_spec
from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, RawQuestion


def read_source(spec: str, store: ImageStore) -> tuple[dict[str, RawQuestion], dict[str, tuple[str, str | None]]]:
    """(questions by source key, (reason, detail) of the quarantined by source key); every
    record is one or the other, once."""
    records = list(iter_import_records(parse_source_spec(spec), store))
    questions = {r.source_key: r for r in records if isinstance(r, RawQuestion)}
    quarantined = {r.source_key: (r.reason, r.detail) for r in records if isinstance(r, QuarantineEntry)}
    assert len(questions) + len(quarantined) == len(records), "a record read twice"
    return questions, quarantined
