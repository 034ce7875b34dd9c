"""Cleaning quality on every real corpus of ../shared/corpora, whole, against a committed baseline.

Each corpus is built into a data home of its own by the real build (``stemforge build``,
asset groups ingest, clean and dataset) from the README's source spec (OpenDSA's pages are
crawled from a loopback server over the folder), and measured from that home's warehouse:

* records in, kept questions, quarantined records by stage and reason, duplicates removed by
  kind (``exact`` / ``near``), and records lost (in ``raw_questions`` but neither kept, nor
  quarantined, nor a duplicate: must be 0);
* math damaged: texts (a problem, or one option) whose TeX math as imported
  (``raw_questions``) is not all, unchanged, in the final text (``questions.problem``,
  ``choices.text`` matched through ``original_position``), by ``pipelines.clean.latex.convert.changed_math``;
* formulas cut from an expression: formulas the build wrote (not TeX math of the import) that
  an operator with an operand beyond it, a sign glued to them, a power or index just before or
  after them, a math symbol beside them (``∑``), an operator glued to the bracket they fill
  (``/(\\( 2 \\pi d \\))``) or a dot with no space still joins to the text outside (``cut_formulas``: ``log_2 \\( 8=3
  \\)``, ``\\( I=0.5 \\mathrm{~kg} \\).m2``);
* texts a reader cannot read as written: final texts (a problem, an option) still holding HTML
  that a browser would show otherwise (``unread_markup``: ``x<sup>2</sup>``, ``&quot;``), and
  texts holding a private-use character (Word's Symbol font: ``\\uf061``) or U+FFFD;
* options changed: final option texts whose words and numbers differ from the imported
  option's (``signature``: NFKC, case-folded, letters and digits only, TeX commands but Greek
  letters dropped, so conversion to LaTeX is no change), and keys changed: questions whose
  final key is not the imported key's text by the same measure;
* the form of the options: options that end in a separator (``;`` ``,`` ``|`` and full-width
  ones) or start with a label, kept questions with two identical options, options holding
  another option's label (``... ; C. ...``);
* kept order: questions whose imported options are figure labels or refer to other options
  (``pipelines.dataset.option_order``), how many the warehouse records as kept in order
  (``questions.shuffle``), and order violations: a recorded reason that differs, a moved
  option, or a key that no longer names the imported answer's position;
* families across splits: ``duplicate_group`` values in more than one split, and (figure
  image, normalized stem) pairs in more than one split (stem: NFKC, case-folded, without
  white space).

    .venv/bin/python bench/corpus_quality.py [--corpus NAME|all] [--homes DIR] [--reuse]
        [--baseline bench/corpus_baseline.json] [--update-baseline --reason "why"]

``--baseline`` compares every figure of ``BASELINE_FIGURES`` with the committed baseline and
lists each one that got worse; ``--update-baseline`` writes today's figures into it, and needs
``--reason`` (kept in the file's history with the figures that changed).

Exit status 1 when a build fails, any corpus has records lost, math damaged, order violations
or families across splits, or (with ``--baseline``) a figure got worse than the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipelines.store.home import DataHome  # noqa: E402
from pipelines.clean.latex.convert import ACCENT_MARKS, changed_math, extract_math  # noqa: E402
from pipelines.dataset.option_order import KEPT_ORDER_PREFIX, option_order  # noqa: E402
from pipelines.ingest.html_dom import PictureInMarkup, markup_text  # noqa: E402
from pipelines.store.warehouse import run_query  # noqa: E402

CORPORA_DIR = "../shared/corpora"  # from the repository root, as in the README
SELECTION = "group:ingest or group:clean or group:dataset"
BASELINE = ROOT / "bench" / "corpus_baseline.json"


@dataclass(frozen=True)
class Corpus:
    path: str  # inside the corpora folder
    mapping: str = ""
    layout: str | None = None  # a site crawled from loopback with this shipped layout

    def spec(self, corpora_dir: str = CORPORA_DIR, path: str | None = None, base_url: str | None = None) -> str:
        if self.layout:
            return f"{base_url}?layout={self.layout}"
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
    "wemath": Corpus(
        "wemath/data/testmini.json",
        "problem=question&options_in_text=option&answer=answer&answer_format=letter&image=image_path"
        "&subject='math'&skill=knowledge concept",
    ),
    "opendsa": Corpus("opendsa-html", layout="opendsa"),
}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """A static HTTP server on loopback over ``folder``; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def build(home: Path, sources: list[str], timeout: float = 3600) -> tuple[int, str]:
    """The real build of ``sources`` into ``home`` (a process of its own); exit code and output."""
    command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home), "--select", SELECTION, "--quiet"]
    for source in sources:
        command += ["--source", source]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def normalized_stem(text: str | None) -> str:
    return "".join(unicodedata.normalize("NFKC", text or "").casefold().split())


