"""Evaluation measures over scored predictions, in the shape of the ``metrics`` view.

Input: a ``scored`` frame with one row per (model, question) and the columns
``model, question_id, split, subject, grade, skill, num_choices, problem, prediction,
confidence, correct`` and optionally ``cluster`` (the question's image hash; null or absent
means the question is its own cluster). ``prediction == -1`` is a failed sample (no answer);
it counts as wrong.

Output conventions (every function returning metric rows uses ``METRICS_SCHEMA``):

* ``value``, ``ci_low`` and ``ci_high`` are PERCENTS (0-100), as in the paper's tables, for
  every metric: ``accuracy``, ``random_expected``, ``failed_rate``, ``ece``,
  ``circular_accuracy`` and (in ``pipelines.evaluation.smartscore``) ``exam_score`` (SmartScore points).
  Each is declared with ``@register_metric`` (see "the registry of measures" below).
* ``metric='accuracy'`` rows exist for ``group_by`` in ``subject``, ``macro`` (mean of the
  subject accuracies present, ``group_value='all'``: the paper's headline), ``micro``
  (``group_value='all'``), ``grade`` (``'(none)'`` for technology), ``skill`` (group value
  ``<grade>/<skill>``, the paper's skill naming, or ``<skill>`` when the grade is null),
  ``num_choices``, ``length_bucket`` (see ``LENGTH_BUCKETS``; length = whitespace-separated
  tokens of the problem text, LaTeX included) and ``question_type`` (first word of the
  problem, lower-cased and stripped of punctuation; the 10 most frequent among the distinct
  questions of the same split, everything else ``'other'``).
* ``random_expected`` (mean of 1/k, a random guesser's expected accuracy, without interval)
  and ``failed_rate`` (share of failed samples) for the same groupings; ``ece`` (10
  equal-width confidence bins ``[i/10, (i+1)/10)``, the last one closed) for micro and
  subject, only where confidences exist, computed on the rows that have one, without
  interval.
* ``n`` is the number of questions in the cell (for ``ece``, the number with a confidence).

Intervals (95%), two methods:

* default (``bootstrap=0``): cluster-robust CLT in Wilson form. Per cell, with clusters c
  (questions sharing an image), y_c correct and n_c questions, p = sum y / sum n and the
  cluster-robust variance V = C/(C-1) * sum_c (y_c - p n_c)^2 / (sum n)^2 (C clusters). The
  effective sample size is m = p(1-p)/V, capped to [1, n] (never claims more than the
  independent case); when V is undefined or 0 (one cluster, p in {0, 1}) m = C. The
  interval is Wilson's score interval with m observations, so it stays inside [0, 100] and
  behaves on small cells. The macro interval combines the subjects as independent strata:
  V_macro = sum_s V_s / S^2, in the same Wilson form. O(rows), no randomness.
* ``bootstrap=B > 0``: an exact clustered bootstrap with B replicates. Each replicate
  resamples a cell's clusters with replacement, as many as the cell has, and recomputes
  sum(correct) / sum(questions); the interval is the 2.5/97.5 percentiles. Clusters with the
  same shape (correct count, size) are exchangeable, so only the number of draws of each
  shape matters: it is multinomial, drawn directly, and the cost is (cells x shapes x B)
  instead of (questions x B). The macro interval is stratified by subject (each replicate is
  the mean of independent per-subject replicates). The random streams are keyed by
  (seed, model, split, grouping), so adding a model does not move another model's
  intervals. Both are vectorized; on 1,000,000 predictions with every breakdown the
  bootstrap (B=1000) roughly doubles the CPU time of compute_metrics (bench/score.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import polars as pl

from pipelines.evaluation import smartscore  # registers exam_score; smartscore never imports this module
from pipelines.evaluation.metric_rows import (  # noqa: F401  (re-exported: the names users import from here)
    ALL,
    AGGREGATIONS,
    CONFIDENCE_LEVEL,
    DEFAULT_BOOTSTRAP,
    MEASURES,
    METRIC_COLUMNS,
    METRICS_SCHEMA,
    NO_GRADE,
    PERCENT,
    Z_95,
    BootstrapResult,
    MeasureInputs,
    MetricsInputError,
    PerQuestion,
    RegisteredMeasure,
    bootstrap_ratio,
    empty_metrics,
    measures,
    register_metric,
    skill_key_expr,
    sort_metrics,
    stream_seed,
    wilson_interval,
    _as_metric_rows,
    _change_ids,
    _concat_metric_rows,
    _macro_rows,
    _percentile_interval,
    mover_interval,
)


REQUIRED_COLUMNS = (
    "model",
    "question_id",
    "split",
    "subject",
    "grade",
    "skill",
    "num_choices",
    "problem",
    "prediction",
    "confidence",
    "correct",
)
NON_NULL_COLUMNS = ("model", "question_id", "split", "subject", "skill", "num_choices", "prediction", "correct")

# (largest token count in the bucket, label); the last bucket is open-ended. Bounds double, as
# question lengths are long-tailed: the demo's test questions (median 8 tokens, 90th percentile 17)
# fill 0-5, 6-10 and 11-20, SceMQA's (median 39, 90th percentile 93) fill 21-40 to 81+, and
# GAOKAO-MM's (median 17 whitespace tokens: Chinese has few spaces) spread over 0-5 to 41-80.
LENGTH_BUCKETS: tuple[tuple[int, str], ...] = (
    (5, "0-5"),
    (10, "6-10"),
    (20, "11-20"),
    (40, "21-40"),
    (80, "41-80"),
)
LONGEST_BUCKET_LABEL = "81+"
LENGTH_BUCKET_ORDER = tuple(label for _, label in LENGTH_BUCKETS) + (LONGEST_BUCKET_LABEL,)
QUESTION_TYPE_TOP = 10
QUESTION_TYPE_OTHER = "other"

ECE_BINS = 10
HUMAN_SAMPLE_METRIC = "accuracy_human_sample"  # reference_results.TABLE_8_ACCURACY_METRIC
MAX_OPTIONS = 20
# 1/k is summed as INVERSE_K_SCALE/k, an integer for every k <= MAX_OPTIONS: sums are exact
# whatever the row order, and the scale does not depend on which splits are scored
INVERSE_K_SCALE = math.lcm(*range(1, MAX_OPTIONS + 1))
_FIXED_POINT = float(1 << 32)


# ---------------------------------------------------------------------------------------
# input preparation


def _check_columns(frame: pl.DataFrame, required: Sequence[str], what: str) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise MetricsInputError(f"{what} is missing column(s): {', '.join(missing)}")


def _check_non_null(frame: pl.DataFrame, columns: Sequence[str], what: str) -> None:
    counts = frame.select(pl.col(c).null_count() for c in columns).row(0)
    for column, count in zip(columns, counts):
        if count:
            raise MetricsInputError(f"{what}: column {column!r} has {count} null value(s)")


def _first_duplicate(frame: pl.DataFrame, keys: Sequence[str]) -> tuple | None:
    dup = frame.group_by(list(keys)).agg(pl.len().alias("_n")).filter(pl.col("_n") > 1)
    if dup.height == 0:
        return None
    return dup.sort(list(keys)).row(0)[: len(keys)]


_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u201c\u201d\u2018\u2019\u2026\u00bf\u00a1"


def _first_word_expr() -> pl.Expr:
    """First whitespace-separated word, lower-cased, stripped of surrounding punctuation."""
    word = (
        pl.col("problem")
        .fill_null("")
        .str.extract(r"^\s*(\S+)", 1)
        .str.to_lowercase()
        .str.strip_chars(_PUNCTUATION)
    )
    return pl.when(word.is_null() | (word == "")).then(pl.lit("(none)")).otherwise(word)


def _length_bucket_expr() -> pl.Expr:
    tokens = pl.col("problem").fill_null("").str.count_matches(r"\S+")
    expr = pl.when(tokens <= LENGTH_BUCKETS[0][0]).then(pl.lit(LENGTH_BUCKETS[0][1]))
    for upper, label in LENGTH_BUCKETS[1:]:
        expr = expr.when(tokens <= upper).then(pl.lit(label))
    return expr.otherwise(pl.lit(LONGEST_BUCKET_LABEL))


KEY_COLUMNS = ("model", "split", "subject", "grade_key", "skill_key", "cluster", "length_bucket", "question_type", "num_choices_key")


def prepare_scored(scored: pl.DataFrame) -> pl.DataFrame:
    """Validate ``scored`` and add the derived columns the measures group by.

    Adds ``cluster`` (filled with question_id), ``grade_key``, ``skill_key``,
    ``length_bucket``, ``question_type``, ``num_choices_key`` (string), ``is_correct`` /
    ``is_failed`` (0/1 floats) and ``inverse_k`` (INVERSE_K_SCALE/num_choices, the scale in
    ``inverse_k_scale``, so that sums are exact). Grouping keys are
    Categorical (fast group-bys); outputs cast them back to strings.
    """
    _check_columns(scored, REQUIRED_COLUMNS, "scored predictions")
    frame = scored
    if "cluster" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("cluster"))
    _check_non_null(frame, NON_NULL_COLUMNS, "scored predictions")
    frame = frame.select(
        pl.col("model").cast(pl.String),
        pl.col("question_id").cast(pl.String),
        pl.col("split").cast(pl.String),
        pl.col("subject").cast(pl.String),
        pl.col("grade").cast(pl.String),
        pl.col("skill").cast(pl.String),
        pl.col("problem").cast(pl.String),
        pl.col("num_choices").cast(pl.Int64),
        pl.col("prediction").cast(pl.Int64),
        pl.col("confidence").cast(pl.Float64),
        pl.col("correct").cast(pl.Boolean),
        pl.coalesce(pl.col("cluster").cast(pl.String), pl.col("question_id").cast(pl.String)).alias("cluster"),
    )
    if frame.height:
        _validate_rows(frame)
    # the top first words are counted per split, so scoring one split never moves another's rows
    per_question = frame.unique(subset=["split", "question_id"], keep="first").select(
        "split", "question_id", _first_word_expr().alias("first_word"), _length_bucket_expr().alias("length_bucket")
    )
    top_types = (
        per_question.group_by(["split", "first_word"])
        .agg(pl.len().alias("count"))
        .sort(["split", "count", "first_word"], descending=[False, True, False])
        .filter(pl.int_range(pl.len()).over("split") < QUESTION_TYPE_TOP)
        .select("split", "first_word", pl.lit(True).alias("top"))
    )
    per_question = per_question.join(top_types, on=["split", "first_word"], how="left").select(
        "split",
        "question_id",
        "length_bucket",
        pl.when(pl.col("top").fill_null(False))
        .then(pl.col("first_word"))
        .otherwise(pl.lit(QUESTION_TYPE_OTHER))
        .alias("question_type"),
    )
    scale = INVERSE_K_SCALE
    frame = frame.join(per_question, on=["split", "question_id"], how="left", maintain_order="left").with_columns(
        pl.col("grade").fill_null(NO_GRADE).alias("grade_key"),
        skill_key_expr().alias("skill_key"),
        pl.col("num_choices").cast(pl.String).alias("num_choices_key"),
        pl.col("correct").cast(pl.Float64).alias("is_correct"),
        (pl.col("prediction") == -1).cast(pl.Float64).alias("is_failed"),
        (pl.lit(scale, pl.Int64) // pl.col("num_choices")).cast(pl.Float64).alias("inverse_k"),
        pl.lit(scale, pl.Int64).alias("inverse_k_scale"),
    )
    return frame.with_columns(pl.col(c).cast(pl.Categorical) for c in KEY_COLUMNS)


def _validate_rows(frame: pl.DataFrame) -> None:
    keyed = frame.select(pl.col("model", "split", "question_id").cast(pl.Categorical))
    if keyed.select(pl.struct("model", "split", "question_id").is_duplicated().any()).item():
        dup = _first_duplicate(frame, ("model", "split", "question_id"))
        raise MetricsInputError(f"duplicate prediction rows for model {dup[0]!r}, split {dup[1]!r}, question {dup[2]!r}")
    bad = frame.filter(pl.col("num_choices") < 2)
    if bad.height:
        raise MetricsInputError(f"question {bad['question_id'][0]!r} has num_choices {bad['num_choices'][0]} (< 2)")
    bad = frame.filter(pl.col("num_choices") > MAX_OPTIONS)
    if bad.height:
        raise MetricsInputError(
            f"question {bad['question_id'][0]!r} has num_choices {bad['num_choices'][0]}: at most {MAX_OPTIONS} options are supported"
        )
    bad = frame.filter((pl.col("prediction") < -1) | (pl.col("prediction") >= pl.col("num_choices")))
    if bad.height:
        row = bad.row(0, named=True)
        raise MetricsInputError(
            f"prediction {row['prediction']} out of range for question {row['question_id']!r} "
            f"({row['num_choices']} options) of model {row['model']!r}"
        )
    bad = frame.filter((pl.col("prediction") == -1) & pl.col("correct"))
    if bad.height:
        raise MetricsInputError(f"question {bad['question_id'][0]!r} is marked correct with a failed prediction (-1)")
    bad = frame.filter(pl.col("confidence").is_not_null() & ~pl.col("confidence").is_between(0.0, 1.0))
    if bad.height:
        raise MetricsInputError(
            f"confidence {bad['confidence'][0]} outside [0, 1] for question {bad['question_id'][0]!r}"
        )


# ---------------------------------------------------------------------------------------
# ratio measures (accuracy, failed_rate, ...) per grouping


def _cell_moments_of(per_cluster: pl.DataFrame, keys: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
    """``_cell_moments`` for several numerator columns in one pass: ``p:<col>``, ``variance:<col>``."""
    sums = []
    for c in columns:
        sums += [
            pl.col(c).sum().alias(f"num_sum:{c}"),
            (pl.col(c) * pl.col(c)).sum().alias(f"num2:{c}"),
            (pl.col(c) * pl.col("den")).sum().alias(f"numden:{c}"),
        ]
    cells = per_cluster.group_by(list(keys)).agg(
        *sums,
        pl.col("den").sum().alias("den_sum"),
        (pl.col("den") * pl.col("den")).sum().alias("den2"),
        pl.len().alias("clusters"),
    )
    derived = []
    clusters = pl.col("clusters").cast(pl.Float64)
    for c in columns:
        p = pl.col(f"num_sum:{c}") / pl.col("den_sum")
        residual = pl.col(f"num2:{c}") - 2.0 * p * pl.col(f"numden:{c}") + p * p * pl.col("den2")
        derived += [
            p.alias(f"p:{c}"),
            pl.when(pl.col("clusters") > 1)
            .then(pl.max_horizontal(residual, pl.lit(0.0)) * clusters / (clusters - 1.0) / (pl.col("den_sum") ** 2))
            .otherwise(None)
            .alias(f"variance:{c}"),
        ]
    return cells.with_columns(*derived, pl.col("den_sum").alias("n_questions"))


def _cell_moments(per_cluster: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per cell: p, its cluster-robust variance, n (questions) and C (clusters)."""
    cells = per_cluster.group_by(list(keys)).agg(
        pl.col("num").sum().alias("num_sum"),
        pl.col("den").sum().alias("den_sum"),
        (pl.col("num") * pl.col("num")).sum().alias("num2"),
        (pl.col("num") * pl.col("den")).sum().alias("numden"),
        (pl.col("den") * pl.col("den")).sum().alias("den2"),
        pl.len().alias("clusters"),
    )
    p = pl.col("num_sum") / pl.col("den_sum")
    residual = pl.col("num2") - 2.0 * p * pl.col("numden") + p * p * pl.col("den2")
    clusters = pl.col("clusters").cast(pl.Float64)
    return cells.with_columns(
        p.alias("p"),
        pl.when(pl.col("clusters") > 1)
        .then(pl.max_horizontal(residual, pl.lit(0.0)) * clusters / (clusters - 1.0) / (pl.col("den_sum") ** 2))
        .otherwise(None)
        .alias("variance"),
        pl.col("den_sum").alias("n_questions"),
    )


