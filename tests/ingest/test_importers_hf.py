"""``hf:PATH?mapping``: datasets written by Hugging Face ``datasets`` itself (Parquet shards and
``save_to_disk``), MMMU-like, ScienceQA-like and with ``Sequence(Image)`` options; read record by
record and built into a real data home."""

from __future__ import annotations

import collections
import json
import hashlib
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.ingest.importers import ImportSourceError, iter_import_records
from pipelines.ingest.importers.hf_dataset import find_data_files, parquet_split
from pipelines.ingest.importers.rows import MAPPED_FIELD_UNUSED
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import source_files
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, RawQuestion
from pipelines.store.warehouse import run_query
from support.builds import stemforge_build
from support.images import real_png

UNDECODABLE = real_png(999)[:60]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def picture(seed: int) -> dict:
    return {"bytes": real_png(seed), "path": None}


# ---------------------------------------------------------------- MMMU-like

MMMU_IMAGES = [f"image_{n}" for n in range(1, 8)]


def mmmu_features(options_as_list: bool) -> datasets.Features:
    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "question": datasets.Value("string"),
            "options": datasets.Sequence(datasets.Value("string")) if options_as_list else datasets.Value("string"),
            "explanation": datasets.Value("string"),
            **{name: datasets.Image() for name in MMMU_IMAGES},
            "img_type": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "topic_difficulty": datasets.Value("string"),
            "question_type": datasets.Value("string"),
            "subfield": datasets.Value("string"),
        }
    )


def mmmu_row(id_, question, options, answer, images=(), subfield="Geometry", question_type="multiple-choice"):
    row = {"id": id_, "question": question, "options": options, "explanation": "", "img_type": "['Diagrams']",
           "answer": answer, "topic_difficulty": "Easy", "question_type": question_type, "subfield": subfield}
    for n, name in enumerate(MMMU_IMAGES):
        row[name] = images[n] if n < len(images) else None
    return row


def mmmu_rows(split: str, base: int, options_as_list: bool) -> list[dict]:
    def opts(items):
        return list(items) if options_as_list else repr(list(items))

    s = base
    return [
        mmmu_row(f"{split}_Math_1", f"<image 1> What is the area of the shaded region {s}?", opts(["1", "2", "3", "4"]), "B",
                 [picture(s + 1)]),
        mmmu_row(f"{split}_Physics_2", f"Which graph matches <image 1> for case {s}?", opts(["<image 2>", "<image 3>", "<image 4>"]),
                 "C", [picture(s + 2), picture(s + 3), picture(s + 4), picture(s + 5)], subfield="Mechanics"),
        mmmu_row(f"{split}_Art_3", f"Which painter made <image 1> ({s})?", opts(["Monet", "Manet"]), "A", [picture(s + 6)]),
        mmmu_row(f"{split}_Chemistry_4", f"Compare <image 1> and <image 2> ({s}).", opts(["same", "different"]), "A",
                 [picture(s + 7), picture(s + 8)], subfield="Organic Chemistry"),
        mmmu_row(f"{split}_Biology_5", f"What organ is shown in <image 1> ({s})?", opts(["heart", "lung"]), "A",
                 [{"bytes": UNDECODABLE, "path": None}], subfield="Anatomy"),
        mmmu_row(f"{split}_Math_6", f"Solve for x in case {s}.", opts(["1", "2", "3", "4"]), "F", [picture(s + 9)]),
        mmmu_row(f"{split}_Computer_Science_7", f"Which structure is drawn in <image 1> ({s})?", opts(["stack", "queue", "tree"]),
                 "C", [picture(s + 10)], subfield="Data Structure"),
        mmmu_row(f"{split}_Math_8", f"Compare <image 1> with <image 3> ({s}).", opts(["yes", "no"]), "A", [picture(s + 11)]),
        mmmu_row(f"{split}_Electronics_9", f"Find the current in <image 1> ({s}).", "[0.5 A, 1 A" if not options_as_list else [],
                 "A", [picture(s + 12)], subfield="Circuits"),
        mmmu_row(f"{split}_Physics_10", f"What is the speed in <image 1> ({s})?", opts([]), "12 m/s", [picture(s + 13)],
                 question_type="open"),
    ]


