"""Cleaning quality of a real build, measured against the demo site's truth.

Builds the demo (crawl, parse, filter, dedup, LaTeX, ...) into a data home, or reads an
existing one, and compares what the pipeline did with what the site planted:

* dedup: pairwise precision and recall over planted duplicate pairs (records the pipeline
  put in the same group vs records the truth puts in the same ``duplicate_group``), and the
  number of templated non-duplicates (``template_of``) merged; then per class: each kind of
  planted copy (exact, jpeg, resize, rescan, tex_spacing, label_punct, ...) and the questions
  identical by accident (the truth's ``duplicate_kind='identical'``: same text, drawing, options
  and answer, not planted) with its recall and precision, each kind of non-duplicate (templated
  siblings by change, unplanted questions with the same text and options and another drawing)
  with the pairs merged;
* families and splits: truth families (``split_group``: duplicates and siblings that keep the
  figure, stem and answer) kept in one family and one split, and questions per subject/split;
* LaTeX: exact match (all white space removed) of kept questions' texts and text options
  against the truth's ``problem_latex`` / ``choices_latex`` where the text has formulas, and
  the number of texts without math that were changed.

* hard cases from the real figures of ../shared/corpora (``--hard-cases [N]``, issue 29):
  per class (copies: jpeg, resize, rescan, crop; different pictures: added_label,
  label_on_fill (a label inside one of the figure's fills), nearest_other, shared_frame) N pairs, each pair two questions with the same text and options
  through the real ingest, filter, image-index and dedup stages (tests/support/hard_cases.py):
  pairs merged with the same answer, and with different answers the pairs quarantined as
  ``near duplicate with a conflicting answer`` or kept both; goals: copies merged >= 0.98,
  different pictures never merged nor quarantined. Alone (no --questions/--home) it skips the demo.
  Each pair has its own text; ``--hard-case-block`` puts all pairs of a class under one text
  (with N > 32 a block larger than dedup's small_block: candidates only by close hashes), and
  counts questions of two different pairs put in one group (never right).

    .venv/bin/python bench/clean_quality.py --questions 3000 [--home DIR] [--seed 0] [--corpora]
    .venv/bin/python bench/clean_quality.py --hard-cases 60 [--seed 0] [--hard-case-block]
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

from pipelines.ingest.demo_site.generator import SiteConfig  # noqa: E402
from pipelines.ingest.demo_site.truth import CANONICAL_BASE, iter_truth  # noqa: E402
from pipelines.store.home import DataHome  # noqa: E402
from pipelines.store.warehouse import run_query  # noqa: E402

WS = re.compile(r"\s+")


def squash(text: str | None) -> str:
    return WS.sub("", text or "")


def build(home: DataHome, questions: int, seed: int) -> float:
    from pipelines.orchestration.run import run_build
    from pipelines.orchestration.cli import prepare_instance
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


def truth_by_key(config: SiteConfig) -> dict[str, dict]:
    base = CANONICAL_BASE.rstrip("/")
    return {base + r["url"]: r for r in iter_truth(config) if r.get("type") == "question"}


def dedup_pairs(home: DataHome, by_key: dict[str, dict]) -> tuple[set[frozenset], set[frozenset], set[str], set[str]]:
    """Pairs the build put in one group, pairs the truth plants, the records that reached
    dedup and the records dedup quarantined."""
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
    return pairs(predicted_groups), pairs(true_groups), reached_dedup, conflicted


def wrong_pairs(home: DataHome, by_key: dict[str, dict]) -> list[dict]:
    """Every planted pair the build did not merge ("missed") and every merged pair the truth
    does not plant ("false"): both questions' page, class and drawing, and the evidence dedup
    recorded for the merge (a missed pair has none); ``by_key``: ``truth_by_key``."""
    predicted, planted, _, _ = dedup_pairs(home, by_key)
    evidence = dict(run_query(home, "SELECT source_key, evidence FROM duplicates").rows)
    found = []
    for error, wrong in (("missed", planted - predicted), ("false", predicted - planted)):
        for a, b in sorted(tuple(sorted(pair)) for pair in wrong):
            drawings = [(by_key[k]["problem_image"] or {}) for k in (a, b)]
            found.append({
                "error": error,
                "pages": [by_key[k]["url"] for k in (a, b)],
                "classes": [_class_of(by_key[k]) for k in (a, b)],
                "drawings": [f"{d.get('kind', '-')}/{d.get('content_key', '-')}" for d in drawings],
                "evidence": evidence.get(b) or evidence.get(a),
            })
    return found


def measure(home: DataHome, config: SiteConfig) -> dict:
    by_key = truth_by_key(config)
    predicted, planted, reached_dedup, conflicted = dedup_pairs(home, by_key)
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


def _class_of(r: dict) -> str:
    kind = "identical by accident" if r["duplicate_kind"] == "identical" else r["duplicate_kind"]
    return r["near_variant"] or kind or "-"


def dedup_classes(home: DataHome, config: SiteConfig) -> list[dict]:
    """Pairwise precision and recall per class of planted pair.

    Duplicate classes: a copy and its original (or two copies), named by the copy's kind or
    near variant ("identical by accident": a question the truth finds identical to the group's
    original though nothing planted it); recall = share of these pairs put in one group;
    precision = correct pairs / predicted pairs that involve a record of that class.
    Non-duplicate classes: templated siblings by change (image, options, colour) and unplanted
    questions with the same text, options and answer (another drawing; "same question and
    drawing" would be a pair the truth misses); "merged" pairs are errors (precision counts them
    against the classes above)."""
    from pipelines.ingest.demo_site.drawing import draw
    from pipelines.ingest.demo_site.generator import DemoSite

    truth = [r for r in iter_truth(config) if r.get("type") == "question"]
    base = CANONICAL_BASE.rstrip("/")
    by_key = {base + r["url"]: r for r in truth}
    kept = dict(run_query(home, "SELECT source_key, question_id FROM questions").rows)
    removed = dict(run_query(home, "SELECT source_key, kept_question_id FROM duplicates").rows)
    capped = {k for (k,) in run_query(home, "SELECT source_key FROM quarantine WHERE stage = 'cap'").rows}
    group_of = {**kept, **removed}
    reached = set(group_of) | capped

    def together(a: str, b: str) -> bool:
        return a in group_of and group_of.get(a) == group_of.get(b)

    rows: dict[str, dict] = defaultdict(lambda: {"pairs": 0, "merged": 0, "false": 0})
    planted = set()
    members: dict[str, list[str]] = defaultdict(list)
    for key, r in by_key.items():
        if r["duplicate_group"] and key in group_of:
            members[r["duplicate_group"]].append(key)
    for keys in members.values():
        for a, b in itertools.combinations(sorted(keys), 2):
            ca, cb = _class_of(by_key[a]), _class_of(by_key[b])
            name = cb if ca == "original" else ca if cb == "original" else "copy-copy"
            rows[name]["pairs"] += 1
            rows[name]["merged"] += together(a, b)
            planted.add(frozenset((a, b)))
    negatives = {}
    for key, r in by_key.items():
        if r["template_of"] and key in group_of and base + r["template_of"] in group_of:
            negatives[frozenset((key, base + r["template_of"]))] = "template:" + r["template_change"]
    same_question: dict[tuple, list[str]] = defaultdict(list)
    for key, r in by_key.items():
        if key in group_of and not r["duplicate_group"] and not r["template_of"] and r["problem_image"]:
            same_question[(r["problem"], tuple(sorted(r["choices"] or [])), r["answer"])].append(key)
    for keys in same_question.values():
        for a, b in itertools.combinations(sorted(keys), 2):
            negatives.setdefault(frozenset((a, b)), "unplanted:same text, options and answer")
    site = DemoSite(config)

    def same_drawing(a: str, b: str) -> bool:
        qa, qb = site.question(by_key[a]["index"]), site.question(by_key[b]["index"])
        if qa.problem_image is None or qb.problem_image is None:
            return False
        da, db = draw(qa.problem_image), draw(qb.problem_image)
        return da.size == db.size and da.tobytes() == db.tobytes()

    for pair, name in negatives.items():
        a, b = sorted(pair)
        if name.startswith("unplanted") and same_drawing(a, b):
            # the same drawing on another page: the same question, which the truth should group
            name = negatives[pair] = "unplanted:same question and drawing"
        rows[name]["pairs"] += 1
        rows[name]["merged"] += together(a, b)
    # predicted pairs that no truth pair explains, and the classes they count against
    predicted_groups: dict[str, list[str]] = defaultdict(list)
    for key, qid in group_of.items():
        predicted_groups[qid].append(key)
    unexplained = unexplained_same = wrong = 0
    for keys in predicted_groups.values():
        for a, b in itertools.combinations(sorted(keys), 2):
            pair = frozenset((a, b))
            if pair in planted:
                continue
            wrong += 1
            if pair not in negatives:
                unexplained += 1
                unexplained_same += same_drawing(a, b) and by_key[a]["answer"] == by_key[b]["answer"]
            for k in (a, b):
                if by_key[k]["duplicate_group"] and by_key[k]["duplicate_kind"] != "original":
                    rows[_class_of(by_key[k])]["false"] += 1
    out = []
    for name in sorted(rows, key=lambda n: (n.startswith(("template:", "unplanted")), n)):
        if name == "original":
            continue
        row = rows[name]
        negative = name.startswith(("template:", "unplanted"))
        out.append({
            "class": name, "kind": "not duplicates" if negative else "duplicates", "pairs": row["pairs"],
            "merged": row["merged"],
            "recall": None if negative else (row["merged"] / row["pairs"] if row["pairs"] else 1.0),
            "precision": None if negative else (row["merged"] / (row["merged"] + row["false"])
                                                if row["merged"] + row["false"] else 1.0),
        })
    out.append({"class": "other merges", "kind": "not duplicates", "pairs": unexplained, "merged": unexplained,
                "recall": None, "precision": None, "same_drawing": unexplained_same})
    correct = sum(1 for pair in planted if together(*sorted(pair)))
    out.append({"class": "all", "kind": "summary", "pairs": len(planted), "merged": correct + wrong,
                "recall": correct / len(planted) if planted else 1.0,
                "precision": correct / (correct + wrong) if correct + wrong else 1.0})
    return out


def split_figures(home: DataHome, config: SiteConfig) -> dict:
    """Families and splits against the truth's ``split_group``: truth pairs kept in one family
    and one split, and the questions per subject and split."""
    truth = [r for r in iter_truth(config) if r.get("type") == "question"]
    base = CANONICAL_BASE.rstrip("/")
    rows = run_query(home, "SELECT source_key, duplicate_group, split, subject FROM questions").rows
    family = {k: g for k, g, _, _ in rows}
    split = {k: s for k, _, s, _ in rows}
    groups: dict[str, list[str]] = defaultdict(list)
    for r in truth:
        key = base + r["url"]
        if r["split_group"] and key in family:
            groups[r["split_group"]].append(key)
    pairs_total = same_family = same_split = 0
    options_pairs = options_same_split = 0
    for keys in groups.values():
        for a, b in itertools.combinations(sorted(keys), 2):
            pairs_total += 1
            same_family += family[a] == family[b]
            same_split += split[a] == split[b]
    by_key = {base + r["url"]: r for r in truth}
    for key, r in by_key.items():
        other = base + (r["template_of"] or "")
        if r["template_change"] == "options" and key in split and other in split:
            options_pairs += 1
            options_same_split += split[key] == split[other]
    counts = run_query(home, "SELECT subject, split, count(*) FROM questions GROUP BY ALL ORDER BY ALL").rows
    return {
        "family_pairs_in_kept_questions": pairs_total,
        "family_pairs_in_one_family": same_family,
        "family_pairs_in_one_split": same_split,
        "same_figure_stem_answer_other_distractors_pairs": options_pairs,
        "of_which_in_one_split": options_same_split,
        "questions_per_subject_and_split": {f"{subject}/{sp}": n for subject, sp, n in counts},
    }


def hard_case_figures(pairs: int, seed: int, block: bool = False) -> bool:
    """Print the hard-case table (``--hard-cases``); True when every class meets its goal.
    ``block``: all pairs of a class under one text (``--hard-case-block``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support import hard_cases as hc

    started = time.perf_counter()
    for kind in hc.KINDS:
        hc.cases(kind, pairs, seed)
    made = time.perf_counter() - started
    started = time.perf_counter()
    rows = hc.measure(hc.KINDS, n=pairs, seed=seed, block=block)
    measured = time.perf_counter() - started
    print(f"\nhard cases from the real figures of {hc.CORPORA} ({pairs} pairs per class, seed {seed}; "
          f"made in {made:.0f} s, ingest + dedup {measured:.0f} s)")
    print("  rate: recall of copies, share wrongly merged of different pictures; precision (copies): the pair's merges "
          "over all merges of the class's questions")
    print("  same text and options in a pair" + (", ONE text for all pairs of a class (a block)" if block else
                                                      ", each pair its own text")
          + "; merged = same answers, one group; with different answers: conflict = "
          f"'{hc.NEAR_CONFLICT}', kept = both kept apart" + ("; cross = questions of two pairs in one group" if block else ""))
    print(f"  {'class':14} {'must':6} {'pairs':>5} {'merged':>6} {'rate':>6} {'goal':>7} {'precision':>9} {'conflict':>8} {'kept':>5}"
          + (f" {'cross':>5}" if block else "") + "  verdict")
    ok = True
    for kind in hc.KINDS:
        row = rows[kind]
        goal = f">={row['goal']:.2f}" if row["should_merge"] else "0"
        verdict = "PASS" if row["met"] else "MISS"
        # copies: merges of the pair / all merges of the class's questions (pairs with other pairs too)
        precision = (f"{row['merged'] / (row['merged'] + row['cross']):.3f}" if row["merged"] + row["cross"] else "-") \
            if row["should_merge"] else "-"
        ok = ok and row["met"]
        print(f"  {kind:14} {'merge' if row['should_merge'] else 'never':6} {row['pairs']:>5} {row['merged']:>6} "
              f"{row['rate']:>6.3f} {goal:>7} {precision:>9} {row['conflicts']:>8} {row['both_kept']:>5}"
              + (f" {row['cross']:>5}" if block else "") + f"  {verdict}"
              + (f"  ({row['lost']} questions lost before dedup)" if row["lost"] else ""))
    conflicts = sum(rows[k]["conflicts"] for k in hc.DIFFERENT)
    total = sum(rows[k]["pairs"] for k in hc.DIFFERENT)
    print(f"  different pictures with different answers quarantined as a conflict: {conflicts} of {total} (goal 0)")
    for kind in hc.KINDS:
        for origin in rows[kind]["examples"][:3]:
            print(f"    {kind} wrong: {origin}")
    print("hard-case goals (copies merged >= 0.98 per class, different pictures never merged nor quarantined):",
          "met" if ok else "MISSED")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, help="demo questions (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", help="a demo build with these --questions/--seed (built there if it has no warehouse; "
                                       "default: a new temporary folder)")
    parser.add_argument("--corpora", action="store_true", help="also build and measure the real corpora (bench/corpus_quality.py)")
    parser.add_argument("--hard-cases", type=int, nargs="?", const=60, metavar="N",
                        help="hard cases from real figures, N pairs per class (default 60); alone, without the demo")
    parser.add_argument("--hard-case-block", action="store_true",
                        help="with --hard-cases: all pairs of a class under one text (a block of 4N questions)")
    args = parser.parse_args(argv)
    if args.hard_cases is not None and args.questions is None and not args.home:
        ok = hard_case_figures(args.hard_cases, args.seed, args.hard_case_block)
        if args.corpora:
            from bench.corpus_quality import main as corpus_quality

            ok = corpus_quality(["--corpus", "all"]) == 0 and ok
        return 0 if ok else 1
    if args.questions is None:
        args.questions = 3000
    config = SiteConfig(seed=args.seed, questions=args.questions)
    home = DataHome(Path(args.home).resolve() if args.home else Path(tempfile.mkdtemp(prefix="stemforge-quality-")))
    if not home.warehouse.exists():
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
    print("\ndedup per class (pairs of records that reached dedup):")
    print(f"  {'class':44} {'pairs':>6} {'merged':>7} {'recall':>7} {'precision':>9}")
    for row in dedup_classes(home, config):
        recall = "" if row["recall"] is None else f"{row['recall']:.4f}"
        precision = "" if row["precision"] is None else f"{row['precision']:.4f}"
        note = f"  ({row['same_drawing']} with the same drawing)" if "same_drawing" in row else ""
        print(f"  {row['class']:44} {row['pairs']:>6} {row['merged']:>7} {recall:>7} {precision:>9}{note}")
    print("\ndedup pairs wrong (missed: planted, not merged; false: merged, not planted):")
    for row in wrong_pairs(home, truth_by_key(config)):
        print(f"  {row['error']:6} {' + '.join(row['pages'])}  {' + '.join(row['classes'])}  "
              f"{' + '.join(row['drawings'])}  {row['evidence'] or ''}")
    print("\nfamilies and splits:")
    for name, value in split_figures(home, config).items():
        print(f"  {name:50} {value}")
    if args.hard_cases is not None:
        ok = hard_case_figures(args.hard_cases, args.seed, args.hard_case_block) and ok
    if args.corpora:
        from bench.corpus_quality import main as corpus_quality

        ok = corpus_quality(["--corpus", "all"]) == 0 and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
