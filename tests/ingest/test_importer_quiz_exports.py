"""What quiz sites' exports and scraped corpora write, read as a reader reads it: texts in HTML
(``x<sup>2</sup>``, ``&quot;gold&quot;``), the key in a field apart from a list of distractors
(OpenTDB's ``correct_answer`` / ``incorrect_answers``), and index answers counted from 1."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.ingest.html_dom import PictureInMarkup, build_dom, markup_text, node_text
from pipelines.ingest.importers import ImportSourceError
from pipelines.ingest.importers.answers import AnswerError, IndexAnswers, parse_answer
from pipelines.store.images import ImageStore
from support.images import real_png
from support.importing import read_source


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


read = read_source


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    for i, name in enumerate(sorted({row["image"] for row in rows if "image" in row})):
        (path.parent / name).write_bytes(real_png(i + 1))
    return path


# ---------------------------------------------------------------- texts written in HTML


@pytest.mark.parametrize("text, shown", [
    ("If x<sup>2</sup> = 9 and x &gt; 0, what is x?<br>Look at the figure.",
     "If x² = 9 and x > 0, what is x?\nLook at the figure."),
    ("H<sub>2</sub>O and CO<sub>3</sub><sup>2-</sup>", "H₂O and CO₃²⁻"),
    ("e<sup>2x</sup>, a<sub>ij</sub>, 10<sup>-3</sup>", "e^(2x), a_(ij), 10⁻³"),
    ("<p>A ball is thrown.</p><p>How <b>high</b> does it go?</p>", "A ball is thrown.\nHow high does it go?"),
    ("<div><p>first</p></div><div>second</div>", "first\nsecond"),
    ("<ul><li>x = 1</li><li>y = 2</li></ul>Which is larger?", "x = 1\ny = 2\nWhich is larger?"),
    ("Which of these is the chemical symbol for &quot;gold&quot;? It&#039;s &#x3c0;-free.",
     "Which of these is the chemical symbol for \"gold\"? It's π-free."),
    ("Tom &amp; Jerry", "Tom & Jerry"),
])
def test_a_text_in_html_reads_as_a_browser_shows_it(text, shown):
    assert markup_text(text) == shown


@pytest.mark.parametrize("text", [
    "If a<b>c, which is largest?",  # a lone <b> is maths, not bold
    "Compare <image 1> and <image 2>.",  # placeholders
    "Look at <img1> and <img2>.",
    "The molecule <smiles>CCO</smiles> is ethanol.",  # chemists' markup
    "R&D spent 5 & 6 units; &amp without its semicolon stays",
    "x < 3 and y > 2",
    "$a &b$ in TeX",
])
def test_a_text_that_is_not_html_stays_as_written(text):
    assert markup_text(text) == text


def test_a_picture_inside_a_text_in_html_is_not_dropped_silently(tmp_path, store):
    with pytest.raises(PictureInMarkup):
        markup_text('<p>Simplify <img src="f1.png"> and choose.</p>')
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"question": '<p>Simplify <img src="f1.png"/> and choose.</p>', "options": ["1", "2"], "answer": 0,
         "image": "a.png", "subject": "math", "skill": "s"}])
    questions, quarantined = read(f"jsonl:{path}", store)
    assert not questions
    assert quarantined == {"q.jsonl#0": ("picture inside the text's HTML", 'the question text: <img src="f1.png"/>')}


def test_html_0_keeps_every_text_as_written_and_markup_never_reaches_a_text_live(tmp_path, store):
    script = "<script>alert(1)</script><img src=x onerror=alert(2)> Which is it?"
    path = write_jsonl(tmp_path / "h.jsonl", [
        {"question": script, "options": ["<b onmouseover=alert(3)>yes</b>", "no"], "answer": 0, "image": "a.png",
         "subject": "math", "skill": "s"},
        {"question": "What does <b>hi</b> show?", "options": ["hi in bold", "hi"], "answer": 0, "image": "a.png",
         "subject": "math", "skill": "s"}])
    questions, _ = read(f"jsonl:{path}", store)
    hostile, quoted = questions.values()
    # no formatting element ends in the question: not HTML, kept; the option's handler is gone
    assert (hostile.problem, hostile.choices) == (script, ("yes", "no"))
    assert quoted.problem == "What does hi show?"
    questions, _ = read(f"jsonl:{path}?html=0", store)
    hostile, quoted = questions.values()
    assert hostile.choices == ("<b onmouseover=alert(3)>yes</b>", "no") and quoted.problem == "What does <b>hi</b> show?"
    with pytest.raises(ImportSourceError, match="html='2'"):
        read(f"jsonl:{path}?html=2", store)


def test_crawled_pages_show_sup_and_sub_raised_and_lowered():
    dom, _ = build_dom("<html><body><p class=q>Solve x<sup>2</sup> = 4 for H<sub>2</sub>O's "
                       "<sup>n+1</sup>th term</p></body></html>")
    assert node_text(dom.css_first("p.q")) == "Solve x² = 4 for H₂O's ⁿ⁺¹th term"


KATEX = ('<span class="katex"><span class="katex-mathml"><math xmlns="http://www.w3.org/1998/Math/MathML"><semantics>'
         '<mrow><msup><mi>x</mi><mn>2</mn></msup><mo>=</mo><mn>4</mn></mrow>'
         '<annotation encoding="application/x-tex">x^2 = 4</annotation></semantics></math></span>'
         '<span class="katex-html" aria-hidden="true"><span class="base"><span class="mord mathnormal">x</span>'
         '<span class="msupsub"><span class="mord mtight">2</span></span><span class="mrel">=</span>'
         '<span class="mord">4</span></span></span></span>')


@pytest.mark.parametrize("html, text", [
    (f"Solve {KATEX} for x.", "Solve \\( x^2 = 4 \\) for x."),  # was "Solve x2=4x^2 = 4x2=4 for x."
    (f'Then <span class="katex-display">{KATEX}</span>', "Then \\[ x^2 = 4 \\]"),
    ('Find <script type="math/tex">\\frac{1}{2} + \\frac{1}{3}</script> and '
     '<script type="math/tex; mode=display">a<b</script>.', "Find \\( \\frac{1}{2} + \\frac{1}{3} \\) and \\[ a<b \\]."),
    ('Is <math display="block"><semantics><mi>y</mi><annotation encoding="application/x-tex">y_1</annotation>'
     '</semantics></math> it?', "Is \\[ y_1 \\] it?"),
    # no TeX kept: its presentation elements read as TeX (was "Is x<3 true?"), and text where they cannot be
    ("Is <math><mi>x</mi><mo>&lt;</mo><mn>3</mn></math> true?", "Is \\( x<3 \\) true?"),
    ("Is <math><mmultiscripts><mi>C</mi><mn>14</mn></mmultiscripts></math> it?", "Is C14 it?"),
    ("Code: <script>alert(1)</script><span class='note'>x</span>", "Code: x"),
])
def test_crawled_pages_keep_typeset_formulas_as_the_tex_they_were_written_in(html, text):
    dom, _ = build_dom(f"<html><body><p class=q>{html}</p></body></html>")
    assert node_text(dom.css_first("p.q")) == text


def test_a_quiz_export_in_html_with_the_key_apart_from_its_distractors(tmp_path, store):
    """OpenTDB's API: HTML character references in every text, the key in ``correct_answer``
    and the distractors a list in ``incorrect_answers``."""
    path = write_jsonl(tmp_path / "trivia.jsonl", [
        {"question": "Which of these is the chemical symbol for &quot;gold&quot;?", "correct_answer": "Au",
         "incorrect_answers": ["Ag", "Gd", "G&amp;O"], "image": "gold.png"},
        {"question": "What is x if x<sup>2</sup> = 9 and x &gt; 0?", "correct_answer": "3",
         "incorrect_answers": ["1", "9"], "image": "square.png"},
        {"question": "Is it true?", "correct_answer": "True", "incorrect_answers": "False", "image": "gold.png"},
    ])
    spec = (f"jsonl:{path}?choices=[correct_answer,incorrect_answers]&answer=correct_answer&answer_format=text"
            "&subject='science'&skill='trivia'")
    questions, quarantined = read(spec, store)
    assert not quarantined
    gold, square, true = questions.values()
    assert (gold.problem, gold.choices, gold.answer_idx) == (
        'Which of these is the chemical symbol for "gold"?', ("Au", "Ag", "Gd", "G&O"), 0)
    assert (square.problem, square.choices, square.answer_idx) == ("What is x if x² = 9 and x > 0?", ("3", "1", "9"), 0)
    assert (true.choices, true.answer_idx) == (("True", "False"), 0)  # one distractor, not a list


def test_listed_fields_keep_their_letters_around_a_list(tmp_path, store):
    """An absent field keeps its letter (MMBench); a list gives its items the next letters."""
    path = write_jsonl(tmp_path / "mixed.jsonl", [
        {"question": "Q?", "first": "p", "rest": ["q", "r"], "last": "s", "answer": "D", "image": "a.png"},
        {"question": "Q2?", "first": "p", "rest": [], "last": "s", "answer": "B", "image": "a.png"},
    ])
    questions, quarantined = read(f"jsonl:{path}?choices=[first,rest,last]&subject='math'&skill='s'", store)
    assert not quarantined
    listed, empty = questions.values()
    assert (listed.choices, listed.answer_idx) == (("p", "q", "r", "s"), 3)
    assert (empty.choices, empty.answer_idx) == (("p", "s"), 1)  # the empty list held no letter: s is B


# ---------------------------------------------------------------- index answers counted from 1


ONE_BASED = [
    {"question": "Which shape is shown?", "options": ["Triangle", "Square", "Circle", "Hexagon"], "answer": 1},
    {"question": "How many sides?", "options": ["3", "4", "5", "6"], "answer": 2},
    {"question": "How long is the red segment?", "options": ["1 cm", "2 cm", "3 cm", "4 cm"], "answer": 4},
    {"question": "Which angle is largest?", "options": ["a", "b", "c"], "answer": 3},
]


def test_index_answers_that_only_a_count_from_1_reads_are_read_so(tmp_path, store):
    rows = [{**row, "image": "a.png", "subject": "math", "skill": "s"} for row in ONE_BASED]
    questions, quarantined = read(f"jsonl:{write_jsonl(tmp_path / 'one.jsonl', rows)}", store)
    assert not quarantined
    assert [q.choices[q.answer_idx] for q in questions.values()] == ["Triangle", "4", "4 cm", "c"]
    # the same source with one answer 0 is 0-based: the answer past the last option is out of range
    rows[0]["answer"] = 0
    questions, quarantined = read(f"jsonl:{write_jsonl(tmp_path / 'zero.jsonl', rows)}", store)
    assert [q.answer_idx for q in questions.values()] == [0, 2]
    assert set(quarantined.values()) == {("answer out of range", "4 for 4 options"), ("answer out of range", "3 for 3 options")}
    # index1 says so where no answer names the option after the last
    rows = [{**row, "answer": 2 if i else 1} for i, row in enumerate(rows)]
    questions, quarantined = read(f"jsonl:{write_jsonl(tmp_path / 'said.jsonl', rows)}?answer_format=index1", store)
    assert not quarantined and [q.answer_idx for q in questions.values()] == [0, 1, 1, 1]
    questions, _ = read(f"jsonl:{tmp_path / 'said.jsonl'}", store)  # nothing proves 1: 0-based
    assert [q.answer_idx for q in questions.values()] == [1, 2, 2, 2]


def test_every_row_importer_reads_a_source_counted_from_1(tmp_path, store):
    (tmp_path / "a.png").write_bytes(real_png(1))
    rows = [{**row, "image": "a.png"} for row in ONE_BASED]
    expected = ["Triangle", "4", "4 cm", "c"]
    tail = "subject='math'&skill='s'"
    (tmp_path / "one.json").write_text(json.dumps({"items": rows}))
    questions, quarantined = read(f"json:{tmp_path / 'one.json'}?records=items&{tail}", store)
    assert not quarantined and [q.choices[q.answer_idx] for q in questions.values()] == expected
    with open(tmp_path / "one.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["question", "options", "answer", "image"])
        writer.writeheader()
        writer.writerows({**row, "options": json.dumps(row["options"])} for row in rows)
    questions, quarantined = read(f"csv:{tmp_path / 'one.csv'}?{tail}", store)
    assert not quarantined and [q.choices[q.answer_idx] for q in questions.values()] == expected
    folder = tmp_path / "hf"
    folder.mkdir()
    table = pa.table({"question": [r["question"] for r in rows], "choices": [r["options"] for r in rows],
                      "answer": [r["answer"] for r in rows],
                      "image": [{"bytes": real_png(1), "path": None}] * len(rows),
                      "subject": ["math"] * len(rows), "skill": ["s"] * len(rows)})
    pq.write_table(table, folder / "test-00000-of-00001.parquet")
    questions, quarantined = read(f"hf:{folder}", store)
    assert not quarantined and [q.choices[q.answer_idx] for q in questions.values()] == expected


def test_the_base_of_index_answers():
    assert not IndexAnswers().one_based()
    seen = IndexAnswers()
    with pytest.raises(AnswerError, match="answer out of range"):
        parse_answer(3, ["a", "b", "c"], 3, indices=seen)
    assert seen.one_based()
    assert parse_answer(3, ["a", "b", "c"], 3, index_base=1) == 2
    assert parse_answer("3", ["a", "b", "c"], 3, answer_format="index1") == 2
    with pytest.raises(AnswerError, match=r"not a valid index \(1-based\)"):
        parse_answer("x", ["a", "b", "c"], 3, answer_format="index1")
    parse_answer(0, ["a", "b"], 2, indices=seen)
    assert not seen.one_based()  # a 0 proves 0-based
    # pandas writes an integer column holding a NaN as floats: "2.0" is the index 2
    assert parse_answer("2.0", ["a", "b", "c"], 3) == 2
    with pytest.raises(AnswerError, match="ambiguous answer"):
        parse_answer("2.0", ["1.0", "2.0", "3.0"], 3)
    letters = IndexAnswers()
    parse_answer("B", ["a", "b"], 2, indices=letters)
    assert (letters.zero, letters.past_last) == (0, 0)  # letters say nothing of a base


# ---------------------------------------------------------------- LLaVA's conversations and paths


def test_llava_conversations_lose_their_unnumbered_image_placeholder(tmp_path, store):
    (tmp_path / "a.png").write_bytes(real_png(1))
    rows = [{"id": "l1", "image": "/home/ann/llava/images/a.png", "conversations": [
        {"from": "human", "value": "<image>\nWhich shape is shown?\nA. Triangle\nB. Square\nC. Circle"},
        {"from": "gpt", "value": "B"}]}]
    (tmp_path / "llava.json").write_text(json.dumps(rows))
    spec = (f"json:{tmp_path / 'llava.json'}?problem=conversations[0].value&answer=conversations[1].value"
            "&options_in_text=1&subject='math'&skill='s'")
    questions, quarantined = read(spec, store)
    # the picture's path is a folder of the machine the corpus was made on
    assert not questions
    [(reason, detail)] = quarantined.values()
    assert reason == "image path escapes the folder" and "image_prefix=FOLDER" in detail
    questions, quarantined = read(f"{spec}&image_prefix=/home/ann/llava/images", store)
    assert not quarantined
    [question] = questions.values()
    assert (question.problem, question.choices, question.answer_idx) == (
        "Which shape is shown?", ("Triangle", "Square", "Circle"), 1)
    assert question.problem_image is not None


def test_placeholders_stay_text_inside_a_text_in_html():
    assert markup_text("<p>Compare <image 1> and <img2>.</p><p><image>Which?</p>") == "Compare <image 1> and <img2>.\n<image>Which?"


# ---------------------------------------------------------------- empty slots and encodings


def read_with_a_figure(tmp_path, store, name: str, lines: list[str]):
    """(questions, quarantined) of JSON lines, each given one real picture."""
    (tmp_path / "a.png").write_bytes(real_png(1))
    (tmp_path / name).write_text("\n".join(line[:-1] + ', "image": "a.png"}' for line in lines) + "\n")
    return read(f"jsonl:{tmp_path / name}?subject='math'&skill='s'", store)


def test_empty_slots_after_the_last_option_are_no_options(tmp_path, store):
    lines = [
        '{"question": "Which shape?", "options": ["Triangle", "Square", null, null], "answer": "B"}',
        '{"question": "Which value?", "options": ["1", "2", "3", NaN], "answer": "C"}',  # pandas' to_json(NaN)
        '{"question": "Which one?", "options": ["x", "y", "  "], "answer": 1}',
        '{"question": "Which label?", "options": {"A": "p", "B": "q", "C": null}, "answer": "B"}',
        '{"question": "Which none?", "options": [null, null], "answer": "A"}',
    ]
    questions, quarantined = read_with_a_figure(tmp_path, store, "slots.jsonl", lines)
    assert [(q.choices, q.answer_idx) for q in questions.values()] == [
        (("Triangle", "Square"), 1), (("1", "2", "3"), 2), (("x", "y"), 1), (("p", "q"), 1)]
    assert quarantined == {"slots.jsonl#4": ("not multiple choice: no options", None)}


def test_an_empty_slot_between_options_keeps_the_letters_after_it(tmp_path, store):
    """``["left", "", "right"]``: the options after the empty slot keep their letters and
    indices (C, 2), so the key still names its option; only an answer that names the empty slot
    is unusable, and quarantined as such."""
    lines = [
        '{"question": "Which side?", "options": ["left", "", "right"], "answer": "C"}',
        '{"question": "Which side?", "options": ["left", null, "right", "up"], "answer": 2}',
        '{"question": "Which side?", "options": ["left", null, "right", "up"], "answer": "up"}',
        '{"question": "Which key?", "options": {"A": "p", "B": "", "C": "q"}, "answer": "C"}',
        '{"question": "Which side?", "options": ["A. left", "", "C. right"], "answer": "C"}',
        '{"question": "Which side?", "options": ["left", "", "right"], "answer": "B"}',
        '{"question": "Which side?", "options": ["left", "", "right"], "answer": 1}',
    ]
    questions, quarantined = read_with_a_figure(tmp_path, store, "gaps.jsonl", lines)
    assert [(q.choices, q.answer_idx) for q in questions.values()] == [
        (("left", "right"), 1), (("left", "right", "up"), 1), (("left", "right", "up"), 2), (("p", "q"), 1),
        (("left", "right"), 1)]
    assert quarantined == {
        "gaps.jsonl#5": ("answer is an empty option", "'B': slot 1 of the options is empty"),
        "gaps.jsonl#6": ("answer is an empty option", "1: slot 1 of the options is empty"),
    }


def test_a_csv_in_another_encoding_says_how_to_read_it(tmp_path, store):
    (tmp_path / "a.png").write_bytes(real_png(1))
    text = "question,A,B,C,answer,image\nWhich angle is 90°?,30°,90°,180°,B,a.png\nQuelle forme est carrée?,carré,cercle,triangle,A,a.png\n"
    (tmp_path / "excel.csv").write_bytes(text.encode("cp1252"))
    spec = f"csv:{tmp_path / 'excel.csv'}?choices=[A,B,C]&subject='math'&skill='s'"
    questions, quarantined = read(spec, store)
    assert not questions and quarantined["excel.csv#0"][0] == "file is not UTF-8"
    assert quarantined["excel.csv#0"][1].endswith("encoding=NAME reads another encoding (Excel writes cp1252)")
    questions, quarantined = read(f"{spec}&encoding=cp1252", store)
    assert not quarantined
    assert [(q.problem, q.choices[q.answer_idx]) for q in questions.values()] == [
        ("Which angle is 90°?", "90°"), ("Quelle forme est carrée?", "carré")]
    with pytest.raises(ImportSourceError, match="encoding='klingon'"):
        read(f"{spec}&encoding=klingon", store)


# ---------------------------------------------------------------- Word's Symbol font


def test_words_symbol_font_characters_read_as_the_letters_they_show():
    from pipelines.store.records import _SYMBOL_FONT, clean_text

    corpus = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora" / "scemqa" / "Multiple_Choice"
    chemistry = json.loads((corpus / "multiple_choice.json").read_text(encoding="utf-8"))["Chemistry"]
    [rutherford] = [x["Question"] for x in chemistry if "Rutherford" in x["Question"]]
    assert "scattered \uf061-particle" in rutherford  # as the corpus has it
    assert "scattered α-particle gives the best evidence" in clean_text(rutherford)
    assert clean_text("Area = \uf070r\u00b2 \uf0a3 4\uf0b4\uf071, \uf057 = 2\uf0b0") == "Area = πr² ≤ 4×θ, Ω = 2°"
    assert clean_text("a \uf0e8 b \ue000") == "a \uf0e8 b \ue000"  # other fonts' pictures: as written
    assert all(len(v) == 1 for v in _SYMBOL_FONT.values()) and len(_SYMBOL_FONT) == 137