MMMU_IMPORT_REASONS = {
    "subject outside STEM": 1,
    "several images": 1,
    "question image rejected": 1,
    "answer out of range": 1,
    "placeholder names an image the question does not have": 1,
    "options text is not a list literal": 1,
    "not multiple choice: no options": 1,
}


def mmmu_dict(options_as_list: bool = False) -> datasets.DatasetDict:
    features = mmmu_features(options_as_list)
    return datasets.DatasetDict(
        {split: datasets.Dataset.from_list(mmmu_rows(split, base, options_as_list), features=features)
         for split, base in (("dev", 100), ("validation", 200))}
    )


def save(dataset_dict: datasets.DatasetDict, folder: Path, how: str) -> Path:
    """The dataset written as ``push_to_hub`` lays out Parquet shards, or with ``save_to_disk``."""
    if how == "parquet":
        for split, part in dataset_dict.items():
            part.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    else:
        dataset_dict.save_to_disk(str(folder))
    return folder


def read(spec_text: str, store: ImageStore):
    records = list(iter_import_records(parse_source_spec(spec_text), store))
    questions = {r.source_key: r for r in records if isinstance(r, RawQuestion)}
    quarantined = {r.source_key: r for r in records if isinstance(r, QuarantineEntry)}
    assert len(questions) + len(quarantined) == len(records)
    return questions, quarantined


def reasons(quarantined) -> dict[str, int]:
    """Reasons counted, an image rejection without the decoder's words."""
    rejected = " rejected: "
    return dict(collections.Counter(q.reason.split(rejected)[0] + (" rejected" if rejected in q.reason else "")
                                    for q in quarantined.values()))


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


@pytest.mark.parametrize("how", ["parquet", "save_to_disk"])
def test_mmmu_like_dataset(tmp_path, store, how):
    folder = save(mmmu_dict(), tmp_path / "mmmu", how)
    questions, quarantined = read(f"hf:{folder}", store)
    prefix = {"parquet": "data/{}-00000-of-00001.parquet#{}", "save_to_disk": "{}#{}"}[how]
    assert len(questions) + len(quarantined) == 20
    assert sorted(questions) == sorted(prefix.format(split, row) for split in ("dev", "validation") for row in (0, 1, 6))
    math = questions[prefix.format("validation", 0)]
    assert (math.subject, math.skill, math.grade) == ("math", "geometry", None)
    assert math.problem == "What is the area of the shaded region 200?"  # the placeholder is gone
    assert math.choices == ("1", "2", "3", "4") and math.answer_idx == 1
    assert math.problem_image == sha(real_png(201)) and math.source_split == "valid"
    assert math.extra == {"id": "validation_Math_1"}
    # options that are placeholders are the option pictures; image_1 stays the figure
    physics = questions[prefix.format("dev", 1)]
    assert physics.choices is None and physics.answer_idx == 2
    assert physics.choice_images == tuple(sha(real_png(s)) for s in (103, 104, 105))
    assert physics.problem_image == sha(real_png(102)) and physics.problem == "Which graph matches for case 100?"
    assert physics.subject == "science" and physics.skill == "mechanics" and physics.source_split == "valid"
    assert questions[prefix.format("dev", 6)].subject == "technology"
    assert reasons(quarantined) == {reason: 2 for reason in MMMU_IMPORT_REASONS}
    art = quarantined[prefix.format("dev", 2)]
    assert (art.reason, art.detail, art.stage) == ("subject outside STEM", "dev_Art_3", "import")
    assert quarantined[prefix.format("validation", 5)].detail == "'F' for 4 options"
    assert quarantined[prefix.format("validation", 7)].detail == "<image 3>"


def test_mmmu_options_as_a_string_list_and_as_a_list_read_alike(tmp_path, store):
    as_text, _ = read(f"hf:{save(mmmu_dict(False), tmp_path / 'text', 'parquet')}", ImageStore(tmp_path / "a"))
    as_list, quarantined = read(f"hf:{save(mmmu_dict(True), tmp_path / 'list', 'parquet')}", store)
    assert [(q.source_key, q.choices, q.choice_images, q.answer_idx) for q in as_text.values()] == [
        (q.source_key, q.choices, q.choice_images, q.answer_idx) for q in as_list.values()
    ]
    # an empty list in row 8 means no options rather than a broken literal
    assert quarantined["data/dev-00000-of-00001.parquet#8"].reason == "not multiple choice: no options"


