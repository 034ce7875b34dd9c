"""Quality checks of the dataset stages (``pipelines/dataset/stage.py``), run as Dagster asset
checks by ``assets/dataset.py``."""

from __future__ import annotations

import polars as pl

from pipelines.checks import CheckOutcome, quality_check
from pipelines.dataset.export import check_release_invariants
from pipelines.dataset.option_order import FIGURE_LABELS, KEPT_ORDER_PREFIX, label_index, sequence_scheme
from pipelines.dataset.shuffle import answer_position_uniformity, option_orders
from pipelines.dataset.families import family_leaks
from pipelines.dataset.split import SplitConfig, proportions_by_subject
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.lake import read_lake


@quality_check(lambda h: [h.lake_path("shuffled")])
def answer_position_uniform(home: DataHome, settings: BuildSettings) -> CheckOutcome:

    results = answer_position_uniformity(read_lake(home, "shuffled"))
    worst = min((r.p_value for r in results if r.n >= 20), default=1.0)
    return CheckOutcome(
        worst >= 0.001,
        f"smallest p-value {worst:.4f}",
        {"per_num_options": {str(r.num_options): {"n": r.n, "counts": list(r.counts), "p": round(r.p_value, 4)} for r in results}},
    )


@quality_check(lambda h: [h.lake_path("latex"), h.lake_path("shuffled")])
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
    joined = answer_content(read_lake(home, "latex").select(columns)).join(
        answer_content(read_lake(home, "shuffled").select(columns)), on="question_id", suffix="_after"
    )
    changed = joined.filter(pl.col("answer") != pl.col("answer_after")).height
    return CheckOutcome(changed == 0, f"{changed} answers changed", {"changed": changed, "compared": joined.height})


@quality_check(lambda h: [h.lake_path("latex"), h.lake_path("shuffled")])
def kept_order_keys_match_source(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Questions whose option order carries meaning kept it: the recorded reason is the one
    their source options call for, the permutation is the identity, the options are the
    source's, and a figure-label key still names the source's answer position."""

    latex = read_lake(home, "latex")
    source = latex.select("question_id", "choices", "answer_idx", *(["source"] if "source" in latex.columns else []))
    after = read_lake(home, "shuffled")
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


@quality_check(lambda h: [h.lake_path("questions")])
def no_split_leakage(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """No family in two splits, a family being what the split deals
    (``pipelines.dataset.families``: dedup's families joined by a shared problem image and
    canonical stem); ``leaking_figure_stems`` counts the leaking families that only the
    figure and stem join (more than one dedup family)."""

    questions = read_lake(home, "questions")
    leaks = family_leaks(questions)
    # a family whose every question has its split from its source (a release) is the source's leak,
    # reported, not failed: the build keeps a release's splits
    placed = set(questions.filter(pl.col("source_split").is_in(["train", "valid", "test"]))["question_id"].to_list()) \
        if "source_split" in questions.columns else set()
    mask = pl.Series([bool(placed) and all(i in placed for i in ids) for ids in leaks["question_ids"].to_list()],
                     dtype=pl.Boolean)
    by_source = leaks.filter(mask)
    leaks = leaks.filter(~mask)
    ours = leaks.height
    by_figure = leaks.filter(pl.col("duplicate_groups") > 1).height
    return CheckOutcome(
        ours == 0,
        f"{ours} families in more than one split ({by_figure} joined by a shared figure and stem)"
        + (f"; {by_source.height} more that their source's own splits put in two splits" if by_source.height else ""),
        {
            "leaking_families": ours,
            "source_split_families": by_source.height,
            "leaking_figure_stems": by_figure,
            "examples": [list(ids) for ids in leaks["question_ids"].head(5).to_list()],
        },
    )


@quality_check(lambda h: [h.lake_path("questions")], settings=lambda s: {"split": [s.split_train, s.split_valid, s.split_test]})
def split_proportions(home: DataHome, settings: BuildSettings) -> CheckOutcome:
    """Every subject within one question of its largest-remainder quotas (one family when its
    families are larger)."""

    ratios = SplitConfig(settings.split_train, settings.split_valid, settings.split_test).ratios()
    questions = read_lake(home, "questions")
    held = 0
    if "source_split" in questions.columns:  # a release's questions keep its splits: its proportions are its own
        dealt = questions.filter(~pl.col("source_split").is_in(["train", "valid", "test"]).fill_null(False))
        held, questions = questions.height - dealt.height, dealt
    subjects = proportions_by_subject(questions, ratios)
    off = [s["subject"] for s in subjects if not s["ok"]]
    return CheckOutcome(
        not off,
        f"{len(off)} subjects off their split quotas" + (f" ({', '.join(map(str, off))})" if off else "")
        + (f"; {held} questions keep their source's split and are not counted" if held else ""),
        {str(s["subject"]): {"counts": s["counts"], "targets": s["targets"], "allowed": s["allowed"]} for s in subjects},
    )


def _pending_export_shards(home: DataHome) -> Path:
    """The shards the build publishes: those it staged (``pipelines.store.publish``), else the live ones."""
    from pipelines.store.publish import staged_export

    staged = staged_export(home) / "data"
    return staged if staged.is_dir() else home.export


@quality_check(lambda h: sorted(_pending_export_shards(h).glob("*.parquet")))
def export_invariants(home: DataHome, settings: BuildSettings) -> CheckOutcome:

    problems = check_release_invariants(_pending_export_shards(home))
    first = f", first: {problems[0]}" if problems else ""
    return CheckOutcome(not problems, f"{len(problems)} problems{first}", {"problems": problems[:10]})
