"""Layouts that real corpora use (issue 29, item 5): a JSON object of records keyed by id,
list-valued fields (``skill=skill[0]``, lists of texts joined), options drawn only in the
figure (``figure_options=named`` / ``A-D``, ``choices='A,B,C,D'``), ``<image N>`` placeholders
checked only against numbered picture fields; and the README's examples of them, run as
printed."""

from __future__ import annotations

import ast
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.ingest.importers import ImportSourceError, iter_import_records
from pipelines.ingest.importers.figure_options import named_letters
from pipelines.ingest.importers.jsonl import OBJECT_OF_RECORDS
from pipelines.ingest.spec import parse_source_spec
from pipelines.store.images import ImageStore
from pipelines.store.warehouse import run_query
from pipelines.store.home import DataHome
from support.images import real_png
from support.importing import read_source

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


read = read_source


def pictures(folder: Path, *names: str) -> None:
    for i, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(real_png(i + 1))


def record(question: str, **fields) -> dict:
    return {"question": question, "options": ["1", "2", "3"], "answer": 0, "image": "a.png", **fields}


# ---------------------------------------------------------------- an object of records keyed by id


def test_an_object_of_records_keyed_by_id(tmp_path, store):
    pictures(tmp_path, "a.png")
    keyed = {"v1_0": record("Q0", subject="math", skill="s"), "v1_1": record("Q1", subject="math", skill="s", id=71),
             "v1_2": {"question": "Q2", "subject": "math", "skill": "s"}}
    (tmp_path / "keyed.json").write_text(json.dumps(keyed))
    questions, quarantined = read(f"json:{tmp_path / 'keyed.json'}", store)
    assert [(k, x.problem, x.extra) for k, x in questions.items()] == [
        ("keyed.json#v1_0", "Q0", {"id": "v1_0"}),  # no id field: the key is the id
        ("keyed.json#v1_1", "Q1", {"id": 71}),  # an id field wins
    ]
    assert quarantined == {"keyed.json#v1_2": ("not multiple choice: no options", None)}
    # the key is _key; a mapped id the record lacks falls back to the key too
    questions, _ = read(f"json:{tmp_path / 'keyed.json'}?skill=_key&id=qid", store)
    assert [(x.skill, x.extra) for x in questions.values()] == [("v1-0", {"id": "v1_0"}), ("v1-1", {"id": "v1_1"})]
    # records=KEY reaches an object of records too
    (tmp_path / "nested.json").write_text(json.dumps({"version": 2, "data": {"items": keyed}}))
    questions, _ = read(f"json:{tmp_path / 'nested.json'}?records=data.items", store)
    assert list(questions) == ["nested.json#v1_0", "nested.json#v1_1"]


def test_objects_that_are_not_records_keyed_by_id_keep_their_old_reading(tmp_path, store):
    pictures(tmp_path, "a.png")
    rows = [record("Q0", subject="math", skill="s")]
    # an object of arrays (SceMQA's layout): _key is the array's key, scalars beside it ignored
    (tmp_path / "arrays.json").write_text(json.dumps({"keywords": "x", "Math": rows, "Physics": rows}))
    questions, _ = read(f"json:{tmp_path / 'arrays.json'}?skill=_key", store)
    assert [(k, x.skill) for k, x in questions.items()] == [("arrays.json#Math/0", "math"), ("arrays.json#Physics/0", "physics")]
    # an object with arrays and objects: the arrays are the records, as before
    (tmp_path / "mixed.json").write_text(json.dumps({"meta": {"name": "set"}, "rows": rows}))
    assert list(read(f"json:{tmp_path / 'mixed.json'}", store)[0]) == ["mixed.json#rows/0"]
    # a wrapper of arrays or of objects has no text of its own: no record, refused as before
    (tmp_path / "wrapped.json").write_text(json.dumps({"Math": {"questions": rows}, "Physics": {"questions": rows}}))
    questions, quarantined = read(f"json:{tmp_path / 'wrapped.json'}", store)
    assert not questions and quarantined == {"wrapped.json": ("JSON object without arrays of records", "Math, Physics")}
    assert len(read(f"json:{tmp_path / 'wrapped.json'}?records=Math.questions", store)[0]) == 1
    # one value that is not an object: not an object of records
    (tmp_path / "scalar.json").write_text(json.dumps({"version": "1", "v1_0": rows[0]}))
    assert read(f"json:{tmp_path / 'scalar.json'}", store)[1]["scalar.json"][0] == "JSON object without arrays of records"