@dataclass(frozen=True)
class Measure:
    """A per-question mean reported as a metric: ``column`` is 0/1 (or 1/k), ``interval`` whether it gets one."""

    metric: str
    column: str
    interval: bool = True
    scale: float = 1.0  # the column holds the per-question value times this


def ratio_rows(
    frame: pl.DataFrame,
    *,
    measures: Sequence[Measure],
    groupings: Sequence[str],
    bootstrap: int,
    seed: int,
    with_micro: bool = True,
    with_macro: bool = True,
) -> pl.DataFrame:
    """Rows of per-question means (accuracy, failed_rate, ...) in percent, one pass per grouping.

    ``frame`` is a prepared scored frame (``cluster``, ``subject`` and the grouping columns).
    Groupings are column names; ``group_by`` in the output is the column name without a
    ``_key`` suffix. Every measure gets subject/macro/micro rows and the groupings' rows.
    """
    parts: list[pl.DataFrame] = []
    subject_cells: dict[str, pl.DataFrame] = {}
    subject_replicates: dict[str, BootstrapResult] = {}
    passes: list[tuple[str | None, bool]] = [(g, True) for g in groupings]
    if with_micro:
        passes.append((None, True))
    if with_macro and "subject" not in groupings:
        passes.append(("subject", False))
    columns = sorted({m.column for m in measures})
    for column, emit in passes:
        group_name = "micro" if column is None else column.removesuffix("_key")
        key_expr = pl.lit(ALL).cast(pl.Categorical) if column is None else pl.col(column)
        per_cluster = (
            frame.select("model", "split", key_expr.alias("group_value"), "cluster", *columns)
            .group_by(["model", "split", "group_value", "cluster"])
            .agg(pl.col(columns).sum(), pl.len().cast(pl.Float64).alias("den"))
        )
        all_moments = _cell_moments_of(per_cluster, ["model", "split", "group_value"], columns).with_columns(
            pl.col("model", "split", "group_value").cast(pl.String)
        )
        for measure in measures:
            clusters = per_cluster.select("model", "split", "group_value", "cluster", pl.col(measure.column).alias("num"), "den")
            cells = all_moments.select(
                "model",
                "split",
                "group_value",
                (pl.col(f"p:{measure.column}") / measure.scale).alias("p"),
                pl.col(f"variance:{measure.column}").alias("variance"),
                "n_questions",
                "clusters",
            )
            if measure.interval and bootstrap > 0:
                keep = with_macro and column == "subject"
                result = bootstrap_ratio(
                    clusters.with_columns(pl.col("model", "split", "group_value").cast(pl.String), pl.lit(group_name).alias("group_by")),
                    ["model", "split", "group_by", "group_value"],
                    ["model", "split", "group_by"],
                    bootstrap=bootstrap,
                    seed=seed,
                    keep_replicates=keep,
                )
                if keep:
                    subject_replicates[measure.metric] = result
                cells = cells.join(result.cells.drop("group_by"), on=["model", "split", "group_value"], how="left")
                # a cell whose resamples cannot vary (all right, all wrong, one cluster) keeps Wilson's width
                low, high = wilson_interval(pl.col("p"), pl.col("variance"), pl.col("n_questions"), pl.col("clusters"))
                degenerate = pl.col("ci_low").is_null() | (pl.col("ci_low") >= pl.col("ci_high"))
                cells = cells.with_columns(
                    degenerate.alias("degenerate"),
                    pl.when(degenerate).then(low).otherwise(pl.col("ci_low")).alias("ci_low"),
                    pl.when(degenerate).then(high).otherwise(pl.col("ci_high")).alias("ci_high"),
                )
            elif measure.interval:
                low, high = wilson_interval(pl.col("p"), pl.col("variance"), pl.col("n_questions"), pl.col("clusters"))
                cells = cells.with_columns(low.alias("ci_low"), high.alias("ci_high"))
            else:
                cells = cells.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64))
            cells = cells.with_columns(
                (pl.col("p") * PERCENT).alias("value"),
                pl.col("n_questions").cast(pl.Int64).alias("n"),
                pl.col("ci_low") * PERCENT,
                pl.col("ci_high") * PERCENT,
            )
            if column == "subject":
                subject_cells[measure.metric] = cells
            if emit:
                parts.append(_as_metric_rows(cells, measure.metric, group_name))
    if with_macro:
        for measure in measures:
            if measure.metric in subject_cells:
                parts.append(
                    _macro_rows(
                        subject_cells[measure.metric],
                        subject_replicates.get(measure.metric),
                        measure.metric,
                        with_interval=measure.interval,
                    )
                )
    return _concat_metric_rows(parts)


