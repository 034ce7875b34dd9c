"""Which asset writes each table the warehouse publishes (import-light: used by the asset graph).

The ``warehouse`` asset depends on every asset named here, so a published table always comes
from an asset upstream of it; tests/test_definitions.py checks this against
``pipelines.store.warehouse.WAREHOUSE_TABLES`` and the resolved asset graph.
"""

from __future__ import annotations

WAREHOUSE_TABLE_ASSETS: dict[str, tuple[str, ...]] = {
    "raw_questions": ("raw_questions",),
    "questions": ("questions",),
    "choices": ("questions",),
    "images": ("image_index",),
    "duplicates": ("deduplicated_questions",),
    # ingest, filter, dedup and cap each write their own quarantine file
    "quarantine": ("raw_questions", "multimodal_questions", "deduplicated_questions"),
    "predictions": ("model_predictions",),
    "metrics": ("evaluation_metrics",),
    "reliability": ("evaluation_metrics",),
    "profiles": ("cogme_profiles",),
    "question_tags": ("question_tags",),
    "dataset_statistics": ("dataset_statistics",),
}

# publishing waits for the export: its blocking check (export_invariants) can stop the publish
WAREHOUSE_EXTRA_DEPS: tuple[str, ...] = ("stem_export",)


def warehouse_deps() -> list[str]:
    """The asset keys the ``warehouse`` asset depends on."""
    names = {name for writers in WAREHOUSE_TABLE_ASSETS.values() for name in writers}
    return sorted(names | set(WAREHOUSE_EXTRA_DEPS))
