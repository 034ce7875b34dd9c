"""The HTML report: one self-contained file (inline SVG plots, inline CSS, no scripts).

Sections: run information, dataset statistics, evaluation (per-subject accuracy with 95%
interval whiskers and the paper's reference rows, macro/micro table, per-grade lines,
accuracy vs number of options and vs question length, question types, reliability
diagrams, other measures, exam scores with the SmartScore parameters, per-skill tables),
and the CogME profiles (rendered by ``pipelines.profiles.cogme.report_section.render_profiles_html``
when that module exists, else a plain table).

Every piece of text from the data is HTML-escaped. Plots are drawn with matplotlib's SVG
backend (imported lazily) with a fixed ``svg.hashsalt``, no date and glyphs as paths, so the
same inputs give the same bytes and the page looks the same without fonts installed.
Evaluation plots show one split: ``test`` when present, else the first split by name.
"""

from __future__ import annotations

import html
import io
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from pipelines.evaluation.metrics import LENGTH_BUCKET_ORDER, NO_GRADE
from pipelines.evaluation.reference_results import PAPER_PREFIX, SUBJECT_ORDER, reference_metrics

from pipelines.store.atomic import atomic_write_bytes
from pipelines.profiles.palette import MODEL_COLORS, model_colors, paper_hatch  # noqa: F401  (MODEL_COLORS: re-exported)
SVG_HASH_SALT = "stemforge-report"

_GRADE_ORDER = (
    "pre-k",
    "kindergarten",
    *(f"grade-{i}" for i in range(1, 13)),
    "algebra-1",
    "geometry",
    "algebra-2",
    "precalculus",
    "calculus",
)

CSS = """
body{font-family:sans-serif;margin:24px auto;max-width:1100px;color:#222;background:#fff}
h1{font-size:26px}h2{font-size:21px;border-bottom:2px solid #ccc;padding-bottom:4px;margin-top:36px}
h3{font-size:17px;margin-top:24px}
table{border-collapse:collapse;margin:8px 0 16px 0;font-size:13px;display:block;max-width:100%;overflow-x:auto}
td.short{background:#fff3cd}.caveat{color:#8a5300}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:12px 0}figure svg{max-width:100%;height:auto}
figcaption{font-size:13px;color:#555}
.note{font-size:13px;color:#555}
details{margin:8px 0}
"""


def escape(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _format_number(value: Any, digits: int = 1) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:,.{digits}f}"
    return str(value)


def html_table(frame: pl.DataFrame, *, digits: int = 1, max_rows: int | None = None) -> str:
    """A plain HTML table of a frame, every cell escaped."""
    rows = frame.rows() if max_rows is None else frame.head(max_rows).rows()
    head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
    body = []
    for row in rows:
        cells = []
        for value in row:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                cells.append(f'<td class="num">{escape(_format_number(value, digits))}</td>')
            else:
                cells.append(f"<td>{escape(_format_number(value, digits))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if max_rows is not None and frame.height > max_rows:
        more = f'<p class="note">{frame.height - max_rows} more rows not shown.</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


# ---------------------------------------------------------------------------------------
# SVG figures


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure  # lazily: matplotlib is heavy

    return Figure(figsize=(width, height), dpi=100)


def _svg(figure, index: int) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    prefix = f"fig{index}-"
    # ids must be unique across the inline SVGs of one page
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r'(xlink:href|href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{prefix}{m.group(2)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    return text


class _Figures:
    """Numbers the figures of one report so their SVG ids stay unique."""

    def __init__(self, colors: dict[str, str] | None = None) -> None:
        self.count = 0
        self.colors = dict(colors or {})

    def render(self, figure, caption: str) -> str:
        self.count += 1
        svg = _svg(figure, self.count)
        return f'<figure class="plot">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def _model_styles(models: Sequence[str], colors: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Colour (from the report-wide ``colors``) and hatch of each model of one plot."""
    fallback = model_colors(models)
    styles = {}
    for model in models:
        color = colors.get(model, fallback[model])
        styles[model] = {"color": color, "hatch": paper_hatch(color) if model.startswith(PAPER_PREFIX) else None}
    return styles


def _grouped_bars(
    figures: _Figures,
    cells: pl.DataFrame,
    categories: Sequence[str],
    caption: str,
    ylabel: str,
    reference_line: float | None = None,
) -> str:
    """Bars per category, one per model; whiskers where ci_low/ci_high exist."""
    models = _ordered_models(cells["model"].unique().to_list())
    styles = _model_styles(models, figures.colors)
    figure = _new_figure(11, 4.2)
    axes = figure.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(models))
    lookup = {(r["model"], r["group_value"]): r for r in cells.iter_rows(named=True)}
    for i, model in enumerate(models):
        xs, ys, lows, highs = [], [], [], []
        for j, category in enumerate(categories):
            row = lookup.get((model, category))
            if row is None or row["value"] is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(row["value"])
            low, high = row.get("ci_low"), row.get("ci_high")
            lows.append(max(0.0, row["value"] - low) if low is not None else 0.0)
            highs.append(max(0.0, high - row["value"]) if high is not None else 0.0)
        if not xs:
            continue
        style = styles[model]
        has_ci = any(v > 0 for v in lows + highs)
        axes.bar(
            xs,
            ys,
            width=width * 0.95,
            color=style["color"],
            hatch=style["hatch"],
            edgecolor="white" if style["hatch"] else None,
            label=plot_label(model),
            yerr=[lows, highs] if has_ci else None,
            capsize=2 if has_ci else 0,
            error_kw={"elinewidth": 1, "ecolor": "#000000"},
        )
    if reference_line is not None:
        axes.axhline(reference_line, color="#000000", linestyle=":", linewidth=1)
    axes.set_xticks(range(len(categories)))
    axes.set_xticklabels([plot_label(c) for c in categories])
    axes.set_ylabel(ylabel)
    axes.set_ylim(0, 100)
    axes.legend(fontsize=7, ncol=3, loc="upper left", bbox_to_anchor=(0, -0.1), frameon=False)
    axes.grid(axis="y", color="#dddddd", linewidth=0.5)
    axes.set_axisbelow(True)
    return figures.render(figure, caption)


