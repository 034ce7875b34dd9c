"""Import a model's predictions from a file (``stemforge eval --predictions FILE --model NAME``).

Formats, chosen by the file name:
- ``*.jsonl`` / ``*.json`` (one object per line): ``{"question_id": str, "prediction": int,
  "confidence": number in [0, 1] (optional), "option_scores": [numbers] (optional)}``; other
  keys are ignored; blank lines are skipped.
- ``*.csv``: a header with ``question_id`` and ``prediction`` and optionally ``confidence``
  and ``option_scores`` (a JSON list such as ``[0.2, 0.8]``); an empty cell is null.
- ``*.txt`` (the STEM leaderboard's ``preds.txt``): one index per line, in the TEST split's
  order, i.e. the rows of ``questions`` with ``split == 'test'`` sorted by ``order_by``; the
  file must have exactly one line per test question (a final newline is fine).
- VLMEvalKit's prediction table (``.xlsx``, ``.tsv``, ``.csv``) and lmms-eval's sample log
  (``.jsonl``) from a run on ``stemforge export --format vlmevalkit|lmms-eval``: told apart
  from the formats above by their columns / first object (``harness_import``).

``prediction`` is a 0-based option index below the question's ``num_choices``, or -1 for "no
answer" (scored as wrong). ``option_scores``, when given, has one number per option.

Refused with ``PredictionsImportError`` naming the file and line: a malformed line, an
unknown question id, an index out of range, a duplicate question id, a confidence outside
[0, 1], option scores of the wrong length, a preds.txt of the wrong length, a line that is
not UTF-8.

Result columns: model, question_id, prediction (Int64), confidence (Float64, null when not
given), option_scores (List(Float64), null when not given), source_line (1-based line).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import polars as pl

from pipelines.evaluation.prediction_errors import LineError, PredictionsImportError, csv_records, json_line_records

REQUIRED_QUESTION_COLUMNS = ("question_id", "split", "num_choices")
RESULT_SCHEMA = {
    "model": pl.String,
    "question_id": pl.String,
    "prediction": pl.Int64,
    "confidence": pl.Float64,
    "option_scores": pl.List(pl.Float64),
    "source_line": pl.Int64,
}


def _as_index(value) -> int:
    if isinstance(value, bool):
        raise LineError(f"prediction must be an integer, got {json.dumps(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
    raise LineError(f"prediction must be an integer, got {value!r}")


def _as_confidence(value) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise LineError(f"confidence must be a number, got {json.dumps(value)}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LineError(f"confidence must be a number, got {value!r}") from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise LineError(f"confidence {value} is outside [0, 1]")
    return number


def _as_scores(value) -> list[float] | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise LineError(f"option_scores must be a JSON list of numbers, got {value[:40]!r}") from None
    if not isinstance(value, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise LineError("option_scores must be a list of finite numbers")
    return [float(v) for v in value]


def _read_jsonl(path: Path):
    for line_number, row in json_line_records(path):
        if not isinstance(row, (dict, LineError)):
            row = LineError("expected a JSON object")
        yield line_number, row


def _read_csv(path: Path):
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise PredictionsImportError(f"{path.name} line 1: empty CSV (expected a header)") from None
        except csv.Error as exc:
            raise PredictionsImportError(f"{path.name} line 1: malformed CSV header ({exc})") from None
        header = [h.strip() for h in header]
        for column in ("question_id", "prediction"):
            if column not in header:
                raise PredictionsImportError(f"{path.name} line 1: CSV header lacks column {column!r}")
        if len(set(header)) != len(header):
            raise PredictionsImportError(f"{path.name} line 1: CSV header repeats a column")
        yield from csv_records(reader, header)


def _test_order(questions: pl.DataFrame, order_by: str) -> list[str]:
    if order_by not in questions.columns:
        raise PredictionsImportError(f"questions table lacks the order column {order_by!r} needed for preds.txt")
    test = questions.filter(pl.col("split") == "test").sort(order_by)
    return test["question_id"].to_list()


def _read_preds_txt(path: Path, test_ids: list[str]):
    count = 0
    with path.open("r", encoding="utf-8-sig") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line_number, line in enumerate(lines, start=1):
        if line_number > len(test_ids):
            raise PredictionsImportError(
                f"{path.name} line {line_number}: more lines than the {len(test_ids)} test questions"
            )
        count = line_number
        text = line.strip()
        if not text.lstrip("-").isdigit():
            yield line_number, LineError(f"expected one integer index, got {line[:40]!r}")
            continue
        if test_ids[line_number - 1] is None:  # a release's test row this build merged into another question
            continue
        yield line_number, {"question_id": test_ids[line_number - 1], "prediction": int(text)}
    if count < len(test_ids):
        raise PredictionsImportError(
            f"{path.name} line {count + 1}: file ends after {count} lines but the test split has {len(test_ids)} questions"
        )


def _undecodable_line(path: Path) -> str:
    """Where ``path`` stops being UTF-8, as 'line N: ...'. A newline byte is never inside a
    UTF-8 sequence, so each line decodes on its own."""
    line_number = 0
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return f"line {line_number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line)"
    return f"line {max(line_number, 1)}: not UTF-8 text"


def import_predictions(
    path: str | Path, model: str, questions: pl.DataFrame, order_by: str = "order", fmt: str = "auto",
    test_order: list[str | None] | None = None,
) -> pl.DataFrame:
    """``fmt``: ``stemforge`` (the formats above), ``vlmevalkit`` or ``lmms-eval`` (their
    outputs on a ``stemforge export``, see ``harness_import``), or ``auto`` to tell them
    apart by the file name and its header or first line. ``test_order``: the question of each
    preds.txt line (None: a line to skip) when it is not the test split in ``order_by`` order
    (a home imported from a STEM release: the release's test rows)."""
    path = Path(path)
    if not model or not model.strip():
        raise PredictionsImportError("model name is empty")
    missing = [c for c in REQUIRED_QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        raise PredictionsImportError(f"questions table lacks column {missing[0]!r}")
    if not path.is_file():
        raise PredictionsImportError(f"predictions file not found: {path}")
    num_choices = dict(zip(questions["question_id"].to_list(), questions["num_choices"].to_list()))

    from pipelines.evaluation import harness_import

    if fmt not in harness_import.IMPORT_FORMATS:
        raise PredictionsImportError(f"unknown predictions format {fmt!r}; use one of {', '.join(harness_import.IMPORT_FORMATS)}")
    if fmt == "auto":
        fmt = harness_import.detect_format(path)
    suffix = path.suffix.lower()
    if fmt == "vlmevalkit":
        if suffix not in (".xlsx", ".tsv", ".csv"):
            raise PredictionsImportError(f"{path.name}: a VLMEvalKit prediction table is .xlsx, .tsv or .csv")
        rows = harness_import.read_vlmevalkit(path, questions)
    elif fmt == "lmms-eval":
        rows = harness_import.read_lmms_eval(path, questions)
    elif suffix in (".jsonl", ".json", ".ndjson"):
        rows = _read_jsonl(path)
    elif suffix == ".csv":
        rows = _read_csv(path)
    elif suffix == ".txt":
        rows = _read_preds_txt(path, test_order if test_order is not None else _test_order(questions, order_by))
    else:
        raise PredictionsImportError(
            f"{path.name}: unknown predictions format {suffix or '(no extension)'!r}; use .jsonl, .csv or preds.txt"
        )

    seen: dict[str, int] = {}
    out = {name: [] for name in RESULT_SCHEMA}
    line_number = 0
    try:
        for line_number, row in rows:
            try:
                if isinstance(row, LineError):
                    raise row
                question_id = row.get("question_id")
                if question_id is None or question_id == "":
                    raise LineError("missing question_id")
                if not isinstance(question_id, str):
                    raise LineError(f"question_id must be a string, got {json.dumps(question_id)}")
                question_id = question_id.strip()
                if "prediction" not in row or row["prediction"] in (None, ""):
                    raise LineError("missing prediction")
                if question_id not in num_choices:
                    raise LineError(f"unknown question id {question_id!r}")
                if question_id in seen:
                    raise LineError(f"duplicate question id {question_id!r} (first on line {seen[question_id]})")
                k = num_choices[question_id]
                index = _as_index(row["prediction"])
                if not -1 <= index < k:
                    raise LineError(f"prediction {index} out of range for question {question_id} with {k} options")
                confidence = _as_confidence(row.get("confidence"))
                scores = _as_scores(row.get("option_scores"))
                if scores is not None and len(scores) != k:
                    raise LineError(f"option_scores has {len(scores)} values for {k} options")
            except LineError as exc:
                reason = str(exc)  # a 300 MB id is named by its start, never echoed whole
                if len(reason) > 300:
                    reason = f"{reason[:300]}... ({len(reason):,} characters)"
                raise PredictionsImportError(f"{path.name} line {line_number}: {reason}") from None
            seen[question_id] = line_number
            out["model"].append(model)
            out["question_id"].append(question_id)
            out["prediction"].append(index)
            out["confidence"].append(confidence)
            out["option_scores"].append(scores)
            out["source_line"].append(line_number)
    except UnicodeDecodeError:
        raise PredictionsImportError(f"{path.name} {_undecodable_line(path)}") from None
    except PredictionsImportError:
        raise
    except (ValueError, RecursionError, OSError, csv.Error, LookupError, TypeError) as exc:
        # anything else a broken file makes a reader raise: one line naming the file and how far it was read
        where = f"{path.name} line {line_number + 1}" if line_number else path.name
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise PredictionsImportError(f"{where}: unreadable ({type(exc).__name__}: {reason})") from None
    if not out["model"]:
        raise PredictionsImportError(f"{path.name} line 1: no predictions in the file")
    return pl.DataFrame(out, schema=RESULT_SCHEMA)
