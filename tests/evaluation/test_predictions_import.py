"""Importing predictions from JSONL, CSV and preds.txt; every refusal names its line."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipelines.evaluation.predictions_import import PredictionsImportError, import_predictions

QUESTIONS = pl.DataFrame(
    {
        "question_id": ["a" * 16, "b" * 16, "c" * 16, "d" * 16, "e" * 16],
        "split": ["test", "train", "test", "test", "valid"],
        "num_choices": [2, 3, 4, 3, 2],
        "order": [2, 0, 0, 1, 0],
    }
)
A, B, C, D, E = (x * 16 for x in "abcde")


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def jsonl(tmp_path, rows):
    return write(tmp_path / "preds.jsonl", [r if isinstance(r, str) else json.dumps(r) for r in rows])


def test_jsonl_with_optional_fields(tmp_path):
    path = jsonl(tmp_path, [
        {"question_id": A, "prediction": 1, "confidence": 0.75, "option_scores": [0.25, 0.75]},
        "",
        {"question_id": C, "prediction": 0, "extra": "ignored"},
        {"question_id": E, "prediction": -1},
    ])
    frame = import_predictions(path, "my-model", QUESTIONS)
    assert frame.columns == ["model", "question_id", "prediction", "confidence", "option_scores", "source_line"]
    assert frame["model"].to_list() == ["my-model"] * 3
    assert frame["question_id"].to_list() == [A, C, E]
    assert frame["prediction"].to_list() == [1, 0, -1]
    assert frame["confidence"].to_list() == [0.75, None, None]
    assert frame["option_scores"].to_list() == [[0.25, 0.75], None, None]
    assert frame["source_line"].to_list() == [1, 3, 4]
    assert frame.schema["option_scores"] == pl.List(pl.Float64)


def test_csv(tmp_path):
    path = write(tmp_path / "preds.csv", [
        "question_id,prediction,confidence,option_scores",
        f'{B},2,0.5,"[0.1, 0.4, 0.5]"',
        f"{D},1,,",
    ])
    frame = import_predictions(path, "m", QUESTIONS)
    assert frame.select("question_id", "prediction", "confidence", "source_line").rows() == [
        (B, 2, 0.5, 2), (D, 1, None, 3)
    ]
    assert frame["option_scores"].to_list() == [[0.1, 0.4, 0.5], None]


def test_preds_txt_follows_the_test_order(tmp_path):
    # Test split sorted by `order`: C (0), D (1), A (2).
    path = write(tmp_path / "preds.txt", ["3", "2", "0"])
    frame = import_predictions(path, "m", QUESTIONS)
    assert frame.select("question_id", "prediction", "source_line").rows() == [(C, 3, 1), (D, 2, 2), (A, 0, 3)]
    assert frame["confidence"].null_count() == 3


@pytest.mark.parametrize(
    "rows, line, message",
    [
        ([{"question_id": A, "prediction": 0}, {"question_id": "f" * 16, "prediction": 0}], 2, "unknown question id"),
        ([{"question_id": A, "prediction": 2}], 1, "prediction 2 out of range"),
        ([{"question_id": C, "prediction": -2}], 1, "out of range"),
        ([{"question_id": A, "prediction": 0}, {"question_id": C, "prediction": 1}, {"question_id": A, "prediction": 1}],
         3, "duplicate question id 'aaaaaaaaaaaaaaaa' (first on line 1)"),
        ([{"question_id": A, "prediction": 0}, '{"question_id": "x", '], 2, "malformed JSON"),
        (["[1, 2]"], 1, "expected a JSON object"),
        ([{"question_id": A}], 1, "missing prediction"),
        ([{"prediction": 1}], 1, "missing question_id"),
        ([{"question_id": 7, "prediction": 1}], 1, "question_id must be a string, got 7"),
        ([{"question_id": A, "prediction": "one"}], 1, "prediction must be an integer"),
        ([{"question_id": A, "prediction": True}], 1, "prediction must be an integer"),
        ([{"question_id": A, "prediction": 0, "confidence": 1.5}], 1, "confidence 1.5 is outside [0, 1]"),
        ([{"question_id": A, "prediction": 0, "confidence": -0.1}], 1, "outside [0, 1]"),
        ([{"question_id": A, "prediction": 0, "option_scores": [1.0]}], 1, "option_scores has 1 values for 2 options"),
        ([{"question_id": A, "prediction": 0, "option_scores": ["x", 1]}], 1, "list of finite numbers"),
        ([], 1, "no predictions"),
    ],
)
def test_jsonl_refusals_name_the_line(tmp_path, rows, line, message):
    path = jsonl(tmp_path, rows)
    with pytest.raises(PredictionsImportError) as info:
        import_predictions(path, "m", QUESTIONS)
    text = str(info.value)
    assert text.startswith(f"preds.jsonl line {line}: ") and message in text and "\n" not in text
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "lines, line, message",
    [
        (["3", "2"], 3, "file ends after 2 lines but the test split has 3 questions"),
        (["3", "2", "0", "1"], 4, "more lines than the 3 test questions"),
        (["3", "x", "0"], 2, "expected one integer index"),
        (["3", "2", "2"], 3, "prediction 2 out of range for question aaaaaaaaaaaaaaaa with 2 options"),
        (["4", "2", "0"], 1, "out of range"),
        (["3", "", "0"], 2, "expected one integer index"),
    ],
)
def test_preds_txt_refusals_name_the_line(tmp_path, lines, line, message):
    path = write(tmp_path / "preds.txt", lines)
    with pytest.raises(PredictionsImportError) as info:
        import_predictions(path, "m", QUESTIONS)
    assert str(info.value).startswith(f"preds.txt line {line}: ") and message in str(info.value)


@pytest.mark.parametrize(
    "lines, line, message",
    [
        (["question_id,confidence", f"{A},0.5"], 1, "lacks column 'prediction'"),
        (["question_id,prediction", f"{A},1", f"{A},0"], 3, "duplicate question id"),
        (["question_id,prediction", f"{A},1,0.3"], 2, "expected 2 cells, found 3"),
        (["question_id,prediction,confidence", f"{C},1,2"], 2, "outside [0, 1]"),
        (["question_id,prediction,option_scores", f"{A},1,oops"], 2, "JSON list"),
        (["question_id,prediction", f'"{A}\nmore",1', f"{C},9"], 2, "unknown question id"),
        (["question_id,prediction", f'"{A}",1', f'"{C}\n",1', f"{D},9"], 5, "out of range"),
    ],
)
def test_csv_refusals_name_the_line(tmp_path, lines, line, message):
    path = write(tmp_path / "preds.csv", lines)
    with pytest.raises(PredictionsImportError) as info:
        import_predictions(path, "m", QUESTIONS)
    assert str(info.value).startswith(f"preds.csv line {line}: ") and message in str(info.value)


def test_other_refusals(tmp_path):
    with pytest.raises(PredictionsImportError, match="not found"):
        import_predictions(tmp_path / "nope.jsonl", "m", QUESTIONS)
    with pytest.raises(PredictionsImportError, match="unknown predictions format '.parquet'"):
        import_predictions(write(tmp_path / "p.parquet", ["x"]), "m", QUESTIONS)
    with pytest.raises(PredictionsImportError, match="order column 'rank'"):
        import_predictions(write(tmp_path / "preds.txt", ["0"]), "m", QUESTIONS, order_by="rank")
    with pytest.raises(PredictionsImportError, match="lacks column 'num_choices'"):
        import_predictions(write(tmp_path / "p.jsonl", ["{}"]), "m", QUESTIONS.drop("num_choices"))
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PredictionsImportError, match="not UTF-8"):
        import_predictions(tmp_path / "bin.jsonl", "m", QUESTIONS)


@pytest.mark.parametrize(
    "name, lines, line",
    [
        ("preds.jsonl", [json.dumps({"question_id": A, "prediction": 1}).encode(), b'{"question_id": "\xff\xfe", "prediction": 0}'], 2),
        ("preds.jsonl", [b"\xef\xbb\xbf" + json.dumps({"question_id": A, "prediction": 1}).encode(), b"", b"\x80"], 3),
        ("preds.csv", [b"question_id,prediction", f"{A},1".encode(), f"{C},0".encode(), b"\xc3(,0"], 4),
        ("preds.csv", [b"question_id,predicti\xe9n", f"{A},1".encode()], 1),
        ("preds.txt", [b"0", b"1\xff", b"2"], 2),
        ("preds.txt", [b"0", b"1", "\u00e9".encode()[:1]], 3),  # cut inside a character at the end
    ],
)
def test_non_utf8_files_are_refused_naming_the_line(tmp_path, name, lines, line):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(PredictionsImportError) as info:
        import_predictions(path, "m", QUESTIONS)
    assert str(info.value).startswith(f"{name} line {line}: not UTF-8 text")
    assert "\n" not in str(info.value)
