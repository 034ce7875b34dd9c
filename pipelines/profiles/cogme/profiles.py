"""Dataset and model CogME profiles, shaped like the ``profiles`` view.

Columns: ``profile_of`` ('dataset' or a model name), ``component``, ``sub_component``,
``measure``, ``scope``, ``value`` (percent), ``n`` and ``total``.

- Dataset (paper Fig. 4): ``measure='frequency'``; ``n`` questions in the scope are tagged
  with the sub-component, ``total`` questions are in the scope, ``value = 100 n / total``.
- Models (paper Fig. 3): ``measure='weighted_achievement'``: the sum of THINKING weights of
  the correctly answered questions tagged with the sub-component over the sum of the weights
  of all scored questions tagged with it, in percent (a Reasoning question counts 3 on each
  of its tags); ``measure='accuracy'``: the unweighted share correct. ``n`` is the number of
  scored questions tagged with it, ``total`` the scored questions in the scope. One extra
  component ``OVERALL`` (sub-component ``all``) carries the whole-scope figures.
  A missing prediction (``correct`` null) counts as wrong.

Scopes: ``all``, ``subject=<s>`` (when a subject is known) and ``split=<s>`` (when a split is
known). When the tags hold several sources for a question, manual tags win over automatic ones.
"""

from __future__ import annotations

import math

import polars as pl

from pipelines.profiles.cogme.taxonomy import COMPONENTS, Taxonomy, load_taxonomy

PROFILE_SCHEMA = {
    "profile_of": pl.String,
    "component": pl.String,
    "sub_component": pl.String,
    "measure": pl.String,
    "scope": pl.String,
    "value": pl.Float64,
    "n": pl.Int64,
    "total": pl.Int64,
}

RELATION_SCHEMA = {
    "model": pl.String,
    "measure": pl.String,
    "scope": pl.String,
    "n_sub_components": pl.Int64,
    "spearman": pl.Float64,
    "pearson": pl.Float64,
    "low_frequency_threshold": pl.Float64,
    "low_frequency_sub_components": pl.String,
    "low_frequency_mean": pl.Float64,
    "other_mean": pl.Float64,
}


class ProfileError(ValueError):
    """Profiles cannot be computed from the given frames (one-line message)."""


def preferred_tags(tags: pl.DataFrame) -> pl.DataFrame:
    """One tag set per question: manual sources first, then automatic, then anything else."""
    if tags.height == 0:
        return tags
    rank = (
        pl.when(pl.col("source").str.starts_with("manual:"))
        .then(0)
        .when(pl.col("source").str.starts_with("auto:"))
        .then(1)
        .otherwise(2)
    )
    best = (
        tags.select("question_id", "source", rank.alias("_rank"))
        .unique()
        .sort("question_id", "_rank", "source")
        .group_by("question_id", maintain_order=True)
        .first()
        .select("question_id", pl.col("source").alias("_src"))
    )
    return tags.join(best, on="question_id").filter(pl.col("source") == pl.col("_src")).drop("_src")


def _require(frame: pl.DataFrame, name: str, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ProfileError(f"{name} lacks column(s) {', '.join(missing)}")


def _scopes(frame: pl.DataFrame) -> list[tuple[str, pl.Expr]]:
    scopes: list[tuple[str, pl.Expr]] = [("all", pl.lit(True))]
    for column in ("subject", "split"):
        if column in frame.columns:
            for value in sorted(v for v in frame[column].unique().to_list() if v is not None):
                scopes.append((f"{column}={value}", pl.col(column) == value))
    return scopes


def _sub_component_grid(taxonomy: Taxonomy) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "component": [c for c in COMPONENTS for _ in taxonomy.sub_components(c)],
            "sub_component": [s for c in COMPONENTS for s in taxonomy.sub_components(c)],
            "_order": list(range(sum(len(taxonomy.sub_components(c)) for c in COMPONENTS))),
        }
    )


