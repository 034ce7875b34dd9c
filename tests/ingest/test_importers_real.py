"""Importers for real layouts: ``json:``, ``python:``, ``image_root``, options in the text,
image paths without suffix, several images or answers, placeholders, and sources that land
nothing usable. Checked on the real corpora in ../shared/corpora (read in place, never copied)
and on small files written here.
"""

from __future__ import annotations

import collections
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.ingest.stage import land_source, source_files, source_problem
from pipelines.store.records import QuarantineEntry, RawQuestion
from pipelines.ingest.importers import ImportSourceError, iter_import_records, parse_answer
from pipelines.ingest.importers.answers import AnswerError
from pipelines.ingest.importers.picture_options import PICTURES_DO_NOT_FIT, join_pictures, picture_layout
from pipelines.ingest.importers.rows import MAPPED_FIELD_UNUSED
from pipelines.ingest.importers.text_options import HELD_LABEL, read_options, split_options, strip_placeholders
from pipelines.ingest.spec import SourceSpecError, parse_source_spec
from pipelines.store.warehouse import run_query
from support.builds import stemforge_build
from support.corpora import CORPORA

ROOT = Path(__file__).resolve().parents[2]
SCEMQA = CORPORA / "scemqa" / "Multiple_Choice"
GAOKAO = CORPORA / "gaokao-mm" / "Data"
WEMATH = CORPORA / "wemath" / "data" / "testmini.json"
SOURCES_MODULE = Path(__file__).resolve().parents[1] / "corpus_sources.py"

SCEMQA_MAPPING = (
    "options_in_text=1&problem=Question&answer=Answer (final answer highlighted)&answer_format=letter"
    "&image=ImagePath&subject=_key&skill=_key"
)
GAOKAO_MAPPING = (
    "records=example&options_in_text=1&image=picture&subject=_file"
    "&subjects=Biology:science,Chemistry:science,Physics:science,Math:math&skill=_file"
)
SCEMQA_SPEC = f"json:{SCEMQA / 'multiple_choice.json'}?{SCEMQA_MAPPING}"
GAOKAO_SPEC = f"json:{GAOKAO}?{GAOKAO_MAPPING}"


def png(color="teal", size=(16, 12)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def jpeg(color="olive") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), color).save(buffer, format="JPEG")
    return buffer.getvalue()


def read(spec_text: str, store: ImageStore):
    records = list(iter_import_records(parse_source_spec(spec_text), store))
    questions = [r for r in records if isinstance(r, RawQuestion)]
    quarantined = [r for r in records if isinstance(r, QuarantineEntry)]
    return questions, quarantined


def by_reason(quarantined) -> dict[str, int]:
    return dict(collections.Counter(q.reason for q in quarantined))


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


# ---------------------------------------------------------------- options in the text


