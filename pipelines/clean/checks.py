"""Quality checks of the clean stages (``pipelines/clean/stage.py``), run as Dagster asset
checks by ``assets/clean.py``."""

from __future__ import annotations

import polars as pl

from pipelines.checks import CheckOutcome, quality_check
from pipelines.clean.latex.convert import changed_math, invalid_formulas
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.lake import read_lake
from pipelines.store.records import num_options


@quality_check(lambda h: [h.lake_path("deduplicated")])
def no_identity_twice(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    frame = read_lake(home, "deduplicated")
    repeated = frame.height - frame["question_id"].n_unique()
    return CheckOutcome(repeated == 0, f"{repeated} repeated question ids", {"repeated": repeated})


@quality_check(lambda h: [h.lake_path("deduplicated")])
def kept_questions_are_valid(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    frame = read_lake(home, "deduplicated").with_columns(num_options().alias("_k"))
    no_image = frame.filter(pl.col("problem_image").is_null() & pl.col("choice_images").is_null()).height
    bad_count = frame.filter((pl.col("_k") < 2) | (pl.col("_k") > 5)).height
    bad_answer = frame.filter((pl.col("answer_idx") < -1) | (pl.col("answer_idx") >= pl.col("_k"))).height
    ok = no_image == bad_count == bad_answer == 0
    return CheckOutcome(
        ok, "images, option counts and answers",
        {"no_image": no_image, "bad_option_count": bad_count, "answer_out_of_range": bad_answer},
    )


@quality_check(lambda h: [h.lake_path("deduplicated"), h.lake_path("latex")])
def latex_is_valid(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Every formula of the output parses, and the TeX math each text already had before the
    LaTeX stage (lake ``deduplicated``) is still in it, unchanged (lake ``latex``)."""

    frame = read_lake(home, "latex")
    texts = frame["problem"].to_list() + [c for cs in frame["choices"].drop_nulls().to_list() for c in cs]
    bad = [t for t in texts if invalid_formulas(t)]
    before = read_lake(home, "deduplicated").select("question_id", "problem", "choices")
    joined = before.join(frame.select("question_id", "problem", "choices"), on="question_id", how="left", suffix="_after")
    damaged = []
    for qid, problem, choices, problem_after, choices_after in joined.iter_rows():
        pairs = [("problem", problem, problem_after)]
        pairs += [(f"choice {i}", c, (choices_after or [])[i] if i < len(choices_after or []) else None)
                  for i, c in enumerate(choices or [])]
        for field_name, text, text_after in pairs:
            lost = changed_math(text or "", text_after or "")
            if lost:
                damaged.append({"question_id": qid, "field": field_name, "before": text, "after": text_after, "math": lost[:3]})
    return CheckOutcome(
        not bad and not damaged,
        f"{len(bad)} texts with invalid LaTeX, {len(damaged)} texts whose math changed",
        {"invalid": len(bad), "examples": bad[:5], "math_changed": len(damaged), "math_changed_examples": damaged[:5]},
    )
