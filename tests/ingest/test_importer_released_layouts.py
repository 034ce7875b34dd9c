"""Layouts of released corpora, built here from SceMQA's real texts and figures and read back as
``json:`` reads the original: ``csv:`` and ``tsv:`` sources, options spread over fields
(``choices=[A,B,C,D]``), option lists written as list literals in a text and pictures written in
their field (base64, data URIs), as VLMEvalKit ships benchmarks (MMBench, SEED-Bench, AI2D,
MMStar) and the Hub holds MMBench; and a folder per question (IconQA's ``<id>/data.json``)."""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

import pytest

from pipelines.ingest.importers import ImportSourceError, iter_import_records
from pipelines.ingest.importers.paths import image_in_text
from pipelines.ingest.importers.rows import MAPPED_FIELD_UNUSED
from pipelines.ingest.spec import parse_source_spec
from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, RawQuestion
from support.corpora import SCEMQA_JSON
from support.images import real_png

SCEMQA = (f"json:{SCEMQA_JSON}?options_in_text=1&problem=Question&answer=Answer (final answer highlighted)"
          "&answer_format=letter&image=ImagePath&subject=_key&skill=_key")
LETTERS = "ABCDE"


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


def read(spec: str, store: ImageStore) -> tuple[list[RawQuestion], list[QuarantineEntry]]:
    records = list(iter_import_records(parse_source_spec(spec), store))
    return ([r for r in records if isinstance(r, RawQuestion)], [r for r in records if isinstance(r, QuarantineEntry)])


def shown(q: RawQuestion) -> tuple:
    return q.problem, q.choices, q.answer_idx, q.problem_image, q.subject, q.skill