@pytest.mark.parametrize(
    ("text", "stem", "options"),
    [
        ("Which?\n\nA. one\nB. two\nC. three", "Which?", ["one", "two", "three"]),
        ("Which?\n(A) one\n(B) two\n(C)\tthree \r\n", "Which?", ["one", "two", "three"]),
        ("Which?\nA) one\nB) two", "Which?", ["one", "two"]),
        ("哪个？\nＡ．甲\nＢ．乙\nＣ．丙", "哪个？", ["甲", "乙", "丙"]),
        ("Sum? A. 1 B. 2 C. 3 D. 4", "Sum?", ["1", "2", "3", "4"]),
        ("体积为 ( )A. 6B. 9C. 12D. 18", "体积为 ( )", ["6", "9", "12", "18"]),
        ("输出 $S=(\\quad)$A. $\\frac{5}{4}$B. $\\frac{4}{5}$", "输出 $S=(\\quad)$", ["$\\frac{5}{4}$", "$\\frac{4}{5}$"]),
        ("Where is it largest?\nA.\nB.\nC.\nD.", "Where is it largest?", ["A", "B", "C", "D"]),
        ("Pick one\n(A)\n(B) \n(C)", "Pick one", ["A", "B", "C"]),
        # the stem mentions (A) and vitamin B.: the options are the run that starts last
        ("Is (A) or vitamin B. right?\n(A) yes\n(B) no", "Is (A) or vitamin B. right?", ["yes", "no"]),
        # prices are not math, labels inside $...$ are not labels
        ("Median?\n\nA. $2000\nB. $2250\nC. $2500", "Median?", ["$2000", "$2250", "$2500"]),
        # OCR slips at the start of a line: a lower-case label, a label without its dot
        ("Then ( )\nA. $x$\nB $y$\nc. $z$\nD. $w$", "Then ( )", ["$x$", "$y$", "$z$", "$w$"]),
        ("Options span\nA. first line\ncontinued\nB. second", "Options span", ["first line\ncontinued", "second"]),
        # We-Math's option field: separators stripped from every option, not only the last
        ("A. Radius;B. Diameter;C. Cannot be determined; D. No correct answer", "",
         ["Radius", "Diameter", "Cannot be determined", "No correct answer"]),
        ("A. 45° B. 60° ;C. 120°; D. No correct answer", "", ["45°", "60°", "120°", "No correct answer"]),
        ("A. 4 ; B. 3 ; C. 2 ;D.1 ; E. No correct answer", "", ["4", "3", "2", "1", "No correct answer"]),
        ("A. ①;B．②;C. ③; D. Cannot be determined", "", ["①", "②", "③", "Cannot be determined"]),
        ("A. F;    B. D;    C. B;    D. I; E. No correct answer", "", ["F", "D", "B", "I", "No correct answer"]),
        ("哪个？A．甲；B．乙，C．丙 |", "哪个？", ["甲", "乙", "丙"]),
        # never from inside math; a bar goes only while unpaired
        ("Which? A. $a;b$; B. \\(c;\\); C. |x|; D. 5|", "Which?", ["$a;b$", "\\(c;\\)", "|x|", "5"]),
        ("Sum? (A). 5 (B) .5", "Sum?", ["5", ".5"]),
        # a price is no math: "$" before a digit, not closed as math on the line
        ("Which is the median? (A) $501k (B) $534k (C) $621k (D) $1,035k", "Which is the median?",
         ["$501k", "$534k", "$621k", "$1,035k"]),
        ("Cost $5 or $x$? (A) $5 (B) $x$", "Cost $5 or $x$?", ["$5", "$x$"]),
        # a label right after a word, and after a sentence's end
        ("If the radius is tripled, the volume (A) is tripled (B)is doubled(C) remains the same (D) is halved "
         "(E) decreased by a third", "If the radius is tripled, the volume",
         ["is tripled", "is doubled", "remains the same", "is halved", "decreased by a third"]),
        ("Which painting is older than A, B, C, D, and E.(A) Painting I (B) Painting II (C) Painting III",
         "Which painting is older than A, B, C, D, and E.", ["Painting I", "Painting II", "Painting III"]),
        # a glued label never starts a run, nor wins over a run that needs none
        ("Is P(A) > P(B)?\n(A) yes (B) no", "Is P(A) > P(B)?", ["yes", "no"]),
        ("Pick (A) sin(B) (B) 2 (C) 3", "Pick", ["sin(B)", "2", "3"]),
        # a letter that ends an option's sentence is its text, not the next label (We-Math
        # 3steps_156: "∠AB;C." is the angle ABC; 2steps_102: "Shape ;C." is shape C)
        ("A. There is an obtuse angle ∠AB;E.; B. There is an obtuse angle ∠AB;C.; C. There is no obtuse angle.; "
         "D. It cannot be determined.; E. No correct answer", "",
         ["There is an obtuse angle ∠AB;E.", "There is an obtuse angle ∠AB;C.", "There is no obtuse angle.",
          "It cannot be determined.", "No correct answer"]),
        ("A. Shape A is translated right to get Shape ;C.; B. Shape A is moved down to get Shape ;C.; "
         "C. Shape A is turned to get Shape ;C.; D. No correct answer", "",
         ["Shape A is translated right to get Shape ;C.", "Shape A is moved down to get Shape ;C.",
          "Shape A is turned to get Shape ;C.", "No correct answer"]),
        # MMStar's "Options: A: …, B: …"; an evaluation prompt's instruction after the options is the stem's
        ("Which is it?\nOptions: A: The suitcase is on the book., B: The suitcase is beneath the cat.", "Which is it?",
         ["The suitcase is on the book.", "The suitcase is beneath the cat."]),
        ("Question: Which is a mammal? Options: (A) shark (B) whale (C) trout (D) eel. Answer with the option letter.",
         "Question: Which is a mammal?\nAnswer with the option letter.", ["shark", "whale", "trout", "eel"]),
        # the header that introduces the options is theirs (MathVista, MathVerse); a word that ends in it is not
        ("Hint: answer with a letter.\nQuestion: Is it less than 3?\nChoices:\n(A) Yes\n(B) No",
         "Hint: answer with a letter.\nQuestion: Is it less than 3?", ["Yes", "No"]),
        ("what is ∠1?\nChoices:\nA:25°\nB:30°", "what is ∠1?", ["25°", "30°"]),
        ("What would insert(55, topNode) give?\nChoices are:\nA. a leaf\nB. a root", "What would insert(55, topNode) give?",
         ["a leaf", "a root"]),
        ("Which has more options? A. two B. three", "Which has more options?", ["two", "three"]),
        ("Which? (A) 1 (B) 2 Please select the correct answer from the options above.",
         "Which?\nPlease select the correct answer from the options above.", ["1", "2"]),
        ("Which? (A) Answer the call (B) Select an option letter", "Which?", ["Answer the call", "Select an option letter"]),
        # a dash after a label goes before a word, not before a number
        ("Pick one\nA - red\nB - blue", "Pick one", ["red", "blue"]),
        ("Which? A. -5 B. - 3 C. 4", "Which?", ["-5", "- 3", "4"]),
        # lower-case labels in brackets inline, in a text with no capital ones
        ("Select the best answer.\n(a) cat (b) dog (c) bird", "Select the best answer.", ["cat", "dog", "bird"]),
        ("Which is largest? (a) 2 (b)4 (c) 6", "Which is largest?", ["2", "4", "6"]),
        ("Pick one. a) red b) blue c) green d) none", "Pick one.", ["red", "blue", "green", "none"]),
        # their texts glued to them, as capital labels' may be ("A)5 B)6")
        ("Which is prime? a)5 b)8 c)9 d)12", "Which is prime?", ["5", "8", "9", "12"]),
        ("Which?\na)cat\nb)dog", "Which?", ["cat", "dog"]),
        # with capital ones, they belong to the stem
        ("Which are true? (a) x > 0 (b) y > 0\nA. (a) only B. (b) only C. both", "Which are true? (a) x > 0 (b) y > 0",
         ["(a) only", "(b) only", "both"]),
        # brackets that do not pair, at the start of a line (SceMQA Chemistry #180)
        ("the energy absorbed?\n\n(A} was used to melt.\r\n(B) was used to boil.\r\n(C) was lost.", "the energy absorbed?",
         ["was used to melt.", "was used to boil.", "was lost."]),
        ("Which?\n[A] cat\n[B) dog", "Which?", ["cat", "dog"]),
        # options laid out as table rows (GAOKAO-MM Chemistry #12, #50): the table stays, the options are its labels
        ("预测的现象与实际相符的是 ( )\n\\begin{tabular}{|c|c|c|}\n\\hline 选项 & (1)中物质 & 现象 \\\\\n"
         "\\hline A & 稀盐酸 & 立即产生气泡 \\\\\n\\hline $\\mathrm{B}$ & 浓硝酸 & 产生红棕色气体 \\\\\n"
         "\\hline C. & 氯化铝溶液 & 产生大量白色沉淀 \\\\\n\\hline\n\\end{tabular}",
         "预测的现象与实际相符的是 ( )\n\\begin{tabular}{|c|c|c|}\n\\hline 选项 & (1)中物质 & 现象 \\\\\n"
         "\\hline A & 稀盐酸 & 立即产生气泡 \\\\\n\\hline $\\mathrm{B}$ & 浓硝酸 & 产生红棕色气体 \\\\\n"
         "\\hline C. & 氯化铝溶液 & 产生大量白色沉淀 \\\\\n\\hline\n\\end{tabular}", ["A", "B", "C"]),
    ],
)
def test_split_options(text, stem, options):
    assert split_options(text) == (stem, options)
    assert read_options(text).held_label is None


