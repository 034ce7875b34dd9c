"""A model's test figures depend only on the test questions and that model's predictions
(issue 27, point 1): scoring another split, for another model, leaves them byte-identical."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipelines.evaluation.metrics import compute_metrics

SCHEMA = {
    "model": pl.String, "question_id": pl.String, "split": pl.String, "subject": pl.String,
    "grade": pl.String, "skill": pl.String, "num_choices": pl.Int64, "problem": pl.String,
    "cluster": pl.String, "prediction": pl.Int64, "confidence": pl.Float64, "correct": pl.Boolean,
}
TEST_WORDS = ["which", "what", "how", "select", "choose", "look", "read", "find", "is", "does", "pick", "count"]
VALID_WORDS = ["identify", "complete", "compare", "use", "solve"]


def questions(split: str, count: int, words: list[str], options: list[int], seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        subject = ["science", "math", "engineering", "technology"][i % 4]
        rows.append({
            "question_id": f"{split}-{i:05d}",
            "split": split,
            "subject": subject,
            "grade": None if subject == "technology" else f"grade-{2 + i % 3}",
            "skill": f"skill-{i % 7}",
            "num_choices": int(options[i % len(options)]),
            "problem": f"{words[int(rng.integers(len(words)))]} of these is it?",
            "cluster": None,
        })
    return rows


def answers(model: str, qs: list[dict], accuracy: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for q in qs:
        correct = bool(rng.random() < accuracy)
        out.append({**q, "model": model, "prediction": 0 if correct else 1, "confidence": float(rng.random()), "correct": correct})
    return out


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA)


def test_importing_valid_predictions_of_one_model_leaves_every_test_row_of_the_others_identical():
    test_questions = questions("test", 400, TEST_WORDS, [2, 3, 4], seed=1)
    # the valid split brings other first words (they would enter a pooled top 10) and 5 options
    valid_questions = questions("valid", 300, VALID_WORDS, [5], seed=2)
    before = frame(
        answers("alpha", test_questions, 0.8, 10) + answers("beta", test_questions, 0.4, 11)
    )
    after = pl.concat([before, frame(answers("gamma", valid_questions, 0.6, 12))])
    for bootstrap in (0, 50):
        rows_before = compute_metrics(before, bootstrap=bootstrap, seed=3).filter(pl.col("split") == "test")
        rows_after = compute_metrics(after, bootstrap=bootstrap, seed=3).filter(
            (pl.col("split") == "test") & pl.col("model").is_in(["alpha", "beta"])
        )
        assert rows_before.height > 0
        assert rows_before.sort(rows_before.columns).write_csv() == rows_after.sort(rows_after.columns).write_csv()
        for metric in ("exam_score", "accuracy"):
            assert rows_before.filter(pl.col("metric") == metric).height > 0
        # byte-identical, not merely close: the same floats bit for bit
        assert rows_before.sort(rows_before.columns).equals(rows_after.sort(rows_after.columns), null_equal=True)