_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
# TeX's names of the Greek letters ("alpha", "Delta") -> the letter
_GREEK = {
    (name.split()[-1].casefold() if " SMALL " in name else name.split()[-1].capitalize()): ch
    for ch in map(chr, range(0x391, 0x3CA))
    if (name := unicodedata.name(ch, "")).startswith("GREEK") and "FINAL" not in name
}


# TeX commands that are written words in plain text (sin x, log 2)
_WORD_COMMANDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp lim max min sup inf det gcd deg mod".split())


# a letter under an accent written in TeX (``\\hat{y}``) reads as the accented letter (ŷ)
_TEX_ACCENT = re.compile(r"\\(" + "|".join(ACCENT_MARKS) + r")\s*\{\s*([A-Za-z])\s*\}")


def signature(text: str | None) -> str:
    """The words and numbers of a text: NFKC, TeX commands dropped (Greek letters read as the
    letter, an accent as the accented letter), case-folded, every character that is not a letter or digit dropped. Conversion to
    LaTeX leaves it as it was; a lost word or digit, or two options run together, do not."""
    text = _TEX_ACCENT.sub(lambda m: m.group(2) + ACCENT_MARKS[m.group(1)], text or "")
    text = _TEX_COMMAND.sub(lambda m: _GREEK.get(m.group(1), m.group(1) if m.group(1) in _WORD_COMMANDS else " "),
                            unicodedata.normalize("NFKC", text))
    return "".join(ch for ch in text.casefold() if ch.isalnum())


_SEPARATOR_END = re.compile(r"[;,|；，、]\s*$")
_LABEL_START = re.compile(r"^\s*(?:[(（][A-HＡ-Ｈ][)）]|[A-HＡ-Ｈ][.．:：、)）])")
# another option's label, with its text, inside an option: "... ; C. There ...", "...(C) no ..." after a
# separator or a sentence's end (a letter ending the option, "∠AB;C." or "shape ;B.", is its text)
_LABEL_INSIDE = re.compile(r"(?:[;；,，|]|[.。?？!！]\s)\s*(?:[(（]([A-HＡ-Ｈ])[)）]|([A-HＡ-Ｈ])[.．:：、])\s+\S")


def option_form(texts: list[str | None], originals: list[int] | None = None) -> dict[str, int]:
    """The form faults of one question's option texts, in their final order; ``originals`` are
    their imported positions (default: the final ones). See the module docstring."""
    originals = list(range(len(texts))) if originals is None else originals
    own_label = sum(bool(t and (m := _LABEL_START.match(t)) and _label_letter(m.group()) == chr(ord("A") + i))
                    for t, i in zip(texts, originals))
    present = [t for _, t in sorted(zip(originals, texts)) if t]
    letters = {chr(ord("A") + i) for i in range(len(texts))}
    holding = 0
    for text in present:
        for match in _LABEL_INSIDE.finditer(text):
            if math_free(text, match.start()) and unicodedata.normalize("NFKC", match.group(1) or match.group(2)) in letters:
                holding += 1
                break
    keys = [" ".join(t.split()) for t in present]  # as import's "identical options" reads them: $Mg$ is not $mg$
    # a separator left behind: every option but the last ends in the same one (code that ends
    # every option in ";" is no list of separated options)
    ends = [_SEPARATOR_END.search(t) for t in present]
    separators = {m.group().strip() for text, m in zip(present[:-1], ends[:-1]) if m and math_free(text, m.start())}
    left_behind = len(present) > 1 and all(ends[:-1]) and len(separators) == 1 and not ends[-1]
    return {
        "separator_ends": len(present) - 1 if left_behind else 0,
        "label_starts": own_label if own_label > 1 else 0,  # one is a coincidence ("B. musculus" at B)
        "holding_labels": holding,
        "identical": int(len(keys) != len(set(keys))),
    }


def _label_letter(label: str) -> str:
    return next(ch for ch in unicodedata.normalize("NFKC", label) if ch.isalpha())


# an operator that joins what stands on its two sides into one expression, and what an operand
# next to it starts (or ends) with: a formula of ours beside one is a piece of a longer expression
_JOINING = r"[=+*×÷·<>≤≥≠≈±^]"
_CUT_BEFORE = re.compile(rf"(?:[^\W_]|[)\]°%′]|\\\))\s*{_JOINING}\s*$|[-−+±=]$|[^\W_]\.$|[\^_][^\W_]+\s*$|[=+*×÷·<>≤≥≠≈±^/]\($")
_CUT_AFTER = re.compile(rf"^\s*{_JOINING}\s*(?:[^\W_]|\\\(|[√∠△∞])|^\.[^\W_]|^\^")


