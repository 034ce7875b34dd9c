"""Hand-computed checks of the evaluation measures (pipelines.evaluation.metrics, reference_results)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pipelines.evaluation.metrics import (
    METRICS_SCHEMA,
    Z_95,
    MetricsInputError,
    circular_accuracy,
    compare_models,
    compute_metrics,
    mcnemar_exact_p,
    paired_comparison,
    reliability_table,
)
from pipelines.evaluation.reference_results import reference_metrics


def make_scored(rows: list[dict]) -> pl.DataFrame:
    """Fill the columns a test does not care about."""
    filled = []
    for i, row in enumerate(rows):
        base = {
            "model": "m",
            "question_id": f"{i:016x}",
            "split": "test",
            "subject": "math",
            "grade": "grade-3",
            "skill": "add",
            "num_choices": 3,
            "problem": "Which one?",
            "cluster": None,
            "prediction": 0,
            "confidence": None,
            "correct": True,
        }
        base.update(row)
        if not base["correct"] and base["prediction"] == 0 and "prediction" not in row:
            base["prediction"] = 1
        filled.append(base)
    return pl.DataFrame(
        filled,
        schema={
            "model": pl.String,
            "question_id": pl.String,
            "split": pl.String,
            "subject": pl.String,
            "grade": pl.String,
            "skill": pl.String,
            "num_choices": pl.Int64,
            "problem": pl.String,
            "cluster": pl.String,
            "prediction": pl.Int64,
            "confidence": pl.Float64,
            "correct": pl.Boolean,
        },
    )


def pick(metrics: pl.DataFrame, metric: str, group_by: str, group_value: str, model: str = "m") -> dict:
    rows = metrics.filter(
        (pl.col("model") == model)
        & (pl.col("metric") == metric)
        & (pl.col("group_by") == group_by)
        & (pl.col("group_value") == group_value)
    )
    assert rows.height == 1, (metric, group_by, group_value, rows)
    return rows.row(0, named=True)


def test_macro_is_the_mean_of_subjects_and_micro_pools_questions():
    # math: 8 questions, 2 right (25%); science: 2 questions, both right (100%)
    rows = [{"subject": "math", "correct": i < 2} for i in range(8)]
    rows += [{"subject": "science", "correct": True} for _ in range(2)]
    metrics = compute_metrics(make_scored(rows))
    assert metrics.schema == pl.Schema(METRICS_SCHEMA)
    assert pick(metrics, "accuracy", "subject", "math")["value"] == pytest.approx(25.0)
    assert pick(metrics, "accuracy", "subject", "science")["value"] == pytest.approx(100.0)
    assert pick(metrics, "accuracy", "micro", "all")["value"] == pytest.approx(40.0)
    macro = pick(metrics, "accuracy", "macro", "all")
    assert macro["value"] == pytest.approx(62.5)
    assert macro["n"] == 10
    assert 0.0 <= macro["ci_low"] < 62.5 < macro["ci_high"] <= 100.0


def test_random_expected_is_the_mean_of_one_over_k():
    rows = [{"num_choices": k, "prediction": 0, "correct": True} for k in (2, 3, 4, 5)]
    metrics = compute_metrics(make_scored(rows))
    expected = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4 * 100
    assert pick(metrics, "random_expected", "micro", "all")["value"] == pytest.approx(expected)
    assert pick(metrics, "random_expected", "num_choices", "4")["value"] == pytest.approx(25.0)
    # the paper's Table 2 random row is the macro of per-subject means
    assert pick(metrics, "random_expected", "macro", "all")["value"] == pytest.approx(expected)


def test_breakdowns_by_grade_skill_options_length_and_question_type():
    rows = [
        {"problem": "Which shape is it?", "num_choices": 2, "correct": True},
        {"problem": "which  is bigger", "num_choices": 2, "correct": False},
        {"problem": "What time? " + "w " * 30, "num_choices": 4, "correct": True},
        {"problem": "", "subject": "technology", "grade": None, "skill": "html", "correct": False},
    ]
    metrics = compute_metrics(make_scored(rows))
    assert pick(metrics, "accuracy", "question_type", "which")["value"] == pytest.approx(50.0)
    assert pick(metrics, "accuracy", "question_type", "what")["n"] == 1
    assert pick(metrics, "accuracy", "length_bucket", "0-5")["n"] == 3
    assert pick(metrics, "accuracy", "length_bucket", "21-40")["n"] == 1
    assert pick(metrics, "accuracy", "num_choices", "2")["value"] == pytest.approx(50.0)
    assert pick(metrics, "accuracy", "grade", "(none)")["n"] == 1
    assert pick(metrics, "accuracy", "skill", "grade-3/add")["n"] == 3
    assert pick(metrics, "accuracy", "skill", "html")["n"] == 1


def test_question_type_keeps_the_ten_most_frequent_first_words():
    words = [f"w{i:02d}" for i in range(12)]
    rows = []
    for rank, word in enumerate(words):
        rows += [{"problem": f"{word.upper()}, rest"} for _ in range(20 - rank)]
    metrics = compute_metrics(make_scored(rows))
    types = set(metrics.filter((pl.col("metric") == "accuracy") & (pl.col("group_by") == "question_type"))["group_value"])
    assert types == set(words[:10]) | {"other"}
    assert pick(metrics, "accuracy", "question_type", "other")["n"] == (20 - 10) + (20 - 11)


def test_failed_predictions_count_as_wrong_and_in_failed_rate():
    rows = [{"prediction": -1, "correct": False}, {"correct": True}, {"correct": False}, {"correct": True}]
    metrics = compute_metrics(make_scored(rows))
    assert pick(metrics, "accuracy", "micro", "all")["value"] == pytest.approx(50.0)
    assert pick(metrics, "failed_rate", "micro", "all")["value"] == pytest.approx(25.0)


def test_ece_and_reliability_table_by_hand():
    # bins: [0.9,1.0]: conf .95,.95 acc .5 -> gap .45 (n=2); [0.8,0.9): .85 vs 1 -> .15; [0.1,0.2): .15 vs 0 -> .15
    rows = [
        {"confidence": 0.95, "correct": True},
        {"confidence": 0.95, "correct": False},
        {"confidence": 0.85, "correct": True},
        {"confidence": 0.15, "correct": False},
        {"confidence": None, "correct": True},  # no confidence: not in ECE
    ]
    scored = make_scored(rows)
    metrics = compute_metrics(scored)
    ece = pick(metrics, "ece", "micro", "all")
    assert ece["value"] == pytest.approx((2 * 0.45 + 0.15 + 0.15) / 4 * 100)
    assert ece["n"] == 4
    table = reliability_table(scored)
    assert table["bin"].to_list() == [1, 8, 9]
    assert table.filter(pl.col("bin") == 9)["accuracy"][0] == pytest.approx(0.5)
    assert table.filter(pl.col("bin") == 9)["n"][0] == 2
    edges = reliability_table(make_scored([{"confidence": 1.0}, {"confidence": 0.0, "correct": False}]))
    assert edges["bin"].to_list() == [0, 9]


def test_no_ece_rows_without_confidences():
    metrics = compute_metrics(make_scored([{"correct": True}, {"correct": False}]))
    assert metrics.filter(pl.col("metric") == "ece").height == 0


def wilson(p: float, m: float) -> tuple[float, float]:
    z2 = Z_95**2
    denominator = 1 + z2 / m
    centre = (p + z2 / (2 * m)) / denominator
    half = Z_95 / denominator * math.sqrt(p * (1 - p) / m + z2 / (4 * m * m))
    return (centre - half) * 100, (centre + half) * 100


def test_clustered_clt_interval_equals_the_hand_computed_value():
    # clusters: A = 2 questions both right, B = 1 wrong, C = 1 right. p = 3/4.
    rows = [
        {"cluster": "A", "correct": True},
        {"cluster": "A", "correct": True},
        {"cluster": "B", "correct": False},
        {"cluster": "C", "correct": True},
    ]
    row = pick(compute_metrics(make_scored(rows)), "accuracy", "micro", "all")
    p = 0.75
    residuals = [2 - p * 2, 0 - p * 1, 1 - p * 1]
    variance = 3 / 2 * sum(r * r for r in residuals) / 4**2
    low, high = wilson(p, p * (1 - p) / variance)
    assert row["value"] == pytest.approx(75.0)
    assert row["ci_low"] == pytest.approx(low)
    assert row["ci_high"] == pytest.approx(high)


def correlated_clusters(seed: int, clusters: int = 60, size: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    outcome = rng.random(clusters) < 0.5
    rows = [{"cluster": f"img{c}", "correct": bool(outcome[c])} for c in range(clusters) for _ in range(size)]
    return make_scored(rows)


@pytest.mark.parametrize("bootstrap", [0, 400])
def test_clustered_interval_is_wider_than_unclustered_when_clusters_are_correlated(bootstrap):
    clustered = correlated_clusters(3)
    independent = clustered.with_columns(pl.lit(None, pl.String).alias("cluster"))
    wide = pick(compute_metrics(clustered, bootstrap=bootstrap), "accuracy", "micro", "all")
    narrow = pick(compute_metrics(independent, bootstrap=bootstrap), "accuracy", "micro", "all")
    assert wide["value"] == narrow["value"]
    # the design effect of 5 perfectly correlated questions per image is 5: width ~ sqrt(5) times
    ratio = (wide["ci_high"] - wide["ci_low"]) / (narrow["ci_high"] - narrow["ci_low"])
    assert 1.8 < ratio < 2.8


def test_bootstrap_is_deterministic_for_a_seed_and_close_to_the_clt():
    scored = correlated_clusters(5, clusters=200, size=3)
    first = compute_metrics(scored, bootstrap=500, seed=1)
    assert first.equals(compute_metrics(scored, bootstrap=500, seed=1))
    other_seed = compute_metrics(scored, bootstrap=500, seed=2)
    assert not first.equals(other_seed)
    boot = pick(first, "accuracy", "micro", "all")
    clt = pick(compute_metrics(scored), "accuracy", "micro", "all")
    assert boot["ci_low"] == pytest.approx(clt["ci_low"], abs=2.0)
    assert boot["ci_high"] == pytest.approx(clt["ci_high"], abs=2.0)


def test_bootstrap_interval_of_one_model_does_not_move_when_another_model_is_added():
    one = correlated_clusters(7)
    two = pl.concat([one, one.with_columns(pl.lit("other").alias("model"))])
    a = pick(compute_metrics(one, bootstrap=300, seed=4), "accuracy", "skill", "grade-3/add")
    b = pick(compute_metrics(two, bootstrap=300, seed=4), "accuracy", "skill", "grade-3/add")
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"])


def random_guessers(models: int, questions: int, seed: int) -> tuple[pl.DataFrame, float]:
    rng = np.random.default_rng(seed)
    k = rng.choice([2, 3, 4, 5], size=questions)
    cluster = [f"img{i // 2}" for i in range(questions)]
    subjects = np.array(["science", "technology", "engineering", "math"])[rng.integers(0, 4, questions)]
    frames = []
    for m in range(models):
        prediction = (rng.random(questions) * k).astype(np.int64)
        frames.append(
            pl.DataFrame(
                {
                    "model": f"random-{m}",
                    "question_id": [f"{i:016x}" for i in range(questions)],
                    "split": "test",
                    "subject": subjects,
                    "grade": "grade-1",
                    "skill": "s",
                    "num_choices": k,
                    "problem": "Which?",
                    "cluster": cluster,
                    "prediction": prediction,
                    "confidence": None,
                    "correct": prediction == 0,
                }
            )
        )
    return pl.concat(frames), float(np.mean(1.0 / k)) * 100


def test_random_guessers_intervals_cover_the_mean_of_one_over_k():
    scored, expected = random_guessers(models=100, questions=1500, seed=11)
    metrics = compute_metrics(scored)
    micro = metrics.filter((pl.col("metric") == "accuracy") & (pl.col("group_by") == "micro"))
    covered = micro.filter((pl.col("ci_low") <= expected) & (expected <= pl.col("ci_high"))).height
    # nominal 95%: 100 models cover it ~95 times; fewer than 88 would be a broken interval
    assert covered >= 88
    assert covered <= 100
    random_expected = metrics.filter((pl.col("metric") == "random_expected") & (pl.col("group_by") == "micro"))
    assert random_expected["value"].to_list() == pytest.approx([expected] * 100)


def test_circular_accuracy_needs_every_rotation_right():
    rotations = pl.DataFrame(
        {
            "model": ["m"] * 6,
            "split": ["test"] * 6,
            "subject": ["math"] * 3 + ["science"] * 3,
            "question_id": ["q1"] * 3 + ["q2"] * 3,
            "rotation": [0, 1, 2, 0, 1, 2],
            "correct": [True, True, True, True, False, True],
            "num_choices": [3] * 6,
        }
    )
    rows = circular_accuracy(rotations)
    assert pick(rows, "circular_accuracy", "micro", "all")["value"] == pytest.approx(50.0)
    assert pick(rows, "circular_accuracy", "subject", "science")["value"] == pytest.approx(0.0)
    assert pick(rows, "circular_accuracy", "macro", "all")["value"] == pytest.approx(50.0)
    with pytest.raises(MetricsInputError, match="has 2 rotation"):
        circular_accuracy(rotations.filter(~((pl.col("question_id") == "q1") & (pl.col("rotation") == 2))))
    with pytest.raises(MetricsInputError, match="duplicate rotation"):
        circular_accuracy(pl.concat([rotations, rotations.head(1)]))


def test_compute_metrics_appends_circular_rows():
    scored = make_scored([{"question_id": "q1"}])
    rotations = pl.DataFrame(
        {"model": ["m", "m"], "split": ["test"] * 2, "subject": ["math"] * 2, "question_id": ["q1"] * 2, "rotation": [0, 1], "correct": [True, False]}
    )
    metrics = compute_metrics(scored, circular=rotations)
    assert pick(metrics, "circular_accuracy", "micro", "all")["value"] == 0.0
    assert pick(metrics, "accuracy", "micro", "all")["value"] == 100.0


def test_paired_comparison_sign_counts_and_mcnemar():
    a_right = {0, 1, 2}
    b_right = {2, 3}
    rows = [{"model": "a", "question_id": f"q{i}", "correct": i in a_right} for i in range(5)]
    rows += [{"model": "b", "question_id": f"q{i}", "correct": i in b_right} for i in range(5)]
    result = paired_comparison(make_scored(rows), "a", "b", "test")
    assert result["difference"] == pytest.approx(20.0)
    assert (result["both_correct"], result["a_only"], result["b_only"], result["both_wrong"]) == (1, 2, 1, 1)
    assert result["mcnemar_p"] == pytest.approx(1.0)
    assert result["ci_low"] < 20.0 < result["ci_high"]
    reverse = paired_comparison(make_scored(rows), "b", "a", "test")
    assert reverse["difference"] == pytest.approx(-20.0)
    assert (reverse["a_only"], reverse["b_only"]) == (1, 2)
    boot = paired_comparison(make_scored(rows), "a", "b", "test", bootstrap=300, seed=1)
    assert boot["ci_low"] <= 20.0 <= boot["ci_high"]
    with pytest.raises(MetricsInputError, match="no predictions"):
        paired_comparison(make_scored(rows), "a", "zzz", "test")


def test_mcnemar_exact_p_values():
    assert mcnemar_exact_p(10, 0) == pytest.approx(2 / 1024)
    assert mcnemar_exact_p(0, 0) == 1.0
    # Bin(6, 1/2): P(X <= 1) = 7/64
    assert mcnemar_exact_p(1, 5) == pytest.approx(2 * 7 / 64)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: pl.concat([f, f.head(1)]), "duplicate prediction"),
        (lambda f: f.with_columns(pl.lit(7, pl.Int64).alias("prediction")), "out of range"),
        (lambda f: f.drop("correct"), "missing column"),
        (lambda f: f.with_columns(pl.lit(1.5).alias("confidence")), "outside"),
        (lambda f: f.with_columns(pl.lit(1, pl.Int64).alias("num_choices"), pl.lit(0, pl.Int64).alias("prediction")), "num_choices"),
        (lambda f: f.with_columns(pl.lit(-1, pl.Int64).alias("prediction"), pl.lit(True).alias("correct")), "failed prediction"),
        (lambda f: f.with_columns(pl.lit(None, pl.String).alias("subject")), "null"),
    ],
)
def test_bad_input_is_refused_with_one_line(change, message):
    scored = make_scored([{"correct": True}, {"correct": False}])
    with pytest.raises(MetricsInputError, match=message) as info:
        compute_metrics(change(scored))
    assert "\n" not in str(info.value)


def test_output_is_deterministic_and_independent_of_row_order():
    scored, _ = random_guessers(models=3, questions=300, seed=2)
    first = compute_metrics(scored)
    shuffled = scored.sample(fraction=1.0, shuffle=True, seed=9)
    assert first.equals(compute_metrics(shuffled))
    assert compute_metrics(scored.head(0)).height == 0


def test_reference_rows_hold_the_papers_tables():
    reference = reference_metrics()
    assert reference.schema == pl.Schema(METRICS_SCHEMA)
    clip = reference.filter((pl.col("model") == "paper:CLIP ViT-L/14@336px") & (pl.col("metric") == "accuracy"))
    assert dict(zip(clip["group_value"], clip["value"])) == {
        "science": 50.3,
        "technology": 68.7,
        "engineering": 55.1,
        "math": 43.6,
        "all": 54.4,
    }
    # the paper's "Average" is the macro of its subject columns (to its rounding)
    for model in reference["model"].unique():
        rows = reference.filter((pl.col("model") == model) & (pl.col("metric") == "accuracy"))
        if rows.height:
            subjects = rows.filter(pl.col("group_by") == "subject")["value"].mean()
            macro = rows.filter(pl.col("group_by") == "macro")["value"][0]
            assert macro == pytest.approx(subjects, abs=0.06)
    human = reference.filter((pl.col("model") == "paper:Human") & (pl.col("metric") == "exam_score"))
    assert sorted(human["value"]) == [68.6, 90.0, 90.0, 90.0]
    assert set(reference["split"]) == {"test"}


def test_compare_models_gives_the_macro_and_per_subject_paired_difference():
    # math: a right on 4 of 4, b on 2 of 4; science: a right on 1 of 2, b on 2 of 2
    rows = []
    for subject, a_right, b_right, size in (("math", {0, 1, 2, 3}, {0, 1}, 4), ("science", {0}, {0, 1}, 2)):
        for i in range(size):
            for model, right in (("a", a_right), ("b", b_right)):
                rows.append({"model": model, "question_id": f"{subject}{i}", "subject": subject, "correct": i in right})
    result = compare_models(make_scored(rows), "a", "b", "test")
    assert result["subjects"]["math"]["difference"] == pytest.approx(50.0)
    assert result["subjects"]["science"]["difference"] == pytest.approx(-50.0)
    assert result["macro"]["difference"] == pytest.approx(0.0)  # mean of subjects, not of questions
    assert result["micro"]["difference"] == pytest.approx(100 * (5 - 4) / 6)
    assert result["macro"]["subjects"] == 2
    assert result["macro"]["ci_low"] < 0.0 < result["macro"]["ci_high"]
    # MOVER over the subjects' intervals: each side from the subjects' distances to their bounds
    above = math.sqrt(sum((result["subjects"][s]["ci_high"] - result["subjects"][s]["difference"]) ** 2 for s in ("math", "science"))) / 2
    assert result["macro"]["ci_high"] == pytest.approx(min(100.0, above))
    assert (result["micro"]["a_only"], result["micro"]["b_only"]) == (2, 1)
    assert result["subjects"]["math"]["mcnemar_p"] == pytest.approx(mcnemar_exact_p(2, 0))
    with pytest.raises(MetricsInputError, match="no predictions"):
        compare_models(make_scored(rows), "a", "zzz", "test")


def test_every_measure_is_registered_with_its_direction_and_exam_score_is_one_of_them():
    from pipelines.evaluation.metrics import measures, register_metric
    from pipelines.evaluation.smartscore import SmartScoreRules, exam_scores

    registered = measures()
    assert {m: (r.aggregation, r.higher_is_better) for m, r in registered.items()} == {
        "accuracy": ("mean", True),
        "failed_rate": ("mean", False),
        "random_expected": ("mean", None),
        "ece": ("rows", False),
        "circular_accuracy": ("rows", True),
        "exam_score": ("rows", True),
        "accuracy_human_sample": ("rows", True),
    }
    scored, _ = random_guessers(models=2, questions=200, seed=5)
    rules = SmartScoreRules(min_questions=1)
    exam = compute_metrics(scored, seed=3, smartscore=rules).filter(pl.col("metric") == "exam_score")
    assert exam.height and exam.equals(exam_scores(scored, rules, seed=3))
    with pytest.raises(ValueError, match="registered twice"):
        register_metric(metric="accuracy", higher_is_better=True)(lambda frame: "is_failed")
    with pytest.raises(ValueError, match="aggregation"):
        register_metric(metric="median_thing", higher_is_better=True, aggregation="median")


def test_table_8_accuracy_columns_are_computed_for_models():
    from pipelines.evaluation.metrics import HUMAN_SAMPLE_SIZE
    from pipelines.evaluation.reference_results import TABLE_8_ACCURACY_METRIC

    rows = []
    for i in range(60):
        skill = "easy" if i % 2 else "hard"
        rows.append({"question_id": f"q{i:03d}", "skill": skill, "correct": skill == "easy" or i % 4 == 0})
    metrics = compute_metrics(make_scored(rows), seed=1)
    cell = pick(metrics, TABLE_8_ACCURACY_METRIC, "subject", "math")
    assert cell["n"] == HUMAN_SAMPLE_SIZE
    # each sampled question scores the skill accuracy: easy 100%, hard 50%
    easy = sum(1 for r in rows if r["skill"] == "easy")
    assert any(
        cell["value"] == pytest.approx(100.0 * k / HUMAN_SAMPLE_SIZE + 50.0 * (HUMAN_SAMPLE_SIZE - k) / HUMAN_SAMPLE_SIZE)
        for k in range(HUMAN_SAMPLE_SIZE + 1)
    )
    assert 50.0 <= cell["value"] <= 100.0 and easy == 30
