"""The CogME profiles section of the report: a self-contained HTML fragment with inline SVG.

``render_profiles_html(profiles)`` takes the rows of the ``profiles`` view (dataset and model
profiles together, with ``measure`` and ``scope``) and returns HTML with:
radar plots per component (one polygon per model, weighted achievement rate, paper Fig. 3),
dataset-profile bars (frequency, paper Fig. 4) and a per-scope frequency table, the models
side by side (scope all, then overall per subject and split), and the frequency/accuracy relation. All text is HTML-escaped, no external
resources are referenced, and the output depends only on the input rows.
"""

from __future__ import annotations

import math
from html import escape

import polars as pl

from pipelines.profiles.palette import model_colors

from pipelines.profiles.cogme.profiles import frequency_accuracy_relation

COMPONENT_ORDER = ("TARGET", "CONTENT", "THINKING")
# Colour-blind-friendly palette (Okabe-Ito), assigned to models in sorted order.
RADAR_RADIUS = 120
RADAR_LABEL_FONT = 11
# Average glyph advance of a sans-serif font is about 0.55 em; 0.62 leaves room for wide glyphs.
TEXT_WIDTH_PER_FONT_SIZE = 0.62


_STYLE = (
    "<style>.cogme-profiles table{border-collapse:collapse;font-size:12px;margin:8px 0}"
    ".cogme-profiles th,.cogme-profiles td{border:1px solid #ddd;padding:2px 6px;text-align:right}"
    ".cogme-profiles td:nth-child(-n+2),.cogme-profiles th:nth-child(-n+2){text-align:left}"
    ".cogme-profiles .cogme-relation td:nth-child(6){text-align:left}"
    ".cogme-profiles figure{margin:4px}.cogme-profiles figcaption{font-weight:bold}</style>"
)


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _coord(x: float) -> str:
    return f"{x:.2f}"


def _sub_components(profiles: pl.DataFrame, component: str) -> list[str]:
    """Sub-components of a component in the order the profile rows list them."""
    seen: list[str] = []
    for sub in profiles.filter(pl.col("component") == component)["sub_component"].to_list():
        if sub not in seen:
            seen.append(sub)
    return seen


def text_width(text: str, font_size: float) -> float:
    """A generous estimate of the rendered width of ``text`` (sans-serif), so a box sized by it never clips."""
    return len(text) * font_size * TEXT_WIDTH_PER_FONT_SIZE


def _radar_svg(component: str, axes: list[str], series: list[tuple[str, str, list[float | None]]]) -> str:
    """The radar, its SVG box fitted to the rings and the axis labels (no clipped label, no empty margin)."""
    n = len(axes)

    def point(i: int, radius: float) -> tuple[float, float]:
        angle = -math.pi / 2 + 2 * math.pi * i / n
        return radius * math.cos(angle), radius * math.sin(angle)

    body = []
    for level in (20, 40, 60, 80, 100):
        ring = [point(i, RADAR_RADIUS * level / 100) for i in range(n)]
        d = "M" + " L".join(f"{_coord(x)} {_coord(y)}" for x, y in ring) + " Z"
        body.append(f'<path class="cogme-grid" d="{d}" fill="none" stroke="#ccc" stroke-width="1"/>')
    xs = [x for i in range(n) for x in (point(i, RADAR_RADIUS)[0],)]
    ys = [y for i in range(n) for y in (point(i, RADAR_RADIUS)[1],)]
    for i, axis in enumerate(axes):
        x, y = point(i, RADAR_RADIUS)
        body.append(
            f'<line class="cogme-axis" x1="0" y1="0" x2="{_coord(x)}" y2="{_coord(y)}" stroke="#bbb" stroke-width="1"/>'
        )
        lx, ly = point(i, RADAR_RADIUS + 18)
        anchor = "middle" if abs(lx) < 1 else ("start" if lx > 0 else "end")
        width = text_width(axis, RADAR_LABEL_FONT)
        left = {"middle": lx - width / 2, "start": lx, "end": lx - width}[anchor]
        xs += [left, left + width]
        ys += [ly + 4 - RADAR_LABEL_FONT, ly + 4 + RADAR_LABEL_FONT * 0.3]
        body.append(
            f'<text class="cogme-label" x="{_coord(lx)}" y="{_coord(ly + 4)}" text-anchor="{anchor}" '
            f'font-size="{RADAR_LABEL_FONT}">{escape(axis)}</text>'
        )
    body.append(f'<text x="3" y="{_coord(-RADAR_RADIUS - 2)}" font-size="9" fill="#888">100</text>')
    for model, colour, values in series:
        pts = [point(i, RADAR_RADIUS * max(0.0, min(100.0, v or 0.0)) / 100) for i, v in enumerate(values)]
        attr = " ".join(f"{_coord(x)},{_coord(y)}" for x, y in pts)
        body.append(
            f'<polygon class="cogme-model" data-model="{escape(model)}" points="{attr}" fill="{colour}" '
            f'fill-opacity="0.18" stroke="{colour}" stroke-width="2"><title>{escape(model)}</title></polygon>'
        )
    pad = 6
    left, top = min(xs) - pad, min(ys) - pad
    width, height = max(xs) + pad - left, max(ys) + pad - top
    return "".join([
        f'<svg class="cogme-radar" role="img" xmlns="http://www.w3.org/2000/svg" width="{_coord(width)}" '
        f'height="{_coord(height)}" viewBox="{_coord(left)} {_coord(top)} {_coord(width)} {_coord(height)}">',
        f"<title>{escape(component)}: weighted achievement rate (%) per sub-component</title>",
        *body,
        "</svg>",
    ])