@pytest.mark.parametrize(
    ("text", "held"),
    [
        # no later C than the one that ends B's sentence: C has no text, and its label is B's
        ("A. Shape A is translated to get Shape ;C.; B. Shape A is moved to get Shape ;C.; D. No correct answer",
         "option B: ' Shape A is moved to get Shape ;C.'"),
        # We-Math 2steps_94: "C. No.; F. No correct answer" (no E)
        ("A. Yes, around point ;O.;B. Yes, around point ;O.;C. No.; F. No correct answer",
         "option C: ' No.; F. No correct answer'"),
    ],
)
def test_options_holding_another_options_label(text, held):
    assert read_options(text).held_label == held


@pytest.mark.parametrize(
    "text",
    [
        "A. E. coli; B. yeast; C. moss",  # a label with no separator before it is the option's text
        "A. It passes through A, B, C.; B. It passes through B only; C. Neither",  # a comma is prose
        "A. around point ;O.; B. around point ;O.; C. No",  # O is no option's letter
        "A. $x; C. y$; B. $z$",  # inside math
    ],
)
def test_options_holding_no_label(text):
    assert read_options(text).held_label is None


@pytest.mark.parametrize(
    "text",
    [
        "No options here.",
        "Only A. one",
        "U.S.A. B. C. are letters",  # no label A starts a run
        "f(A) and f(B) are values",  # f(A) is notation
        "If f(a) = 2 and f(b) = 3, find f(c).",
        # after a word they name a figure's panels (GAOKAO-MM Physics: 如图 (a) … 如图 (b) 所示)
        "如图 (a), 线圈绕在同一软铁芯上, 电压如图 (b) 所示, 可能正确的是 ( )",
        "The velocity (a) doubles (b) halves",
        "Prove that a) x > 0 and b) y > 0.",  # after a word: the stem's own parts
        "If g(x)=f(a)x+b)2, find a.",  # after a letter or a bracket: notation
        "Is $(a) x (b) y$ true?",  # inside math
        "$A. x$ and $B. y$",  # inside math
        "\\(A. x\\) and \\(B. y\\)",
        "表\n\\begin{tabular}{|c|c|}\n\\hline x & A. \\\\\n\\hline y & B. \\\\\n\\end{tabular}",  # labels not first
    ],
)
def test_split_options_finds_none(text):
    assert split_options(text) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("AB CDab()．.：)\n$\\{x1")), max_size=40))
def test_split_options_is_total_and_keeps_the_stem_a_prefix(text):
    result = split_options(text)
    if result is not None:
        stem, options = result
        assert text.startswith(stem) and 2 <= len(options) and all(option.strip() for option in options)


def test_placeholders():
    assert strip_placeholders("<image 1> What is shown in <image1>?") == ("What is shown in?", [1, 1])
    assert strip_placeholders("no placeholder") == ("no placeholder", [])


# ---------------------------------------------------------------- answers


def test_answers_with_explanations_and_several_answers():
    options = ["w", "x", "y", "z"]
    for value, index in [("D", 3), ("D. because", 3), ("C:DPIP acts", 2), ("\nB This boxplot", 1),
                         ("A： Statement", 0), ("B-This is", 1), ("(D)  http://x/y.jpg", 3), (["C"], 2)]:
        assert parse_answer(value, options, 4, answer_format="letter") == index, value
    for value in (["A", "C"], "BD", "(C, D) Since", "A, D For a lens", "A and C"):
        with pytest.raises(AnswerError) as caught:
            parse_answer(value, options, 4, answer_format="letter")
        assert caught.value.reason == "several answers", value
    with pytest.raises(AnswerError) as caught:  # an explanation is read only when asked: "A cat" is text
        parse_answer("A cat", options, 4)
    assert caught.value.reason == "answer is not a letter, a 0-based index or an option's text"
    assert parse_answer("BD", ["AB", "BD"], 2) == 1  # the option's text wins over several letters


def test_answer_letters_wrapped_in_tex_markdown_or_chinese_words():
    options = ["4 cm", "6 cm", "8 cm", "10 cm"]
    for value in ("Ｂ", "（B）", "$B$", "$\\mathrm{B}$", "\\boxed{B}", "\\(B\\)", "\\text{B}", "**B**",
                  "【答案】B", "答案：B", "答案是B", "故选B", "选B", "B选项", "答案：B。", "B。", "Ans: B", "Ans. (b)"):
        for answer_format in ("auto", "letter"):
            assert parse_answer(value, options, 4, answer_format=answer_format) == 1, (value, answer_format)
    with pytest.raises(AnswerError) as caught:
        parse_answer("【答案】BD", options, 4)
    assert caught.value.reason == "several answers"
    # an option's own text is not unwrapped into a letter: "$a$" is option 1, not option A
    assert parse_answer("$a$", ["$b$", "$a$"], 2) == 1


# ---------------------------------------------------------------- json: layouts


def write_json(path: Path, document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, ensure_ascii=False))
    return path


def q(question="Which?", **fields):
    return {"question": question, "options": ["a", "b"], "answer": "A", "subject": "math", "skill": "s", **fields}


def test_json_array_object_of_arrays_records_key_and_folder(tmp_path, store):
    folder = tmp_path / "corpus"
    write_json(folder / "a.json", [q("A0"), q("A1")])
    write_json(folder / "b.json", {"Physics": [q("P0", subject=None)], "Math": [q("M0", subject=None)], "meta": "x"})
    write_json(folder / "c.json", {"keywords": "k", "data": {"items": [q("C0")]}})
    (folder / "sub").mkdir()
    write_json(folder / "sub" / "ignored.json", [q("not read")])

    questions, quarantined = read(f"json:{folder / 'a.json'}", store)
    assert [(x.source_key, x.problem) for x in questions] == [("a.json#0", "A0"), ("a.json#1", "A1")]

    questions, quarantined = read(f"json:{folder / 'b.json'}?subject=_key&skill=_key", store)
    assert [(x.source_key, x.subject, x.skill) for x in questions] == [
        ("b.json#Physics/0", "science", "physics"), ("b.json#Math/0", "math", "math"),
    ]
    questions, _ = read(f"json:{folder / 'c.json'}?records=data.items&skill=_file", store)
    assert [(x.source_key, x.problem, x.skill) for x in questions] == [("c.json#0", "C0", "c")]

    # a folder: its .json files in name order; files of another layout are one entry each
    questions, quarantined = read(f"json:{folder}?records=data.items", store)
    assert [x.source_key for x in questions] == ["c.json#0"]
    assert {(e.source_key, e.reason) for e in quarantined} == {
        ("a.json", "records key not in the file"), ("b.json", "records key not in the file"),
    }
    questions, quarantined = read(f"json:{folder}?subject='math'", store)
    assert len(questions) == 4 and [e.reason for e in quarantined] == ["JSON object without arrays of records"]


