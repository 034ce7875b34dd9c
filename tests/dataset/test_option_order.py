"""Options whose order carries meaning (figure labels, references to other options) keep it."""

import glob
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from pipelines.dataset.option_order import (
    FIGURE_LABELS,
    REFERS_TO_OPTIONS,
    SHUFFLED,
    label_index,
    option_order,
    sequence_scheme,
)
from pipelines.dataset.shuffle import (
    answer_position_uniformity,
    choices_table,
    option_permutation,
    shuffle_options,
)
from support.corpora import CORPORA



@pytest.mark.parametrize(
    "options",
    [
        ["A", "B", "C", "D"],
        ["A", "B", "C", "D", "E"],
        ["(A)", "(B)", "(C)", "(D)"],
        ["A.", "B.", "C."],
        ["A)", "B)", "C)"],
        ["[A]", "[B]"],
        ["a", "b", "c", "d", "e"],
        ["(a)", "(b)", "(c)"],
        ["Ａ", "Ｂ", "Ｃ", "Ｄ"],
        ["Ａ．", "Ｂ．", "Ｃ．", "Ｄ．"],
        ["（A）", "（B）", "（C）"],
        ["I", "II", "III", "IV"],
        ["i", "ii", "iii"],
        ["Ⅰ", "Ⅱ", "Ⅲ"],
        ["1", "2", "3", "4", "5"],
        ["(1)", "(2)", "(3)"],
        ["①", "②", "③", "④"],
        ["甲", "乙", "丙", "丁"],
        [" A ", "B\u00a0", "C"],
        ["A", "$B$", "$\\mathrm{C}$", "\\( D \\)"],
    ],
)
def test_every_label_style_keeps_its_order(options):
    assert option_order(options) == FIGURE_LABELS
    scheme = sequence_scheme(options)
    assert [label_index(o, scheme) for o in options] == list(range(len(options)))


@pytest.mark.parametrize(
    "options",
    [
        ["P", "Q", "R"],                 # points of a graph: real content
        ["C", "N", "O"],                 # chemical elements
        ["B", "A", "C", "D"],            # labels, but not in position order
        ["A", "B", "AB", "O"],           # blood groups
        ["A", "C", "E", "G"],            # notes, skipping
        ["a", "c"],
        ["2", "3", "4", "5"],            # numbers that do not start at 1
        ["1", "2", "4", "8"],
        ["II", "I", "III"],
        ["tower A", "tower B", "tower C"],
        ["A"],                           # one option is no sequence
        ["AB", "BC", "CD", "AC"],        # segments named by their end points
        ["x and y", "y", "x"],           # variables, not option letters
        ["I and II only", "II only", "I only"],  # statements of the stem, not options
        ["①②", "②③", "①③"],
        ["C and A", "x", "y"],           # not a reference in option order
        ["A and E", "x", "y"],           # E is no option of a 3-option question
        ["All of these animals are mammals.", "Only cats are mammals."],
        ["Both of them are metals", "Neither metal conducts heat well"],
        ["上述流程中可用硫酸钠代替碳酸钠", "x", "y"],
        ["估计该地有一半以上的农户", "x", "y"],
        ["60℃以上", "40℃以下"],
        ["$B, 0$", "$B 、 B$"],
        ["$a+b$", "$2 a+2 b$", "$a b$"],  # variables in math, not option letters
        ["a+b", "a-b", "2a"],
    ],
)
def test_content_that_looks_like_labels_is_shuffled(options):
    assert option_order(options) == SHUFFLED


@pytest.mark.parametrize(
    "last",
    [
        "All of the above", "all of these", "None of the above", "None of these", "none of them",
        "Both of the above", "Neither", "Both", "None", "All the above", "None of the above is correct",
        "All of the above answers are correct", "Both A and B", "A and B", "B and C only", "A and C only",
        "A, B and C", "A, B, and C", "Both (a) and (b)", "(A) and (B)", "Neither A nor B", "A or B",
        "Options A and C", "All three", "All are correct", "以上都对", "以上都不对", "以上说法均不正确",
        "以上答案都正确", "都不对", "A、B都对", "A和C",
    ],
)
def test_options_that_refer_to_other_options_keep_their_order(last):
    options = ["the cell wall", "the membrane", "the nucleus", last]
    assert option_order(options) == REFERS_TO_OPTIONS, last