def write(path: Path, rows: list[dict], delimiter: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def scemqa(tmp_path_factory):
    """SceMQA read by ``json:`` (the reference) and its pictures' bytes."""
    store = ImageStore(tmp_path_factory.mktemp("scemqa") / "images")
    questions, _ = read(SCEMQA, store)
    assert len(questions) == 833
    return questions, {q.problem_image: store.get(q.problem_image) for q in questions if q.problem_image}


def test_scemqa_as_a_vlmevalkit_tsv_reads_as_its_json(tmp_path, store, scemqa):
    """Every SceMQA question written as VLMEvalKit writes MMBench (options in columns A-E, empty
    where a question has fewer, an empty hint column, the picture as base64, once: a row showing
    a picture already written holds the index of the row that has it) comes back as the ``json:``
    reading of the original: the same texts, options, keys and picture bytes."""
    reference, pictures = scemqa
    rows, first_with = [], {}
    for i, q in enumerate(reference):
        # a picture is written once: a later row showing it holds the index of the row that has it
        has_it = first_with.setdefault(q.problem_image, str(1000 + i)) if q.problem_image else None
        rows.append({"index": str(1000 + i), "hint": "", "question": q.problem,
                     **{letter: q.choices[k] if k < len(q.choices) else "" for k, letter in enumerate(LETTERS)},
                     "answer": LETTERS[q.answer_idx], "category": q.subject, "l2-category": q.skill,
                     "image": "" if has_it is None else has_it if has_it != str(1000 + i)
                     else base64.b64encode(pictures[q.problem_image]).decode()})
    assert sum(not r["E"] for r in rows) > 100 and sum(bool(r["E"]) for r in rows) > 100  # both kinds are here
    named = [k for k, r in enumerate(rows) if 0 < len(r["image"]) <= 64]
    assert len(named) >= 5
    # and one picture held by a row further down than the row naming it
    k = named[0]
    holder = next(j for j, r in enumerate(rows) if r["index"] == rows[k]["image"])
    rows[k]["image"], rows[holder]["image"] = rows[holder]["image"], rows[k]["index"]
    write(tmp_path / "scemqa.tsv", rows, "\t")
    questions, quarantined = read(f"tsv:{tmp_path / 'scemqa.tsv'}?id=index&problem=[hint,question]&choices=[A,B,C,D,E]"
                                  "&subject=category&skill=l2-category&answer_format=letter", store)
    assert quarantined == []
    assert sorted(shown(q) for q in questions) == sorted(shown(q) for q in reference)
    assert [q.source_key for q in questions[:2]] == ["scemqa.tsv#0", "scemqa.tsv#1"]
    assert questions[0].extra == {"id": "1000"}
    assert all(store.get(q.problem_image) == pictures[q.problem_image] for q in questions if q.problem_image)


def test_scemqa_as_a_csv_of_list_literals_and_data_uris_reads_as_its_json(tmp_path, store, scemqa):
    """The same questions as a CSV whose options are one cell holding a JSON list (half of them)
    or a Python list (the others) and whose pictures are data URIs."""
    reference, pictures = scemqa
    rows = []
    for i, q in enumerate(reference):
        listed = json.dumps(list(q.choices), ensure_ascii=False) if i % 2 else repr(list(q.choices))
        picture = pictures.get(q.problem_image)
        rows.append({"question": q.problem, "options": listed, "answer": LETTERS[q.answer_idx], "category": q.subject,
                     "topic": q.skill,
                     "image": "data:image/png;base64," + base64.b64encode(picture).decode() if picture else ""})
    write(tmp_path / "scemqa.csv", rows, ",")
    questions, quarantined = read(f"csv:{tmp_path / 'scemqa.csv'}?choices=options&subject=category&skill=topic"
                                  "&answer_format=letter", store)
    assert quarantined == []
    assert [shown(q) for q in questions] == [shown(q) for q in reference]


def test_options_spread_over_fields_keep_their_letters(tmp_path, store):
    """``choices=[A,B,C,D]``: the k-th field is the k-th letter whatever its name; an empty field
    is no option and the others keep their letters, so an answer letter names the same text."""
    (tmp_path / "a.png").write_bytes(real_png(1))
    rows = [
        {"q": "Two of four", "A": "cat", "B": "dog", "C": "", "D": "", "answer": "B"},
        {"q": "A gap", "A": "1", "B": "2", "C": None, "D": "4", "answer": "D"},
        {"q": "NaN cells", "A": "x", "B": "y", "C": float("nan"), "D": float("nan"), "answer": "A"},
        {"q": "None at all", "A": "", "B": None, "answer": "A"},
    ]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r, allow_nan=True) for r in rows))
    questions, quarantined = read(f"jsonl:{tmp_path / 'rows.jsonl'}?problem=q&choices=[A,B,C,D]&subject='math'&skill='s'",
                                  store)
    assert [(q.problem, q.choices, q.answer_idx) for q in questions] == [
        ("Two of four", ("cat", "dog"), 1), ("A gap", ("1", "2", "4"), 2), ("NaN cells", ("x", "y"), 0)]
    assert [(e.reason, e.source_key) for e in quarantined] == [("not multiple choice: no options", "rows.jsonl#3")]
    # option1..option4 (CMMMU) are A..D; a text field joins its fields' values, skipping empty ones
    (tmp_path / "named.jsonl").write_text(json.dumps(
        {"context": "", "stem": "Which?", "option1": "p", "option2": "q", "answer": "B", "tags": "t"}) + "\n" + json.dumps(
        {"context": "Read the table.", "stem": "Which?", "option1": "p", "option2": "r", "answer": "A", "tags": "u"}))
    questions, _ = read(f"jsonl:{tmp_path / 'named.jsonl'}?problem=[context,stem]&choices=[option1,option2]"
                        "&skill=[tags,missing]&subject='math'", store)
    assert [(q.problem, q.choices, q.answer_idx, q.skill) for q in questions] == [
        ("Which?", ("p", "q"), 1, "t"), ("Read the table.\nWhich?", ("p", "r"), 0, "u")]
    # a field list none of whose fields any row has is reported like a misspelt field
    _, quarantined = read(f"jsonl:{tmp_path / 'named.jsonl'}?problem=stem&choices=[opt1,opt2]&subject='math'", store)
    assert {e.reason for e in quarantined} >= {MAPPED_FIELD_UNUSED}
    with pytest.raises(ImportSourceError, match=r"choices=\[A,,B\]: expected \[FIELD,FIELD,...\]"):
        iter_import_records(parse_source_spec(f"jsonl:{tmp_path / 'named.jsonl'}?choices=[A,,B]"), store)


