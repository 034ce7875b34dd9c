"""Agreement between two CogME taggings (e.g. hand labels vs the automatic tagger).

Per component, over the questions tagged by both sides:
- THINKING: exact-match accuracy and Cohen's kappa over the levels.
- TARGET / CONTENT: every (question, sub-component) cell is a present/absent decision;
  ``accuracy`` is the micro-averaged agreement over all cells, ``kappa`` Cohen's kappa on
  those pooled cells, ``jaccard`` the mean per-question |ref ∩ pred| / |ref ∪ pred|,
  ``exact_set`` the share of questions with identical sets, and micro precision/recall/F1
  of the predicted tags against the reference.
The cells span the taxonomy's sub-components when a taxonomy is given, otherwise the
sub-components that either side uses (fewer true negatives, so a lower accuracy).
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable, Sequence

import polars as pl

from pipelines.profiles.cogme.taxonomy import COMPONENTS, Taxonomy

AGREEMENT_SCHEMA = {
    "component": pl.String,
    "n_questions": pl.Int64,
    "n_cells": pl.Int64,
    "accuracy": pl.Float64,
    "kappa": pl.Float64,
    "jaccard": pl.Float64,
    "exact_set": pl.Float64,
    "precision": pl.Float64,
    "recall": pl.Float64,
    "f1": pl.Float64,
}


class AgreementError(ValueError):
    """The two taggings cannot be compared (one-line message)."""


def cohen_kappa(reference: Sequence[Hashable], predicted: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters over the same items; None when undefined (chance agreement 1)."""
    if len(reference) != len(predicted):
        raise AgreementError("kappa needs two label sequences of the same length")
    n = len(reference)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(reference, predicted)) / n
    ref_counts, pred_counts = Counter(reference), Counter(predicted)
    expected = sum(ref_counts[k] * pred_counts.get(k, 0) for k in ref_counts) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def _sets(tags: pl.DataFrame, component: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for qid, sub in tags.filter(pl.col("component") == component).select("question_id", "sub_component").iter_rows():
        out.setdefault(qid, set()).add(sub)
    return out


def agreement(
    reference_tags: pl.DataFrame, predicted_tags: pl.DataFrame, taxonomy: Taxonomy | None = None
) -> pl.DataFrame:
    for name, frame in (("reference", reference_tags), ("predicted", predicted_tags)):
        missing = [c for c in ("question_id", "component", "sub_component") if c not in frame.columns]
        if missing:
            raise AgreementError(f"{name} tags lack column(s) {', '.join(missing)}")
    for name, frame in (("reference", reference_tags), ("predicted", predicted_tags)):
        if "source" in frame.columns and frame["source"].n_unique() > 1:
            raise AgreementError(f"{name} tags mix several sources; compare one source at a time")
    common = sorted(set(reference_tags["question_id"].to_list()) & set(predicted_tags["question_id"].to_list()))
    if not common:
        raise AgreementError("the two taggings share no question_id")

    rows = []
    for component in COMPONENTS:
        ref, pred = _sets(reference_tags, component), _sets(predicted_tags, component)
        if component == "THINKING":
            ref_levels = [_only(ref.get(q), q, "reference") for q in common]
            pred_levels = [_only(pred.get(q), q, "predicted") for q in common]
            accuracy = sum(a == b for a, b in zip(ref_levels, pred_levels)) / len(common)
            rows.append(
                {
                    "component": component,
                    "n_questions": len(common),
                    "n_cells": len(common),
                    "accuracy": accuracy,
                    "kappa": cohen_kappa(ref_levels, pred_levels),
                    "jaccard": None,
                    "exact_set": accuracy,
                    "precision": None,
                    "recall": None,
                    "f1": None,
                }
            )
            continue
        if taxonomy is not None:
            universe = list(taxonomy.sub_components(component))
        else:
            universe = sorted({s for q in common for s in ref.get(q, set()) | pred.get(q, set())})
        ref_cells, pred_cells = [], []
        jaccards, exact = [], 0
        tp = fp = fn = 0
        for q in common:
            a, b = ref.get(q, set()), pred.get(q, set())
            for sub in universe:
                ref_cells.append(sub in a)
                pred_cells.append(sub in b)
            union = a | b
            jaccards.append(len(a & b) / len(union) if union else 1.0)
            exact += a == b
            tp += len(a & b)
            fp += len(b - a)
            fn += len(a - b)
        cells = len(ref_cells)
        precision = tp / (tp + fp) if tp + fp else None
        recall = tp / (tp + fn) if tp + fn else None
        f1 = (2 * precision * recall / (precision + recall)) if precision and recall else 0.0
        rows.append(
            {
                "component": component,
                "n_questions": len(common),
                "n_cells": cells,
                "accuracy": sum(x == y for x, y in zip(ref_cells, pred_cells)) / cells if cells else None,
                "kappa": cohen_kappa(ref_cells, pred_cells),
                "jaccard": sum(jaccards) / len(jaccards),
                "exact_set": exact / len(common),
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def agreement_by_sub_component(
    reference_tags: pl.DataFrame, predicted_tags: pl.DataFrame, taxonomy: Taxonomy
) -> pl.DataFrame:
    """Per sub-component: how often each side uses it, precision, recall and kappa of presence."""
    common = sorted(set(reference_tags["question_id"].to_list()) & set(predicted_tags["question_id"].to_list()))
    rows = []
    for component in COMPONENTS:
        ref, pred = _sets(reference_tags, component), _sets(predicted_tags, component)
        for sub in taxonomy.sub_components(component):
            a = [sub in ref.get(q, set()) for q in common]
            b = [sub in pred.get(q, set()) for q in common]
            tp = sum(x and y for x, y in zip(a, b))
            rows.append(
                {
                    "component": component,
                    "sub_component": sub,
                    "n_reference": sum(a),
                    "n_predicted": sum(b),
                    "precision": tp / sum(b) if sum(b) else None,
                    "recall": tp / sum(a) if sum(a) else None,
                    "kappa": cohen_kappa(a, b),
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "component": pl.String,
            "sub_component": pl.String,
            "n_reference": pl.Int64,
            "n_predicted": pl.Int64,
            "precision": pl.Float64,
            "recall": pl.Float64,
            "kappa": pl.Float64,
        },
    )


def _only(levels: set[str] | None, qid: str, side: str) -> str:
    if not levels or len(levels) != 1:
        raise AgreementError(f"{side} tags: question {qid} needs exactly one THINKING tag")
    return next(iter(levels))