def _lines(
    figures: _Figures,
    cells: pl.DataFrame,
    categories: Sequence[str],
    caption: str,
    ylabel: str,
    xlabel: str,
    extra: Callable[[Any], None] | None = None,
) -> str:
    """One small panel per model over ordered categories: points with 95% error bars, the same
    axes in every panel (several models' bands on one chart cannot be read apart)."""
    models = _ordered_models(cells["model"].unique().to_list())
    styles = _model_styles(models, figures.colors)
    columns = min(3, max(1, len(models)))
    rows = math.ceil(len(models) / columns)
    rotate = len(categories) > 6
    figure = _new_figure(11, (2.9 if rotate else 2.6) * rows + 0.3)
    lookup = {(r["model"], r["group_value"]): r for r in cells.iter_rows(named=True)}
    for i, model in enumerate(models):
        axes = figure.add_subplot(rows, columns, i + 1)
        xs, ys, below, above = [], [], [], []
        for j, category in enumerate(categories):
            row = lookup.get((model, category))
            if row is None or row["value"] is None:
                continue
            xs.append(j)
            ys.append(row["value"])
            below.append(max(0.0, row["value"] - row["ci_low"]) if row.get("ci_low") is not None else 0.0)
            above.append(max(0.0, row["ci_high"] - row["value"]) if row.get("ci_high") is not None else 0.0)
        color = styles[model]["color"]
        if xs:
            axes.errorbar(xs, ys, yerr=[below, above], fmt="o", markersize=4, color=color, ecolor=color, elinewidth=1, capsize=2)
        if extra is not None:
            extra(axes)
        axes.set_title(plot_label(_shorten(model, 40)), fontsize=8, color=color)
        axes.set_xticks(range(len(categories)))
        show_x = i >= len(models) - columns
        axes.set_xticklabels(
            [plot_label(c) for c in categories] if show_x else [],
            rotation=40 if rotate else 0, ha="right" if rotate else "center", fontsize=7,
        )
        axes.set_xlim(-0.5, len(categories) - 0.5)
        axes.set_ylim(0, 100)
        axes.tick_params(labelsize=7)
        if i % columns == 0:
            axes.set_ylabel(ylabel, fontsize=8)
        if show_x:
            axes.set_xlabel(xlabel, fontsize=8)
        axes.grid(color="#dddddd", linewidth=0.5)
        axes.set_axisbelow(True)
    figure.tight_layout()
    return figures.render(figure, caption)


