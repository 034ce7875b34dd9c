"""Cleaning quality of a real build, measured against the demo site's truth.

Builds the demo (crawl, parse, filter, dedup, LaTeX, ...) into a data home, or reads an
existing one, and compares what the pipeline did with what the site planted:

* dedup: pairwise precision and recall over planted duplicate pairs (records the pipeline
  put in the same group vs records the truth puts in the same ``duplicate_group``), and the
  number of templated non-duplicates (``template_of``) merged;
* LaTeX: exact match (all white space removed) of kept questions' texts and text options
  against the truth's ``problem_latex`` / ``choices_latex`` where the text has formulas, and
  the number of texts without math that were changed.

    .venv/bin/python bench/clean_quality.py --questions 3000 [--home DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipelines.demo_site.generator import SiteConfig  # noqa: E402
from pipelines.demo_site.truth import CANONICAL_BASE, iter_truth  # noqa: E402
from pipelines.home import DataHome  # noqa: E402
from pipelines.warehouse import run_query  # noqa: E402

WS = re.compile(r"\s+")


def squash(text: str | None) -> str:
    return WS.sub("", text or "")


def build(home: DataHome, questions: int, seed: int) -> float:
    from pipelines.build import run_build
    from pipelines.cli import prepare_instance
    from pipelines.settings import BuildSettings

    prepare_instance(home)
    started = time.perf_counter()
    outcome = run_build(
        BuildSettings(home=str(home.root), demo_questions=questions, seed=seed, models=("random",)),
        selection="group:ingest or group:clean or group:dataset",
        progress=False,
    )
    if not outcome.success:
        raise SystemExit(outcome.summary)
    return time.perf_counter() - started


def pairs(groups: dict[str, set[str]]) -> set[frozenset]:
    out = set()
    for members in groups.values():
        for a, b in itertools.combinations(sorted(members), 2):
            out.add(frozenset((a, b)))
    return out


def measure(home: DataHome, config: SiteConfig) -> dict:
    truth = [r for r in iter_truth(config) if r.get("type") == "question"]
    by_key = {CANONICAL_BASE.rstrip("/") + r["url"]: r for r in truth}

    kept = {k: q for k, q in run_query(home, "SELECT source_key, question_id FROM questions").rows}
    removed = dict(run_query(home, "SELECT source_key, kept_question_id FROM duplicates").rows)
    conflicted = {k for (k,) in run_query(home, "SELECT source_key FROM quarantine WHERE stage = 'dedup'").rows}
    reached_dedup = set(kept) | set(removed) | conflicted

    predicted_groups: dict[str, set[str]] = defaultdict(set)
    for key, qid in kept.items():
        predicted_groups[qid].add(key)
    for key, qid in removed.items():
        predicted_groups[qid].add(key)
    true_groups: dict[str, set[str]] = defaultdict(set)
    for key, r in by_key.items():
        if r["duplicate_group"] and key in reached_dedup:
            true_groups[r["duplicate_group"]].add(key)

    predicted, planted = pairs(predicted_groups), pairs(true_groups)
    tp = len(predicted & planted)
    template_pairs = {
        frozenset((key, CANONICAL_BASE.rstrip("/") + r["template_of"]))
        for key, r in by_key.items()
        if r["template_of"] and key in reached_dedup
    }
    merged_templates = len(template_pairs & predicted)

    texts = run_query(home, "SELECT source_key, problem, choices FROM questions").rows
    with_math = matched = prose = prose_changed = 0
    mismatches = []
    for key, problem, choices in texts:
        r = by_key.get(key)
        if r is None:
            continue
        items = [(problem, r["problem"], r["problem_latex"], bool(r["formulas"]))]
        if choices is not None and r["choices"] is not None:
            # options were shuffled: compare as multisets
            got = sorted(squash(c) for c in choices)
            want = sorted(squash(c) for c in r["choices_latex"])
            has_math = any(r["choice_formulas"] or [])
            if has_math:
                with_math += 1
                matched += got == want
            else:
                prose += 1
                prose_changed += got != sorted(squash(c) for c in r["choices"])
        for got, shown, want, has_math in items:
            if has_math:
                with_math += 1
                ok = squash(got) == squash(want)
                matched += ok
                if not ok and len(mismatches) < 5:
                    mismatches.append((want, got))
            else:
                prose += 1
                prose_changed += squash(got) != squash(shown)
    return {
        "records_reaching_dedup": len(reached_dedup),
        "planted_pairs": len(planted),
        "predicted_pairs": len(predicted),
        "dedup_precision": tp / len(predicted) if predicted else 1.0,
        "dedup_recall": tp / len(planted) if planted else 1.0,
        "templated_non_duplicates_merged": merged_templates,
        "template_pairs": len(template_pairs),
        "conflicts_quarantined": len(conflicted),
        "latex_texts_with_math": with_math,
        "latex_exact_match": matched / with_math if with_math else 1.0,
        "texts_without_math": prose,
        "texts_without_math_changed": prose_changed,
        "latex_mismatch_examples": mismatches,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", help="an existing demo build with these --questions/--seed (default: build one)")
    args = parser.parse_args(argv)
    config = SiteConfig(seed=args.seed, questions=args.questions)
    if args.home:
        home = DataHome(Path(args.home).resolve())
    else:
        home = DataHome(Path(tempfile.mkdtemp(prefix="stemforge-quality-")))
        print(f"building the demo ({args.questions} questions) into {home.root} ... "
              f"{build(home, args.questions, args.seed):.0f} s")
    figures = measure(home, config)
    for name, value in figures.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{name:34} {shown}")
    ok = (
        figures["dedup_precision"] >= 0.99
        and figures["dedup_recall"] >= 0.98
        and figures["templated_non_duplicates_merged"] == 0
        and figures["latex_exact_match"] >= 0.98
        and figures["texts_without_math_changed"] == 0
    )
    print("goals (precision >= 0.99, recall >= 0.98, no template merged, LaTeX >= 98%, prose unchanged):",
          "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
