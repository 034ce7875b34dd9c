"""The DuckDB warehouse: published atomically from the lake, queried read-only.

Publishing builds a complete new database file beside ``warehouse.duckdb`` and renames it
into place. Readers open the published file read-only, so they never wait for a build and
never see a half-written table: a query sees the previous version or the new one. Tables
are materialized inside the file (not views over Parquet), which keeps the file
self-contained and lets readers run with external file access disabled. After a first publish,
the new file is a copy of the published one with only the changed tables and rows updated
(``pipelines.store.warehouse_update``), renamed into place the same way.

Each table's schema lives in ``sql/tables/<name>.sql`` (used when its lake file does not
exist yet, so every documented name is always queryable).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from pipelines.store.home import DataHome
from pipelines.store.atomic import describe_os_error, fsync_directory, replace_recording_checksum, temporary_path
from pipelines.store.checksums import checksum_path
from pipelines.store.memo import forget, memoized
from pipelines.store.warehouse_update import apply_table, forget_state as forget_update_state
from pipelines.store.warehouse_update import load_plan as load_update_plan, save_state as save_update_state

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"

# table name -> its Parquet file(s) relative to the lake (a folder holds one file per
# source, stage or model); the order is the publish order.
WAREHOUSE_TABLES: dict[str, str] = {
    "raw_questions": "raw_questions/*.parquet",
    "questions": "questions.parquet",
    "choices": "choices.parquet",
    "images": "images.parquet",
    "duplicates": "duplicates.parquet",
    "quarantine": "quarantine/*.parquet",
    "predictions": "predictions/*.parquet",
    "metrics": "metrics.parquet",
    "profiles": "profiles.parquet",
    "question_tags": "question_tags.parquet",
    "dataset_statistics": "dataset_statistics.parquet",
    "reliability": "reliability.parquet",
}


def table_files(home: DataHome, table: str) -> list[Path]:
    return sorted(home.lake.glob(WAREHOUSE_TABLES[table]))

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "raw_questions": ("source", "source_key", "subject", "grade", "skill"),
    "questions": (
        "question_id", "source", "source_key", "subject", "grade", "skill", "problem",
        "pic_prob", "pic_choice", "num_choices", "answer_idx", "split", "duplicate_group",
    ),
    "choices": ("question_id", "position", "text", "image_hash", "original_position"),
    "images": ("image_hash", "format", "width", "height", "phash", "path"),
    "duplicates": ("source", "source_key", "kept_question_id", "kind", "evidence"),
    "quarantine": ("source", "source_key", "stage", "reason"),
    "predictions": ("model", "question_id", "prediction", "confidence", "correct"),
    "metrics": ("model", "split", "metric", "group_by", "group_value", "value", "n", "ci_low", "ci_high"),
    "profiles": ("profile_of", "component", "sub_component", "value", "n"),
}


class WarehouseError(RuntimeError):
    """A warehouse that cannot be published or read; the message is one line."""


@dataclass(frozen=True)
class PublishResult:
    path: Path
    tables: dict[str, int]  # table -> row count
    skipped: bool
    figures: dict = field(default_factory=dict)  # the publish's figures (rows reused / computed, ...)


def warehouse_inputs(home: DataHome) -> list[Path]:
    """The lake files the warehouse is built from."""
    return [path for table in WAREHOUSE_TABLES for path in table_files(home, table)]


def publish_warehouse(home: DataHome, *, force: bool = False, staged: bool = False) -> PublishResult:
    """Rebuild ``warehouse.duckdb`` from the lake and swap it in atomically.

    Memoized like every stage (``pipelines.store.memo``): skipped when the lake files' content,
    the SQL that defines the views, the export version it records (``pipelines.store.publish``)
    and this code are unchanged and the published file is the one it wrote.

    With ``staged`` the new file is left at ``publish.staged_warehouse(home)`` for
    ``publish.commit`` to swap in with the export, as one version (the build does this).
    """
    from pipelines.store.publish import pending_export_version, staged_warehouse

    if force:
        forget(home, "warehouse")
        forget_update_state(home)
    sql = sorted(p for p in SQL_DIR.rglob("*.sql"))
    sql_digests = {str(p.relative_to(SQL_DIR)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sql}
    version = pending_export_version(home)
    written = staged_warehouse(home) if staged else home.warehouse
    figures = memoized(
        home, "warehouse", lambda: _publish(home, sql_digests, version, written),
        inputs=warehouse_inputs(home),
        outputs=[written, checksum_path(written)],  # a warehouse without its checksum is republished
        extra={"sql": sql_digests, "export_version": version},
    )
    return PublishResult(home.warehouse, dict(figures["tables"]), figures["skipped"], figures)


def _publish(home: DataHome, sql_digests: dict[str, str], version: str = "", written: Path | None = None) -> dict:
    """Publish the warehouse: in place in a copy of the published one when the last publish's
    state allows it (``pipelines.store.warehouse_update``), else from scratch; returns figures.
    ``version``: the export version it records; ``written``: where the new file goes (the
    published path, or the staged one)."""
    from pipelines.store.publish import record_version

    target = home.warehouse
    written = target if written is None else written
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _publish_error(target, exc) from None
    tmp = temporary_path(target, kind="name")  # DuckDB creates the file
    counts: dict[str, int] = {}
    plan, full_because = load_update_plan(home, sql_digests)
    try:
        if not full_because:
            shutil.copyfile(target, tmp)
        # one thread: parallel inserts cost twice the CPU and write a file twice the size (each
        # thread compresses its own row groups), which every later copy and checksum reads again
        con = duckdb.connect(str(tmp), config={"threads": 1})
        try:
            for table in WAREHOUSE_TABLES:
                files = table_files(home, table)
                if apply_table(plan, con, table, files, incremental=not full_because):
                    pass
                elif files:
                    con.execute(f'DROP TABLE IF EXISTS "{table}"')
                    con.execute(
                        f'CREATE TABLE "{table}" AS SELECT * FROM read_parquet(?, union_by_name = true)',
                        [[str(f) for f in files]],
                    )
                else:
                    con.execute(f'DROP TABLE IF EXISTS "{table}"')
                    con.execute((SQL_DIR / "tables" / f"{table}.sql").read_text())
                missing = set(REQUIRED_COLUMNS.get(table, ())) - {
                    r[0] for r in con.execute(f'DESCRIBE "{table}"').fetchall()
                }
                if missing:
                    raise WarehouseError(f"table {table} lacks required columns: {', '.join(sorted(missing))}")
                counts[table] = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            if full_because:  # a copy has the views already (the SQL is unchanged)
                for view_sql in sorted((SQL_DIR / "views").glob("*.sql")):
                    con.execute(view_sql.read_text())
            record_version(con, version)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        written.parent.mkdir(parents=True, exist_ok=True)
        replace_recording_checksum(tmp, written)
        fsync_directory(written.parent)
        save_update_state(plan, written)
    except (OSError, duckdb.Error) as exc:
        raise _publish_error(target, exc) from None
    finally:
        _remove_temporary_database(tmp)
    written = sum(plan.rows_written.get(t, n) for t, n in counts.items())
    figures = {"tables": counts, "rows_reused": sum(counts.values()) - written, "rows_computed": written,
               "tables_updated": plan.figures}
    if full_because:
        figures["reuse_refused"] = full_because
    return figures


def _publish_error(target: Path, exc: BaseException) -> WarehouseError:
    return WarehouseError(
        f"could not publish the warehouse at {target}: "
        f"{describe_os_error(exc, temporary_marker=f'.{target.name}.')}; the previous warehouse is unchanged"
    )


def _remove_temporary_database(tmp: Path) -> None:
    # DuckDB keeps a write-ahead log beside the file and spills to a folder named after it
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        try:
            leftover.unlink(missing_ok=True)
        except OSError:
            pass
    shutil.rmtree(tmp.with_name(tmp.name + ".tmp"), ignore_errors=True)


_MEMORY_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.IGNORECASE)


def connect_readonly(home: DataHome, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection with no access to files outside the warehouse; with
    ``memory_limit`` (e.g. ``2GB``) a query stops there instead of spilling to disk."""
    if not home.warehouse.exists():
        raise WarehouseError(f"no warehouse at {home.warehouse}; run `stemforge build` first")
    if memory_limit is not None and not _MEMORY_SIZE.match(memory_limit):
        raise WarehouseError(f"memory limit {memory_limit!r} is not a size such as 512MB or 2GB")
    try:
        con = duckdb.connect(str(home.warehouse), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot open {home.warehouse}: {str(exc).splitlines()[0]}") from None
    if memory_limit is not None:
        con.execute(f"SET memory_limit = '{memory_limit.strip()}'")
        con.execute("SET temp_directory = ''")  # no spilling: the limit is a limit
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


_SIZE_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
               "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def _size_bytes(size: str) -> int:
    number, unit = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$", size).groups()
    return int(float(number) * _SIZE_UNITS[unit.upper()])


def _cell_bytes(value) -> int:
    if isinstance(value, (list, tuple)):
        return sys.getsizeof(value) + sum(_cell_bytes(v) for v in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_cell_bytes(k) + _cell_bytes(v) for k, v in value.items())
    return sys.getsizeof(value)


def _fetch_within(cur, started: float, timeout: float | None, memory_limit: str | None) -> list[tuple]:
    """The result's rows, fetched in batches under the same limits as the query: the time limit
    and the memory limit cover the rows as Python holds them (DuckDB's limit stops at its side)."""
    budget = _size_bytes(memory_limit) if memory_limit is not None else None
    rows: list[tuple] = []
    held = 0
    while True:
        batch = cur.fetchmany(2048)
        if not batch:
            return rows
        rows.extend(batch)
        if budget is not None:
            held += sum(8 + _cell_bytes(v) for row in batch for v in row)
            if held > budget:
                raise WarehouseError(f"the result is larger than the memory limit of {memory_limit} (--max-memory SIZE); "
                                     "select fewer rows or columns")
        if timeout is not None and time.monotonic() - started > timeout:
            raise WarehouseError(f"query stopped at the time limit of {timeout:g} s (--timeout SECONDS)")


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]


