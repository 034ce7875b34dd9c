"""Harnesses out and back: ``stemforge export --format vlmevalkit|lmms-eval``, a simulated
harness run writing its real output shapes, ``stemforge eval`` importing them, and metrics
equal to importing the same answers as our own JSONL.

The harnesses themselves are not dependencies of the project; their loading is reproduced
with the libraries they use: VLMEvalKit reads the TSV with ``pandas.read_csv(sep='\\t')``,
expands ``image`` with ``toliststr`` (``eval`` of a list literal) and decodes base64 with PIL;
lmms-eval reads the task YAML with a ``!function`` constructor that imports the task's
``utils.py`` and loads the data with ``datasets.load_dataset("parquet", data_files=...)``
relative to the YAML's folder.
"""

from __future__ import annotations

import ast
import base64
import csv
import importlib.util
import io
import json
import random
import string
from pathlib import Path

import datasets
import pandas as pd
import polars as pl
import pytest
import yaml
from PIL import Image

from pipelines.dataset.export import png_bytes
from pipelines.dataset.harness_export import (
    PANDAS_NA_TOKENS,
    export_for_harness,
    harness_questions,
    pandas_shown_text,
    row_pictures,
)
from pipelines.dataset.lmms_eval_task import infer_letter
from pipelines.orchestration.cli import main
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from support.builds import home_instance

SPLIT = "train"  # the demo's train split has picture options, with and without a problem picture


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = DataHome(tmp_path_factory.mktemp("harness-home"))
    with home_instance(home):
        outcome = run_build(BuildSettings(home=str(home.root), demo_questions=80, models=("random",)), progress=False)
    assert outcome.success, outcome.summary
    return home


def stemforge(home: DataHome, *args: str) -> int:
    with home_instance(home):
        return main([*args, "--home", str(home.root)])


def questions_of(home: DataHome) -> dict[str, dict]:
    questions, _ = harness_questions(home, SPLIT)
    return {r["question_id"]: r for r in questions.iter_rows(named=True)}


def simulated_answer(rng: random.Random, options: list[str], style: int) -> tuple[str, int]:
    """A model's free text and the option VLMEvalKit's can_infer finds in it (-1: none)."""
    k = rng.randrange(len(options))
    letter = string.ascii_uppercase[k]
    if style == 0:
        return letter, k
    if style == 1:
        return f"The answer is ({letter}).", k
    if style == 2:
        text = options[k]
        unique = sum(1 for o in options if o.lower() in text.lower()) == 1
        tokens = text
        for mark in ".()[],:;!*#{}":
            tokens = tokens.replace(mark, " ")
        if unique and not set(tokens.split()) & set(string.ascii_uppercase[: len(options)]) and "Z" not in tokens.split():
            return text, k
        return f"Answer: {letter}", k
    if style == 3:
        return "Cannot determine the answer from the picture.", -1
    return "i really do not know", -1


def own_jsonl(path: Path, answers: dict[str, int]) -> Path:
    path.write_text("".join(json.dumps({"question_id": q, "prediction": p}) + "\n" for q, p in answers.items()))
    return path


def metrics_of(home: DataHome, model: str) -> pl.DataFrame:
    metrics = pl.read_parquet(home.lake_path("metrics")).filter(pl.col("model") == model)
    assert metrics.height > 0
    return metrics.drop("model").sort(pl.all())


def assert_same_scores(home: DataHome, harness_model: str, own_model: str) -> None:
    harness, own = metrics_of(home, harness_model), metrics_of(home, own_model)
    assert harness.equals(own)
    accuracy = harness.filter((pl.col("metric") == "accuracy") & (pl.col("split") == SPLIT))
    assert accuracy.height > 0


# ---- VLMEvalKit ----------------------------------------------------------------------------

def load_like_vlmevalkit(path: Path) -> pd.DataFrame:
    """``vlmeval.smp.load`` of a TSV, then ImageBaseDataset's image expansion."""
    data = pd.read_csv(path, sep="\t")
    images = []
    for cell in data["image"]:
        cell = str(cell)
        images.append([str(x) for x in ast.literal_eval(cell)] if cell[0] == "[" and cell[-1] == "]" else [cell])
    data["image"] = [x[0] if len(x) == 1 else x for x in images]
    return data