def test_a_jsonl_line_holding_an_object_of_records_says_to_read_it_with_json(tmp_path, store):
    pictures(tmp_path, "a.png")
    keyed = {f"v1_{i}": record(f"Q{i}", subject="math", skill="s") for i in range(448)}
    (tmp_path / "keyed.json").write_text(json.dumps(keyed))
    questions, quarantined = read(f"jsonl:{tmp_path / 'keyed.json'}", store)
    assert not questions and quarantined == {"keyed.json#0": (OBJECT_OF_RECORDS, "line 1: 448 records")}
    assert len(read(f"json:{tmp_path / 'keyed.json'}", store)[0]) == 448


# ---------------------------------------------------------------- list-valued fields


def test_list_valued_fields_by_index_or_joined(tmp_path, store):
    pictures(tmp_path, "a.png", "b.png")
    rows = [
        record("Q0", subject=["math"], skill=["inductive"], media={"images": ["x.png", "b.png"]}),
        record("Q1", subject="math", skill=["spatial", "inductive"], media={"images": ["b.png"]}),
        record(["First line.", "Second line?"], subject="math", skill=[], grade=[3]),
    ]
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions, quarantined = read(f"jsonl:{data}?skill=skill[0]&image=media.images[1]", store)
    assert [(k, x.skill, x.problem_image) for k, x in questions.items()] == [
        ("q.jsonl#0", "inductive", store.put(real_png(2)).image_hash),
        ("q.jsonl#1", "spatial", None),  # a list too short has no such item: no picture
    ]
    assert quarantined == {"q.jsonl#2": ("missing skill", None)}  # skill[0] of []
    questions, quarantined = read(f"jsonl:{data}", store)
    assert [(x.skill, x.subject) for x in questions.values()] == [("inductive", "math"), ("spatial-inductive", "math")]
    assert quarantined == {"q.jsonl#2": ("missing skill", None)}  # an empty list is no value
    questions, _ = read(f"jsonl:{data}?skill='s'", store)
    assert questions["q.jsonl#2"].problem == "First line.\nSecond line?" and questions["q.jsonl#2"].grade == "grade-3"


def test_an_index_into_a_field_no_row_has_long_enough_fails_the_source(tmp_path, store):
    pictures(tmp_path, "a.png")
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps(record("Q0", subject="math", skill=["s"])) + "\n")
    _, quarantined = read(f"jsonl:{data}?grade=skill[3]", store)
    assert quarantined["q.jsonl"] == ("mapped field in no record", "grade=skill[3]")


# ---------------------------------------------------------------- options drawn in the figure


@pytest.mark.parametrize("text, letters", [
    ("Which figure completes the pattern? Select from A–E.", "ABCDE"),
    ("Choose A, B, C or D.", "ABCD"),
    ("Answer with A, B, C, or D.", "ABCD"),
    ("Which one? (Choose A, B, C, D or E)", "ABCDE"),
    ("options A-D", "ABCD"),
    ("choose from A to D", "ABCD"),
    ("Select from (A)-(E)", "ABCDE"),
    ("从A~D中选择", "ABCD"),
    ("选项A-D中哪个正确", "ABCD"),
    ("Pick A or B.", "AB"),
    # points, segments and paths are no options
    ("Points A, B, C and D lie on a circle. Which is right?", None),
    ("Choose the shortest path from A to D.", None),
    ("Which option shows segment A-C correctly?", None),
    ("Choose points A, B and C such that x", None),
    ("The segment A-E is 3 cm. Which?", None),
    ("Select A.", None),
    ("Choose one: A-F", None),  # more than five options
    ("options a-d", None),
])
def test_letters_a_text_names(text, letters):
    assert named_letters(text) == (list(letters) if letters else None)


