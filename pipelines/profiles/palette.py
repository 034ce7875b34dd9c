"""The one palette of model colours: every plot of the report (matplotlib figures and the
CogME radar plots) takes a model's colour from ``model_colors``, so a model has the same
colour everywhere; and the colour follows from the model's name (a stable hash), so it stays
the same from one build to the next when other models come and go. ``assigned`` (colours a
home gave before) wins over the hash: a home keeps its models' colours even after a clash."""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping

from pipelines.evaluation.reference_results import PAPER_PREFIX

# matplotlib's tab10 (its grey, kept for the paper's rows, swapped for a dark blue), then
# tab20's lighter tones: distinct on white; the page's CSS uses none
MODEL_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#393b79",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
)
STRONG_TONES = 10
# the paper's reported rows: greys, each with its own hatch (drawn over the bar)
PAPER_COLORS = (
    "#4d4d4d", "#6b6b6b", "#898989", "#a7a7a7", "#c5c5c5", "#333333",
    "#5c5c5c", "#7a7a7a", "#989898", "#b6b6b6", "#404040", "#d2d2d2",
)
PAPER_HATCHES = ("//", "\\\\", "xx", "..", "++", "--", "oo", "||", "**", "OO", "x.", "/.")


def _slot(name: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little") % size


def model_colors(models: Iterable[str], assigned: Mapping[str, str] | None = None) -> dict[str, str]:
    """Colour of each model: ``assigned`` where given, else the palette slot its name hashes to,
    moving to the next free slot (names in sorted order) while the palette has one. Own models
    take ``MODEL_COLORS``, ``paper:`` rows ``PAPER_COLORS``."""
    assigned = dict(assigned or {})
    names = sorted(set(models))
    colors: dict[str, str] = {}
    for palette, members in (
        (MODEL_COLORS, [m for m in names if not m.startswith(PAPER_PREFIX)]),
        (PAPER_COLORS, [m for m in names if m.startswith(PAPER_PREFIX)]),
    ):
        taken = {assigned[m] for m in members if assigned.get(m) in palette}
        for name in members:
            if assigned.get(name) in palette:
                colors[name] = assigned[name]
                continue
            # the strong tones first: a name hashes into them and the light ones only take overflow
            strong = min(STRONG_TONES, len(palette))
            start = _slot(name, strong)
            order = [palette[(start + step) % strong] for step in range(strong)] + list(palette[strong:])
            color = next((c for c in order if c not in taken), palette[start])
            colors[name] = color
            taken.add(color)
    return colors


def paper_hatch(color: str) -> str:
    """The hatch drawn over a ``paper:`` row's bars (one per paper colour)."""
    return PAPER_HATCHES[PAPER_COLORS.index(color) % len(PAPER_HATCHES)] if color in PAPER_COLORS else "//"
