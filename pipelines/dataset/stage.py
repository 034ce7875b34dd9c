"""The dataset stages: shuffle, split, statistics and export, one function per asset of the
``dataset`` group (``assets/dataset.py``), memoized like the clean stages
(``pipelines.clean.stage``). The split ledger is the split stage's own state, so it is among
its outputs (checked unchanged), not its inputs.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.dataset.export import (
    ExportRefused,
    check_release_invariants,
    dataset_statistics,
    statistics_markdown,
    write_stem_export,
)
from pipelines.dataset.shuffle import choices_table, shuffle_options
from pipelines.dataset.split import SplitConfig, assign_splits, read_ledger
from pipelines.settings import BuildSettings
from pipelines.store.blocking import record_check
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake, read_lake, write_table
from pipelines.store.memo import memoized


def shuffle_stage(home: DataHome, settings: BuildSettings) -> dict:
    return memoized(
        home, "shuffle", lambda: _shuffle(home, settings),
        inputs=[lake(home, "latex")],
        outputs=[lake(home, "shuffled")],
        settings={"seed": settings.seed},
    )


def _shuffle(home: DataHome, settings: BuildSettings) -> dict:

    questions = read_lake(home, "latex")
    shuffled = shuffle_options(questions, settings.seed)
    write_table(shuffled, lake(home, "shuffled"))
    orders = shuffled.group_by("shuffle").len().sort("shuffle")
    return {"questions": shuffled.height, "option_order": dict(zip(orders["shuffle"].to_list(), orders["len"].to_list()))}


def split_ledger_path(home: DataHome) -> Path:
    return home.lake / "state" / "split_ledger.parquet"


def split_stage(home: DataHome, settings: BuildSettings) -> dict:
    # the ledger is this stage's own state: an output (checked unchanged), not an input
    return memoized(
        home, "split", lambda: _split(home, settings),
        inputs=[lake(home, "shuffled")],
        outputs=[lake(home, "questions"), lake(home, "choices"), split_ledger_path(home)],
        settings={
            "seed": settings.seed,
            "ratios": [settings.split_train, settings.split_valid, settings.split_test],
        },
    )


def _split(home: DataHome, settings: BuildSettings) -> dict:

    shuffled = read_lake(home, "shuffled")
    ledger_path = split_ledger_path(home)
    ledger = pl.read_parquet(ledger_path) if ledger_path.exists() else None
    config = SplitConfig(settings.split_train, settings.split_valid, settings.split_test, seed=settings.seed)
    with_split, new_ledger = assign_splits(shuffled, ledger, config)
    # questions whose family joined questions the ledger had put in other splits (split.py)
    moved = read_ledger(ledger).join(new_ledger, on="question_id", suffix="_now").filter(
        pl.col("split") != pl.col("split_now")
    ).join(with_split.select("question_id"), on="question_id").height
    questions = with_split.with_columns(
        pl.col("problem_image").is_not_null().alias("pic_prob"),
        pl.col("choice_images").is_not_null().alias("pic_choice"),
        pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len()).cast(pl.Int64).alias("num_choices"),
    ).select(
        "question_id", "source", "source_key", "subject", "grade", "skill", "problem", "problem_original",
        "problem_image", "pic_prob", "pic_choice", "num_choices", "choices", "choice_images", "answer_idx",
        "permutation", "shuffle", "split", "duplicate_group", "source_split", "extra",
    ).sort("question_id")
    write_table(questions, lake(home, "questions"))
    write_table(choices_table(questions), lake(home, "choices"))
    write_table(new_ledger, ledger_path)
    counts = questions.group_by("split").len()
    return {"questions": questions.height, "splits": dict(zip(counts["split"].to_list(), counts["len"].to_list())),
            "moved_by_family_merges": moved}


def statistics_stage(home: DataHome) -> tuple[pl.DataFrame, str]:

    statistics_figures(home)
    stats = read_lake(home, "dataset_statistics")
    return stats, statistics_markdown(stats)


def statistics_figures(home: DataHome) -> dict:
    """Write the Table 1 statistics unless they are up to date; returns figures with ``skipped``."""
    return memoized(
        home, "statistics", lambda: _statistics(home),
        inputs=[lake(home, "questions")],
        outputs=[lake(home, "dataset_statistics")],
    )


def _statistics(home: DataHome) -> dict:

    stats = dataset_statistics(read_lake(home, "questions"))
    write_table(stats, lake(home, "dataset_statistics"))
    return {"rows": stats.height}


def export_files(home: DataHome) -> list[Path]:
    root = home.export.parent
    return [*sorted(home.export.glob("*.parquet")), root / "index.parquet", root / "test_answer_key.jsonl"]


def export_stage(home: DataHome, settings: BuildSettings) -> dict:
    return memoized(
        home, "export", lambda: _export(home, settings),
        inputs=[lake(home, "questions")],
        outputs=lambda _: export_files(home),
        settings={"rows_per_shard": settings.rows_per_shard},
    )


def _export(home: DataHome, settings: BuildSettings) -> dict:

    try:
        result = write_stem_export(
            read_lake(home, "questions"),
            ImageStore(home.images),
            home.export.parent,
            rows_per_shard=settings.rows_per_shard,
            validate=check_release_invariants,  # the blocking check export_invariants, before publishing
        )
    except ExportRefused as exc:
        record_check(home, "export_invariants", False, str(exc))
        raise
    record_check(home, "export_invariants", True, "")
    return {"files": [p.name for p in result.files], "rows": result.rows, "path": str(result.data_dir)}