def test_options_drawn_in_the_figure(tmp_path, store):
    pictures(tmp_path, "a.png", "b.png")
    rows = [
        {"question": "Which figure completes the pattern? Select from A–E.", "answer": "C", "image": "a.png"},
        {"question": "Which figure is next?", "answer": "B", "image": "a.png"},
        {"question": "Which is it? Choose A, B, C or D.", "answer": "A", "image": ["a.png", "b.png"]},
        {"question": "Which is it? Choose A, B, C or D.", "answer": "A"},  # no figure to draw them in
        {"question": "Which is larger? (A) 3 (B) 4", "answer": "B", "image": "a.png"},  # options of its own
    ]
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = "subject='math'&skill='s'&options_in_text=1&answer_format=letter"
    questions, quarantined = read(f"jsonl:{data}?{common}&figure_options=named", store)
    assert [(k, x.choices, x.answer_idx) for k, x in questions.items()] == [
        ("q.jsonl#0", ("A", "B", "C", "D", "E"), 2), ("q.jsonl#4", ("3", "4"), 1),
    ]
    assert questions["q.jsonl#0"].problem == rows[0]["question"]  # the text stays whole
    assert quarantined == {
        "q.jsonl#1": ("no options in the text", None), "q.jsonl#2": ("several images", "2 images and no options (see image_options)"),
        "q.jsonl#3": ("no options in the text", None),
    }
    questions, quarantined = read(f"jsonl:{data}?{common}&figure_options=A-D", store)
    assert [(k, x.choices, x.answer_idx) for k, x in questions.items()] == [
        ("q.jsonl#0", ("A", "B", "C", "D"), 2), ("q.jsonl#1", ("A", "B", "C", "D"), 1), ("q.jsonl#4", ("3", "4"), 1),
    ]
    # the same letters for every row as a constant list
    questions, _ = read(f"jsonl:{data}?subject='math'&skill='s'&choices='A,B,C,D'", store)
    assert {x.choices for x in questions.values()} == {("A", "B", "C", "D")}
    assert [x.answer_idx for x in questions.values()] == [2, 1, 0, 1]  # row 2 has two pictures
    for bad in ("A-F", "A", "letters", "B-D"):
        with pytest.raises(ImportSourceError, match="figure_options="):
            iter_import_records(parse_source_spec(f"jsonl:{data}?figure_options={bad}"), store)


# ---------------------------------------------------------------- placeholders


def test_placeholders_with_one_mapped_picture_are_removed_unchecked(tmp_path, store):
    """A competition corpus whose one picture holds both panels its text names lost 306 of
    1,532 questions to ``placeholder names an image the question does not have``."""
    pictures(tmp_path, "a.png")
    rows = [record("<image1> shows a gear train and <image2> its speeds. Which gear turns fastest?", subject="math",
                   skill="s", options=["P <image 2>", "Q", "R"])]
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps(rows[0]) + "\n")
    questions, quarantined = read(f"jsonl:{data}", store)
    assert not quarantined
    assert questions["q.jsonl#0"].problem == "shows a gear train and its speeds. Which gear turns fastest?"
    assert questions["q.jsonl#0"].choices == ("P", "Q", "R")


def _parquet_with_pictures(folder: Path, columns: dict) -> Path:
    folder.mkdir()
    picture = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    fields = [pa.field(name, picture if name.startswith("image") else pa.string()) for name in columns]
    table = pa.Table.from_pydict(columns, schema=pa.schema(fields))
    pq.write_table(table, folder / "train-00000-of-00001.parquet")
    return folder


def test_hf_checks_placeholders_only_against_numbered_picture_columns(tmp_path, store):
    one = {"bytes": real_png(1), "path": None}
    rows = {"question": ["Compare <image 1> and <image 2>."], "options": ["['same', 'different']"], "answer": ["A"],
            "subject": ["math"], "skill": ["s"]}
    # one image column: the numbers prove nothing
    single = _parquet_with_pictures(tmp_path / "single", {**rows, "image": [one]})
    questions, quarantined = read(f"hf:{single}", store)
    assert not quarantined and [x.problem for x in questions.values()] == ["Compare and."]
    # numbered columns (MMMU): <image 2> names image_2, which the row lacks
    numbered = _parquet_with_pictures(tmp_path / "numbered", {**rows, "image_1": [one], "image_2": [None]})
    questions, quarantined = read(f"hf:{numbered}", store)
    assert not questions
    assert list(quarantined.values()) == [("placeholder names an image the question does not have", "<image 2>")]


# ---------------------------------------------------------------- spec and sources