def dataset_profile(
    questions: pl.DataFrame, tags: pl.DataFrame, taxonomy: Taxonomy | None = None
) -> pl.DataFrame:
    """How often each sub-component is tagged, overall and per subject and split (Fig. 4)."""
    taxonomy = taxonomy or load_taxonomy("stem")
    _require(questions, "questions", ("question_id",))
    _require(tags, "tags", ("question_id", "component", "sub_component", "source"))
    tags = preferred_tags(tags).select("question_id", "component", "sub_component")
    context_columns = [c for c in ("subject", "split") if c in questions.columns]
    qs = questions.select("question_id", *context_columns).unique("question_id", keep="first")
    grid = _sub_component_grid(taxonomy)
    frames = []
    for scope, condition in _scopes(qs):
        in_scope = qs.filter(condition)
        total = in_scope.height
        counts = (
            tags.join(in_scope.select("question_id"), on="question_id", how="semi")
            .group_by("component", "sub_component")
            .agg(pl.col("question_id").n_unique().alias("n"))
        )
        frames.append(
            grid.join(counts, on=["component", "sub_component"], how="left")
            .with_columns(
                pl.col("n").fill_null(0).cast(pl.Int64),
                pl.lit(total, dtype=pl.Int64).alias("total"),
                pl.lit(scope).alias("scope"),
            )
            .with_columns(
                (pl.when(pl.col("total") > 0).then(100.0 * pl.col("n") / pl.col("total")).otherwise(None)).alias(
                    "value"
                )
            )
            .with_columns(pl.lit(len(frames)).alias("_scope_order"))
        )
    out = pl.concat(frames).sort("_scope_order", "_order")
    return out.with_columns(
        pl.lit("dataset").alias("profile_of"), pl.lit("frequency").alias("measure")
    ).select([pl.col(c).cast(t) for c, t in PROFILE_SCHEMA.items()])


def model_profiles(scored: pl.DataFrame, tags: pl.DataFrame, taxonomy: Taxonomy | None = None) -> pl.DataFrame:
    """Weighted achievement rate and unweighted accuracy per sub-component and model (Fig. 3)."""
    taxonomy = taxonomy or load_taxonomy("stem")
    _require(scored, "scored", ("model", "question_id", "correct"))
    _require(tags, "tags", ("question_id", "component", "sub_component", "source", "weight"))
    if scored.select(pl.struct("model", "question_id").is_duplicated().any()).item():
        raise ProfileError("scored has several rows for one (model, question_id)")
    tags = preferred_tags(tags).select("question_id", "component", "sub_component", "weight")
    weights = tags.group_by("question_id").agg(pl.col("weight").first())
    context_columns = [c for c in ("subject", "split") if c in scored.columns]
    base = scored.select(
        "model", "question_id", *context_columns, pl.col("correct").cast(pl.Boolean).fill_null(False).cast(pl.Int64)
    )
    grid = _sub_component_grid(taxonomy)
    frames = []
    for model in sorted(base["model"].unique().to_list()):
        rows = base.filter(pl.col("model") == model)
        for scope, condition in _scopes(rows):
            in_scope = rows.filter(condition)
            tagged = in_scope.join(tags, on="question_id", how="inner")
            per_sub = tagged.group_by("component", "sub_component").agg(
                pl.len().alias("n"),
                pl.col("correct").sum().alias("n_correct"),
                (pl.col("weight") * pl.col("correct")).sum().alias("w_correct"),
                pl.col("weight").sum().alias("w_total"),
            )
            overall_w = in_scope.join(weights, on="question_id", how="inner")
            overall = pl.DataFrame(
                {
                    "component": ["OVERALL"],
                    "sub_component": ["all"],
                    "_order": [-1],
                    "n": [in_scope.height],
                    "n_correct": [int(in_scope["correct"].sum())],
                    "w_correct": [int((overall_w["weight"] * overall_w["correct"]).sum())],
                    "w_total": [int(overall_w["weight"].sum())],
                },
                schema={
                    "component": pl.String, "sub_component": pl.String, "_order": pl.Int64, "n": pl.Int64,
                    "n_correct": pl.Int64, "w_correct": pl.Int64, "w_total": pl.Int64,
                },
            )
            joined = grid.join(per_sub, on=["component", "sub_component"], how="left").select(
                "component", "sub_component", pl.col("_order").cast(pl.Int64),
                *[pl.col(c).fill_null(0).cast(pl.Int64) for c in ("n", "n_correct", "w_correct", "w_total")],
            )
            both = pl.concat([overall, joined]).with_columns(
                pl.lit(model).alias("profile_of"),
                pl.lit(scope).alias("scope"),
                pl.lit(in_scope.height, dtype=pl.Int64).alias("total"),
                pl.lit(len(frames)).alias("_scope_order"),
            )
            weighted = both.with_columns(
                pl.lit("weighted_achievement").alias("measure"),
                pl.when(pl.col("w_total") > 0).then(100.0 * pl.col("w_correct") / pl.col("w_total")).alias("value"),
                pl.lit(0).alias("_measure_order"),
            )
            accuracy = both.with_columns(
                pl.lit("accuracy").alias("measure"),
                pl.when(pl.col("n") > 0).then(100.0 * pl.col("n_correct") / pl.col("n")).alias("value"),
                pl.lit(1).alias("_measure_order"),
            )
            frames.append(pl.concat([weighted, accuracy]))
    if not frames:
        return pl.DataFrame(schema=PROFILE_SCHEMA)
    out = pl.concat(frames).sort("profile_of", "_scope_order", "_measure_order", "_order")
    return out.select([pl.col(c).cast(t) for c, t in PROFILE_SCHEMA.items()])


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _pearson(x: list[float], y: list[float]) -> float | None:
    n = len(x)
    if n < 3:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)


