"""Group ``evaluation``: models' predictions on the built dataset and every measure of them."""

import dagster as dg

from assets.resources import StemforgeSettings

from assets._meta import OWNERS, frame_metadata, json_metadata
from assets.dataset import questions


@dg.asset(
    group_name="evaluation",
    kinds={"python", "parquet"},
    owners=OWNERS,
    deps=[questions],
    description=(
        "Predictions of every configured model (floor baselines, the embedding baseline when its extra is "
        "installed, CLIP from local weights, OpenAI-compatible endpoints) on the evaluation splits, with "
        "circular re-asks for live adapters; one Parquet file per model in lake/predictions/. "
        "Predictions imported with `stemforge eval` sit beside them."
    ),
)
def model_predictions(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.evaluation import stage as evaluation

    settings = stemforge.settings()
    figures = evaluation.predict_stage(settings.data_home, settings, log=context.log.info)
    return dg.MaterializeResult(metadata=json_metadata(figures))


@dg.asset(
    group_name="evaluation",
    kinds={"polars", "parquet"},
    owners=OWNERS,
    deps=[model_predictions],
    description=(
        "The `metrics` table: accuracy per subject, macro and micro (the paper's headline), per grade, skill, "
        "number of options, question length and type, with clustered 95% intervals; the SmartScore exam "
        "score; ECE and reliability; circular accuracy; paired comparisons; the paper's reference rows."
    ),
)
def evaluation_metrics(context: dg.AssetExecutionContext, stemforge: StemforgeSettings) -> dg.MaterializeResult:
    from pipelines.evaluation import stage as evaluation

    settings = stemforge.settings()
    metrics, figures = evaluation.metrics_stage(settings.data_home, settings)
    for model, reason in (figures.get("left_out") or {}).items():
        context.log.warning(f"model {model} left out of the metrics: {reason}")
    for note in figures.get("coverage_notes") or []:
        context.log.warning(note)
    for note in figures.get("exam_sample_notes") or []:
        context.log.warning(f"--exam-skills paper: {note}")
    headline = metrics.filter(
        (metrics["metric"] == "accuracy") & metrics["group_by"].is_in(["macro", "micro"])
    ).select("model", "split", "group_by", "value", "ci_low", "ci_high", "n")
    return dg.MaterializeResult(metadata={**frame_metadata(headline, preview_rows=20), **json_metadata(figures)})