def _reliability_figure(figures: _Figures, reliability: pl.DataFrame, models: Sequence[str], caption: str) -> str:
    styles = _model_styles(models, figures.colors)
    columns = min(4, len(models))
    rows = math.ceil(len(models) / columns)
    figure = _new_figure(2.8 * columns, 2.8 * rows)
    for i, model in enumerate(models):
        axes = figure.add_subplot(rows, columns, i + 1)
        part = reliability.filter(pl.col("model") == model).sort("bin_low")
        lows = part["bin_low"].to_list()
        widths = [h - l for l, h in zip(lows, part["bin_high"].to_list())]
        axes.bar(lows, part["accuracy"].to_list(), width=widths, align="edge", color=styles[model]["color"], edgecolor="white")
        axes.plot([0, 1], [0, 1], color="#000000", linestyle=":", linewidth=1)
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        axes.set_title(plot_label(_shorten(model, 34)), fontsize=8)
        axes.set_xlabel("confidence", fontsize=7)
        axes.set_ylabel("accuracy", fontsize=7)
        axes.tick_params(labelsize=6)
    figure.tight_layout()
    return figures.render(figure, caption)


def plot_label(text: object) -> str:
    """Text safe for matplotlib: no mathtext ($), and a leading underscore would hide a legend entry."""
    label = str(text).replace("$", r"\$")
    return " " + label if label.startswith("_") else label


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ordered_models(models: Sequence[str]) -> list[str]:
    own = sorted(m for m in models if not str(m).startswith(PAPER_PREFIX))
    paper = sorted(m for m in models if str(m).startswith(PAPER_PREFIX))
    return own + paper


def _grade_sort_key(grade: str) -> tuple[int, str]:
    if grade in _GRADE_ORDER:
        return (_GRADE_ORDER.index(grade), grade)
    if grade == NO_GRADE:
        return (len(_GRADE_ORDER) + 1, grade)
    return (len(_GRADE_ORDER), grade)


def _subject_categories(values: Sequence[str]) -> list[str]:
    known = [s for s in SUBJECT_ORDER if s in values]
    return known + sorted(v for v in values if v not in SUBJECT_ORDER)


# ---------------------------------------------------------------------------------------
# sections


def _primary_split(metrics: pl.DataFrame) -> str | None:
    own = metrics.filter(~pl.col("model").str.starts_with(PAPER_PREFIX))
    splits = sorted(own["split"].unique().to_list())
    if not splits:
        return None
    return "test" if "test" in splits else splits[0]


def _select(metrics: pl.DataFrame, metric: str, group_by: str, split: str | None = None) -> pl.DataFrame:
    frame = metrics.filter((pl.col("metric") == metric) & (pl.col("group_by") == group_by))
    if split is not None:
        frame = frame.filter(pl.col("split") == split)
    return frame


