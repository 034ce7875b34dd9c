"""The HTML report: escaping, self-containment, determinism, and plots drawn in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipelines.evaluation.metrics import compute_metrics, reliability_table
from pipelines.profiles.report import MODEL_COLORS, render_report, write_report
from pipelines.evaluation.smartscore import SmartScoreRules, exam_scores
from support.chromium import run_headless

EVIL_SKILL = "<script>alert('skill')</script>"
EVIL_MODEL = 'model "<img src=x onerror=alert(1)>" $x$'


def synthetic_scored(questions: int = 1200, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    subjects = np.array(["science", "technology", "engineering", "math"])[rng.integers(0, 4, questions)]
    k = rng.choice([2, 3, 4, 5], size=questions)
    grades = [None if s == "technology" else f"grade-{g}" for s, g in zip(subjects, rng.integers(1, 7, questions))]
    skills = [EVIL_SKILL if i % 7 == 0 else f"skill-{i % 5}" for i in range(questions)]
    base = {
        "question_id": [f"{i:016x}" for i in range(questions)],
        "split": "test",
        "subject": subjects,
        "grade": grades,
        "skill": skills,
        "num_choices": k,
        "problem": [["Which <b>bold</b> one?", "What is \\( 2 \\times 3 \\)?", "Select the magnet."][i % 3] + " w" * (i % 45) for i in range(questions)],
        "cluster": [f"img{i // 2}" for i in range(questions)],
    }
    frames = []
    for model, skill_level in (("random", None), (EVIL_MODEL, 0.8)):
        if skill_level is None:
            prediction = (rng.random(questions) * k).astype(np.int64)
        else:
            prediction = np.where(rng.random(questions) < skill_level, 0, (rng.random(questions) * k).astype(np.int64))
        frames.append(
            pl.DataFrame(
                {
                    **base,
                    "model": model,
                    "prediction": prediction,
                    "confidence": rng.random(questions),
                    "correct": prediction == 0,
                }
            )
        )
    return pl.concat(frames)


@pytest.fixture(scope="module")
def report_inputs() -> dict:
    scored = synthetic_scored()
    rules = SmartScoreRules()
    metrics = pl.concat([compute_metrics(scored), exam_scores(scored, rules, seed=1)])
    return {
        "dataset_stats": pl.DataFrame({"subject": ["math", EVIL_SKILL], "questions": [10, 2], "avg_options": [2.8, 3.0]}),
        "metrics": metrics,
        "reliability": reliability_table(scored),
        "profiles": pl.DataFrame(
            {
                "profile_of": ["dataset", EVIL_MODEL],
                "component": ["TARGET", "TARGET"],
                "sub_component": ["Object", "Object"],
                "value": [40.0, 55.0],
                "n": [12, 12],
            }
        ),
        "run_info": {"title": "stemforge <demo>", "seed": 1, "source": "demo", "smartscore_rules": rules},
    }


@pytest.fixture(scope="module")
def report_html(report_inputs) -> str:
    return render_report(**report_inputs)


def test_all_text_is_escaped(report_html):
    assert "<script" not in report_html.lower()
    assert "&lt;script&gt;alert(&#x27;skill&#x27;)&lt;/script&gt;" in report_html
    assert "<img" not in report_html
    assert "&lt;img src=x onerror=alert(1)&gt;" in report_html
    assert "<b>bold" not in report_html
    assert "stemforge &lt;demo&gt;" in report_html


def test_report_is_self_contained(report_html):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", report_html, re.IGNORECASE)
    assert not re.search(r"@import|url\(\s*['\"]?https?:", report_html, re.IGNORECASE)
    assert "<link" not in report_html.lower()


def test_report_contains_the_plots_tables_and_parameters(report_html):
    svgs = re.findall(r"<svg\b", report_html)
    # subject bars, grade lines, options, length, reliability, exam bars, exam grade lines
    assert len(svgs) >= 7
    ids = re.findall(r'\bid="([^"]+)"', report_html)
    assert len(ids) == len(set(ids))
    assert "paper:CLIP ViT-L/14@336px" in report_html
    assert "+10 for 0-50" in report_html and "proprietary" in report_html
    assert "Dataset statistics" in report_html and "CogME profiles" in report_html
    assert "macro" in report_html and "micro" in report_html


def test_report_is_deterministic_and_written_atomically(report_inputs, report_html, tmp_path):
    assert render_report(**report_inputs) == report_html
    path = write_report(tmp_path / "reports" / "index.html", **report_inputs)
    assert path.read_text(encoding="utf-8") == report_html
    assert sorted(p.name for p in path.parent.iterdir()) == ["index.html", "index.html.sha256"]  # its checksum beside it


def test_report_names_the_interval_method_and_the_exam_rules(report_inputs, report_html):
    assert "clustered-bootstrap" not in report_html
    assert "Wilson intervals on a cluster-robust effective n" in report_html
    # the exam-score label is true for every subject: technology is scored by accuracy (Wilson over questions)
    assert "normal intervals over skills)" not in report_html
    assert "Wilson over questions for subjects scored by accuracy (technology)" in report_html
    boot = render_report(**{**report_inputs, "run_info": {**report_inputs["run_info"], "bootstrap": 500}})
    assert "clustered bootstrap (500 replicates)" in boot
    assert "fewer than 5 questions" in report_html and "skills scored: all eligible skills" in report_html
    paper = SmartScoreRules(skill_sample="paper").as_dict()
    sampled = render_report(**{**report_inputs, "run_info": {**report_inputs["run_info"], "smartscore_rules": paper}})
    assert "40 math, 30 science" in sampled


def test_exam_section_shows_the_calibration_against_the_papers_exam_scores(report_inputs):
    from pipelines.evaluation.exam_calibration import CALIBRATED_RULES

    html = render_report(**{**report_inputs, "run_info": {**report_inputs["run_info"], "smartscore_rules": CALIBRATED_RULES.as_dict()}})
    section = html[html.index("<h3>Calibration against the paper"):]
    assert "held out" in section and "Table 10 skill means" in section and "RMSE" in section
    assert "CLIP finetuning" in section and "57.8" in section  # a published row, with ours beside it
    assert "calibrated per subject" in html  # the parameters say where the increments come from


def test_exam_plot_warns_when_few_skills_are_scored(report_inputs, report_html):
    # the synthetic data has 6 skills per subject: below the 10 the caveat asks for
    assert "Thin coverage" in report_html and "Skills with fewer than 5 test questions are not scored" in report_html
    many = synthetic_scored()
    many = many.with_columns((pl.col("skill") + "-" + pl.col("grade").fill_null("x") + (pl.int_range(pl.len()) % 3).cast(pl.String)).alias("skill"))
    metrics = pl.concat([compute_metrics(many), exam_scores(many, SmartScoreRules(), seed=1)])
    exam = metrics.filter((pl.col("metric") == "exam_score") & (pl.col("group_by") == "subject") & (pl.col("group_value") != "technology"))
    assert exam["n"].min() >= 10
    assert "Thin coverage" not in render_report(**{**report_inputs, "metrics": metrics})


def test_report_compares_each_model_with_the_best_baseline(report_inputs):
    from pipelines.evaluation.stage import comparisons_with_best_baseline

    scored = synthetic_scored()
    second = scored.filter(pl.col("model") == "random").with_columns(pl.lit("longest-option").alias("model"), pl.lit(False).alias("correct"))
    comparisons = comparisons_with_best_baseline(pl.concat([scored, second]), "test")
    assert [(c["model_a"], c["model_b"]) for c in comparisons] == [(EVIL_MODEL, "random")]  # random beats all-wrong
    macro = comparisons[0]["macro"]
    assert macro["ci_low"] < macro["difference"] < macro["ci_high"] and macro["difference"] > 20
    html = render_report(**report_inputs, comparisons=comparisons)
    assert "Models against the best baseline" in html and "McNemar" in html
    assert "<img" not in html
    assert "No comparison: it needs at least one floor baseline" in render_report(**report_inputs)
    assert comparisons_with_best_baseline(scored.filter(pl.col("model") == "random"), "test") == []


def test_a_model_has_one_colour_in_every_plot(report_inputs):
    from pipelines.profiles.palette import model_colors

    own = sorted(m for m in report_inputs["metrics"]["model"].unique().to_list() if not m.startswith("paper:"))
    colors = model_colors(own + ["paper:x"])
    assert len({colors[m] for m in own}) == len(own)
    second = own[1]  # "random"
    # plots showing only "random" (its profile, its calibration) keep the page-wide colour
    axes = ["Object", "Number", "Shape"]
    profiles = pl.DataFrame(
        {
            "profile_of": ["dataset"] * 3 + [second] * 3,
            "component": ["TARGET"] * 6,
            "sub_component": axes * 2,
            "value": [40.0, 30.0, 30.0, 50.0, 60.0, 70.0],
            "n": [12] * 6,
        }
    )
    html = render_report(**{**report_inputs, "profiles": profiles,
                            "reliability": report_inputs["reliability"].filter(pl.col("model") == second)})
    assert f'fill="{colors[second]}"' in html and f'fill="{colors[own[0]]}"' not in html.split("cogme-profiles")[-1]
    figures = re.findall(r'<figure class="plot">.*?</figure>', html, re.DOTALL)
    assert figures and all(colors[second].lower() in f.lower() for f in figures)


def test_a_model_keeps_its_colour_across_builds_and_paper_rows_are_told_apart(tmp_path):
    from pipelines.evaluation.reference_results import reference_metrics
    from pipelines.profiles.palette import model_colors, paper_hatch

    from pipelines.profiles.stage import _kept_model_colors
    from pipelines.store.home import DataHome

    def metrics_of(models: list[str]) -> pl.DataFrame:
        return pl.DataFrame({"model": models, "metric": ["accuracy"] * len(models)})

    home = DataHome(tmp_path / "home")
    first = ["random", "clip", "my-model"]
    before = _kept_model_colors(home, metrics_of(first), None)
    assert len({before[m] for m in first}) == 3
    after = _kept_model_colors(home, metrics_of(first + ["longest-option", "most-frequent-position", "gpt-4o", "zz"]), None)
    assert all(after[m] == before[m] for m in before)  # models added by a later build move no colour
    assert len({after[m] for m in after if not m.startswith("paper:")}) == 7
    kept = model_colors(["a", "b"], assigned={"b": MODEL_COLORS[5]})
    assert kept["b"] == MODEL_COLORS[5]
    paper = model_colors(reference_metrics()["model"].unique().to_list())
    styles = {(color, paper_hatch(color)) for color in paper.values()}
    assert len(styles) == len(paper)  # every paper row its own grey and hatch
    assert not set(paper.values()) & set(MODEL_COLORS)  # and none looks like ours


def test_every_absent_panel_says_why(report_inputs):
    no_confidence = render_report(**{**report_inputs, "reliability": report_inputs["reliability"].filter(pl.col("model") == "random")})
    assert f"No calibration panel for {EVIL_MODEL}".replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;") in no_confidence
    metrics = report_inputs["metrics"]
    no_grades = metrics.filter(~((pl.col("group_by") == "grade") & (pl.col("group_value") != "(none)")))
    text = render_report(**{**report_inputs, "metrics": no_grades})
    assert "No per-grade plot" in text and "No exam score per grade" in text
    no_exam = render_report(**{**report_inputs, "metrics": metrics.filter(pl.col("metric") != "exam_score")})
    assert "No exam scores: no skill has enough test questions" in no_exam
    assert "No calibration panel" not in render_report(**report_inputs)


def test_empty_report_renders():
    text = render_report(run_info={"title": "empty"})
    assert "No evaluation results" in text and "<svg" not in text


def screenshot(html_path: Path, tmp_path: Path, name: str) -> np.ndarray:
    from PIL import Image

    png = tmp_path / f"{name}.png"
    run_headless([f"--screenshot={png}", "--window-size=1200,3000", html_path.resolve().as_uri()], tmp_path / f"profile-{name}")
    return np.asarray(Image.open(png).convert("RGB")).astype(np.int16)


def color_mask(pixels: np.ndarray, hex_color: str, tolerance: int = 12) -> np.ndarray:
    target = np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return (np.abs(pixels - target) <= tolerance).all(axis=2)


def test_plots_are_drawn_in_headless_chromium(report_inputs, tmp_path):
    path = write_report(tmp_path / "with-plots.html", **report_inputs)
    pixels = screenshot(path, tmp_path, "with-plots")
    assert pixels.shape[0] >= 2900
    from pipelines.profiles.report import _report_colors

    page_colors = _report_colors(report_inputs["metrics"], report_inputs["profiles"])
    own = [page_colors[m] for m in sorted(report_inputs["metrics"]["model"].unique().to_list()) if not m.startswith("paper:")]
    # the two models' colours fill bars, points and reliability bars
    for color in own:
        mask = color_mask(pixels, color)
        assert mask.sum() > 2000, color
    rows_with_plot = np.flatnonzero(color_mask(pixels, own[0]).sum(axis=1) > 3)
    # several separate plots: coloured rows fall in at least 3 bands separated by >= 60 blank rows
    bands = 1 + int(np.sum(np.diff(rows_with_plot) > 60))
    assert bands >= 3
    # a control page without results has none of these colours: the check can fail
    empty = write_report(tmp_path / "empty.html", run_info={"title": "empty"})
    control = screenshot(empty, tmp_path, "empty")
    assert color_mask(control, own[0]).sum() == 0


LABEL_EXTENT_SCRIPT = """<script>
(() => {
  const clipped = [];
  let labels = 0;
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    for (const label of svg.querySelectorAll('text, g[id*="-text_"]')) {
      const r = label.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      labels += 1;
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        clipped.push((label.textContent || label.id).trim().slice(0, 60));
    }
  }
  const out = document.createElement("pre");
  out.id = "label-extents";
  out.textContent = JSON.stringify({svgs: document.querySelectorAll("svg").length, labels, clipped});
  document.body.appendChild(out);
})();
</script>"""


def labels_outside_their_plot(html_path: Path, tmp_path: Path) -> dict:
    """Lays the page out in headless Chromium and lists every SVG text (our own ``<text>`` and
    matplotlib's glyph groups) whose box leaves its SVG's box: an inline SVG clips it there."""
    import html as html_lib
    import json

    probe = tmp_path / f"probe-{html_path.name}"
    probe.write_text(html_path.read_text(encoding="utf-8").replace("</body>", LABEL_EXTENT_SCRIPT + "</body>"), encoding="utf-8")
    done = run_headless(["--window-size=1200,3000", "--dump-dom", probe.resolve().as_uri()], tmp_path / f"profile-probe-{html_path.stem}")
    found = re.search(r'<pre id="label-extents">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-500:]
    return json.loads(html_lib.unescape(found.group(1)))


def full_profiles() -> pl.DataFrame:
    """Every sub-component of the stem taxonomy, with the widest value labels (100.0%, 5-digit n)."""
    from pipelines.profiles.cogme.taxonomy import load_taxonomy

    stem = load_taxonomy("stem")
    rows = []
    for component in ("TARGET", "CONTENT", "THINKING"):
        for sub in stem.sub_components(component):
            rows.append({"profile_of": "dataset", "measure": "frequency", "scope": "all", "component": component,
                         "sub_component": sub, "value": 100.0, "n": 12345, "total": 12345})
            for model, value in (("random", 25.0), (EVIL_MODEL, 100.0)):
                rows.append({"profile_of": model, "measure": "weighted_achievement", "scope": "all",
                             "component": component, "sub_component": sub, "value": value, "n": 12345, "total": 12345})
    return pl.DataFrame(rows)


def test_no_plot_label_is_clipped_in_chromium(report_inputs, tmp_path):
    path = write_report(tmp_path / "labels.html", **{**report_inputs, "profiles": full_profiles()})
    extents = labels_outside_their_plot(path, tmp_path)
    # every matplotlib plot, 3 radars and 3 dataset-profile bar charts were measured
    assert extents["svgs"] >= 12 and extents["labels"] > 150
    assert extents["clipped"] == []
    # control: a label placed past the right edge of its SVG is reported
    control = tmp_path / "control.html"
    control.write_text('<html><body><svg width="100" height="20"><text x="60" y="14" font-size="11">clipped label</text>'
                       "</svg></body></html>", encoding="utf-8")
    assert labels_outside_their_plot(control, tmp_path)["clipped"] == ["clipped label"]


def test_radars_have_no_blank_margin(tmp_path):
    from pipelines.profiles.cogme.report_section import render_profiles_html

    page = tmp_path / "radars.html"
    page.write_text(f"<html><body>{render_profiles_html(full_profiles())}</body></html>", encoding="utf-8")
    boxes = [
        tuple(float(v) for v in re.search(r'viewBox="([^"]+)"', svg).group(1).split())
        for svg in re.findall(r'<svg class="cogme-radar"[^>]*>', page.read_text(encoding="utf-8"))
    ]
    assert len(boxes) == 3
    # rings of radius 120: the THINKING triangle spans 120 above the centre and 60 below it, so its box,
    # labels included, is far less tall than the 360 px box every radar used to get
    _, top, _, height = boxes[2]
    assert top < -120 and top + height < 60 + 40 and height < 240
    assert labels_outside_their_plot(page, tmp_path)["clipped"] == []


TABLE_EXTENT_SCRIPT = """<script>
(() => {
  const page = document.body.getBoundingClientRect();
  const wide = [];
  for (const table of document.querySelectorAll("table")) {
    const r = table.getBoundingClientRect();
    if (r.right > page.right + 0.5 || r.left < page.left - 0.5) wide.push(table.rows[0] ? table.rows[0].textContent.trim().slice(0, 60) : "?");
  }
  const out = document.createElement("pre");
  out.id = "table-extents";
  out.textContent = JSON.stringify({tables: document.querySelectorAll("table").length, wide,
    overflow: document.documentElement.scrollWidth > window.innerWidth});
  document.body.appendChild(out);
})();
</script>"""


def tables_wider_than_the_page(html_path: Path, tmp_path: Path, width: int = 1000) -> dict:
    import html as html_lib
    import json

    probe = tmp_path / f"tables-{html_path.name}"
    probe.write_text(html_path.read_text(encoding="utf-8").replace("</body>", TABLE_EXTENT_SCRIPT + "</body>"), encoding="utf-8")
    done = run_headless([f"--window-size={width},2000", "--dump-dom", probe.resolve().as_uri()], tmp_path / f"profile-tables-{html_path.stem}")
    found = re.search(r'<pre id="table-extents">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-500:]
    return json.loads(html_lib.unescape(found.group(1)))


def test_no_table_is_wider_than_the_page_in_chromium(report_inputs, tmp_path):
    # seven models and many subjects make the widest summary and Table 8 tables
    scored = synthetic_scored()
    one = scored.filter(pl.col("model") == "random")
    many = pl.concat([one.with_columns(pl.lit(f"openai_compatible_model_gpt_4o_mini_2024_07_18_at_localhost_port_8000_{i}").alias("model")) for i in range(7)])
    metrics = pl.concat([compute_metrics(many), exam_scores(many, SmartScoreRules(), seed=1)])
    from pipelines.evaluation.stage import comparisons_with_best_baseline

    comparisons = comparisons_with_best_baseline(pl.concat([many, scored.filter(pl.col("model") == "random")]), "test")
    path = write_report(tmp_path / "wide.html", **{**report_inputs, "metrics": metrics, "reliability": None}, comparisons=comparisons)
    extents = tables_wider_than_the_page(path, tmp_path, width=800)
    assert extents["tables"] >= 5
    assert extents["wide"] == [] and extents["overflow"] is False
    # control: a table forced wider than the page is reported
    control = tmp_path / "control.html"
    control.write_text('<html><body style="margin:0"><table style="display:table;width:3000px"><tr><td>wide</td></tr></table></body></html>', encoding="utf-8")
    assert tables_wider_than_the_page(control, tmp_path)["wide"] == ["wide"]
