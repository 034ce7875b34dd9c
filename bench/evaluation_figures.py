"""The figures of issue 27 on fixed synthetic scenarios, to compare two versions of the code.

    .venv/bin/python bench/evaluation_figures.py                     # this checkout
    STEMFORGE_SRC=/tmp/old .venv/bin/python bench/evaluation_figures.py   # another tree's pipelines/

1. test rows of 7 models that change when an 8th model's valid-split predictions are scored;
2. intervals: technology 0/4 and a one-skill engineering exam score, an accuracy macro with an
   all-wrong 5-question subject, `compare` of two random guessers (a subject without discordant
   pairs; 10 engineering questions, a alone right on 5: McNemar p = 0.0625), `compare --bootstrap`;
3. the exam score of a guesser at 38.6% and of a model at 87% over 50-question skills.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, os.environ.get("STEMFORGE_SRC", str(Path(__file__).resolve().parents[1])))

from pipelines.evaluation.metrics import compare_models, compute_metrics  # noqa: E402
from pipelines.evaluation.smartscore import SmartScoreRules, exam_scores  # noqa: E402

SCHEMA = {
    "model": pl.String, "question_id": pl.String, "split": pl.String, "subject": pl.String, "grade": pl.String,
    "skill": pl.String, "num_choices": pl.Int64, "problem": pl.String, "cluster": pl.String,
    "prediction": pl.Int64, "confidence": pl.Float64, "correct": pl.Boolean,
}
WORDS = {"test": ["which", "what", "how", "select", "choose", "look", "read", "find", "is", "does", "pick", "count"],
         "valid": ["identify", "complete", "compare", "use", "solve"]}
SUBJECTS = ("science", "technology", "engineering", "math")


def questions(split: str, count: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        subject = SUBJECTS[i % 4]
        out.append({
            "question_id": f"{split}-{i:05d}", "split": split, "subject": subject,
            "grade": None if subject == "technology" else f"grade-{2 + i % 4}", "skill": f"skill-{(i // 4) % 9}",
            "num_choices": int(rng.choice([2, 3, 4, 5] if split == "valid" else [2, 3, 4])),
            "problem": f"{WORDS[split][int(rng.integers(len(WORDS[split])))]} of these?", "cluster": None,
        })
    return out


def answers(model: str, qs: list[dict], accuracy: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for q in qs:
        right = bool(rng.random() < accuracy)
        out.append({**q, "model": model, "prediction": 0 if right else 1, "confidence": None, "correct": right})
    return out


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA)


def row(metrics: pl.DataFrame, model: str, metric: str, group_by: str, value: str) -> str:
    found = metrics.filter((pl.col("model") == model) & (pl.col("metric") == metric) & (pl.col("group_by") == group_by)
                           & (pl.col("group_value") == value))
    if found.height == 0:
        return "(no row)"
    r = found.row(0, named=True)
    interval = "no interval" if r["ci_low"] is None else f"[{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
    return f"{r['value']:.1f} {interval} (n={r['n']})"


def split_independence() -> None:
    test = questions("test", 1800, 1)
    rows = []
    for m in range(7):
        rows += answers(f"model-{m}", test, 0.3 + 0.08 * m, 10 + m)
    before = frame(rows)
    after = pl.concat([before, frame(answers("imported", questions("valid", 900, 2), 0.6, 99))])
    keys = ["model", "split", "metric", "group_by", "group_value"]
    old = compute_metrics(before, seed=0).filter(pl.col("split") == "test")
    new = compute_metrics(after, seed=0).filter((pl.col("split") == "test") & (pl.col("model") != "imported"))
    joined = old.join(new, on=keys, how="full", suffix="_after", coalesce=True)
    changed = joined.filter(
        pl.col("value").ne_missing(pl.col("value_after")) | pl.col("ci_low").ne_missing(pl.col("ci_low_after"))
        | pl.col("ci_high").ne_missing(pl.col("ci_high_after")) | pl.col("n").ne_missing(pl.col("n_after"))
    )
    print("1. test rows of 7 models changed by scoring an 8th model's valid predictions:")
    for metric, group_by in (("exam_score", None), ("accuracy", "question_type"), (None, None)):
        part = joined if metric is None else joined.filter(pl.col("metric") == metric)
        moved = changed if metric is None else changed.filter(pl.col("metric") == metric)
        if group_by:
            part, moved = part.filter(pl.col("group_by") == group_by), moved.filter(pl.col("group_by") == group_by)
        label = "all metrics" if metric is None else f"{metric}{' by ' + group_by if group_by else ''}"
        print(f"   {label}: {moved.height} of {part.height}")


def intervals() -> None:
    print("2. intervals")
    rng = np.random.default_rng(4)
    rows = [dict(q, model="m", prediction=1, confidence=None, correct=False) for q in questions("test", 16, 5) if q["subject"] == "technology"]
    for q in rows:
        q["skill"] = "tech"
    eng = [{"question_id": f"e{i}", "split": "test", "subject": "engineering", "grade": "grade-6", "skill": "one",
            "num_choices": 3, "problem": "Which?", "cluster": None} for i in range(30)]
    rows += answers("m", eng, 0.6, 3)
    for k in range(6):
        qs = [{"question_id": f"m{k}-{i}", "split": "test", "subject": "math", "grade": "grade-3", "skill": f"m{k}",
               "num_choices": 3, "problem": "Which?", "cluster": None} for i in range(40)]
        rows += answers("m", qs, 0.4 + 0.08 * k, 20 + k)
    scores = exam_scores(frame(rows), SmartScoreRules(), seed=1)
    print(f"   exam score, technology at 0/4: {row(scores, 'm', 'exam_score', 'subject', 'technology')}")
    print(f"   exam score, engineering with one scored skill: {row(scores, 'm', 'exam_score', 'subject', 'engineering')}")
    print(f"   exam score, macro: {row(scores, 'm', 'exam_score', 'macro', 'all')}")
    acc = [dict(q, model="m", prediction=1, confidence=None, correct=False)
           for q in questions("test", 20, 6) if q["subject"] == "technology"]
    for subject in ("science", "math", "engineering"):
        qs = [{"question_id": f"{subject}-{i}", "split": "test", "subject": subject, "grade": "grade-3", "skill": "s",
               "num_choices": 3, "problem": "Which?", "cluster": None} for i in range(200)]
        acc += answers("m", qs, 0.45, len(subject))
    metrics = compute_metrics(frame(acc), seed=1)
    print(f"   accuracy, technology all wrong at 0/5: {row(metrics, 'm', 'accuracy', 'subject', 'technology')}")
    print(f"   accuracy, macro with it: {row(metrics, 'm', 'accuracy', 'macro', 'all')}")
    pairs = []
    for subject in ("science", "math"):
        qs = [{"question_id": f"{subject}-{i}", "split": "test", "subject": subject, "grade": "grade-3", "skill": "s",
               "num_choices": 3, "problem": "Which?", "cluster": None} for i in range(300)]
        pairs += answers("a", qs, 0.39, 30 + len(subject)) + answers("b", qs, 0.39, 60 + len(subject))
    eng = [{"question_id": f"eng-{i}", "split": "test", "subject": "engineering", "grade": "grade-6", "skill": "s",
            "num_choices": 2, "problem": "Which?", "cluster": None} for i in range(10)]
    pairs += [dict(q, model="a", prediction=0 if i < 5 else 1, confidence=None, correct=i < 5) for i, q in enumerate(eng)]
    pairs += [dict(q, model="b", prediction=1, confidence=None, correct=False) for q in eng]
    tech = [{"question_id": f"tech-{i}", "split": "test", "subject": "technology", "grade": None, "skill": "s",
             "num_choices": 4, "problem": "Which?", "cluster": None} for i in range(8)]
    pairs += [dict(q, model=m, prediction=0 if i % 2 else 1, confidence=None, correct=bool(i % 2)) for m in "ab" for i, q in enumerate(tech)]
    data = frame(pairs)
    result = compare_models(data, "a", "b", "test")
    boot = compare_models(data, "a", "b", "test", bootstrap=1000, seed=2)
    t = result["subjects"]["technology"]
    e = result["subjects"]["engineering"]
    mac = result["macro"]
    print(f"   compare, technology (no discordant pair): {t['difference']:+.1f} [{t['ci_low']:+.1f}, {t['ci_high']:+.1f}]")
    print(f"   compare, engineering 5/0 of 10: {e['difference']:+.1f} [{e['ci_low']:+.1f}, {e['ci_high']:+.1f}], McNemar p = {e['mcnemar_p']:.4f}")
    print(f"   compare, macro: {mac['difference']:+.1f} [{mac['ci_low']:+.1f}, {mac['ci_high']:+.1f}]; "
          f"with --bootstrap 1000: [{boot['macro']['ci_low']:+.1f}, {boot['macro']['ci_high']:+.1f}]")


def scale() -> None:
    print("3. exam score over 50-question skills (20 skills), default rules SmartScoreRules()")
    for accuracy in (0.386, 0.87):
        rows = []
        for k in range(20):
            qs = [{"question_id": f"s{k}-{i}", "split": "test", "subject": "science", "grade": "grade-3", "skill": f"s{k}",
                   "num_choices": 3, "problem": "Which?", "cluster": None} for i in range(50)]
            rows += answers("m", qs, accuracy, 100 + k)
        data = frame(rows)
        line = f"   accuracy {100 * accuracy:.1f}%: starting point {row(exam_scores(data, SmartScoreRules(), seed=1), 'm', 'exam_score', 'subject', 'science')}"
        try:
            from pipelines.evaluation.exam_calibration import CALIBRATED_RULES

            line += f"; calibrated {row(exam_scores(data, CALIBRATED_RULES, seed=1), 'm', 'exam_score', 'subject', 'science')}"
        except ImportError:
            line += "; calibrated: (none in this version)"
        print(line)


if __name__ == "__main__":
    split_independence()
    intervals()
    scale()