# ---------------------------------------------------------------------------------------
# the measures (declared with ``register_metric``, in metric_rows)


@register_metric(metric="accuracy", higher_is_better=True)
def accuracy(frame: pl.DataFrame) -> PerQuestion:
    return "is_correct"


@register_metric(metric="failed_rate", higher_is_better=False)
def failed_rate(frame: pl.DataFrame) -> PerQuestion:
    return "is_failed"


@register_metric(metric="random_expected", higher_is_better=None, interval=False, scale_column="inverse_k_scale")
def random_expected(frame: pl.DataFrame) -> PerQuestion:
    return "inverse_k"


@register_metric(metric="ece", higher_is_better=False, aggregation="rows")
def ece(inputs: MeasureInputs) -> pl.DataFrame | None:
    return ece_rows(inputs.frame) if inputs.frame.height else None


HUMAN_SAMPLE_SIZE = 20


def human_sample_accuracy(frame: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """Table 8's accuracy columns for our models: per (split, subject), a seeded sample of
    ``HUMAN_SAMPLE_SIZE`` questions (the paper's humans answered 20 per subject), each scored by
    the model's accuracy on the question's skill, averaged (as the paper scored its models).

    ``frame`` is a prepared scored frame. The sample depends only on (seed, split, subject) and
    the split's questions; a model is scored on the sampled questions whose skill it answered.
    """
    questions = frame.select(
        pl.col("split").cast(pl.String), pl.col("subject").cast(pl.String), pl.col("skill_key").cast(pl.String), "question_id"
    ).unique().sort(["split", "subject", "question_id"])
    samples = []
    for (split, subject), group in questions.group_by(["split", "subject"], maintain_order=True):
        rng = np.random.default_rng(stream_seed(seed, "human-sample", split, subject))
        size = min(HUMAN_SAMPLE_SIZE, group.height)
        samples.append(group[sorted(rng.choice(group.height, size=size, replace=False).tolist())])
    if not samples:
        return empty_metrics()
    sample = pl.concat(samples).select("split", "subject", "skill_key")
    skill_accuracy = frame.group_by(
        pl.col("model").cast(pl.String), pl.col("split").cast(pl.String), pl.col("skill_key").cast(pl.String)
    ).agg(pl.col("is_correct").mean().alias("skill_accuracy"))
    rows = (
        sample.join(skill_accuracy, on=["split", "skill_key"], how="inner")
        .sort(["model", "split", "subject", "skill_key"])
        .group_by(["model", "split", "subject"], maintain_order=True)
        .agg((pl.col("skill_accuracy").mean() * PERCENT).alias("value"), pl.len().cast(pl.Int64).alias("n"))
    )
    return rows.select(
        "model",
        "split",
        pl.lit(HUMAN_SAMPLE_METRIC).alias("metric"),
        pl.lit("subject").alias("group_by"),
        pl.col("subject").alias("group_value"),
        "value",
        "n",
        pl.lit(None, pl.Float64).alias("ci_low"),
        pl.lit(None, pl.Float64).alias("ci_high"),
    )


@register_metric(metric=HUMAN_SAMPLE_METRIC, higher_is_better=True, aggregation="rows")
def accuracy_human_sample(inputs: MeasureInputs) -> pl.DataFrame | None:
    return human_sample_accuracy(inputs.frame, seed=inputs.seed) if inputs.frame.height else None


@register_metric(metric="circular_accuracy", higher_is_better=True, aggregation="rows")
def circular(inputs: MeasureInputs) -> pl.DataFrame | None:
    if inputs.circular is None:
        return None
    return circular_accuracy(inputs.circular, bootstrap=inputs.bootstrap, seed=inputs.seed)


GROUPINGS = ("subject", "grade_key", "skill_key", "num_choices_key", "length_bucket", "question_type")


def _mean_rows(frame: pl.DataFrame, means: list[RegisteredMeasure], bootstrap: int, seed: int) -> pl.DataFrame:
    columns: dict[str, pl.Expr] = {}
    plain: list[Measure] = []
    for measure in means:
        value = measure.compute(frame)
        if isinstance(value, pl.Expr):
            column = f"measure:{measure.metric}"
            columns[column] = value.cast(pl.Float64)
        else:
            column = value
        scale = float(frame[measure.scale_column][0]) if measure.scale_column else 1.0
        plain.append(Measure(measure.metric, column, interval=measure.interval, scale=scale))
    if columns:
        frame = frame.with_columns(**columns)
    return ratio_rows(frame, measures=plain, groupings=GROUPINGS, bootstrap=bootstrap, seed=seed)


def compute_metrics(
    scored: pl.DataFrame,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    circular: pl.DataFrame | None = None,
    smartscore: Any = None,
) -> pl.DataFrame:
    """Every registered measure (``register_metric``) for each (model, split) in ``scored``.

    ``bootstrap``: 0 (default) gives cluster-robust CLT intervals in Wilson form; B > 0 an
    exact clustered bootstrap with B replicates (see the module docstring). ``circular`` is
    an optional per-rotation frame for ``circular_accuracy``; ``smartscore`` the rules of
    ``exam_score`` (default: ``SmartScoreRules()``).
    """
    frame = prepare_scored(scored)
    registered = measures().values()
    parts: list[pl.DataFrame] = []
    if frame.height:
        means = [m for m in registered if m.aggregation == "mean"]
        if means:
            parts.append(_mean_rows(frame, means, bootstrap, seed))
    inputs = MeasureInputs(scored, frame, bootstrap, seed, circular, smartscore)
    for measure in registered:
        if measure.aggregation == "rows":
            rows = measure.compute(inputs)
            if rows is not None:
                parts.append(rows)
    return sort_metrics(_concat_metric_rows(parts))


def reliability_table(scored: pl.DataFrame, bins: int = ECE_BINS, *, by: Sequence[str] = ()) -> pl.DataFrame:
    """Reliability diagram data per (model, split[, by...], bin), over rows with a confidence.

    Bin ``i`` holds confidences in ``[i/bins, (i+1)/bins)`` (the last bin includes 1.0).
    Columns: model, split, *by, bin, bin_low, bin_high, n, confidence (mean, fraction),
    accuracy (fraction). Empty bins are omitted.
    """
    if bins < 1:
        raise MetricsInputError(f"bins must be >= 1, got {bins}")
    if "is_correct" in scored.columns:
        frame = scored
    else:
        _check_columns(scored, ("model", "split", "confidence", "correct", *by), "scored predictions")
        frame = scored.with_columns(pl.col("confidence").cast(pl.Float64), pl.col("correct").cast(pl.Float64).alias("is_correct"))
        bad = frame.filter(pl.col("confidence").is_not_null() & ~pl.col("confidence").is_between(0.0, 1.0))
        if bad.height:
            raise MetricsInputError(f"confidence {bad['confidence'][0]} outside [0, 1]")
    keys = ["model", "split", *by]
    return (
        frame.filter(pl.col("confidence").is_not_null())
        .with_columns(
            pl.min_horizontal((pl.col("confidence") * bins).floor().cast(pl.Int64), pl.lit(bins - 1)).alias("bin")
        )
        .group_by([*keys, "bin"])
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            # fixed point (2^-32): an exact integer sum, whatever the row order
            ((pl.col("confidence") * _FIXED_POINT).round().cast(pl.Int64).sum() / pl.len() / _FIXED_POINT).alias("confidence"),
            pl.col("is_correct").mean().alias("accuracy"),
        )
        .with_columns(
            (pl.col("bin") / bins).alias("bin_low"),
            ((pl.col("bin") + 1) / bins).alias("bin_high"),
        )
        .select(*(pl.col(k).cast(pl.String) for k in keys), "bin", "bin_low", "bin_high", "n", "confidence", "accuracy")
        .sort([*keys, "bin"])
    )


