"""Rows of the ``metrics`` table: their schema, the interval machinery (Wilson form, the
clustered bootstrap, the macro over subjects) and the registry of measures.

``metrics`` (the measures over scored predictions) and ``smartscore`` (the exam score) both
build on this module; neither imports the other's internals, and ``metrics`` imports
``smartscore`` so that ``exam_score`` is registered whenever the measures are computed.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np
import polars as pl


PERCENT = 100.0


CONFIDENCE_LEVEL = 0.95


DEFAULT_BOOTSTRAP = 0


Z_95 = 1.959963984540054


METRICS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "split": pl.String(),
    "metric": pl.String(),
    "group_by": pl.String(),
    "group_value": pl.String(),
    "value": pl.Float64(),
    "n": pl.Int64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
}


METRIC_COLUMNS = list(METRICS_SCHEMA)


NO_GRADE = "(none)"


ALL = "all"


class MetricsInputError(ValueError):
    """A scored/rotations frame that cannot be measured; the message is one line."""


def skill_key_expr() -> pl.Expr:
    """``<grade>/<skill>`` (the paper's skill naming) or ``<skill>`` when grade is null."""
    return (
        pl.when(pl.col("grade").is_null())
        .then(pl.col("skill"))
        .otherwise(pl.concat_str([pl.col("grade"), pl.lit("/"), pl.col("skill")]))
    )


def stream_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed for one random stream, stable across runs and platforms."""
    text = "\x1f".join([str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


_MAX_DRAWS_PER_CHUNK = 4_000_000


@dataclass
class BootstrapResult:
    """Per cell (rows of ``cells``, in order): the interval and, when kept, the replicates."""

    cells: pl.DataFrame
    replicates: np.ndarray | None  # shape (cells, bootstrap): replicate ratios


def bootstrap_ratio(
    clusters: pl.DataFrame,
    cell_columns: Sequence[str],
    stream_columns: Sequence[str],
    *,
    bootstrap: int,
    seed: int,
    keep_replicates: bool = False,
) -> BootstrapResult:
    """Clustered bootstrap of sum(num)/sum(den) per cell (clusters resampled within cells).

    ``clusters`` has one row per (cell, cluster) with the cluster's ``num`` and ``den``
    sums. ``stream_columns`` (a prefix-free subset of ``cell_columns``) choose the random
    stream. Returns ``cells`` (the cell columns, sorted, with ``ci_low``/``ci_high`` as
    ratios) and optionally the replicate ratios.
    """
    cell_columns = list(cell_columns)
    shapes = (
        clusters.group_by([*cell_columns, "num", "den"])
        .agg(pl.len().alias("multiplicity"))
        .sort([*cell_columns, "num", "den"])
    )
    cells = shapes.select(cell_columns).unique(maintain_order=True)
    n_cells = cells.height
    low = np.full(n_cells, np.nan)
    high = np.full(n_cells, np.nan)
    replicates = np.full((n_cells, bootstrap), np.nan) if keep_replicates else None
    if n_cells == 0 or bootstrap <= 0:
        return BootstrapResult(cells.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64)), replicates)

    shape_cell = _change_ids(shapes, cell_columns)
    stream_ids = _change_ids(shapes, stream_columns) if stream_columns else np.zeros(shapes.height, np.int64)
    stream_keys = shapes.select(stream_columns).rows() if stream_columns else [()] * shapes.height
    num = shapes["num"].to_numpy().astype(np.float64)
    den = shapes["den"].to_numpy().astype(np.float64)
    mult = shapes["multiplicity"].to_numpy().astype(np.float64)
    stream_starts = np.concatenate([[0], np.flatnonzero(np.diff(stream_ids)) + 1, [shapes.height]]).tolist()

    for s in range(len(stream_starts) - 1):
        rows_begin, rows_end = stream_starts[s], stream_starts[s + 1]
        rng = np.random.default_rng(stream_seed(seed, *stream_keys[rows_begin]))
        row_cells = shape_cell[rows_begin:rows_end]
        # cut the stream into chunks on cell boundaries to bound memory
        cell_starts = np.concatenate([[0], np.flatnonzero(np.diff(row_cells)) + 1])
        rows_per_chunk = max(1, _MAX_DRAWS_PER_CHUNK // bootstrap)
        chunk_begin = 0
        while chunk_begin < len(cell_starts):
            chunk_end = int(np.searchsorted(cell_starts, cell_starts[chunk_begin] + rows_per_chunk, side="left"))
            chunk_end = max(chunk_end, chunk_begin + 1)
            r0 = rows_begin + int(cell_starts[chunk_begin])
            r1 = rows_begin + (int(cell_starts[chunk_end]) if chunk_end < len(cell_starts) else rows_end - rows_begin)
            local_starts = cell_starts[chunk_begin:chunk_end] - cell_starts[chunk_begin]
            num_rep, den_rep = _resample_cells(rng, mult[r0:r1], num[r0:r1], den[r0:r1], local_starts, bootstrap)
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = num_rep / den_rep
            ratio[den_rep == 0] = np.nan
            cell_ids = shape_cell[r0 + local_starts]
            lo, hi = _percentile_interval(ratio)
            low[cell_ids] = lo
            high[cell_ids] = hi
            if replicates is not None:
                replicates[cell_ids] = ratio
            chunk_begin = chunk_end
    out = cells.with_columns(pl.Series("ci_low", low), pl.Series("ci_high", high))
    return BootstrapResult(out, replicates)


def _resample_cells(
    rng: np.random.Generator,
    multiplicity: np.ndarray,
    num: np.ndarray,
    den: np.ndarray,
    cell_starts: np.ndarray,
    bootstrap: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Replicate sums of num and den per cell, resampling each cell's clusters with replacement.

    Rows are cluster shapes sorted by cell (``cell_starts`` = first row of each cell). The
    number of draws of each shape is multinomial over the cell's clusters, drawn as a chain
    of conditional binomials, vectorized over cells: the loop runs over the shape's rank
    within its cell, not over rows.
    """
    rows = len(multiplicity)
    n_cells = len(cell_starts)
    cell_of_row = np.repeat(np.arange(n_cells), np.diff(np.append(cell_starts, rows)))
    rank = np.arange(rows) - cell_starts[cell_of_row]
    clusters_per_cell = np.add.reduceat(multiplicity, cell_starts)
    remaining_draws = np.repeat(clusters_per_cell[:, None], bootstrap, axis=1).astype(np.int64)
    remaining_mass = clusters_per_cell.copy()
    num_rep = np.zeros((n_cells, bootstrap))
    den_rep = np.zeros((n_cells, bootstrap))
    order = np.argsort(rank, kind="stable")
    rank_bounds = np.searchsorted(rank[order], np.arange(rank.max() + 2))
    for r in range(rank.max() + 1):
        at = order[rank_bounds[r] : rank_bounds[r + 1]]
        cells = cell_of_row[at]
        share = np.minimum(1.0, multiplicity[at] / remaining_mass[cells])
        counts = rng.binomial(remaining_draws[cells], share[:, None])
        remaining_draws[cells] -= counts
        remaining_mass[cells] -= multiplicity[at]
        num_rep[cells] += counts * num[at, None]
        den_rep[cells] += counts * den[at, None]
    return num_rep, den_rep


def _change_ids(frame: pl.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """0-based id of each run of equal ``columns`` values in a sorted frame."""
    changed = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in columns])
    return frame.select((changed.fill_null(True).cast(pl.Int64).cum_sum() - 1).alias("id"))["id"].to_numpy()