def test_image_options_and_missing_options_are_shuffled():
    assert option_order(None) == SHUFFLED
    frame = pl.DataFrame(
        {"question_id": ["q"], "choices": [None], "choice_images": [["h0", "h1", "h2"]], "answer_idx": [2]},
        schema_overrides={"choices": pl.List(pl.String)},
    )
    out = shuffle_options(frame, seed=1)
    assert out["shuffle"].to_list() == [SHUFFLED]
    assert out["permutation"][0].to_list() == option_permutation("q", 3, 1)


def qid(i: int) -> str:
    return hashlib.sha256(f"order-{i}".encode()).hexdigest()[:16]


def mixed_frame(n: int = 400) -> pl.DataFrame:
    kinds = [
        (["A", "B", "C", "D"], FIGURE_LABELS),
        (["(a)", "(b)", "(c)"], FIGURE_LABELS),
        (["red", "blue", "All of the above"], REFERS_TO_OPTIONS),
        (["P", "Q", "R", "S"], SHUFFLED),
    ]
    rows = []
    for i in range(n):
        options, _ = kinds[i % 4]
        rows.append({"question_id": qid(i), "choices": options if i % 4 != 3 else [f"{o}{i}" for o in options],
                     "choice_images": None, "answer_idx": i % len(options)})
    return pl.DataFrame(rows, schema_overrides={"choice_images": pl.List(pl.String)})


def test_kept_order_questions_keep_identity_and_key_while_others_shuffle():
    frame = mixed_frame()
    out = shuffle_options(frame, seed=5)
    assert out["shuffle"].value_counts().sort("shuffle").rows() == [
        (FIGURE_LABELS, 200), (REFERS_TO_OPTIONS, 100), (SHUFFLED, 100)]
    moved = 0
    for before, after in zip(frame.iter_rows(named=True), out.iter_rows(named=True)):
        k = len(before["choices"])
        assert after["choices"][after["answer_idx"]] == before["choices"][before["answer_idx"]]
        if after["shuffle"] == SHUFFLED:
            assert after["permutation"] == option_permutation(before["question_id"], k, 5)
            moved += after["permutation"] != list(range(k))
        else:
            assert after["permutation"] == list(range(k))
            assert after["choices"] == before["choices"] and after["answer_idx"] == before["answer_idx"]
        if after["shuffle"] == FIGURE_LABELS:
            scheme = sequence_scheme(after["choices"])
            assert label_index(after["choices"][after["answer_idx"]], scheme) == before["answer_idx"]
    assert moved > 50
    table = choices_table(out).join(out.select("question_id", "shuffle"), on="question_id")
    kept = table.filter(pl.col("shuffle") != SHUFFLED)
    assert (kept["position"] == kept["original_position"]).all()


def test_shuffle_is_deterministic_and_independent_of_row_order():
    frame = mixed_frame(200)
    a = shuffle_options(frame, seed=9)
    b = shuffle_options(frame.reverse(), seed=9).reverse()
    assert a.equals(b)
    assert a.equals(shuffle_options(frame, seed=9))


def test_uniformity_leaves_kept_order_questions_out():
    n = 600
    frame = pl.DataFrame(
        {
            "question_id": [qid(i) for i in range(2 * n)],
            "choices": [["A", "B", "C"]] * n + [[f"x{i}", f"y{i}", f"z{i}"] for i in range(n)],
            "choice_images": [None] * (2 * n),
            "answer_idx": [0] * (2 * n),
        },
        schema_overrides={"choice_images": pl.List(pl.String)},
    )
    results = answer_position_uniformity(shuffle_options(frame, seed=0))
    assert results[0].n == n and results[0].p_value > 0.001


def test_classifying_many_distinct_option_lists_stays_fast():
    n = 20_000
    frame = pl.DataFrame(
        {
            "question_id": [qid(i) for i in range(n)],
            "choices": [[f"{i} apples", f"{i + 1} pears", "None of these" if i % 7 == 0 else f"{i} plums"] for i in range(n)],
            "choice_images": [None] * n,
            "answer_idx": [i % 3 for i in range(n)],
        },
        schema_overrides={"choice_images": pl.List(pl.String)},
    )
    start = time.perf_counter()
    out = shuffle_options(frame, seed=0)
    elapsed = time.perf_counter() - start
    assert out.filter(pl.col("shuffle") == REFERS_TO_OPTIONS).height == len(range(0, n, 7))
    # ~0.3 s unloaded; the bound only catches work per row far beyond a memoized classification
    assert elapsed < 8, f"{elapsed:.1f} s"


