"""`stemforge compare` prints the macro row's stratified McNemar p and whether the macro
difference is significant (issue 27, point 2): the macro row's p cell was blank."""

from __future__ import annotations

import polars as pl

from pipelines.evaluation.metrics import compare_models
from pipelines.orchestration.cli import format_comparison

SCHEMA = {"model": pl.String, "question_id": pl.String, "split": pl.String, "subject": pl.String, "correct": pl.Boolean}


def paired(subjects: dict[str, tuple[list[bool], list[bool]]]) -> pl.DataFrame:
    data = [
        {"model": model, "question_id": f"{subject}-{i:04d}", "split": "test", "subject": subject, "correct": right}
        for subject, outcomes in subjects.items()
        for model, answers in zip(("a", "b"), outcomes)
        for i, right in enumerate(answers)
    ]
    return pl.DataFrame(data, schema=SCHEMA)


def macro_cells(text: str) -> list[str]:
    (row,) = [line for line in text.splitlines() if line.lstrip("| ").startswith("macro (")]
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_compare_prints_the_macro_p_and_its_verdict():
    # 10 engineering questions, a alone right on 5: p = 0.0625, not significant
    doubtful = compare_models(paired({"engineering": ([True] * 5 + [False] * 5, [False] * 10),
                                      "math": ([True, False] * 10, [True, False] * 10)}), "a", "b", "test")
    text = format_comparison(doubtful)
    macro = doubtful["macro"]
    assert macro_cells(text)[-1] == f"{macro['mcnemar_p']:.3g}" != ""
    assert not macro["significant"]
    assert f"macro difference {macro['difference']:+.1f}: not significant at 95%" in text
    # 20 of 20 discordant questions for a: significant
    clear = compare_models(paired({"engineering": ([True] * 20 + [False] * 10, [False] * 30)}), "a", "b", "test")
    text = format_comparison(clear)
    assert clear["macro"]["significant"]
    assert macro_cells(text)[-1] == f"{clear['macro']['mcnemar_p']:.3g}"
    assert f"macro difference {clear['macro']['difference']:+.1f}: significant at 95%" in text
