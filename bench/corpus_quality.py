"""Cleaning quality on the real corpora of ../shared/corpora (SceMQA, GAOKAO-MM), whole.

Each corpus is built into a data home of its own by the real build (``stemforge build``,
asset groups ingest, clean and dataset) from the README's source spec, and measured from
that home's warehouse:

* records, kept questions, quarantined records by stage and reason;
* duplicates removed by kind (``exact`` / ``near``) and the families (``duplicate_group``)
  that hold more than one kept question;
* math damaged: texts (a problem, or one option) whose TeX math as imported
  (``raw_questions``) is not all, unchanged, in the final text (``questions.problem``,
  ``choices.text`` matched through ``original_position``), by ``pipelines.clean.latex.convert.changed_math``;
* kept order: questions whose imported options are figure labels or refer to other options
  (``pipelines.dataset.option_order``), how many the warehouse records as kept in order
  (``questions.shuffle``), and order violations: a recorded reason that differs, a moved
  option, or a key that no longer names the imported answer's position;
* families across splits: ``duplicate_group`` values in more than one split, and (figure
  image, normalized stem) pairs in more than one split (stem: NFKC, case-folded, without
  white space).

    .venv/bin/python bench/corpus_quality.py [--corpus scemqa|gaokao|all] [--homes DIR] [--reuse]

Exit status 1 when a build fails, or any corpus has math damaged, order violations or
families across splits.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipelines.store.home import DataHome  # noqa: E402
from pipelines.clean.latex.convert import changed_math, extract_math  # noqa: E402
from pipelines.dataset.option_order import KEPT_ORDER_PREFIX, option_order  # noqa: E402
from pipelines.store.warehouse import run_query  # noqa: E402

CORPORA_DIR = "../shared/corpora"  # from the repository root, as in the README
SELECTION = "group:ingest or group:clean or group:dataset"


@dataclass(frozen=True)
class Corpus:
    path: str  # inside the corpora folder
    mapping: str

    def spec(self, corpora_dir: str = CORPORA_DIR, path: str | None = None) -> str:
        return f"json:{path or f'{corpora_dir}/{self.path}'}?{self.mapping}"


CORPORA = {
    "scemqa": Corpus(
        "scemqa/Multiple_Choice/multiple_choice.json",
        "options_in_text=1&problem=Question&answer=Answer (final answer highlighted)&answer_format=letter"
        "&image=ImagePath&subject=_key&skill=_key",
    ),
    "gaokao": Corpus(
        "gaokao-mm/Data",
        "records=example&options_in_text=1&image=picture&subject=_file"
        "&subjects=Biology:science,Chemistry:science,Physics:science,Math:math&skill=_file&image_options=labelled:4",
    ),
}


def build(home: Path, sources: list[str], timeout: float = 3600) -> tuple[int, str]:
    """The real build of ``sources`` into ``home`` (a process of its own); exit code and output."""
    command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home), "--select", SELECTION, "--quiet"]
    for source in sources:
        command += ["--source", source]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def normalized_stem(text: str | None) -> str:
    return "".join(unicodedata.normalize("NFKC", text or "").casefold().split())


def _rows(home: DataHome, sql: str) -> list[tuple]:
    return run_query(home, sql).rows


def measure(home: DataHome) -> dict:
    """The figures of one built home (see the module docstring)."""
    raw = {
        (source, key): (problem, choices, answer)
        for source, key, problem, choices, answer in _rows(
            home, "SELECT source, source_key, problem, choices, answer_idx FROM raw_questions"
        )
    }
    quarantine = _rows(home, "SELECT stage, reason, count(*) FROM quarantine GROUP BY ALL ORDER BY 3 DESC, 1, 2")
    imported_out = sum(n for stage, _, n in quarantine if stage == "import")
    questions = _rows(
        home,
        "SELECT question_id, source, source_key, problem, answer_idx, shuffle, split, duplicate_group, problem_image "
        "FROM questions ORDER BY question_id",
    )
    options: dict[str, list[tuple[int, str | None, int]]] = defaultdict(list)
    for qid, position, text, original in _rows(
        home, "SELECT question_id, position, text, original_position FROM choices ORDER BY question_id, position"
    ):
        options[qid].append((position, text, original))

    texts_with_math = damaged = 0
    damaged_examples = []
    expected_order: Counter = Counter()
    kept_as_expected: Counter = Counter()
    order_violations = []
    for qid, source, key, problem, answer, shuffle, *_ in questions:
        raw_problem, raw_choices, raw_answer = raw[(source, key)]
        pairs = [(raw_problem, problem)]
        pairs += [((raw_choices or [])[original] if original is not None else None, text) for _, text, original in options[qid]]
        for before, after in pairs:
            if before and extract_math(before):
                texts_with_math += 1
                lost = changed_math(before, after or "")
                if lost:
                    damaged += 1
                    if len(damaged_examples) < 3:
                        damaged_examples.append(f"{key}: {lost[0]!r} not in {after!r}")
        expected = option_order(raw_choices) if raw_choices is not None else "shuffled"
        if expected.startswith(KEPT_ORDER_PREFIX):
            expected_order[expected] += 1
            identity = all(position == original for position, _, original in options[qid])
            if shuffle == expected and identity and answer == raw_answer:
                kept_as_expected[expected] += 1
            else:
                order_violations.append(key)
        elif shuffle != expected:
            order_violations.append(key)

    group_splits: dict[str, set[str]] = defaultdict(set)
    figure_stem_splits: dict[tuple[str, str], set[str]] = defaultdict(set)
    group_sizes: Counter = Counter()
    for _, _, _, problem, _, _, split, group, image in questions:
        group_splits[group].add(split)
        group_sizes[group] += 1
        if image:
            figure_stem_splits[(image, normalized_stem(problem))].add(split)
    duplicates = dict(_rows(home, "SELECT kind, count(*) FROM duplicates GROUP BY 1 ORDER BY 1"))
    return {
        "records": len(raw) + imported_out,
        "kept": len(questions),
        "quarantined": [(f"{stage}: {reason}", n) for stage, reason, n in quarantine],
        "duplicates": duplicates,
        "families": sum(1 for n in group_sizes.values() if n > 1),
        "family_members": sum(n for n in group_sizes.values() if n > 1),
        "splits": dict(Counter(row[6] for row in questions)),
        "texts_with_math": texts_with_math,
        "math_damaged": damaged,
        "math_damaged_examples": damaged_examples,
        "kept_order_expected": dict(expected_order),
        "kept_order": dict(kept_as_expected),
        "order_violations": len(order_violations),
        "order_violation_examples": order_violations[:3],
        "families_across_splits": sum(1 for splits in group_splits.values() if len(splits) > 1),
        "figure_stems_across_splits": sum(1 for splits in figure_stem_splits.values() if len(splits) > 1),
    }


def problems(figures: dict) -> list[str]:
    """What fails the benchmark for one corpus (empty: passed)."""
    found = []
    if figures.get("build_exit", 0) != 0:
        found.append(f"build exited {figures['build_exit']}")
    for name in ("math_damaged", "order_violations", "families_across_splits", "figure_stems_across_splits"):
        if figures.get(name):
            found.append(f"{name.replace('_', ' ')} {figures[name]}")
    return found


def _reasons(items: list[tuple[str, int]]) -> list[str]:
    return [f"{n} {reason}" for reason, n in items] or ["0"]


def render(results: dict[str, dict]) -> str:
    """One column per corpus; multi-valued cells take one line each."""
    names = list(results)
    kinds = sorted({kind for figures in results.values() for kind in figures["kept_order_expected"]})

    def kept_order(figures: dict) -> list[str]:
        return [
            f"{figures['kept_order'].get(kind, 0)}/{figures['kept_order_expected'].get(kind, 0)} "
            f"{kind.removeprefix(KEPT_ORDER_PREFIX)}"
            for kind in kinds
        ] or ["0"]

    rows: list[tuple[str, list[list[str]]]] = [
        ("build exit code", [[str(f["build_exit"])] for f in results.values()]),
        ("build seconds", [[f"{f['build_seconds']:.0f}"] for f in results.values()]),
        ("records", [[str(f["records"])] for f in results.values()]),
        ("kept", [[str(f["kept"])] for f in results.values()]),
        ("splits (train/valid/test)",
         [[f"{f['splits'].get('train', 0)}/{f['splits'].get('valid', 0)}/{f['splits'].get('test', 0)}"] for f in results.values()]),
        ("quarantined by reason", [_reasons(f["quarantined"]) for f in results.values()]),
        ("duplicates removed by kind",
         [[", ".join(f"{kind} {n}" for kind, n in f["duplicates"].items()) or "0"] for f in results.values()]),
        ("families of >1 kept question", [[f"{f['families']} ({f['family_members']} questions)"] for f in results.values()]),
        ("texts with math checked", [[str(f["texts_with_math"])] for f in results.values()]),
        ("math damaged (must be 0)", [[str(f["math_damaged"])] for f in results.values()]),
        ("kept in order / expected", [kept_order(f) for f in results.values()]),
        ("order violations (must be 0)", [[str(f["order_violations"])] for f in results.values()]),
        ("families across splits (must be 0)", [[str(f["families_across_splits"])] for f in results.values()]),
        ("figure+stem across splits (must be 0)", [[str(f["figure_stems_across_splits"])] for f in results.values()]),
    ]
    label_width = max(len(label) for label, _ in rows)
    widths = [max(len(name), *(len(line) for _, cells in rows for line in cells[i])) for i, name in enumerate(names)]
    lines = [" | ".join([" " * label_width, *(name.ljust(w) for name, w in zip(names, widths))]).rstrip()]
    lines.append("-+-".join(["-" * label_width, *("-" * w for w in widths)]))
    for label, cells in rows:
        for j in range(max(len(c) for c in cells)):
            parts = [(label if j == 0 else "").ljust(label_width)]
            parts += [(cell[j] if j < len(cell) else "").ljust(w) for cell, w in zip(cells, widths)]
            lines.append(" | ".join(parts).rstrip())
    return "\n".join(lines)


def run(names: list[str], homes: Path, reuse: bool = False, corpora_dir: str = CORPORA_DIR) -> dict[str, dict]:
    results = {}
    for name in names:
        home = homes / name
        code, output, seconds = 0, "", 0.0
        if not (reuse and (home / "warehouse.duckdb").exists()):
            started = time.perf_counter()
            code, output = build(home, [CORPORA[name].spec(corpora_dir)])
            seconds = time.perf_counter() - started
        figures = measure(DataHome(home)) if (home / "warehouse.duckdb").exists() else None
        if figures is None:
            raise SystemExit(f"{name}: the build left no warehouse (exit {code}):\n{output[-3000:]}")
        figures.update(build_exit=code, build_seconds=seconds, home=str(home),
                       build_failures=[line.strip() for line in output.splitlines() if " failed: " in line])
        results[name] = figures
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=[*CORPORA, "all"], default="all")
    parser.add_argument("--homes", help="folder of the data homes, one per corpus, kept (default: a temporary folder, removed)")
    parser.add_argument("--reuse", action="store_true", help="measure the homes under --homes without building again")
    parser.add_argument("--corpora-dir", default=CORPORA_DIR, help="the corpora folder, from the repository root")
    args = parser.parse_args(argv)
    names = list(CORPORA) if args.corpus == "all" else [args.corpus]
    homes = Path(args.homes).resolve() if args.homes else Path(tempfile.mkdtemp(prefix="stemforge-corpora-"))
    for name in names:
        print(f"{name}: {CORPORA[name].spec(args.corpora_dir)}", flush=True)
    print(f"data homes under {homes}", flush=True)
    try:
        results = run(names, homes, args.reuse, args.corpora_dir)
    finally:
        if not args.homes:
            shutil.rmtree(homes, ignore_errors=True)
    print()
    print(render(results))
    failed = False
    for name, figures in results.items():
        for line in figures["build_failures"]:
            print(f"{name}: {line}")
        for example in figures["math_damaged_examples"]:
            print(f"{name}: math damaged: {example}")
        for example in figures["order_violation_examples"]:
            print(f"{name}: order violation: {example}")
        found = problems(figures)
        failed |= bool(found)
        print(f"{name}: {'FAILED: ' + '; '.join(found) if found else 'passed'}")
    print(f"corpora: {'FAILED' if failed else 'passed'} (math damaged 0, order violations 0, families across splits 0)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