def _percentile_interval(replicates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1.0 - CONFIDENCE_LEVEL) / 2.0
    if np.isnan(replicates).any():
        with np.errstate(all="ignore"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                q = np.nanquantile(replicates, [alpha, 1.0 - alpha], axis=1)
    else:
        q = np.quantile(replicates, [alpha, 1.0 - alpha], axis=1)
    return q[0], q[1]


def wilson_interval(p: pl.Expr, variance: pl.Expr, n: pl.Expr, clusters: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Wilson score interval (fractions) with the cluster-robust effective sample size."""
    spread = p * (1.0 - p)
    effective = (
        pl.when(variance.is_not_null() & (variance > 0) & (spread > 0))
        .then(pl.min_horizontal(pl.max_horizontal(spread / variance, pl.lit(1.0)), n))
        .otherwise(clusters.cast(pl.Float64))
    )
    z2 = Z_95 * Z_95
    denominator = 1.0 + z2 / effective
    centre = (p + z2 / (2.0 * effective)) / denominator
    half = Z_95 / denominator * (spread / effective + z2 / (4.0 * effective * effective)).sqrt()
    return (
        pl.max_horizontal(centre - half, pl.lit(0.0)),
        pl.min_horizontal(centre + half, pl.lit(1.0)),
    )


def _as_metric_rows(values: pl.DataFrame, metric: str, group_by: str) -> pl.DataFrame:
    return values.select(
        pl.col("model").cast(pl.String),
        pl.col("split").cast(pl.String),
        pl.lit(metric).alias("metric"),
        pl.lit(group_by).alias("group_by"),
        pl.col("group_value").cast(pl.String),
        pl.col("value").cast(pl.Float64),
        pl.col("n").cast(pl.Int64),
        pl.col("ci_low").cast(pl.Float64),
        pl.col("ci_high").cast(pl.Float64),
    )


def mover_interval(value: float, lows: Sequence[float], highs: Sequence[float], values: Sequence[float]) -> tuple[float, float]:
    """The interval of a mean of independent estimates from their own intervals (MOVER,
    Zou & Donner 2008): L = mean - sqrt(sum (v_s - l_s)^2) / S, U = mean + sqrt(sum (u_s - v_s)^2) / S.

    Each estimate brings its interval's own asymmetry: a subject at 0/4 (Wilson [0, 49])
    widens the upper side, and one subject's interval alone is returned unchanged."""
    count = len(values)
    below = sum((v - lo) ** 2 for v, lo in zip(values, lows)) ** 0.5 / count
    above = sum((hi - v) ** 2 for v, hi in zip(values, highs)) ** 0.5 / count
    return value - below, value + above


def _macro_rows(
    subject_cells: pl.DataFrame,
    replicates: BootstrapResult | None,
    metric: str,
    *,
    with_interval: bool = True,
    proportion: bool = True,
) -> pl.DataFrame:
    """Mean of the subject values per (model, split); subjects are independent strata.

    ``subject_cells`` has value/n and ci_low/ci_high (percent). With bootstrap replicates the
    interval is their stratified mean's percentiles; otherwise MOVER over the subjects'
    intervals (``mover_interval``), so that a subject whose interval is one-sided (all right,
    all wrong, one skill) counts with its own width, never as certain. ``proportion`` is kept
    for callers: both kinds combine the same way.
    """
    del proportion
    # sorted input: the float sums then run in a fixed order (same bytes on every run)
    ordered = subject_cells.sort(["model", "split", "group_value"])
    macro = (
        ordered.group_by(["model", "split"], maintain_order=True)
        .agg(
            (pl.col("value").mean() / PERCENT).alias("p"),
            pl.col("n").sum().alias("n"),
            pl.col("value").alias("values"),
            (pl.col("ci_low") if "ci_low" in ordered.columns else pl.lit(None, pl.Float64)).alias("lows"),
            (pl.col("ci_high") if "ci_high" in ordered.columns else pl.lit(None, pl.Float64)).alias("highs"),
        )
        .sort(["model", "split"])
    )
    # a (model, split) with a subject whose resamples could not vary combines by MOVER
    mover_only = set()
    if "degenerate" in ordered.columns:
        mover_only = set(ordered.filter(pl.col("degenerate")).select("model", "split").iter_rows())
    if replicates is not None and replicates.replicates is not None:
        low = np.full(macro.height, np.nan)
        high = np.full(macro.height, np.nan)
        index: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(replicates.cells["model"].to_list(), replicates.cells["split"].to_list())):
            index.setdefault(key, []).append(i)
        for row, key in enumerate(zip(macro["model"].to_list(), macro["split"].to_list())):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                macro_rep = np.nanmean(replicates.replicates[index[key]], axis=0)
            lo, hi = _percentile_interval(macro_rep[None, :])
            low[row], high[row] = lo[0], hi[0]
        macro = macro.with_columns(pl.Series("ci_low", low), pl.Series("ci_high", high))
        if mover_only:
            by_mover = _mover_columns(macro)
            use_mover = [key in mover_only for key in macro.select("model", "split").iter_rows()]
            macro = macro.with_columns(
                pl.Series("ci_low", [m if u else b for m, b, u in zip(by_mover[0], macro["ci_low"], use_mover)], pl.Float64),
                pl.Series("ci_high", [m if u else b for m, b, u in zip(by_mover[1], macro["ci_high"], use_mover)], pl.Float64),
            )
    elif with_interval:
        low, high = _mover_columns(macro)
        macro = macro.with_columns(pl.Series("ci_low", low, pl.Float64), pl.Series("ci_high", high, pl.Float64))
    else:
        macro = macro.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64))
    macro = macro.with_columns(
        pl.lit(ALL).alias("group_value"),
        (pl.col("p") * PERCENT).alias("value"),
        pl.col("ci_low") * PERCENT,
        pl.col("ci_high") * PERCENT,
    )
    return _as_metric_rows(macro, metric, "macro")