def test_pictures_written_in_their_field(tmp_path):
    png = real_png(2)
    encoded = base64.b64encode(png).decode()
    assert image_in_text(encoded) == png
    assert image_in_text("\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))) == png  # MIME line breaks
    assert image_in_text("data:image/png;base64," + encoded) == png
    assert image_in_text("DATA:image/jpeg;base64," + encoded) == png
    # a path, however long, is a path: it holds a '.' or does not decode to a picture
    assert image_in_text("images/" + "a" * 100 + ".png") is None
    assert image_in_text("Math/1") is None
    assert image_in_text("QUJD" * 40) is None  # base64 of text, not of a picture
    assert image_in_text(encoded[:40]) is None  # too short to be a picture


def test_bad_delimited_files_lose_only_what_is_bad(tmp_path, store):
    header = "question,options,answer,image\n"
    good = 'Which?,"[""1"", ""2""]",A,a.png\n'
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.png").write_bytes(real_png(1))
    (tmp_path / "d" / "1-good.csv").write_text(header + good + "\n" + 'Or?,"A. x; B. y",B,a.png\n' + good)
    (tmp_path / "d" / "2-wide.csv").write_text(header + good + "Which?,[],A,a.png,extra\n" + good)
    (tmp_path / "d" / "3-twice.csv").write_text("question,answer,answer\n" + good)
    (tmp_path / "d" / "4-latin1.csv").write_bytes((header + good).encode() + "Caf\u00e9?,\"[1, 2]\",A,a.png\n".encode("latin-1"))
    (tmp_path / "d" / "5-missing.csv").write_text(header + 'Which?,"[""1"", ""2""]",A,' + "QUJD" * 40 + "\n")
    (tmp_path / "d" / "notes.txt").write_text("not read")
    questions, quarantined = read(f"csv:{tmp_path / 'd'}?subject='math'&skill='s'", store)
    assert [(q.source_key, q.problem, q.choices, q.answer_idx) for q in questions] == [
        ("1-good.csv#0", "Which?", ("1", "2"), 0), ("1-good.csv#1", "Or?", ("x", "y"), 1),
        ("1-good.csv#2", "Which?", ("1", "2"), 0),  # a blank line is no record
        ("2-wide.csv#0", "Which?", ("1", "2"), 0), ("2-wide.csv#2", "Which?", ("1", "2"), 0),
        ("4-latin1.csv#0", "Which?", ("1", "2"), 0),
    ]
    assert [(e.source_key, e.reason) for e in quarantined] == [
        ("2-wide.csv#1", "row has more cells than the header has columns"),
        ("3-twice.csv", "header names a column twice"),
        ("4-latin1.csv#1", "file is not UTF-8"),
        ("5-missing.csv#0", "image file not found"),
    ]
    # a tab-separated file read as csv: (and the other way round) says so
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "q.csv").write_text("question\toptions\tanswer\nWhich?\t[1, 2]\tA\n")
    (tmp_path / "t" / "q.tsv").write_text(header + good)
    _, quarantined = read(f"csv:{tmp_path / 't' / 'q.csv'}", store)
    assert [(e.reason, e.detail) for e in quarantined][0] == ("header has one column; the file looks tsv-separated", "read it as tsv:q.csv")
    _, quarantined = read(f"tsv:{tmp_path / 't' / 'q.tsv'}", store)
    assert [(e.reason, e.detail) for e in quarantined][0] == ("header has one column; the file looks csv-separated", "read it as csv:q.tsv")
    with pytest.raises(ImportSourceError, match="tsv: no .tsv files in"):
        iter_import_records(parse_source_spec(f"tsv:{tmp_path / 'd'}"), store)


