"""The clean stages: filter, image index, dedup and LaTeX, one function per asset of the
``clean`` group (``assets/clean.py``).

Each stage reads its inputs from the lake, calls the library, writes its outputs to the lake
and returns a small dict of figures for the asset's metadata. Every stage is memoized
(``pipelines.store.memo``): it declares its input files, the settings it depends on and its
outputs, and is skipped, writing nothing, when none of them (nor its code) changed. When it
does run, the LaTeX stage reuses the rows whose input is unchanged (``pipelines.store.row_reuse``).
"""

from __future__ import annotations

from dataclasses import asdict

import polars as pl

from pipelines.clean.dedup import DedupConfig, ImageIndex, deduplicate
from pipelines.clean.dedup.dedup import PHASES, QuestionIds, TextForms, family_groups
from pipelines.clean.dedup.graph_state import GraphState, SavedState
from pipelines.clean.dedup.phash import image_descriptors
from pipelines.clean.dedup.verdict_store import VerdictStore
from pipelines.clean.filtering import cap_per_skill, keep_multimodal
from pipelines.clean.latex.convert import convert_text, forget_conversions
from pipelines.ingest.sources import deduplicated_sources
from pipelines.progress import ForwardProgress, Log
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake, lake_files, read_lake, read_raw_questions, write_quarantine, write_table
from pipelines.store.code_deps import code_digest_of
from pipelines.store.memo import memoized
from pipelines.store.row_reuse import RowReuse, in_order_of, reuse_enabled
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


def image_index_stage(home: DataHome, log: Log | None = None) -> dict:
    """Describe every referenced image (format, size, perceptual hash); reuse known hashes.
    ``log`` is told the progress (pictures indexed of all referenced)."""
    return memoized(
        home, "image_index", lambda: _image_index(home, log),
        inputs=[lake(home, "multimodal")],
        outputs=[lake(home, "images")],
    )