def _mover_columns(macro: pl.DataFrame) -> tuple[list[float | None], list[float | None]]:
    """MOVER bounds (fractions) per macro row from its subjects' percent intervals."""
    low: list[float | None] = []
    high: list[float | None] = []
    for p, values, lows, highs in macro.select("p", "values", "lows", "highs").iter_rows():
        if any(v is None for v in [*lows, *highs]):
            low.append(None)
            high.append(None)
            continue
        lo, hi = mover_interval(p * PERCENT, lows, highs, values)
        low.append(lo / PERCENT)
        high.append(hi / PERCENT)
    return low, high


def _concat_metric_rows(parts: Sequence[pl.DataFrame]) -> pl.DataFrame:
    frames = [p.select(METRIC_COLUMNS).cast(METRICS_SCHEMA) for p in parts if p.height]
    if not frames:
        return empty_metrics()
    rows = pl.concat(frames, how="vertical").with_columns(
        pl.col("ci_low").fill_nan(None), pl.col("ci_high").fill_nan(None)
    )
    # float rounding can leave a bound a hair on the wrong side of the value (99.99999999999999
    # above 100.0): every interval lies in [0, 100] and contains its value
    return rows.with_columns(
        pl.when(pl.col("ci_low").is_not_null())
        .then(pl.min_horizontal(pl.col("ci_low"), pl.col("value")).clip(0.0, PERCENT))
        .alias("ci_low"),
        pl.when(pl.col("ci_high").is_not_null())
        .then(pl.max_horizontal(pl.col("ci_high"), pl.col("value")).clip(0.0, PERCENT))
        .alias("ci_high"),
    )


