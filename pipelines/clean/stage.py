"""The clean stages: filter, image index, dedup and LaTeX, one function per asset of the
``clean`` group (``assets/clean.py``).

Each stage reads its inputs from the lake, calls the library, writes its outputs to the lake
and returns a small dict of figures for the asset's metadata. Every stage is memoized
(``pipelines.store.memo``): it declares its input files, the settings it depends on and its
outputs, and is skipped, writing nothing, when none of them (nor its code) changed.
"""

from __future__ import annotations

import polars as pl
from PIL import Image

from pipelines.clean.dedup import DedupConfig, ImageIndex, deduplicate, figure_families
from pipelines.clean.dedup.phash import image_descriptors
from pipelines.clean.filtering import cap_per_skill, keep_multimodal
from pipelines.clean.latex.convert import convert_text
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake, lake_files, read_lake, read_raw_questions, write_quarantine, write_table
from pipelines.store.memo import memoized
from pipelines.store.records import IMAGES_SCHEMA


def filter_stage(home: DataHome) -> dict:
    return memoized(
        home, "filter", lambda: _filter(home),
        inputs=lake_files(home, "raw_questions/*.parquet"),
        outputs=[lake(home, "multimodal"), home.lake / "quarantine" / "filter.parquet"],
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
    )


def _image_index(home: DataHome) -> dict:

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
    )


def _dedup(home: DataHome, settings: BuildSettings) -> dict:

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
    )


def _latex(home: DataHome) -> dict:

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