def test_json_bad_files_and_start_up_errors(tmp_path, store):
    write_json(tmp_path / "bad" / "a.json", [q()])
    (tmp_path / "bad" / "b.json").write_text('{"x": [1, 2')
    (tmp_path / "bad" / "c.json").write_text('"a string"')
    questions, quarantined = read(f"json:{tmp_path / 'bad'}", store)
    assert len(questions) == 1
    assert [(e.source_key, e.reason) for e in quarantined] == [
        ("b.json", "malformed JSON file"), ("c.json", "JSON file is neither an array nor an object of arrays"),
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportSourceError, match="no .json files"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'empty'}"), store)
    with pytest.raises(ImportSourceError, match="unknown field 'colour' in json mapping"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'bad'}?colour=hue"), store)
    with pytest.raises(ImportSourceError, match="options_in_text=1 reads the options from the text"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'bad'}?options_in_text=1&choices=opts"), store)
    with pytest.raises(ImportSourceError, match="image_root=nowhere is not a folder"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'bad'}?image_root=nowhere"), store)
    with pytest.raises(ImportSourceError, match="subjects="):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'bad'}?subjects=Biology:biology"), store)


# ---------------------------------------------------------------- images


def test_image_root_resolves_against_a_folder_beside_the_data(tmp_path, store):
    (tmp_path / "secret.png").write_bytes(png("black"))
    (tmp_path / "corpus" / "images").mkdir(parents=True)
    (tmp_path / "corpus" / "images" / "1.png").write_bytes(png("red"))
    data = tmp_path / "corpus" / "data" / "q.jsonl"
    data.parent.mkdir()
    lines = [q(image="images/1.png", level="hard"), q(image="../secret.png")]
    data.write_text("\n".join(json.dumps(line) for line in lines) + "\n")

    questions, quarantined = read(f"jsonl:{data}", store)  # relative to data/: not found
    assert questions == [] and [e.reason for e in quarantined] == ["image file not found", "image path escapes the folder"]

    questions, quarantined = read(f"jsonl:{data}?image_root=..", store)
    assert [x.source_key for x in questions] == ["q.jsonl#0"] and store.get(questions[0].problem_image) == png("red")
    assert questions[0].grade is None  # "level" is not a grade unless mapped
    assert [(e.reason, e.detail) for e in quarantined] == [
        ("image path escapes the folder", f"../secret.png leaves {(tmp_path / 'corpus').resolve()}")
    ]


def test_image_paths_without_suffix_lists_and_placeholders(tmp_path, store):
    (tmp_path / "Math").mkdir()
    (tmp_path / "Math" / "1.jpg").write_bytes(jpeg())
    (tmp_path / "Math" / "2.png").write_bytes(png("blue"))
    (tmp_path / "Math" / "2.jpg").write_bytes(jpeg("blue"))
    rows = [
        q("<image 1> What is this?", image="Math/1"),
        q("Two?", image="Math/2"),
        q("None?", image="Math/3"),
        q("One in a list <image1>", image=["Math/1.jpg"]),
        q("Two in a list", image=["Math/1.jpg", "Math/2.png"], options=["red", "blue"]),
        q("Refers to <image2>", image="Math/1"),
        q("Empty list", image=[]),
        q("<image 1> and <image 2>: which?", image=["Math/1.jpg", "Math/2.png"], options=["red", "blue"]),
        {**q("Which is option A?", image=["Math/1.jpg", "Math/2.png"]), "options": ["A", "B"]},
        {**q("Which graph?", image=["Math/1.jpg", "Math/2.png"]), "options": ["picture 1", "picture 2"]},
    ]
    questions, quarantined = read(f"json:{write_json(tmp_path / 'q.json', rows)}", store)
    # one mapped picture: a placeholder's number proves nothing (the picture may hold both panels);
    # two pictures under options with text are one figure, joined in order as a page shows them
    joined = store.put(join_pictures([jpeg(), png("blue")])).image_hash
    assert [(x.source_key, x.problem, x.problem_image) for x in questions] == [
        ("q.json#0", "What is this?", store.put(jpeg()).image_hash),
        ("q.json#3", "One in a list", store.put(jpeg()).image_hash),
        ("q.json#4", "Two in a list", joined),
        ("q.json#5", "Refers to", store.put(jpeg()).image_hash),
        ("q.json#6", "Empty list", None),
    ]
    assert [(e.source_key, e.reason, e.detail) for e in quarantined] == [
        ("q.json#1", "image path without suffix is ambiguous", "Math/2: 2.png, 2.jpg"),
        ("q.json#2", "image file not found", "Math/3"),
        # one figure cannot keep pictures apart that the text names by number
        ("q.json#7", "several images", "2 images named by placeholders in the text"),
        # options that only name pictures may be the pictures themselves: image_options says how
        ("q.json#8", "several images", "2 images and options that only name pictures (see image_options)"),
        ("q.json#9", "several images", "2 images and options that only name pictures (see image_options)"),
    ]


# ---------------------------------------------------------------- python:


def test_python_source_calls_a_function_with_the_query(tmp_path, store):
    spec = parse_source_spec(f"python:{SOURCES_MODULE}:drawn?color=green&count=2&grade='grade 2'")
    assert spec.location == f"{SOURCES_MODULE}:drawn"
    questions, quarantined = read(spec.text, store)
    assert [(x.source_key, x.choices, x.grade, x.subject) for x in questions] == [
        ("drawn#0", ("green", "red"), "grade-2", "science")
    ]
    assert store.get(questions[0].problem_image) == png("green", (12, 10))
    assert [(e.source_key, e.reason) for e in quarantined] == [("drawn#1", "not multiple choice: no options")]

    with pytest.raises(ImportSourceError, match=r"^python: broken\(\) failed: RuntimeError: the corpus server went away$"):
        list(iter_import_records(parse_source_spec(f"python:{SOURCES_MODULE}:broken"), store))
    with pytest.raises(ImportSourceError, match="has no function missing"):
        iter_import_records(parse_source_spec(f"python:{SOURCES_MODULE}:missing"), store)
    with pytest.raises(ImportSourceError, match="no_such_module_here is not in a place allowed"):
        iter_import_records(parse_source_spec("python:no_such_module_here:f"), store)
    for bad in ("python:nofunction", "python:a-b:f", f"python:{tmp_path / 'none.py'}:f", "python:mod:not-an-id"):
        with pytest.raises(SourceSpecError):
            parse_source_spec(bad)