def test_vlmevalkit_round_trip(home, tmp_path):
    assert stemforge(home, "export", "--format", "vlmevalkit", "--split", SPLIT) == 0
    path = home.root / "export" / "vlmevalkit" / f"stemforge_{SPLIT}.tsv"
    table = load_like_vlmevalkit(path)
    questions = questions_of(home)
    store = ImageStore(home.images)
    assert len(table) == len(questions) and list(table["index"]) == list(range(len(table)))
    letters = [c for c in table.columns if len(c) == 1 and c in string.ascii_uppercase]
    exported = [row_pictures(questions[qid])[0] for qid in table["question_id"]]
    for i, letter in enumerate(letters):
        written = [options[i] if i < len(options) else "" for options in exported]
        assert ["" if pd.isna(v) else str(v) for v in table[letter]] == pandas_shown_text(written)
    pictured = 0
    for row in table.to_dict("records"):
        q = questions[row["question_id"]]
        options, hashes, hint = row_pictures(q)
        shown = [str(row[c]) for c in letters if not pd.isna(row[c])]
        assert len(shown) == len(options) and row["answer"] == string.ascii_uppercase[q["answer_idx"]]
        assert row["category"] == q["subject"] and row["l2-category"] == q["skill"] and row["question"] == q["problem"]
        cells = row["image"] if isinstance(row["image"], list) else [row["image"]]
        assert len(cells) == len(hashes)
        for cell, image_hash in zip(cells, hashes):
            decoded = Image.open(io.BytesIO(base64.b64decode(cell)))
            original = Image.open(io.BytesIO(png_bytes(store, image_hash)))
            assert decoded.tobytes() == original.tobytes() and decoded.size == original.size
        if q["choice_images"] is not None:
            pictured += 1
            assert hint and f"picture {len(hashes)}" in hint and shown[-1] == f"picture {len(hashes)}"
    assert pictured >= 3  # the split exercises picture options

    # VLMEvalKit's prediction table: the dataset's columns without `image`, plus `prediction`
    rng = random.Random(7)
    predictions, expected = [], {}
    for i, row in enumerate(table.to_dict("records")):
        options, _, _ = row_pictures(questions[row["question_id"]])
        text, k = simulated_answer(rng, options, i % 5)
        predictions.append(text)
        expected[row["question_id"]] = k
    output = table.drop(columns=["image"]).assign(prediction=predictions)
    assert len(set(expected.values())) > 2 and -1 in expected.values()
    xlsx = tmp_path / f"fake-model_stemforge_{SPLIT}.xlsx"
    output.to_excel(xlsx, index=False)
    tsv = tmp_path / f"fake-model_stemforge_{SPLIT}.tsv"
    output.to_csv(tsv, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)

    assert stemforge(home, "eval", "--predictions", str(xlsx), "--model", "vlm-xlsx") == 0
    assert stemforge(home, "eval", "--predictions", str(tsv), "--model", "vlm-tsv") == 0
    assert stemforge(home, "eval", "--predictions", str(own_jsonl(tmp_path / "own.jsonl", expected)), "--model", "own-vlm") == 0
    assert_same_scores(home, "vlm-xlsx", "own-vlm")
    assert_same_scores(home, "vlm-tsv", "own-vlm")