BAR_LABEL_FONT = 11


def _bars_svg(component: str, rows: list[tuple[str, float | None, int]], labels: list[str]) -> str:
    """Horizontal bars; the label column is as wide as the longest of ``labels`` (the same for every
    component, so the bars line up), the value column as wide as its longest text."""
    bar_w, row_h, label_font, value_font, gap = 280, 20, BAR_LABEL_FONT, 10, 6
    value_texts = [f"{_fmt(value)}% (n={n})" for _, value, n in rows]
    label_w = max(text_width(label, label_font) for label in [*labels, *(sub for sub, _, _ in rows)]) + 2 * gap
    width = label_w + bar_w + gap + max(text_width(t, value_font) for t in value_texts) + gap
    height = row_h * len(rows) + 10
    top = max([v or 0.0 for _, v, _ in rows] + [1.0])
    parts = [
        f'<svg class="cogme-bars" role="img" xmlns="http://www.w3.org/2000/svg" width="{_coord(width)}" '
        f'height="{height}" viewBox="0 0 {_coord(width)} {height}">',
        f"<title>{escape(component)}: share of questions tagged (%)</title>",
    ]
    for i, ((sub, value, n), value_text) in enumerate(zip(rows, value_texts)):
        y = 5 + i * row_h
        length = bar_w * (value or 0.0) / top
        parts.append(
            f'<text class="cogme-label" x="{_coord(label_w - gap)}" y="{y + 14}" text-anchor="end" '
            f'font-size="{label_font}">{escape(sub)}</text>'
            f'<rect class="cogme-bar" x="{_coord(label_w)}" y="{y + 3}" width="{_coord(length)}" height="{row_h - 6}" '
            f'fill="#0072B2"><title>{escape(sub)}: {_fmt(value)}% (n={n})</title></rect>'
            f'<text class="cogme-label" x="{_coord(label_w + length + gap)}" y="{y + 14}" '
            f'font-size="{value_font}">{value_text}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_profiles_html(profiles: pl.DataFrame, heading: bool = False, colors: dict[str, str] | None = None) -> str:
    """The profiles section; ``heading`` adds its own <h2> (the assembled report supplies one);
    ``colors``: the report's model colours (``pipelines.profiles.palette.model_colors``), so a model has
    the same colour as in the other plots."""
    needed = ("profile_of", "component", "sub_component", "value", "n")
    missing = [c for c in needed if c not in profiles.columns]
    if missing:
        raise ValueError(f"profiles lack column(s) {', '.join(missing)}")
    if "measure" not in profiles.columns:
        profiles = profiles.with_columns(
            pl.when(pl.col("profile_of") == "dataset").then(pl.lit("frequency")).otherwise(pl.lit("weighted_achievement")).alias("measure")
        )
    if "scope" not in profiles.columns:
        profiles = profiles.with_columns(pl.lit("all").alias("scope"))
    dataset = profiles.filter(pl.col("profile_of") == "dataset")
    models = profiles.filter(pl.col("profile_of") != "dataset")
    model_names = sorted(models["profile_of"].unique().to_list())
    colours = {**model_colors(model_names), **(colors or {})}

    out = ['<section class="cogme-profiles" id="cogme-profiles">', _STYLE]
    if heading:
        out.append("<h2>CogME profiles</h2>")
    out.append(
        "<p>Every question is tagged with the TARGET it perceives, the CONTENT it needs and the THINKING it "
        "takes (up to three TARGET and three CONTENT tags, only the highest THINKING level). A model's score on a "
        "sub-component is its weighted achievement rate: correct answers weighted by the question's THINKING "
        "level (Recall 1, Grasping 2, Reasoning 3) over the weights of all questions tagged with it.</p>"
    )

    # Radar plots.
    out.append('<h3>Model profiles (weighted achievement rate, %)</h3>')
    if model_names:
        legend = " ".join(
            f'<span class="cogme-legend"><span style="display:inline-block;width:12px;height:12px;'
            f'background:{colours[m]};margin-right:4px"></span>{escape(m)}</span>'
            for m in model_names
        )
        out.append(f'<p class="cogme-legend-row">{legend}</p>')
    else:
        out.append("<p>No model has been evaluated yet.</p>")
    radar_rows = models.filter((pl.col("scope") == "all") & (pl.col("measure") == "weighted_achievement"))
    out.append('<div class="cogme-radars" style="display:flex;flex-wrap:wrap;gap:12px">')
    for component in COMPONENT_ORDER:
        axes = _sub_components(profiles, component)
        if not model_names:
            continue
        if len(axes) < 3:
            out.append(
                f'<p class="note absent">No {escape(component)} radar: a radar needs 3 sub-components, '
                f"the profiles have {len(axes)}.</p>"
            )
            continue
        series = []
        for model in model_names:
            values = dict(
                radar_rows.filter((pl.col("profile_of") == model) & (pl.col("component") == component))
                .select("sub_component", "value")
                .iter_rows()
            )
            series.append((model, colours[model], [values.get(a) for a in axes]))
        out.append(f"<figure><figcaption>{escape(component)}</figcaption>{_radar_svg(component, axes, series)}</figure>")
    out.append("</div>")

    # Dataset profile.
    out.append("<h3>Dataset profile (share of questions tagged, %)</h3>")
    freq_all = dataset.filter((pl.col("scope") == "all") & (pl.col("measure") == "frequency"))
    if freq_all.height:
        total = freq_all["total"].max() if "total" in freq_all.columns else None
        if total is not None:
            out.append(f"<p>{int(total)} questions.</p>")
        out.append('<div class="cogme-dataset-bars">')
        labels = freq_all["sub_component"].to_list()
        for component in COMPONENT_ORDER:
            rows = [
                (sub, value, int(n or 0))
                for sub, value, n in freq_all.filter(pl.col("component") == component)
                .select("sub_component", "value", "n")
                .iter_rows()
            ]
            if rows:
                out.append(f"<figure><figcaption>{escape(component)}</figcaption>{_bars_svg(component, rows, labels)}</figure>")
        out.append("</div>")
        scopes = [s for s in dict.fromkeys(dataset["scope"].to_list())]
        table = ['<table class="cogme-frequency"><thead><tr><th>component</th><th>sub-component</th>']
        table += [f"<th>{escape(s)}</th>" for s in scopes]
        table.append("</tr></thead><tbody>")
        lookup = {
            (c, s, sc): (v, n)
            for c, s, sc, v, n in dataset.select("component", "sub_component", "scope", "value", "n").iter_rows()
        }
        for component in COMPONENT_ORDER:
            for sub in _sub_components(dataset, component):
                cells = "".join(
                    f"<td>{_fmt(lookup.get((component, sub, sc), (None, 0))[0])}</td>" for sc in scopes
                )
                table.append(f"<tr><td>{escape(component)}</td><td>{escape(sub)}</td>{cells}</tr>")
        table.append("</tbody></table>")
        out.append("".join(table))
    else:
        out.append('<p class="note absent">No dataset profile: the profiles have no frequency rows for scope all.</p>')

    # Models side by side.
    if model_names:
        out.append("<h3>Models side by side (scope: all)</h3>")
        all_scope = models.filter(pl.col("scope") == "all")
        lookup = {
            (m, c, s, meas): (v, n)
            for m, c, s, meas, v, n in all_scope.select(
                "profile_of", "component", "sub_component", "measure", "value", "n"
            ).iter_rows()
        }
        table = ['<table class="cogme-models"><thead><tr><th>component</th><th>sub-component</th>']
        for m in model_names:
            table.append(f'<th colspan="3">{escape(m)}</th>')
        table.append("</tr><tr><th></th><th></th>")
        table.append("<th>weighted %</th><th>accuracy %</th><th>n</th>" * len(model_names))
        table.append("</tr></thead><tbody>")
        for component in ("OVERALL",) + COMPONENT_ORDER:
            for sub in _sub_components(all_scope, component):
                cells = []
                for m in model_names:
                    w, n = lookup.get((m, component, sub, "weighted_achievement"), (None, 0))
                    a, _ = lookup.get((m, component, sub, "accuracy"), (None, 0))
                    cells.append(f"<td>{_fmt(w)}</td><td>{_fmt(a)}</td><td>{int(n or 0)}</td>")
                table.append(f"<tr><td>{escape(component)}</td><td>{escape(sub)}</td>{''.join(cells)}</tr>")
        table.append("</tbody></table>")
        out.append("".join(table))

        scoped = models.filter((pl.col("component") == "OVERALL") & (pl.col("scope") != "all"))
        model_scopes = list(dict.fromkeys(scoped["scope"].to_list()))
        if model_scopes:
            out.append("<h3>Models per subject and split (all sub-components)</h3>")
            cells = {
                (m, sc, meas): (v, n)
                for m, sc, meas, v, n in scoped.select("profile_of", "scope", "measure", "value", "n").iter_rows()
            }
            table = ['<table class="cogme-models-by-scope"><thead><tr><th>model</th><th>measure</th>']
            table += [f"<th>{escape(sc)}</th>" for sc in model_scopes]
            table.append("</tr></thead><tbody>")
            for m in model_names:
                for meas, label in (("weighted_achievement", "weighted %"), ("accuracy", "accuracy %")):
                    row = "".join(
                        f"<td>{_fmt(cells.get((m, sc, meas), (None, 0))[0])} (n={int(cells.get((m, sc, meas), (None, 0))[1] or 0)})</td>"
                        for sc in model_scopes
                    )
                    table.append(f"<tr><td>{escape(m)}</td><td>{label}</td>{row}</tr>")
            table.append("</tbody></table>")
            out.append("".join(table))

        # Frequency / accuracy relation.
        if freq_all.height:
            relation = frequency_accuracy_relation(dataset, models)
            out.append("<h3>Rare sub-components and accuracy</h3>")
            out.append(
                "<p>Correlation across TARGET and CONTENT sub-components between how often the dataset asks a "
                "sub-component and a model's score on it (the CogME paper found that sub-components in under 5% of "
                "questions had accuracies under 50%).</p>"
            )
            table = [
                '<table class="cogme-relation"><thead><tr><th>model</th><th>measure</th><th>sub-components</th>'
                "<th>Spearman</th><th>Pearson</th><th>rare (&lt;5%)</th><th>mean on rare</th><th>mean on others</th>"
                "</tr></thead><tbody>"
            ]
            for r in relation.iter_rows(named=True):
                table.append(
                    f"<tr><td>{escape(r['model'])}</td><td>{escape(r['measure'])}</td><td>{r['n_sub_components']}</td>"
                    f"<td>{_fmt(r['spearman'], 2)}</td><td>{_fmt(r['pearson'], 2)}</td>"
                    f"<td>{escape(r['low_frequency_sub_components'] or '–')}</td>"
                    f"<td>{_fmt(r['low_frequency_mean'])}</td><td>{_fmt(r['other_mean'])}</td></tr>"
                )
            table.append("</tbody></table>")
            out.append("".join(table))
    out.append("</section>")
    return "\n".join(out)