# ---------------------------------------------------------------- unusable sources


def test_sources_that_land_nothing_usable_name_the_commonest_reason(tmp_path):
    home = DataHome(tmp_path / "home")
    images = ImageStore(home.images)
    data = tmp_path / "data" / "q.jsonl"
    data.parent.mkdir()
    data.write_text("\n".join(json.dumps(q(f"Q{i}", image=f"images/{i}.png")) for i in range(3)) + "\n"
                    + json.dumps(q("no options", options=None)) + "\n")

    def problem(text):
        spec = parse_source_spec(text)
        return source_problem(spec, land_source(spec, home, images))

    assert problem(f"jsonl:{data}") == (
        f"source jsonl:{data}: 0 of 4 records usable; commonest reason: image file not found (3)"
    )
    assert problem(f"jsonl:{data}?skill=Topic") == (
        f"source jsonl:{data}?skill=Topic: mapped field skill=Topic is in none of its 4 records; "
        "commonest reason: missing skill (3)"  # nothing usable: what else went wrong
    )
    assert problem(f"python:{SOURCES_MODULE}:nothing") == f"source python:{SOURCES_MODULE}:nothing: no records"
    assert problem(f"python:{SOURCES_MODULE}:drawn") is None
    spec = parse_source_spec(f"jsonl:{data}?grade=level&split=_key")
    records = list(iter_import_records(spec, images))
    entries = [r for r in records if isinstance(r, QuarantineEntry) and r.reason == MAPPED_FIELD_UNUSED]
    assert [(e.source_key, e.detail) for e in entries] == [("q.jsonl", "grade=level"), ("q.jsonl", "split=_key")]


def test_files_watched_for_changes(tmp_path):
    home = DataHome(tmp_path / "home")
    (tmp_path / "corpus" / "data").mkdir(parents=True)
    (tmp_path / "corpus" / "images").mkdir()
    (tmp_path / "corpus" / "images" / "1.png").write_bytes(png())
    write_json(tmp_path / "corpus" / "data" / "a.json", [q()])
    write_json(tmp_path / "corpus" / "data" / "b.json", [q()])
    folder = tmp_path / "corpus" / "data"
    assert source_files(parse_source_spec(f"json:{folder}"), home) == [folder / "a.json", folder / "b.json"]
    assert source_files(parse_source_spec(f"json:{folder / 'a.json'}?image_root=.."), home) == [
        folder / "a.json", folder / "b.json", tmp_path / "corpus" / "images" / "1.png",
    ]
    assert source_files(parse_source_spec(f"python:{SOURCES_MODULE}:drawn"), home) is None  # imported every build


def test_the_sensor_leaves_python_sources_to_the_schedule(tmp_path):
    from pipelines.ingest.changes import detect_source_changes
    from pipelines.settings import BuildSettings

    report = detect_source_changes(BuildSettings(home=str(tmp_path / "home"), sources=(f"python:{SOURCES_MODULE}:drawn",)))
    (change,) = report.sources
    assert change.changed is None and report.changed == []


# ---------------------------------------------------------------- the real corpora, whole


def test_scemqa_whole_file(store):
    questions, quarantined = read(SCEMQA_SPEC, store)
    assert (len(questions), len(quarantined)) == (833, 7)
    assert by_reason(quarantined) == {"several answers": 4, "identical options": 2, "answer out of range": 1}
    assert collections.Counter(x.skill for x in questions) == {"math": 210, "biology": 211, "physics": 210, "chemistry": 202}
    got = {x.source_key: x for x in questions}
    labels = got["multiple_choice.json#Physics/0"]  # options drawn in the figure: the labels stay
    assert labels.problem == "At which position in the above circuit will the charge passing that position in one second be largest?"
    assert (labels.choices, labels.answer_idx, labels.subject) == (("A", "B", "C", "D"), 0, "science")
    assert store.get(labels.problem_image) == (SCEMQA / "Physics" / "1.jpg").read_bytes()
    explained = got["multiple_choice.json#Chemistry/0"]  # answer "B Vapor pressure is dependent ..."
    assert explained.problem.startswith("Based on the strength of") and explained.problem.endswith("same temperature.")
    assert explained.choices[1] == "ethene > propane > ethanal > methanol" and explained.answer_idx == 1
    assert store.get(explained.problem_image) == (SCEMQA / "Chemistry" / "1.png").read_bytes()
    math = got["multiple_choice.json#Math/1"]
    assert math.choices == ("$ 1<x<5 $", "$x<1$ or $x>5$", "$x > 5$ only", "$x > 1$", "$x > 3$")
    assert (math.answer_idx, math.subject, math.grade) == (1, "math", None)
    details = {e.source_key: (e.reason, e.detail) for e in quarantined}
    assert details["multiple_choice.json#Physics/141"][0] == "several answers"
    assert details["multiple_choice.json#Physics/141"][1].startswith("'(C, D) Since the sign")
    reason, detail = details["multiple_choice.json#Math/104"]  # the key says E; the text has A to D
    assert reason == "answer out of range" and detail.startswith("'E: The integral") and detail.endswith("for 4 options")
    # the source lists the same option twice: a model can rule out both copies
    assert details["multiple_choice.json#Physics/68"] == ("identical options", "options 1 and 3: 'BC, EF, DE, CD, AB'")
    assert details["multiple_choice.json#Math/185"][0] == "identical options"
    assert details["multiple_choice.json#Math/185"][1].startswith("options 2 and 4: 'Do not reject")
    # "(A}" starts option A: the source's brace is a slip
    slipped = got["multiple_choice.json#Chemistry/180"]
    assert (slipped.choices[0], len(slipped.choices), slipped.answer_idx) == ("was used to change from liquid to gas phase.", 5, 0)
    # case is kept: Mg and mg are different options
    assert got["multiple_choice.json#Physics/100"].choices[1:3] == (
        "$\\frac{Mg-mgsin\\theta}{Mg\\cos\\theta}$", "$\\frac{Mg-mgsin\\theta}{mg\\cos\\theta}$",
    )