# ---- the real corpora -------------------------------------------------------------------------

# an option mark in a question text: "A. ", "(A) ", "A) ", full-width "Ａ．" (NFKC is not applied to
# the text, so the full-width dot is matched here), not the end of a word ("pH.") or of a TeX command
OPTION_MARK = re.compile(r"(?<![A-Za-z\\])(?:\(([A-E])\)|([A-E])\s*[.．)])")


def options_in_text(text: str) -> list[str] | None:
    """The options A, B, C, ... at the end of a question text (the last run that starts at A)."""
    marks = [(m.group(1) or m.group(2), m) for m in OPTION_MARK.finditer(text)]
    for start in reversed([i for i, (letter, _) in enumerate(marks) if letter == "A"]):
        run = [marks[start][1]]
        for letter, m in marks[start + 1:]:
            if letter == chr(ord("A") + len(run)):
                run.append(m)
        if len(run) >= 2:
            ends = [m.start() for m in run[1:]] + [len(text)]
            return [text[m.end():end].strip() for m, end in zip(run, ends)]
    return None


def corpus_questions() -> dict[str, list[tuple[str, list[str] | None, str, int]]]:
    """corpus -> [(question id, options parsed from the text, answer letter, pictures)]."""
    out: dict[str, list] = {"scemqa": [], "gaokao-mm": []}
    scemqa = json.loads((CORPORA / "scemqa" / "Multiple_Choice" / "multiple_choice.json").read_text(encoding="utf-8"))
    for subject, questions in scemqa.items():
        for i, q in enumerate(questions):
            letter = q["Answer (final answer highlighted)"].strip()[:1]
            out["scemqa"].append((f"{subject}-{i}", options_in_text(q["Question"]), letter, 1))
    for path in sorted(glob.glob(str(CORPORA / "gaokao-mm" / "Data" / "*.json"))):
        for q in json.loads(Path(path).read_text(encoding="utf-8"))["example"]:
            letter = q["answer"][0] if len(q["answer"]) == 1 and len(q["answer"][0]) == 1 else ""
            out["gaokao-mm"].append((f"{Path(path).stem}-{q['index']}", options_in_text(q["question"]), letter, len(q["picture"])))
    return out


def test_real_corpora_keep_figure_labels_and_references_in_order():
    counts: dict[str, Counter] = {}
    for corpus, questions in corpus_questions().items():
        counts[corpus] = Counter(
            option_order(options) if options else ("options not found" if pictures == 1 else "one picture per option")
            for _, options, _, pictures in questions
        )
        rows = [(qid_, options, ord(letter) - ord("A")) for qid_, options, letter, _ in questions
                if options and letter and "A" <= letter <= chr(ord("A") + len(options) - 1)]
        frame = pl.DataFrame(
            {"question_id": [r[0] for r in rows], "choices": [r[1] for r in rows],
             "choice_images": [None] * len(rows), "answer_idx": [r[2] for r in rows]},
            schema_overrides={"choice_images": pl.List(pl.String)},
        )
        out = shuffle_options(frame, seed=0)
        labelled = out.filter(pl.col("shuffle") == FIGURE_LABELS)
        for after, source_answer in zip(labelled.iter_rows(named=True), frame.filter(
                pl.col("question_id").is_in(labelled["question_id"].to_list()))["answer_idx"]):
            assert after["permutation"] == list(range(len(after["choices"])))
            assert label_index(after["choices"][after["answer_idx"]], sequence_scheme(after["choices"])) == source_answer
    print("option order per corpus:", {c: dict(v) for c, v in counts.items()})
    assert counts["scemqa"] == Counter({SHUFFLED: 799, FIGURE_LABELS: 27, REFERS_TO_OPTIONS: 13, "options not found": 1})
    # GAOKAO-MM: curves 甲/乙/丙/丁 and table rows A-D are figure labels; 49 questions draw each
    # option in a picture of its own (image options, shuffled); the simple regex here misses the
    # options of 5 (rows of a LaTeX table, "B $…$" without a dot)
    assert counts["gaokao-mm"] == Counter(
        {SHUFFLED: 286, FIGURE_LABELS: 2, "one picture per option": 49, "options not found": 5})
