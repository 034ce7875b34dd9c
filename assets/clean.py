"""Group ``clean``: the multimodal filter, image index, deduplication with the per-skill cap, LaTeX."""

import dagster as dg

from assets.resources import StemforgeSettings

from assets._meta import OWNERS, frame_metadata, json_metadata
from assets.ingest import raw_questions


@dg.asset(
    group_name="clean",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[raw_questions],
    description="Questions with at least one image (the paper's filter); text-only ones are quarantined.",
)
def multimodal_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.clean import stage

    home = stemforge.settings().data_home
    figures = stage.filter_stage(home)
    return dg.MaterializeResult(metadata={**json_metadata(figures), "dagster/row_count": figures["kept"]})


@dg.asset(
    group_name="clean",
    kinds={"pillow", "parquet"},
    owners=OWNERS,
    deps=[multimodal_questions],
    description="Every referenced image: format, size and 64-bit perceptual hash (the `images` view).",
)
def image_index(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.clean import stage
    from pipelines.compiled import announce_compile

    announce_compile("image_index", context.log.info)
    home = stemforge.settings().data_home
    figures = stage.image_index_stage(home, log=context.log.info)
    frame = stage.read_lake(home, "images")
    return dg.MaterializeResult(metadata={**frame_metadata(frame), **json_metadata(figures)})


@dg.asset(
    group_name="clean",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[multimodal_questions, image_index],
    description=(
        "Exact and near duplicates removed (exact: the same text, image and options; near: the same canonical "
        "text and options with near-equal pictures, candidates found by perceptual image hashes in bands and "
        "each confirmed against its group's representative), then at most `cap_per_skill` questions per skill. "
        "Removed records are in `duplicates`; conflicting answers and over-cap questions in quarantine."
    ),
)
def deduplicated_questions(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.clean import stage
    from pipelines.compiled import announce_compile

    announce_compile("deduplicated_questions", context.log.info)
    settings = stemforge.settings()
    figures = stage.dedup_stage(settings.data_home, settings, log=context.log.info)
    frame = stage.read_lake(settings.data_home, "deduplicated")
    return dg.MaterializeResult(metadata={**frame_metadata(frame.drop("extra")), **json_metadata(figures)})


@dg.asset(
    group_name="clean",
    kinds={"python", "parquet"},
    owners=OWNERS,
    deps=[deduplicated_questions],
    description=(
        "Formulas in question texts and text options converted to Mathpix-style LaTeX by offline rules; "
        "every conversion validated by parsing and a round trip, failures keep the original text."
    ),
)
def latex_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.clean import stage

    home = stemforge.settings().data_home
    figures = stage.latex_stage(home)
    frame = stage.read_lake(home, "latex")
    return dg.MaterializeResult(
        metadata={**frame_metadata(frame.select("question_id", "problem_original", "problem")), **json_metadata(figures)}
    )


def _checked(name: str, stemforge: StemforgeSettings, blocking: bool = False) -> dg.AssetCheckResult:
    """Run the library check ``name`` (memoized on the files it reads) as an asset check; a
    blocking one's failure is remembered until it passes (``pipelines.store.blocking``)."""
    from pipelines.checks import run_check

    outcome = run_check(name, stemforge.settings())
    if blocking:
        from pipelines.store.blocking import record_check

        record_check(stemforge.settings().data_home, name, outcome.passed, outcome.description)
    return dg.AssetCheckResult(
        passed=outcome.passed, description=outcome.description, metadata=json_metadata(outcome.metadata)
    )


@dg.asset_check(asset=deduplicated_questions, blocking=True, description="No question identity is kept twice.")
def no_identity_twice(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("no_identity_twice", stemforge, blocking=True)


@dg.asset_check(
    asset=deduplicated_questions,
    blocking=True,
    description="Every kept question has an image, 2-5 options and an answer in range.",
)
def kept_questions_are_valid(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("kept_questions_are_valid", stemforge, blocking=True)


@dg.asset_check(asset=latex_questions, description="Every LaTeX span in the output parses.")
def latex_is_valid(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    return _checked("latex_is_valid", stemforge)
