"""Evaluation stages: run models on the built dataset, import predictions, score them.

Predictions live in ``lake/predictions/``, one file per model: ``run-<model>.parquet`` for
models the build runs, ``import-<model>.parquet`` for predictions imported with
``stemforge eval``. Circular re-asks of live models are in ``lake/circular/``.

Each configured model is memoized on its own (its spec, the eval splits, the model code
and the questions table), and the metrics on every prediction file, the questions and
their settings (``pipelines/store/memo.py``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

import polars as pl

from pipelines.dataset.export import export_order
from pipelines.evaluation.metrics import (
    ALL,
    METRIC_COLUMNS,
    METRICS_SCHEMA,
    compare_models,
    compute_metrics,
    empty_metrics,
    prepare_scored,
    reliability_table,
)
from pipelines.evaluation.models.base import EvalQuestion, rotate_options
from pipelines.evaluation.models.registry import (
    available_baselines,
    build_model,
    model_code_digest,
    model_entry,
    model_names,
)
from pipelines.evaluation.predictions_import import import_predictions
from pipelines.evaluation.reference_results import PAPER_PREFIX, reference_metrics
from pipelines.evaluation.exam_calibration import CALIBRATED_RULES
from pipelines.evaluation.smartscore import paper_sample_notes
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome, stable_file_stem
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake_files, write_table
from pipelines.store.memo import memoized

PREDICTIONS_SCHEMA = {
    "model": pl.String,
    "question_id": pl.String,
    "split": pl.String,
    "prediction": pl.Int64,
    "confidence": pl.Float64,
    "option_scores": pl.List(pl.Float64),
    "correct": pl.Boolean,
    "error": pl.String,
    "rule": pl.String,
    "raw": pl.String,
    "origin": pl.String,  # run | import
}
ROTATIONS_SCHEMA = {
    "model": pl.String,
    "question_id": pl.String,
    "split": pl.String,
    "subject": pl.String,
    "rotation": pl.Int64,
    "num_choices": pl.Int64,
    "correct": pl.Boolean,
}
def model_file_stem(model: str) -> str:
    return stable_file_stem(model)


def load_questions(home: DataHome) -> pl.DataFrame:
    path = home.lake_path("questions")
    if not path.exists():
        raise FileNotFoundError(f"no built dataset at {path}; run `stemforge build` first")
    return pl.read_parquet(path)


def _captions(extra: str | None) -> tuple[str | None, tuple[str | None, ...] | None]:
    if not extra:
        return None, None
    try:
        data = json.loads(extra)
    except ValueError:
        return None, None
    alts = data.get("image_alts") or {}
    if isinstance(alts, dict):
        return alts.get("problem"), tuple(alts.get("choices") or ()) or None
    return None, None


def eval_questions(questions: pl.DataFrame, home: DataHome) -> list:
    """``EvalQuestion`` objects for the rows of ``questions``."""

    store = ImageStore(home.images)
    out = []
    for r in questions.iter_rows(named=True):
        caption, choice_captions = _captions(r.get("extra"))
        choice_images = tuple(store.path(h) for h in r["choice_images"]) if r["choice_images"] is not None else None
        if choice_captions is not None and choice_images is not None and len(choice_captions) != len(choice_images):
            choice_captions = None
        if choice_captions is not None and r.get("permutation") is not None and choice_images is not None:
            choice_captions = tuple(choice_captions[p] for p in r["permutation"])
        out.append(
            EvalQuestion(
                question_id=r["question_id"],
                subject=r["subject"],
                grade=r["grade"],
                skill=r["skill"],
                split=r["split"],
                problem=r["problem"],
                problem_image=store.path(r["problem_image"]) if r["problem_image"] else None,
                choices=tuple(r["choices"]) if r["choices"] is not None else None,
                choice_images=choice_images,
                answer_idx=r["answer_idx"],
                caption=caption,
                choice_captions=choice_captions if choice_images is not None else None,
            )
        )
    return out


def predictions_frame(model: str, predictions, questions: pl.DataFrame, origin: str) -> pl.DataFrame:
    answer = dict(zip(questions["question_id"].to_list(), questions["answer_idx"].to_list()))
    split = dict(zip(questions["question_id"].to_list(), questions["split"].to_list()))
    rows = [
        {
            "model": model,
            "question_id": p.question_id,
            "split": split[p.question_id],
            "prediction": p.prediction,
            "confidence": p.confidence,
            "option_scores": list(p.option_scores) if p.option_scores is not None else None,
            "correct": (p.prediction >= 0 and p.prediction == answer[p.question_id]) if answer[p.question_id] >= 0 else None,
            "error": p.error,
            "rule": p.rule,
            "raw": p.raw,
            "origin": origin,
        }
        for p in predictions
    ]
    return pl.DataFrame(rows, schema=PREDICTIONS_SCHEMA).sort("question_id")


def _missing_extra(spec: str) -> str | None:
    """The ``stemforge[EXTRA]`` a model needs and that is not installed (the model is then
    skipped with a note instead of failing the build), or None."""
    import importlib.util

    entry = model_entry(spec.split("?", 1)[0])
    if entry is None or entry.needs is None or importlib.util.find_spec(entry.needs) is not None:
        return None
    return entry.extra or entry.name


def predict_stage(home: DataHome, settings: BuildSettings, log: Callable[[str], None] = print) -> dict:
    """Run every configured model on the evaluation splits (and circular re-asks).

    Each model is memoized on its own (``lake/state/fingerprints/predict-<spec>.json``):
    a model whose spec, code and questions are unchanged keeps its predictions.
    """

    questions_path = home.lake_path("questions")
    figures: dict = {"questions": None, "models": {}, "skipped_models": []}
    kept_files: set[str] = set()
    for spec in settings.models:
        extra = _missing_extra(spec)
        if extra is not None:
            log(f"skipping model {spec}: its optional extra is not installed (pip install 'stemforge[{extra}]')")
            figures["models"][spec] = "skipped: extra not installed"
            continue
        result = memoized(
            home,
            f"predict-{model_file_stem(spec)}",
            lambda spec=spec: _predict_one(home, settings, spec, log),
            inputs=[questions_path],
            outputs=lambda result: _model_outputs(home, result["stem"]),
            settings={"model": spec, "eval_splits": list(settings.eval_splits)},
            extra={"adapter_code": model_code_digest(spec)},
        )
        kept_files.add(result["stem"])
        figures["questions"] = result["questions"]
        figures["models"][result["name"]] = {"accuracy": result["accuracy"], "failed": result["failed"]}
        if result["skipped"]:
            figures["skipped_models"].append(result["name"])
            log(f"{result['name']}: predictions up to date, reused")
    figures["pruned_imports"] = prune_orphan_imports(home, load_questions(home), log)
    for folder, prefix in ((home.lake / "predictions", "run-"), (home.lake / "circular", "")):
        for path in folder.glob(f"{prefix}*.parquet") if folder.exists() else []:
            if path.stem.removeprefix(prefix) not in kept_files:
                path.unlink()
    if figures["questions"] is None:
        figures["questions"] = _evaluated(load_questions(home), settings).height
    figures["skipped"] = bool(settings.models) and len(figures["skipped_models"]) == sum(
        1 for v in figures["models"].values() if isinstance(v, dict)
    )
    return figures


def _model_outputs(home: DataHome, stem: str) -> list[Path]:
    paths = [home.lake / "predictions" / f"run-{stem}.parquet", home.lake / "circular" / f"{stem}.parquet"]
    return [p for p in paths if p.exists()]


def _evaluated(questions: pl.DataFrame, settings: BuildSettings) -> pl.DataFrame:
    return questions.filter(pl.col("split").is_in(list(settings.eval_splits)) & (pl.col("answer_idx") >= 0))


def _predict_one(home: DataHome, settings: BuildSettings, spec: str, log: Callable[[str], None]) -> dict:
    questions = load_questions(home)
    evaluated = _evaluated(questions, settings)
    eval_qs = eval_questions(evaluated, home)
    model = build_model(spec, cache_dir=home.cache / "responses")
    if getattr(model, "trainable", False):
        train = questions.filter((pl.col("split") == "train") & (pl.col("answer_idx") >= 0))
        valid = questions.filter((pl.col("split") == "valid") & (pl.col("answer_idx") >= 0))
        model.fit(eval_questions(train, home), eval_questions(valid, home))
    log(f"predicting with {model.name} on {len(eval_qs)} questions")
    preds = model.predict(eval_qs)
    frame = predictions_frame(model.name, preds, evaluated, "run")
    stem = model_file_stem(model.name)
    write_table(frame, home.lake / "predictions" / f"run-{stem}.parquet")
    circular_path = home.lake / "circular" / f"{stem}.parquet"
    if getattr(model, "supports_live_rotation", False):
        write_table(_circular(model, eval_qs, rotate_options), circular_path)
    else:
        circular_path.unlink(missing_ok=True)
    acc = frame["correct"].mean()
    return {
        "name": model.name,
        "stem": stem,
        "questions": len(eval_qs),
        "accuracy": round(float(acc) * 100, 2) if acc is not None else None,
        "failed": int((frame["prediction"] < 0).sum()),
    }


def _circular(model, eval_qs, rotate_options) -> pl.DataFrame:
    rows = []
    for shift in range(0, 5):
        batch = [rotate_options(q, shift) for q in eval_qs if shift < q.num_options]
        if not batch:
            break
        for q, p in zip(batch, model.predict(batch)):
            rows.append(
                {
                    "model": model.name,
                    "question_id": q.question_id,
                    "split": q.split,
                    "subject": q.subject,
                    "rotation": shift,
                    "num_choices": q.num_options,
                    "correct": p.prediction == q.answer_idx,
                }
            )
    return pl.DataFrame(rows, schema=ROTATIONS_SCHEMA).sort("question_id", "rotation")


class ImportRefused(ValueError):
    """A predictions import or removal that is refused; the message is one line."""


# Rows added at scoring for questions of a split an imported model answered in part: a
# missing prediction is a failed sample and counts as wrong (the paper's test-set accuracy).
MISSING_PREDICTION = "missing from the predictions file"


def imports_folder(home: DataHome) -> Path:
    return home.lake / "predictions"


def import_path(home: DataHome, model: str) -> Path:
    return imports_folder(home) / f"import-{model_file_stem(model)}.parquet"


_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "GEORGIAN"})


def _lookalike_reason(name: str) -> str | None:
    """Why ``name`` could pass for another name in the metrics and the report (an invisible or
    control character, a form NFKC changes, letters of scripts that look alike: Latin with
    Cyrillic or Greek, ``r\u0430ndom``), or None."""
    import unicodedata

    for char in name:
        if unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp") or (char.isspace() and char != " "):
            return f"it holds the invisible or control character U+{ord(char):04X}"
    if unicodedata.normalize("NFKC", name) != name:
        return f"it is not in Unicode normal form NFKC (it reads as {unicodedata.normalize('NFKC', name)!r})"
    scripts = {unicodedata.name(char, "?").split(" ")[0] for char in name if char.isalpha()} & _LOOKALIKE_SCRIPTS
    if len(scripts) > 1:
        return f"it mixes letters of several scripts ({', '.join(sorted(scripts))}), a lookalike of another name"
    return None


def reserved_name_reason(model: str) -> str | None:
    """Why ``model`` cannot name an import (it would mix with a built-in model's or the
    paper's rows, or pass for another name), or None."""

    lookalike = _lookalike_reason(model)
    if lookalike:
        return lookalike
    name = model.strip()
    if name.lower().startswith(PAPER_PREFIX):
        return f"names starting with {PAPER_PREFIX!r} are the paper's reference results"
    kind = name.partition("?")[0].strip().lower()
    if kind in model_names():
        return f"{kind!r} is a built-in model"
    return None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


RELEASE_TEST_KEY = r"^test-\d{5}-of-\d{5}\.parquet#\d+$"


def release_test_order(home: DataHome, questions: pl.DataFrame) -> list[str | None] | None:
    """When the test split is one STEM release's (``stem-parquet:``): its test rows in release
    order, each as the question it became, or None for a row this build did not keep (merged
    into another question, quarantined), so that the release's own preds.txt imports line by
    line. None for any other home (preds.txt then follows the test split's export order)."""
    test = questions.filter(pl.col("split") == "test")
    sources = test["source"].unique().to_list() if "source" in test.columns else []
    if len(sources) != 1 or not str(sources[0]).startswith("stem-parquet:"):
        return None
    if not test["source_key"].str.contains(RELEASE_TEST_KEY).all():
        return None
    from pipelines.store.lake import read_raw_questions

    raw = read_raw_questions(home)
    keys = raw.filter((pl.col("source") == sources[0]) & pl.col("source_key").str.contains(RELEASE_TEST_KEY))["source_key"]
    quarantine = home.lake / "quarantine"
    for path in sorted(quarantine.glob("*.parquet")) if quarantine.is_dir() else []:
        lost = pl.read_parquet(path, columns=["source", "source_key"])
        keys = pl.concat([keys, lost.filter((pl.col("source") == sources[0])
                                             & pl.col("source_key").str.contains(RELEASE_TEST_KEY))["source_key"]])
    ordered = sorted(set(keys.to_list()), key=lambda k: (k.partition("#")[0], int(k.partition("#")[2])))
    kept = dict(zip(test["source_key"].to_list(), test["question_id"].to_list()))
    return [kept.get(key) for key in ordered]


def import_predictions_file(
    home: DataHome, path: Path, model: str, fmt: str = "auto", log: Callable[[str], None] = _to_stderr
) -> dict:
    """Validate and store predictions from a file; returns figures (rows, per split the
    questions with a key and how many of them have no prediction, ``replaced``: the rows of an
    earlier import under the same name, which ``log`` is told about). Raises ValueError."""

    reason = reserved_name_reason(model)
    if reason:
        raise ImportRefused(f"model name {model!r} is refused: {reason}; choose another --model name")
    if not path.is_file():
        raise FileNotFoundError(f"no such predictions file: {path}")

    questions = load_questions(home)
    # preds.txt lines follow the exported test split's row order
    ordered = export_order(questions).rename({"export_position": "order"})
    imported = import_predictions(path, model, ordered, order_by="order", fmt=fmt,
                                  test_order=release_test_order(home, questions))
    joined = imported.join(questions.select("question_id", "split", "answer_idx"), on="question_id", how="left")
    unkeyed = joined.filter(pl.col("answer_idx") < 0).sort("source_line")
    if unkeyed.height:
        first = unkeyed.row(0, named=True)
        raise ImportRefused(
            f"{path.name} line {first['source_line']}: question {first['question_id']} has no answer key in this "
            f"home (its {first['split']} answers are hidden), so {unkeyed.height} prediction(s) could not be scored; "
            "nothing imported"
        )
    frame = joined.select(
        pl.lit(model).alias("model"),
        "question_id",
        "split",
        pl.col("prediction").cast(pl.Int64),
        pl.col("confidence").cast(pl.Float64),
        pl.col("option_scores").cast(pl.List(pl.Float64)) if "option_scores" in imported.columns else pl.lit(None, pl.List(pl.Float64)).alias("option_scores"),
        (pl.col("prediction") == pl.col("answer_idx")).alias("correct"),
        pl.lit(None, pl.String).alias("error"),
        pl.lit(None, pl.String).alias("rule"),
        pl.lit(None, pl.String).alias("raw"),
        pl.lit("import").alias("origin"),
    ).cast(PREDICTIONS_SCHEMA).sort("question_id")
    target = import_path(home, model)
    replaced = None
    if target.exists():
        earlier = pl.read_parquet(target, columns=["split"])
        replaced = dict(earlier.group_by("split").len().sort("split").iter_rows())
        described = ", ".join(f"{n} {split}" for split, n in replaced.items()) or "no"
        log(f"note: model {model} was already imported ({described} predictions); this import replaces it")
    write_table(frame, target)
    coverage = {}
    keyed = questions.filter(pl.col("answer_idx") >= 0)
    for split in sorted(frame["split"].unique().to_list()):
        total = keyed.filter(pl.col("split") == split).height
        answered = frame.filter(pl.col("split") == split).height
        coverage[split] = {"questions": total, "missing": total - answered}
    return {"rows": frame.height, "coverage": coverage, "replaced": replaced}


def imported_models(home: DataHome) -> list[dict]:
    """The imported models of a home: name, file, rows per split."""
    out = []
    for path in sorted(imports_folder(home).glob("import-*.parquet")) if imports_folder(home).exists() else []:
        frame = pl.read_parquet(path, columns=["model", "split"])
        name = frame["model"][0] if frame.height else path.stem.removeprefix("import-")
        per_split = dict(frame.group_by("split").len().sort("split").iter_rows())
        out.append({"model": name, "file": path, "rows": per_split})
    return sorted(out, key=lambda r: r["model"])


def remove_imported_model(home: DataHome, model: str) -> Path:
    """Delete an imported model's predictions (the metrics follow at the next scoring)."""
    path = import_path(home, model)
    if not path.exists():
        reason = reserved_name_reason(model)
        if reason:
            raise ImportRefused(f"cannot remove {model!r}: {reason}, not an import")
        known = ", ".join(repr(r["model"]) for r in imported_models(home)) or "none"
        raise ImportRefused(f"no imported model {model!r} in {home.root} (imported: {known})")
    path.unlink()
    return path


def prune_orphan_imports(home: DataHome, questions: pl.DataFrame, log: Callable[[str], None] = print) -> dict:
    """Drop imported predictions whose question is no longer in the dataset (a removed
    source, a question newly deduplicated); an import left with none is deleted."""
    known = questions.select("question_id")
    pruned: dict[str, int] = {}
    for path in sorted(imports_folder(home).glob("import-*.parquet")) if imports_folder(home).exists() else []:
        frame = pl.read_parquet(path)
        kept = frame.join(known, on="question_id", how="semi")
        if kept.height == frame.height:
            continue
        name = frame["model"][0] if frame.height else path.stem
        pruned[name] = frame.height - kept.height
        if kept.height:
            write_table(kept, path)
            log(f"imported model {name}: {frame.height - kept.height} predictions on questions no longer in the dataset removed")
        else:
            path.unlink()
            log(f"imported model {name}: all {frame.height} predictions were on questions no longer in the dataset; import removed")
    return pruned


def _fill_missing_imports(preds: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """An imported model is scored on every keyed question of each split it answered."""
    imported = preds.filter(pl.col("origin") == "import")
    if imported.height == 0:
        return preds
    expected = imported.select("model", "split").unique().join(
        questions.filter(pl.col("answer_idx") >= 0).select("question_id", "split"), on="split"
    )
    missing = expected.join(imported.select("model", "question_id"), on=["model", "question_id"], how="anti")
    if missing.height == 0:
        return preds
    filled = missing.select(
        "model",
        "question_id",
        "split",
        pl.lit(-1, pl.Int64).alias("prediction"),
        pl.lit(None, pl.Float64).alias("confidence"),
        pl.lit(None, pl.List(pl.Float64)).alias("option_scores"),
        pl.lit(False).alias("correct"),
        pl.lit(MISSING_PREDICTION).alias("error"),
        pl.lit(None, pl.String).alias("rule"),
        pl.lit(None, pl.String).alias("raw"),
        pl.lit("import").alias("origin"),
    )
    return pl.concat([preds, filled.cast({k: v for k, v in PREDICTIONS_SCHEMA.items() if k in filled.columns})], how="vertical_relaxed")


def _file_model(path: Path) -> str:
    names = pl.read_parquet(path, columns=["model"], n_rows=1)["model"].to_list()
    return names[0] if names else ""


def scored_frame(home: DataHome) -> pl.DataFrame:
    """Every prediction joined with the question attributes the measures need."""
    files = sorted((home.lake / "predictions").glob("*.parquet"))
    if not files:
        return pl.DataFrame()
    # an import named like a built-in model (refused since; older homes may hold one) is left out
    files = [f for f in files if not (f.name.startswith("import-") and reserved_name_reason(_file_model(f)))]
    if not files:
        return pl.DataFrame()
    all_questions = load_questions(home)
    preds = pl.concat([pl.read_parquet(f) for f in files], how="vertical_relaxed")
    preds = preds.join(all_questions.select("question_id"), on="question_id", how="semi")
    preds = _fill_missing_imports(preds, all_questions)
    questions = all_questions.select(
        "question_id", "subject", "grade", "skill", "num_choices", "problem",
        pl.coalesce(pl.col("problem_image"), pl.col("question_id")).alias("cluster"),
    )
    return preds.join(questions, on="question_id", how="inner").filter(pl.col("correct").is_not_null())


def metrics_stage(home: DataHome, settings: BuildSettings) -> tuple[pl.DataFrame, dict]:
    """Score every prediction file; skipped when predictions, questions and settings are unchanged."""

    figures = memoized(
        home, "metrics", lambda: _metrics(home, settings),
        inputs=[home.lake_path("questions"), *lake_files(home, "predictions/*.parquet", "circular/*.parquet")],
        outputs=lambda _: [p for p in (home.lake_path("metrics"), home.lake_path("reliability")) if p.exists()],
        settings={"bootstrap": settings.bootstrap, "seed": settings.seed, "smartscore": smartscore_rules(settings).as_dict()},
    )
    return pl.read_parquet(home.lake_path("metrics")), figures


def smartscore_rules(settings: BuildSettings):
    """The SmartScore rules of a build: calibrated on the paper's exam scores (``exam_calibration``),
    with the build's skill sampling and minimum."""

    return replace(CALIBRATED_RULES, skill_sample=settings.exam_skills, min_questions=settings.exam_min_questions)


def comparisons_with_best_baseline(scored: pl.DataFrame, split: str = "test", seed: int = 0) -> list[dict]:
    """``metrics.compare_models`` of every non-baseline model against the floor baseline with
    the highest macro accuracy on ``split`` (ties: the first name). Empty without a baseline or
    without another model."""

    if scored.height == 0 or "split" not in scored.columns:
        return []
    mine = scored.filter(pl.col("split") == split)
    models = sorted(mine["model"].unique().to_list())
    floors = available_baselines()
    baselines = [m for m in models if m.partition("?")[0] in floors]
    others = [m for m in models if m not in baselines]
    if not baselines or not others:
        return []
    macro = (
        mine.filter(pl.col("model").is_in(baselines))
        .group_by("model", "subject")
        .agg(pl.col("correct").cast(pl.Float64).mean().alias("accuracy"))
        .group_by("model")
        .agg(pl.col("accuracy").mean())
        .sort(["accuracy", "model"], descending=[True, False])
    )
    best = macro["model"][0]
    return [compare_models(mine, model, best, split, seed=seed) for model in others]


def _metrics(home: DataHome, settings: BuildSettings) -> dict:
    scored, left_out = _scorable(scored_frame(home), settings)
    parts = [reference_metrics()]
    rel = None
    exam_notes: list[str] = []
    if scored.height:
        parts.append(coverage_rows(scored))
        circular_files = sorted((home.lake / "circular").glob("*.parquet")) if (home.lake / "circular").exists() else []
        circular = pl.concat([pl.read_parquet(f) for f in circular_files]) if circular_files else None
        if circular is not None:
            circular = circular.filter(pl.col("model").is_in(scored["model"].unique().to_list())).join(
                scored.select("model", "question_id", "cluster"), on=["model", "question_id"], how="left"
            )
        parts.append(compute_metrics(scored, bootstrap=settings.bootstrap, seed=settings.seed, circular=circular,
                                     smartscore=smartscore_rules(settings)))
        rel = reliability_table(scored)
        exam_notes = paper_sample_notes(scored, smartscore_rules(settings), seed=settings.seed)
    metrics = pl.concat([p for p in parts if p is not None and p.height], how="vertical_relaxed") if parts else empty_metrics()
    write_table(metrics, home.lake_path("metrics"))
    if rel is not None:
        write_table(rel, home.lake_path("reliability"))
    else:
        home.lake_path("reliability").unlink(missing_ok=True)
    models = sorted(scored["model"].unique().to_list()) if scored.height else []
    coverage_notes = coverage_gaps(scored) if scored.height else []
    return {"coverage_notes": coverage_notes, "models": models, "rows": metrics.height, "scored_predictions": scored.height, "left_out": left_out,
            "exam_sample_notes": exam_notes}


def _scorable(scored: pl.DataFrame, settings: BuildSettings) -> tuple[pl.DataFrame, dict[str, str]]:
    """The scored rows of the models that can be measured, and why the others cannot: one
    model's bad predictions never stop the others from being scored."""

    if scored.height == 0:
        return scored, {}
    left_out: dict[str, str] = {}
    for model in sorted(scored["model"].unique().to_list()):
        try:
            prepare_scored(scored.filter(pl.col("model") == model))
        except Exception as exc:  # any failure of one model's scoring leaves that model out
            left_out[model] = (str(exc).splitlines() or [type(exc).__name__])[0]
    if left_out:
        scored = scored.filter(~pl.col("model").is_in(list(left_out)))
    return scored, left_out


def coverage_rows(scored: pl.DataFrame) -> pl.DataFrame:
    """``metric='coverage'``: percent of the split's keyed questions the model answered
    (a prediction present in its file; -1 answers count as present), per subject and micro."""

    present = (pl.col("error").is_null() | (pl.col("error") != MISSING_PREDICTION)).cast(pl.Float64)
    parts = []
    for group_by, key in (("micro", pl.lit(ALL)), ("subject", pl.col("subject"))):
        parts.append(
            scored.group_by("model", "split", key.alias("group_value"))
            .agg((present.mean() * 100.0).alias("value"), pl.len().cast(pl.Int64).alias("n"))
            .with_columns(
                pl.lit("coverage").alias("metric"),
                pl.lit(group_by).alias("group_by"),
                pl.lit(None, pl.Float64).alias("ci_low"),
                pl.lit(None, pl.Float64).alias("ci_high"),
            )
            .select(METRIC_COLUMNS)
            .cast(METRICS_SCHEMA)
        )
    return pl.concat(parts).sort("model", "split", "group_by", "group_value")


def coverage_gaps(scored: pl.DataFrame) -> list[str]:
    """One line per (imported model, split) that lacks predictions for some keyed questions
    (questions a rebuild added after the import, or left out of its file): they count as wrong."""
    missing = (
        scored.filter(pl.col("origin") == "import")
        .group_by("model", "split")
        .agg(pl.len().alias("questions"), (pl.col("error") == MISSING_PREDICTION).fill_null(False).sum().alias("missing"))
        .filter(pl.col("missing") > 0)
        .sort("model", "split")
    )
    return [
        f"imported model {model} has no prediction for {lacking} of the {total} {split} questions "
        f"(coverage {100.0 * (total - lacking) / total:.1f}%): they count as wrong; re-import its predictions "
        "on the current questions to score them"
        for model, split, total, lacking in missing.select("model", "split", "questions", "missing").iter_rows()
    ]