def test_mmbench_on_the_hub_layout_reads_as_its_json(tmp_path, store, scemqa):
    """MMBench as the Hub holds it (lmms-lab/MMBench: ``hint``, ``question``, columns ``A``-``D``
    with None for absent options, ``answer``, an ``Image`` column) read by ``hf:`` with the same
    mapping as the TSV: SceMQA's first 40 four-option questions."""
    import datasets

    reference, pictures = scemqa
    chosen = [q for q in reference if len(q.choices) == 4 and q.problem_image][:40]
    rows = [{"index": i, "hint": None, "question": q.problem, "answer": LETTERS[q.answer_idx],
             **{letter: q.choices[k] for k, letter in enumerate("ABCD")}, "category": q.subject, "l2-category": q.skill,
             "image": {"bytes": pictures[q.problem_image], "path": None}} for i, q in enumerate(chosen)]
    assert chosen[0].answer_idx < 3
    rows[0]["D"] = None  # a three-option row
    features = datasets.Features({"index": datasets.Value("int64"), "hint": datasets.Value("string"),
                                  "question": datasets.Value("string"), "answer": datasets.Value("string"),
                                  **{letter: datasets.Value("string") for letter in "ABCD"},
                                  "category": datasets.Value("string"), "l2-category": datasets.Value("string"),
                                  "image": datasets.Image()})
    (tmp_path / "mmbench" / "data").mkdir(parents=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(tmp_path / "mmbench" / "data" / "dev-00000-of-00001.parquet")
    questions, quarantined = read(f"hf:{tmp_path / 'mmbench'}?id=index&problem=[hint,question]&choices=[A,B,C,D]"
                                  "&subject=category&skill=l2-category&answer_format=letter", store)
    assert quarantined == []
    assert [shown(q) for q in questions[1:]] == [shown(q) for q in chosen[1:]]
    problem, choices, *rest = shown(chosen[0])
    assert shown(questions[0]) == (problem, choices[:3], *rest)


def test_a_picture_in_a_cell_is_read_and_the_csv_limit_is_left_as_it_was(tmp_path, store):
    """A base64 picture longer than the csv module's 128 KiB field limit is read; the limit,
    which is the whole process's, is the same after the import."""
    from PIL import Image
    import io
    import numpy as np

    rng = np.random.default_rng(3)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (300, 300, 3), dtype=np.uint8)).save(buffer, format="PNG")
    picture = buffer.getvalue()
    assert len(base64.b64encode(picture)) > 131_072
    write(tmp_path / "big.tsv", [{"question": "Which?", "A": "x", "B": "y", "answer": "A",
                                  "image": base64.b64encode(picture).decode()}], "\t")
    limit = csv.field_size_limit()
    questions, quarantined = read(f"tsv:{tmp_path / 'big.tsv'}?choices=[A,B]&subject='math'&skill='s'", store)
    assert quarantined == [] and store.get(questions[0].problem_image) == picture
    assert csv.field_size_limit() == limit


def test_a_folder_per_question_reads_as_its_json(tmp_path, store, scemqa):
    """IconQA's layout: ``<id>/data.json`` holding one question and ``<id>/image.png`` beside it,
    named by no field; ``files=*/data.json`` and a constant picture path read SceMQA's first 30
    pictured questions written so, each keyed by its folder."""
    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:30]
    for i, q in enumerate(chosen):
        folder = tmp_path / "iconqa" / f"{100 + i}"
        folder.mkdir(parents=True)
        (folder / "data.json").write_text(json.dumps(
            {"question": q.problem, "choices": list(q.choices), "answer": q.answer_idx, "ques_type": "choose_txt",
             "grade": "grade5", "label": q.skill}, ensure_ascii=False))
        (folder / "image.png").write_bytes(pictures[q.problem_image])
    (tmp_path / "iconqa" / "README.json").write_text(json.dumps({"note": "not a question"}))
    spec = (f"json:{tmp_path / 'iconqa'}?files=*/data.json&image='image.png'&subject='math'&skill=label"
            "&answer_format=index")
    questions, quarantined = read(spec, store)
    assert quarantined == []
    assert [(q.source_key, q.extra) for q in questions[:2]] == [("100/data.json", {"id": "100/data"}),
                                                                 ("101/data.json", {"id": "101/data"})]
    assert [(q.problem, q.choices, q.answer_idx, q.problem_image, q.skill) for q in questions] == [
        (q.problem, q.choices, q.answer_idx, q.problem_image, q.skill) for q in chosen]
    with pytest.raises(ImportSourceError, match="json: no files match \\*/question.json in"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'iconqa'}?files=*/question.json"), store)
    with pytest.raises(ImportSourceError, match="must stay inside"):
        iter_import_records(parse_source_spec(f"json:{tmp_path / 'iconqa'}?files=../*/data.json"), store)


def test_one_record_files_and_wrappers_of_records_are_told_apart(tmp_path, store):
    """A file holding one question has its text as a field and no array of objects; a wrapper
    with a text beside its array of records (``"text": "about"``) is still a wrapper."""
    (tmp_path / "a.png").write_bytes(real_png(1))
    (tmp_path / "one.json").write_text(json.dumps({"question": "Which?", "options": ["1", "2"], "answer": 1,
                                                   "image": "a.png", "tags": ["x"]}))
    (tmp_path / "wrapper.json").write_text(json.dumps({"text": "Questions from 2024", "items": [
        {"question": "Or?", "options": ["3", "4"], "answer": 0, "image": "a.png"}]}))
    questions, quarantined = read(f"json:{tmp_path}?subject='math'&skill='s'", store)
    assert [(q.source_key, q.problem, q.choices, q.answer_idx) for q in questions] == [
        ("one.json", "Which?", ("1", "2"), 1), ("wrapper.json#items/0", "Or?", ("3", "4"), 0)]
    assert quarantined == []