def test_an_explicit_mapping_overrides_the_mmmu_defaults(tmp_path, store):
    folder = save(mmmu_dict(), tmp_path / "mmmu", "save_to_disk")
    questions, quarantined = read(f"hf:{folder}?subject='math'&skill=id&image=image_1", store)
    # image=image_1: the other numbered columns are not pictures, so <image 2> names none
    assert quarantined["dev#1"].reason == "placeholder names an image the question does not have"
    assert quarantined["dev#3"].reason == "placeholder names an image the question does not have"
    art = questions["dev#2"]
    assert (art.subject, art.skill, art.problem) == ("math", "dev-art-3", "Which painter made (100)?")


# ---------------------------------------------------------------- ScienceQA-like

SCIENCEQA_FEATURES = datasets.Features(
    {
        "image": datasets.Image(),
        "question": datasets.Value("string"),
        "choices": datasets.Sequence(datasets.Value("string")),
        "answer": datasets.Value("int8"),
        "hint": datasets.Value("string"),
        "task": datasets.Value("string"),
        "grade": datasets.Value("string"),
        "subject": datasets.Value("string"),
        "topic": datasets.Value("string"),
        "category": datasets.Value("string"),
        "skill": datasets.Value("string"),
        "lecture": datasets.Value("string"),
        "solution": datasets.Value("string"),
    }
)


def scienceqa_row(seed, question, choices, answer, subject="natural science", image=True, grade="grade4"):
    return {"image": picture(seed) if image else None, "question": question, "choices": choices, "answer": answer,
            "hint": "", "task": "closed choice", "grade": grade, "subject": subject, "topic": "physics",
            "category": "Velocity", "skill": "Compare magnets", "lecture": "", "solution": ""}


def scienceqa_dict() -> datasets.DatasetDict:
    def rows(split, base):
        return [
            scienceqa_row(base + 1, f"Which magnet pulls harder in set {base}?", ["left", "right"], 1),
            scienceqa_row(base + 2, f"Which word fits the story {base}?", ["cat", "dog", "owl"], 0, subject="language science"),
            scienceqa_row(base + 3, f"Which planet is larger in chart {base}?", ["Mars", "Earth", "Venus"], 5),
            scienceqa_row(base + 4, f"What is the boiling point in set {base}?", ["50 C", "100 C"], 1, image=False),
            scienceqa_row(base + 5, f"Which rock is igneous in picture {base}?", ["granite", "shale", "chalk"], 0, grade="grade7"),
        ]

    return datasets.DatasetDict(
        {split: datasets.Dataset.from_list(rows(split, base), features=SCIENCEQA_FEATURES)
         for split, base in (("train", 300), ("validation", 400), ("test", 500))}
    )


@pytest.mark.parametrize("how", ["parquet", "save_to_disk"])
def test_scienceqa_like_dataset(tmp_path, store, how):
    folder = save(scienceqa_dict(), tmp_path / "sqa", how)
    questions, quarantined = read(f"hf:{folder}", store)
    assert len(questions) == 9 and reasons(quarantined) == {"subject outside STEM": 3, "answer out of range": 3}
    key = {"parquet": "data/train-00000-of-00001.parquet#0", "save_to_disk": "train#0"}[how]
    magnet = questions[key]
    assert (magnet.subject, magnet.grade, magnet.skill) == ("science", "grade-4", "compare-magnets")
    assert magnet.choices == ("left", "right") and magnet.answer_idx == 1
    assert magnet.problem_image == sha(real_png(301)) and magnet.source_split == "train"
    text_only = [q for q in questions.values() if q.problem.startswith("What is the boiling point")]
    assert len(text_only) == 3 and all(q.problem_image is None for q in text_only)
    assert sorted({q.source_split for q in questions.values()}) == ["test", "train", "valid"]


# ---------------------------------------------------------------- Sequence(Image) options

PICTURE_OPTIONS_FEATURES = datasets.Features(
    {
        "question": datasets.Value("string"),
        "image": datasets.Image(),
        "options": datasets.Sequence(datasets.Image()),
        "answer": datasets.ClassLabel(names=["A", "B", "C", "D"]),
        "subject": datasets.ClassLabel(names=["math", "physics", "history"]),
        "grade": datasets.Value("string"),
        "skill": datasets.Value("string"),
    }
)