def test_gaokao_whole_folder(store):
    questions, quarantined = read(GAOKAO_SPEC, store)
    assert (len(questions), len(quarantined)) == (223, 119)
    # several images: a question whose pictures are its options (image_options says how to read them)
    assert by_reason(quarantined) == {"several answers": 69, "several images": 49, "no options in the text": 1}
    assert collections.Counter((x.subject, x.skill) for x in questions) == {
        ("science", "2010-2023-physics-mcqs"): 81, ("science", "2010-2023-chemistry-mcqs"): 62,
        ("math", "2010-2023-math-mcqs"): 61, ("science", "2010-2023-biology-mcqs"): 19,
    }
    got = {x.source_key: x for x in questions}
    table = got["2010-2023_Chemistry_MCQs.json#12"]  # the options are the rows of the question's table
    assert (table.choices, table.answer_idx) == (("A", "B", "C", "D"), 3) and table.problem.endswith("\\end{tabular}")
    curves = got["2010-2023_Biology_MCQs.json#0"]
    assert curves.problem.endswith("该动物血液中血红蛋白含量随水温变化趋势的曲线是 ( )")
    assert (curves.choices, curves.answer_idx) == (("甲", "乙", "丙", "丁"), 0)
    assert store.get(curves.problem_image) == (
        GAOKAO / "2010-2023_Biology_MCQs" / "2010-2023_Biology_MCQs_0_0.png"
    ).read_bytes()
    inline = got["2010-2023_Math_MCQs.json#1"]  # "( )A. $\frac{5}{4}$B. ..." on one line
    assert inline.problem.endswith("则输出的数等于 ( )")
    assert inline.choices == ("$\\frac{5}{4}$", "$\\frac{4}{5}$", "$\\frac{6}{5}$", "$\\frac{5}{6}$")
    assert inline.answer_idx == 3
    assert store.get(inline.problem_image) == (GAOKAO / "2010-2023_Math_MCQs" / "2010-2023_Math_MCQs_1_0.png").read_bytes()
    details = {e.source_key: (e.reason, e.detail) for e in quarantined}
    assert details["2010-2023_Physics_MCQs.json#7"] == ("several answers", "'BD'")
    assert details["2010-2023_Chemistry_MCQs.json#0"] == ("several images", "4 images and no options (see image_options)")
    # options in the text and two figures (front and top views): one figure, joined in source order
    views = got["2010-2023_Math_MCQs.json#20"]
    assert (views.choices, views.answer_idx) == (("1", "2", "4", "8"), 1)
    assert store.get(views.problem_image) == join_pictures(gaokao_pictures("Math", 20))
    # the labels sit inside broken math ("$A ： \\frac{…}+$ 表高B： …"): no run a reader can be sure of
    assert details["2010-2023_Math_MCQs.json#60"] == ("no options in the text", None)


def readme_spec(corpus: str) -> str:
    """The README's source spec for a corpus of ../shared/corpora, as printed there."""
    readme = (ROOT / "README.md").read_text()
    (spec,) = re.findall(rf'--source "(json:\.\./shared/corpora/{corpus}/[^"]+)"', readme)
    return spec.replace("../shared/corpora", str(CORPORA))


def test_wemath_whole_file_as_the_readme_maps_it(store):
    """We-Math's options are one text in a field of their own (``options_in_text=option``),
    separated by ``;``: no option keeps a separator, so the one option without ``;`` (never the
    key) no longer stands out; rows the source garbled are quarantined, each with its reason."""
    questions, quarantined = read(readme_spec("wemath"), store)
    assert (len(questions), len(quarantined)) == (1729, 11)
    assert by_reason(quarantined) == {HELD_LABEL: 1, "identical options": 5, "more options than max_options=5": 5}
    options = [c for q in questions for c in q.choices]
    assert len(options) == 8086 and not [c for c in options if c[-1] in ";,|；，" or c[0] in ";,|；，"]
    got = {x.source_key: x for x in questions}
    first = got["testmini.json#0"]  # 2steps_1
    assert first.problem == "According to the diagram and the length information provided: OA = ( ) m, AB = ( ) m"
    assert (first.choices, first.answer_idx) == (("300, 400", "400, 300", "3000, 4000", "4000, 3000", "No correct answer"), 2)
    assert store.get(first.problem_image) == (WEMATH.parent / "2steps" / "image" / "1-1.png").read_bytes()
    assert got["testmini.json#1"].choices[3] == "30, 50, 40."  # a full stop is the option's own
    # 3steps_156: the letters ending options A and B are the angles ABE and ABC, not labels
    assert (got["testmini.json#1565"].choices, got["testmini.json#1565"].answer_idx) == (
        ("There is an obtuse angle ∠AB;E.", "There is an obtuse angle ∠AB;C.", "There is no obtuse angle.",
         "It cannot be determined.", "No correct answer"), 1)
    assert [len(got[f"testmini.json#{i}"].choices) for i in (101, 767, 821, 1730)] == [4, 4, 4, 5]
    details = {e.source_key: (e.reason, e.detail) for e in quarantined}
    # 2steps_313: the key's text (B) is also option D
    assert details["testmini.json#312"] == ("identical options", "options 2 and 4: 'Surface area of A < Surface area of B'")
    # 2steps_94: the fourth option is labelled F (no D or E): C's text holds it
    assert details["testmini.json#93"] == (HELD_LABEL, "option C: ' No.; F. No correct answer'")
    assert {k: d for k, (reason, d) in details.items() if reason.startswith("more options")} == {
        "testmini.json#182": "7 options", "testmini.json#449": "6 options", "testmini.json#809": "6 options",
        "testmini.json#1208": "6 options", "testmini.json#1404": "7 options",
    }


