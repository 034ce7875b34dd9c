"""Seeded shuffling of each question's options, with the permutation recorded.

The permutation of a question depends only on the global seed and its ``question_id``,
so it is the same in every build and independent of row order. ``permutation[j]`` is the
original position of the option now at position ``j``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import polars as pl


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


def shuffle_options(questions: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Permute ``choices`` / ``choice_images``, remap ``answer_idx``, add ``permutation``.

    ``answer_idx`` of -1 (answer unknown) stays -1.
    """
    ids = questions["question_id"].to_list()
    texts = questions["choices"].to_list()
    pics = questions["choice_images"].to_list()
    answers = questions["answer_idx"].to_list()
    new_texts, new_pics, new_answers, perms = [], [], [], []
    for qid, text, pic, answer in zip(ids, texts, pics, answers):
        options = text if text is not None else pic
        perm = option_permutation(qid, len(options), seed)
        perms.append(perm)
        new_texts.append([text[p] for p in perm] if text is not None else None)
        new_pics.append([pic[p] for p in perm] if pic is not None else None)
        new_answers.append(perm.index(answer) if answer >= 0 else -1)
    return questions.with_columns(
        pl.Series("choices", new_texts, dtype=pl.List(pl.String)),
        pl.Series("choice_images", new_pics, dtype=pl.List(pl.String)),
        pl.Series("answer_idx", new_answers, dtype=pl.Int64),
        pl.Series("permutation", perms, dtype=pl.List(pl.Int64)),
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
    )
    exploded = base.explode(["text", "image_hash", "original_position"])
    return exploded.with_columns(
        pl.int_range(pl.len()).over("question_id").cast(pl.Int64).alias("position")
    ).select("question_id", "position", "text", "image_hash", "original_position")


@dataclass(frozen=True)
class UniformityResult:
    num_options: int
    n: int
    counts: tuple[int, ...]
    chi_square: float
    p_value: float


def answer_position_uniformity(shuffled: pl.DataFrame) -> list[UniformityResult]:
    """Chi-square test that answer positions are uniform, per number of options."""
    from scipy.stats import chisquare

    known = shuffled.filter(pl.col("answer_idx") >= 0).with_columns(
        pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len()).alias("_k")
    )
    results = []
    for k in sorted(known["_k"].unique().to_list()):
        sub = known.filter(pl.col("_k") == k)
        counts = [int((sub["answer_idx"] == i).sum()) for i in range(k)]
        stat, p = chisquare(counts)
        results.append(UniformityResult(int(k), sub.height, tuple(counts), float(stat), float(p)))
    return results
