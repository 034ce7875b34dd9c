"""Group ``profiles``: CogME tags, dataset and model profiles, and the report."""

import dagster as dg

from assets.resources import StemforgeSettings

from assets._meta import OWNERS, frame_metadata, json_metadata
from assets.dataset import dataset_statistics, questions
from assets.evaluation import evaluation_metrics, model_predictions


@dg.asset(
    group_name="profiles",
    kinds={"python", "parquet"},
    owners=OWNERS,
    deps=[questions],
    description=(
        "CogME tags per question (TARGET up to 3, CONTENT up to 3, the highest THINKING level) from the "
        "offline rule tagger over the STEM taxonomy, plus imported manual annotations; each tag keeps its source."
    ),
)
def question_tags(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.profiles import stage as profiling

    tags, figures = profiling.tag_stage(stemforge.settings().data_home, stemforge.settings())
    return dg.MaterializeResult(metadata={**frame_metadata(tags), **json_metadata(figures)})


@dg.asset(
    group_name="profiles",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[question_tags, model_predictions],
    description=(
        "The `profiles` table: the dataset's sub-component frequencies (overall, per subject and split) and "
        "each model's weighted achievement rate and accuracy per sub-component, with n."
    ),
)
def cogme_profiles(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.profiles import stage as profiling

    profiles, figures = profiling.profile_stage(stemforge.settings().data_home)
    return dg.MaterializeResult(metadata={**frame_metadata(profiles), **json_metadata(figures)})


@dg.asset(
    group_name="profiles",
    kinds={"html"},
    owners=OWNERS,
    deps=[cogme_profiles, evaluation_metrics, dataset_statistics],
    description="reports/index.html: one self-contained page with the dataset statistics, evaluation plots and CogME radar plots.",
)
def report(stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.profiles import stage as profiling

    home = stemforge.settings().data_home
    figures = profiling.report_figures(home, stemforge.settings())
    path = figures.get("path") or str(home.reports / "index.html")
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(path), "skipped": bool(figures.get("skipped"))})