def test_sources_does_not_import_spec():
    """``pipelines.ingest.spec`` imports ``pipelines.ingest.sources``; never the reverse, not
    even for type checking."""
    tree = ast.parse((ROOT / "pipelines" / "ingest" / "sources.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not any(name and name.endswith("ingest.spec") for name in imported)
    from pipelines.ingest import sources, spec

    assert spec.SourceSpec is sources.SourceSpec


# ---------------------------------------------------------------- the README's examples, as printed

EXAMPLE = re.compile(
    r"```sh\n# (?P<file>[\w.]+\.(?:jsonl?|csv)): [^\n]*\n(?P<data>(?:# [ {\w][^\n]*\n)+)"
    r"\.venv/bin/stemforge build --source \"(?P<spec>[^\"]+)\"(?: --home \S+)?\n# -> [^\n]*\n```"
)


def readme_examples() -> list[re.Match]:
    return list(EXAMPLE.finditer(README))


def write_example(match: re.Match, folder: Path) -> None:
    lines = [line[2:] for line in match.group("data").splitlines()]
    if match.group("file").endswith(".jsonl"):
        rows = [json.loads(line) for line in lines]
    elif match.group("file").endswith(".csv"):
        rows = list(csv.DictReader(lines))
    else:
        rows = list(json.loads("\n".join(lines)).values())
    (folder / match.group("file")).write_text("\n".join(lines) + "\n", encoding="utf-8")
    pictures(folder, *sorted({row["image"] for row in rows}))


def test_the_readme_layout_examples_import_as_they_say(tmp_path, store):
    examples = {m.group("file"): m for m in readme_examples()}
    assert set(examples) == {"puzzles.json", "nets.jsonl", "panels.jsonl", "mmbench.csv", "trivia.jsonl", "ranked.jsonl"}
    got = {}
    for name, match in examples.items():
        write_example(match, tmp_path)
        kind, _, rest = match.group("spec").partition(":")
        questions, quarantined = read(f"{kind}:{tmp_path / rest}", store)
        assert not quarantined, (name, quarantined)
        got[name] = list(questions.values())
    v1_0, v1_1 = got["puzzles.json"]
    assert (v1_0.choices, v1_0.answer_idx, v1_0.skill, v1_0.extra) == (tuple("ABCDE"), 2, "inductive", {"id": "v1_0"})
    assert (v1_1.choices, v1_1.answer_idx, v1_1.skill, v1_1.extra) == (tuple("ABCD"), 0, "spatial", {"id": "v1_1"})
    assert [(x.choices, x.answer_idx, x.skill) for x in got["nets.jsonl"]] == [(tuple("ABCD"), 1, "spatial-nets"),
                                                                               (tuple("ABCD"), 3, "spatial-nets")]
    [panels] = got["panels.jsonl"]
    assert panels.problem == "shows a gear train and its speeds. Which gear turns fastest?" and panels.answer_idx == 2
    shapes, rain = got["mmbench.csv"]
    assert (shapes.problem, shapes.choices, shapes.answer_idx, shapes.extra) == (
        "Which shape has the most sides?", ("triangle", "square", "hexagon"), 2, {"id": "11"})
    assert (rain.problem, rain.choices, rain.answer_idx, rain.subject) == (
        "The chart shows rainfall.\nWhich month was wettest?", ("May", "June"), 1, "science")
    gold, square = got["trivia.jsonl"]
    assert (gold.problem, gold.choices, gold.answer_idx) == (
        'Which of these is the chemical symbol for "gold"?', ("Au", "Ag", "Gd", "Go"), 0)
    assert (square.problem, square.choices[square.answer_idx]) == ("What is x if x² = 9 and x > 0?", "3")
    assert [x.choices[x.answer_idx] for x in got["ranked.jsonl"]] == ["R", "red"]


@pytest.mark.slow
def test_the_readme_layout_examples_build_as_printed(tmp_path):
    """The build commands, run in a folder holding the example files, as a user would."""
    examples = readme_examples()
    for match in examples:
        write_example(match, tmp_path)
    stemforge = Path(sys.executable).parent / "stemforge"
    command = [str(stemforge), "build", "--home", str(tmp_path / "home"), "--quiet", "--select", "group:ingest"]
    for match in examples:
        command += ["--source", match.group("spec")]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = run_query(DataHome(tmp_path / "home"), "SELECT source, count(*) FROM raw_questions GROUP BY 1 ORDER BY 1").rows
    assert sorted(n for _, n in rows) == [1, 2, 2, 2, 2, 2]
