"""Group ``dataset``: shuffled options, stable splits, the warehouse, the STEM export, Table 1."""

import dagster as dg

from pipelines.store.lineage import warehouse_deps
from assets.resources import StemforgeSettings

from assets._meta import OWNERS, frame_metadata, json_metadata
from assets.clean import _checked, latex_questions


@dg.asset(
    group_name="dataset",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[latex_questions],
    description=(
        "Each question's options permuted by a seeded hash of its id; the answer index remapped and the permutation "
        "kept. Options that are only figure labels, or that refer to other options, keep their order (`shuffle`)."
    ),
)
def shuffled_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.dataset import stage

    settings = stemforge.settings()
    figures = stage.shuffle_stage(settings.data_home, settings)
    return dg.MaterializeResult(metadata={**json_metadata(figures), "dagster/row_count": figures["questions"]})


@dg.asset(
    group_name="dataset",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[shuffled_questions],
    description=(
        "The kept questions with their train/valid/test split (60/20/20 within each subject and skill by "
        "default), assigned per duplicate group from a seeded hash and a split ledger, so a rebuild never "
        "moves a question. Also the `choices` table (one row per shuffled option)."
    ),
)
def questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.dataset import stage

    settings = stemforge.settings()
    figures = stage.split_stage(settings.data_home, settings)
    frame = stage.read_lake(settings.data_home, "questions")
    return dg.MaterializeResult(
        metadata={**frame_metadata(frame.drop("extra", "permutation")), **json_metadata(figures)}
    )


@dg.asset(
    group_name="dataset",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[questions],
    description="Dataset statistics shaped like the paper's Table 1.",
)
def dataset_statistics(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.dataset import stage

    from pipelines.dataset.export import statistics_markdown

    home = stemforge.settings().data_home
    figures = stage.statistics_figures(home)
    stats = stage.read_lake(home, "dataset_statistics")
    return dg.MaterializeResult(
        metadata={
            "table_1": dg.MetadataValue.md(statistics_markdown(stats)),
            "dagster/row_count": stats.height,
            "skipped": bool(figures.get("skipped")),
        }
    )


@dg.asset(
    group_name="dataset",
    kinds={"parquet"},
    owners=OWNERS,
    deps=[questions],
    description=(
        "export/stem/data/{train,valid,test}-NNNNN-of-MMMMM.parquet with exactly the public STEM release's "
        "fields and types; test answers hidden (-1) and written to test_answer_key.jsonl. Staged beside the live "
        "export; the warehouse step publishes both as one version."
    ),
)
def stem_export(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.dataset import stage
    from pipelines.dataset.export import ExportRefused

    settings = stemforge.settings()
    try:
        figures = stage.export_stage(settings.data_home, settings, staged=True)
    except ExportRefused as exc:
        raise dg.Failure(description=f"blocking check export_invariants failed: {exc}", allow_retries=False) from None
    # the export is staged: the warehouse step publishes both as one version; a run without it
    # (the export materialized alone) publishes the warehouse here
    selection = context.run.asset_selection
    if selection is not None and dg.AssetKey("warehouse") not in selection:
        figures["published"] = _publish_release(settings.data_home)[1]
    return dg.MaterializeResult(metadata=json_metadata(figures))


@dg.asset_check(asset=shuffled_questions, description="Answer positions of the shuffled (not kept-order) questions are uniform for each number of options (chi-square, p >= 0.001).")
def answer_position_uniform(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("answer_position_uniform", stemforge)


@dg.asset_check(asset=shuffled_questions, blocking=True, description="The answer's text or image is unchanged by the shuffle.")
def answer_content_unchanged(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("answer_content_unchanged", stemforge, blocking=True)


@dg.asset_check(
    asset=shuffled_questions,
    blocking=True,
    description=(
        "Options that are figure labels or refer to other options kept their order (identity permutation, "
        "reason recorded in `shuffle`), and each figure-label key still names the source's answer."
    ),
)
def kept_order_keys_match_source(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("kept_order_keys_match_source", stemforge, blocking=True)


@dg.asset_check(asset=questions, blocking=True, description="No duplicate group appears in two splits.")
def no_split_leakage(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("no_split_leakage", stemforge, blocking=True)


@dg.asset_check(asset=questions, description="Split proportions are within 3 points of the configured ratios overall.")
def split_proportions(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("split_proportions", stemforge)


@dg.asset_check(asset=stem_export, blocking=True, description="The export satisfies the STEM release's invariants.")
def export_invariants(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("export_invariants", stemforge, blocking=True)


@dg.asset(
    group_name="dataset",
    kinds={"duckdb"},
    owners=OWNERS,
    pool="duckdb_write",
    deps=warehouse_deps(),
    description=(
        "warehouse.duckdb: every lake table published as a DuckDB table in a new file, staged and then swapped "
        "in with the export this run staged as one version (.publish.json journals the swaps), so readers see "
        "the previous version or the new one, never a mix. The only writer."
    ),
)
def warehouse(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    home = stemforge.settings().data_home
    result, commit = _publish_release(home)
    return dg.MaterializeResult(
        metadata=json_metadata({"path": str(result.path), "tables": result.tables, "skipped_unchanged": result.skipped,
                                "version": commit.get("version", ""), "committed": commit.get("committed", False)})
    )


def _publish_release(home):
    """Stage the warehouse and publish it with the export this run staged, as one version
    (``pipelines.store.publish``); a failed blocking check publishes neither."""
    from pipelines.store import publish
    from pipelines.store.blocking import blocked_checks
    from pipelines.store.warehouse import publish_warehouse

    blocked = blocked_checks(home)
    if blocked:
        name, reason = sorted(blocked.items())[0]
        raise dg.Failure(
            description=f"not published: blocking check {name} failed: {reason}; the previous warehouse and export are kept",
            allow_retries=False,
        )
    result = publish_warehouse(home, staged=True)
    return result, publish.commit(home)


@dg.asset_check(
    asset=warehouse,
    description=(
        "The warehouse and the export are one published version: the export version the warehouse records "
        "(table build_version) is the sha256 of the live export's checksums.sha256."
    ),
)
def published_version_matches(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    from pipelines.store.publish import export_version, export_root, version_mismatch

    home = stemforge.settings().data_home
    problem = version_mismatch(home)
    return dg.AssetCheckResult(
        passed=not problem, description=problem or "one version",
        metadata={"export_version": export_version(export_root(home))},
    )
