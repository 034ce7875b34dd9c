"""The paper's filters: only multimodal questions, and at most N questions per skill.

The paper keeps only problems with at least one image (in the question or the options)
and at most 2,000 problems per skill. The cap is applied after deduplication, so that
duplicates never take the places of distinct questions; which questions a capped skill
keeps is decided by a seeded hash of the question id, so it is deterministic and does not
depend on row order.
"""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from pipelines.clean.dedup.image_match import splitmix64
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


def cap_rank_key(question_id: str, seed: int) -> int:
    """The order in which a capped skill keeps its questions (lowest first), for an id that is not
    16 hex digits (``cap_rank_keys``)."""
    return int.from_bytes(hashlib.sha256(f"cap:{seed}:{question_id}".encode()).digest()[:8], "big")


_HEX_ID = r"^[0-9a-f]{16}$"


def cap_rank_keys(question_ids: pl.Series, seed: int) -> np.ndarray:
    """``cap_rank_key`` of each id, vectorized: a question id of 16 hex digits (the first 64 bits of a
    sha256, as dedup writes them) is already uniform, so its key is the seeded splitmix64 of those bits."""
    keys = np.zeros(len(question_ids), dtype=np.uint64)
    hexed = question_ids.str.contains(_HEX_ID).fill_null(False).to_numpy()
    if hexed.any():
        bits = np.frombuffer(bytes.fromhex("".join(question_ids.filter(hexed).to_list())), dtype=">u8")
        salt = splitmix64(np.array([0xCA9 ^ (seed & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))
        keys[hexed] = splitmix64(bits.astype(np.uint64) ^ salt)
    others = np.flatnonzero(~hexed)
    keys[others] = [cap_rank_key(qid, seed) for qid in question_ids.gather(others).to_list()]
    return keys


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
