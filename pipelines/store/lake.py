"""Parquet in the lake: atomic, deterministic writes and simple reads.

Every stage output is one Parquet file written to a temporary name and renamed into
place, so a reader sees the previous file or the new one, never a half-written one.
Writes use fixed settings (no timestamps in metadata) so the same table gives the same
bytes.

Atomic writes go through ``pipelines.store.atomic`` (one temporary name, one cleanup).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.store.atomic import renamed_into_place, atomic_path, storage_error, temporary_path
from pipelines.store.records import QUARANTINE_SCHEMA, RAW_QUESTION_SCHEMA

if TYPE_CHECKING:
    from pipelines.store.home import DataHome

ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"


def write_table(table: pa.Table | pl.DataFrame, path: Path | str, *, dictionary: bool = True,
                compression: str = COMPRESSION) -> Path:
    """Atomically write ``table`` as Parquet at ``path``.

    ``dictionary=False`` turns dictionary encoding off: for tables of unique keys and hashes
    (row-reuse state), where it costs most of the write and saves nothing. ``compression="lz4"``:
    for state rewritten on every build, where zstd's smaller file costs twice the CPU.

    On failure (e.g. a full disk) the temporary file is removed, ``path`` keeps its previous
    content and a one-line ``StorageError`` says why.
    """
    path = Path(path)
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    with atomic_path(path) as tmp:
        pq.write_table(
            table,
            tmp,
            compression=compression,
            row_group_size=ROW_GROUP_SIZE,
            write_statistics=False,  # no reader of the lake uses them; they cost a fifth of the write
            store_schema=True,
            use_dictionary=dictionary,
        )
    return path


class BatchWriter:
    """Stream rows into one Parquet file; the file appears atomically on ``close``."""

    def __init__(self, path: Path | str, schema: pa.Schema, batch_rows: int = 50_000):
        self.path = Path(path)
        self.schema = schema
        self.batch_rows = batch_rows
        self._rows: list[dict] = []
        self._tmp = temporary_path(self.path)
        try:
            self._writer = pq.ParquetWriter(self._tmp, schema, compression=COMPRESSION)
        except OSError as exc:
            self._tmp.unlink(missing_ok=True)
            raise storage_error(self.path, exc) from None
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise
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
            try:
                self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            except OSError as exc:
                self.abort()
                raise storage_error(self.path, exc) from None
            self.count += len(self._rows)
            self._rows = []

    def close(self) -> Path:
        self._flush()
        with renamed_into_place(self._tmp, self.path):
            self._writer.close()
        return self.path

    def abort(self) -> None:
        """Drop the partial file; ``path`` keeps its previous content."""
        try:
            self._writer.close()
        except Exception:  # closing flushes buffered pages, which can fail again on a full disk
            pass
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


# ---- reading and writing the lake's tables ----------------------------------------

def lake(home: DataHome, name: str) -> Path:
    """The Parquet file of lake table ``name``."""
    return home.lake_path(name)


def read_lake(home: DataHome, name: str, columns: list[str] | None = None) -> pl.DataFrame:
    """Lake table ``name`` (only ``columns`` when given: the others are not decoded)."""
    path = lake(home, name)
    if not path.exists():
        raise FileNotFoundError(f"lake table {name} is missing at {path}; materialize its asset first")
    return pl.read_parquet(path, columns=columns)


def write_quarantine(home: DataHome, stage: str, frame: pl.DataFrame) -> int:
    frame = frame.select(QUARANTINE_SCHEMA.names).sort("source", "source_key", "reason")
    write_table(frame, home.lake / "quarantine" / f"{stage}.parquet")
    return frame.height


def read_raw_questions(home: DataHome) -> pl.DataFrame:
    files = sorted((home.lake / "raw_questions").glob("*.parquet"))
    if not files:
        return empty_frame(RAW_QUESTION_SCHEMA)
    raw = pl.concat([pl.read_parquet(f) for f in files], how="vertical")
    return raw if _strictly_ascending(raw, "source", "source_key") else raw.sort("source", "source_key")


def _strictly_ascending(frame: pl.DataFrame, first: str, second: str) -> bool:
    """Whether every row's (first, second) is greater than the row before's, nulls absent: then
    sorting by them keeps the order (a store is usually written sorted; checking costs less)."""
    if frame.height < 2:
        return True
    if frame.select(pl.col(first).null_count() + pl.col(second).null_count()).item():
        return False
    a, b = pl.col(first), pl.col(second)
    ascending = (a.shift(-1) > a) | ((a.shift(-1) == a) & (b.shift(-1) > b))
    return bool(frame.select(ascending.head(frame.height - 1).all()).item())


def lake_files(home: DataHome, *patterns: str) -> list[Path]:
    """Files of the lake matching glob ``patterns`` (relative to ``lake/``), sorted."""
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in home.lake.glob(pattern) if p.is_file() and not p.name.startswith("."))
    return sorted(found)