def test_a_jsonl_line_may_carry_its_picture(tmp_path, store, scemqa):
    """JSON Lines with each picture inline as base64 (a web export): SceMQA's first 20 pictured
    questions read back with their pictures' bytes."""
    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:20]
    (tmp_path / "inline.jsonl").write_text("".join(json.dumps(
        {"question": q.problem, "options": list(q.choices), "answer": q.answer_idx,
         "image": base64.b64encode(pictures[q.problem_image]).decode()}) + "\n" for q in chosen))
    questions, quarantined = read(f"jsonl:{tmp_path / 'inline.jsonl'}?subject='math'&skill='s'&answer_format=index", store)
    assert quarantined == [] and [q.problem_image for q in questions] == [q.problem_image for q in chosen]


def test_ai2d_questions_keyed_by_their_text_in_a_file_per_diagram(tmp_path, store, scemqa):
    """AI2D's own layout: ``questions/<image name>.json`` holds ``{"imageName": …, "questions":
    {"<question text>": {"answerTexts": […], "correctAnswer": 2, …}}}`` and the diagrams sit in
    ``images/``: the question is the record's key, the picture the file's name. SceMQA's first
    six pictured questions written so read back as its json: reading."""
    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:6]
    (tmp_path / "ai2d" / "questions").mkdir(parents=True)
    (tmp_path / "ai2d" / "images").mkdir()
    for i in range(0, 6, 2):
        name = f"{i}.png"
        (tmp_path / "ai2d" / "images" / name).write_bytes(pictures[chosen[i].problem_image])
        (tmp_path / "ai2d" / "questions" / f"{name}.json").write_text(json.dumps({"imageName": name, "questions": {
            q.problem: {"abcLabel": False, "answerTexts": list(q.choices), "correctAnswer": q.answer_idx,
                        "questionId": f"{i}-{k}"} for k, q in enumerate((chosen[i], chosen[i + 1]))}}))
    spec = (f"json:{tmp_path / 'ai2d' / 'questions'}?records=questions&problem=_key&choices=answerTexts"
            "&answer=correctAnswer&answer_format=index&image=_file&image_root=../images&id=questionId"
            "&subject='science'&skill='diagrams'")
    questions, quarantined = read(spec, store)
    assert quarantined == []
    assert [(q.problem, q.choices, q.answer_idx) for q in questions] == [(q.problem, q.choices, q.answer_idx) for q in chosen]
    assert [q.problem_image for q in questions] == [chosen[i - i % 2].problem_image for i in range(6)]
    assert questions[1].extra == {"id": "0-1"}


def test_options_listed_with_their_own_labels_lose_them(tmp_path, store, scemqa):
    """SceMQA's first 12 questions given as M3Exam gives options (a list, each item with its own
    label: ``(1) …`` numbered, with the answer as that number, or ``A. …``) read back as its
    json: reading, without the labels, and with the keys the numbers name."""
    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:12]
    rows = []
    for i, q in enumerate(chosen):
        numbered = i % 2 == 0
        options = [f"({k + 1}) {text}" if numbered else f"{LETTERS[k]}. {text}" for k, text in enumerate(q.choices)]
        rows.append({"question_text": q.problem, "options": options,
                     "answer_text": str(q.answer_idx + 1) if numbered else LETTERS[q.answer_idx],
                     "image": base64.b64encode(pictures[q.problem_image]).decode()})
    (tmp_path / "m3exam.json").write_text(json.dumps(rows))
    spec = f"json:{tmp_path / 'm3exam.json'}?problem=question_text&answer=answer_text&subject='science'&skill='s'"
    # auto reads "4" as option (4) and as the option whose text is 4, and refuses; letter reads labels
    _, quarantined = read(spec, store)
    assert {e.reason for e in quarantined} == {"ambiguous answer"} and len(quarantined) == 2
    questions, quarantined = read(f"{spec}&answer_format=letter", store)
    assert quarantined == []
    assert [(q.problem, q.choices, q.answer_idx) for q in questions] == [(q.problem, q.choices, q.answer_idx) for q in chosen]


