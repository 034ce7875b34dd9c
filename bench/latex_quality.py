"""How well the offline LaTeX converter reproduces the demo site's planted formulas.

Usage::

    python bench/latex_quality.py [--seed 0] [--questions 20000] [--show 10]
    python bench/latex_quality.py --truth FILE.jsonl

Every text of every present question (the problem and each text option) is converted with
``pipelines.clean.latex.convert.convert_text`` and compared with the generator's truth:

Counts are per occurrence (every question and option of the site); each distinct text is
converted once.

- planted formulas matched: a truth (span, latex) counts when the converter produced a
  formula for the same span whose LaTeX equals the truth once ALL white space is removed
  (for a span the page already wrote in TeX: when the converter kept that TeX);
- texts with math converted exactly: the whole converted text equals the truth text
  (``\\( latex \\)`` applied), white space removed;
- texts without math changed: must be 0 (prose is never touched);
- spurious formulas: produced where the truth has none;
- validation failures reported by the converter.

``--truth`` reads JSONL instead of the generator: one text per line, ``{"text": ...,
"formulas": [[span, latex], ...]}`` (``problem`` is accepted for ``text``).
Exit status 1 when the 98% target or the no-change rule is missed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.clean.latex.convert import convert_text  # noqa: E402

_WS = re.compile(r"\s+")


def _squash(text: str) -> str:
    return _WS.sub("", text)


def _truth_from_site(seed: int, questions: int):
    from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig

    site = DemoSite(SiteConfig(seed=seed, questions=questions))
    for i in site.indices():
        q = site.question(i)
        yield q.problem, tuple(q.formulas), q.problem_latex
        if q.choices is not None:
            for text, formulas, text_latex in zip(q.choices, q.choice_formulas, q.choices_latex):
                yield text, tuple(formulas), text_latex


def _truth_from_file(path: Path):
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text = row["text"] if "text" in row else row["problem"]
                formulas = tuple((span, latex) for span, latex in row.get("formulas") or [])
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{number}: not a truth row ({type(exc).__name__}: {exc})")
            expected = text
            for span, latex in formulas:
                expected = expected.replace(span, "\0" + latex + "\1", 1)
            yield text, formulas, expected.replace("\0", "\\( ").replace("\1", " \\)")


def measure(rows) -> dict:
    planted = matched = math_texts = math_exact = plain_texts = plain_changed = 0
    spurious = failures = 0
    misses: list[tuple[str, str, str]] = []
    changed_plain: list[tuple[str, str]] = []
    converted: dict[str, object] = {}  # templated quiz texts repeat: convert each once
    for text, formulas, text_latex in rows:
        result = converted.get(text)
        if result is None:
            result = converted[text] = convert_text(text)
        failures += result.error is not None
        produced = {}
        # a formula the page already wrote in TeX is matched when the converter kept its TeX
        for span, latex in result.formulas + result.tex_math:
            produced.setdefault(span, []).append(_squash(latex))
        truth_spans = {span for span, _ in formulas}
        spurious += sum(len(v) for span, v in produced.items() if span not in truth_spans)
        if formulas:
            math_texts += 1
            math_exact += _squash(result.text) == _squash(text_latex)
            for span, latex in formulas:
                planted += 1
                candidates = produced.get(span, [])
                if _squash(latex) in candidates:
                    matched += 1
                    candidates.remove(_squash(latex))
                else:
                    got = dict(result.formulas).get(span)
                    if len(misses) < 1000:
                        misses.append((span, latex, got if got is not None else "(not converted)"))
        else:
            plain_texts += 1
            if result.text != text:
                plain_changed += 1
                if len(changed_plain) < 1000:
                    changed_plain.append((text, result.text))
    return {
        "planted_formulas": planted, "matched": matched,
        "exact_match": matched / planted if planted else 1.0,
        "texts_with_math": math_texts, "texts_exact": math_exact,
        "texts_without_math": plain_texts, "texts_without_math_changed": plain_changed,
        "spurious_formulas": spurious, "validation_failures": failures,
        "distinct_texts": len(converted), "misses": misses, "changed_plain": changed_plain,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--questions", type=int, default=20000)
    parser.add_argument("--truth", type=Path, help="JSONL truth file instead of the demo generator")
    parser.add_argument("--show", type=int, default=10, help="misses / changed prose to print")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    rows = _truth_from_file(args.truth) if args.truth else _truth_from_site(args.seed, args.questions)
    stats = measure(rows)
    elapsed = time.perf_counter() - started

    source = str(args.truth) if args.truth else f"demo site seed={args.seed} questions={args.questions}"
    print(f"source: {source}  ({stats['distinct_texts']} distinct texts, {elapsed:.1f}s)")
    print(f"planted formulas matched (white space removed): {stats['matched']}/{stats['planted_formulas']}"
          f" = {100 * stats['exact_match']:.2f}%")
    print(f"texts with math converted exactly: {stats['texts_exact']}/{stats['texts_with_math']}")
    print(f"texts without math changed: {stats['texts_without_math_changed']}/{stats['texts_without_math']}")
    print(f"spurious formulas: {stats['spurious_formulas']}   validation failures: {stats['validation_failures']}")
    for span, latex, got in stats["misses"][: args.show]:
        print(f"  miss: {span!r}: truth {latex!r}, got {got!r}")
    for text, converted in stats["changed_plain"][: args.show]:
        print(f"  prose changed: {text!r} -> {converted!r}")
    ok = stats["exact_match"] >= 0.98 and stats["texts_without_math_changed"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