def _beside_math_symbol(before: str, after: str) -> bool:
    """A math symbol that is not an ASCII operator (∑, ∫, ∪, ∈) right beside a formula: its operand."""
    return any(ch and unicodedata.category(ch) == "Sm" and ch not in "=<>+|~^-" for ch in (before.rstrip()[-1:], after.lstrip()[:1]))


def cut_formulas(before: str, after: str) -> list[str]:
    """The formulas the build wrote into ``after`` (not TeX math of the imported ``before``) that are
    a piece of a longer expression: an operator joins them to an operand outside (``log_2 \\( 8=3
    \\)``), a sign is left outside (``-\\( 0.64 x \\)``) or a dot with no space joins them to a word
    (``\\( 0.5 \\mathrm{~kg} \\).m2``)."""
    from pipelines.tex_math import find_tex_math

    imported = Counter(extract_math(before))
    cut = []
    for region in find_tex_math(after):
        tex = region.inner.strip()
        if imported[tex]:
            imported[tex] -= 1
            continue
        left, right = after[: region.start], after[region.end :]
        if _CUT_BEFORE.search(left) or _CUT_AFTER.search(right) or _beside_math_symbol(left, right):
            cut.append(after[max(0, region.start - 12) : region.end + 12])
    return cut


def math_free(text: str, position: int) -> bool:
    """Whether ``position`` of ``text`` lies outside its TeX math."""
    from pipelines.tex_math import find_tex_math

    return not any(m.start <= position < m.end for m in find_tex_math(text))


_UNREADABLE = re.compile("[\ue000-\uf8ff\ufffd]")  # the private use area, and the replacement character


def unread_markup(text: str | None) -> bool:
    """``text`` still holds HTML that a reader would see read (``markup_text`` changes it)."""
    if not text:
        return False
    try:
        return markup_text(text) != text
    except PictureInMarkup:
        return True


def unreadable(text: str | None) -> bool:
    """``text`` holds a character no reader can read: a private-use one (a font's own, such as
    Word's Symbol font) or U+FFFD, what a decoder leaves of bytes it could not read."""
    return bool(text) and _UNREADABLE.search(text) is not None


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
    accounted = {(source, key) for _, source, key, *_ in questions}
    accounted |= set(_rows(home, "SELECT source, source_key FROM quarantine WHERE stage <> 'import'"))
    accounted |= set(_rows(home, "SELECT source, source_key FROM duplicates"))
    lost = sorted(key for key in raw if key not in accounted)

    texts_with_math = damaged = options_changed = keys_changed = formulas_cut = markup_left = unreadable_texts = 0
    reading_examples = []
    form: Counter = Counter()
    damaged_examples, changed_examples, cut_examples, form_examples = [], [], [], defaultdict(list)
    expected_order: Counter = Counter()
    kept_as_expected: Counter = Counter()
    order_violations = []
    for qid, source, key, problem, answer, shuffle, *_ in questions:
        raw_problem, raw_choices, raw_answer = raw[(source, key)]
        pairs = [(raw_problem, problem)]
        pairs += [(raw_choices[original] if raw_choices is not None and original is not None else None, text)
                  for _, text, original in options[qid]]
        for before, after in pairs:
            markup, unread = unread_markup(after), unreadable(after)
            markup_left += markup
            unreadable_texts += unread
            if (markup or unread) and len(reading_examples) < 3:
                reading_examples.append(f"{key}: {after!r}")
            for piece in cut_formulas(before or "", after or ""):
                formulas_cut += 1
                if len(cut_examples) < 3:
                    cut_examples.append(f"{key}: {piece!r}")
            if before and extract_math(before):
                texts_with_math += 1
                lost_math = changed_math(before, after or "")
                if lost_math:
                    damaged += 1
                    if len(damaged_examples) < 3:
                        damaged_examples.append(f"{key}: {lost_math[0]!r} not in {after!r}")
        for (before, after), (_, _, original) in zip(pairs[1:], options[qid]):
            if before is not None and signature(before) != signature(after):
                options_changed += 1
                if original == raw_answer:
                    keys_changed += 1
                if len(changed_examples) < 3:
                    changed_examples.append(f"{key}: {before!r} -> {after!r}")
        faults = option_form([text for _, text, _ in options[qid]], [original for _, _, original in options[qid]])
        form.update(faults)
        for name, n in faults.items():
            if n and len(form_examples[name]) < 3:
                form_examples[name].append(f"{key}: {[text for _, text, _ in options[qid]]!r}")
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
        "quarantined_total": sum(n for stage, _, n in quarantine if stage != "crawl"),
        "duplicates": duplicates,
        "lost": len(lost),
        "lost_examples": [f"{source_key}" for _, source_key in lost[:3]],
        "families": sum(1 for n in group_sizes.values() if n > 1),
        "family_members": sum(n for n in group_sizes.values() if n > 1),
        "splits": dict(Counter(row[6] for row in questions)),
        "texts_with_math": texts_with_math,
        "math_damaged": damaged,
        "math_damaged_examples": damaged_examples,
        "formulas_cut": formulas_cut,
        "formulas_cut_examples": cut_examples,
        "markup_left": markup_left,
        "unreadable_texts": unreadable_texts,
        "reading_examples": reading_examples,
        "options_changed": options_changed,
        "keys_changed": keys_changed,
        "options_changed_examples": changed_examples,
        "separator_ends": form["separator_ends"],
        "label_starts": form["label_starts"],
        "duplicate_options": form["identical"],
        "options_holding_labels": form["holding_labels"],
        "option_form_examples": dict(form_examples),
        "kept_order_expected": dict(expected_order),
        "kept_order": dict(kept_as_expected),
        "order_violations": len(order_violations),
        "order_violation_examples": order_violations[:3],
        "families_across_splits": sum(1 for splits in group_splits.values() if len(splits) > 1),
        "figure_stems_across_splits": sum(1 for splits in figure_stem_splits.values() if len(splits) > 1),
    }


