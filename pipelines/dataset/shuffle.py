"""Seeded shuffling of each question's options, with the permutation recorded.

The permutation of a question depends only on the global seed and its ``question_id``,
so it is the same in every build and independent of row order. ``permutation[j]`` is the
original position of the option now at position ``j``. Questions whose option order
carries meaning (``pipelines.dataset.option_order``) keep the identity permutation, and the
``shuffle`` column says which happened and why.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import polars as pl

from pipelines.dataset.option_order import KEPT_ORDER_PREFIX, SHUFFLED, option_order


def option_permutation(question_id: str, num_options: int, seed: int) -> list[int]:
    """A uniformly random permutation of ``range(num_options)`` derived from a hash."""
    digest = hashlib.sha256(f"shuffle:{seed}:{question_id}".encode()).digest()
    perm = list(range(num_options))
    # Fisher-Yates with 64-bit draws from the digest; the modulo bias is below 2**-60.
    for step, i in enumerate(range(num_options - 1, 0, -1)):
        draw = int.from_bytes(digest[step * 8 : step * 8 + 8], "big")
        j = draw % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _permute(question_ids: list[str], num_options, answers, seed: int, keep=None):
    """``option_permutation`` of many questions at once (the same draws, vectorized per option
    count) as a ``List(Int64)`` Series, and each answer's new position (-1 stays -1). Rows where
    the boolean array ``keep`` is true get the identity permutation."""
    import numpy as np
    import pyarrow as pa

    n = len(question_ids)
    digests = b"".join(hashlib.sha256(f"shuffle:{seed}:{qid}".encode()).digest() for qid in question_ids)
    draws = np.frombuffer(digests, dtype=">u8").reshape(n, 4).astype(np.uint64)
    counts = np.asarray(num_options, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int64)  # the permutations end to end, row by row
    new_answers = np.full(n, -1, dtype=np.int64)
    for k in sorted(set(counts.tolist())):
        rows = np.flatnonzero(counts == k)
        perm = np.tile(np.arange(k, dtype=np.int64), (len(rows), 1))
        at = np.arange(len(rows))
        for step, i in enumerate(range(k - 1, 0, -1)):
            if step < 4:
                j = (draws[rows, step] % np.uint64(i + 1)).astype(np.int64)
            else:  # past the digest's 32 bytes the draw is 0, as in option_permutation
                j = np.zeros(len(rows), dtype=np.int64)
            pi, pj = perm[at, i].copy(), perm[at, j].copy()
            perm[at, i], perm[at, j] = pj, pi
        if keep is not None:
            perm[keep[rows]] = np.arange(k, dtype=np.int64)
        answer = answers[rows]
        known = answer >= 0
        match = perm == answer[:, None]
        lost = known & ~match.any(axis=1)
        if lost.any():
            r = int(rows[np.flatnonzero(lost)[0]])
            raise ValueError(f"answer_idx {int(answers[r])} is not an option of question {question_ids[r]}")
        if k:
            new_answers[rows[known]] = match[known].argmax(axis=1)
        flat[(offsets[rows][:, None] + np.arange(k)).ravel()] = perm.ravel()
    perms = pl.from_arrow(pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat)))
    return perms.cast(pl.List(pl.Int64)).rename("permutation"), new_answers


RELEASE_ORDER = f"{KEPT_ORDER_PREFIX}release"


def option_orders(questions: pl.DataFrame) -> pl.Series:
    """The ``shuffle`` value of each question, classified once per distinct option list;
    ``kept-order:release`` for a STEM release's questions (``source`` ``stem-parquet:...``)."""
    if "choices" not in questions.columns:
        return pl.Series("shuffle", [SHUFFLED] * questions.height, dtype=pl.String)
    distinct = questions.select("choices").unique(maintain_order=True)
    decided = distinct.with_columns(
        pl.Series("shuffle", [option_order(c) for c in distinct["choices"].to_list()], dtype=pl.String)
    )
    joined = questions.select("choices").join(decided, on="choices", how="left", nulls_equal=True, maintain_order="left")
    shuffle = joined["shuffle"]
    if "source" in questions.columns:  # a STEM release's options are in its published order already
        release = questions["source"].str.starts_with("stem-parquet:").fill_null(False)
        shuffle = pl.select(pl.when(release).then(pl.lit(RELEASE_ORDER)).otherwise(shuffle).alias("shuffle")).to_series()
    return shuffle