def test_options_field_mappings(tmp_path, store):
    """``options_in_text=FIELD`` and ``choices=FIELD`` read a text of labelled options alike;
    ``max_options`` lowers the option limit and names itself in the quarantine reason."""
    rows = [
        {"q": "Which is a diameter?", "option": "A. Radius;B. Diameter;C. Cannot be determined; D. No correct answer", "answer": "B"},
        {"q": "Three?", "option": "A. 1; B. 2; C. 3", "answer": "C"},
        {"q": "Listed", "option": ["x;", "y"], "answer": "A"},  # a list stays a list, as given
        {"q": "Stem in it", "option": "Pick: A. 1; B. 2", "answer": "A"},
        {"q": "No labels", "option": "1; 2; 3", "answer": "A"},
        {"q": "Twice", "option": "A. 12 cm; B. 12  cm;C. 13 cm", "answer": "A"},
    ]
    write_json(tmp_path / "d" / "rows.json", rows)
    base = f"json:{tmp_path / 'd'}?problem=q&answer_format=letter&subject='math'&skill='s'"
    for mapping in ("options_in_text=option", "choices=option"):
        questions, quarantined = read(f"{base}&{mapping}", store)
        assert [(q.problem, q.choices, q.answer_idx) for q in questions] == [
            ("Which is a diameter?", ("Radius", "Diameter", "Cannot be determined", "No correct answer"), 1),
            ("Three?", ("1", "2", "3"), 2),
            ("Listed", ("x;", "y"), 0),
        ]
        assert [(e.reason, e.detail) for e in quarantined] == [
            ("text before option A in the options text", "Pick:"),
            ("no labelled options in the options text", "1; 2; 3"),
            ("identical options", "options 1 and 2: '12 cm'"),
        ]
    questions, quarantined = read(f"{base}&options_in_text=option&max_options=3", store)
    assert [q.problem for q in questions] == ["Three?", "Listed"]
    assert ("more options than max_options=3", "4 options") in [(e.reason, e.detail) for e in quarantined]
    for bad in ("7", "1", "many"):
        with pytest.raises(ImportSourceError, match=f"max_options='{bad}' in json mapping: expected a number from 2 to 5"):
            iter_import_records(parse_source_spec(f"{base}&options_in_text=option&max_options={bad}"), store)
    with pytest.raises(ImportSourceError, match="options_in_text=option reads the options from the text; drop choices="):
        iter_import_records(parse_source_spec(f"{base}&options_in_text=option&choices=option"), store)
    _, quarantined = read(f"{base}&options_in_text=options", store)  # misspelt: no row has it
    assert {e.reason for e in quarantined} >= {MAPPED_FIELD_UNUSED}


# ---------------------------------------------------------------- options drawn as pictures


def on_white(data: bytes) -> Image.Image:
    rgba = Image.open(io.BytesIO(data)).convert("RGBA")
    white = Image.new("RGBA", rgba.size, "white")
    return Image.alpha_composite(white, rgba).convert("RGB")


def gaokao_pictures(subject: str, index: int) -> list[bytes]:
    folder = GAOKAO / f"2010-2023_{subject}_MCQs"
    return [path.read_bytes() for path in sorted(folder.glob(f"2010-2023_{subject}_MCQs_{index}_*.png"))]


def assert_joined(joined: bytes, pictures: list[bytes]) -> None:
    """``joined`` shows every picture, pixel for pixel, where picture_layout puts it."""
    shown = [on_white(p) for p in pictures]
    corners, size = picture_layout([im.size for im in shown])
    figure = Image.open(io.BytesIO(joined))
    assert figure.size == size
    for im, (x, y) in zip(shown, corners):
        assert figure.crop((x, y, x + im.width, y + im.height)).tobytes() == im.tobytes()


def test_gaokao_option_pictures_labelled(store):
    """GAOKAO-MM draws each option picture with its own label, in no fixed order (Chemistry #0
    lists C, B, A, D; the problem figure comes first or last): ``labelled:4`` joins the
    pictures into the figure and makes the options the labels, so the key stays right."""
    questions, quarantined = read(f"{GAOKAO_SPEC}&image_options=labelled:4", store)
    assert (len(questions), len(quarantined)) == (268, 74)
    assert by_reason(quarantined) == {"several answers": 73, "no options in the text": 1}
    got = {x.source_key: x for x in questions}
    scrambled = got["2010-2023_Chemistry_MCQs.json#0"]  # pictures drawn C, B, A, D; key C
    assert scrambled.problem.endswith("变化的示意图正确的是 ( )")
    assert (scrambled.choices, scrambled.choice_images, scrambled.answer_idx) == (("A", "B", "C", "D"), None, 2)
    assert_joined(store.get(scrambled.problem_image), gaokao_pictures("Chemistry", 0))
    figure_last = got["2010-2023_Chemistry_MCQs.json#27"]  # A, C, B, D, then the apparatus; key D
    assert (figure_last.choices, figure_last.answer_idx) == (("A", "B", "C", "D"), 3)
    assert_joined(store.get(figure_last.problem_image), gaokao_pictures("Chemistry", 27))
    figure_first = got["2010-2023_Math_MCQs.json#3"]  # the two views, then A to D; key D
    assert figure_first.answer_idx == 3 and len(gaokao_pictures("Math", 3)) == 5
    assert_joined(store.get(figure_first.problem_image), gaokao_pictures("Math", 3))
    details = {e.source_key: (e.reason, e.detail) for e in quarantined}
    assert details["2010-2023_Physics_MCQs.json#9"] == ("several answers", "'BC'")  # 5 pictures, key BC
    panels = got["2010-2023_Physics_MCQs.json#165"]  # text options and the figures (a), (b), (c), joined in order
    assert panels.choices[0] == "图 (c) 是用玻璃管获得的图像" and panels.answer_idx == 0
    assert_joined(store.get(panels.problem_image), gaokao_pictures("Physics", 165))
    # the same input joins to the same bytes
    again, _ = read(f"json:{GAOKAO / '2010-2023_Chemistry_MCQs.json'}?{GAOKAO_MAPPING}&image_options=labelled:4", store)
    assert {x.source_key: x.problem_image for x in again}["2010-2023_Chemistry_MCQs.json#0"] == scrambled.problem_image


def test_gaokao_option_pictures_ordered(store):
    """``ordered:4`` reads the pictures as options in their order (the first of five is the
    figure): right for Math #3 and #6, whose pictures are in option order."""
    questions, _ = read(f"json:{GAOKAO / '2010-2023_Math_MCQs.json'}?{GAOKAO_MAPPING}&image_options=ordered:4", store)
    got = {x.source_key: x for x in questions}
    views = got["2010-2023_Math_MCQs.json#3"]
    pictures = gaokao_pictures("Math", 3)
    assert store.get(views.problem_image) == pictures[0]
    assert [store.get(h) for h in views.choice_images] == pictures[1:]
    assert (views.choices, views.answer_idx) == (None, 3)
    graphs = got["2010-2023_Math_MCQs.json#6"]  # four graphs and no figure; key B
    assert graphs.problem_image is None and graphs.answer_idx == 1
    assert [store.get(h) for h in graphs.choice_images] == gaokao_pictures("Math", 6)


