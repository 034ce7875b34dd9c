"""No degenerate intervals where the data leave doubt (issue 27, point 2)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipelines.evaluation.metrics import compare_models, compute_metrics, mcnemar_exact_p
from pipelines.evaluation.smartscore import SmartScoreRules, exam_scores

SCHEMA = {
    "model": pl.String, "question_id": pl.String, "split": pl.String, "subject": pl.String,
    "grade": pl.String, "skill": pl.String, "num_choices": pl.Int64, "problem": pl.String,
    "cluster": pl.String, "prediction": pl.Int64, "confidence": pl.Float64, "correct": pl.Boolean,
}


def rows(model: str, subject: str, outcomes: list[bool], *, skill: str = "s", grade: str | None = "grade-3", prefix: str = "") -> list[dict]:
    return [
        {
            "model": model, "question_id": f"{prefix or subject}-{skill}-{i:04d}", "split": "test", "subject": subject,
            "grade": None if subject == "technology" else grade, "skill": skill, "num_choices": 4, "problem": "Which?",
            "cluster": None, "prediction": 0 if right else 1, "confidence": None, "correct": right,
        }
        for i, right in enumerate(outcomes)
    ]


def pick(frame: pl.DataFrame, metric: str, group_by: str, value: str, model: str = "m") -> dict:
    found = frame.filter(
        (pl.col("model") == model) & (pl.col("metric") == metric) & (pl.col("group_by") == group_by) & (pl.col("group_value") == value)
    )
    assert found.height == 1, (metric, group_by, value)
    return found.row(0, named=True)


def exam_frame() -> pl.DataFrame:
    rng = np.random.default_rng(4)
    data = rows("m", "technology", [False] * 4)  # 0 of 4
    data += rows("m", "engineering", (rng.random(30) < 0.6).tolist(), skill="one")  # a single scored skill
    for k in range(6):
        data += rows("m", "math", (rng.random(20) < 0.5 + 0.05 * k).tolist(), skill=f"m{k}")
    return pl.DataFrame(data, schema=SCHEMA)


@pytest.mark.parametrize("bootstrap", [0, 200])
def test_exam_intervals_are_never_degenerate(bootstrap):
    scores = exam_scores(exam_frame(), SmartScoreRules(), seed=1, bootstrap=bootstrap)
    technology = pick(scores, "exam_score", "subject", "technology")
    assert technology["value"] == 0.0 and technology["ci_low"] == 0.0
    assert technology["ci_high"] > 30.0  # Wilson's upper bound for 0/4 is 49.0, not 0
    engineering = pick(scores, "exam_score", "subject", "engineering")
    assert engineering["n"] == 1
    assert 0.0 < engineering["ci_high"] - engineering["ci_low"] < 100.0
    assert (engineering["ci_low"], engineering["ci_high"]) != (0.0, 100.0)
    # the simulation's own noise is in every simulated skill's interval
    skill = pick(scores, "exam_score", "skill", "grade-3/m0")
    assert skill["ci_low"] < skill["value"] < skill["ci_high"]
    # the macro counts technology's doubt: its upper side reaches at least technology's width / 3
    macro = pick(scores, "exam_score", "macro", "all")
    assert macro["ci_high"] - macro["value"] >= technology["ci_high"] / 3 - 1e-9
    # technology's grade row is its subject value (questions, not skills)
    assert pick(scores, "exam_score", "grade", "(none)")["value"] == technology["value"]


@pytest.mark.parametrize("bootstrap", [0, 200])
def test_accuracy_macro_gives_an_all_wrong_small_subject_its_width(bootstrap):
    rng = np.random.default_rng(2)
    data = rows("m", "technology", [False] * 5)
    for subject in ("science", "math", "engineering"):
        data += rows("m", subject, (rng.random(200) < 0.45).tolist())
    metrics = compute_metrics(pl.DataFrame(data, schema=SCHEMA), bootstrap=bootstrap, seed=1)
    small = pick(metrics, "accuracy", "subject", "technology")
    assert small["ci_low"] == 0.0 and small["ci_high"] > 40.0  # Wilson 0/5: [0, 43.4]
    macro = pick(metrics, "accuracy", "macro", "all")
    assert macro["ci_high"] - macro["value"] >= small["ci_high"] / 4 - 1e-9


def paired(subjects: dict[str, tuple[list[bool], list[bool]]]) -> pl.DataFrame:
    data = []
    for subject, (a, b) in subjects.items():
        data += rows("a", subject, a) + rows("b", subject, b)
    return pl.DataFrame(data, schema=SCHEMA)


def test_compare_never_gives_zero_width_and_agrees_with_mcnemar():
    rng = np.random.default_rng(7)
    guesses = {s: ((rng.random(300) < 0.4).tolist(), (rng.random(300) < 0.4).tolist()) for s in ("science", "math")}
    # engineering: 10 questions, a alone right on 5, b alone on none: McNemar p = 0.0625
    engineering = ([True] * 5 + [False] * 5, [False] * 10)
    same = ([True, False] * 4, [True, False] * 4)  # no discordant pair
    result = compare_models(paired({**guesses, "engineering": engineering, "technology": same}), "a", "b", "test")
    tech = result["subjects"]["technology"]
    assert tech["difference"] == 0.0 and tech["ci_low"] < 0.0 < tech["ci_high"]
    eng = result["subjects"]["engineering"]
    assert eng["mcnemar_p"] == pytest.approx(mcnemar_exact_p(5, 0)) and eng["mcnemar_p"] > 0.05
    assert not eng["significant"] and eng["ci_low"] <= 0.0
    macro = result["macro"]
    assert not macro["significant"] and macro["ci_low"] <= 0.0 <= macro["ci_high"]
    assert 0.0 < macro["mcnemar_p"] <= 1.0
    # a clear difference stays significant: 20 of 20 discordant for a (p ~ 2e-6)
    clear = compare_models(paired({"engineering": ([True] * 20 + [False] * 10, [False] * 30)}), "a", "b", "test")
    assert clear["subjects"]["engineering"]["significant"] and clear["macro"]["significant"]


def test_compare_bootstrap_changes_the_macro_interval():
    rng = np.random.default_rng(3)
    data = paired({s: ((rng.random(120) < 0.6).tolist(), (rng.random(120) < 0.5).tolist()) for s in ("science", "math", "engineering")})
    plain = compare_models(data, "a", "b", "test")
    boot = compare_models(data, "a", "b", "test", bootstrap=400, seed=2)
    assert boot["macro"]["difference"] == plain["macro"]["difference"]
    assert (boot["macro"]["ci_low"], boot["macro"]["ci_high"]) != (plain["macro"]["ci_low"], plain["macro"]["ci_high"])
    assert boot["macro"]["interval"] != plain["macro"]["interval"]
    assert boot["macro"]["ci_low"] < boot["macro"]["difference"] < boot["macro"]["ci_high"]


def test_compare_macro_significance_keeps_its_size_for_two_random_guessers():
    """Two random guessers, with a 10-question engineering subject: the macro is called
    significant in at most about 5% of simulated pairs (and one subject's test is McNemar's)."""
    from pipelines.evaluation.metrics import stratified_mcnemar_p

    assert stratified_mcnemar_p([(5, 0, 10)], seed=1) == pytest.approx(mcnemar_exact_p(5, 0))
    assert stratified_mcnemar_p([(30, 10, 100)], seed=1) == pytest.approx(mcnemar_exact_p(30, 10))
    rng = np.random.default_rng(0)
    called = 0
    trials = 60
    for _ in range(trials):
        subjects = {}
        for subject, size, options in (("science", 200, 3), ("math", 200, 3), ("engineering", 10, 2), ("technology", 30, 4)):
            subjects[subject] = ((rng.random(size) < 1 / options).tolist(), (rng.random(size) < 1 / options).tolist())
        called += compare_models(paired(subjects), "a", "b", "test")["macro"]["significant"]
    assert called / trials <= 0.05