@pytest.mark.parametrize(("options", "answer", "expected"), [
    (["A. 5", "B. 6", "C. 7"], "B", (("5", "6", "7"), 1)),
    (["a) red", "b) blue"], "b", (("red", "blue"), 1)),
    (["Ａ．甲", "Ｂ．乙"], "A", (("甲", "乙"), 0)),
    (["(1) cat", "(2) dog", "(3) cow"], "(3)", (("cat", "dog", "cow"), 2)),
    (["1.5 m", "2.5 m", "3.5 m"], 0, (("1.5 m", "2.5 m", "3.5 m"), 0)),  # values, not labels
    (["A. 5", "C. 6"], "A", (("A. 5", "C. 6"), 0)),  # not each its own place's label
    (["A. 5", "(B) 6"], "A", (("A. 5", "(B) 6"), 0)),  # two styles
])
def test_own_labels_of_listed_options(tmp_path, store, options, answer, expected):
    (tmp_path / "a.png").write_bytes(real_png(1))
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "Which?", "options": options, "answer": answer, "image": "a.png"}))
    questions, quarantined = read(f"jsonl:{tmp_path / 'q.jsonl'}?subject='math'&skill='s'", store)
    assert quarantined == [] and (questions[0].choices, questions[0].answer_idx) == expected


def test_a_number_naming_a_numbered_option_both_ways_is_refused(tmp_path, store):
    (tmp_path / "a.png").write_bytes(real_png(1))
    (tmp_path / "q.jsonl").write_text(json.dumps(
        {"question": "Which?", "options": ["(1) cat", "(2) dog", "(3) cow"], "answer": 2, "image": "a.png"}))
    _, quarantined = read(f"jsonl:{tmp_path / 'q.jsonl'}?subject='math'&skill='s'", store)
    assert [(e.reason, e.detail) for e in quarantined] == [("ambiguous answer", "2: as index option 2, as label option 1")]


def test_options_keyed_by_dressed_labels(tmp_path, store):
    """Options as an object keyed by labels with their punctuation (``{"(A)": …, "(B)": …}``,
    ``{"A.": …}``): an answer letter names the key's label."""
    (tmp_path / "a.png").write_bytes(real_png(1))
    rows = [{"question": "Which?", "options": {"(A)": "5", "(B)": "6"}, "answer": "B", "image": "a.png"},
            {"question": "Or?", "options": {"A.": "x", "B.": "y", "C.": "z"}, "answer": "(C)", "image": "a.png"}]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    questions, quarantined = read(f"jsonl:{tmp_path / 'q.jsonl'}?subject='math'&skill='s'", store)
    assert quarantined == [] and [(q.choices, q.answer_idx) for q in questions] == [(("5", "6"), 1), (("x", "y", "z"), 2)]


def test_pictures_named_by_placeholders_of_other_corpora(tmp_path, store):
    """CMMMU names its pictures ``<图片 1>``, others ``<img1>``: removed like MMMU's ``<image 1>``,
    and two of them keep two pictures from being joined into one figure."""
    from pipelines.ingest.importers.text_options import strip_placeholders

    assert strip_placeholders("如<图片 1>所示，求x。") == ("如所示，求x。", [1])
    assert strip_placeholders("See <img1> and <IMAGE_2>.") == ("See and.", [1, 2])
    (tmp_path / "a.png").write_bytes(real_png(1))
    (tmp_path / "b.png").write_bytes(real_png(2))
    rows = [{"question": "如<图片 1>所示，电阻是多少？", "options": ["1 Ω", "2 Ω"], "answer": "A", "image": "a.png"},
            {"question": "比较<图片 1>和<图片 2>。", "options": ["相同", "不同"], "answer": "B", "image": ["a.png", "b.png"]}]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    questions, quarantined = read(f"jsonl:{tmp_path / 'q.jsonl'}?subject='science'&skill='s'", store)
    assert [q.problem for q in questions] == ["如所示，电阻是多少？"]
    assert [(e.reason, e.detail) for e in quarantined] == [("several images", "2 images named by placeholders in the text")]


