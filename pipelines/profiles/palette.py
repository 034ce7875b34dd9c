"""The one palette of model colours: every plot of the report (matplotlib figures and the
CogME radar plots) takes a model's colour from ``model_colors`` over all models of the report,
so a model has the same colour everywhere."""

from __future__ import annotations

from typing import Iterable

from pipelines.evaluation.reference_results import PAPER_PREFIX

# matplotlib's tab10; the page's own CSS uses none of these
MODEL_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
# the paper's reported rows: greys (drawn hatched)
PAPER_COLORS = ("#4d4d4d", "#6b6b6b", "#898989", "#a7a7a7", "#c5c5c5", "#333333", "#b0b0b0")


def model_colors(models: Iterable[str]) -> dict[str, str]:
    """Colour of each model, by its sorted position among the given models (own models from
    ``MODEL_COLORS``, ``paper:`` rows from ``PAPER_COLORS``)."""
    names = sorted(set(models))
    own = [m for m in names if not m.startswith(PAPER_PREFIX)]
    paper = [m for m in names if m.startswith(PAPER_PREFIX)]
    colors = {m: MODEL_COLORS[i % len(MODEL_COLORS)] for i, m in enumerate(own)}
    colors.update({m: PAPER_COLORS[i % len(PAPER_COLORS)] for i, m in enumerate(paper)})
    return colors