def test_a_vlmevalkit_table_imports_back_as_the_questions_it_was_written_from(home, tmp_path):
    """``tsv:`` reads the table ``export --format vlmevalkit`` writes: every question with text
    options comes back with its text, options, key, subject, skill and picture (pixel for
    pixel); a row holding several pictures (picture options) is quarantined as such."""
    from pipelines.ingest.importers import iter_import_records
    from pipelines.ingest.spec import parse_source_spec
    from pipelines.store.records import QuarantineEntry, RawQuestion

    assert stemforge(home, "export", "--format", "vlmevalkit", "--split", SPLIT) == 0
    path = home.root / "export" / "vlmevalkit" / f"stemforge_{SPLIT}.tsv"
    store, images = ImageStore(home.images), ImageStore(tmp_path / "images")
    spec = f"tsv:{path}?id=question_id&choices=[A,B,C,D,E]&subject=category&skill=l2-category&answer_format=letter"
    records = list(iter_import_records(parse_source_spec(spec), images))
    back = {r.extra["id"]: r for r in records if isinstance(r, RawQuestion)}
    quarantined = [r for r in records if isinstance(r, QuarantineEntry)]
    questions = questions_of(home)
    texts = {qid: q for qid, q in questions.items() if q["choice_images"] is None}
    assert set(back) == set(texts) and len(texts) >= 20
    for qid, q in texts.items():
        got = back[qid]
        assert (got.problem, list(got.choices), got.answer_idx) == (q["problem"], list(q["choices"]), q["answer_idx"])
        assert (got.subject, got.skill) == (q["subject"], q["skill"])
        _, hashes, _ = row_pictures(q)
        if not hashes:
            assert got.problem_image is None
            continue
        decoded = Image.open(io.BytesIO(images.get(got.problem_image)))
        original = Image.open(io.BytesIO(png_bytes(store, hashes[0])))
        assert decoded.tobytes() == original.tobytes() and decoded.size == original.size
    assert len(quarantined) == len(questions) - len(texts) >= 3
    assert {e.reason for e in quarantined} == {"several images"}


def test_vlmevalkit_table_refusals_are_one_line(home, tmp_path, capsys):
    questions = questions_of(home)
    first = next(iter(questions))
    no_id = tmp_path / "no-id.csv"
    pd.DataFrame({"index": [0], "question": ["q"], "A": ["x"], "B": ["y"], "prediction": ["A"]}).to_csv(no_id, index=False)
    assert stemforge(home, "eval", "--predictions", str(no_id), "--model", "bad") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 1" in err and "question_id" in err
    twice = tmp_path / "twice.tsv"
    pd.DataFrame({"index": [0, 1], "question_id": [first, first], "A": ["x", "x"], "B": ["y", "y"],
                  "prediction": ["A", "B"]}).to_csv(twice, sep="\t", index=False, quoting=csv.QUOTE_ALL)
    assert stemforge(home, "eval", "--predictions", str(twice), "--model", "bad") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 3" in err and "duplicate question id" in err


@pytest.mark.parametrize("column", [
    ["3", "7", "6", "4"],          # integers, no blank: read as int64
    ["3", "7", "", "4"],           # integers with a blank: read as float64, 3 -> 3.0
    ["007", "+3", "1e3", ".5"],    # numbers in other spellings
    ["3", "x", ""],                # one text cell: every cell stays text
    ["2.50", "-1", "NA"],          # NA is missing, so the column is numeric
])
def test_pandas_shown_text_is_what_pandas_reads(tmp_path, column):
    path = tmp_path / "col.tsv"
    path.write_text("A\tB\n" + "".join(f"{v}\tx\n" for v in column))
    read = pd.read_csv(path, sep="\t")["A"]
    shown = ["" if pd.isna(v) else str(v) for v in read]
    assert shown == ["" if v in PANDAS_NA_TOKENS else v for v in pandas_shown_text(column)]


def test_vlmevalkit_leaves_out_rows_its_loader_cannot_show(tmp_path):
    from pipelines.dataset.harness_export import _vlmevalkit
    from support.images import real_png

    store = ImageStore(tmp_path / "images")
    picture = store.put(real_png(1)).image_hash
    base = {"subject": "math", "grade": "g", "skill": "s", "choice_images": None, "answer_idx": 0}
    rows = [
        {**base, "question_id": "a", "problem": "Which?", "problem_image": picture, "choices": ["None", "Two"]},
        {**base, "question_id": "b", "problem": "Text only?", "problem_image": None, "choices": ["x", "y"]},
        {**base, "question_id": "c", "problem": "Fine\twith a tab\r\nand lines", "problem_image": picture,
         "choices": ['say "hi"', "y"]},
    ]
    result = _vlmevalkit(pl.DataFrame(rows), store, tmp_path, SPLIT)
    assert result.rows == 1 and sorted(result.left_out.values()) == [1, 1]
    table = pd.read_csv(result.files[0], sep="\t")
    assert list(table["question_id"]) == ["c"] and table["question"][0] == rows[2]["problem"]
    assert table["A"][0] == 'say "hi"'


