"""Stable, group-aware train/valid/test assignment.

Policy
------
* The unit of assignment is the duplicate group, so a question and its near duplicates can
  never land in different splits.
* Within each (subject, skill) of at least ``SMALL_SKILL`` groups, groups are ordered by a
  seeded hash of the group id and dealt to the split whose quota is furthest from met;
  quotas come from the ratios (default 60/20/20) by largest remainder (ties: train, valid,
  test), so such a skill's proportions are exact.
* Small-skill policy: a skill with fewer than ``SMALL_SKILL`` groups cannot be split
  60/20/20 (with 3 questions, exact quotas would give it no test question, and every tiny
  skill would do the same, starving the test split). Its groups are instead assigned one by
  one from the seeded hash as a uniform draw against the ratios, so the proportions hold
  in aggregate over the many small skills, and each tiny skill's questions land in any split.
* A split ledger (``split_ledger``: group, split) is kept across builds. A group seen before
  keeps its split forever; only new groups are dealt, against the quotas of the grown
  skill. Adding questions therefore never moves an existing one.
* A group whose question came with a split from its source (an imported release such as
  STEM or ScienceQA) keeps that split when ``respect_source_split`` is on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import polars as pl

SPLITS = ("train", "valid", "test")
SMALL_SKILL = 5
LEDGER_SCHEMA = {"duplicate_group": pl.String, "split": pl.String}


@dataclass(frozen=True)
class SplitConfig:
    train: float = 0.6
    valid: float = 0.2
    test: float = 0.2
    seed: int = 0
    respect_source_split: bool = True

    def ratios(self) -> tuple[float, float, float]:
        total = self.train + self.valid + self.test
        if total <= 0 or min(self.train, self.valid, self.test) < 0:
            raise ValueError(f"split ratios must be non-negative and sum to more than 0, got {self.train}/{self.valid}/{self.test}")
        return (self.train / total, self.valid / total, self.test / total)


def quotas(n: int, ratios: tuple[float, float, float]) -> list[int]:
    """Largest-remainder apportionment of ``n`` items to the three splits."""
    exact = [n * r for r in ratios]
    base = [int(x) for x in exact]
    remainder = n - sum(base)
    order = sorted(range(3), key=lambda i: (-(exact[i] - base[i]), i))
    for i in order[:remainder]:
        base[i] += 1
    return base


def group_order_key(group: str, seed: int) -> bytes:
    return hashlib.sha256(f"split:{seed}:{group}".encode()).digest()


def split_by_draw(group: str, seed: int, ratios: tuple[float, float, float]) -> str:
    """A split drawn uniformly against the ratios from the group's seeded hash."""
    u = int.from_bytes(group_order_key(group, seed)[:8], "big") / 2**64
    if u < ratios[0]:
        return SPLITS[0]
    if u < ratios[0] + ratios[1]:
        return SPLITS[1]
    return SPLITS[2]


def assign_splits(
    questions: pl.DataFrame,
    ledger: pl.DataFrame | None,
    config: SplitConfig = SplitConfig(),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Add a ``split`` column to ``questions``; return (questions, updated ledger).

    ``questions`` needs ``duplicate_group``, ``subject``, ``skill`` and optionally
    ``source_split``. The ledger only grows.
    """
    ratios = config.ratios()
    ledger = ledger if ledger is not None else pl.DataFrame(schema=LEDGER_SCHEMA)
    known: dict[str, str] = dict(zip(ledger["duplicate_group"].to_list(), ledger["split"].to_list()))

    has_source_split = "source_split" in questions.columns
    groups = (
        questions.select(
            "subject",
            "skill",
            "duplicate_group",
            (pl.col("source_split") if has_source_split else pl.lit(None, dtype=pl.String)).alias("source_split"),
        )
        .group_by("subject", "skill", "duplicate_group")
        .agg(pl.col("source_split").drop_nulls().min())
        .sort("subject", "skill", "duplicate_group")
    )

    assignment: dict[str, str] = {}
    for (subject, skill), members in groups.group_by(["subject", "skill"], maintain_order=True):
        counts = [0, 0, 0]
        new_groups = []
        for group, source_split in zip(members["duplicate_group"].to_list(), members["source_split"].to_list()):
            split = known.get(group)
            if split is None and config.respect_source_split and source_split in SPLITS:
                split = source_split
            if split is None:
                new_groups.append(group)
            else:
                assignment[group] = split
                counts[SPLITS.index(split)] += 1
        if not new_groups:
            continue
        if sum(counts) + len(new_groups) < SMALL_SKILL:
            for group in new_groups:
                assignment[group] = split_by_draw(group, config.seed, ratios)
            continue
        target = quotas(sum(counts) + len(new_groups), ratios)
        for group in sorted(new_groups, key=lambda g: group_order_key(g, config.seed)):
            # the split furthest below its quota, relative to its size; ties: train, valid, test
            best = max(range(3), key=lambda i: (target[i] - counts[i], -i))
            counts[best] += 1
            assignment[group] = SPLITS[best]

    result = questions.with_columns(
        pl.col("duplicate_group").replace_strict(assignment, return_dtype=pl.String).alias("split")
    )
    new_rows = pl.DataFrame(
        {"duplicate_group": list(assignment), "split": list(assignment.values())}, schema=LEDGER_SCHEMA
    )
    updated = (
        pl.concat([ledger.cast(LEDGER_SCHEMA), new_rows])
        .unique(subset="duplicate_group", keep="first", maintain_order=True)
        .sort("duplicate_group")
    )
    return result, updated


def leakage(questions: pl.DataFrame) -> pl.DataFrame:
    """Duplicate groups that appear in more than one split (should be empty)."""
    return (
        questions.group_by("duplicate_group")
        .agg(pl.col("split").n_unique().alias("splits"))
        .filter(pl.col("splits") > 1)
    )
