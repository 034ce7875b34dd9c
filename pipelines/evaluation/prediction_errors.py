"""Errors of a predictions import and the CSV and JSON-lines record readers, shared by the file formats
(``predictions_import``) and the harness outputs (``harness_import``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator


class PredictionsImportError(ValueError):
    """A predictions file that cannot be imported; the message names the line."""


class LineError(Exception):
    """What is wrong with one line or row; the reader adds the file name and line number."""


def csv_records(reader, header: list[str], kind: str = "CSV") -> Iterator[tuple[int, dict[str, str] | LineError]]:
    """``(line, row)`` for each record a ``csv.reader`` reads after ``header``: the row as a dict,
    or a ``LineError`` for a malformed record or one with the wrong number of cells; blank
    records are skipped. A record's line is where it starts (a quoted cell may span lines)."""
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, LineError(f"malformed {kind} ({exc})")
            continue
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            yield start, LineError(f"expected {len(header)} cells, found {len(cells)}")
            continue
        yield start, dict(zip(header, cells))


def json_line_records(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for each non-blank line of a JSON-lines file: the decoded value, or a
    ``LineError`` for a line that is not JSON. Callers check the value's shape."""
    with path.open("r", encoding="utf-8-sig") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                value = LineError(f"malformed JSON ({exc.msg})")
            except (ValueError, RecursionError) as exc:  # a 5,000-digit number; brackets nested past the stack
                value = LineError(f"malformed JSON ({' '.join(str(exc).split())[:120]})")
            yield line, value
