"""Group ``clean``: the multimodal filter, image index, deduplication with the per-skill cap, LaTeX."""

import dagster as dg

from pipelines.resources import StemforgeSettings

from ._meta import OWNERS, frame_metadata, json_metadata
from .ingest import raw_questions


@dg.asset(
    group_name="clean",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    code_version="1",
    deps=[raw_questions],
    description="Questions with at least one image (the paper's filter); text-only ones are quarantined.",
)
def multimodal_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines import stages

    home = stemforge.settings().data_home
    figures = stages.filter_stage(home)
    return dg.MaterializeResult(metadata={**json_metadata(figures), "dagster/row_count": figures["kept"]})


@dg.asset(
    group_name="clean",
    kinds={"pillow", "parquet"},
    owners=OWNERS,
    code_version="1",
    deps=[multimodal_questions],
    description="Every referenced image: format, size and 64-bit perceptual hash (the `images` view).",
)
def image_index(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines import stages

    home = stemforge.settings().data_home
    figures = stages.image_index_stage(home)
    frame = stages.read_lake(home, "images")
    return dg.MaterializeResult(metadata={**frame_metadata(frame), **json_metadata(figures)})


@dg.asset(
    group_name="clean",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    code_version="1",
    deps=[multimodal_questions, image_index],
    description=(
        "Exact and near duplicates removed (text MinHash LSH + perceptual image hashes, each candidate "
        "confirmed against its group's representative), then at most `cap_per_skill` questions per skill. "
        "Removed records are in `duplicates`; conflicting answers and over-cap questions in quarantine."
    ),
)
def deduplicated_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines import stages

    settings = stemforge.settings()
    figures = stages.dedup_stage(settings.data_home, settings)
    frame = stages.read_lake(settings.data_home, "deduplicated")
    return dg.MaterializeResult(metadata={**frame_metadata(frame.drop("extra")), **json_metadata(figures)})


@dg.asset(
    group_name="clean",
    kinds={"python", "parquet"},
    owners=OWNERS,
    code_version="1",
    deps=[deduplicated_questions],
    description=(
        "Formulas in question texts and text options converted to Mathpix-style LaTeX by offline rules; "
        "every conversion validated by parsing and a round trip, failures keep the original text."
    ),
)
def latex_questions(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines import stages

    home = stemforge.settings().data_home
    figures = stages.latex_stage(home)
    frame = stages.read_lake(home, "latex")
    return dg.MaterializeResult(
        metadata={**frame_metadata(frame.select("question_id", "problem_original", "problem")), **json_metadata(figures)}
    )


def _result(ok: bool, description: str, **metadata) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=bool(ok), description=description, metadata=json_metadata(metadata))


@dg.asset_check(asset=deduplicated_questions, blocking=True, description="No question identity is kept twice.")
def no_identity_twice(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    from pipelines import stages

    frame = stages.read_lake(stemforge.settings().data_home, "deduplicated")
    repeated = frame.height - frame["question_id"].n_unique()
    return _result(repeated == 0, f"{repeated} repeated question ids", repeated=repeated)


@dg.asset_check(
    asset=deduplicated_questions,
    blocking=True,
    description="Every kept question has an image, 2-5 options and an answer in range.",
)
def kept_questions_are_valid(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    from pipelines import stages
    import polars as pl

    frame = stages.read_lake(stemforge.settings().data_home, "deduplicated").with_columns(
        pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len()).alias("_k")
    )
    no_image = frame.filter(pl.col("problem_image").is_null() & pl.col("choice_images").is_null()).height
    bad_count = frame.filter((pl.col("_k") < 2) | (pl.col("_k") > 5)).height
    bad_answer = frame.filter((pl.col("answer_idx") < -1) | (pl.col("answer_idx") >= pl.col("_k"))).height
    ok = no_image == bad_count == bad_answer == 0
    return _result(ok, "images, option counts and answers", no_image=no_image, bad_option_count=bad_count, answer_out_of_range=bad_answer)


@dg.asset_check(asset=latex_questions, description="Every LaTeX span in the output parses.")
def latex_is_valid(stemforge: StemforgeSettings) -> dg.AssetCheckResult:
    from pipelines import stages

    from pipelines.latex import invalid_formulas

    frame = stages.read_lake(stemforge.settings().data_home, "latex")
    texts = frame["problem"].to_list() + [c for cs in frame["choices"].drop_nulls().to_list() for c in cs]
    bad = [t for t in texts if invalid_formulas(t)]
    return _result(not bad, f"{len(bad)} texts with invalid LaTeX", invalid=len(bad), examples=bad[:5])
