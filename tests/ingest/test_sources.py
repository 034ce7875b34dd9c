"""The source kinds registry: every kind declared once, with what change detection watches."""

from __future__ import annotations

import pytest

from pipelines.ingest import sources
from pipelines.ingest.importers import importer_kinds
from pipelines.ingest.sources import register_source, source_kinds, unwatched


def test_every_contract_kind_is_registered_with_its_spelling():
    kinds = source_kinds()
    assert set(kinds) == {"demo", "http", "stem-parquet", "scienceqa", "jsonl", "json", "csv", "tsv", "hf", "python"}
    assert {name for name, kind in kinds.items() if kind.web} == {"demo", "http"}
    assert set(importer_kinds()) == set(kinds) - {"demo", "http"}
    for name, kind in kinds.items():
        assert kind.usage.startswith(name), (name, kind.usage)
        assert (kind.read is None) == kind.web
    assert {name for name, kind in kinds.items() if kind.query} == {"jsonl", "json", "csv", "tsv", "hf", "python"}


def test_only_python_sources_are_left_unwatched():
    # a file kind without a watch would be re-imported every build; say so by name
    left = {name for name, kind in source_kinds().items() if not kind.web and kind.watch is unwatched}
    assert left == {"python"}


def test_a_kind_registered_twice_by_different_readers_is_refused():
    source_kinds()

    def one(spec, images):
        return iter(())

    def other(spec, images):
        return iter(())

    try:
        register_source("twice", usage="twice:PATH")(one)
        register_source("twice", usage="twice:PATH")(one)  # a module imported again: same reader
        with pytest.raises(ValueError, match="registered twice"):
            register_source("twice", usage="twice:PATH")(other)
    finally:
        sources._KINDS.pop("twice", None)
