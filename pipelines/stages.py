"""The offline stages between the raw store and the warehouse, one function per asset.

Each function reads its inputs from the lake, calls the library, writes its outputs to
the lake and returns a small dict of figures for the asset's metadata. They need no
Dagster and are what the assets, the benchmarks and the tests call.

Every stage is memoized (``pipelines/incremental.py``): it declares its input files, the
settings and library files it depends on and its outputs, and is skipped, writing
nothing, when none of them changed since its last run; its figures then carry
``skipped: True``. The split ledger is the split stage's own state, so it is among its
outputs (checked unchanged), not its inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from PIL import Image

from .filtering import cap_per_skill, keep_multimodal
from .home import DataHome
from .images import ImageStore
from .incremental import lake_files, memoized
from .lake import empty_frame, write_table
from .records import QUARANTINE_SCHEMA, RAW_QUESTION_SCHEMA
from .settings import BuildSettings

IMAGES_SCHEMA = {
    "image_hash": pl.String,
    "format": pl.String,
    "width": pl.Int64,
    "height": pl.Int64,
    "phash": pl.UInt64,
    "path": pl.String,
    "size_bytes": pl.Int64,
    "thumbnail": pl.Binary,  # 16x16 grey thumbnail: confirms near-equal images beyond the 64-bit hash
    # the figure without its margins (dedup/phash.py): a re-scanned or re-cropped copy matches it
    "content_phash": pl.UInt64,
    "content_thumbnail": pl.Binary,  # 16x16 RGB
    "content_box": pl.List(pl.UInt16),  # [left, top, right, bottom], permille of the page
    "colours": pl.Binary,  # colour histogram: a green and a teal square differ here, not in grey
}


def lake(home: DataHome, name: str) -> Path:
    return home.lake_path(name)


def read_lake(home: DataHome, name: str) -> pl.DataFrame:
    path = lake(home, name)
    if not path.exists():
        raise FileNotFoundError(f"lake table {name} is missing at {path}; materialize its asset first")
    return pl.read_parquet(path)


def write_quarantine(home: DataHome, stage: str, frame: pl.DataFrame) -> int:
    frame = frame.select(QUARANTINE_SCHEMA.names).sort("source", "source_key", "reason")
    write_table(frame, home.lake / "quarantine" / f"{stage}.parquet")
    return frame.height


def read_raw_questions(home: DataHome) -> pl.DataFrame:
    files = sorted((home.lake / "raw_questions").glob("*.parquet"))
    if not files:
        return empty_frame(RAW_QUESTION_SCHEMA)
    return pl.concat([pl.read_parquet(f) for f in files], how="vertical").sort("source", "source_key")


# ---- clean ---------------------------------------------------------------------------

def filter_stage(home: DataHome) -> dict:
    return memoized(
        home, "filter", lambda: _filter(home),
        inputs=lake_files(home, "raw_questions/*.parquet"),
        outputs=[lake(home, "multimodal"), home.lake / "quarantine" / "filter.parquet"],
        code=("filtering.py", "stages.py", "records.py"),
    )


def _filter(home: DataHome) -> dict:
    raw = read_raw_questions(home)
    kept, dropped = keep_multimodal(raw)
    write_table(kept, lake(home, "multimodal"))
    write_quarantine(home, "filter", dropped)
    return {"raw": raw.height, "kept": kept.height, "text_only_dropped": dropped.height}


def referenced_images(questions: pl.DataFrame) -> list[str]:
    singles = questions["problem_image"].drop_nulls()
    multi = questions["choice_images"].drop_nulls().explode().drop_nulls()
    return sorted(set(singles.to_list()) | set(multi.to_list()))


def image_index_stage(home: DataHome) -> dict:
    """Describe every referenced image (format, size, perceptual hash); reuse known hashes."""
    return memoized(
        home, "image_index", lambda: _image_index(home),
        inputs=[lake(home, "multimodal")],
        outputs=[lake(home, "images")],
        code=("dedup/phash.py", "images.py", "stages.py"),
    )


def _image_index(home: DataHome) -> dict:
    from .dedup.phash import image_descriptors

    questions = read_lake(home, "multimodal")
    wanted = referenced_images(questions)
    previous_path = lake(home, "images")
    previous = pl.read_parquet(previous_path) if previous_path.exists() else pl.DataFrame(schema=IMAGES_SCHEMA)
    if set(previous.columns) != set(IMAGES_SCHEMA):
        previous = pl.DataFrame(schema=IMAGES_SCHEMA)  # written by an older version: describe again
    known = previous.filter(pl.col("image_hash").is_in(wanted))
    todo = sorted(set(wanted) - set(known["image_hash"].to_list()))
    store = ImageStore(home.images)
    rows = []
    paths = [store.path(h) for h in todo]
    described = image_descriptors(paths) if paths else None
    for i, (image_hash, path) in enumerate(zip(todo, paths)):
        with Image.open(path) as im:
            width, height = im.size
        rows.append(
            {
                "image_hash": image_hash,
                "format": path.suffix.lstrip("."),
                "width": width,
                "height": height,
                "phash": int(described.phash[i]),
                "path": str(path.relative_to(home.root)),
                "size_bytes": path.stat().st_size,
                "thumbnail": described.thumbnail[i].tobytes(),
                "content_phash": int(described.content_phash[i]),
                "content_thumbnail": described.content_thumbnail[i].tobytes(),
                "content_box": described.content_box[i].tolist(),
                "colours": described.colours[i].tobytes(),
            }
        )
    fresh = pl.DataFrame(rows, schema=IMAGES_SCHEMA)
    table = pl.concat([known.cast(IMAGES_SCHEMA), fresh]).sort("image_hash")
    write_table(table, previous_path)
    return {"images": table.height, "hashed_now": len(todo), "reused": known.height}


def dedup_stage(home: DataHome, settings: BuildSettings) -> dict:
    return memoized(
        home, "dedup", lambda: _dedup(home, settings),
        inputs=[lake(home, "multimodal"), lake(home, "images")],
        outputs=[
            lake(home, "deduplicated"), lake(home, "duplicates"),
            home.lake / "quarantine" / "dedup.parquet", home.lake / "quarantine" / "cap.parquet",
        ],
        settings={"cap_per_skill": settings.cap_per_skill, "seed": settings.seed},
        code=("dedup", "latex.py", "filtering.py", "stages.py"),
    )


def _dedup(home: DataHome, settings: BuildSettings) -> dict:
    from .dedup import DedupConfig, ImageIndex, deduplicate, figure_families

    questions = read_lake(home, "multimodal")
    images = ImageIndex.from_table(read_lake(home, "images"))
    result = deduplicate(questions, images, DedupConfig())
    kept, over_cap = cap_per_skill(result.kept, settings.cap_per_skill, settings.seed)
    kept = figure_families(kept.sort("question_id"), images, DedupConfig())
    family_sizes = kept.group_by("duplicate_group").len()["len"]
    write_table(kept, lake(home, "deduplicated"))
    write_table(result.duplicates.sort("kept_question_id", "source", "source_key"), lake(home, "duplicates"))
    write_quarantine(home, "dedup", result.quarantine)
    write_quarantine(home, "cap", over_cap)
    kinds = result.duplicates.group_by("kind").len().sort("kind")
    return {
        "input": questions.height,
        "kept": kept.height,
        "duplicates": result.duplicates.height,
        "duplicates_by_kind": dict(zip(kinds["kind"].to_list(), kinds["len"].to_list())),
        "conflicts_quarantined": result.quarantine.height,
        "over_cap": over_cap.height,
        "families": family_sizes.len(),
        "questions_in_shared_families": int(family_sizes.filter(family_sizes > 1).sum()),
    }


def latex_stage(home: DataHome) -> dict:
    return memoized(
        home, "latex", lambda: _latex(home),
        inputs=[lake(home, "deduplicated")],
        outputs=[lake(home, "latex"), lake(home, "latex_failures")],
        code=("latex.py", "stages.py"),
    )


def _latex(home: DataHome) -> dict:
    from .latex import convert_text

    questions = read_lake(home, "deduplicated")
    problems, failures, converted = [], [], 0
    new_choices = []
    for qid, problem, choices in zip(
        questions["question_id"].to_list(), questions["problem"].to_list(), questions["choices"].to_list()
    ):
        result = convert_text(problem)
        problems.append(result.text)
        converted += int(result.changed)
        if result.error:
            failures.append({"question_id": qid, "field": "problem", "text": problem, "error": result.error})
        if choices is None:
            new_choices.append(None)
            continue
        row = []
        for i, choice in enumerate(choices):
            r = convert_text(choice)
            row.append(r.text)
            converted += int(r.changed)
            if r.error:
                failures.append({"question_id": qid, "field": f"choice {i}", "text": choice, "error": r.error})
        new_choices.append(row)
    out = questions.with_columns(
        pl.col("problem").alias("problem_original"),
        pl.Series("problem", problems, dtype=pl.String),
        pl.Series("choices", new_choices, dtype=pl.List(pl.String)),
    )
    write_table(out, lake(home, "latex"))
    failure_frame = pl.DataFrame(
        failures, schema={"question_id": pl.String, "field": pl.String, "text": pl.String, "error": pl.String}
    )
    write_table(failure_frame, lake(home, "latex_failures"))
    return {"questions": out.height, "texts_converted": converted, "validation_failures": len(failures)}


# ---- dataset -------------------------------------------------------------------------

def shuffle_stage(home: DataHome, settings: BuildSettings) -> dict:
    return memoized(
        home, "shuffle", lambda: _shuffle(home, settings),
        inputs=[lake(home, "latex")],
        outputs=[lake(home, "shuffled")],
        settings={"seed": settings.seed},
        code=("shuffle.py", "option_order.py", "stages.py"),
    )


def _shuffle(home: DataHome, settings: BuildSettings) -> dict:
    from .shuffle import shuffle_options

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
        code=("split.py", "shuffle.py", "option_order.py", "stages.py"),
    )


def _split(home: DataHome, settings: BuildSettings) -> dict:
    from .shuffle import choices_table
    from .split import SplitConfig, assign_splits, read_ledger

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
    from .export import statistics_markdown

    statistics_figures(home)
    stats = read_lake(home, "dataset_statistics")
    return stats, statistics_markdown(stats)


def statistics_figures(home: DataHome) -> dict:
    """Write the Table 1 statistics unless they are up to date; returns figures with ``skipped``."""
    return memoized(
        home, "statistics", lambda: _statistics(home),
        inputs=[lake(home, "questions")],
        outputs=[lake(home, "dataset_statistics")],
        code=("export.py", "stages.py"),
    )


def _statistics(home: DataHome) -> dict:
    from .export import dataset_statistics

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
        code=("export.py", "stages.py"),
    )


def _export(home: DataHome, settings: BuildSettings) -> dict:
    from .blocking import record_check
    from .export import ExportRefused, check_release_invariants, write_stem_export

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


def quarantine_summary(home: DataHome) -> dict:
    files = sorted((home.lake / "quarantine").glob("*.parquet"))
    if not files:
        return {}
    frame = pl.concat([pl.read_parquet(f) for f in files])
    counts = frame.group_by("stage").len().sort("stage")
    return dict(zip(counts["stage"].to_list(), counts["len"].to_list()))


def dumps(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)
