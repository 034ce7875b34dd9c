"""Metadata helpers shared by the asset modules: row counts, schemas and previews."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    import polars as pl

OWNERS = ["team:stemforge"]


def frame_metadata(frame: pl.DataFrame, preview_rows: int = 5) -> dict:
    schema = dg.TableSchema(
        columns=[dg.TableColumn(name, str(dtype)) for name, dtype in frame.schema.items()]
    )
    preview = frame.head(preview_rows)
    return {
        "dagster/row_count": frame.height,
        "dagster/column_schema": schema,
        "preview": dg.MetadataValue.md(_markdown_table(preview)),
    }


def _markdown_table(frame: pl.DataFrame, width: int = 60) -> str:
    if frame.height == 0:
        return "(empty)"
    cols = frame.columns
    def cell(v) -> str:
        s = "" if v is None else str(v)
        s = s.replace("|", "\\|").replace("\n", " ")
        return s if len(s) <= width else s[: width - 1] + "…"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.iter_rows():
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def json_metadata(values: dict) -> dict:
    out = {}
    for key, value in values.items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            out[key] = value
        else:
            out[key] = dg.MetadataValue.json(value)
    return out