def picture_options_dataset(folder: Path, monkeypatch) -> datasets.Dataset:
    """Five rows; one option picture is stored by its path only, relative to ``folder`` (the
    current folder from here on: ``datasets`` checks such paths from there when it saves)."""
    (folder / "pics").mkdir(parents=True)
    monkeypatch.chdir(folder)
    (folder / "pics" / "c.png").write_bytes(real_png(703))
    rows = [
        {"question": "Which shape has four equal sides?", "image": None,
         "options": [picture(700), picture(701), picture(702)], "answer": 2, "subject": 0, "grade": "3", "skill": "shapes"},
        {"question": "Which circuit lights the bulb?", "image": picture(710),
         "options": [picture(711), {"bytes": None, "path": "pics/c.png"}], "answer": 1, "subject": 1, "grade": "5",
         "skill": "circuits"},
        {"question": "Which option picture is broken?", "image": None,
         "options": [picture(720), {"bytes": UNDECODABLE, "path": None}], "answer": 0, "subject": 0, "grade": "4", "skill": "x"},
        {"question": "Which picture lies outside?", "image": None,
         "options": [picture(730), {"bytes": None, "path": "/etc/hostname"}], "answer": 0, "subject": 0, "grade": "4", "skill": "x"},
        {"question": "Which year?", "image": None, "options": [picture(740), picture(741)], "answer": 0, "subject": 2,
         "grade": "8", "skill": "x"},
    ]
    return datasets.Dataset.from_list(rows, features=PICTURE_OPTIONS_FEATURES)


@pytest.mark.parametrize("how", ["parquet", "save_to_disk"])
def test_sequence_of_images_options_and_class_labels(tmp_path, store, how, monkeypatch):
    folder = tmp_path / "pictures"
    dataset = picture_options_dataset(folder, monkeypatch)
    if how == "parquet":
        dataset.to_parquet(str(folder / "test.parquet"))
        keys = [f"test.parquet#{i}" for i in range(5)]
    else:
        dataset.save_to_disk(str(folder / "saved"))  # embeds the bytes of path-only pictures
        folder = folder / "saved"
        keys = [f"saved#{i}" for i in range(5)]
    questions, quarantined = read(f"hf:{folder}", store)
    shapes, circuit = questions[keys[0]], questions[keys[1]]
    assert shapes.choice_images == tuple(sha(real_png(s)) for s in (700, 701, 702)) and shapes.answer_idx == 2
    assert shapes.subject == "math" and shapes.grade == "grade-3" and shapes.problem_image is None
    # a picture stored by path only is read relative to the dataset folder
    assert circuit.choice_images == (sha(real_png(711)), sha(real_png(703))) and circuit.subject == "science"
    assert circuit.problem_image == sha(real_png(710)) and circuit.answer_idx == 1
    assert quarantined[keys[2]].reason.startswith("image of option 1 rejected")
    escaping = {"parquet": "image path escapes the folder", "save_to_disk": "image of option 1 rejected"}[how]
    assert quarantined[keys[3]].reason.startswith(escaping)
    assert quarantined[keys[4]].reason == "subject outside STEM"
    assert quarantined[keys[4]].detail == "history"  # the ClassLabel's name, not its number


# ---------------------------------------------------------------- layouts, errors, watch


@pytest.mark.parametrize(
    ("path", "split"),
    [
        ("data/train-00000-of-00003.parquet", "train"),
        ("data/testmini-00000-of-00001-4f1a.parquet", "testmini"),
        ("default/validation/0000.parquet", "validation"),
        ("testmini/0003.parquet", "testmini"),
        ("test.parquet", "test"),
        ("dev_set.parquet", "dev"),
        ("questions.parquet", None),
    ],
)
def test_parquet_split_from_path(path, split):
    assert parquet_split(Path(path)) == split