def expected_calibration_error(reliability: pl.DataFrame, by: Sequence[str] = ("model", "split")) -> pl.DataFrame:
    """ECE in percent per ``by`` from a reliability table: sum_b n_b/N |acc_b - conf_b|."""
    return (
        reliability.group_by(list(by))
        .agg(
            ((pl.col("n") * (pl.col("accuracy") - pl.col("confidence")).abs()).sum() / pl.col("n").sum() * PERCENT).alias("value"),
            pl.col("n").sum().alias("n"),
        )
        .sort(list(by))
    )


def ece_rows(frame: pl.DataFrame, bins: int = ECE_BINS) -> pl.DataFrame:
    parts = []
    micro = expected_calibration_error(reliability_table(frame, bins))
    parts.append(micro.with_columns(pl.lit(ALL).alias("group_value"), pl.lit("micro").alias("group_by")))
    subject = expected_calibration_error(
        reliability_table(frame, bins, by=("subject",)), by=("model", "split", "subject")
    )
    parts.append(subject.rename({"subject": "group_value"}).with_columns(pl.lit("subject").alias("group_by")))
    out = []
    for part in parts:
        if part.height:
            out.append(
                part.select(
                    "model",
                    "split",
                    pl.lit("ece").alias("metric"),
                    "group_by",
                    "group_value",
                    "value",
                    "n",
                    pl.lit(None, pl.Float64).alias("ci_low"),
                    pl.lit(None, pl.Float64).alias("ci_high"),
                )
            )
    return _concat_metric_rows(out)


