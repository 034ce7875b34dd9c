"""The paper's reported results, as rows of the ``metrics`` schema (percents, split 'test').

Source: "Measuring Vision-Language STEM Skills of Neural Models" (ICLR 2024),
/work/shared/papers/stem-iclr2024.txt, and REFERENCE.md section 1. Model names carry the
prefix ``paper:``. The paper gives no intervals or counts, so ``n``, ``ci_low`` and
``ci_high`` are null. ``macro`` rows are the paper's "Average" column where it prints one.
"""

from __future__ import annotations

import polars as pl

from pipelines.evaluation.metrics import METRICS_SCHEMA

PAPER_PREFIX = "paper:"
SUBJECT_ORDER = ("science", "technology", "engineering", "math")

# Table 2: accuracy (%) on the test split; columns Science / Technology / Engineering / Math / Average.
TABLE_2_ACCURACY: dict[str, tuple[float, float, float, float, float]] = {
    "Random Guesses": (38.6, 25.0, 44.9, 39.1, 36.9),
    "GPT-3.5-Turbo": (50.1, 26.3, 74.6, 45.0, 49.0),
    "UNITER": (50.8, 34.6, 55.1, 43.2, 45.9),
    "CLIP RN50x64": (50.9, 70.0, 55.5, 43.2, 54.9),
    "CLIP ViT-L/14@336px": (50.3, 68.7, 55.1, 43.6, 54.4),
    "CLIP ViT-L/14@336px + finetuning": (87.0, 71.9, 67.7, 78.4, 76.3),
}

# Table 8 (comparison with humans), exam score columns Science / Engineering / Math / Technology
# (Technology's "exam score" is Triviaplaza's average human accuracy, and the models' accuracy).
TABLE_8_EXAM_SCORE: dict[str, dict[str, float]] = {
    "Human": {"science": 90.0, "engineering": 90.0, "math": 90.0, "technology": 68.6},
    "Random": {"science": 26.7, "engineering": 16.1, "math": 51.1, "technology": 25.0},
    "CLIP finetuning": {"science": 57.8, "engineering": 37.4, "math": 75.7, "technology": 71.9},
}

# Table 8, accuracy columns Science / Technology / Engineering / Math: humans (7 Ph.D. students)
# on 20 sampled problems per subject; models scored by their skill accuracy on those problems.
TABLE_8_ACCURACY: dict[str, dict[str, float]] = {
    "Human": {"science": 90.7, "technology": 62.9, "engineering": 86.4, "math": 92.1},
    "Random": {"science": 38.3, "technology": 25.0, "engineering": 40.0, "math": 36.8},
    "CLIP finetuning": {"science": 91.9, "technology": 62.6, "engineering": 60.3, "math": 83.5},
}

# Table 8's human-comparison accuracies were measured on a 20-question sample per subject, a
# different set from Table 2's full test split; their rows say so in the metric name.
TABLE_8_ACCURACY_METRIC = "accuracy_human_sample"


def _row(model: str, metric: str, group_by: str, group_value: str, value: float) -> dict[str, object]:
    return {
        "model": PAPER_PREFIX + model,
        "split": "test",
        "metric": metric,
        "group_by": group_by,
        "group_value": group_value,
        "value": float(value),
        "n": None,
        "ci_low": None,
        "ci_high": None,
    }


def reference_metrics() -> pl.DataFrame:
    """Table 2 and Table 8 rows in the ``metrics`` schema."""
    rows: list[dict[str, object]] = []
    for model, values in TABLE_2_ACCURACY.items():
        for subject, value in zip(SUBJECT_ORDER, values[:4]):
            rows.append(_row(model, "accuracy", "subject", subject, value))
        rows.append(_row(model, "accuracy", "macro", "all", values[4]))
    for model, scores in TABLE_8_EXAM_SCORE.items():
        for subject in SUBJECT_ORDER:
            rows.append(_row(model, "exam_score", "subject", subject, scores[subject]))
    for model, scores in TABLE_8_ACCURACY.items():
        for subject in SUBJECT_ORDER:
            rows.append(_row(model, TABLE_8_ACCURACY_METRIC, "subject", subject, scores[subject]))
    return pl.DataFrame(rows, schema=METRICS_SCHEMA)