def test_image_options_rules(tmp_path, store):
    for i, color in enumerate(["red", "green", "blue", "black", "white"]):
        (tmp_path / f"{i}.png").write_bytes(png(color, (10 + i, 8)))
    transparent = io.BytesIO()
    Image.new("RGBA", (6, 6), (0, 0, 0, 0)).save(transparent, format="PNG")
    (tmp_path / "clear.png").write_bytes(transparent.getvalue())
    rows = [
        q("<image 4> Which graph?", options=None, image=["0.png", "1.png", "2.png", "3.png"], answer="B"),
        q("Which with figure?", options=None, image=[f"{i}.png" for i in range(5)], answer="A"),
        q("Three pictures?", options=None, image=["0.png", "1.png", "2.png"]),
        q("Two figures and text options", image=["0.png", "1.png"], options=["red", "green"]),
        q("Six pictures?", options=None, image=[f"{i}.png" for i in range(5)] + ["0.png"]),
        q("Clear?", options=None, image=["clear.png", "0.png", "1.png", "2.png"], answer="D"),
        q("Two pictures and options a, b", image=["0.png", "1.png"]),  # the pictures may be options a and b
    ]
    data = write_json(tmp_path / "q.json", rows)
    questions, quarantined = read(f"json:{data}?image_options=labelled:4", store)
    got = {x.source_key: x for x in questions}
    assert sorted(got) == ["q.json#0", "q.json#1", "q.json#3", "q.json#5"]  # #3: its figures joined
    assert (got["q.json#0"].problem, got["q.json#0"].choices, got["q.json#0"].answer_idx) == ("Which graph?", ("A", "B", "C", "D"), 1)
    assert_joined(store.get(got["q.json#1"].problem_image), [png(c, (10 + i, 8)) for i, c in enumerate(["red", "green", "blue", "black", "white"])])
    corners, _ = picture_layout([(6, 6), (10, 8), (11, 8), (12, 8)])
    clear = Image.open(io.BytesIO(store.get(got["q.json#5"].problem_image))).convert("RGB")
    assert clear.crop((corners[0][0], corners[0][1], corners[0][0] + 6, corners[0][1] + 6)).getcolors() == [(36, (255, 255, 255))]
    assert [(e.source_key, e.reason, e.detail) for e in quarantined] == [
        ("q.json#2", PICTURES_DO_NOT_FIT, "3 pictures; image_options=labelled:4 takes 4 or 5"),
        ("q.json#4", PICTURES_DO_NOT_FIT, "6 pictures; image_options=labelled:4 takes 4 or 5"),
        ("q.json#6", PICTURES_DO_NOT_FIT, "2 pictures; image_options=labelled:4 takes 4 or 5"),
    ]
    questions, quarantined = read(f"json:{data}?image_options=ordered:4", store)
    got = {x.source_key: x for x in questions}
    assert got["q.json#1"].choice_images == tuple(store.put(png(c, (10 + i, 8))).image_hash for i, c in enumerate(["green", "blue", "black", "white"], 1))
    assert store.get(got["q.json#1"].problem_image) == png("red", (10, 8))
    questions, quarantined = read(f"json:{data}", store)  # the default: no picture is an option
    assert [x.source_key for x in questions] == ["q.json#3"] and {e.reason for e in quarantined} == {"several images"}
    assert quarantined[0].detail == "4 images and no options (see image_options)"
    assert quarantined[-1].detail == "2 images and options that only name pictures (see image_options)"
    for bad in ("labelled", "labelled:6", "ordered:1", "auto", "labelled:four"):
        with pytest.raises(ImportSourceError, match="image_options="):
            iter_import_records(parse_source_spec(f"json:{data}?image_options={bad}"), store)


def test_picture_layout_is_a_grid_in_source_order():
    corners, size = picture_layout([(10, 5), (20, 7), (4, 4), (3, 3), (8, 9)])
    gap = 16
    assert corners == [(gap, gap), (gap + 10 + gap, gap), (gap + 10 + gap + 20 + gap, gap),
                       (gap, gap + 7 + gap), (gap + 3 + gap, gap + 7 + gap)]
    assert size == (gap + 10 + gap + 20 + gap + 4 + gap, gap + 7 + gap + 9 + gap)


# ---------------------------------------------------------------- stemforge build on slices


@pytest.mark.slow
def test_build_over_slices_of_both_corpora(tmp_path):
    whole = json.loads((SCEMQA / "multiple_choice.json").read_text(encoding="utf-8"))
    slice_file = write_json(tmp_path / "scemqa" / "slice.json", {subject: rows[:6] for subject, rows in whole.items()})
    scemqa = f"json:{slice_file}?image_root={SCEMQA.resolve()}&{SCEMQA_MAPPING}"
    gaokao = f"python:{SOURCES_MODULE}:gaokao_slice?per_file=7&image_root={GAOKAO.resolve()}&options_in_text=1&image=picture"
    home = tmp_path / "home"
    result = stemforge_build(home, scemqa, gaokao)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = dict(run_query(DataHome(home), "SELECT source, count(*) FROM questions GROUP BY 1").rows)
    assert rows[scemqa] >= 20 and rows[gaokao] >= 10, rows
    raw = dict(run_query(DataHome(home), "SELECT source, count(*) FROM raw_questions GROUP BY 1").rows)
    assert raw == {scemqa: 24, gaokao: 20}, raw
    reasons = run_query(DataHome(home), "SELECT reason, count(*) FROM quarantine WHERE stage = 'import' GROUP BY 1 ORDER BY 1").rows
    assert reasons == [("several answers", 1), ("several images", 7)], reasons


@pytest.mark.slow
def test_build_of_an_unusable_source_ends_non_zero_with_one_line(tmp_path):
    cases = {
        # GAOKAO's picture paths ("../Data/...") already resolve from the file's folder; a root
        # one level up sends them outside it
        f"json:{GAOKAO}?{GAOKAO_MAPPING}&image_root=..": "0 of 342 records usable; commonest reason: image path escapes the folder (223)",
        f"json:{SCEMQA / 'multiple_choice.json'}?{SCEMQA_MAPPING}&grade=Level": "mapped field grade=Level is in none of its 840 records",
        f"python:{SOURCES_MODULE}:nothing": "no records",
    }
    for i, (source, message) in enumerate(cases.items()):
        result = stemforge_build(tmp_path / f"home{i}", source)
        assert result.returncode == 1, result.stdout[-2000:]
        lines = [line for line in result.stdout.splitlines() if f"source {source}" in line]
        assert lines == [f"  raw_questions: source {source}: {message}"], result.stdout[-2000:]