def circular_accuracy(rotations: pl.DataFrame, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> pl.DataFrame:
    """Circular evaluation: a question counts only if every rotation of its options is right.

    ``rotations``: model, split, subject, question_id, rotation, correct, and optionally
    cluster and num_choices (when present, each question must have exactly num_choices
    distinct rotations). Returns metric='circular_accuracy' rows for subject, macro, micro.
    """
    required = ("model", "split", "subject", "question_id", "rotation", "correct")
    _check_columns(rotations, required, "circular rotations")
    _check_non_null(rotations, required, "circular rotations")
    if rotations.height == 0:
        return empty_metrics()
    dup = _first_duplicate(rotations, ("model", "split", "question_id", "rotation"))
    if dup is not None:
        raise MetricsInputError(f"duplicate rotation {dup[3]!r} for model {dup[0]!r}, question {dup[2]!r}")
    aggregations = [
        pl.col("correct").cast(pl.Boolean).all().alias("all_correct"),
        pl.len().alias("rotations"),
        pl.col("subject").first(),
    ]
    if "cluster" in rotations.columns:
        aggregations.append(pl.col("cluster").first())
    if "num_choices" in rotations.columns:
        aggregations.append(pl.col("num_choices").first())
    per_question = rotations.group_by(["model", "split", "question_id"]).agg(aggregations)
    if "num_choices" in per_question.columns:
        bad = per_question.filter(pl.col("rotations") != pl.col("num_choices")).sort(["model", "question_id"])
        if bad.height:
            row = bad.row(0, named=True)
            raise MetricsInputError(
                f"question {row['question_id']!r} of model {row['model']!r} has {row['rotations']} rotation(s), "
                f"expected {row['num_choices']}"
            )
    cluster = pl.col("cluster").cast(pl.String) if "cluster" in per_question.columns else pl.lit(None, pl.String)
    per_question = per_question.with_columns(
        pl.coalesce(cluster, pl.col("question_id")).alias("cluster"),
        pl.col("all_correct").cast(pl.Float64).alias("is_correct"),
    )
    rows = ratio_rows(
        per_question,
        measures=(Measure("circular_accuracy", "is_correct"),),
        groupings=("subject",),
        bootstrap=bootstrap,
        seed=seed,
    )
    return sort_metrics(rows)


def paired_comparison(
    scored: pl.DataFrame,
    model_a: str,
    model_b: str,
    split: str,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> dict[str, object]:
    """Accuracy of ``model_a`` minus ``model_b`` (percentage points) on their common questions.

    The interval (95%) uses per-cluster sums of the per-question difference: the
    cluster-robust CLT (normal) by default, or a paired clustered bootstrap when
    ``bootstrap > 0``. Also the McNemar counts and its exact two-sided p-value.
    """
    _check_columns(scored, ("model", "question_id", "split", "correct"), "scored predictions")
    has_cluster = "cluster" in scored.columns
    base = scored.filter(pl.col("split") == split).select(
        "model",
        pl.col("question_id").cast(pl.String),
        pl.col("correct").cast(pl.Boolean),
        (pl.col("cluster").cast(pl.String) if has_cluster else pl.lit(None, pl.String)).alias("cluster"),
    )
    known = set(base["model"].unique().to_list())
    for name in (model_a, model_b):
        if name not in known:
            raise MetricsInputError(f"model {name!r} has no predictions on split {split!r}")
    a = base.filter(pl.col("model") == model_a).drop("model")
    b = base.filter(pl.col("model") == model_b).drop("model").select("question_id", pl.col("correct").alias("correct_b"))
    for name, part in ((model_a, a), (model_b, b)):
        if part["question_id"].n_unique() != part.height:
            raise MetricsInputError(f"model {name!r} has duplicate predictions on split {split!r}")
    joined = a.join(b, on="question_id", how="inner").with_columns(
        pl.coalesce("cluster", "question_id").alias("cluster")
    )
    if joined.height == 0:
        raise MetricsInputError(f"models {model_a!r} and {model_b!r} share no questions on split {split!r}")
    ca = joined["correct"].to_numpy().astype(np.int64)
    cb = joined["correct_b"].to_numpy().astype(np.int64)
    n = len(ca)
    both_correct = int(np.sum((ca == 1) & (cb == 1)))
    a_only = int(np.sum((ca == 1) & (cb == 0)))
    b_only = int(np.sum((ca == 0) & (cb == 1)))
    both_wrong = n - both_correct - a_only - b_only
    difference = (ca.sum() - cb.sum()) / n * PERCENT
    per_cluster = (
        joined.with_columns(
            (pl.col("correct").cast(pl.Float64) - pl.col("correct_b").cast(pl.Float64)).alias("num"),
            pl.lit("paired").alias("cell"),
        )
        .group_by(["cell", "cluster"])
        .agg(pl.col("num").sum(), pl.len().cast(pl.Float64).alias("den"))
    )
    moments = _cell_moments(per_cluster, ["cell"]).row(0, named=True)
    exact_low, exact_high = mcnemar_difference_interval(a_only, b_only, n)
    replicates = None
    if bootstrap > 0:
        result = bootstrap_ratio(
            per_cluster, ["cell"], [], bootstrap=bootstrap, seed=stream_seed(seed, "paired", model_a, model_b, split),
            keep_replicates=True,
        )
        ci_low = float(result.cells["ci_low"][0]) * PERCENT
        ci_high = float(result.cells["ci_high"][0]) * PERCENT
        replicates = result.replicates[0] * PERCENT
        if not ci_low < ci_high:  # resamples that cannot vary (no discordant pair)
            ci_low, ci_high = exact_low, exact_high
            replicates = None
    else:
        # the wider of the cluster-robust normal interval and the exact one: never narrower than
        # the data allow, and excluding 0 only where McNemar's exact test rejects
        ci_low, ci_high = exact_low, exact_high
        if moments["variance"] is not None:
            half = Z_95 * math.sqrt(moments["variance"])
            ci_low = min(ci_low, max(-1.0, moments["p"] - half) * PERCENT)
            ci_high = max(ci_high, min(1.0, moments["p"] + half) * PERCENT)
    se = (ci_high - ci_low) / (2.0 * Z_95)
    return {
        "model_a": model_a,
        "model_b": model_b,
        "split": split,
        "n": n,
        "accuracy_a": float(ca.sum() / n * PERCENT),
        "accuracy_b": float(cb.sum() / n * PERCENT),
        "difference": float(difference),
        "ci_low": ci_low,
        "ci_high": ci_high,
        "se": se,
        "both_correct": both_correct,
        "a_only": a_only,
        "b_only": b_only,
        "both_wrong": both_wrong,
        "mcnemar_p": mcnemar_exact_p(a_only, b_only),
        "significant": not (ci_low <= 0.0 <= ci_high),
        "replicates": replicates,
    }


def compare_models(
    scored: pl.DataFrame,
    model_a: str,
    model_b: str,
    split: str,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> dict[str, object]:
    """``model_a`` minus ``model_b``: per subject and micro (``paired_comparison`` each), and the
    macro difference (the mean of the subject differences, the headline's definition): its 95%
    interval combines the subjects' intervals (MOVER, subjects as independent strata) or, with
    ``bootstrap``, is a stratified paired bootstrap; ``mcnemar_p`` is the stratified exact test
    (``stratified_mcnemar_p``); ``significant`` needs both to reject.
    """
    _check_columns(scored, ("model", "question_id", "split", "subject", "correct"), "scored predictions")
    mine = scored.filter(pl.col("split") == split)
    micro = paired_comparison(mine, model_a, model_b, split, bootstrap=bootstrap, seed=seed)
    common = (
        mine.filter(pl.col("model") == model_a).select("question_id")
        .join(mine.filter(pl.col("model") == model_b).select("question_id"), on="question_id", how="semi")
    )
    subjects = sorted(mine.join(common, on="question_id", how="semi")["subject"].unique().to_list())
    per_subject = {
        subject: paired_comparison(
            mine.filter(pl.col("subject") == subject), model_a, model_b, split, bootstrap=bootstrap, seed=seed
        )
        for subject in subjects
    }
    differences = [r["difference"] for r in per_subject.values()]
    macro_difference = float(np.mean(differences))
    replicates = [r["replicates"] for r in per_subject.values()]
    if bootstrap > 0 and all(r is not None for r in replicates):
        # subjects are independent strata: each replicate is the mean of the subjects' replicates
        macro_low, macro_high = (float(v) for v in np.percentile(np.mean(replicates, axis=0), [2.5, 97.5]))
        interval = "stratified paired bootstrap"
    else:
        macro_low, macro_high = mover_interval(
            macro_difference, [r["ci_low"] for r in per_subject.values()], [r["ci_high"] for r in per_subject.values()], differences
        )
        interval = "MOVER over the subjects' intervals"
    macro_low = max(-PERCENT, macro_low)
    macro_high = min(PERCENT, macro_high)
    for result in (micro, *per_subject.values()):
        result.pop("replicates", None)
    macro_p = stratified_mcnemar_p(
        [(r["a_only"], r["b_only"], r["n"]) for r in per_subject.values()], seed=stream_seed(seed, "macro-sign-flip", model_a, model_b, split)
    )
    macro = {
        "difference": macro_difference,
        "ci_low": macro_low,
        "ci_high": macro_high,
        "subjects": len(subjects),
        "mcnemar_p": macro_p,
        # significant only where the interval and the stratified exact test agree: neither a
        # few discordant questions of a small subject nor a normal-style combination decides alone
        "significant": macro_p < 1.0 - CONFIDENCE_LEVEL and not (macro_low <= 0.0 <= macro_high),
        "interval": interval,
        "accuracy_a": float(np.mean([r["accuracy_a"] for r in per_subject.values()])),
        "accuracy_b": float(np.mean([r["accuracy_b"] for r in per_subject.values()])),
    }
    return {"model_a": model_a, "model_b": model_b, "split": split, "macro": macro, "micro": micro, "subjects": per_subject}


def _clopper_pearson(successes: int, trials: int) -> tuple[float, float]:
    """Exact 95% interval of a binomial proportion (fractions), by bisection on the binomial tails."""
    tail = (1.0 - CONFIDENCE_LEVEL) / 2.0
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, trials + 1, dtype=np.float64)))])

    def cdf(k: int, p: float) -> float:  # P(X <= k), X ~ Bin(trials, p), 0 < p < 1
        if k < 0:
            return 0.0
        i = np.arange(k + 1)
        log_terms = log_factorial[trials] - log_factorial[i] - log_factorial[trials - i] + i * math.log(p) + (trials - i) * math.log1p(-p)
        top = log_terms.max()
        return min(1.0, math.exp(top) * float(np.sum(np.exp(log_terms - top))))

    def solve(too_low: Callable[[float], bool]) -> float:
        low, high = 0.0, 1.0
        for _ in range(60):
            middle = (low + high) / 2.0
            low, high = (middle, high) if too_low(middle) else (low, middle)
        return (low + high) / 2.0

    lower = 0.0 if successes == 0 else solve(lambda p: 1.0 - cdf(successes - 1, p) < tail)
    upper = 1.0 if successes == trials else solve(lambda p: cdf(successes, p) > tail)
    return lower, upper


