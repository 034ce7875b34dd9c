"""Time the scoring of 1,000,000 predictions with every breakdown.

Synthesizes a STEM-shaped benchmark (subject shares, skill counts and options per question
as in the paper's Table 1; grades per skill; images shared by small groups of questions),
five models (one of them a uniform random guesser, two without confidences, a few failed
samples), and times ``compute_metrics`` (every accuracy breakdown with 95% intervals,
cluster-robust CLT by default or a clustered bootstrap, random_expected, failed_rate, ECE), ``exam_scores`` (SmartScore
simulation, 20 sessions per skill, with intervals) and ``reliability_table``. Prints wall
and CPU seconds (the CPU figure is the one to compare on a shared machine).

    .venv/bin/python bench/score.py [--predictions 1000000] [--bootstrap 0|1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.evaluation.metrics import compute_metrics, reliability_table  # noqa: E402
from pipelines.evaluation.smartscore import SmartScoreRules, exam_scores  # noqa: E402

# subject, skills, share of questions (Table 1), grades used
SUBJECTS = (
    ("science", 82, 0.174, [f"grade-{g}" for g in range(2, 9)]),
    ("technology", 9, 0.008, [None]),
    ("engineering", 6, 0.018, [f"grade-{g}" for g in range(3, 9)]),
    ("math", 351, 0.800, ["pre-k", "kindergarten", *[f"grade-{g}" for g in range(1, 9)], "algebra-1", "algebra-2"]),
)
FIRST_WORDS = ("Which", "What", "Select", "How", "Look", "Is", "Complete", "Choose", "Identify", "Compare", "Does", "Find", "\\(")
MODELS = (("random", None, True), ("clip-zero-shot", 0.45, True), ("clip-finetuned", 0.78, True), ("gpt-captions", 0.5, False), ("glove", 0.38, False))


def synthesize(predictions: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    questions = predictions // len(MODELS)
    shares = np.array([s[2] for s in SUBJECTS])
    subject_index = rng.choice(len(SUBJECTS), size=questions, p=shares / shares.sum())
    skill_offsets = np.cumsum([0] + [s[1] for s in SUBJECTS])
    skill_index = skill_offsets[subject_index] + (rng.random(questions) * np.array([s[1] for s in SUBJECTS])[subject_index]).astype(int)
    skill_grade = []
    for subject, skills, _, grades in SUBJECTS:
        skill_grade.extend(grades[i % len(grades)] for i in range(skills))
    subjects = np.array([s[0] for s in SUBJECTS])[subject_index]
    grades = [skill_grade[i] for i in skill_index]
    num_choices = rng.choice([2, 3, 4, 5], size=questions, p=[0.38, 0.46, 0.12, 0.04])
    # images: 60% of questions have their own, the rest share one with 1-7 other questions
    cluster = np.arange(questions)
    shared = rng.random(questions) < 0.4
    cluster[shared] = questions + (np.cumsum(shared)[shared] // rng.integers(2, 9))
    lengths = rng.geometric(1 / 18, size=questions)
    words = rng.integers(0, len(FIRST_WORDS), size=questions)
    problem = [FIRST_WORDS[w] + " w" * int(n) for w, n in zip(words, lengths)]
    base = pl.DataFrame(
        {
            "question_id": [f"{i:016x}" for i in range(questions)],
            "split": np.where(rng.random(questions) < 0.5, "test", "valid"),
            "subject": subjects,
            "grade": grades,
            "skill": [f"skill-{i}" for i in skill_index],
            "num_choices": num_choices,
            "problem": problem,
            "cluster": [f"img{c}" for c in cluster],
        }
    )
    skill_difficulty = rng.normal(0, 0.8, size=skill_offsets[-1])
    cluster_effect = rng.normal(0, 0.5, size=cluster.max() + 1)
    frames = []
    for model, ability, has_confidence in MODELS:
        if ability is None:
            prediction = (rng.random(questions) * num_choices).astype(np.int64)
            correct = prediction == 0
        else:
            logit = np.log(ability / (1 - ability)) - skill_difficulty[skill_index] + cluster_effect[cluster]
            correct = rng.random(questions) < 1 / (1 + np.exp(-logit))
            wrong_choice = 1 + (rng.random(questions) * (num_choices - 1)).astype(np.int64)
            prediction = np.where(correct, 0, wrong_choice)
        failed = rng.random(questions) < 0.002
        prediction = np.where(failed, -1, prediction)
        correct = correct & ~failed
        confidence = np.clip(np.where(correct, 0.6, 0.45) + rng.normal(0, 0.2, questions), 0, 1) if has_confidence else None
        frames.append(
            base.with_columns(
                pl.lit(model).alias("model"),
                pl.Series("prediction", prediction),
                pl.Series("confidence", confidence, dtype=pl.Float64) if confidence is not None else pl.lit(None, pl.Float64).alias("confidence"),
                pl.Series("correct", correct),
            ).with_columns(pl.when(pl.col("prediction") == -1).then(None).otherwise(pl.col("confidence")).alias("confidence"))
        )
    return pl.concat(frames, how="vertical")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", type=int, default=0, help="0: cluster-robust CLT intervals (default); B: clustered bootstrap")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.perf_counter()
    scored = synthesize(args.predictions, args.seed)
    synth_s = time.perf_counter() - started
    print(f"synthesized {scored.height:,} predictions ({scored['question_id'].n_unique():,} questions, "
          f"{scored['model'].n_unique()} models, {scored['cluster'].n_unique():,} image clusters) in {synth_s:.1f} s")

    timings: dict[str, tuple[float, float]] = {}

    def timed(name, function):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        timings[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return result

    rules = SmartScoreRules()
    metrics = timed("compute_metrics", lambda: compute_metrics(scored, bootstrap=args.bootstrap, seed=args.seed))
    exams = timed("exam_scores", lambda: exam_scores(scored, rules, seed=args.seed, bootstrap=args.bootstrap))
    reliability = timed("reliability_table", lambda: reliability_table(scored))
    total = sum(w for w, _ in timings.values())
    total_cpu = sum(c for _, c in timings.values())

    for name, (wall, cpu) in timings.items():
        print(f"{name:>18}: {wall:6.2f} s wall, {cpu:6.2f} s CPU")
    print(f"{'total':>18}: {total:6.2f} s wall, {total_cpu:6.2f} s CPU  for {scored.height:,} predictions, "
          f"{metrics.height + exams.height:,} metric rows, {reliability.height} reliability bins, "
          f"bootstrap={args.bootstrap}, sessions={rules.sessions}")
    print(f"throughput: {scored.height / total:,.0f} predictions/s with every breakdown")
    macro = metrics.filter((pl.col("metric") == "accuracy") & (pl.col("group_by") == "macro") & (pl.col("split") == "test"))
    print(macro.select("model", "value", "ci_low", "ci_high", "n"))


if __name__ == "__main__":
    main()