@pytest.mark.parametrize("answer, expected", [
    ("B", "B"),
    ("The answer is (C).", "C"),
    ("A and B are both possible", None),         # two letters: no option, then no unique text
    ("Cannot determine the answer", None),       # VLMEvalKit's refusal 'Z'
    ("seven", "B"),                             # the option's text
    ("Z", None),
    ("A. seven", "A"),                          # a letter wins over another option's text
    ("Failed to obtain answer via API", None),
])
def test_infer_letter_follows_vlmevalkit_can_infer(answer, expected):
    assert infer_letter(answer, {"A": "six", "B": "seven", "C": "eight"}) == expected


# ---- lmms-eval -----------------------------------------------------------------------------

def load_task(folder: Path, task: str):
    """The task YAML as lmms-eval reads it: ``!function utils.NAME`` imports the folder's
    utils.py; ``data_files`` of the ``parquet`` builder resolve against the YAML's folder."""
    spec = importlib.util.spec_from_file_location("stemforge_task_utils", folder / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: getattr(utils, loader.construct_scalar(node).split(".", 1)[1]))
    config = yaml.load((folder / f"{task}.yaml").read_text(), Loader=Loader)
    files = {split: str(folder / path) for split, path in config["dataset_kwargs"]["data_files"].items()}
    data = datasets.load_dataset(config["dataset_path"], data_files=files)[config["test_split"]]
    return config, data


def test_lmms_eval_round_trip(home, tmp_path):
    out = tmp_path / "task"
    assert stemforge(home, "export", "--format", "lmms-eval", "--split", SPLIT, "--out", str(out)) == 0
    config, data = load_task(out, f"stemforge_{SPLIT}")
    assert config["task"] == f"stemforge_{SPLIT}" and config["output_type"] == "generate_until"
    questions = questions_of(home)
    assert len(data) == len(questions)
    assert isinstance(data.features["image"], datasets.Image)

    rng = random.Random(11)
    samples, legacy, expected = [], [], {}
    for doc_id, doc in enumerate(data):
        q = questions[doc["question_id"]]
        options, hashes, _ = row_pictures(q)
        visuals = config["doc_to_visual"](doc)
        assert len(visuals) == len(hashes) and all(v.mode == "RGB" for v in visuals)
        prompt = config["doc_to_text"](doc, config["lmms_eval_specific_kwargs"]["default"])
        assert f"Question: {q['problem']}" in prompt and all(f"{string.ascii_uppercase[i]}. {o}" in prompt for i, o in enumerate(options))
        assert config["doc_to_target"](doc) == string.ascii_uppercase[q["answer_idx"]]
        response, _ = simulated_answer(rng, options, doc_id % 5)
        metrics = config["process_results"](doc, [response])
        letter = metrics["stemforge_accuracy"]["prediction"]
        expected[doc["question_id"]] = string.ascii_uppercase.index(letter) if letter else -1
        # lmms-eval 0.7's log line: `doc` and `arguments` popped, one response flattened
        samples.append({"doc_id": doc_id, "target": doc["answer"], "filtered_resps": response,
                        "token_counts": [None], "doc_hash": "x", "input": prompt, **metrics})
        saved_doc = {k: v for k, v in doc.items() if k not in ("image", "option_images")}
        legacy.append({"doc_id": doc_id, "doc": saved_doc, "target": doc["answer"], "resps": [[response]],
                       "filtered_resps": [response]})
    assert len(set(expected.values())) > 2 and -1 in expected.values()
    accuracy = config["metric_list"][0]["aggregation"]([s["stemforge_accuracy"] for s in samples])
    assert 0.0 <= accuracy <= 100.0

    log = tmp_path / f"20260101_000000_samples_stemforge_{SPLIT}.jsonl"
    log.write_text("".join(json.dumps(s) + "\n" for s in samples))
    old_log = tmp_path / "old_samples.jsonl"
    old_log.write_text("".join(json.dumps(s) + "\n" for s in legacy))
    assert stemforge(home, "eval", "--predictions", str(log), "--model", "lmms-log") == 0
    assert stemforge(home, "eval", "--predictions", str(old_log), "--model", "lmms-old-log", "--format", "lmms-eval") == 0
    assert stemforge(home, "eval", "--predictions", str(own_jsonl(tmp_path / "own.jsonl", expected)), "--model", "own-lmms") == 0
    assert_same_scores(home, "lmms-log", "own-lmms")
    assert_same_scores(home, "lmms-old-log", "own-lmms")


