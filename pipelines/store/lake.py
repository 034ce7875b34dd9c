"""Parquet in the lake: atomic, deterministic writes and simple reads.

Every stage output is one Parquet file written to a temporary name and renamed into
place, so a reader sees the previous file or the new one, never a half-written one.
Writes use fixed settings (no timestamps in metadata) so the same table gives the same
bytes.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.store.records import QUARANTINE_SCHEMA, RAW_QUESTION_SCHEMA

if TYPE_CHECKING:
    from pipelines.store.home import DataHome

ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"

# causes worth naming in a message: libraries (pyarrow, DuckDB) put them in their own words
_NAMED_CAUSES = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG, errno.EIO, errno.ENOENT)


class StorageError(OSError):
    """A write to the data home failed (full disk, permissions, ...). The message is one
    line naming the path and the cause; what was at the path before is unchanged.
    ``errno`` and ``filename`` are those of the failure."""

    def __str__(self) -> str:
        return self.args[0]


def describe_os_error(exc: BaseException, *, temporary_marker: str | None = None) -> str:
    """The cause of a failed file operation in a few words, e.g. ``No space left on device``,
    followed by the file involved when the error names one that is not a temporary of ours
    (a name containing ``temporary_marker``)."""
    text = str(exc)
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        cause = os.strerror(code)
    else:
        cause = next((os.strerror(c) for c in _NAMED_CAUSES if os.strerror(c) in text), "")
        if not cause:
            match = re.search(r"\[errno (\d+)\]", text, flags=re.IGNORECASE)
            if not match:
                return (text.splitlines() or [type(exc).__name__])[0]
            cause = os.strerror(int(match.group(1)))
    filename = getattr(exc, "filename", None)
    if not filename:
        quoted = re.search(r'"(/[^"]+)"', text)  # DuckDB quotes the file it failed on
        filename = quoted.group(1) if quoted else None
    if filename and not (temporary_marker and temporary_marker in str(filename)):
        return f"{cause} ({filename})"
    return cause


def storage_error(path: Path | str, exc: BaseException) -> StorageError:
    cause = describe_os_error(exc, temporary_marker=f".{Path(path).name}.")
    error = StorageError(f"could not write {path}: {cause}; the file there, if any, is unchanged")
    error.errno = getattr(exc, "errno", None)
    error.filename = str(path)
    return error


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, start: str = "") -> bool:
    """Whether process ``pid`` runs; with ``start`` (from ``process_start``), whether it is
    still the same process and not a later one that reused the number."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or process_start(pid) in ("", start)


def remove_stale_temporaries(folder: Path, prefix: str) -> None:
    """Delete ``<prefix><pid>.*`` temporaries in ``folder`` left by processes that no longer
    run (a build killed mid-write). Temporaries of live processes are left alone."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix):].split(".", 1)[0].split("-", 1)[0]
        if not pid_text.isdigit() or process_alive(int(pid_text)):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def fsync_directory(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tmp_path(path: Path) -> Path:
    """A new empty temporary file beside ``path`` (``.<name>.<pid>.<random>.tmp``)."""
    prefix = f".{path.name}."
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent, prefix)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{prefix}{os.getpid()}.", suffix=".tmp")
    except OSError as exc:
        raise storage_error(path, exc) from None
    os.close(fd)
    return Path(tmp)


def write_table(table: pa.Table | pl.DataFrame, path: Path | str) -> Path:
    """Atomically write ``table`` as Parquet at ``path``.

    On failure (e.g. a full disk) the temporary file is removed, ``path`` keeps its previous
    content and a one-line ``StorageError`` says why.
    """
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
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise storage_error(path, exc) from None
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
        try:
            self._writer.close()
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.abort()
            raise storage_error(self.path, exc) from None
        except BaseException:
            self.abort()
            raise
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


def read_lake(home: DataHome, name: str) -> pl.DataFrame:
    path = lake(home, name)
    if not path.exists():
        raise FileNotFoundError(f"lake table {name} is missing at {path}; materialize its asset first")
    return pl.read_parquet(path)


def write_quarantine(home: DataHome, stage: str, frame: pl.DataFrame) -> int:
    frame = frame.select(QUARANTINE_SCHEMA.names).sort("source", "source_key", "reason")
    write_table(frame, home.lake / "quarantine" / f"{stage}.parquet")
    return frame.height


def read_raw_questions(home: DataHome) -> pl.DataFrame:
    files = sorted((home.lake / "raw_questions").glob("*.parquet"))
    if not files:
        return empty_frame(RAW_QUESTION_SCHEMA)
    return pl.concat([pl.read_parquet(f) for f in files], how="vertical").sort("source", "source_key")


def lake_files(home: DataHome, *patterns: str) -> list[Path]:
    """Files of the lake matching glob ``patterns`` (relative to ``lake/``), sorted."""
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in home.lake.glob(pattern) if p.is_file() and not p.name.startswith("."))
    return sorted(found)