def empty_metrics() -> pl.DataFrame:
    return pl.DataFrame(schema=METRICS_SCHEMA)


def sort_metrics(metrics: pl.DataFrame) -> pl.DataFrame:
    return metrics.sort(["model", "split", "metric", "group_by", "group_value"])


@dataclass(frozen=True)
class MeasureInputs:
    """What a measure computes from: the scored frame as given, the same frame prepared
    (``prepare_scored``: grouping keys, ``is_correct``...), and the build's settings."""

    scored: pl.DataFrame
    frame: pl.DataFrame
    bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = 0
    circular: pl.DataFrame | None = None  # per-rotation rows, when the models were re-asked
    smartscore: Any = None  # the build's SmartScoreRules (None: the defaults)


PerQuestion = Union[str, pl.Expr]  # a column of the prepared frame, or an expression over it


@dataclass(frozen=True)
class RegisteredMeasure:
    metric: str
    compute: Callable
    aggregation: str
    higher_is_better: bool | None  # None: a reference figure, not a score
    interval: bool = True
    scale_column: str | None = None


AGGREGATIONS = {
    # ``compute(frame) -> PerQuestion``: a per-question value averaged per cell (subject, macro,
    # micro and every breakdown) with its 95% interval, in one pass with the other means
    "mean": "per-question value, averaged with intervals",
    # ``compute(inputs: MeasureInputs) -> metric rows`` (METRICS_SCHEMA) or None
    "rows": "metric rows computed whole",
}


MEASURES: dict[str, RegisteredMeasure] = {}


def register_metric(*, metric: str, higher_is_better: bool | None, aggregation: str = "mean",
                    interval: bool = True, scale_column: str | None = None):
    """Declare the measure ``metric`` computed by the decorated function (see ``AGGREGATIONS``).
    ``scale_column``: the prepared frame's column by which a ``mean`` value is multiplied
    (to keep its sums exact integers); ``interval=False``: a mean reported without interval."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"measure {metric}: aggregation must be one of {', '.join(AGGREGATIONS)}")

    def decorate(compute: Callable) -> Callable:
        existing = MEASURES.get(metric)
        if existing is not None and (existing.compute.__module__, existing.compute.__qualname__) != (
            compute.__module__, compute.__qualname__
        ):
            raise ValueError(f"measure {metric!r} is registered twice")
        MEASURES[metric] = RegisteredMeasure(metric, compute, aggregation, higher_is_better, interval, scale_column)
        return compute

    return decorate


def measures() -> dict[str, RegisteredMeasure]:
    """Every registered measure by metric name (``pipelines.evaluation.metrics`` registers its
    own and, by importing ``smartscore``, ``exam_score``)."""
    return dict(MEASURES)
