"""The paper's filters: only multimodal questions, and at most N questions per skill.

The paper keeps only problems with at least one image (in the question or the options)
and at most 2,000 problems per skill. The cap is applied after deduplication, so that
duplicates never take the places of distinct questions; which questions a capped skill
keeps is decided by a seeded hash of the question id, so it is deterministic and does not
depend on row order.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipelines.store.id_hash import question_id_hashes
from pipelines.store.records import QUARANTINE_SCHEMA

DEFAULT_CAP_PER_SKILL = 2000
TEXT_ONLY_REASON = "text-only question: no image in the question or the options"


def _quarantine_frame(rows: pl.DataFrame, stage: str, reason: str | pl.Expr, detail: pl.Expr | None = None) -> pl.DataFrame:
    reason_expr = pl.lit(reason) if isinstance(reason, str) else reason
    detail_expr = detail if detail is not None else pl.lit(None, dtype=pl.String)
    return rows.select(
        pl.col("source"),
        pl.col("source_key"),
        pl.lit(stage).alias("stage"),
        reason_expr.alias("reason"),
        detail_expr.alias("detail"),
    ).cast({name: pl.String for name in QUARANTINE_SCHEMA.names})


def keep_multimodal(raw: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split ``raw`` into questions with at least one image and quarantined text-only ones."""
    has_image = pl.col("problem_image").is_not_null() | (
        pl.col("choice_images").is_not_null() & (pl.col("choice_images").list.len() > 0)
    )
    kept = raw.filter(has_image)
    dropped = raw.filter(~has_image)
    return kept, _quarantine_frame(dropped, "filter", TEXT_ONLY_REASON)


def cap_rank_keys(question_ids: pl.Series, seed: int) -> np.ndarray:
    """The order in which a capped skill keeps its questions (lowest first): a seeded hash of each
    question id (``pipelines.store.id_hash``)."""
    return question_id_hashes(question_ids, seed, "cap")


def cap_per_skill(questions: pl.DataFrame, cap: int = DEFAULT_CAP_PER_SKILL, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Keep at most ``cap`` questions per (subject, skill); quarantine the rest with the reason.

    ``questions`` must carry ``question_id``. Returns (kept, quarantine).
    """
    if cap <= 0:
        raise ValueError(f"the per-skill cap must be positive, got {cap}")
    if questions.height == 0:
        return questions, _quarantine_frame(questions, "cap", "")
    # only a skill over the cap needs its questions' rank keys (in the others all are kept)
    crowded = questions.select(pl.len().over(["subject", "skill"]) > cap).to_series().to_numpy()
    keys = np.zeros(questions.height, dtype=np.uint64)
    keys[crowded] = cap_rank_keys(questions["question_id"].filter(crowded), seed)
    ranked = questions.with_columns(
        pl.Series("_cap_key", keys, dtype=pl.UInt64)
    ).with_columns(
        pl.col("_cap_key").rank("ordinal").over(["subject", "skill"]).alias("_cap_rank")
    )
    kept = ranked.filter(pl.col("_cap_rank") <= cap).drop("_cap_key", "_cap_rank")
    over = ranked.filter(pl.col("_cap_rank") > cap)
    quarantine = _quarantine_frame(
        over,
        "cap",
        pl.format("skill over the cap of {} questions", pl.lit(cap)),
        pl.format("{}/{}", pl.col("subject"), pl.col("skill")),
    )
    return kept, quarantine
