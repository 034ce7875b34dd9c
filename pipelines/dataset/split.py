"""Stable, family-aware train/valid/test assignment.

Policy
------
* The unit of assignment is the family of ``pipelines.dataset.families.split_families``, the
  one definition the leakage check (``no_split_leakage``) reads too: dedup's families
  (``duplicate_group``) joined with every question that has the same problem image and
  canonical stem, whatever its options and answer. Questions that share a figure and a stem
  therefore land in the same split, and the split cannot produce a leak the check finds.
* Each subject gets quotas from the ratios (default 60/20/20) by largest remainder over its
  questions (ties: train, valid, test). New families are dealt largest first, then in the
  order of a seeded hash of the family id; each goes to the split where its skill is furthest
  below the skill's own ideal share (the ratios times the skill's questions), among the splits
  whose subject quota still has room for the whole family (if none has, the split with the
  most room). Subject counts therefore meet their quotas exactly when families are single
  questions and within one family otherwise, small subjects included, and every skill is
  spread over the splits about as the ratios say.
* A split ledger (``split_ledger``: question_id, duplicate_group, split) is kept across builds.
  A family with a ledgered member keeps its members' split; only families without one are
  dealt, against the quotas of the grown subject. Adding questions therefore never moves an
  existing one, except in one case: when a new build joins questions that the ledger had put
  in different splits into one family (a new question bridges two families, or dedup got
  better), the family takes the split that holds most of its ledgered questions (ties: the
  split of its smallest ledgered question_id), and the others move with it: leakage would be
  worse than a move.
* A family whose question came with a split from its source (an imported release such as
  STEM or ScienceQA) keeps that split when ``respect_source_split`` is on, and each such
  question keeps its own source split even when this build joins it to a family whose
  members the source put in other splits: a release's train/valid/test are the release's
  (the leakage check reports those families as the source's, and does not fail on them).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import polars as pl

from pipelines.dataset.families import FAMILY, family_leaks, split_families

SPLITS = ("train", "valid", "test")
LEDGER_SCHEMA = {"question_id": pl.String, "duplicate_group": pl.String, "split": pl.String}


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


def read_ledger(ledger: pl.DataFrame | None) -> pl.DataFrame:
    """A ledger in the current schema; an older one (duplicate_group, split), written when every
    group was one question, keys its rows by that group."""
    if ledger is None:
        return pl.DataFrame(schema=LEDGER_SCHEMA)
    if "question_id" not in ledger.columns:
        ledger = ledger.with_columns(pl.col("duplicate_group").alias("question_id"))
    return ledger.select(list(LEDGER_SCHEMA)).cast(LEDGER_SCHEMA)


def _ledgered_splits(members: pl.DataFrame, ledger: pl.DataFrame) -> pl.DataFrame:
    """(duplicate_group, split) of the families with a ledgered member: the split holding most of
    its ledgered members (ties: the split of its smallest ledgered member)."""
    held = members.join(
        ledger.select(pl.col("question_id").alias("member"), "split"), on="member", how="inner"
    )
    return (
        held.group_by("duplicate_group", "split")
        .agg(pl.len().alias("_held"), pl.col("member").min().alias("_first"))
        .sort("duplicate_group", "_held", "_first", descending=[False, True, False])
        .unique(subset="duplicate_group", keep="first", maintain_order=True)
        .select("duplicate_group", "split")
    )


def assign_splits(
    questions: pl.DataFrame,
    ledger: pl.DataFrame | None,
    config: SplitConfig = SplitConfig(),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Add a ``split`` column to ``questions``; return (questions, updated ledger).

    ``questions`` needs ``duplicate_group``, ``subject``, ``skill`` and optionally
    ``question_id`` (else each row's group stands for it in the ledger) and ``source_split``.
    The ledger keeps the rows of questions that are gone.

    Families the ledger (or the source) already places are looked up in bulk; only the new
    families are dealt one by one, so a rebuild after a small change deals only what changed."""
    ratios = config.ratios()
    ledger = read_ledger(ledger)

    member_col = "question_id" if "question_id" in questions.columns else "duplicate_group"
    has_source_split = "source_split" in questions.columns
    # the unit dealt is the split family; below it goes by the ledger's column name
    family = split_families(questions)
    members = questions.select(
        pl.col(member_col).alias("member"),
        family.alias("duplicate_group"),
        "subject",
        "skill",
        (pl.col("source_split") if has_source_split else pl.lit(None, dtype=pl.String)).alias("source_split"),
    ).sort("member")
    families = members.group_by("duplicate_group", maintain_order=True).agg(
        pl.len().alias("size"),
        pl.col("subject").first(),
        pl.col("skill").first(),
        pl.col("source_split").filter(pl.col("source_split").is_in(SPLITS)).min(),
    ).sort("duplicate_group")

    by_group = ledger.select("duplicate_group", pl.col("split").alias("_by_group")).unique(
        subset="duplicate_group", keep="last", maintain_order=True
    )
    placed = families.join(_ledgered_splits(members, ledger), on="duplicate_group", how="left").join(
        by_group, on="duplicate_group", how="left"
    )
    fallback = [pl.col("split"), pl.col("_by_group")]
    if config.respect_source_split:
        fallback.append(pl.col("source_split"))
    placed = placed.with_columns(pl.coalesce(fallback).alias("split")).drop("_by_group")

    known = placed.filter(pl.col("split").is_not_null())
    assignment = known.select("duplicate_group", "split")
    new_rows: list[tuple[str, str]] = []
    pending = placed.filter(pl.col("split").is_null())
    if pending.height:
        subject_sizes = dict(placed.group_by("subject").agg(pl.col("size").sum()).iter_rows())
        skill_sizes = {(subject, skill): n for subject, skill, n in
                       placed.group_by("subject", "skill").agg(pl.col("size").sum()).iter_rows()}
        held = {(subject, skill, split): n for subject, skill, split, n in
                known.group_by("subject", "skill", "split").agg(pl.col("size").sum()).iter_rows()}
        for (subject,), fams in pending.group_by(["subject"], maintain_order=True):
            subject_counts = [0, 0, 0]
            skill_counts: dict[str, list[int]] = {}
            for (subj, skill, split), n in held.items():
                if subj == subject:
                    subject_counts[SPLITS.index(split)] += n
                    skill_counts.setdefault(skill, [0, 0, 0])[SPLITS.index(split)] += n
            target = quotas(subject_sizes[subject], ratios)
            new = zip(fams["duplicate_group"].to_list(), fams["skill"].to_list(), fams["size"].to_list())
            for group, skill, size in sorted(new, key=lambda g: (-g[2], group_order_key(g[0], config.seed))):
                cell = skill_counts.setdefault(skill, [0, 0, 0])
                room = [target[i] - subject_counts[i] for i in range(3)]
                fits = [i for i in range(3) if room[i] >= size] or [max(range(3), key=lambda i: (room[i], -i))]
                best = max(
                    fits,
                    key=lambda i: (skill_sizes[(subject, skill)] * ratios[i] - cell[i], room[i] / max(target[i], 1), -i),
                )
                new_rows.append((group, SPLITS[best]))
                subject_counts[best] += size
                cell[best] += size
    if new_rows:
        dealt = pl.DataFrame(new_rows, schema={"duplicate_group": pl.String, "split": pl.String}, orient="row")
        assignment = pl.concat([assignment, dealt])

    result = questions.drop("split", strict=False).with_columns(family.alias("_split_family")).join(
        assignment.rename({"duplicate_group": "_split_family"}), on="_split_family", how="left", maintain_order="left"
    ).drop("_split_family")
    if config.respect_source_split and has_source_split:
        # a release's train/valid/test are the release's: each of its questions keeps its own split,
        # even where this build joins it to a family of another split (no_split_leakage names those)
        result = result.with_columns(
            pl.when(pl.col("source_split").is_in(SPLITS)).then(pl.col("source_split")).otherwise(pl.col("split")).alias("split")
        )
    if "split" in questions.columns:
        result = result.select(questions.columns)
    current = result.select(
        pl.col(member_col).alias("question_id"), "duplicate_group", "split"
    ).unique(subset="question_id", keep="first", maintain_order=True)
    gone = ledger.join(current.select("question_id"), on="question_id", how="anti")
    updated = pl.concat([current.cast(LEDGER_SCHEMA), gone]).sort("question_id")
    return result, updated


