"""Calibrating the SmartScore simulation on the paper's published (accuracy, exam score) pairs.

IXL's increments are proprietary; the paper publishes what its exams gave (Table 8: exam score
and accuracy per subject and method; Table 10: exam scores per sampled skill). The family
calibrated here is the starting point of REFERENCE.md section 2 with, per subject, its
correct-answer gains scaled by ``gain``, its penalties by ``penalty`` and at most ``budget``
questions per session. A model answering right with probability p (its subject accuracy)
is expected to score ``expected_score``: the mean final score of ``SESSIONS`` simulated
sessions of independent answers.

Fitted on Table 8's Random and CLIP finetuning rows (the pairs the paper draws side by side),
per subject; Table 8's other rows are held out, and Table 10's skills are compared with the
exam score their method's subject accuracy predicts (the spread there is the skills' own).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import polars as pl

from pipelines.evaluation.paper_exam_tables import TABLE_8, TABLE_10, TABLE_10_METHODS
from pipelines.evaluation.smartscore import SmartScoreRules, simulate_sessions

FIT_METHODS = ("Random", "CLIP finetuning")
CALIBRATED_SUBJECTS = ("science", "engineering", "math")
SESSIONS = 4000
SEED = 0
STARTING_POINT = SmartScoreRules()
GAINS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
PENALTIES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
BUDGETS = (5, 6, 8, 10, 12, 15, 20, 30, 50)


@dataclass(frozen=True)
class SubjectFit:
    subject: str
    gain: float
    penalty: float
    budget: int

    def steps(self) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
        correct = tuple((lower, max(1, round(step * self.gain))) for lower, step in STARTING_POINT.correct_steps)
        wrong = tuple((lower, min(-1, round(step * self.penalty))) for lower, step in STARTING_POINT.wrong_steps)
        return correct, wrong


# the result of ``fit_subject`` over the grid above (bench/exam_calibration.py --search reruns it)
CALIBRATED_FITS: tuple[SubjectFit, ...] = (
    SubjectFit("science", gain=1.25, penalty=0.25, budget=6),
    SubjectFit("engineering", gain=1.5, penalty=6.0, budget=20),
    SubjectFit("math", gain=1.25, penalty=0.25, budget=12),
)


def rules_from_fits(fits: Iterable[SubjectFit], base: SmartScoreRules = STARTING_POINT) -> SmartScoreRules:
    subject_rules = tuple((f.subject, *f.steps(), f.budget) for f in fits)
    return SmartScoreRules(**{**base.as_dict(), "subject_rules": subject_rules, "calibration": base.calibration})


CALIBRATION_NOTE = (
    "increments calibrated per subject on the paper's Table 8 (Random and CLIP finetuning: accuracy -> exam "
    "score), a grid over the starting point's gains, penalties and session budget; the fit error is in the "
    "report's exam section and printed by bench/exam_calibration.py"
)
CALIBRATED_RULES = rules_from_fits(CALIBRATED_FITS, SmartScoreRules(calibration=CALIBRATION_NOTE))


def expected_score(rules: SmartScoreRules, accuracy_percent: float, sessions: int = SESSIONS, seed: int = SEED) -> float:
    """Mean final score of ``sessions`` sessions of independent answers right with this probability."""
    rng = np.random.default_rng([seed, int(round(accuracy_percent * 10))])
    answers = (rng.random((sessions, rules.budget)) < accuracy_percent / 100.0).astype(np.int8)
    final, _ = simulate_sessions(answers, rules)
    return float(final.mean())


def fit_subject(subject: str) -> SubjectFit:
    """The grid point whose expected scores are closest (RMSE) to the subject's fit pairs."""
    pairs = [(acc, exam) for method, subj, acc, exam in TABLE_8 if subj == subject and method in FIT_METHODS]
    best: tuple[float, SubjectFit] | None = None
    for gain, penalty, budget in itertools.product(GAINS, PENALTIES, BUDGETS):
        fit = SubjectFit(subject, gain, penalty, budget)
        rules = rules_from_fits([fit]).for_subject(subject)
        error = math.sqrt(sum((expected_score(rules, acc) - exam) ** 2 for acc, exam in pairs) / len(pairs))
        if best is None or error < best[0] - 1e-9:
            best = (error, fit)
    assert best is not None
    return best[1]


def calibration_table(rules: SmartScoreRules) -> pl.DataFrame:
    """Per published row: the paper's exam score and ours for the same accuracy.

    Columns: table (8 or 10), method, subject, skill (Table 10), accuracy (the subject accuracy
    of the method, Table 8), paper, ours, error (ours - paper), role (fit / held out / skill).
    """
    accuracy = {(method, subject): acc for method, subject, acc, _ in TABLE_8}
    cache: dict[tuple[str, float], float] = {}

    def ours(subject: str, acc: float) -> float:
        key = (subject, acc)
        if key not in cache:
            cache[key] = expected_score(rules.for_subject(subject), acc)
        return cache[key]

    rows = []
    for method, subject, acc, exam in TABLE_8:
        role = "fit" if method in FIT_METHODS else "held out"
        rows.append(("8", method, subject, None, acc, exam, ours(subject, acc), role))
    for subject, skill, *values in TABLE_10:
        for (column, method), paper in zip(TABLE_10_METHODS, values):
            if paper is None:
                continue
            acc = accuracy[(method, subject)]
            rows.append(("10", method, subject, skill, acc, float(paper), ours(subject, acc), "skill"))
    frame = pl.DataFrame(
        rows,
        schema={"table": pl.String, "method": pl.String, "subject": pl.String, "skill": pl.String,
                "accuracy": pl.Float64, "paper": pl.Float64, "ours": pl.Float64, "role": pl.String},
        orient="row",
    )
    return frame.with_columns((pl.col("ours") - pl.col("paper")).alias("error"))


def fit_errors(table: pl.DataFrame) -> pl.DataFrame:
    """RMSE and mean absolute error per role (fit, held out, skill) and, for Table 10, per
    subject and method on the skills' mean."""
    by_role = table.group_by("role").agg(
        pl.len().alias("rows"),
        (pl.col("error") ** 2).mean().sqrt().alias("rmse"),
        pl.col("error").abs().mean().alias("mean_abs_error"),
    )
    skill_means = (
        table.filter(pl.col("role") == "skill")
        .group_by("subject", "method")
        .agg(pl.col("paper").mean(), pl.col("ours").first())
        .with_columns((pl.col("ours") - pl.col("paper")).alias("error"))
    )
    means = pl.DataFrame(
        {
            "role": ["Table 10 skill means"],
            "rows": [skill_means.height],
            "rmse": [float(np.sqrt(np.mean(skill_means["error"].to_numpy() ** 2)))] if skill_means.height else [None],
            "mean_abs_error": [float(np.mean(np.abs(skill_means["error"].to_numpy())))] if skill_means.height else [None],
        },
        schema=by_role.schema,
    )
    order = {"fit": 0, "held out": 1, "skill": 2, "Table 10 skill means": 3}
    return pl.concat([by_role, means]).sort(pl.col("role").replace_strict(order, default=9))