def test_lmms_eval_log_refusals_are_one_line(home, tmp_path, capsys):
    log = tmp_path / "samples.jsonl"
    log.write_text(json.dumps({"doc_id": 0, "filtered_resps": "A", "stemforge_accuracy": {"question_id": "f" * 16,
                                                                                          "prediction": "A"}}) + "\n")
    assert stemforge(home, "eval", "--predictions", str(log), "--model", "bad") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 1" in err and "unknown question id" in err
    log.write_text(json.dumps({"doc_id": 0, "filtered_resps": "A"}) + "\n")
    assert stemforge(home, "eval", "--predictions", str(log), "--model", "bad") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no question_id" in err


# ---- the export command --------------------------------------------------------------------

def test_export_errors_are_one_line(home, tmp_path, capsys):
    assert stemforge(home, "export", "--format", "parquet") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown export format 'parquet'" in err
    assert stemforge(home, "export", "--format", "vlmevalkit", "--split", "dev") == 2
    assert "unknown split 'dev'" in capsys.readouterr().err
    assert stemforge(DataHome(tmp_path / "empty"), "export", "--format", "lmms-eval") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run `stemforge build` first" in err


def test_stem_format_points_to_or_copies_the_release(home, tmp_path, capsys):
    assert stemforge(home, "export") == 0
    assert str(home.export.parent) in capsys.readouterr().out
    assert stemforge(home, "export", "--format", "stem", "--out", str(tmp_path / "copy")) == 0
    copied = sorted(p.relative_to(tmp_path / "copy") for p in (tmp_path / "copy").rglob("*.parquet"))
    assert copied == sorted(p.relative_to(home.export.parent) for p in home.export.parent.rglob("*.parquet"))


def test_harness_exports_are_deterministic(home, tmp_path):
    digests = []
    for attempt in range(2):
        for fmt in ("vlmevalkit", "lmms-eval"):
            export_for_harness(home, fmt, tmp_path / fmt, split=SPLIT)
        digests.append({p.relative_to(tmp_path): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()})
    assert digests[0] == digests[1]
    assert {p.as_posix() for p in digests[0] if p.suffix != ".sha256"} == {
        f"vlmevalkit/stemforge_{SPLIT}.tsv", f"lmms-eval/stemforge_{SPLIT}.yaml", "lmms-eval/utils.py",
        f"lmms-eval/data/{SPLIT}.parquet"}


def test_only_keyed_questions_are_exported(tmp_path):
    home = DataHome(tmp_path / "home")
    home.lake.mkdir(parents=True)
    base = {"subject": "math", "grade": "g", "skill": "s", "problem": "Which?", "problem_image": None,
            "choices": ["x", "y"], "choice_images": None, "num_choices": 2}
    pl.DataFrame([
        {**base, "question_id": "a", "split": "test", "answer_idx": 1},
        {**base, "question_id": "b", "split": "test", "answer_idx": -1},
        {**base, "question_id": "c", "split": "valid", "answer_idx": -1},
    ], schema_overrides={"problem_image": pl.String, "choice_images": pl.List(pl.String)}).write_parquet(home.lake_path("questions"))
    questions, left_out = harness_questions(home, "test")
    assert questions["question_id"].to_list() == ["a"] and left_out == {"no answer key in this home": 1}
    with pytest.raises(ValueError, match="no valid questions with an answer key"):
        harness_questions(home, "valid")
