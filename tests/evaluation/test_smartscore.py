"""The SmartScore exam simulation (pipelines.evaluation.smartscore), checked step by step."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipelines.evaluation.metrics import METRICS_SCHEMA, MetricsInputError
from pipelines.evaluation.smartscore import (
    SmartScoreRules,
    exam_scores,
    session_orders,
    simulate_session,
    simulate_sessions,
)

RULES = SmartScoreRules()


def test_trajectory_step_by_step():
    answers = [True, True, True, True, True, False, True, False, False]
    # 0 +10 +10 +10 +10 +10 = 50; wrong at 50 (< 60): -3 -> 47; right at 47 (< 50): +10 -> 57;
    # wrong at 57: -3 -> 54; wrong at 54: -3 -> 51
    assert simulate_session(answers, RULES) == [10, 20, 30, 40, 50, 47, 57, 54, 51]


def test_bands_near_the_top_and_mastery_stops_the_session():
    trajectory = simulate_session([True] * 40, RULES)
    # +10 x5 to 50, +5 x6 to 80, +2 x5 to 90, +1 x10 to 100, then the session ends
    assert trajectory[:5] == [10, 20, 30, 40, 50]
    assert trajectory[5:11] == [55, 60, 65, 70, 75, 80]
    assert trajectory[11:16] == [82, 84, 86, 88, 90]
    assert trajectory[-1] == 100 and len(trajectory) == 26
    # a miss at 90 costs 8, at 82 costs 7, at 65 costs 5
    assert simulate_session([True] * 16 + [False], RULES)[-1] == 82
    assert simulate_session([True] * 12 + [False], RULES)[-1] == 75
    assert simulate_session([True] * 8 + [False], RULES)[-1] == 60


def test_floor_and_budget():
    assert simulate_session([False, False, True, False], RULES) == [0, 0, 10, 7]
    short = SmartScoreRules(budget=3)
    assert simulate_session([True] * 10, short) == [10, 20, 30]


def test_custom_rules_and_validation():
    flat = SmartScoreRules(correct_steps=((0, 25),), wrong_steps=((0, -10),))
    assert simulate_session([True, True, False, True, True, True], flat) == [25, 50, 40, 65, 90, 100]
    with pytest.raises(MetricsInputError):
        SmartScoreRules(correct_steps=((10, 5),))  # does not cover the floor
    with pytest.raises(MetricsInputError):
        SmartScoreRules(wrong_steps=((0, -1), (50, -2), (50, -3)))
    with pytest.raises(MetricsInputError):
        SmartScoreRules(budget=0)
    assert any("proprietary" in line for line in RULES.describe())


def test_vectorized_sessions_match_the_scalar_simulation():
    rng = np.random.default_rng(0)
    answers = (rng.random((300, 70)) < rng.random((300, 1))).astype(np.int8)
    answers[rng.random(answers.shape) < 0.1] = -1  # skipped: no question / no answer
    final, answered = simulate_sessions(answers, RULES)
    for row in range(answers.shape[0]):
        sequence = [bool(a) for a in answers[row] if a != -1]
        trajectory = simulate_session(sequence, RULES)
        assert final[row] == (trajectory[-1] if trajectory else 0)
        assert answered[row] == len(trajectory)


def skill_frame(models: dict[str, list[bool]], skill: str = "add", subject: str = "math", grade: str | None = "grade-2", prefix: str = "") -> pl.DataFrame:
    rows = []
    for model, outcomes in models.items():
        for i, correct in enumerate(outcomes):
            rows.append(
                {
                    "model": model,
                    "question_id": f"{prefix}{i:06d}",
                    "split": "test",
                    "subject": subject,
                    "grade": grade,
                    "skill": skill,
                    "correct": correct,
                }
            )
    return pl.DataFrame(rows, schema={"model": pl.String, "question_id": pl.String, "split": pl.String, "subject": pl.String, "grade": pl.String, "skill": pl.String, "correct": pl.Boolean})


def test_session_orders_draw_without_replacement_and_depend_on_the_seed():
    questions = skill_frame({"m": [True] * 30}).select(
        "split", "subject", pl.col("grade").alias("grade_key"), pl.col("skill").alias("skill_key"), "question_id"
    )
    exams, index = session_orders(questions, RULES, seed=1)
    assert exams.height == 1
    assert index.shape == (RULES.sessions, RULES.budget)
    for row in index:
        drawn = row[row >= 0]
        assert len(drawn) == 30 and len(set(drawn.tolist())) == 30
    assert len({tuple(r) for r in index.tolist()}) > 1  # sessions differ
    _, again = session_orders(questions, RULES, seed=1)
    _, other = session_orders(questions, RULES, seed=2)
    assert np.array_equal(index, again) and not np.array_equal(index, other)


def pick(frame: pl.DataFrame, model: str, group_by: str, group_value: str) -> dict:
    rows = frame.filter((pl.col("model") == model) & (pl.col("group_by") == group_by) & (pl.col("group_value") == group_value))
    assert rows.height == 1
    return rows.row(0, named=True)


def test_exam_scores_per_skill_subject_grade_and_macro():
    perfect = [True] * 40
    hopeless = [False] * 40
    scored = pl.concat(
        [
            skill_frame({"good": perfect, "bad": hopeless}, skill="add", grade="grade-2", prefix="a"),
            skill_frame({"good": [True] * 10, "bad": hopeless[:10]}, skill="count", grade="grade-1", prefix="c"),
            skill_frame({"good": [True, True, False, True], "bad": [False] * 4}, skill="html", subject="technology", grade=None, prefix="t"),
        ]
    )
    scores = exam_scores(scored, RULES, seed=3)
    assert scores.schema == pl.Schema(METRICS_SCHEMA)
    assert set(scores["metric"]) == {"exam_score"}
    assert pick(scores, "good", "skill", "grade-2/add")["value"] == 100.0  # reaches mastery in 26 questions
    # questions run out after 10: +10 x5, +5 x5
    assert pick(scores, "good", "skill", "grade-1/count")["value"] == 75.0
    assert pick(scores, "bad", "skill", "grade-2/add")["value"] == 0.0
    # technology: the paper uses accuracy (Triviaplaza has no SmartScore)
    assert pick(scores, "good", "skill", "html")["value"] == 75.0
    assert pick(scores, "good", "subject", "math")["value"] == pytest.approx(87.5)
    assert pick(scores, "good", "subject", "math")["n"] == 2
    assert pick(scores, "good", "grade", "grade-1")["value"] == 75.0
    assert pick(scores, "good", "grade", "(none)")["value"] == 75.0
    assert pick(scores, "good", "macro", "all")["value"] == pytest.approx((87.5 + 75.0) / 2)
    math_row = pick(scores, "good", "subject", "math")
    assert math_row["ci_low"] <= 87.5 <= math_row["ci_high"]
    assert scores.equals(exam_scores(scored.reverse(), RULES, seed=3))


def test_exam_scores_all_models_sit_the_same_exams():
    rng = np.random.default_rng(5)
    outcomes = (rng.random(60) < 0.6).tolist()
    scored = skill_frame({"a": outcomes, "b": outcomes})
    scores = exam_scores(scored, RULES, seed=9)
    assert pick(scores, "a", "skill", "grade-2/add")["value"] == pick(scores, "b", "skill", "grade-2/add")["value"]
    boot = exam_scores(scored, RULES, seed=9, bootstrap=200)
    assert boot.filter(pl.col("group_by") == "skill")["value"].to_list() == scores.filter(pl.col("group_by") == "skill")["value"].to_list()


def test_exam_scores_refuse_bad_input():
    scored = skill_frame({"a": [True, False]})
    with pytest.raises(MetricsInputError, match="missing"):
        exam_scores(scored.drop("skill"), RULES)
    moved = pl.concat([scored, scored.head(1).with_columns(pl.lit("other").alias("skill"), pl.lit("b").alias("model"))])
    with pytest.raises(MetricsInputError, match="two different skills"):
        exam_scores(moved, RULES)
    assert exam_scores(scored.head(0), RULES).height == 0


def test_rules_round_trip_through_a_config_mapping():
    data = {"correct_steps": [[0, 20], [50, 5]], "wrong_steps": [[0, -4]], "budget": 30, "accuracy_subjects": []}
    rules = SmartScoreRules.from_mapping(data)
    assert rules.correct_steps == ((0, 20), (50, 5)) and rules.accuracy_subjects == ()
    assert SmartScoreRules.from_mapping(RULES.as_dict()) == RULES
    with pytest.raises(MetricsInputError, match="unknown"):
        SmartScoreRules.from_mapping({"bonus": 3})


def test_technology_subject_score_is_the_subject_accuracy_as_in_table_8():
    # html 3 of 6, css 2 of 2: the mean of skill accuracies would be 75, the subject accuracy is 5/8
    scored = pl.concat(
        [
            skill_frame({"m": [True, False, True, False, True, False]}, skill="html", subject="technology", grade=None, prefix="h"),
            skill_frame({"m": [True, True]}, skill="css", subject="technology", grade=None, prefix="c"),
        ]
    )
    scores = exam_scores(scored, RULES, seed=1)
    tech = pick(scores, "m", "subject", "technology")
    assert tech["value"] == pytest.approx(62.5)
    assert tech["n"] == 8  # questions
    assert tech["ci_low"] < 62.5 < tech["ci_high"]
    assert pick(scores, "m", "skill", "css")["value"] == 100.0  # skills still get their accuracy
    boot = exam_scores(scored, RULES, seed=1, bootstrap=200)
    assert pick(boot, "m", "subject", "technology")["value"] == pytest.approx(62.5)


def test_skills_below_the_minimum_of_questions_are_not_scored():
    scored = pl.concat(
        [
            skill_frame({"m": [True] * 40}, skill="add", prefix="a"),
            skill_frame({"m": [True] * 4}, skill="tiny", prefix="t"),  # capped at 40 points: left out
        ]
    )
    scores = exam_scores(scored, RULES, seed=1)
    assert scores.filter(pl.col("group_value") == "grade-2/tiny").height == 0
    math = pick(scores, "m", "subject", "math")
    assert math["value"] == 100.0 and math["n"] == 1
    lenient = exam_scores(scored, SmartScoreRules(min_questions=1), seed=1)
    assert pick(lenient, "m", "subject", "math")["n"] == 2
    assert pick(lenient, "m", "skill", "grade-2/tiny")["value"] == 40.0
    assert exam_scores(skill_frame({"m": [True] * 3}), RULES, seed=1).height == 0
    with pytest.raises(MetricsInputError, match="min_questions"):
        SmartScoreRules(min_questions=0)
    assert any("fewer than 5 questions" in line for line in RULES.describe())


def test_paper_skill_sampling_is_seeded_and_takes_the_paper_sizes():
    frames = [skill_frame({"a": [True] * 5, "b": [False] * 5}, skill=f"m{i:02d}", prefix=f"m{i:02d}") for i in range(50)]
    frames += [skill_frame({"a": [True] * 5, "b": [False] * 5}, skill=f"s{i:02d}", subject="science", prefix=f"s{i:02d}") for i in range(35)]
    frames += [skill_frame({"a": [True] * 5, "b": [False] * 5}, skill=f"e{i:02d}", subject="engineering", prefix=f"e{i:02d}") for i in range(45)]
    scored = pl.concat(frames)
    paper = SmartScoreRules(skill_sample="paper")
    scores = exam_scores(scored, paper, seed=4)
    assert {s: pick(scores, "a", "subject", s)["n"] for s in ("math", "science", "engineering")} == {
        "math": 40,
        "science": 30,
        "engineering": 45,  # all, as in the paper
    }

    def skills_of(frame: pl.DataFrame, model: str) -> list[str]:
        return sorted(frame.filter((pl.col("group_by") == "skill") & (pl.col("model") == model))["group_value"].to_list())

    assert skills_of(scores, "a") == skills_of(scores, "b")  # every model sits the same sample
    assert scores.equals(exam_scores(scored, paper, seed=4))
    assert skills_of(exam_scores(scored, paper, seed=5), "a") != skills_of(scores, "a")
    assert pick(exam_scores(scored, RULES, seed=4), "a", "subject", "math")["n"] == 50
    assert any("40 math" in line for line in paper.describe())
    assert SmartScoreRules.from_mapping({"skill_sample": "paper", "sample_sizes": {"math": 10}}).sample_sizes == (("math", 10),)
    assert SmartScoreRules.from_mapping(paper.as_dict()) == paper
    with pytest.raises(MetricsInputError, match="skill_sample"):
        SmartScoreRules(skill_sample="some")


def test_smartscore_and_metrics_depend_one_way():
    """metrics imports smartscore (to register exam_score); smartscore never imports metrics."""
    import ast
    import pathlib

    import pipelines.evaluation.smartscore as smartscore_module

    tree = ast.parse(pathlib.Path(smartscore_module.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "pipelines.evaluation.metrics" not in imported
    from pipelines.evaluation.metrics import measures

    assert "exam_score" in measures()


def test_paper_sample_takes_table_10_skills_and_notes_what_a_build_lacks():
    from pipelines.evaluation.paper_exam_tables import paper_skill_list
    from pipelines.evaluation.smartscore import paper_sample_notes

    listed = paper_skill_list()["science"]
    frames = []
    for i, key in enumerate(listed[:10]):  # the build has 10 of the paper's 30 science skills
        grade, skill = key.split("/")
        frames.append(skill_frame({"m": [True] * 5}, skill=skill, subject="science", grade=grade, prefix=f"p{i:02d}"))
    for i in range(40):
        frames.append(skill_frame({"m": [True] * 5}, skill=f"other{i:02d}", subject="science", prefix=f"o{i:02d}"))
    scored = pl.concat(frames)
    paper = SmartScoreRules(skill_sample="paper")
    skills = exam_scores(scored, paper, seed=2).filter((pl.col("group_by") == "skill"))["group_value"].to_list()
    assert len(skills) == 30
    assert set(listed[:10]) <= set(skills)  # every paper skill the build has is scored
    notes = paper_sample_notes(scored, paper, seed=2)
    assert notes == [
        "science (test): 10 of the paper's 30 Table 10 skills are in this build; 20 more drawn at random from its other skills"
    ]
    assert paper_sample_notes(scored, RULES, seed=2) == []
