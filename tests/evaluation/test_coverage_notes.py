"""What a user is not told (issue 27, point 5): a re-import under an existing name says it
replaces it; questions a rebuild added after an import are reported as uncovered."""

from __future__ import annotations

import json

import polars as pl

from pipelines.evaluation.metrics import compute_metrics
from pipelines.evaluation.stage import coverage_gaps, coverage_rows, import_predictions_file, scored_frame
from pipelines.profiles.report import render_report
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table


def questions(count: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question_id": [f"{i:016x}" for i in range(count)],
            "split": ["test"] * count,
            "subject": ["math", "science"] * (count // 2),
            "grade": ["grade-3"] * count,
            "skill": ["add"] * count,
            "num_choices": [3] * count,
            "answer_idx": [0] * count,
            "problem": ["Which one?"] * count,
            "problem_image": [None] * count,
        },
        schema_overrides={"problem_image": pl.String},
    )


def test_reimport_says_it_replaces_and_added_questions_are_reported_uncovered(tmp_path):
    home = DataHome(tmp_path / "home")
    write_table(questions(60), home.lake_path("questions"))
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"question_id": f"{i:016x}", "prediction": 0}) + "\n" for i in range(60)))
    said: list[str] = []
    first = import_predictions_file(home, predictions, "mine", log=said.append)
    assert first["replaced"] is None and said == []
    again = import_predictions_file(home, predictions, "mine", log=said.append)
    assert again["replaced"] == {"test": 60}
    assert said == ["note: model mine was already imported (60 test predictions); this import replaces it"]

    write_table(questions(64), home.lake_path("questions"))  # a rebuild added 4 questions
    scored = scored_frame(home)
    assert coverage_gaps(scored) == [
        "imported model mine has no prediction for 4 of the 64 test questions (coverage 93.8%): they count as wrong; "
        "re-import its predictions on the current questions to score them"
    ]
    metrics = pl.concat([coverage_rows(scored), compute_metrics(scored.drop("origin", "error", "rule", "raw", "option_scores"))])
    html = render_report(metrics=metrics)
    assert "<th>coverage</th>" in html and "93.8%" in html
    assert "Coverage below 100%" in html