def run_query(
    home: DataHome,
    sql: str,
    params: list[Any] | None = None,
    *,
    timeout: float | None = None,
    memory_limit: str | None = None,
) -> QueryResult:
    """Run one read-only query; errors become a one-line WarehouseError. ``timeout``
    (seconds) interrupts the query from a timer thread; ``memory_limit`` caps DuckDB's memory."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise WarehouseError(f"time limit must be a positive number of seconds, got {timeout}")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise WarehouseError(f"query failed: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise WarehouseError(f"give exactly one SQL statement, got {len(statements)}")
    con = connect_readonly(home, memory_limit)
    timer = threading.Timer(timeout, con.interrupt) if timeout is not None else None
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        started = time.monotonic()
        cur = con.execute(sql, params or [])
        if cur.description is None:
            return QueryResult([], [])
        return QueryResult([d[0] for d in cur.description], _fetch_within(cur, started, timeout, memory_limit))
    except duckdb.InterruptException:
        raise WarehouseError(f"query stopped at the time limit of {timeout:g} s (--timeout SECONDS)") from None
    except duckdb.OutOfMemoryException:
        raise WarehouseError(f"query stopped at the memory limit of {memory_limit} (--max-memory SIZE)") from None
    except duckdb.Error as exc:
        raise WarehouseError(f"query failed: {str(exc).splitlines()[0]}") from None
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
