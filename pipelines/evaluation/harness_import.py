"""Read the outputs of evaluation harnesses run on a ``stemforge export`` (``stemforge eval``).

- VLMEvalKit's prediction table ``<model>_stemforge_<split>.xlsx`` (or ``.tsv``/``.csv`` with
  ``PRED_FORMAT``): the exported columns plus ``prediction`` (the model's text). The row's
  ``question_id`` column names the question; the letter is found in the text by
  ``infer_letter`` (VLMEvalKit's ``can_infer``), matched against the option texts as they
  were exported.
- lmms-eval's per-sample log (``--log_samples``: ``<date>_samples_stemforge_<split>.jsonl``):
  one object per doc; the ``stemforge_accuracy`` value our task's ``process_results`` logs
  gives ``question_id`` and the letter (an older lmms-eval that logs ``doc`` instead: the
  doc's ``question_id`` and the letter inferred from ``filtered_resps``).

Both yield ``(line, {"question_id", "prediction"})`` rows to ``import_predictions``, which
validates them like any predictions file; a text with no option letter is prediction -1
(no answer, scored wrong).
"""

from __future__ import annotations

import csv
import json
import string
from pathlib import Path

import polars as pl

from pipelines.dataset.harness_export import row_pictures
from pipelines.dataset.lmms_eval_task import infer_letter
from pipelines.evaluation.prediction_errors import LineError, PredictionsImportError, csv_records, json_line_records

HARNESS_IMPORT_FORMATS = ("vlmevalkit", "lmms-eval")
IMPORT_FORMATS = ("auto", "stemforge", *HARNESS_IMPORT_FORMATS)
QUESTION_COLUMNS = ("question_id", "problem_image", "choices", "choice_images")
VLMEVALKIT_COLUMNS = ("index", "question_id", "prediction")
LMMS_METRIC = "stemforge_accuracy"


