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
    """Every formula of the output parses, and the TeX math each text already had before the
    LaTeX stage (lake ``deduplicated``) is still in it, unchanged (lake ``latex``)."""
    from .latex import changed_math, invalid_formulas

    frame = _lake(home, "latex")
    texts = frame["problem"].to_list() + [c for cs in frame["choices"].drop_nulls().to_list() for c in cs]
    bad = [t for t in texts if invalid_formulas(t)]
    before = _lake(home, "deduplicated").select("question_id", "problem", "choices")
    joined = before.join(frame.select("question_id", "problem", "choices"), on="question_id", how="left", suffix="_after")
    damaged = []
    for qid, problem, choices, problem_after, choices_after in joined.iter_rows():
        pairs = [("problem", problem, problem_after)]
        pairs += [(f"choice {i}", c, (choices_after or [])[i] if i < len(choices_after or []) else None)
                  for i, c in enumerate(choices or [])]
        for field_name, text, text_after in pairs:
            lost = changed_math(text or "", text_after or "")
            if lost:
                damaged.append({"question_id": qid, "field": field_name, "before": text, "after": text_after, "math": lost[:3]})
    return CheckOutcome(
        not bad and not damaged,
        f"{len(bad)} texts with invalid LaTeX, {len(damaged)} texts whose math changed",
        {"invalid": len(bad), "examples": bad[:5], "math_changed": len(damaged), "math_changed_examples": damaged[:5]},
    )


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


def kept_order_keys_match_source(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Questions whose option order carries meaning kept it: the recorded reason is the one
    their source options call for, the permutation is the identity, the options are the
    source's, and a figure-label key still names the source's answer position."""
    from .option_order import FIGURE_LABELS, KEPT_ORDER_PREFIX, label_index, sequence_scheme
    from .shuffle import option_orders

    source = _lake(home, "latex").select("question_id", "choices", "answer_idx")
    after = _lake(home, "shuffled")
    if "shuffle" not in after.columns:
        return CheckOutcome(False, "the shuffled questions record no shuffle column", {"missing_column": "shuffle"})
    source = source.with_columns(option_orders(source).alias("expected"))
    joined = source.join(
        after.select("question_id", "choices", "answer_idx", "permutation", "shuffle"),
        on="question_id", suffix="_after",
    )
    wrong_reason = joined.filter(pl.col("expected") != pl.col("shuffle"))
    kept = joined.filter(pl.col("shuffle").str.starts_with(KEPT_ORDER_PREFIX))
    moved = kept.filter(
        (pl.col("permutation") != pl.int_ranges(0, pl.col("permutation").list.len()))
        | (pl.col("choices") != pl.col("choices_after"))
    )
    labelled = kept.filter((pl.col("shuffle") == FIGURE_LABELS) & (pl.col("answer_idx") >= 0))
    key_labels = labelled.select(
        "question_id", "answer_idx", "choices_after",
        pl.col("choices_after").list.get(pl.col("answer_idx_after"), null_on_oob=True).alias("key"),
    )
    wrong_key = [
        qid for qid, source_answer, options, key in key_labels.iter_rows()
        if label_index(key, sequence_scheme(options)) != source_answer
    ]
    counts = kept.group_by("shuffle").len()
    bad = sorted(set(wrong_reason["question_id"]) | set(moved["question_id"]) | set(wrong_key))
    return CheckOutcome(
        not bad,
        f"{len(bad)} kept-order questions with the wrong reason, a moved option or a moved key",
        {
            "kept_order": dict(zip(counts["shuffle"].to_list(), counts["len"].to_list())),
            "reason_differs_from_options": wrong_reason.height,
            "order_changed": moved.height,
            "key_label_differs_from_source": len(wrong_key),
            "examples": bad[:5],
        },
    )


def no_split_leakage(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """No family in two splits, and, independently of the families, no problem image with the
    same canonical stem in two splits."""
    from .split import figure_stem_leakage, leakage

    frame = _lake(home, "questions")
    families = leakage(frame)
    pairs = figure_stem_leakage(frame)
    return CheckOutcome(
        families.height == 0 and pairs.height == 0,
        f"{families.height} families and {pairs.height} figure+stem pairs in more than one split",
        {
            "leaking_families": families.height,
            "leaking_figure_stems": pairs.height,
            "examples": [list(ids) for ids in pairs["question_ids"].head(5).to_list()],
        },
    )


def split_proportions(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Every subject within one question of its largest-remainder quotas (one family when its
    families are larger)."""
    from .split import SplitConfig, proportions_by_subject

    ratios = SplitConfig(settings.split_train, settings.split_valid, settings.split_test).ratios()
    subjects = proportions_by_subject(_lake(home, "questions"), ratios)
    off = [s["subject"] for s in subjects if not s["ok"]]
    return CheckOutcome(
        not off,
        f"{len(off)} subjects off their split quotas" + (f" ({', '.join(map(str, off))})" if off else ""),
        {str(s["subject"]): {"counts": s["counts"], "targets": s["targets"], "allowed": s["allowed"]} for s in subjects},
    )


def export_invariants(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    from .export import check_release_invariants

    problems = check_release_invariants(home.export)
    first = f", first: {problems[0]}" if problems else ""
    return CheckOutcome(not problems, f"{len(problems)} problems{first}", {"problems": problems[:10]})


# check -> the lake files it reads (its memo inputs), relative to the data home
CHECK_INPUTS: dict[str, Callable[[DataHome], list[Path]]] = {
    "no_identity_twice": lambda h: [h.lake_path("deduplicated")],
    "kept_questions_are_valid": lambda h: [h.lake_path("deduplicated")],
    "latex_is_valid": lambda h: [h.lake_path("deduplicated"), h.lake_path("latex")],
    "answer_position_uniform": lambda h: [h.lake_path("shuffled")],
    "answer_content_unchanged": lambda h: [h.lake_path("latex"), h.lake_path("shuffled")],
    "kept_order_keys_match_source": lambda h: [h.lake_path("latex"), h.lake_path("shuffled")],
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
        code=("checks.py", "shuffle.py", "option_order.py", "split.py", "dedup/normalize.py", "latex.py", "export.py"),
    )
    return CheckOutcome(bool(figures["passed"]), figures["description"], dict(figures.get("metadata") or {}))