# figure -> which way is better; the baseline test fails when one moves the other way
BASELINE_FIGURES = {
    "build_exit": "lower",
    "records": "higher",
    "kept": "higher",
    "lost": "lower",
    "math_damaged": "lower",
    "formulas_cut": "lower",
    "markup_left": "lower",
    "unreadable_texts": "lower",
    "options_changed": "lower",
    "keys_changed": "lower",
    "separator_ends": "lower",
    "label_starts": "lower",
    "duplicate_options": "lower",
    "options_holding_labels": "lower",
    "order_violations": "lower",
    "families_across_splits": "lower",
    "figure_stems_across_splits": "lower",
}


def baseline_figures(figures: dict) -> dict:
    """The figures of one corpus the baseline keeps (plus quarantines and duplicates by reason, for the reader)."""
    kept = {name: figures[name] for name in BASELINE_FIGURES}
    kept["quarantined"] = dict(figures["quarantined"])
    kept["duplicates"] = dict(figures["duplicates"])
    return kept


def regressions(baseline: dict[str, dict], results: dict[str, dict]) -> list[str]:
    """Every baseline figure of a measured corpus that got worse, as ``corpus: figure was -> now``."""
    found = []
    for name, figures in results.items():
        before = baseline.get(name)
        if before is None:
            found.append(f"{name}: not in the baseline (add it with --update-baseline)")
            continue
        for figure, better in BASELINE_FIGURES.items():
            was, now = before.get(figure), figures.get(figure)
            if was is None or now is None:
                continue
            if (now < was) if better == "higher" else (now > was):
                found.append(f"{name}: {figure.replace('_', ' ')} {was} -> {now}")
    return found


