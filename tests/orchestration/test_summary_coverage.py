"""The build summary names each model whose coverage is below 100% and says that the questions
it has no prediction for count as wrong (issue 27, point 5): a rebuild that added questions
dropped an imported model's macro with no word in the summary."""

from __future__ import annotations

import json

import polars as pl

from pipelines.evaluation.metrics import compute_metrics
from pipelines.evaluation.stage import coverage_rows, import_predictions_file, scored_frame
from pipelines.orchestration.run import warehouse_summary
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.warehouse import publish_warehouse


def questions(count: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question_id": [f"{i:016x}" for i in range(count)],
            "source": ["demo"] * count,
            "source_key": [f"k{i}" for i in range(count)],
            "split": ["test"] * count,
            "subject": ["math", "science"] * (count // 2),
            "grade": ["grade-3"] * count,
            "skill": ["add"] * count,
            "problem": ["Which one?"] * count,
            "problem_image": [None] * count,
            "pic_prob": [False] * count,
            "pic_choice": [False] * count,
            "num_choices": [3] * count,
            "answer_idx": [0] * count,
            "duplicate_group": [f"g{i}" for i in range(count)],
        },
        schema_overrides={"problem_image": pl.String},
    )


def summary_after_metrics(home: DataHome) -> str:
    scored = scored_frame(home)
    metrics = pl.concat([coverage_rows(scored), compute_metrics(scored.drop("origin", "error", "rule", "raw", "option_scores"))],
                        how="vertical_relaxed")
    write_table(metrics, home.lake_path("metrics"))
    publish_warehouse(home, force=True)
    return "\n".join(warehouse_summary(home))


def test_summary_reports_coverage_below_100_and_that_uncovered_questions_count_as_wrong(tmp_path):
    home = DataHome(tmp_path / "home")
    write_table(questions(60), home.lake_path("questions"))
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"question_id": f"{i:016x}", "prediction": 0}) + "\n" for i in range(60)))
    import_predictions_file(home, predictions, "mine")

    full = summary_after_metrics(home)
    assert "coverage" not in full and "count as wrong" not in full

    write_table(questions(64), home.lake_path("questions"))  # a rebuild added 4 questions
    text = summary_after_metrics(home)
    lines = text.splitlines()
    (row,) = [line for line in lines if line.split()[:2] == ["mine", "test"] and "%" in line]
    assert row.split()[2:] == ["93.8%", "(4", "of", "64", "without", "a", "prediction)"]
    assert "coverage below 100% (keyed questions with a prediction):" in lines
    assert sum("count as wrong" in line for line in lines) == 1
