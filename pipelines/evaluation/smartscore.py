"""Exam scores: a simulation of IXL's SmartScore over a model's answers, per skill.

IXL publishes only the shape of its SmartScore (REFERENCE.md section 2): per skill it starts
at 0, a correct answer raises it, a wrong one lowers it, misses near 100 cost more, 90 is
"excellent" and 100 is mastery. The per-question increments are proprietary, so every
number here is OUR ASSUMPTION, kept in ``SmartScoreRules`` (printed in the report):

* correct: +10 below 50, +5 from 50 to below 80, +2 from 80 to below 90, +1 from 90;
* wrong: -3 below 60, -5 from 60 to below 80, -7 from 80 to below 90, -8 from 90;
* the score is clamped to [0, 100]; a session ends at 100 (mastery), after ``budget``
  questions, or when the skill's questions run out (drawn without replacement);
* a skill's exam score is the mean final score over ``sessions`` simulated sessions, each
  with its own question order; the orders depend only on (seed, split, skill, question ids)
  so every model sits the same exams, and each split has its own random stream;
* subjects in ``accuracy_subjects`` (default technology: Triviaplaza has no SmartScore)
  are scored by accuracy as in the paper's Table 8, where the technology exam score equals
  the subject accuracy: the subject value is the accuracy over all its questions (n =
  questions), and each of its skills gets the skill accuracy;
* a SmartScore skill with fewer than ``min_questions`` questions in the split (default 5:
  below that even a model answering everything right cannot pass 50) is not scored: no skill
  row, and it is left out of the subject, grade and macro means;
* ``skill_sample``: ``"all"`` scores every eligible skill; ``"paper"`` scores, per (split,
  subject) of ``sample_sizes`` (the paper: 40 maths and 30 science skills; engineering and
  technology all), the paper's Table 10 skills the build has, topped up with a seeded sample of
  its other skills where it lacks some (``exam_sample`` notes it), the same for every model.

Aggregates (metric ``exam_score`` in the ``metrics`` schema, values in SmartScore points):
``skill`` (group value ``<grade>/<skill>``, n = the model's questions in the skill; 95%
interval: the simulation's own noise, mean over sessions +- 1.96 sd/sqrt(sessions), or Wilson
for accuracy-scored skills), ``subject`` and ``grade`` (mean over scored skills, n = skills
scored; accuracy subjects: the mean over questions, n = questions, Wilson interval; otherwise a
normal interval of variance (between-skill variance + mean simulation noise) / skills, the
spread of one session standing in for the first with a single skill; a bootstrap resampling
skills when ``bootstrap > 0``, except where resamples cannot vary), ``macro`` (mean over
subjects, MOVER over their intervals).
Questions a model has no row for are skipped in its sessions.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields, replace
from typing import Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from pipelines.evaluation.paper_exam_tables import paper_skill_list

from pipelines.evaluation.metric_rows import (
    DEFAULT_BOOTSTRAP,
    METRIC_COLUMNS,
    NO_GRADE,
    MeasureInputs,
    PERCENT,
    Z_95,
    MetricsInputError,
    bootstrap_ratio,
    empty_metrics,
    register_metric,
    skill_key_expr,
    sort_metrics,
    stream_seed,
    wilson_interval,
    _change_ids,
    _concat_metric_rows,
    _macro_rows,
)

NO_QUESTION = -1
SKILL_SAMPLES = ("all", "paper")
PAPER_SAMPLE_SIZES: tuple[tuple[str, int], ...] = (("math", 40), ("science", 30))
PAPER_SKILLS: dict[str, tuple[str, ...]] = paper_skill_list()


@dataclass(frozen=True)
class SmartScoreRules:
    """SmartScore simulation parameters (our assumptions; IXL's increments are proprietary).

    ``correct_steps``/``wrong_steps``: (lowest score of the band, change) pairs in
    increasing order of band; a score uses the band with the largest lower bound <= score.
    """

    correct_steps: tuple[tuple[int, int], ...] = ((0, 10), (50, 5), (80, 2), (90, 1))
    wrong_steps: tuple[tuple[int, int], ...] = ((0, -3), (60, -5), (80, -7), (90, -8))
    floor: int = 0
    ceiling: int = 100
    budget: int = 50
    sessions: int = 20
    accuracy_subjects: tuple[str, ...] = ("technology",)
    min_questions: int = 5
    skill_sample: str = "all"
    sample_sizes: tuple[tuple[str, int], ...] = PAPER_SAMPLE_SIZES
    # (subject, correct_steps, wrong_steps, budget): a subject's own increments (calibrated on the
    # paper's published pairs, ``exam_calibration``); other subjects use the fields above
    subject_rules: tuple[tuple[str, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...], int], ...] = ()
    calibration: str = ""  # where the increments come from, for the report

    def __post_init__(self) -> None:
        if self.min_questions < 1:
            raise MetricsInputError("SmartScoreRules.min_questions must be >= 1")
        if self.skill_sample not in SKILL_SAMPLES:
            raise MetricsInputError(
                f"SmartScoreRules.skill_sample must be one of {', '.join(SKILL_SAMPLES)}, not {self.skill_sample!r}"
            )
        if any(int(size) < 1 for _, size in self.sample_sizes):
            raise MetricsInputError("SmartScoreRules.sample_sizes must be >= 1")
        for name in ("correct_steps", "wrong_steps"):
            steps = getattr(self, name)
            if not steps:
                raise MetricsInputError(f"SmartScoreRules.{name} is empty")
            bounds = [int(lower) for lower, _ in steps]
            if bounds[0] > self.floor or any(later <= earlier for earlier, later in zip(bounds, bounds[1:])):
                raise MetricsInputError(
                    f"SmartScoreRules.{name} bands must start at or below {self.floor} and increase strictly"
                )
        if self.floor >= self.ceiling:
            raise MetricsInputError("SmartScoreRules.floor must be below ceiling")
        if self.budget < 1 or self.sessions < 1:
            raise MetricsInputError("SmartScoreRules.budget and sessions must be >= 1")

    def for_subject(self, subject: str) -> "SmartScoreRules":
        """The rules a subject's sessions run under (its own increments where it has some)."""
        for name, correct_steps, wrong_steps, budget in self.subject_rules:
            if name == subject:
                return replace(
                    self, correct_steps=tuple(correct_steps), wrong_steps=tuple(wrong_steps), budget=int(budget), subject_rules=()
                )
        return replace(self, subject_rules=())

    @property
    def longest_budget(self) -> int:
        return max([self.budget, *(int(budget) for *_, budget in self.subject_rules)])

    def change(self, score: int, correct: bool) -> int:
        steps = self.correct_steps if correct else self.wrong_steps
        delta = steps[0][1]
        for lower, step in steps:
            if score >= lower:
                delta = step
        return delta

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> "SmartScoreRules":
        """Rules from a config mapping (YAML/JSON lists accepted for the bands)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MetricsInputError(f"unknown SmartScore setting(s): {', '.join(unknown)}")
        values: dict[str, object] = dict(data)
        for name in ("correct_steps", "wrong_steps"):
            if name in values:
                values[name] = tuple((int(lower), int(step)) for lower, step in values[name])  # type: ignore[union-attr]
        if "sample_sizes" in values:
            raw = values["sample_sizes"]
            pairs = raw.items() if isinstance(raw, Mapping) else raw
            values["sample_sizes"] = tuple((str(subject), int(size)) for subject, size in pairs)  # type: ignore[union-attr]
        if "subject_rules" in values:
            values["subject_rules"] = tuple(
                (str(subject), tuple((int(a), int(b)) for a, b in correct), tuple((int(a), int(b)) for a, b in wrong), int(budget))
                for subject, correct, wrong, budget in values["subject_rules"]  # type: ignore[union-attr]
            )
        if "accuracy_subjects" in values:
            values["accuracy_subjects"] = tuple(str(s) for s in values["accuracy_subjects"])  # type: ignore[union-attr]
        return cls(**values)  # type: ignore[arg-type]

    def describe(self) -> list[str]:
        """Human-readable lines, for the report."""

        def bands(steps: Sequence[tuple[int, int]]) -> str:
            parts = []
            for i, (lower, step) in enumerate(steps):
                upper = steps[i + 1][0] if i + 1 < len(steps) else self.ceiling
                parts.append(f"{step:+d} for {lower}-{upper}")
            return ", ".join(parts)

        per_subject = [
            f"{subject}: correct answer {bands(correct)}; wrong answer {bands(wrong)}; at most {budget} questions per session"
            for subject, correct, wrong, budget in self.subject_rules
        ]
        other = "other subjects: " if per_subject else ""
        return [
            *([self.calibration] if self.calibration else []),
            *per_subject,
            f"{other}correct answer: {bands(self.correct_steps)}",
            f"{other}wrong answer: {bands(self.wrong_steps)}",
            f"score clamped to [{self.floor}, {self.ceiling}]; a session stops at {self.ceiling}, "
            f"after {self.budget if not per_subject else 'its budget of'} questions, or when the skill's questions run out (no replacement)",
            f"exam score of a skill = mean final score over {self.sessions} sessions (seeded orders)",
            "subjects scored by accuracy instead (subject value = accuracy over all its questions, "
            "as in the paper's Table 8): " + (", ".join(self.accuracy_subjects) or "none"),
            f"a skill with fewer than {self.min_questions} questions in the split is not scored "
            "(n of a subject = skills scored)",
            self._sample_line(),
            "these increments are our assumptions: IXL's real ones are proprietary",
        ]

    def _sample_line(self) -> str:
        if self.skill_sample == "all":
            return "skills scored: all eligible skills of every subject"
        sizes = ", ".join(f"{size} {subject}" for subject, size in self.sample_sizes)
        return (
            f"skills scored: the paper's Table 10 skills ({sizes}; other subjects all), the same for every "
            "model; where a build lacks some, a seeded random sample of its other skills fills the subject's quota"
        )


def simulate_session(correct_sequence: Iterable[bool], rules: SmartScoreRules = SmartScoreRules()) -> list[int]:
    """The score after each answered question of one session (stops at the ceiling or budget)."""
    score = rules.floor
    trajectory: list[int] = []
    for correct in correct_sequence:
        if len(trajectory) >= rules.budget or score >= rules.ceiling:
            break
        score = min(rules.ceiling, max(rules.floor, score + rules.change(score, bool(correct))))
        trajectory.append(score)
    return trajectory


def simulate_sessions(answers: np.ndarray, rules: SmartScoreRules) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized ``simulate_session`` over rows of ``answers`` (int8: 1 right, 0 wrong, -1 none).

    Columns beyond ``rules.budget`` are ignored; -1 entries are skipped. Returns the final
    scores and the number of questions answered per row.
    """
    answers = np.asarray(answers)
    rows = answers.shape[0]
    score = np.full(rows, rules.floor, dtype=np.int64)
    answered = np.zeros(rows, dtype=np.int64)
    correct_lower = np.array([b for b, _ in rules.correct_steps])
    correct_delta = np.array([d for _, d in rules.correct_steps])
    wrong_lower = np.array([b for b, _ in rules.wrong_steps])
    wrong_delta = np.array([d for _, d in rules.wrong_steps])
    for t in range(answers.shape[1] if answers.ndim == 2 else 0):
        column = answers[:, t]
        active = (column != NO_QUESTION) & (score < rules.ceiling) & (answered < rules.budget)
        if not active.any():
            if (answered >= rules.budget).all() or (score >= rules.ceiling).all():
                break
            continue
        up = correct_delta[np.maximum(np.searchsorted(correct_lower, score, side="right") - 1, 0)]
        down = wrong_delta[np.maximum(np.searchsorted(wrong_lower, score, side="right") - 1, 0)]
        delta = np.where(column == 1, up, down)
        score = np.where(active, np.clip(score + delta, rules.floor, rules.ceiling), score)
        answered += active
    return score, answered


def session_orders(questions: pl.DataFrame, rules: SmartScoreRules, seed: int) -> tuple[pl.DataFrame, np.ndarray]:
    """The question order of every session of every (split, skill) exam.

    ``questions`` has distinct (split, skill_key, question_id). Returns the exams (split,
    subject, grade_key, skill_key, sorted) and an index matrix of shape
    (exams * sessions, budget) into the sorted question list (-1 past the skill's end);
    row ``e * sessions + s`` is session ``s`` of exam ``e``.
    """
    ordered = questions.sort(["split", "skill_key", "question_id"]).with_row_index("question_index")
    exams = (
        ordered.group_by(["split", "skill_key"], maintain_order=True)
        .agg(pl.col("subject").first(), pl.col("grade_key").first(), pl.len().alias("size"))
    )
    exam_of_question = _change_ids(ordered, ["split", "skill_key"]) if ordered.height else np.zeros(0, np.int64)
    n_questions = ordered.height
    n_exams = exams.height
    sessions = rules.sessions
    # each split draws from its own stream: scoring one split never moves another's orders
    keys = np.empty((sessions, n_questions))
    split_of_question = ordered["split"].to_numpy()
    split_bounds = np.flatnonzero(np.r_[True, split_of_question[1:] != split_of_question[:-1], True]) if n_questions else []
    for begin, end in zip(split_bounds[:-1], split_bounds[1:]):
        rng = np.random.default_rng(stream_seed(seed, "exam-orders", split_of_question[begin]))
        keys[:, begin:end] = rng.random((sessions, end - begin))
    # one argsort over (session, exam, key): exam ids are integers, keys in [0, 1)
    composite = (np.arange(sessions)[:, None] * n_exams + exam_of_question[None, :]).astype(np.float64) + keys
    order = np.argsort(composite.ravel())
    question_of = order % n_questions if n_questions else order
    session_of = order // n_questions if n_questions else order
    exam_of = exam_of_question[question_of]
    row = exam_of * sessions + session_of
    # position of each entry within its (session, exam) block; blocks are contiguous in ``order``
    block = session_of * n_exams + exam_of
    entries = np.arange(len(order))
    starts_block = np.ones(len(order), dtype=bool)
    starts_block[1:] = block[1:] != block[:-1]
    position = entries - np.maximum.accumulate(np.where(starts_block, entries, 0))
    width = rules.longest_budget
    keep = position < width
    index = np.full((n_exams * sessions, width), NO_QUESTION, dtype=np.int64)
    index[row[keep], position[keep]] = question_of[keep]
    return exams.drop("size"), index


def scored_skills(questions: pl.DataFrame, rules: SmartScoreRules, seed: int) -> pl.DataFrame:
    """The (split, skill_key) exams that are scored (see ``exam_sample``)."""
    return exam_sample(questions, rules, seed)[0]


def exam_sample(questions: pl.DataFrame, rules: SmartScoreRules, seed: int) -> tuple[pl.DataFrame, list[str]]:
    """The (split, skill_key) exams that are scored, and notes on the paper's sample.

    Accuracy-subject skills all; SmartScore skills with at least ``min_questions`` questions.
    With ``skill_sample == "paper"``, a subject of ``sample_sizes`` takes the skills of the
    paper's Table 10 (``PAPER_SKILLS``) that the build has; where it lacks some, the rest of its
    quota is a seeded sample (``seed``, split and subject) of its other skills, and a note says so.
    """
    sizes = questions.group_by(["split", "subject", "skill_key"]).agg(pl.len().alias("size")).sort(
        ["split", "subject", "skill_key"]
    )
    by_accuracy = pl.col("subject").is_in(list(rules.accuracy_subjects))
    eligible = sizes.filter(by_accuracy | (pl.col("size") >= rules.min_questions))
    if rules.skill_sample == "all":
        return eligible.select("split", "skill_key"), []
    quota = dict(rules.sample_sizes)
    kept = [eligible.filter(by_accuracy).select("split", "skill_key")]
    notes: list[str] = []
    for (split, subject), group in eligible.filter(~by_accuracy).group_by(["split", "subject"], maintain_order=True):
        keys = group["skill_key"].to_list()
        size = quota.get(str(subject))
        if size is not None:
            listed = set(PAPER_SKILLS.get(str(subject), ()))
            chosen = [k for k in keys if k in listed]
            others = [k for k in keys if k not in listed]
            wanted = max(0, size - len(chosen))
            if wanted and others:
                rng = np.random.default_rng([seed, zlib.crc32(f"{split}/{subject}".encode())])
                picked = rng.choice(len(others), size=min(wanted, len(others)), replace=False)
                chosen += [others[i] for i in picked]
            if listed and len(chosen) > len(listed & set(keys)):
                notes.append(
                    f"{subject} ({split}): {len(listed & set(keys))} of the paper's {len(listed)} Table 10 skills are in "
                    f"this build; {len(chosen) - len(listed & set(keys))} more drawn at random from its other skills"
                )
            keys = sorted(chosen)
        kept.append(pl.DataFrame({"split": [split] * len(keys), "skill_key": keys}, schema={"split": pl.String, "skill_key": pl.String}))
    return pl.concat(kept, how="vertical"), notes


def paper_sample_notes(scored: pl.DataFrame, rules: SmartScoreRules, seed: int = 0) -> list[str]:
    """Where ``skill_sample == "paper"`` could not take the paper's skills (``exam_sample``)."""
    if rules.skill_sample != "paper" or scored.height == 0:
        return []
    questions = scored.select(
        pl.col("split").cast(pl.String),
        pl.col("subject").cast(pl.String),
        skill_key_expr().alias("skill_key"),
        pl.col("question_id").cast(pl.String),
    ).unique(subset=["split", "skill_key", "question_id"])
    return exam_sample(questions, rules, seed)[1]


def exam_scores(
    scored: pl.DataFrame,
    rules: SmartScoreRules = SmartScoreRules(),
    seed: int = 0,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
) -> pl.DataFrame:
    """Exam scores per (model, split) as metric='exam_score' rows (skill, subject, grade, macro).

    ``seed`` fixes the session orders; ``bootstrap`` > 0 resamples skills for the intervals
    of the subject/grade means instead of the normal approximation.
    """
    required = ("model", "question_id", "split", "subject", "grade", "skill", "correct")
    missing = [c for c in required if c not in scored.columns]
    if missing:
        raise MetricsInputError(f"scored predictions are missing column(s): {', '.join(missing)}")
    if scored.height == 0:
        return empty_metrics()
    frame = scored.select(
        pl.col("model").cast(pl.String),
        pl.col("question_id").cast(pl.String),
        pl.col("split").cast(pl.String),
        pl.col("subject").cast(pl.String),
        pl.col("grade").cast(pl.String).fill_null(NO_GRADE).alias("grade_key"),
        skill_key_expr().alias("skill_key"),
        pl.col("correct").cast(pl.Boolean),
    )
    nulls = frame.select(pl.col("model", "question_id", "split", "subject", "skill_key", "correct").null_count()).row(0)
    if any(nulls):
        raise MetricsInputError("scored predictions have nulls in model/question_id/split/subject/skill/correct")
    questions = frame.unique(subset=["split", "skill_key", "question_id"], keep="first").select(
        "split", "subject", "grade_key", "skill_key", "question_id"
    )
    if questions.height != questions.unique(["split", "question_id"]).height:
        raise MetricsInputError("a question id appears under two different skills")
    exams, index = session_orders(questions, rules, seed)
    chosen = scored_skills(questions, rules, seed)
    ordered_ids = questions.sort(["split", "skill_key", "question_id"]).select(
        "split", "question_id", pl.int_range(pl.len(), dtype=pl.Int64).alias("question_index")
    )
    with_index = frame.join(ordered_ids, on=["split", "question_id"], how="left")
    n_questions = ordered_ids.height
    sessions = rules.sessions
    exam_subjects = np.repeat(exams["subject"].to_numpy(), sessions)
    rows_of_subject = {str(subject): np.flatnonzero(exam_subjects == subject) for subject in sorted(set(exam_subjects.tolist()))}
    skill_rows = []
    accuracy_units = []
    for model in sorted(with_index["model"].unique().to_list()):
        mine = with_index.filter(pl.col("model") == model)
        if mine.select(pl.col("question_index").n_unique()).item() != mine.height:
            raise MetricsInputError(f"duplicate prediction rows for model {model!r}")
        answer_of_question = np.full(n_questions + 1, NO_QUESTION, dtype=np.int8)  # last slot: padding
        answer_of_question[mine["question_index"].to_numpy()] = mine["correct"].to_numpy().astype(np.int8)
        answers = answer_of_question[np.where(index >= 0, index, n_questions)]
        final = np.zeros(answers.shape[0], dtype=np.int64)
        for subject, session_rows in rows_of_subject.items():
            final[session_rows], _answered = simulate_sessions(answers[session_rows], rules.for_subject(subject))
        finals = final.reshape(-1, sessions).astype(np.float64) if len(final) else np.zeros((0, sessions))
        per_exam = finals.mean(axis=1)
        session_sd = finals.std(axis=1, ddof=1) if sessions > 1 else np.zeros(len(per_exam))
        stats = (
            mine.group_by(["split", "skill_key"])
            .agg(pl.len().alias("n"), (pl.col("correct").mean() * PERCENT).alias("accuracy"))
        )
        rows = (
            exams.with_columns(
                pl.Series("simulated", per_exam, dtype=pl.Float64), pl.Series("session_sd", session_sd, dtype=pl.Float64)
            )
            .join(stats, on=["split", "skill_key"], how="inner")
            .join(chosen, on=["split", "skill_key"], how="semi")
            .with_columns(
                pl.when(pl.col("subject").is_in(list(rules.accuracy_subjects)))
                .then(pl.col("accuracy"))
                .otherwise(pl.col("simulated"))
                .alias("value"),
                pl.col("subject").is_in(list(rules.accuracy_subjects)).alias("by_accuracy"),
                pl.lit(model).alias("model"),
            )
        )
        skill_rows.append(rows)
        accuracy_units.append(
            mine.filter(pl.col("subject").is_in(list(rules.accuracy_subjects))).select(
                pl.lit(model).alias("model"), "split", "subject", "grade_key", "question_id", pl.col("correct").cast(pl.Float64)
            )
        )
    skills = pl.concat(skill_rows, how="vertical") if skill_rows else pl.DataFrame()
    if skills.height == 0:
        return empty_metrics()
    units = pl.concat(accuracy_units, how="vertical")
    return sort_metrics(_aggregate(skills, units, rules, bootstrap=bootstrap, seed=seed))


def _aggregate(
    skills: pl.DataFrame, accuracy_units: pl.DataFrame, rules: SmartScoreRules, *, bootstrap: int, seed: int
) -> pl.DataFrame:
    """Skill rows plus means over skills per subject and grade and the macro over subjects.

    A skill scored by simulation gets the simulation's own noise as its interval (mean over
    sessions +- 1.96 sd/sqrt(sessions)); a skill scored by accuracy its Wilson interval. A
    subject or grade of accuracy subjects (technology) averages its questions, not its skills
    (its value is the subject accuracy, the same for the subject and its grade), with a Wilson
    interval. A subject or grade of simulated skills averages its skills with a normal interval
    of variance (between-skill variance + mean simulation noise) / skills; with one skill, the
    spread of a single session stands in for the between-skill variance (never [0, 100]).
    ``bootstrap`` > 0 resamples the units instead, except where the resamples cannot vary.
    """
    # a fixed row order: the float means below then sum in the same order on every run
    skills = skills.sort(["model", "split", "skill_key"])
    sessions = float(rules.sessions)
    skill_p = pl.col("value") / PERCENT
    skill_noise = (pl.col("session_sd") / PERCENT) ** 2 / sessions
    noise_half = Z_95 * skill_noise.sqrt() * PERCENT
    accuracy_low, accuracy_high = wilson_interval(
        skill_p, skill_p * (1.0 - skill_p) / pl.col("n"), pl.col("n").cast(pl.Float64), pl.col("n")
    )
    parts = [
        skills.select(
            "model",
            "split",
            pl.lit("exam_score").alias("metric"),
            pl.lit("skill").alias("group_by"),
            pl.col("skill_key").alias("group_value"),
            "value",
            pl.col("n").cast(pl.Int64),
            pl.when(pl.col("by_accuracy")).then(accuracy_low * PERCENT)
            .otherwise(pl.max_horizontal(pl.col("value") - noise_half, pl.lit(0.0))).alias("ci_low"),
            pl.when(pl.col("by_accuracy")).then(accuracy_high * PERCENT)
            .otherwise(pl.min_horizontal(pl.col("value") + noise_half, pl.lit(PERCENT))).alias("ci_high"),
        )
    ]
    subject_values = None
    subject_result = None
    for column, group_by in (("subject", "subject"), ("grade_key", "grade")):
        units = pl.concat(
            [
                skills.filter(~pl.col("by_accuracy")).select(
                    "model",
                    "split",
                    pl.lit(group_by).alias("group_by"),
                    pl.col(column).alias("group_value"),
                    pl.col("skill_key").alias("cluster"),
                    skill_p.alias("num"),
                    pl.lit(1.0).alias("den"),
                    skill_noise.alias("noise"),
                    ((pl.col("session_sd") / PERCENT) ** 2).alias("single_session"),
                    pl.lit(False).alias("question"),
                ),
                accuracy_units.select(
                    "model",
                    "split",
                    pl.lit(group_by).alias("group_by"),
                    pl.col(column).alias("group_value"),
                    pl.col("question_id").alias("cluster"),
                    pl.col("correct").alias("num"),
                    pl.lit(1.0).alias("den"),
                    pl.lit(0.0).alias("noise"),
                    pl.lit(0.0).alias("single_session"),
                    pl.lit(True).alias("question"),
                ),
            ],
            how="vertical",
        ).sort(["model", "split", "group_value", "cluster"])
        values = (
            units.group_by(["model", "split", "group_value"], maintain_order=True)
            .agg(
                (pl.col("num").mean() * PERCENT).alias("value"),
                pl.len().cast(pl.Int64).alias("n"),
                pl.col("question").all().alias("questions_only"),
                pl.col("num").var(ddof=1).alias("between"),
                pl.col("noise").mean().alias("noise"),
                pl.col("single_session").mean().alias("single_session"),
            )
            .sort(["model", "split", "group_value"])
        )
        p = pl.col("value") / PERCENT
        count = pl.col("n").cast(pl.Float64)
        variance = (pl.coalesce(pl.col("between"), pl.col("single_session")) + pl.col("noise")) / count
        half = Z_95 * variance.sqrt() * PERCENT
        wilson_low, wilson_high = wilson_interval(p, p * (1.0 - p) / count, count, pl.col("n"))
        values = values.with_columns(
            pl.when(pl.col("questions_only")).then(wilson_low * PERCENT)
            .otherwise(pl.max_horizontal(pl.col("value") - half, pl.lit(0.0))).alias("ci_low"),
            pl.when(pl.col("questions_only")).then(wilson_high * PERCENT)
            .otherwise(pl.min_horizontal(pl.col("value") + half, pl.lit(PERCENT))).alias("ci_high"),
        )
        if bootstrap > 0:
            result = bootstrap_ratio(
                units,
                ["model", "split", "group_by", "group_value"],
                ["model", "split", "group_by"],
                bootstrap=bootstrap,
                seed=seed,
                keep_replicates=column == "subject",
            )
            resampled = result.cells.drop("group_by").select(
                "model", "split", "group_value", (pl.col("ci_low") * PERCENT).alias("boot_low"), (pl.col("ci_high") * PERCENT).alias("boot_high")
            )
            degenerate = pl.col("boot_low").is_null() | (pl.col("boot_low") >= pl.col("boot_high"))
            values = values.join(resampled, on=["model", "split", "group_value"], how="left").with_columns(
                degenerate.alias("degenerate"),
                pl.when(degenerate).then(pl.col("ci_low")).otherwise(pl.col("boot_low")).alias("ci_low"),
                pl.when(degenerate).then(pl.col("ci_high")).otherwise(pl.col("boot_high")).alias("ci_high"),
            )
            if column == "subject":
                subject_result = result
        if column == "subject":
            subject_values = values
        parts.append(
            values.select(
                "model",
                "split",
                pl.lit("exam_score").alias("metric"),
                pl.lit(group_by).alias("group_by"),
                "group_value",
                "value",
                "n",
                "ci_low",
                "ci_high",
            )
        )
    # the macro's n is the number of units (skills; questions for accuracy subjects)
    parts.append(_macro_rows(subject_values, subject_result, "exam_score", proportion=False))
    return _concat_metric_rows([p.select(METRIC_COLUMNS) for p in parts])


__all__ = [
    "SmartScoreRules",
    "exam_scores",
    "session_orders",
    "simulate_session",
    "simulate_sessions",
]


@register_metric(metric="exam_score", higher_is_better=True, aggregation="rows")
def exam_score(inputs: MeasureInputs) -> pl.DataFrame:
    return exam_scores(inputs.scored, inputs.smartscore or SmartScoreRules(), seed=inputs.seed, bootstrap=inputs.bootstrap)
