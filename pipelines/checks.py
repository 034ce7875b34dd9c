"""The data quality checks behind the Dagster asset checks, as plain functions.

Each check reads lake files and returns a ``CheckOutcome``. ``run_check`` memoizes it on
the content of the files it reads (``pipelines.incremental``), so a rebuild that changed
nothing does not pay for the checks again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import polars as pl

from .home import DataHome
from .settings import BuildSettings


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict = field(default_factory=dict)


def _lake(home: DataHome, name: str) -> pl.DataFrame:
    from .stages import read_lake

    return read_lake(home, name)


def _num_options() -> pl.Expr:
    return pl.coalesce(pl.col("choices").list.len(), pl.col("choice_images").list.len())


def no_identity_twice(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    frame = _lake(home, "deduplicated")
    repeated = frame.height - frame["question_id"].n_unique()
    return CheckOutcome(repeated == 0, f"{repeated} repeated question ids", {"repeated": repeated})


def kept_questions_are_valid(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    frame = _lake(home, "deduplicated").with_columns(_num_options().alias("_k"))
    no_image = frame.filter(pl.col("problem_image").is_null() & pl.col("choice_images").is_null()).height
    bad_count = frame.filter((pl.col("_k") < 2) | (pl.col("_k") > 5)).height
    bad_answer = frame.filter((pl.col("answer_idx") < -1) | (pl.col("answer_idx") >= pl.col("_k"))).height
    ok = no_image == bad_count == bad_answer == 0
    return CheckOutcome(
        ok, "images, option counts and answers",
        {"no_image": no_image, "bad_option_count": bad_count, "answer_out_of_range": bad_answer},
    )


def latex_is_valid(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    from .latex import invalid_formulas

    frame = _lake(home, "latex")
    texts = frame["problem"].to_list() + [c for cs in frame["choices"].drop_nulls().to_list() for c in cs]
    bad = [t for t in texts if invalid_formulas(t)]
    return CheckOutcome(not bad, f"{len(bad)} texts with invalid LaTeX", {"invalid": len(bad), "examples": bad[:5]})


def answer_position_uniform(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    from .shuffle import answer_position_uniformity

    results = answer_position_uniformity(_lake(home, "shuffled"))
    worst = min((r.p_value for r in results if r.n >= 20), default=1.0)
    return CheckOutcome(
        worst >= 0.001,
        f"smallest p-value {worst:.4f}",
        {"per_num_options": {str(r.num_options): {"n": r.n, "counts": list(r.counts), "p": round(r.p_value, 4)} for r in results}},
    )


def answer_content_unchanged(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    def answer_content(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("answer_idx") >= 0).select(
            "question_id",
            pl.coalesce(
                pl.col("choices").list.get(pl.col("answer_idx"), null_on_oob=True),
                pl.col("choice_images").list.get(pl.col("answer_idx"), null_on_oob=True),
            ).alias("answer"),
        )

    columns = ["question_id", "choices", "choice_images", "answer_idx"]
    joined = answer_content(_lake(home, "latex").select(columns)).join(
        answer_content(_lake(home, "shuffled").select(columns)), on="question_id", suffix="_after"
    )
    changed = joined.filter(pl.col("answer") != pl.col("answer_after")).height
    return CheckOutcome(changed == 0, f"{changed} answers changed", {"changed": changed, "compared": joined.height})


def no_split_leakage(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    from .split import leakage

    leaks = leakage(_lake(home, "questions"))
    return CheckOutcome(leaks.height == 0, f"{leaks.height} groups in more than one split", {"leaking_groups": leaks.height})


def split_proportions(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    frame = _lake(home, "questions")
    total = max(frame.height, 1)
    wanted = dict(zip(("train", "valid", "test"), (settings.split_train, settings.split_valid, settings.split_test)))
    norm = sum(wanted.values())
    actual = {s: round(float((frame["split"] == s).sum()) / total, 4) for s in wanted}
    off = {s: round(abs(actual[s] - wanted[s] / norm), 4) for s in wanted}
    ok = max(off.values()) <= 0.03 or frame.height < 100
    return CheckOutcome(ok, "proportions vs ratios (within 3 points)", {"actual": actual, "deviation": off})


def export_invariants(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    from .export import check_release_invariants

    problems = check_release_invariants(home.export)
    return CheckOutcome(not problems, f"{len(problems)} problems", {"problems": problems[:10]})


# check -> the lake files it reads (its memo inputs), relative to the data home
CHECK_INPUTS: dict[str, Callable[[DataHome], list[Path]]] = {
    "no_identity_twice": lambda h: [h.lake_path("deduplicated")],
    "kept_questions_are_valid": lambda h: [h.lake_path("deduplicated")],
    "latex_is_valid": lambda h: [h.lake_path("latex")],
    "answer_position_uniform": lambda h: [h.lake_path("shuffled")],
    "answer_content_unchanged": lambda h: [h.lake_path("latex"), h.lake_path("shuffled")],
    "no_split_leakage": lambda h: [h.lake_path("questions")],
    "split_proportions": lambda h: [h.lake_path("questions")],
    "export_invariants": lambda h: sorted(h.export.glob("*.parquet")),
}


def run_check(name: str, settings: BuildSettings) -> CheckOutcome:
    """Run check ``name`` unless its inputs are unchanged since it last ran."""
    from .incremental import memoized

    home = settings.data_home
    check = globals()[name]

    def compute() -> dict:
        outcome = check(home, settings)
        return {"passed": outcome.passed, "description": outcome.description, "metadata": outcome.metadata}

    figures = memoized(
        home, f"check-{name}", compute,
        inputs=CHECK_INPUTS[name](home),
        settings={"split": [settings.split_train, settings.split_valid, settings.split_test]}
        if name == "split_proportions" else None,
        code=("checks.py", "shuffle.py", "split.py", "latex.py", "export.py"),
    )
    return CheckOutcome(bool(figures["passed"]), figures["description"], dict(figures.get("metadata") or {}))