def detect_format(path: Path) -> str:
    """``vlmevalkit``, ``lmms-eval`` or ``stemforge`` (our own JSONL/CSV/preds.txt), from the
    file name and, for ``.csv`` and JSON lines, the header or first object."""
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".tsv"):
        return "vlmevalkit"
    if suffix == ".csv":
        with path.open("r", encoding="utf-8-sig", newline="", errors="replace") as handle:
            try:
                header = next(csv.reader(handle), [])
            except csv.Error:  # refused with the file's name and line by the reader
                return "stemforge"
        return "vlmevalkit" if {"index", "prediction", "A"} <= {h.strip() for h in header} else "stemforge"
    if suffix in (".jsonl", ".json", ".ndjson"):
        with path.open("r", encoding="utf-8-sig", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    try:
                        first = json.loads(line)
                    except (ValueError, RecursionError):  # refused with the file's name and line by the reader
                        return "stemforge"
                    return "lmms-eval" if isinstance(first, dict) and "doc_id" in first else "stemforge"
    return "stemforge"


def _options_by_question(questions: pl.DataFrame) -> dict[str, dict[str, str]]:
    missing = [c for c in QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        raise PredictionsImportError(f"questions table lacks column {missing[0]!r}")
    out = {}
    for r in questions.select(QUESTION_COLUMNS).iter_rows(named=True):
        options, _, _ = row_pictures(r)
        out[r["question_id"]] = {string.ascii_uppercase[i]: text for i, text in enumerate(options)}
    return out


def _letter_index(letter: str | None) -> int:
    return -1 if not letter else string.ascii_uppercase.index(letter)


def _cell_text(value) -> str:
    if value is None:
        return "nan"  # pandas reads an empty cell as NaN; VLMEvalKit then matches str(nan)
    return str(value)


# A workbook is a zip: what it expands to is bounded before openpyxl reads it (a 1 MB xlsx bomb
# expanded to gigabytes), and so are the columns and rows read, whatever its dimension claims.
MAX_XLSX_EXPANDED = 64 * 1024 * 1024
MAX_XLSX_COLUMNS = 256
XLSX_EXTRA_ROWS = 1000  # rows a table may have beyond one per question


def _check_workbook_size(path: Path) -> None:
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise PredictionsImportError(f"{path.name}: not a readable .xlsx workbook ({type(exc).__name__})") from None
    if expanded > MAX_XLSX_EXPANDED:
        raise PredictionsImportError(f"{path.name}: the workbook expands to {expanded:,} bytes, more than the "
                                     f"{MAX_XLSX_EXPANDED:,} a prediction table may (a zip bomb?)")


def _table_rows(path: Path, max_rows: int | None = None):
    """(line, {column: cell}) of a VLMEvalKit table; the header is line 1. An .xlsx table reads
    at most ``max_rows`` rows after the header, and refuses a non-empty row past them."""
    if path.suffix.lower() == ".xlsx":
        from openpyxl import load_workbook

        _check_workbook_size(path)
        try:
            book = load_workbook(path, read_only=True, data_only=True)
        except Exception as exc:  # a file that is no workbook: zip, XML and key errors alike
            raise PredictionsImportError(f"{path.name}: not a readable .xlsx workbook ({type(exc).__name__})") from None
        try:
            sheet = book.worksheets[0]
            sheet.reset_dimensions()  # the declared dimension (A1:XFD1048576) is the file's word, not its size
            first = next(sheet.iter_rows(max_row=1, max_col=MAX_XLSX_COLUMNS, values_only=True), ())
            header = [str(h).strip() if h is not None else "" for h in first]
            while header and not header[-1]:
                header.pop()
            yield 1, header
            last = None if max_rows is None else max_rows + 2
            rows = sheet.iter_rows(min_row=2, max_row=last, max_col=max(len(header), 1), values_only=True)
            for line, cells in enumerate(rows, start=2):
                if all(c is None for c in cells):
                    continue
                if last is not None and line == last:
                    raise PredictionsImportError(f"{path.name} line {line}: more rows than the {max_rows - XLSX_EXTRA_ROWS:,} "
                                                 "questions a prediction table can have")
                yield line, dict(zip(header, cells))
        except PredictionsImportError:
            raise
        except Exception as exc:  # a sheet whose XML breaks while read: named with the file
            raise PredictionsImportError(f"{path.name}: not a readable .xlsx workbook ({type(exc).__name__}: "
                                         f"{' '.join(str(exc).split())[:160]})") from None
        finally:
            book.close()
        return
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open("r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            header = [h.strip() for h in next(reader, [])]
        except csv.Error as exc:
            raise PredictionsImportError(f"{path.name} line 1: malformed {path.suffix[1:].upper()} header ({exc})") from None
        yield 1, header
        for line, row in csv_records(reader, header, path.suffix[1:].upper()):
            yield line, row if isinstance(row, LineError) else {k: (v if v != "" else None) for k, v in row.items()}


def read_vlmevalkit(path: Path, questions: pl.DataFrame):
    options = _options_by_question(questions)
    rows = _table_rows(path, max_rows=len(options) + XLSX_EXTRA_ROWS)
    _, header = next(rows, (1, []))
    for column in VLMEVALKIT_COLUMNS:
        if column not in header:
            hint = " (export with `stemforge export --format vlmevalkit`, which adds it)" if column == "question_id" else ""
            raise PredictionsImportError(f"{path.name} line 1: VLMEvalKit table lacks column {column!r}{hint}")
    for line, row in rows:
        if isinstance(row, LineError):
            yield line, row
            continue
        question_id = row.get("question_id")
        question_id = str(question_id).strip() if question_id is not None else ""
        choices = options.get(question_id)
        if choices is None:
            yield line, {"question_id": question_id, "prediction": 0}  # refused as unknown (or missing) id
            continue
        yield line, {"question_id": question_id,
                     "prediction": _letter_index(infer_letter(_cell_text(row.get("prediction")), dict(choices)))}


def _response_text(sample: dict) -> str:
    value = sample.get("filtered_resps", sample.get("resps"))
    while isinstance(value, list):
        value = value[0] if value else ""
    return "" if value is None else str(value)


def read_lmms_eval(path: Path, questions: pl.DataFrame):
    options = _options_by_question(questions)
    for line, sample in json_line_records(path):
        if isinstance(sample, LineError):
            yield line, sample
            continue
        if not isinstance(sample, dict) or "doc_id" not in sample:
            yield line, LineError("expected an lmms-eval sample (an object with doc_id)")
            continue
        logged = sample.get(LMMS_METRIC)
        doc = sample.get("doc") if isinstance(sample.get("doc"), dict) else {}
        question_id = logged.get("question_id") if isinstance(logged, dict) else doc.get("question_id")
        if not isinstance(question_id, str) or not question_id:
            yield line, LineError(
                f"no question_id in the sample (neither {LMMS_METRIC} nor doc carries one); "
                "run the task `stemforge export --format lmms-eval` writes"
            )
            continue
        choices = options.get(question_id)
        if choices is None:
            yield line, {"question_id": question_id, "prediction": 0}  # refused as an unknown id
            continue
        if isinstance(logged, dict) and "prediction" in logged:
            letter = logged["prediction"]
            if not isinstance(letter, str) or (letter and letter not in choices):
                yield line, LineError(f"{LMMS_METRIC} prediction {letter!r} is not an option letter of question {question_id}")
                continue
        else:
            letter = infer_letter(_response_text(sample), dict(choices))
        yield line, {"question_id": question_id, "prediction": _letter_index(letter)}