# images described at once when the progress is told: about 20 parts, from 256 to 8,192 images
def _progress_batch(n: int) -> int:
    return max(256, min(8192, -(-n // 20)))


def _image_index(home: DataHome, log: Log | None = None) -> dict:

    questions = read_lake(home, "multimodal")
    wanted = referenced_images(questions)
    previous_path = lake(home, "images")
    previous = pl.read_parquet(previous_path) if previous_path.exists() else pl.DataFrame(schema=IMAGES_SCHEMA)
    if set(previous.columns) != set(IMAGES_SCHEMA):
        previous = pl.DataFrame(schema=IMAGES_SCHEMA)  # written by an older version: describe again
    known = previous.filter(pl.col("image_hash").is_in(wanted))
    todo = sorted(set(wanted) - set(known["image_hash"].to_list()))
    store = ImageStore(home.images)
    paths = [store.path(h) for h in todo]
    fresh = pl.DataFrame(schema=IMAGES_SCHEMA)
    progress = ForwardProgress("image_index", log=log)
    progress.count(known.height, len(wanted), "pictures indexed")
    if paths:
        described = image_descriptors(
            paths, batch=_progress_batch(len(paths)),
            progress=lambda done, _: progress.count(known.height + done, len(wanted), "pictures indexed"))
        fresh = pl.DataFrame(
            {
                "image_hash": todo,
                "format": [path.suffix.lstrip(".") for path in paths],
                "width": described.width,
                "height": described.height,
                "phash": described.phash,
                "path": [str(path.relative_to(home.root)) for path in paths],
                "size_bytes": [path.stat().st_size for path in paths],
                "thumbnail": [row.tobytes() for row in described.thumbnail],
                "content_phash": described.content_phash,
                "content_thumbnail": [row.tobytes() for row in described.content_thumbnail],
                "content_box": described.content_box.tolist(),
                "colours": [row.tobytes() for row in described.colours],
            },
            schema=IMAGES_SCHEMA,
        )
    table = pl.concat([known.cast(IMAGES_SCHEMA), fresh]).sort("image_hash")
    write_table(table, previous_path)
    return {"images": table.height, "hashed_now": len(todo), "reused": known.height}


def dedup_stage(home: DataHome, settings: BuildSettings, log: Log | None = None) -> dict:
    """Deduplicate, cap per skill, form families; ``log`` is told the progress (the phases of
    ``pipelines.clean.dedup.dedup.PHASES``)."""
    return memoized(
        home, "dedup", lambda: _dedup(home, settings, log),
        inputs=[lake(home, "multimodal"), lake(home, "images")],
        outputs=[
            lake(home, "deduplicated"), lake(home, "duplicates"),
            home.lake / "quarantine" / "dedup.parquet", home.lake / "quarantine" / "cap.parquet",
        ],
        settings={"cap_per_skill": settings.cap_per_skill, "seed": settings.seed},
    )


DEDUP_STATE = ("near_nodes", "near_edges", "family_nodes", "family_edges", "family_joined", "texts", "question_ids")


def dedup_state(home: DataHome, settings: BuildSettings, config: DedupConfig) -> SavedState:
    """The dedup stage's graphs (with the family edges' join results), text forms and question
    ids, kept for the next run (``graph_state``). Picture verdicts are kept apart
    (``verdict_store``): they outlive changes to everything but the verdict's own code."""
    return SavedState(home.lake / "state" / "dedup", DEDUP_STATE, {
        "settings": {"cap_per_skill": settings.cap_per_skill, "seed": settings.seed},
        "config": asdict(config),
        "code": code_digest_of(_dedup),
    })


def _joined_of(frame: pl.DataFrame):
    """The family edges' saved join results (None, so judged again, when not a Boolean column)."""
    if frame.columns != ["joined"] or frame.schema["joined"] != pl.Boolean or frame["joined"].null_count():
        return None
    return frame["joined"].to_numpy()


def _dedup(home: DataHome, settings: BuildSettings, log: Log | None = None) -> dict:

    questions = read_lake(home, "multimodal")
    images = ImageIndex.from_table(read_lake(home, "images"))
    config = DedupConfig()
    saved = dedup_state(home, settings, config)
    previous, refused = saved.load()
    texts = TextForms.from_frame(previous["texts"] if previous else None)
    question_ids = QuestionIds.from_frame(previous["question_ids"] if previous else None)
    near = GraphState(previous["near_nodes"], previous["near_edges"]) if previous else None
    progress = ForwardProgress("dedup", log=log)
    # the picture verdict reads the images from the store (content-addressed: a pair's verdict
    # never changes, so the verdicts of earlier runs, even killed ones, are reused)
    verdict_store = VerdictStore(home.lake / "state" / "verdicts")
    known, skipped = verdict_store.load() if reuse_enabled() else (None, "")
    if skipped and log is not None:
        log(f"dedup: {skipped}; their pairs are judged again")
    result = deduplicate(questions, images, config, previous=near, texts=texts, question_ids=question_ids,
                         read_image=ImageStore(home.images).get, known_verdicts=known,
                         on_verdicts=verdict_store.append,
                         distinct_sources=deduplicated_sources(questions["source"].unique().to_list()),
                         progress=progress)
    kept, over_cap = cap_per_skill(result.kept, settings.cap_per_skill, settings.seed)
    families_before = GraphState(previous["family_nodes"], previous["family_edges"],
                                 _joined_of(previous["family_joined"])) if previous else None
    families = family_groups(kept.sort("question_id"), images, config, previous=families_before, texts=texts)
    kept = families.kept
    family_sizes = kept.group_by("duplicate_group").len()["len"]
    progress.advance(PHASES["families"], f"families {family_sizes.len():,} of {kept.height:,} questions")
    write_table(kept, lake(home, "deduplicated"))
    write_table(result.duplicates.sort("kept_question_id", "source", "source_key"), lake(home, "duplicates"))
    write_quarantine(home, "dedup", result.quarantine)
    write_quarantine(home, "cap", over_cap)
    saved.save({"near_nodes": result.state.nodes, "near_edges": result.state.edges,
                "family_nodes": families.state.nodes, "family_edges": families.state.edges,
                "family_joined": pl.DataFrame({"joined": families.state.joined}, schema={"joined": pl.Boolean}),
                "texts": texts.frame(), "question_ids": question_ids.frame()})
    verdict_store.compact(result.verdicts)
    progress.advance(1.0, f"{kept.height:,} kept of {questions.height:,}", complete=True)
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
        "groups_computed": result.nodes_computed,
        "picture_verdicts": result.verdicts.height,
        "picture_verdicts_computed": result.verdicts_computed,
        "families_computed": families.nodes_computed,
        **({"reuse_refused": refused} if refused else {}),
    }


def latex_stage(home: DataHome) -> dict:
    return memoized(
        home, "latex", lambda: _latex(home),
        inputs=[lake(home, "deduplicated")],
        outputs=[lake(home, "latex"), lake(home, "latex_failures")],
    )


LATEX_READS = ("problem", "choices")
LATEX_FAILURE_SCHEMA = {"question_id": pl.String, "field": pl.String, "text": pl.String, "error": pl.String}


def _latex(home: DataHome) -> dict:
    """Convert the formulas of every question's texts; a question whose problem and choices are
    unchanged since the last run keeps its previous conversion (``pipelines.store.row_reuse``)."""
    questions = read_lake(home, "deduplicated")
    out_path, failures_path = lake(home, "latex"), lake(home, "latex_failures")
    reuse = RowReuse(home, "latex", key="question_id", columns=LATEX_READS, outputs=[out_path, failures_path],
                     code=_convert_rows)
    plan = reuse.plan(questions)
    converted, failures = _convert_rows(plan.todo)
    forget_conversions()
    if plan.reused.height:
        converted = pl.concat([plan.previous(pl.read_parquet(out_path, columns=["question_id", *LATEX_READS])),
                               converted])
        failures = pl.concat([plan.previous(pl.read_parquet(failures_path)), failures])
    converted = in_order_of(questions, converted, "question_id")
    joined = questions.with_columns(converted["problem"].alias("_problem"), converted["choices"].alias("_choices"))
    out = joined.with_columns(
        pl.col("problem").alias("problem_original"),
        pl.col("_problem").alias("problem"),
        pl.col("_choices").alias("choices"),
    ).drop("_problem", "_choices").rechunk()
    write_table(out, out_path)
    # failures in the order of the questions, a question's problem before its choices
    position = questions.select("question_id").with_row_index("_position")
    failures = failures.join(position, on="question_id").with_columns(
        pl.when(pl.col("field") == "problem").then(-1)
        .otherwise(pl.col("field").str.strip_prefix("choice ").cast(pl.Int64, strict=False)).alias("_field")
    ).sort("_position", "_field").drop("_position", "_field").rechunk()
    write_table(failures, failures_path)
    reuse.save(plan)
    return {"questions": out.height, "texts_converted": texts_converted(joined), "validation_failures": failures.height,
            **plan.figures()}


def texts_converted(joined: pl.DataFrame) -> int:
    """How many problem and option texts the conversion changed (``LatexConversion.changed``:
    the text differs), from the input columns beside the converted ``_problem`` / ``_choices``."""
    problems = int((joined["problem"] != joined["_problem"]).sum())
    options = joined.select(pl.col("choices").explode(), pl.col("_choices").explode())
    return problems + int((options["choices"] != options["_choices"]).sum())


# rows converted at a time: the Python strings of one batch are alive at once, not the whole table's
LATEX_BATCH_ROWS = 20_000


def _convert_rows(questions: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(question_id, converted problem, converted choices) and the validation failures of ``questions``."""
    if questions.height <= LATEX_BATCH_ROWS:
        return _convert_batch(questions)
    parts = [_convert_batch(questions.slice(start, LATEX_BATCH_ROWS))
             for start in range(0, questions.height, LATEX_BATCH_ROWS)]
    return pl.concat([p[0] for p in parts]), pl.concat([p[1] for p in parts])


def _convert_batch(questions: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each distinct text of the batch converted once (quiz texts repeat thousands of times),
    then mapped back onto the rows."""
    problems, choices = questions["problem"], questions["choices"]
    options = questions.filter(pl.col("choices").list.len() > 0).select(
        "question_id", pl.col("choices").alias("text"), pl.int_ranges(pl.col("choices").list.len()).alias("index"),
    ).explode("text", "index")
    if problems.null_count() or options["text"].null_count():
        return _convert_batch_row_by_row(questions)  # null texts: the converter's own answer, row by row
    texts = pl.concat([problems, options["text"]]).unique()
    results = [convert_text(text) for text in texts.to_list()]
    converted_text = pl.Series([r.text for r in results], dtype=pl.String)
    converted = pl.DataFrame({
        "question_id": questions["question_id"],
        "problem": problems.replace_strict(texts, converted_text, return_dtype=pl.String),
        "choices": choices.list.eval(pl.element().replace_strict(texts, converted_text, return_dtype=pl.String)),
    })
    failed = pl.DataFrame({"text": texts, "error": [r.error or None for r in results]},
                          schema={"text": pl.String, "error": pl.String}).drop_nulls("error")
    if not failed.height:
        return converted, pl.DataFrame(schema=LATEX_FAILURE_SCHEMA)
    # in the row-by-row order: by question, a question's problem before its choices
    row = questions.select("question_id").with_row_index("_row")
    failures = pl.concat([
        questions.select("question_id", pl.lit("problem").alias("field"), pl.col("problem").alias("text"),
                         pl.lit(-1, dtype=pl.Int64).alias("_index")),
        options.select("question_id", pl.format("choice {}", "index").alias("field"), "text",
                       pl.col("index").cast(pl.Int64).alias("_index")),
    ]).join(failed, on="text").join(row, on="question_id").sort("_row", "_index")
    return converted, failures.select(list(LATEX_FAILURE_SCHEMA)).cast(LATEX_FAILURE_SCHEMA)


def _convert_batch_row_by_row(questions: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    problems, failures, new_choices = [], [], []
    for qid, problem, choices in zip(
        questions["question_id"].to_list(), questions["problem"].to_list(), questions["choices"].to_list()
    ):
        result = convert_text(problem)
        problems.append(result.text)
        if result.error:
            failures.append({"question_id": qid, "field": "problem", "text": problem, "error": result.error})
        if choices is None:
            new_choices.append(None)
            continue
        row = []
        for i, choice in enumerate(choices):
            r = convert_text(choice)
            row.append(r.text)
            if r.error:
                failures.append({"question_id": qid, "field": f"choice {i}", "text": choice, "error": r.error})
        new_choices.append(row)
    converted = pl.DataFrame({
        "question_id": questions["question_id"],
        "problem": pl.Series("problem", problems, dtype=pl.String),
        "choices": pl.Series("choices", new_choices, dtype=pl.List(pl.String)),
    })
    return converted, pl.DataFrame(failures, schema=LATEX_FAILURE_SCHEMA)
