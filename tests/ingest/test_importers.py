"""Importers for released corpora: STEM Parquet shards, ScienceQA, generic JSONL.

Fixtures are written inside the tests in each format, with real PNG images drawn by Pillow.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from pipelines.dataset.export import STEM_SCHEMA
from pipelines.store.images import ImageStore
from pipelines.store.records import RAW_QUESTION_SCHEMA, QuarantineEntry, RawQuestion
from pipelines.ingest.importers import (
    AnswerError,
    ImageStoreFailure,
    ImportSourceError,
    UnsafePath,
    iter_import_records,
    normalize_grade,
    parse_answer,
    resolve_inside,
    slugify,
)
from pipelines.ingest.importers import stem_parquet
from pipelines.ingest.importers.scienceqa import iter_scienceqa_records
from pipelines.ingest.spec import parse_source_spec


def png(color: str, size: tuple[int, int] = (24, 16), mark: int = 0) -> bytes:
    im = Image.new("RGB", size, color)
    ImageDraw.Draw(im).rectangle([2, 2, 2 + mark, 6], fill="black")
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CORRUPT_PNG = png("red")[:40]  # a PNG header and nothing decodable after it


def split_records(records):
    records = list(records)
    questions = [r for r in records if isinstance(r, RawQuestion)]
    quarantined = [r for r in records if isinstance(r, QuarantineEntry)]
    assert len(questions) + len(quarantined) == len(records)
    # every question must serialize under the shared schema
    pa.Table.from_pylist([q.to_row() for q in questions], schema=RAW_QUESTION_SCHEMA)
    for q in quarantined:
        assert q.stage == "import" and q.reason and "\n" not in q.reason
    return questions, quarantined


def by_key(records):
    return {r.source_key: r for r in records}


# ---------------------------------------------------------------- stem-parquet



def stem_row(**overrides):
    row = {
        "subject": "science",
        "grade": "grade-3",
        "skill": "compare-strengths-of-magnetic-forces",
        "pic_choice": False,
        "pic_prob": True,
        "problem": "Which magnet pulls harder?",
        "problem_pic": png("blue"),
        "choices": ["the left pair", "the right pair"],
        "choices_pic": None,
        "answer_idx": 1,
    }
    row.update(overrides)
    return row


def write_shard(path: Path, rows, schema=STEM_SCHEMA, row_group_size=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


@pytest.fixture
def images(tmp_path):
    return ImageStore(tmp_path / "images")


@pytest.fixture
def stem_release(tmp_path):
    release = tmp_path / "STEM"
    option_pics = [png("white", mark=1), png("white", mark=3), png("white", mark=5)]
    write_shard(
        release / "data" / "train-00000-of-00001.parquet",
        [
            stem_row(),
            stem_row(
                subject="math",
                grade="pre-k",
                skill="shapes-of-everyday-objects",
                pic_choice=True,
                pic_prob=False,
                problem="Which is a circle?",
                problem_pic=None,
                choices=None,
                choices_pic=option_pics,
                answer_idx=2,
            ),
        ],
    )
    write_shard(
        release / "data" / "test-00000-of-00001.parquet",
        [stem_row(subject="technology", grade=None, skill="computer-parts", problem="What is this?", answer_idx=-1)],
    )
    write_shard(
        release / "data" / "valid-00000-of-00001.parquet",
        [stem_row(subject="engineering", grade="grade-8", skill="identify-laboratory-tools", answer_idx=0)],
    )
    return release, option_pics


def test_stem_parquet_happy_path_exact_fields(stem_release, images):
    release, option_pics = stem_release
    spec = parse_source_spec(f"stem-parquet:{release}")
    questions, quarantined = split_records(iter_import_records(spec, images))
    assert quarantined == []
    assert [q.source_key for q in questions] == [
        "train-00000-of-00001.parquet#0",
        "train-00000-of-00001.parquet#1",
        "valid-00000-of-00001.parquet#0",
        "test-00000-of-00001.parquet#0",
    ]
    first, second, valid, test = questions
    assert first == RawQuestion(
        source=spec.text,
        source_key="train-00000-of-00001.parquet#0",
        subject="science",
        grade="grade-3",
        skill="compare-strengths-of-magnetic-forces",
        problem="Which magnet pulls harder?",
        problem_image=sha(png("blue")),
        choices=("the left pair", "the right pair"),
        choice_images=None,
        answer_idx=1,
        source_split="train",
        extra={},
    )
    assert images.get(sha(png("blue"))) == png("blue")
    assert second.problem_image is None and second.choices is None
    assert second.choice_images == tuple(sha(p) for p in option_pics)
    assert all(images.has(h) for h in second.choice_images)
    assert (second.subject, second.grade, second.skill, second.answer_idx) == (
        "math", "pre-k", "shapes-of-everyday-objects", 2,
    )
    assert (valid.source_split, valid.subject, valid.grade) == ("valid", "engineering", "grade-8")
    assert (test.source_split, test.answer_idx, test.subject, test.grade) == ("test", -1, "technology", None)


def test_stem_parquet_accepts_data_folder_and_single_shard(stem_release, images):
    release, _ = stem_release
    from_data = list(iter_import_records(parse_source_spec(f"stem-parquet:{release / 'data'}"), images))
    assert len(from_data) == 4
    shard = release / "data" / "test-00000-of-00001.parquet"
    spec = parse_source_spec(f"stem-parquet:{shard}")
    (only,) = iter_import_records(spec, images)
    assert only.source_key == "test-00000-of-00001.parquet#0" and only.source == spec.text
    assert only.source_split == "test"


def test_stem_parquet_invariant_violations_are_quarantined(tmp_path, images):
    rows = [
        stem_row(choices_pic=[png("white")]),  # both choices and choices_pic
        stem_row(choices=None),  # neither
        stem_row(pic_choice=True),  # flag says image options, data has text options
        stem_row(pic_prob=False),  # flag says no question image, data has one
        stem_row(pic_prob=True, problem_pic=None),
        stem_row(problem_pic=CORRUPT_PNG),
        stem_row(answer_idx=2),  # two options
        stem_row(subject="history"),
        stem_row(choices=["only one"], answer_idx=0),
        stem_row(problem="fine"),
    ]
    shard = write_shard(tmp_path / "data" / "train-00000-of-00001.parquet", rows)
    questions, quarantined = split_records(iter_import_records(parse_source_spec(f"stem-parquet:{shard}"), images))
    assert [q.source_key for q in questions] == ["train-00000-of-00001.parquet#9"]
    reasons = {int(q.source_key.rsplit("#", 1)[1]): q.reason for q in quarantined}
    assert sorted(reasons) == list(range(9))
    assert "exactly one of choices / choices_pic" in reasons[0] and "both are set" in reasons[0]
    assert "both are null" in reasons[1]
    assert "pic_choice is True but choices_pic is null" in reasons[2]
    assert "pic_prob is False but problem_pic is set" in reasons[3]
    assert "pic_prob is True but problem_pic is null" in reasons[4]
    assert reasons[5].startswith("question image rejected: corrupt image")
    assert reasons[6] == "answer index 2 out of range for 2 options"
    assert reasons[7] == "unknown subject 'history'"
    assert reasons[8] == "1 options; a question needs 2 to 5"
    assert not images.has(sha(CORRUPT_PNG))


def test_stem_parquet_corrupt_option_image(tmp_path, images):
    row = stem_row(pic_choice=True, choices=None, choices_pic=[png("white"), CORRUPT_PNG], answer_idx=0)
    shard = write_shard(tmp_path / "train-00000-of-00001.parquet", [row])
    (entry,) = iter_import_records(parse_source_spec(f"stem-parquet:{shard}"), images)
    assert isinstance(entry, QuarantineEntry)
    assert entry.reason.startswith("image of option 1 rejected: corrupt image")


def test_stem_parquet_truncated_shard_and_missing_column(tmp_path, images):
    data = tmp_path / "release" / "data"
    good = write_shard(data / "train-00000-of-00002.parquet", [stem_row(), stem_row(problem="second")])
    broken = write_shard(data / "train-00001-of-00002.parquet", [stem_row()] * 3)
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])
    no_answer = STEM_SCHEMA.remove(STEM_SCHEMA.get_field_index("answer_idx"))
    write_shard(data / "valid-00000-of-00001.parquet", [{k: v for k, v in stem_row().items() if k != "answer_idx"}], schema=no_answer)
    (data / "test-00000-of-00001.parquet").write_bytes(b"not parquet at all")

    spec = parse_source_spec(f"stem-parquet:{tmp_path / 'release'}")
    questions, quarantined = split_records(iter_import_records(spec, images))
    assert [q.source_key for q in questions] == [f"{good.name}#0", f"{good.name}#1"]
    entries = by_key(quarantined)
    assert set(entries) == {
        "train-00001-of-00002.parquet",
        "valid-00000-of-00001.parquet",
        "test-00000-of-00001.parquet",
    }
    assert entries["train-00001-of-00002.parquet"].reason.startswith("unreadable Parquet shard: ")
    assert entries["valid-00000-of-00001.parquet"].reason == "shard is missing columns: answer_idx"
    assert entries["test-00000-of-00001.parquet"].reason.startswith("unreadable Parquet shard: ")


def test_stem_parquet_streams_row_groups_and_survives_a_corrupt_one(tmp_path, images, monkeypatch):
    rows = [stem_row(problem=f"question {i}", problem_pic=png("blue", mark=i)) for i in range(7)]
    shard = write_shard(tmp_path / "train-00000-of-00001.parquet", rows, row_group_size=2)
    metadata = pq.ParquetFile(shard).metadata
    assert metadata.num_row_groups == 4
    monkeypatch.setattr(stem_parquet, "BATCH_ROWS", 2)

    spec = parse_source_spec(f"stem-parquet:{shard}")
    stream = iter_import_records(spec, images)
    first = next(stream)
    assert first.source_key == "train-00000-of-00001.parquet#0" and first.problem == "question 0"
    # only the first batch has been decoded: later rows' images are not in the store yet
    assert not images.has(sha(png("blue", mark=6)))
    rest = list(stream)
    assert [r.source_key for r in [first, *rest]] == [f"train-00000-of-00001.parquet#{i}" for i in range(7)]
    assert [r.problem for r in rest] == [f"question {i}" for i in range(1, 7)]

    # destroy the data pages of the third row group (rows 4-5), keeping the footer intact
    data = bytearray(shard.read_bytes())
    group = metadata.row_group(2)
    for c in range(group.num_columns):
        column = group.column(c)
        start = min(o for o in (column.dictionary_page_offset, column.data_page_offset) if o)
        data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    shard.write_bytes(bytes(data))
    questions, quarantined = split_records(iter_import_records(spec, images))
    assert [q.problem for q in questions] == [f"question {i}" for i in (0, 1, 2, 3, 6)]
    assert [q.source_key for q in questions][-1] == "train-00000-of-00001.parquet#6"
    assert [e.source_key for e in quarantined] == [f"train-00000-of-00001.parquet#{i}" for i in (4, 5)]
    assert all(e.reason.startswith("row group 2 of the shard is unreadable: ") for e in quarantined)


def test_stem_parquet_reads_hugging_face_image_structs(tmp_path, images):
    image_struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = STEM_SCHEMA.set(STEM_SCHEMA.get_field_index("problem_pic"), pa.field("problem_pic", image_struct))
    row = stem_row(problem_pic={"bytes": png("navy"), "path": None})
    shard = write_shard(tmp_path / "valid-00000-of-00001.parquet", [row], schema=schema)
    (q,) = iter_import_records(parse_source_spec(f"stem-parquet:{shard}"), images)
    assert q.problem_image == sha(png("navy")) and q.source_split == "valid"


def test_stem_parquet_without_shards_is_a_one_line_error(tmp_path, images):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportSourceError, match=r"^no \.parquet shards in .*empty$"):
        iter_import_records(parse_source_spec(f"stem-parquet:{tmp_path / 'empty'}"), images)


# ---------------------------------------------------------------- scienceqa


def sqa_problem(**overrides):
    item = {
        "question": "Which of these states is farthest north?",
        "choices": ["West Virginia", "Louisiana", "Arizona", "Oklahoma"],
        "answer": 0,
        "hint": "",
        "image": "image.png",
        "task": "closed choice",
        "grade": "grade2",
        "subject": "natural science",
        "topic": "geography",
        "category": "Geography",
        "skill": "Read a map: cardinal directions",
        "lecture": "Maps have four cardinal directions.",
        "solution": "West Virginia is farthest north.",
        "split": "train",
    }
    item.update(overrides)
    return item


@pytest.fixture
def scienceqa_folder(tmp_path):
    folder = tmp_path / "scienceqa"
    problems = {
        "1": sqa_problem(),
        "2": sqa_problem(image=None, split="val", grade="grade10", hint="Think about magnets.", skill=None, category="Magnets"),
        "3": sqa_problem(subject="social science", image=None),
        "4": sqa_problem(split="test", answer=3, image="image.png", grade="grade7"),
        "5": sqa_problem(split="train"),  # its image is missing
        "6": sqa_problem(answer=4),
        "7": sqa_problem(image="../../../secret.png"),
        "8": sqa_problem(split="train"),  # corrupt image
        "9": ["not", "an", "object"],
    }
    images_dir = folder / "images"
    (images_dir / "train" / "1").mkdir(parents=True)
    (images_dir / "train" / "1" / "image.png").write_bytes(png("green"))
    (folder / "test" / "4").mkdir(parents=True)  # the second layout: <folder>/<split>/<qid>/
    (folder / "test" / "4" / "image.png").write_bytes(png("yellow"))
    (images_dir / "train" / "8").mkdir(parents=True)
    (images_dir / "train" / "8" / "image.png").write_bytes(CORRUPT_PNG)
    (tmp_path / "secret.png").write_bytes(png("black"))
    (folder / "problems.json").write_text(json.dumps(problems))
    return folder


def test_scienceqa_happy_path_and_bad_items(scienceqa_folder, images):
    spec = parse_source_spec(f"scienceqa:{scienceqa_folder}")
    questions, quarantined = split_records(iter_import_records(spec, images))
    assert [q.source_key for q in questions] == ["problems.json#0", "problems.json#1", "problems.json#3"]
    first, text_only, from_second_layout = questions
    assert first == RawQuestion(
        source=spec.text,
        source_key="problems.json#0",
        subject="science",
        grade="grade-2",
        skill="read-a-map-cardinal-directions",
        problem="Which of these states is farthest north?",
        problem_image=sha(png("green")),
        choices=("West Virginia", "Louisiana", "Arizona", "Oklahoma"),
        answer_idx=0,
        source_split="train",
        extra={
            "qid": "1",
            "task": "closed choice",
            "topic": "geography",
            "category": "Geography",
            "lecture": "Maps have four cardinal directions.",
            "solution": "West Virginia is farthest north.",
        },
    )
    assert images.get(first.problem_image) == png("green")
    assert (text_only.problem_image, text_only.source_split, text_only.grade, text_only.skill) == (
        None, "valid", "grade-10", "magnets",
    )
    assert text_only.extra["hint"] == "Think about magnets." and text_only.extra["qid"] == "2"
    assert from_second_layout.problem_image == sha(png("yellow"))
    assert (from_second_layout.source_split, from_second_layout.answer_idx) == ("test", 3)

    reasons = {q.source_key: q.reason for q in quarantined}
    assert reasons == {
        "problems.json#2": "subject outside STEM",
        "problems.json#4": "image not found at images/train/5/image.png or train/5/image.png",
        "problems.json#5": "answer out of range",
        "problems.json#6": "image name '../../../secret.png' is not a plain file name",
        "problems.json#7": reasons["problems.json#7"],
        "problems.json#8": "problem is a JSON list, expected an object",
    }
    assert reasons["problems.json#7"].startswith("question image rejected: corrupt image")
    assert by_key(quarantined)["problems.json#4"].detail == "qid 5"
    assert by_key(quarantined)["problems.json#2"].detail == "qid 3: social science"
    assert by_key(quarantined)["problems.json#5"].detail == "qid 6: 4 for 4 options"
    assert not images.has(sha(png("black")))


def test_scienceqa_file_path_subject_map_and_malformed_file(scienceqa_folder, tmp_path, images):
    spec = parse_source_spec(f"scienceqa:{scienceqa_folder / 'problems.json'}")
    mapped = iter_scienceqa_records(spec, images, subject_map={"natural science": "science", "social science": "science"})
    keys = [r.source_key for r in mapped if isinstance(r, RawQuestion)]
    assert "problems.json#2" in keys

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "problems.json").write_text('{"1": {"question": ')
    (entry,) = iter_import_records(parse_source_spec(f"scienceqa:{bad}"), images)
    assert entry.source_key == "problems.json" and entry.reason.startswith("unreadable problems.json: ")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImportSourceError, match="expected problems.json or its folder"):
        iter_import_records(parse_source_spec(f"scienceqa:{empty}"), images)


# ---------------------------------------------------------------- jsonl


def write_jsonl(path: Path, lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    path.write_text(text)
    return path


def test_jsonl_happy_path_answers_and_mapping(tmp_path, images):
    folder = tmp_path / "corpus"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "12.png").write_bytes(png("purple"))
    for i in range(3):
        (folder / "images" / f"opt{i}.png").write_bytes(png("white", mark=2 * i))
    options = ["3", "4", "5", "6"]
    lines = [
        {"id": "q1", "question": "How many dots?", "options": options, "answer": "C", "image": "images/12.png",
         "level": "Grade 3", "subject": "Mathematics", "topic": "Counting to 10", "split": "train"},
        {"question": "Same, lower-case letter in parentheses", "options": options, "answer": "(c)", "topic": "t"},
        {"question": "Answer prefix", "options": options, "answer": "Answer: C", "topic": "t"},
        {"question": "Index as int", "options": options, "answer": 1, "topic": "t", "split": "dev"},
        {"question": "Option text", "choices": ["red", "blue"], "answer": "Blue", "topic": "t", "level": "K"},
        {"question": "Labelled options", "options": {"A": "left", "B": "right"}, "answer": "B", "topic": "t"},
        "",
        {"question": "Which shape is a circle?", "choice_images": ["images/opt0.png", "images/opt1.png", "images/opt2.png"],
         "answer": "2", "topic": "Shapes", "level": "pre-K", "split": "holdout"},
    ]
    path = write_jsonl(folder / "quiz.jsonl", lines)
    spec = parse_source_spec(f"jsonl:{path}?subject='math'&skill=topic&grade=level")
    questions, quarantined = split_records(iter_import_records(spec, images))
    assert quarantined == []
    assert [q.source_key for q in questions] == [f"quiz.jsonl#{i}" for i in (0, 1, 2, 3, 4, 5, 7)]
    assert questions[0] == RawQuestion(
        source=spec.text,
        source_key="quiz.jsonl#0",
        subject="math",
        grade="grade-3",
        skill="counting-to-10",
        problem="How many dots?",
        problem_image=sha(png("purple")),
        choices=("3", "4", "5", "6"),
        answer_idx=2,
        source_split="train",
        extra={"id": "q1"},
    )
    assert [q.answer_idx for q in questions] == [2, 2, 2, 1, 1, 1, 2]
    assert questions[3].source_split == "valid"
    assert questions[4].grade == "kindergarten" and questions[4].choices == ("red", "blue")
    assert questions[5].choices == ("left", "right")
    images_q = questions[6]
    assert images_q.choices is None and images_q.choice_images == tuple(sha(png("white", mark=2 * i)) for i in range(3))
    assert (images_q.grade, images_q.skill, images_q.source_split, images_q.extra) == ("pre-k", "shapes", None, {"split": "holdout"})


def test_jsonl_default_names_and_technology_has_no_grade(tmp_path, images):
    path = write_jsonl(tmp_path / "tech.jsonl", [
        {"text": "What does CPU stand for?", "choices": ["Central Processing Unit", "Computer Power Unit"],
         "label": 0, "subject": "Technology", "grade": "grade 9", "skill": "Computer basics"},
    ])
    (q,) = iter_import_records(parse_source_spec(f"jsonl:{path}"), images)
    assert (q.subject, q.grade, q.skill, q.answer_idx, q.problem) == (
        "technology", None, "computer-basics", 0, "What does CPU stand for?",
    )


def test_jsonl_bad_lines_are_quarantined_with_reasons(tmp_path, images):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "bad.png").write_bytes(CORRUPT_PNG)
    (folder / "ok.png").write_bytes(png("orange"))
    (tmp_path / "outside.png").write_bytes(png("black"))
    (folder / "link.png").symlink_to(tmp_path / "outside.png")
    base = {"question": "Q?", "options": ["1", "2", "3"], "answer": "A", "subject": "math", "skill": "s"}
    lines = [
        {**base, "image": "../outside.png"},  # 0 path traversal
        {**base, "image": str(tmp_path / "outside.png")},  # 1 absolute path outside the folder
        {**base, "image": "link.png"},  # 2 symlink leading outside
        '{"question": "Q?", "options": [1, 2',  # 3 malformed JSON
        {**base, "options": []},  # 4 free-form item
        {k: v for k, v in base.items() if k != "options"},  # 5 no options at all
        {**base, "answer": "E"},  # 6 letter out of range
        {**base, "answer": 7},  # 7 index out of range
        {**base, "answer": "1"},  # 8 index 1 or the text of option 0
        {**base, "answer": "purple"},  # 9 not an option
        {**base, "image": "bad.png"},  # 10 corrupt image
        {**base, "image": "missing.png"},  # 11 missing image
        {**base, "subject": "history"},  # 12
        [1, 2, 3],  # 13 not an object
        {**base, "image": str(folder / "ok.png")},  # 14 absolute path inside the folder is fine
        {**base, "image": "http://example.com/x.png"},  # 15 no fetching
        {**base, "skill": None},  # 16
    ]
    path = write_jsonl(folder / "items.jsonl", lines)
    with open(path, "ab") as f:
        f.write(b'{"question": "\xff\xfe"}\n')  # 17 invalid UTF-8
    questions, quarantined = split_records(iter_import_records(parse_source_spec(f"jsonl:{path}"), images))
    assert [q.source_key for q in questions] == ["items.jsonl#14"]
    assert questions[0].problem_image == sha(png("orange"))
    reasons = {int(q.source_key.rsplit("#", 1)[1]): q.reason for q in quarantined}
    details = {int(q.source_key.rsplit("#", 1)[1]): q.detail for q in quarantined}
    assert sorted(reasons) == [i for i in range(18) if i != 14]
    assert reasons[0] == reasons[1] == reasons[2] == "image path escapes the folder"
    assert details[0] == f"../outside.png leaves {folder.resolve()}"
    assert details[1].startswith("/") and details[1].endswith(
        f" leaves {folder.resolve()}; an absolute path: image_prefix=FOLDER reads the paths that start with FOLDER "
        "from the image folder")
    assert details[2] == f"link.png leaves {folder.resolve()}"
    assert reasons[3] == "malformed JSON" and details[3].startswith("line 4: ")
    assert reasons[4] == reasons[5] == "not multiple choice: no options"
    assert reasons[6] == reasons[7] == "answer out of range"
    assert (details[6], details[7]) == ("'E' for 3 options", "7 for 3 options")
    assert (reasons[8], details[8]) == ("ambiguous answer", "'1': as index option 1, as text option 0")
    assert (reasons[9], details[9]) == ("answer is not a letter, a 0-based index or an option's text", "'purple'")
    assert reasons[10].startswith("question image rejected: corrupt image")
    assert (reasons[11], details[11]) == ("image file not found", "missing.png")
    assert (reasons[12], details[12]) == ("subject outside STEM", "history")
    assert (reasons[13], details[13]) == ("record is not an object", "list")
    assert (reasons[15], details[15]) == ("image path is a URL; only local files are read", "http://example.com/x.png")
    assert reasons[16] == "missing skill"
    assert reasons[17] == "line is not UTF-8" and details[17].startswith("line 18: ")
    assert not images.has(sha(png("black")))


def test_jsonl_escaped_nul_is_quarantined_at_import(tmp_path, images):
    base = {"question": "Q?", "options": ["1", "2", "3"], "answer": "A", "subject": "math", "skill": "s"}
    path = write_jsonl(tmp_path / "nul.jsonl", [
        {**base, "question": "Q\u0000?"},
        {**base, "options": ["1", "2\u0000", "3"]},
        base,
    ])
    assert "\\u0000" in path.read_text()
    questions, quarantined = split_records(iter_import_records(parse_source_spec(f"jsonl:{path}"), images))
    assert [q.source_key for q in questions] == ["nul.jsonl#2"]
    assert {q.source_key: q.reason for q in quarantined} == {
        "nul.jsonl#0": "NUL character in the question text", "nul.jsonl#1": "NUL character in option 1"}


def test_jsonl_unresolvable_image_paths_and_store_failure(tmp_path, images):
    (tmp_path / "loop.png").symlink_to(tmp_path / "loop.png")
    base = {"question": "Q?", "options": ["x", "y"], "answer": 0, "subject": "science", "skill": "s"}
    path = write_jsonl(tmp_path / "p.jsonl", [{**base, "image": "loop.png"}, {**base, "image": "n" * 5000 + ".png"}])
    loop, long_name = iter_import_records(parse_source_spec(f"jsonl:{path}"), images)
    assert loop.reason == "image path cannot be resolved" and loop.detail.startswith("loop.png: ")
    assert long_name.reason == "image file unreadable" and long_name.detail.startswith("nnnn")

    (tmp_path / "ok.png").write_bytes(png("gray"))
    path = write_jsonl(tmp_path / "s.jsonl", [{**base, "image": "ok.png"}])
    (tmp_path / "not-a-folder").write_text("")
    broken_store = ImageStore(tmp_path / "not-a-folder")
    with pytest.raises(ImageStoreFailure, match="^cannot write to the image store"):
        list(iter_import_records(parse_source_spec(f"jsonl:{path}"), broken_store))


def test_jsonl_answer_format_resolves_ambiguity(tmp_path, images):
    path = write_jsonl(tmp_path / "n.jsonl", [
        {"question": "1 + 0 = ?", "options": ["1", "2"], "answer": "1", "subject": "math", "skill": "add"},
    ])
    (as_text,) = iter_import_records(parse_source_spec(f"jsonl:{path}?answer_format=text"), images)
    (as_index,) = iter_import_records(parse_source_spec(f"jsonl:{path}?answer_format=index"), images)
    assert (as_text.answer_idx, as_index.answer_idx) == (0, 1)


def test_jsonl_mapping_errors_are_one_line_and_raised_at_start(tmp_path, images):
    path = write_jsonl(tmp_path / "x.jsonl", [{"question": "q"}])
    with pytest.raises(ImportSourceError, match=r"^unknown field 'colour' in jsonl mapping; known fields: problem, "):
        iter_import_records(parse_source_spec(f"jsonl:{path}?subject='math'&colour=hue"), images)
    with pytest.raises(ImportSourceError, match="answer_format 'roman'"):
        iter_import_records(parse_source_spec(f"jsonl:{path}?answer_format=roman"), images)
    with pytest.raises(ImportSourceError, match="is not a file"):
        iter_import_records(parse_source_spec(f"jsonl:{tmp_path}"), images)
    with pytest.raises(ImportSourceError, match="not an importer source"):
        iter_import_records(parse_source_spec("demo"), images)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_field_names = st.sampled_from(
    ["question", "options", "choices", "answer", "image", "choice_images", "subject", "level", "topic", "split", "id"]
)
_rows = st.dictionaries(
    _field_names,
    _json_values | st.sampled_from(["A", "(b)", "Answer: C", "0", "math", "science", "../x.png", "/etc/passwd", "ok.png"]),
    max_size=8,
)
_plausible_rows = st.fixed_dictionaries(
    {
        "question": st.text(max_size=10),
        "options": st.lists(st.text(max_size=5) | st.integers() | st.floats(), max_size=6),
        "subject": st.sampled_from(["math", "science", "Technology", "engineering", "art"]),
    },
    optional={
        "answer": _json_values | st.sampled_from(["A", "b", "(c)", "Answer: D", "1", "0", "E"]),
        "image": st.sampled_from(["ok.png", "../x.png", "/etc/passwd", "", "nope.png", ".", "ok.png/.."]),
        "choice_images": st.lists(st.sampled_from(["ok.png", "../x.png", "."]), max_size=3),
        "level": _json_values | st.sampled_from(["grade 2", "K", "pre-k", "Algebra I"]),
        "split": _json_values | st.sampled_from(["train", "val", "test"]),
        "id": _json_values,
    },
)
_lines = st.lists(
    st.one_of(
        _rows.map(lambda r: json.dumps(r).encode()),
        _plausible_rows.map(lambda r: json.dumps(r).encode()),
        st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=30),
        st.just(b"[" * 5000),
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_lines)
def test_jsonl_never_raises_on_arbitrary_lines(lines):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "ok.png").write_bytes(png("teal"))
        data = b"\n".join(lines)
        (folder / "any.jsonl").write_bytes(data)
        spec = parse_source_spec(f"jsonl:{folder / 'any.jsonl'}?skill='s'")
        records = list(iter_import_records(spec, ImageStore(folder / "store")))
        physical = list(io.BytesIO(data))
        keys = [r.source_key for r in records]
        assert len(keys) == len(set(keys))
        for record in records:
            assert isinstance(record, (RawQuestion, QuarantineEntry))
            name, line = record.source_key.split("#")
            assert name == "any.jsonl" and 0 <= int(line) < len(physical)
        for i, raw in enumerate(physical):
            # every line that is not blank yields exactly one record
            assert (f"any.jsonl#{i}" in keys) != _blank(raw, first=i == 0)


def _blank(raw: bytes, first: bool) -> bool:
    try:
        return raw.decode("utf-8-sig" if first else "utf-8").strip() == ""
    except UnicodeDecodeError:
        return False


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("raw", "subject", "grade"),
    [
        ("grade1", "science", "grade-1"),
        ("Grade 3", "math", "grade-3"),
        ("3rd grade", "math", "grade-3"),
        (5, "math", "grade-5"),
        ("K", "math", "kindergarten"),
        ("Pre-K", "math", "pre-k"),
        ("Algebra II", "math", "algebra-2"),
        ("algebra-1", "math", "algebra-1"),
        ("Pre-calculus", "math", "precalculus"),
        ("grade-6", "technology", None),
        ("", "math", None),
        (None, "science", None),
    ],
)
def test_normalize_grade(raw, subject, grade):
    assert normalize_grade(raw, subject) == grade


def test_slugify_and_parse_answer_units():
    assert slugify("Compare strengths of magnetic forces") == "compare-strengths-of-magnetic-forces"
    assert slugify("Read a map: cardinal directions") == "read-a-map-cardinal-directions"
    assert slugify("Résumé  — écrit") == "resume-ecrit"
    assert parse_answer("d.", None, 4) == 3
    assert parse_answer("The answer is B", ["x", "y"], 2) == 1
    assert parse_answer("(B) y", ["x", "y"], 2) == 1
    assert parse_answer(1.0, None, 3) == 1
    with pytest.raises(AnswerError, match="matches several options"):
        parse_answer("x", ["x", "X", "y"], 3)
    with pytest.raises(AnswerError, match="missing answer"):
        parse_answer(None, ["x", "y"], 2)
    with pytest.raises(AnswerError, match="not a whole-number index"):
        parse_answer(1.5, ["x", "y"], 2)


def test_resolve_inside(tmp_path):
    (tmp_path / "a").mkdir()
    assert resolve_inside(tmp_path, "a/../a/x.png") == (tmp_path / "a" / "x.png").resolve()
    for bad in ("../x.png", "a/../../x.png", "/etc/passwd"):
        with pytest.raises(UnsafePath):
            resolve_inside(tmp_path / "a", bad)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "a" / "fifo")
        from pipelines.ingest.importers.paths import read_image_file
        from pipelines.ingest.importers.common import RecordProblem

        with pytest.raises(RecordProblem, match="is not a regular file"):
            read_image_file(tmp_path / "a" / "fifo", "fifo")
