"""The dataset stages: shuffle, split, statistics and export, one function per asset of the
``dataset`` group (``assets/dataset.py``), memoized like the clean stages
(``pipelines.clean.stage``). The split ledger is the split stage's own state, so it is among
its outputs (checked unchanged), not its inputs. When they run, shuffle reuses the rows whose
input is unchanged (``pipelines.store.row_reuse``) and split deals only the families the ledger
does not place; figures say how many rows were reused and computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipelines.dataset.export import (
    EXPORT_MANIFEST,
    ExportRefused,
    check_release_invariants,
    dataset_statistics,
    statistics_markdown,
    write_stem_export,
)
from pipelines.dataset.dataset_card import CARD_NAME, BuildFacts
from pipelines.dataset.shuffle import choices_table, shuffle_options
from pipelines.dataset.split import SplitConfig, assign_splits, read_ledger
from pipelines.settings import BuildSettings
from pipelines.store.blocking import record_check
from pipelines.store.atomic import atomic_write_text
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake, read_lake, write_table
from pipelines.store.memo import memoized
from pipelines.store.publish import staged_export
from pipelines.store.row_reuse import RowReuse, in_order_of, reuse_enabled


def shuffle_stage(home: DataHome, settings: BuildSettings) -> dict:
    return memoized(
        home, "shuffle", lambda: _shuffle(home, settings),
        inputs=[lake(home, "latex")],
        outputs=[lake(home, "shuffled")],
        settings={"seed": settings.seed},
    )


SHUFFLE_READS = ("choices", "choice_images", "answer_idx")
SHUFFLE_WRITES = ("choices", "choice_images", "answer_idx", "permutation", "shuffle")


def _shuffle(home: DataHome, settings: BuildSettings) -> dict:
    """Shuffle every question's options; a question whose options and answer are unchanged since
    the last run with the same seed keeps its previous order (``pipelines.store.row_reuse``)."""
    questions = read_lake(home, "latex")
    out_path = lake(home, "shuffled")
    reuse = RowReuse(home, "shuffle", key="question_id", columns=SHUFFLE_READS, outputs=[out_path],
                     settings={"seed": settings.seed}, code=shuffle_options)
    plan = reuse.plan(questions)
    results = shuffle_options(plan.todo, settings.seed).select("question_id", *SHUFFLE_WRITES)
    if plan.reused.height:
        previous = plan.previous(pl.read_parquet(out_path, columns=["question_id", *SHUFFLE_WRITES]))
        results = pl.concat([previous, results])
    results = in_order_of(questions, results, "question_id")
    shuffled = questions.with_columns(results[c] for c in SHUFFLE_WRITES).rechunk()
    write_table(shuffled, out_path)
    reuse.save(plan)
    orders = shuffled.group_by("shuffle").len().sort("shuffle")
    return {"questions": shuffled.height, "option_order": dict(zip(orders["shuffle"].to_list(), orders["len"].to_list())),
            **plan.figures()}


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
    # the questions the ledger held, with their split then; moved: those whose family joined
    # questions the ledger had put in other splits (split.py)
    ledgered = with_split.select("question_id", "split").join(
        read_ledger(ledger).select("question_id", pl.col("split").alias("_split_before")), on="question_id")
    moved = int((ledgered["split"] != ledgered["_split_before"]).sum())
    questions = with_split.with_columns(
        pl.col("problem_image").is_not_null().alias("pic_prob"),
        pl.col("choice_images").is_not_null().alias("pic_choice"),
        pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len()).cast(pl.Int64).alias("num_choices"),
    ).select(
        "question_id", "source", "source_key", "subject", "grade", "skill", "problem", "problem_original",
        "problem_image", "pic_prob", "pic_choice", "num_choices", "choices", "choice_images", "answer_idx",
        "permutation", "shuffle", "split", "duplicate_group", "source_split", "extra",
    )
    if not questions["question_id"].is_sorted():  # the stages before keep question order: no copy
        questions = questions.sort("question_id")
    write_table(questions, lake(home, "questions"))
    write_table(choices_table(questions), lake(home, "choices"))
    write_table(new_ledger, ledger_path, dictionary=False)
    counts = questions.group_by("split").len()
    # the ledger's questions keep their split (looked up); the others' families are dealt
    return {"questions": questions.height, "splits": dict(zip(counts["split"].to_list(), counts["len"].to_list())),
            "moved_by_family_merges": moved, "rows_reused": ledgered.height,
            "rows_computed": questions.height - ledgered.height}


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


STATISTICS_READS = ("subject", "skill", "num_choices", "split")  # what dataset_statistics reads


def _statistics(home: DataHome) -> dict:

    stats = dataset_statistics(read_lake(home, "questions", columns=list(STATISTICS_READS)))
    write_table(stats, lake(home, "dataset_statistics"))
    return {"rows": stats.height}


def export_files(home: DataHome, root: Path | None = None) -> list[Path]:
    """The files of the live export, or of the export folder ``root`` (a staged one)."""
    root = home.export.parent if root is None else Path(root)
    return [*sorted((root / "data").glob("*.parquet")), root / "index.parquet", root / "test_answer_key.jsonl",
            root / CARD_NAME, root / EXPORT_MANIFEST]


def export_stage(home: DataHome, settings: BuildSettings, *, staged: bool = False) -> dict:
    """Write the export and publish it; with ``staged`` (the build), leave it staged for the
    warehouse step to publish with the warehouse as one version (``pipelines.store.publish``)."""
    return memoized(
        home, "export", lambda: _export(home, settings, staged),
        inputs=[lake(home, "questions"), lake(home, "duplicates")],
        outputs=lambda _: export_files(home, staged_export(home) if staged else None),
        settings={"rows_per_shard": settings.rows_per_shard, "card": _card_settings(settings)},
    )


def _card_settings(settings: BuildSettings) -> dict:
    return {"seed": settings.seed, "ratios": [settings.split_train, settings.split_valid, settings.split_test],
            "cap_per_skill": settings.cap_per_skill}


def build_facts(home: DataHome, settings: BuildSettings) -> BuildFacts:
    """What the dataset card tells about the build beside the questions (``dataset_card.py``)."""
    path = lake(home, "duplicates")
    kinds = pl.read_parquet(path, columns=["kind"])["kind"].value_counts() if path.exists() else None
    by_kind = dict(zip(kinds["kind"].to_list(), kinds["count"].to_list())) if kinds is not None else {}
    card = _card_settings(settings)
    return BuildFacts(card["seed"], tuple(card["ratios"]), card["cap_per_skill"], by_kind)


def export_shards_path(home: DataHome) -> Path:
    """The published shards' contents (``ExportResult.shards``), so unchanged ones are kept."""
    return home.lake / "state" / "export_shards.json"


def _previous_shards(home: DataHome) -> dict | None:
    if not reuse_enabled():
        return None
    try:
        record = json.loads(export_shards_path(home).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _export(home: DataHome, settings: BuildSettings, staged: bool = False) -> dict:

    try:
        result = write_stem_export(
            read_lake(home, "questions"),
            ImageStore(home.images),
            home.export.parent,
            rows_per_shard=settings.rows_per_shard,
            validate=check_release_invariants,  # the blocking check export_invariants, before publishing
            card=build_facts(home, settings),
            previous_shards=_previous_shards(home),
            conversions=home.cache / "export_png",
            staged_at=staged_export(home) if staged else None,
        )
    except ExportRefused as exc:
        record_check(home, "export_invariants", False, str(exc))
        raise
    record_check(home, "export_invariants", True, "")
    atomic_write_text(export_shards_path(home), json.dumps(result.shards, sort_keys=True, indent=1))
    return {"files": [p.name for p in result.files], "rows": result.rows, "path": str(home.export),
            "shards_written": result.shards_written, "shards_kept": result.shards_kept}
