"""Quality checks of the clean stages (``pipelines/clean/stage.py``), run as Dagster asset
checks by ``assets/clean.py``."""

from __future__ import annotations

import polars as pl

from pipelines.checks import CheckOutcome, quality_check
from pipelines.clean.latex.convert import changed_math, extract_math, invalid_formulas
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


_DELIMITERS = ("\\(", "\\)", "\\[", "\\]")


def source_made_invalid(problems: list[tuple[str, str]], before: str | None) -> bool:
    """Whether every invalid formula of a converted text (``invalid_formulas``) was already in
    the text before the LaTeX stage (``before``): a formula whose TeX is one of ``before``'s math
    regions (``$x$`` is written ``\\( x \\)``, its TeX unchanged), or a delimiter that
    ``before`` already leaves unmatched. The LaTeX stage validates every formula it writes, so
    such a text's invalid TeX is the source's, not damage of ours."""
    if before is None:
        return False
    source_math = set(extract_math(before))
    unmatched = None
    for formula, _ in problems:
        if formula in _DELIMITERS:
            if unmatched is None:
                unmatched = {f for f, _ in invalid_formulas(before) if f in _DELIMITERS}
            if formula not in unmatched:
                return False
        elif formula[2:-2].strip() not in source_math:
            return False
    return True


@quality_check(lambda h: [h.lake_path("deduplicated"), h.lake_path("latex")])
def latex_is_valid(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Every formula of the output parses, and the TeX math each text already had before the
    LaTeX stage (lake ``deduplicated``) is still in it, unchanged (lake ``latex``).

    Invalid TeX that the text already had before the stage (a source's broken ``$...$``) is the
    source's: counted apart (``invalid_in_source``), it does not fail the check; invalid TeX
    the stage made (``invalid``) and changed math do."""

    frame = read_lake(home, "latex").select("question_id", "problem", "choices")
    before = read_lake(home, "deduplicated").select("question_id", "problem", "choices")
    ours, theirs = [], []
    for qid, problem, choices, problem_before, choices_before in frame.join(
        before, on="question_id", how="left", suffix="_before"
    ).iter_rows():
        pairs = [("problem", problem, problem_before)]
        pairs += [(f"choice {i}", c, (choices_before or [])[i] if i < len(choices_before or []) else None)
                  for i, c in enumerate(choices or [])]
        for field_name, text, text_before in pairs:
            problems = invalid_formulas(text or "")
            if problems:
                entry = {"question_id": qid, "field": field_name, "text": text, "invalid": [f for f, _ in problems[:3]]}
                (theirs if source_made_invalid(problems, text_before) else ours).append(entry)
    joined = before.join(frame, on="question_id", how="left", suffix="_after")
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
        not ours and not damaged,
        f"{len(ours)} texts with invalid LaTeX made by the conversion, {len(damaged)} texts whose math changed; "
        f"{len(theirs)} texts whose TeX was already invalid in the source",
        {
            "invalid": len(ours), "examples": [e["text"] for e in ours[:5]],
            "invalid_in_source": len(theirs), "invalid_in_source_examples": theirs[:5],
            "math_changed": len(damaged), "math_changed_examples": damaged[:5],
        },
    )