def mcnemar_difference_interval(a_only: int, b_only: int, n: int) -> tuple[float, float]:
    """95% interval (percentage points) of a paired accuracy difference, consistent with the
    exact McNemar test.

    The difference is q (2 pi - 1), with q the share of discordant questions and pi the share of
    them that ``a`` alone gets right. Exact (Clopper-Pearson) intervals of q and pi bound it:
    it excludes 0 exactly when pi's interval excludes 1/2, which is when the exact two-sided
    McNemar p-value is below 0.05; with no discordant pair, q's upper bound keeps it open.
    """
    discordant = a_only + b_only
    q_low, q_high = _clopper_pearson(discordant, n)
    if discordant == 0:
        pi_low, pi_high = 0.0, 1.0
    else:
        pi_low, pi_high = _clopper_pearson(a_only, discordant)
    lower = min(q_low * (2 * pi_low - 1), q_high * (2 * pi_low - 1))
    upper = max(q_low * (2 * pi_high - 1), q_high * (2 * pi_high - 1))
    return lower * PERCENT, upper * PERCENT


SIGN_FLIP_DRAWS = 200_000


def stratified_mcnemar_p(subjects: Sequence[tuple[int, int, int]], *, seed: int, draws: int = SIGN_FLIP_DRAWS) -> float:
    """Two-sided p-value of the macro difference (mean over subjects of (a_only - b_only) / n)
    under McNemar's null in every subject: given each subject's discordant count, which model
    is right on a discordant question is a fair coin. With one subject it is McNemar's exact
    test; with several, a few discordant questions of a small subject count for what they are.
    Exact when the null has at most ``draws`` outcomes, else ``draws`` seeded Monte Carlo draws."""
    observed = sum((a - b) / n for a, b, n in subjects) / len(subjects)
    discordant = [a + b for a, b, _ in subjects]
    tolerance = 1e-9
    if math.prod(d + 1 for d in discordant) <= draws:
        # exact: every combination of per-subject counts, with its binomial probability
        statistic = np.zeros(1)
        weight = np.ones(1)
        for (_, _, n), d in zip(subjects, discordant):
            k = np.arange(d + 1)
            log_choose = np.array([math.lgamma(d + 1) - math.lgamma(i + 1) - math.lgamma(d - i + 1) for i in k])
            probability = np.exp(log_choose - d * math.log(2.0))
            statistic = (statistic[:, None] + ((2 * k - d) / n / len(subjects))[None, :]).ravel()
            weight = (weight[:, None] * probability[None, :]).ravel()
        return float(min(1.0, weight[np.abs(statistic) >= abs(observed) - tolerance].sum()))
    rng = np.random.default_rng(seed)
    statistic = np.zeros(draws)
    for (_, _, n), d in zip(subjects, discordant):
        statistic += (2 * rng.binomial(d, 0.5, size=draws) - d) / n / len(subjects)
    return float(np.mean(np.abs(statistic) >= abs(observed) - tolerance))


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """Exact two-sided McNemar p-value: binomial test of min(b, c) in Bin(b + c, 1/2)."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    k = min(a_only, b_only)
    i = np.arange(k + 1, dtype=np.float64)
    # log C(n, i) via cumulative sums of log((n - i + 1) / i)
    steps = np.zeros(k + 1)
    if k > 0:
        steps[1:] = np.log(discordant - i[1:] + 1.0) - np.log(i[1:])
    log_terms = np.cumsum(steps) - discordant * math.log(2.0)
    top = log_terms.max()
    tail = math.exp(top) * float(np.sum(np.exp(log_terms - top)))
    return min(1.0, 2.0 * tail)