def test_unreadable_files_and_mapping_errors(tmp_path, store):
    folder = save(scienceqa_dict(), tmp_path / "sqa", "parquet")
    (folder / "data" / "train-00000-of-00001.parquet").write_bytes(b"PAR1 not really")
    questions, quarantined = read(f"hf:{folder}", store)
    assert quarantined["data/train-00000-of-00001.parquet"].reason == "unreadable Parquet file"
    assert len(questions) == 6
    _, quarantined = read(f"hf:{folder}?skill=level", store)
    assert quarantined["sqa"].reason == MAPPED_FIELD_UNUSED and quarantined["sqa"].detail == "skill=level"
    with pytest.raises(ImportSourceError, match="unknown field 'colour'"):
        iter_import_records(parse_source_spec(f"hf:{folder}?colour=red"), store)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportSourceError, match="no .parquet files, state.json or dataset_dict.json"):
        iter_import_records(parse_source_spec(f"hf:{tmp_path / 'empty'}"), store)


def test_a_corrupt_row_group_or_arrow_batch_loses_only_its_rows(tmp_path, store):
    rows = [scienceqa_row(900 + i, f"Which magnet is stronger in pair {i}?", ["left", "right"], i % 2) for i in range(7)]
    dataset = datasets.Dataset.from_list(rows, features=SCIENCEQA_FEATURES)
    shard = tmp_path / "pq" / "train-00000-of-00001.parquet"
    shard.parent.mkdir()
    pq.write_table(dataset.data.table, shard, row_group_size=2)
    metadata = pq.ParquetFile(shard).metadata
    data = bytearray(shard.read_bytes())
    group = metadata.row_group(2)  # rows 4 and 5: their data pages destroyed, the footer kept
    for c in range(group.num_columns):
        column = group.column(c)
        start = min(o for o in (column.dictionary_page_offset, column.data_page_offset) if o)
        data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    shard.write_bytes(bytes(data))
    questions, quarantined = read(f"hf:{shard}", store)
    assert sorted(questions) == [f"train-00000-of-00001.parquet#{i}" for i in (0, 1, 2, 3, 6)]
    assert sorted(quarantined) == [f"train-00000-of-00001.parquet#{i}" for i in (4, 5)]
    assert {q.reason for q in quarantined.values()} == {"rows of the data file are unreadable"}
    # a save_to_disk Arrow file cut short: the rows before the cut are read, the rest is one entry
    dataset.save_to_disk(str(tmp_path / "saved"), max_shard_size="1MB")
    arrow = next((tmp_path / "saved").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size * 2 // 3])
    questions, quarantined = read(f"hf:{tmp_path / 'saved'}", store)
    assert len(questions) < 7 and len(quarantined) == 1
    (lost,) = quarantined.values()
    assert lost.source_key == f"saved#{len(questions)}" and lost.reason == "rows of the data file are unreadable"


def test_save_to_disk_layouts_are_found_in_dict_order(tmp_path):
    folder = save(scienceqa_dict(), tmp_path / "sqa", "save_to_disk")
    files = find_data_files(folder)
    assert [(f.key, f.split, f.arrow) for f in files] == [("train", "train", True), ("validation", "validation", True),
                                                          ("test", "test", True)]
    assert [(f.key, f.split) for f in find_data_files(folder / "test")] == [("test", "test")]
    assert set(source_files(parse_source_spec(f"hf:{folder}"), DataHome(tmp_path / "home"))) >= {f.path for f in files}


# ---------------------------------------------------------------- stemforge build


@pytest.mark.slow
def test_build_a_home_from_hugging_face_datasets(tmp_path, monkeypatch):
    mmmu = f"hf:{save(mmmu_dict(), tmp_path / 'mmmu', 'parquet')}"
    scienceqa = f"hf:{save(scienceqa_dict(), tmp_path / 'sqa', 'save_to_disk')}"
    pictures_folder = tmp_path / "pictures"
    picture_options_dataset(pictures_folder, monkeypatch).to_parquet(str(pictures_folder / "train.parquet"))
    pictures = f"hf:{pictures_folder}"
    home = tmp_path / "home"
    result = stemforge_build(home, mmmu, scienceqa, pictures)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = DataHome(home)
    raw = dict(run_query(data, "SELECT source, count(*) FROM raw_questions GROUP BY 1").rows)
    assert raw == {mmmu: 6, scienceqa: 9, pictures: 2}, raw
    imported = dict(run_query(data, "SELECT reason, count(*) FROM quarantine WHERE stage = 'import' GROUP BY 1").rows)
    assert sum(imported.values()) == 14 + 6 + 3, imported
    rows = run_query(
        data,
        "SELECT q.source_key, q.subject, q.problem, q.pic_prob, q.pic_choice, q.num_choices, c.original_position "
        "FROM questions q JOIN choices c ON c.question_id = q.question_id AND c.position = q.answer_idx "
        "WHERE q.source = ? ORDER BY q.source_key",
        [mmmu],
    ).rows
    by_key = {row[0]: row[1:] for row in rows}
    assert len(by_key) == 6, by_key
    # the answer still names the option it named in the dataset, wherever shuffling put it
    physics = by_key["data/validation-00000-of-00001.parquet#1"]
    assert physics == ("science", "Which graph matches for case 200?", True, True, 3, 2)
    math = by_key["data/dev-00000-of-00001.parquet#0"]
    assert math == ("math", "What is the area of the shaded region 100?", True, False, 4, 1)
    pictures_rows = run_query(
        data,
        "SELECT count(*) FROM choices c JOIN questions q USING (question_id) JOIN images i ON i.image_hash = c.image_hash "
        "WHERE q.source = ?",
        [pictures],
    ).rows
    assert pictures_rows == [(5,)]  # every option picture of both usable rows is in the image table
    splits = dict(run_query(data, "SELECT source_key, split FROM questions WHERE source = ?", [scienceqa]).rows)
    assert splits["train#0"] == "train" and splits["test#0"] == "test" and splits["validation#0"] == "valid"
    # the export's dataset card counts what the warehouse holds, and a second build writes the same bytes
    card = (data.export.parent / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card[4:].partition("\n---\n")[0])
    per_split = dict(run_query(data, "SELECT split, count(*) FROM questions GROUP BY 1").rows)
    assert {s["name"]: s["num_examples"] for s in header["dataset_info"]["splits"]} == per_split
    assert "`hf:mmmu`: 6" in card and "`hf:sqa`" in card and str(tmp_path) not in card
    again = tmp_path / "again"
    assert stemforge_build(again, mmmu, scienceqa, pictures).returncode == 0
    assert (DataHome(again).export.parent / "README.md").read_bytes() == card.encode("utf-8")


# ---------------------------------------------------------------- a real corpus through datasets


def test_scemqa_through_datasets_reads_as_its_json(tmp_path):
    """SceMQA (real questions and figures) written as a Hugging Face dataset with ``datasets``
    reads to the same questions and quarantine reasons as the JSON file it came from."""
    from pipelines.ingest.importers.paths import resolve_image_file
    from support.corpora import SCEMQA_JSON

    folder = SCEMQA_JSON.parent
    whole = json.loads(SCEMQA_JSON.read_text(encoding="utf-8"))
    part = {subject: rows[:25] for subject, rows in whole.items()}
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "slice.json").write_text(json.dumps(part), encoding="utf-8")
    mapping = "options_in_text=1&problem=Question&answer=Answer (final answer highlighted)&answer_format=letter"
    json_spec = f"json:{tmp_path / 'json' / 'slice.json'}?{mapping}&image=ImagePath&subject=_key&skill=_key&image_root={folder}"
    rows = []
    for subject, records in part.items():
        for record in records:
            image = resolve_image_file(folder, record["ImagePath"])
            rows.append({**record, "subject": subject, "image": {"bytes": image.read_bytes(), "path": image.name}})
    features = datasets.Features({"Question": datasets.Value("string"), "Answer (final answer highlighted)": datasets.Value("string"),
                                  "ImagePath": datasets.Value("string"), "subject": datasets.Value("string"),
                                  "image": datasets.Image()})
    datasets.Dataset.from_list(rows, features=features).save_to_disk(str(tmp_path / "hf"))
    hf_spec = f"hf:{tmp_path / 'hf'}?{mapping}&skill=subject"

    def outcome(spec):
        records = list(iter_import_records(parse_source_spec(spec), ImageStore(tmp_path / "images")))
        return [
            (r.subject, r.skill, r.problem, r.choices, r.problem_image, r.answer_idx) if isinstance(r, RawQuestion)
            else (r.reason,)
            for r in records
        ]

    from_json, from_hf = outcome(json_spec), outcome(hf_spec)
    assert len(from_hf) == 100 and from_hf == from_json
    assert sum(len(r) > 1 for r in from_hf) >= 90  # most of them are questions, not quarantine entries