def leakage(questions: pl.DataFrame) -> pl.DataFrame:
    """Families (``pipelines.dataset.families``) that appear in more than one split (should be
    empty; the split deals whole families): ``family``, ``splits``, ``question_ids``,
    ``duplicate_groups``."""
    return family_leaks(questions)


def proportions_by_subject(questions: pl.DataFrame, ratios: tuple[float, float, float]) -> list[dict]:
    """Per subject: questions per split, the largest-remainder targets, the allowed deviation
    (one question, or the largest family of the subject) and whether every split is within it."""
    out = []
    sizes = questions.with_columns(split_families(questions)).group_by("subject", FAMILY).len()
    largest = dict(sizes.group_by("subject").agg(pl.col("len").max()).iter_rows())
    counts = questions.group_by("subject", "split").len()
    per = {(subject, split): n for subject, split, n in counts.iter_rows()}
    for subject in sorted(questions["subject"].unique().to_list(), key=str):
        got = [per.get((subject, s), 0) for s in SPLITS]
        target = quotas(sum(got), ratios)
        allowed = max(1, int(largest.get(subject, 1)))
        out.append({
            "subject": subject, "counts": dict(zip(SPLITS, got)), "targets": dict(zip(SPLITS, target)),
            "allowed": allowed, "ok": all(abs(g - t) <= allowed for g, t in zip(got, target)),
        })
    return out
