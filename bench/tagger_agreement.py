"""Agreement of the automatic CogME tagger (rules-v1) with reference tags.

Two references:
1. the demo site's templates (``DemoSite(...).question(i).cogme_*``), one tagging per template
   family, so the figure says how well the rules read the demo's question styles;
2. the hand-labelled sample ``tests/fixtures/cogme/labelled_sample.csv`` (155 questions written
   and labelled by hand; ``part`` = ``dev`` for the 115 the rules were tuned on, ``holdout`` for
   the 40 written afterwards and never tuned on).

Usage: python bench/tagger_agreement.py [--seed 0] [--questions 3000] [--by-family]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.profiles.cogme.agreement import agreement  # noqa: E402
from pipelines.profiles.cogme.manual import load_manual_tags  # noqa: E402
from pipelines.profiles.cogme.tagger import tag_questions  # noqa: E402
from pipelines.profiles.cogme.tags import tag_rows, tags_frame  # noqa: E402
from pipelines.profiles.cogme.taxonomy import load_taxonomy  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "cogme"
COLUMNS = ["component", "n_questions", "accuracy", "kappa", "jaccard", "exact_set", "f1"]


def demo_questions(seed: int, questions: int) -> tuple[pl.DataFrame, list[dict], list[str]]:
    from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig

    site = DemoSite(SiteConfig(seed=seed, questions=questions))
    rows, ref_rows, families = [], [], []
    taxonomy = load_taxonomy("stem")
    seen = set()
    for i in site.indices():
        q = site.question(i)
        if q.text_only or q.role in ("exact", "near"):
            continue  # the pipeline drops text-only questions and duplicates
        qid = hashlib.sha256(f"demo:{seed}:{i}".encode()).hexdigest()[:16]
        if qid in seen:
            continue
        seen.add(qid)
        rows.append(
            {
                "question_id": qid,
                "subject": q.subject,
                "grade": q.grade,
                "skill": q.skill,
                "problem": q.problem_latex,
                "pic_prob": q.problem_image is not None,
                "pic_choice": q.choice_images is not None,
                "num_choices": q.num_choices,
                "choices": list(q.choices_latex) if q.choices_latex is not None else None,
            }
        )
        ref_rows.extend(
            tag_rows(qid, "reference:demo", list(q.cogme_target), list(q.cogme_content), q.cogme_thinking, taxonomy)
        )
        families.append(q.family.split("/")[0])
    frame = pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String, "subject": pl.String, "grade": pl.String, "skill": pl.String,
            "problem": pl.String, "pic_prob": pl.Boolean, "pic_choice": pl.Boolean, "num_choices": pl.Int64,
            "choices": pl.List(pl.String),
        },
    )
    return frame.with_columns(pl.Series("family", families)), ref_rows, families


def show(title: str, table: pl.DataFrame) -> None:
    print(f"\n{title}")
    with pl.Config(tbl_rows=50, tbl_cols=20, float_precision=3, tbl_hide_dataframe_shape=True):
        print(table.select(COLUMNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--questions", type=int, default=3000)
    parser.add_argument("--by-family", action="store_true", help="THINKING accuracy per demo template family")
    args = parser.parse_args(argv)
    taxonomy = load_taxonomy("stem")

    started = time.perf_counter()
    questions, ref_rows, _ = demo_questions(args.seed, args.questions)
    reference = tags_frame(ref_rows, taxonomy)
    predicted = tag_questions(questions.drop("family"), taxonomy)
    elapsed = time.perf_counter() - started
    show(
        f"demo site (seed={args.seed}, questions={args.questions}): {questions.height} questions, "
        f"{questions['family'].n_unique()} template families, tagged in {elapsed:.1f} s",
        agreement(reference, predicted, taxonomy),
    )
    if args.by_family:
        thinking_ref = reference.filter(pl.col("component") == "THINKING").select("question_id", ref="sub_component")
        thinking_pred = predicted.filter(pl.col("component") == "THINKING").select("question_id", pred="sub_component")
        per_family = (
            questions.select("question_id", "family")
            .join(thinking_ref, on="question_id")
            .join(thinking_pred, on="question_id")
            .group_by("family", "ref", "pred")
            .agg(pl.len().alias("n"))
            .sort("family", "ref", "pred")
        )
        with pl.Config(tbl_rows=200):
            print(per_family)

    sample = pl.read_ndjson(FIXTURE / "questions.jsonl")
    labels = load_manual_tags(FIXTURE / "labelled_sample.csv", taxonomy)
    auto = tag_questions(sample, taxonomy)
    show(f"hand-labelled sample, all {sample.height} questions", agreement(labels, auto, taxonomy))
    for part in ("dev", "holdout"):
        ids = sample.filter(pl.col("part") == part)["question_id"].implode()
        show(
            f"hand-labelled sample, part={part} ({sample.filter(pl.col('part') == part).height} questions)",
            agreement(
                labels.filter(pl.col("question_id").is_in(ids)), auto.filter(pl.col("question_id").is_in(ids)), taxonomy
            ),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