def test_tqa_records_inside_each_lesson_and_options_inside_objects(tmp_path, store, scemqa):
    """TQA's layout: an array of lessons, each holding its diagram questions as an object of
    records keyed by id, each option an object (``{"a": {"processedText": …}}``):
    ``records=*.questions.diagramQuestions`` and ``choices=answerChoices.*.processedText``
    read SceMQA's first eight pictured questions written so (two lessons of four)."""
    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:8]
    (tmp_path / "question_images").mkdir()
    lessons = []
    for lesson in range(2):
        diagram = {}
        for k, q in enumerate(chosen[lesson * 4:lesson * 4 + 4]):
            qid = f"DQ_{lesson * 4 + k:06d}"
            (tmp_path / "question_images" / f"{qid}.png").write_bytes(pictures[q.problem_image])
            diagram[qid] = {"beingAsked": {"processedText": q.problem},
                            "answerChoices": {chr(ord("a") + j): {"idStructural": f"{chr(ord('a') + j)}.", "processedText": t}
                                              for j, t in enumerate(q.choices)},
                            "correctAnswer": {"processedText": chr(ord("a") + q.answer_idx)},
                            "imagePath": f"question_images/{qid}.png", "questionType": "Diagram Multiple Choice"}
        lessons.append({"globalID": f"L_{lesson:04d}", "lessonName": f"lesson {lesson}",
                        "questions": {"diagramQuestions": diagram, "nonDiagramQuestions": {}}})
    (tmp_path / "tqa_v1_val.json").write_text(json.dumps(lessons))
    spec = (f"json:{tmp_path / 'tqa_v1_val.json'}?records=*.questions.diagramQuestions&problem=beingAsked.processedText"
            "&choices=answerChoices.*.processedText&answer=correctAnswer.processedText&answer_format=letter"
            "&image=imagePath&subject='science'&skill='diagrams'")
    questions, quarantined = read(spec, store)
    assert quarantined == []
    assert [(q.problem, q.choices, q.answer_idx, q.problem_image) for q in questions] == [
        (q.problem, q.choices, q.answer_idx, q.problem_image) for q in chosen]
    assert [q.source_key for q in questions[3:5]] == ["tqa_v1_val.json#0/DQ_000003", "tqa_v1_val.json#1/DQ_000004"]
    assert questions[0].extra == {"id": "DQ_000000"}


def test_options_stored_as_columns_with_their_labels(tmp_path, store, scemqa):
    """ARC's shape on the Hub (``datasets`` stores a sequence of records as columns):
    ``choices = {"text": [...], "label": [...]}`` with ``answerKey`` naming a label, letters for
    some questions and numbers (1-based) for others. SceMQA's first ten pictured questions."""
    import datasets

    reference, pictures = scemqa
    chosen = [q for q in reference if q.problem_image][:10]
    rows = []
    for i, q in enumerate(chosen):
        labels = [str(k + 1) for k in range(len(q.choices))] if i % 2 else [LETTERS[k] for k in range(len(q.choices))]
        rows.append({"id": f"Mercury_{i}", "question": q.problem, "choices": {"text": list(q.choices), "label": labels},
                     "answerKey": labels[q.answer_idx], "image": {"bytes": pictures[q.problem_image], "path": None}})
    features = datasets.Features({"id": datasets.Value("string"), "question": datasets.Value("string"),
                                  "choices": datasets.Sequence({"text": datasets.Value("string"), "label": datasets.Value("string")}),
                                  "answerKey": datasets.Value("string"), "image": datasets.Image()})
    (tmp_path / "arc" / "data").mkdir(parents=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(tmp_path / "arc" / "data" / "test-00000-of-00001.parquet")
    questions, quarantined = read(f"hf:{tmp_path / 'arc'}?answer=answerKey&subject='science'&skill='s'", store)
    assert quarantined == []
    assert [(q.problem, q.choices, q.answer_idx, q.problem_image) for q in questions] == [
        (q.problem, q.choices, q.answer_idx, q.problem_image) for q in chosen]


def test_the_readme_released_corpora_specs_are_mappings_the_importers_take():
    """Each spec of the README's table of released corpora names only fields and settings its
    kind knows (a misspelt setting would fail the source at its first build)."""
    from urllib.parse import parse_qsl

    from pipelines.ingest.importers.rows import RowMapping

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("| corpus (layout) | source spec |", 1)[1].split("\n\n", 1)[0]
    specs = re.findall(r"^\| [^|]+ \| `([^`]+)` \|$", table, re.MULTILINE)
    assert len(specs) == 7
    extra = {"json": ("records", "files"), "hf": (), "tsv": (), "csv": ()}
    for spec in specs:
        kind, _, rest = spec.partition(":")
        options = dict(parse_qsl(rest.partition("?")[2], keep_blank_values=True))
        RowMapping(options, kind, extra_settings=extra[kind])
        assert "subject" in options and "skill" in options, spec