def update_baseline(path: Path, results: dict[str, dict], reason: str) -> list[str]:
    """Write ``results`` into the baseline file with ``reason`` in its history; the changed figures."""
    stored = json.loads(path.read_text()) if path.exists() else {"corpora": {}, "history": []}
    changed = []
    for name, figures in results.items():
        new = baseline_figures(figures)
        old = stored["corpora"].get(name, {})
        changed += [f"{name}: {k} {old.get(k)} -> {v}" for k, v in new.items() if old.get(k) != v]
        stored["corpora"][name] = new
    stored["history"].append({"date": dt.date.today().isoformat(), "reason": reason, "changed": changed})
    path.write_text(json.dumps(stored, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    return changed


def problems(figures: dict) -> list[str]:
    """What fails the benchmark for one corpus (empty: passed)."""
    found = []
    if figures.get("build_exit", 0) != 0:
        found.append(f"build exited {figures['build_exit']}")
    for name in ("lost", "math_damaged", "order_violations", "families_across_splits", "figure_stems_across_splits"):
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
        ("records lost (must be 0)", [[str(f["lost"])] for f in results.values()]),
        ("duplicates removed by kind",
         [[", ".join(f"{kind} {n}" for kind, n in f["duplicates"].items()) or "0"] for f in results.values()]),
        ("families of >1 kept question", [[f"{f['families']} ({f['family_members']} questions)"] for f in results.values()]),
        ("texts with math checked", [[str(f["texts_with_math"])] for f in results.values()]),
        ("math damaged (must be 0)", [[str(f["math_damaged"])] for f in results.values()]),
        ("formulas cut from an expression", [[str(f["formulas_cut"])] for f in results.values()]),
        ("texts with HTML left unread", [[str(f["markup_left"])] for f in results.values()]),
        ("texts with unreadable characters", [[str(f["unreadable_texts"])] for f in results.values()]),
        ("options changed (words, numbers)", [[str(f["options_changed"])] for f in results.values()]),
        ("keys changed", [[str(f["keys_changed"])] for f in results.values()]),
        ("options ending in a separator", [[str(f["separator_ends"])] for f in results.values()]),
        ("options starting with a label", [[str(f["label_starts"])] for f in results.values()]),
        ("questions with identical options", [[str(f["duplicate_options"])] for f in results.values()]),
        ("options holding another's label", [[str(f["options_holding_labels"])] for f in results.values()]),
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
        corpus = CORPORA[name]
        home = homes / name
        code, output, seconds = 0, "", 0.0
        if not (reuse and (home / "warehouse.duckdb").exists()):
            with contextlib.ExitStack() as stack:
                base = stack.enter_context(served(ROOT / corpora_dir / corpus.path)) if corpus.layout else None
                started = time.perf_counter()
                code, output = build(home, [corpus.spec(corpora_dir, base_url=base)])
                seconds = time.perf_counter() - started
        figures = measure(DataHome(home)) if (home / "warehouse.duckdb").exists() else None
        if figures is None:
            # a corpus that builds nothing is a figure too: every record is lost to the user
            figures = {**{figure: 0 for figure in BASELINE_FIGURES}, "quarantined": [], "duplicates": {}, "splits": {},
                       "families": 0, "family_members": 0, "texts_with_math": 0, "kept_order_expected": {},
                       "kept_order": {}, "no_warehouse": output[-2000:]}
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
    parser.add_argument("--baseline", type=Path, help="compare with this baseline file (e.g. bench/corpus_baseline.json)")
    parser.add_argument("--update-baseline", action="store_true", help="write today's figures into --baseline (default: bench/corpus_baseline.json)")
    parser.add_argument("--reason", default="", help="why the baseline changes (required with --update-baseline)")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON to this file")
    args = parser.parse_args(argv)
    if args.update_baseline and not args.reason.strip():
        parser.error("--update-baseline needs --reason: say why the figures changed")
    names = list(CORPORA) if args.corpus == "all" else [args.corpus]
    homes = Path(args.homes).resolve() if args.homes else Path(tempfile.mkdtemp(prefix="stemforge-corpora-"))
    for name in names:
        corpus = CORPORA[name]
        print(f"{name}: {corpus.spec(args.corpora_dir, base_url='http://127.0.0.1:PORT/') if corpus.layout else corpus.spec(args.corpora_dir)}", flush=True)
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
        if "no_warehouse" in figures:
            print(f"{name}: the build left no warehouse (exit {figures['build_exit']}): {figures['no_warehouse'][-500:]}")
        for line in figures["build_failures"]:
            print(f"{name}: {line}")
        for key in ("lost_examples", "math_damaged_examples", "formulas_cut_examples", "order_violation_examples", "options_changed_examples"):
            for example in figures.get(key, []):
                print(f"{name}: {key.removesuffix('_examples').replace('_', ' ')}: {example}")
        for form, examples in figures.get("option_form_examples", {}).items():
            for example in examples:
                print(f"{name}: options {form.replace('_', ' ')}: {example}")
        found = problems(figures)
        failed |= bool(found)
        print(f"{name}: {'FAILED: ' + '; '.join(found) if found else 'passed'}")
    print(f"corpora: {'FAILED' if failed else 'passed'} (records lost 0, math damaged 0, order violations 0, families across splits 0)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n")
    baseline_path = args.baseline or (BASELINE if args.update_baseline else None)
    if baseline_path is not None:
        stored = json.loads(baseline_path.read_text())["corpora"] if baseline_path.exists() else {}
        worse = regressions(stored, results)
        for line in worse:
            print(f"worse than the baseline: {line}")
        if args.update_baseline:
            for line in update_baseline(baseline_path, results, args.reason):
                print(f"baseline: {line}")
        elif worse:
            failed = True
        print(f"baseline {baseline_path}: {len(worse)} figure(s) worse")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