def shuffle_options(questions: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Permute ``choices`` / ``choice_images``, remap ``answer_idx``, add ``permutation`` and
    ``shuffle`` (``shuffled`` or ``kept-order:<reason>``; kept-order questions keep the
    identity permutation; ``kept-order:release`` for a STEM release's questions, whose option
    positions, answer key and preds.txt are the release's).

    ``answer_idx`` of -1 (answer unknown) stays -1.
    """
    num_options = (
        questions.select(pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len(), 0))
        .to_series()
        .to_numpy()
    )
    shuffle = option_orders(questions)
    keep = shuffle.str.starts_with(KEPT_ORDER_PREFIX).fill_null(False).to_numpy()
    perm, new_answers = _permute(
        questions["question_id"].to_list(), num_options, questions["answer_idx"].to_numpy(), seed, keep
    )
    return questions.with_columns(
        pl.col("choices").list.gather(perm),
        pl.col("choice_images").list.gather(perm),
        pl.Series("answer_idx", new_answers, dtype=pl.Int64),
        perm,
        shuffle,
    )


def choices_table(shuffled: pl.DataFrame) -> pl.DataFrame:
    """One row per option after shuffling (the ``choices`` view)."""
    base = shuffled.select(
        "question_id",
        pl.coalesce(
            pl.col("choices"),
            pl.lit(None, dtype=pl.List(pl.String)).repeat_by(pl.col("choice_images").list.len()).list.eval(pl.element()),
        ).alias("text"),
        pl.coalesce(
            pl.col("choice_images"),
            pl.lit(None, dtype=pl.List(pl.String)).repeat_by(pl.col("choices").list.len()).list.eval(pl.element()),
        ).alias("image_hash"),
        pl.col("permutation").alias("original_position"),
        # each option's position, exploded beside it (a window over question_id costs four times as much)
        pl.int_ranges(pl.col("permutation").list.len(), dtype=pl.Int64).alias("position"),
    )
    exploded = base.explode(["text", "image_hash", "original_position", "position"])
    return exploded.select(
        "question_id", pl.col("position").fill_null(0), "text", "image_hash", "original_position"
    )


@dataclass(frozen=True)
class UniformityResult:
    num_options: int
    n: int
    counts: tuple[int, ...]
    chi_square: float
    p_value: float


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X >= statistic) for a chi-square variable with a positive integer ``dof``.

    Closed forms of the regularized upper incomplete gamma function Q(dof/2, x/2), so the
    check needs no scipy.
    """
    if dof < 1:
        raise ValueError(f"degrees of freedom must be positive, got {dof}")
    if statistic <= 0:
        return 1.0
    half = statistic / 2.0
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= half / i
            total += term
        return min(1.0, math.exp(-half) * total)
    total = math.erfc(math.sqrt(half))
    term = math.sqrt(half) / math.gamma(1.5)  # (x/2)^(1/2) / Gamma(3/2)
    for i in range(1, (dof - 1) // 2 + 1):
        total += math.exp(-half) * term
        term *= half / (i + 0.5)
    return min(1.0, total)


def answer_position_uniformity(shuffled: pl.DataFrame) -> list[UniformityResult]:
    """Chi-square test that answer positions are uniform, per number of options, over the
    questions that were shuffled (kept-order questions keep their source's positions)."""
    if "shuffle" in shuffled.columns:
        shuffled = shuffled.filter(~pl.col("shuffle").str.starts_with(KEPT_ORDER_PREFIX).fill_null(False))
    known = shuffled.filter(pl.col("answer_idx") >= 0).with_columns(
        pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len()).alias("_k")
    )
    results = []
    for k in sorted(known["_k"].unique().to_list()):
        sub = known.filter(pl.col("_k") == k)
        counts = [int((sub["answer_idx"] == i).sum()) for i in range(k)]
        expected = sub.height / k
        stat = sum((c - expected) ** 2 / expected for c in counts)
        results.append(UniformityResult(int(k), sub.height, tuple(counts), float(stat), chi_square_sf(stat, k - 1)))
    return results
