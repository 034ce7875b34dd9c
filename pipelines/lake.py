"""Parquet in the lake: atomic, deterministic writes and simple reads.

Every stage output is one Parquet file written to a temporary name and renamed into
place, so a reader sees the previous file or the new one, never a half-written one.
Writes use fixed settings (no timestamps in metadata) so the same table gives the same
bytes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"


def _tmp_path(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    return Path(tmp)


def write_table(table: pa.Table | pl.DataFrame, path: Path | str) -> Path:
    """Atomically write ``table`` as Parquet at ``path``."""
    path = Path(path)
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    tmp = _tmp_path(path)
    try:
        pq.write_table(
            table,
            tmp,
            compression=COMPRESSION,
            row_group_size=ROW_GROUP_SIZE,
            write_statistics=True,
            store_schema=True,
        )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class BatchWriter:
    """Stream rows into one Parquet file; the file appears atomically on ``close``."""

    def __init__(self, path: Path | str, schema: pa.Schema, batch_rows: int = 50_000):
        self.path = Path(path)
        self.schema = schema
        self.batch_rows = batch_rows
        self._rows: list[dict] = []
        self._tmp = _tmp_path(self.path)
        self._writer = pq.ParquetWriter(self._tmp, schema, compression=COMPRESSION)
        self.count = 0

    def add(self, row: dict) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.batch_rows:
            self._flush()

    def extend(self, rows: Iterable[dict]) -> None:
        for r in rows:
            self.add(r)

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            self.count += len(self._rows)
            self._rows = []

    def close(self) -> Path:
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> "BatchWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_table(path: Path | str) -> pl.DataFrame:
    return pl.read_parquet(path)


def empty_frame(schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(schema.empty_table())


def iter_batches(path: Path | str, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    yield from pq.ParquetFile(path).iter_batches(batch_size=batch_size)
