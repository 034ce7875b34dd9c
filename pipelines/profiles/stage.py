"""Profile stages: CogME tags per question, dataset and model profiles, and the report.

Each is memoized (``pipelines/store/memo.py``): skipped, writing nothing, when its input
tables, settings and code are unchanged; figures then carry ``skipped: True``. When it runs, the
tag stage reuses the tags of questions whose tagged columns are unchanged (``pipelines.store.row_reuse``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from pipelines.evaluation.reference_results import PAPER_PREFIX
from pipelines.evaluation.smartscore import paper_sample_notes
from pipelines.store.atomic import atomic_write_text
from pipelines.evaluation.stage import comparisons_with_best_baseline, scored_frame, smartscore_rules
from pipelines.profiles.cogme.manual import load_manual_tags
from pipelines.profiles.cogme.profiles import dataset_profile, frequency_accuracy_relation, model_profiles, preferred_tags
from pipelines.profiles.cogme.tagger import RULES_SOURCE, tag_questions
from pipelines.profiles.cogme.taxonomy import _BUNDLED, load_taxonomy
from pipelines.profiles.report import render_report, write_report
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.lake import lake_files, write_table
from pipelines.store.memo import memoized
from pipelines.store.row_reuse import RowReuse

TAG_COLUMNS = ("question_id", "subject", "grade", "skill", "problem", "pic_prob", "pic_choice", "num_choices", "choices")
TAG_ORDER = ("question_id", "component", "sub_component", "source")  # the order question_tags is written in


def tag_stage(home: DataHome, settings: BuildSettings) -> tuple[pl.DataFrame, dict]:
    inputs = [home.lake_path("questions")]
    if settings.manual_tags:
        inputs.append(Path(settings.manual_tags).expanduser())
    if settings.taxonomy not in _BUNDLED:  # a taxonomy given as a YAML path (bundled ones are code)
        inputs.append(Path(settings.taxonomy))
    figures = memoized(
        home, "tags", lambda: _tags(home, settings),
        inputs=inputs,
        outputs=[home.lake_path("question_tags")],
        settings={"taxonomy": settings.taxonomy, "manual_tags": settings.manual_tags},
    )
    return pl.read_parquet(home.lake_path("question_tags")), figures


def _tags(home: DataHome, settings: BuildSettings) -> dict:
    """Tag every question; a question whose tagged columns are unchanged since the last run with
    the same taxonomy keeps its previous rule tags (``pipelines.store.row_reuse``)."""
    taxonomy = load_taxonomy(settings.taxonomy)
    questions = pl.read_parquet(home.lake_path("questions"), columns=list(TAG_COLUMNS))
    out_path = home.lake_path("question_tags")
    reuse = RowReuse(home, "tags", key="question_id", columns=TAG_COLUMNS[1:], outputs=[out_path],
                     settings={"taxonomy": settings.taxonomy, "taxonomy_file": _taxonomy_digest(settings.taxonomy)},
                     code=tag_questions)
    plan = reuse.plan(questions)
    tags = tag_questions(plan.todo, taxonomy).sort(TAG_ORDER)
    if plan.reused.height:
        # the previous file is in TAG_ORDER: its rule tags of the reused questions still are
        previous = pl.read_parquet(out_path).filter(pl.col("source") == RULES_SOURCE)
        tags = pl.concat([plan.previous_of_earlier_keys(previous), tags.cast(previous.schema)])
    figures = {"auto_tagged_questions": questions.height, "auto_tags": tags.height, **plan.figures()}
    if settings.manual_tags:
        manual = load_manual_tags(settings.manual_tags, taxonomy)
        manual = manual.filter(pl.col("question_id").is_in(questions["question_id"].implode()))
        # a question with manual tags is profiled by them; the automatic ones stay for agreement
        tags = pl.concat([tags, manual], how="vertical_relaxed").sort(TAG_ORDER)
        figures["manual_tagged_questions"] = manual["question_id"].n_unique()
    # each question's rows are in TAG_ORDER already: a stable sort by question alone finishes it
    tags = tags.sort("question_id", maintain_order=True).rechunk()
    write_table(tags, out_path)
    reuse.save(plan)
    return figures


def _taxonomy_digest(name: str) -> str:
    path = _BUNDLED.get(name, Path(name))
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def profile_stage(home: DataHome) -> tuple[pl.DataFrame, dict]:
    figures = memoized(
        home, "profiles", lambda: _profiles(home),
        inputs=[
            home.lake_path("question_tags"), home.lake_path("questions"),
            *lake_files(home, "predictions/*.parquet"),
        ],
        outputs=lambda _: [p for p in (home.lake_path("profiles"), home.lake_path("profile_relation")) if p.exists()],
    )
    return pl.read_parquet(home.lake_path("profiles")), figures


def _profiles(home: DataHome) -> dict:
    tags = preferred_tags(pl.read_parquet(home.lake_path("question_tags")))
    questions = pl.read_parquet(home.lake_path("questions"), columns=["question_id", "subject", "split"])
    parts = [dataset_profile(questions, tags)]
    scored = scored_frame(home)
    relation = None
    if scored.height:
        models = model_profiles(scored.select("model", "question_id", "subject", "split", "correct"), tags)
        parts.append(models)
        relation = frequency_accuracy_relation(parts[0], models)
    profiles = pl.concat(parts, how="diagonal_relaxed")
    write_table(profiles, home.lake_path("profiles"))
    figures = {"rows": profiles.height}
    if relation is not None and relation.height:
        write_table(relation, home.lake_path("profile_relation"))
        figures["frequency_accuracy_relation"] = relation.to_dicts()
    else:  # no model scored now: a relation from an earlier build would be stale
        home.lake_path("profile_relation").unlink(missing_ok=True)
    return figures


REPORT_TABLES = ("dataset_statistics", "metrics", "reliability", "profiles")


def report_figures(home: DataHome, settings: BuildSettings) -> dict:
    """Write the report unless its tables and settings are unchanged; figures with ``skipped``."""
    path = home.reports / "index.html"
    return memoized(
        home, "report", lambda: {"path": str(_report(home, settings))},
        inputs=[home.lake_path(name) for name in REPORT_TABLES],
        outputs=[path],
        settings={
            "sources": list(settings.sources),
            "seed": settings.seed,
            "home": str(home.root),
            "bootstrap": settings.bootstrap,
            "exam_skills": settings.exam_skills,
            "exam_min_questions": settings.exam_min_questions,
        },
    )


def model_colors_path(home: DataHome) -> Path:
    return home.lake / "state" / "model_colors.json"


def _kept_model_colors(home: DataHome, metrics: pl.DataFrame | None, profiles: pl.DataFrame | None) -> dict[str, str]:
    """The colours this home's reports gave its models, extended with the new models' and saved:
    a model keeps its colour from build to build."""
    from pipelines.profiles.report import _report_colors

    path = model_colors_path(home)
    try:
        kept = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError:
        kept = {}
    kept = {str(k): str(v) for k, v in kept.items()} if isinstance(kept, dict) else {}
    colors = {**kept, **_report_colors(metrics, profiles, kept)}
    if colors != kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(colors, sort_keys=True, indent=1) + "\n")
    return colors


def _report(home: DataHome, settings: BuildSettings) -> Path:
    def optional(name: str) -> pl.DataFrame | None:
        path = home.lake_path(name)
        return pl.read_parquet(path) if path.exists() else None

    tables = {
        "dataset_stats": optional("dataset_statistics"),
        "metrics": optional("metrics"),
        "reliability": optional("reliability"),
        "profiles": optional("profiles"),
    }
    run_info = {
        "sources": list(settings.sources),
        "seed": settings.seed,
        "home": str(home.root),
        "bootstrap": settings.bootstrap,
        "smartscore_rules": smartscore_rules(settings).as_dict(),
    }
    run_info["model_colors"] = _kept_model_colors(home, tables["metrics"], tables["profiles"])
    if settings.exam_skills == "paper":
        run_info["exam_sample_notes"] = paper_sample_notes(scored_frame(home), smartscore_rules(settings), settings.seed)
    comparisons = _baseline_comparisons(home, settings, tables["metrics"])
    try:
        return write_report(home.reports / "index.html", **tables, comparisons=comparisons, run_info=run_info)
    except Exception:
        left_out = _unplottable_models(tables)
        if not left_out:
            raise
    kept = {
        name: (frame.filter(~pl.col("model").is_in(list(left_out))) if frame is not None and "model" in frame.columns else frame)
        for name, frame in tables.items()
    }
    run_info["left out of the report"] = "; ".join(f"{m}: {reason}" for m, reason in sorted(left_out.items()))
    comparisons = [c for c in comparisons if c["model_a"] not in left_out and c["model_b"] not in left_out]
    return write_report(home.reports / "index.html", **kept, comparisons=comparisons, run_info=run_info)


def _baseline_comparisons(home: DataHome, settings: BuildSettings, metrics: pl.DataFrame | None) -> list[dict]:
    """Each scored model against the best floor baseline, on the first evaluated split."""
    if metrics is None or metrics.height == 0:
        return []
    scored = scored_frame(home)
    if scored.height == 0:
        return []
    scored = scored.filter(pl.col("model").is_in(metrics["model"].unique().to_list()))
    split = settings.eval_splits[0] if settings.eval_splits else "test"
    return comparisons_with_best_baseline(scored, split, seed=settings.seed)


def _unplottable_models(tables: dict) -> dict[str, str]:
    """The models whose rows alone make the report fail, with the reason."""
    metrics = tables.get("metrics")
    if metrics is None or metrics.height == 0:
        return {}
    failed = {}
    for model in sorted(m for m in metrics["model"].unique().to_list() if not m.startswith(PAPER_PREFIX)):
        alone = {
            name: (frame.filter(pl.col("model").str.starts_with(PAPER_PREFIX) | (pl.col("model") == model))
                   if frame is not None and "model" in frame.columns else frame)
            for name, frame in tables.items() if name != "profiles"
        }
        try:
            render_report(**alone)
        except Exception as exc:  # whatever breaks one model's plots leaves that model out
            failed[model] = (str(exc).splitlines() or [type(exc).__name__])[0]
    return failed