def frequency_accuracy_relation(
    dataset_profile: pl.DataFrame,
    model_profiles: pl.DataFrame,
    components: tuple[str, ...] = ("TARGET", "CONTENT"),
    low_frequency_threshold: float = 5.0,
    scope: str = "all",
) -> pl.DataFrame:
    """Correlation across sub-components between dataset frequency and model accuracy.

    The paper's finding: sub-components tagged in under 5% of questions had low accuracy.
    Per model and measure: Spearman and Pearson correlations over the TARGET and CONTENT
    sub-components that the model answered at least once, plus the mean accuracy of the
    rare (< threshold %) sub-components and of the others.
    """
    _require(dataset_profile, "dataset profile", ("component", "sub_component", "value", "scope"))
    _require(model_profiles, "model profiles", ("profile_of", "component", "sub_component", "measure", "value", "n"))
    freq = dataset_profile.filter(
        (pl.col("scope") == scope) & pl.col("component").is_in(list(components)) & pl.col("value").is_not_null()
    ).select("component", "sub_component", pl.col("value").alias("frequency"))
    rows = []
    models = model_profiles.filter(pl.col("scope") == scope) if "scope" in model_profiles.columns else model_profiles
    for model in sorted(models["profile_of"].unique().to_list()):
        for measure in ("accuracy", "weighted_achievement"):
            acc = models.filter(
                (pl.col("profile_of") == model)
                & (pl.col("measure") == measure)
                & (pl.col("n") > 0)
                & pl.col("value").is_not_null()
            ).select("component", "sub_component", pl.col("value").alias("achieved"))
            paired = freq.join(acc, on=["component", "sub_component"], how="inner").sort("component", "sub_component")
            if paired.height == 0:
                continue
            f, a = paired["frequency"].to_list(), paired["achieved"].to_list()
            rare = paired.filter(pl.col("frequency") < low_frequency_threshold)
            rest = paired.filter(pl.col("frequency") >= low_frequency_threshold)
            rows.append(
                {
                    "model": model,
                    "measure": measure,
                    "scope": scope,
                    "n_sub_components": paired.height,
                    "spearman": _pearson(_ranks(f), _ranks(a)),
                    "pearson": _pearson(f, a),
                    "low_frequency_threshold": low_frequency_threshold,
                    "low_frequency_sub_components": ", ".join(rare["sub_component"].to_list()),
                    "low_frequency_mean": rare["achieved"].mean() if rare.height else None,
                    "other_mean": rest["achieved"].mean() if rest.height else None,
                }
            )
    return pl.DataFrame(rows, schema=RELATION_SCHEMA)