def _summary_table(metrics: pl.DataFrame) -> str:
    """Per model and split: macro, micro and per-subject accuracy with intervals."""
    accuracy = metrics.filter(pl.col("metric") == "accuracy")
    if accuracy.height == 0:
        return '<p class="note">No accuracy rows.</p>'
    subjects = _subject_categories(_select(accuracy, "accuracy", "subject")["group_value"].unique().to_list())
    header = ["model", "split", "coverage", "macro", "micro", *subjects]
    lookup = {(r["model"], r["split"], r["group_by"], r["group_value"]): r for r in accuracy.iter_rows(named=True)}
    coverage = {
        (r["model"], r["split"]): r["value"]
        for r in metrics.filter((pl.col("metric") == "coverage") & (pl.col("group_by") == "micro")).iter_rows(named=True)
    }
    pairs = {(r["model"], r["split"]) for r in accuracy.iter_rows(named=True)}
    body = []
    for model, split in sorted(pairs, key=lambda p: (p[0].startswith(PAPER_PREFIX), p[0], p[1])):
        covered = coverage.get((model, split))
        mark = ' class="num short"' if covered is not None and covered < 100.0 else ' class="num"'
        cells = [
            f"<td>{escape(model)}</td>",
            f"<td>{escape(split)}</td>",
            f"<td{mark}>{'' if covered is None else escape(f'{covered:.1f}%')}</td>",
        ]
        for group_by, group_value in [("macro", "all"), ("micro", "all"), *[("subject", s) for s in subjects]]:
            row = lookup.get((model, split, group_by, group_value))
            cells.append(f'<td class="num">{escape(_value_with_interval(row))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _value_with_interval(row: Mapping[str, Any] | None) -> str:
    if row is None or row.get("value") is None:
        return ""
    text = f"{row['value']:.1f}"
    if row.get("ci_low") is not None and row.get("ci_high") is not None:
        text += f" [{row['ci_low']:.1f}, {row['ci_high']:.1f}]"
    if row.get("n") is not None:
        text += f" (n={row['n']:,})"
    return text


def _pivot_table(cells: pl.DataFrame, categories: Sequence[str], first_header: str) -> str:
    models = _ordered_models(cells["model"].unique().to_list())
    lookup = {(r["model"], r["group_value"]): r for r in cells.iter_rows(named=True)}
    head = f"<th>{escape(first_header)}</th>" + "".join(f"<th>{escape(m)}</th>" for m in models)
    body = []
    for category in categories:
        cells_html = [f"<td>{escape(category)}</td>"]
        for model in models:
            cells_html.append(f'<td class="num">{escape(_value_with_interval(lookup.get((model, category))))}</td>')
        body.append("<tr>" + "".join(cells_html) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _evaluation_section(
    figures: _Figures,
    metrics: pl.DataFrame | None,
    reliability: pl.DataFrame | None,
    smartscore_lines: Sequence[str],
    *,
    bootstrap: int = 0,
    smartscore_rules: Any = None,
) -> str:
    parts = ["<h2>Evaluation</h2>"]
    if metrics is None or metrics.height == 0:
        parts.append('<p class="note">No evaluation results in this build.</p>')
        return "\n".join(parts)
    reference = reference_metrics()
    has_paper = metrics.filter(pl.col("model").str.starts_with(PAPER_PREFIX)).height > 0
    combined = metrics if has_paper else pl.concat([metrics, reference.cast(metrics.schema)], how="vertical")
    split = _primary_split(metrics)
    if split is None:
        parts.append('<p class="note">No evaluated models (only reference rows).</p>')
        return "\n".join(parts)
    parts.append(
        f'<p class="note">Values are percents (exam scores: SmartScore points), with {_interval_method(bootstrap)} '
        f"in brackets. Plots show the <b>{escape(split)}</b> split; rows prefixed "
        f"{escape(PAPER_PREFIX)} are the paper's reported test results (Table 2, Table 8).</p>"
    )
    own = combined.filter(~pl.col("model").str.starts_with(PAPER_PREFIX) & (pl.col("split") == split))
    paper = combined.filter(pl.col("model").str.starts_with(PAPER_PREFIX))

    # per-subject accuracy (+ macro) with the paper's Table 2 rows
    subject_cells = pl.concat(
        [
            _select(own, "accuracy", "subject"),
            _select(own, "accuracy", "macro").with_columns(pl.lit("macro").alias("group_value")),
            _select(paper, "accuracy", "subject"),
            _select(paper, "accuracy", "macro").with_columns(pl.lit("macro").alias("group_value")),
        ],
        how="vertical",
    )
    subjects = _subject_categories(_select(own, "accuracy", "subject")["group_value"].unique().to_list())
    parts.append("<h3>Accuracy per subject</h3>")
    if subjects:
        parts.append(
            _grouped_bars(
                figures,
                subject_cells,
                [*subjects, "macro"],
                "Accuracy per subject and macro average (whiskers: 95% intervals; hatched: the paper's Table 2).",
                "accuracy (%)",
            )
        )
    parts.append(_summary_table(combined.filter(pl.col("split") == split)))
    short = combined.filter(
        (pl.col("metric") == "coverage") & (pl.col("group_by") == "micro") & (pl.col("split") == split) & (pl.col("value") < 100.0)
    ).sort("model")
    if short.height:
        listed = "; ".join(
            f"{r['model']}: {r['value']:.1f}% of {r['n']:,} questions" for r in short.iter_rows(named=True)
        )
        parts.append(
            '<p class="note caveat">Coverage below 100%: questions these models have no prediction for (added by a '
            f"rebuild after their import, or left out of their file) count as wrong ({escape(listed)}). "
            "Re-import their predictions on the current questions to score them fully.</p>"
        )

    grade_cells = _select(own, "accuracy", "grade")
    grades = sorted((g for g in grade_cells["group_value"].unique().to_list() if g != NO_GRADE), key=_grade_sort_key)
    parts.append("<h3>Accuracy per grade</h3>")
    if grades:
        parts.append(_lines(figures, grade_cells, grades, "Accuracy per grade, one panel per model (error bars: 95% intervals).", "accuracy (%)", "grade"))
    else:
        parts.append(_absent("No per-grade plot: no evaluated question has a grade."))

    choice_cells = _select(own, "accuracy", "num_choices")
    if choice_cells.height:
        options = sorted(choice_cells["group_value"].unique().to_list(), key=lambda v: int(v) if v.isdigit() else 99)
        parts.append("<h3>Accuracy vs number of options</h3>")

        def chance(axes) -> None:
            ks = [int(o) for o in options if o.isdigit()]
            axes.plot(range(len(ks)), [100.0 / k for k in ks], color="#000000", linestyle=":", linewidth=1, label="random (1/k)")

        parts.append(
            _lines(
                figures,
                choice_cells,
                options,
                "Accuracy vs number of options; dotted: a random guesser's 1/k.",
                "accuracy (%)",
                "number of options",
                extra=chance,
            )
        )

    length_cells = _select(own, "accuracy", "length_bucket")
    if length_cells.height:
        present = set(length_cells["group_value"].to_list())
        buckets = [b for b in LENGTH_BUCKET_ORDER if b in present]
        parts.append("<h3>Accuracy vs question length</h3>")
        parts.append(
            _lines(figures, length_cells, buckets, "Accuracy vs question length (whitespace tokens).", "accuracy (%)", "tokens")
        )

    type_cells = _select(own, "accuracy", "question_type")
    if type_cells.height:
        counts = type_cells.group_by("group_value").agg(pl.col("n").max()).sort(["n", "group_value"], descending=[True, False])
        types = [t for t in counts["group_value"].to_list() if t != "other"] + (["other"] if "other" in counts["group_value"].to_list() else [])
        parts.append("<h3>Accuracy by question type (first word)</h3>")
        parts.append(_pivot_table(type_cells, types, "first word"))

    parts.append("<h3>Calibration</h3>")
    rel_models: list[str] = []
    if reliability is not None and reliability.height:
        rel = reliability.filter(pl.col("split") == split) if "split" in reliability.columns else reliability
        rel_models = _ordered_models(rel["model"].unique().to_list())
        if rel_models:
            parts.append(
                _reliability_figure(
                    figures, rel, rel_models, "Reliability diagrams: accuracy per confidence bin (10 bins); dotted: perfect calibration."
                )
            )
    without = [m for m in _ordered_models(own["model"].unique().to_list()) if m not in rel_models]
    if without:
        parts.append(_absent(f"No calibration panel for {', '.join(without)}: the predictions carry no confidences."))

    others = own.filter(pl.col("metric").is_in(["ece", "failed_rate", "circular_accuracy", "random_expected"]) & (pl.col("group_by").is_in(["micro", "macro"])))
    if others.height:
        parts.append("<h3>Other measures</h3>")
        parts.append(
            html_table(
                others.select("model", "metric", "group_by", "value", "n", "ci_low", "ci_high").sort(["model", "metric", "group_by"]),
                digits=2,
            )
        )

    exam_own = _select(own, "exam_score", "subject")
    exam_paper = _select(paper, "exam_score", "subject")
    if exam_own.height:
        parts.append("<h3>Exam scores (simulated SmartScore)</h3>")
        exam_subjects = _subject_categories(exam_own["group_value"].unique().to_list())
        parts.append(
            _grouped_bars(
                figures,
                pl.concat([exam_own, exam_paper], how="vertical"),
                exam_subjects,
                "Exam score per subject: mean over scored skills; technology (scored by accuracy): the subject accuracy "
                "(whiskers: 95% intervals; hatched: the paper's Table 8). Dotted: 90, IXL's 'excellent'.",
                "exam score",
                reference_line=90.0,
            )
        )
        caveat = _thin_exam_caveat(exam_own, smartscore_rules)
        if caveat:
            parts.append(f'<p class="note caveat">{escape(caveat)}</p>')
        exam_grades = _select(own, "exam_score", "grade")
        grades = sorted((g for g in exam_grades["group_value"].unique().to_list() if g != NO_GRADE), key=_grade_sort_key)
        if grades:
            parts.append(_lines(figures, exam_grades, grades, "Exam score per grade (mean over scored skills), one panel per model (error bars: 95% intervals).", "exam score", "grade"))
        else:
            parts.append(_absent("No exam score per grade: no scored skill has a grade."))
    else:
        parts.append("<h3>Exam scores (simulated SmartScore)</h3>")
        parts.append(_absent(
            "No exam scores: no skill has enough test questions to be scored (see the minimum in the parameters below)."
        ))
    if smartscore_lines:
        parts.append("<h3>SmartScore simulation parameters</h3><ul>")
        parts.extend(f"<li>{escape(line)}</li>" for line in smartscore_lines)
        parts.append("</ul>")

    if smartscore_rules is not None and hasattr(smartscore_rules, "for_subject"):
        parts.append(_exam_calibration_html(smartscore_rules))

    table8_metrics = ["exam_score", "accuracy_human_sample"]
    table8 = pl.concat(
        [
            paper.filter(pl.col("metric").is_in(table8_metrics)),
            own.filter(pl.col("metric").is_in(table8_metrics) & (pl.col("group_by") == "subject")),
        ],
        how="vertical",
    )
    if table8.height:
        parts.append("<details><summary>Table 8 (models vs humans): the paper's rows and ours</summary>")
        parts.append(
            '<p class="note">accuracy_human_sample: 20 sampled questions per subject, each scored by the model\'s '
            "accuracy on the question's skill (the paper's method; its humans answered those 20).</p>"
        )
        parts.append(html_table(
            table8.select("model", "metric", pl.col("group_value").alias("subject"), "value", "n")
            .pivot(on="subject", index=["model", "metric"], values="value", aggregate_function="first")
            .sort(["metric", "model"])
        ))
        parts.append("</details>")

    skills = own.filter((pl.col("group_by") == "skill") & pl.col("metric").is_in(["accuracy", "exam_score"]))
    if skills.height:
        parts.append("<details><summary>Per-skill accuracy and exam score</summary>")
        parts.append(html_table(skills.select("model", "metric", pl.col("group_value").alias("skill"), "value", "n", "ci_low", "ci_high").sort(["skill", "metric", "model"])))
        parts.append("</details>")
    return "\n".join(parts)


def _exam_calibration_html(rules: Any) -> str:
    """The simulation against the paper's published exam scores: Table 8 row by row, Table 10
    per subject and method (mean over its skills), and the fit error per kind of row."""
    from pipelines.evaluation.exam_calibration import CALIBRATED_SUBJECTS, calibration_table, expected_score, fit_errors

    table = calibration_table(rules)
    ceilings = ", ".join(f"{subject} {expected_score(rules.for_subject(subject), 100.0):.0f}" for subject in CALIBRATED_SUBJECTS)
    table8 = table.filter(pl.col("table") == "8").select(
        "method", "subject", pl.col("accuracy").alias("accuracy (paper)"), pl.col("paper").alias("exam score (paper)"),
        pl.col("ours").alias("exam score (ours)"), "error", "role",
    )
    table10 = (
        table.filter(pl.col("table") == "10")
        .group_by("subject", "method", maintain_order=True)
        .agg(pl.len().alias("skills"), pl.col("accuracy").first().alias("accuracy (paper)"),
             pl.col("paper").mean().alias("mean exam score (paper)"), pl.col("ours").first().alias("exam score (ours)"),
             (pl.col("error") ** 2).mean().sqrt().alias("RMSE over skills"))
    )
    errors = fit_errors(table).select(
        pl.col("role").alias("rows"), pl.col("rows").alias("count"), pl.col("rmse").alias("RMSE"), pl.col("mean_abs_error").alias("mean |error|")
    )
    return "\n".join([
        "<h3>Calibration against the paper's exam scores</h3>",
        '<p class="note">The exam score our simulation gives a model answering right with the paper\'s accuracy '
        "(independent answers, 4,000 sessions), next to the exam score the paper published for it. Fitted per subject "
        "on Table 8's Random and CLIP finetuning rows; the other rows are held out. Table 10's skills spread widely "
        "around their subject's value (its RMSE over skills): part of what the real site measures is the skill, "
        "not the accuracy. The fit error says how far these exam scores can be read on the paper's scale. "
        f"What a model right on every question scores under these rules: {escape(ceilings)} (the paper's science "
        "pairs need short sessions, which cap its scores: compare them with the paper's, not with the 90 line).</p>",
        html_table(errors),
        "<details><summary>Table 8, row by row</summary>",
        html_table(table8),
        "</details>",
        "<details><summary>Table 10, per subject and method</summary>",
        html_table(table10),
        "</details>",
    ])


def _dataset_section(dataset_stats: pl.DataFrame | None) -> str:
    parts = ["<h2>Dataset statistics</h2>"]
    if dataset_stats is None or dataset_stats.height == 0:
        parts.append('<p class="note">No dataset statistics in this build.</p>')
    else:
        parts.append(html_table(dataset_stats, digits=1))
    return "\n".join(parts)


def _report_colors(
    metrics: pl.DataFrame | None, profiles: pl.DataFrame | None, assigned: Mapping[str, str] | None = None
) -> dict[str, str]:
    """One colour per model for the whole page: every model of the metrics and the profiles."""
    names: set[str] = set()
    if metrics is not None and "model" in metrics.columns:
        names |= set(metrics["model"].unique().to_list())
    if profiles is not None and "profile_of" in profiles.columns:
        names |= {m for m in profiles["profile_of"].unique().to_list() if m != "dataset"}
    return model_colors(names | set(reference_metrics()["model"].unique().to_list()), assigned)


def _profiles_section(profiles: pl.DataFrame | None, colors: dict[str, str] | None = None) -> str:
    parts = ["<h2>CogME profiles</h2>"]
    if profiles is None or profiles.height == 0:
        parts.append('<p class="note">No profiles in this build.</p>')
        return "\n".join(parts)
    from pipelines.profiles.cogme.report_section import render_profiles_html

    parts.append(render_profiles_html(profiles, colors=colors))
    return "\n".join(parts)


def _run_info_section(run_info: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in run_info.items() if k not in {"title", "smartscore_rules", "exam_sample_notes", "model_colors"}}
    if not shown:
        return ""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in sorted(shown.items()))
    return f"<h2>Run</h2><table><tbody>{rows}</tbody></table>"


THIN_EXAM_SKILLS = 10


def _absent(why: str) -> str:
    """The note that stands where a panel would be, saying why it is not there."""
    return f'<p class="note absent">{escape(why)}</p>'


def _signed_interval(low: Any, high: Any) -> str:
    return "n/a" if low is None else f"[{low:+.1f}, {high:+.1f}]"


def _comparison_section(comparisons: Sequence[Mapping[str, Any]] | None, metrics: pl.DataFrame | None) -> str:
    """Each model minus the best floor baseline (``pipelines.evaluation.stage.comparisons_with_best_baseline``)."""
    if metrics is None or metrics.height == 0:
        return ""
    parts = ["<h2>Models against the best baseline</h2>"]
    if not comparisons:
        parts.append(
            '<p class="note">No comparison: it needs at least one floor baseline (random, most-frequent-position, '
            "longest-option) and one other model evaluated on the same split.</p>"
        )
        return "\n".join(parts)
    first = comparisons[0]
    parts.append(
        f'<p class="note">Difference in accuracy, percentage points, against <b>{escape(first["model_b"])}</b> '
        f'(the floor baseline with the highest macro accuracy) on the <b>{escape(first["split"])}</b> split. '
        "Macro: mean of the per-subject paired differences, its 95% interval combining the subjects' intervals "
        "(MOVER; subjects as independent strata); micro and per subject: the wider of the cluster-robust paired "
        "interval and the exact interval that excludes 0 only where McNemar's exact test rejects (p &lt; 0.05). "
        "Macro p: McNemar's exact test stratified by subject (given each subject's discordant questions, which "
        "model is right on each is a fair coin); * significant: the macro interval excludes 0 and p &lt; 0.05. "
        "The same table comes from <code>stemforge compare A B</code>.</p>"
    )
    subjects = sorted({s for c in comparisons for s in c["subjects"]})
    columns = ["model", "macro difference", "macro 95% interval", "macro p", "micro difference", "micro 95% interval", "McNemar p (micro)"]
    columns += [f"{s} difference (p)" for s in subjects]
    rows = []
    for c in comparisons:
        macro, micro = c["macro"], c["micro"]
        row = [
            c["model_a"],
            f"{macro['difference']:+.1f}",
            _signed_interval(macro["ci_low"], macro["ci_high"]),
            "-" if macro.get("mcnemar_p") is None else f"{macro['mcnemar_p']:.3g}{' *' if macro.get('significant') else ''}",
            f"{micro['difference']:+.1f}",
            _signed_interval(micro["ci_low"], micro["ci_high"]),
            f"{micro['mcnemar_p']:.3g}",
        ]
        for s in subjects:
            r = c["subjects"].get(s)
            row.append("-" if r is None else f"{r['difference']:+.1f} ({r['mcnemar_p']:.3g})")
        rows.append(row)
    parts.append(html_table(pl.DataFrame(rows, schema=columns, orient="row")))
    return "\n".join(parts)


def _interval_method(bootstrap: int) -> str:
    exam = (
        "exam scores: per skill, the simulation's own noise over its sessions; per subject, a normal interval "
        "over skills adding that noise (one skill: the spread of one session), Wilson over questions for "
        "subjects scored by accuracy (technology); macros combine the subjects' intervals (MOVER)"
    )
    if bootstrap > 0:
        return (
            f"95% intervals from a clustered bootstrap ({bootstrap} replicates); a cell whose resamples cannot "
            f"vary (all right or all wrong) keeps its Wilson interval; {exam}"
        )
    return (
        "95% Wilson intervals on a cluster-robust effective n (questions sharing an image form a cluster); "
        + exam
    )


def _thin_exam_caveat(exam_subjects: pl.DataFrame, rules: Any) -> str:
    """A warning when a SmartScore subject's exam score rests on fewer than THIN_EXAM_SKILLS skills."""
    accuracy_subjects = set(getattr(rules, "accuracy_subjects", ("technology",)))
    counts = (
        exam_subjects.filter(~pl.col("group_value").is_in(list(accuracy_subjects)))
        .group_by("group_value")
        .agg(pl.col("n").max())
        .sort("group_value")
    )
    thin = [(subject, int(n)) for subject, n in counts.iter_rows() if n is not None and n < THIN_EXAM_SKILLS]
    if not thin:
        return ""
    listed = ", ".join(f"{subject} {n} skill{'s' if n != 1 else ''}" for subject, n in thin)
    minimum = getattr(rules, "min_questions", None)
    rule = f"Skills with fewer than {minimum} test questions are not scored; " if minimum else ""
    return (
        f"Thin coverage: these exam scores rest on few skills ({listed}; the paper scored 40 maths and 30 "
        f"science skills). {rule}a skill with few questions caps the score (each right answer adds a bounded step), "
        "so read these bars as rough, not against the 90 line."
    )


def _smartscore_rules(run_info: Mapping[str, Any]) -> Any:
    rules = run_info.get("smartscore_rules")
    if isinstance(rules, Mapping):
        from pipelines.evaluation.smartscore import SmartScoreRules

        return SmartScoreRules.from_mapping(rules)
    return rules


def _smartscore_lines(run_info: Mapping[str, Any]) -> list[str]:
    rules = run_info.get("smartscore_rules")
    if rules is None:
        return []
    if hasattr(rules, "describe"):
        return list(rules.describe())
    if isinstance(rules, Mapping):
        from pipelines.evaluation.smartscore import SmartScoreRules

        return list(SmartScoreRules.from_mapping(rules).describe())
    return [str(rules)]


def render_report(
    *,
    dataset_stats: pl.DataFrame | None = None,
    metrics: pl.DataFrame | None = None,
    reliability: pl.DataFrame | None = None,
    profiles: pl.DataFrame | None = None,
    comparisons: Sequence[Mapping[str, Any]] | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> str:
    """The report's HTML text (see ``write_report``)."""
    run_info = dict(run_info or {})
    title = str(run_info.get("title", "stemforge report"))
    figures = _Figures(_report_colors(metrics, profiles, run_info.get("model_colors")))
    body = [
        f"<h1>{escape(title)}</h1>",
        _run_info_section(run_info),
        _dataset_section(dataset_stats),
        _evaluation_section(
            figures,
            metrics,
            reliability,
            _smartscore_lines(run_info) + [f"the paper's sample: {note}" for note in run_info.get("exam_sample_notes") or []],
            bootstrap=int(run_info.get("bootstrap", 0) or 0),
            smartscore_rules=_smartscore_rules(run_info),
        ),
        _comparison_section(comparisons, metrics),
        _profiles_section(profiles, figures.colors),
    ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )


def write_report(
    path: str | os.PathLike,
    *,
    dataset_stats: pl.DataFrame | None = None,
    metrics: pl.DataFrame | None = None,
    reliability: pl.DataFrame | None = None,
    profiles: pl.DataFrame | None = None,
    comparisons: Sequence[Mapping[str, Any]] | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> Path:
    """Write the self-contained report to ``path`` (atomically) and return the path.

    ``metrics`` is in the metrics-view schema (the paper's reference rows are added when it
    has none); ``reliability`` comes from ``pipelines.evaluation.metrics.reliability_table``;
    ``run_info`` is shown as a key/value table, except ``title`` and ``smartscore_rules``
    (a ``SmartScoreRules`` or its ``as_dict()``), which is printed with the exam scores.
    """
    target = Path(path)
    text = render_report(
        dataset_stats=dataset_stats,
        metrics=metrics,
        reliability=reliability,
        profiles=profiles,
        comparisons=comparisons,
        run_info=run_info,
    )
    atomic_write_bytes(target, text.encode("utf-8"))
    return target
