"""Publishing the warehouse by changing only what changed in the lake.

``pipelines.store.warehouse`` publishes a complete new database file and renames it into
place. When the previous publish left its state here and nothing but table contents changed,
the new file is instead a copy of the published one in which
- a table whose lake files are the same bytes as last time is kept as it is;
- a table with a key (``TABLE_KEYS``: a row's, or a group's such as a question's options) gets
  its rows changed in place: the rows of keys that are gone or whose content changed are
  deleted, and the rows of new and changed keys inserted, taken from the same Parquet files a
  full publish reads (the frame their digests are computed from, inserted by column name and
  cast to the table's types, which are checked equal to the files'); which keys changed comes from content
  digests per key (``pipelines.store.row_reuse.row_digests``, combined per group) kept beside
  the state;
- any other changed table is replaced whole, as a full publish creates it.
The copy is then renamed into place like a full publish, so readers see the previous
warehouse or the new one. Table contents equal a full publish's; the physical order of rows
in a table changed in place differs (changed rows come last): SQL promises no order without
``ORDER BY``.

Reuse is refused, and the publish is full, when the state is missing, when the published file
is not the one the state was saved with (size, mtime_ns), when the SQL files, this code or
the DuckDB and Polars versions changed (``context``), or when updates in place made the file
grow past ``GROWTH_LIMIT`` times its size at the last full publish, plus ``GROWTH_SLACK`` (a
full publish compacts).

State: ``lake/state/rows/warehouse.json`` and ``lake/state/rows/warehouse-<table>.parquet``
(the key columns and digests of the published rows of a keyed table).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from pipelines.store.atomic import atomic_write_text
from pipelines.store.code_deps import code_digest_of
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.memo import describe_file, file_identity
from pipelines.store.row_reuse import DIGEST_COLUMNS, reuse_enabled, row_digests, state_dir

STATE_FORMAT = 4  # 3: a key's digest over several rows is their sum; 4: no key hash column
GROWTH_LIMIT = 1.25
GROWTH_SLACK = 16 << 20  # bytes: a small file grows by whole blocks
# keys of the tables large enough to update in place: rows with one key change together
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "raw_questions": ("source", "source_key"),
    "questions": ("question_id",),
    "choices": ("question_id",),
    "images": ("image_hash",),
    "duplicates": ("source", "source_key"),
    "question_tags": ("question_id",),
    "predictions": ("model", "question_id"),
    "quarantine": ("source", "source_key"),
}


def state_path(home: DataHome) -> Path:
    return state_dir(home) / "warehouse.json"


def rows_path(home: DataHome, table: str) -> Path:
    return state_dir(home) / f"warehouse-{table}.parquet"


def _name(home: DataHome, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(home.root))
    except ValueError:
        return str(path.resolve())


def context(sql_digests: dict[str, str]) -> str:
    description = {
        "format": STATE_FORMAT,
        "sql": sql_digests,
        "code": code_digest_of(apply_table),
        "duckdb": duckdb.__version__,
        "polars": pl.__version__,
    }
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


def file_digests(home: DataHome, files: list[Path]) -> list[list[str]]:
    return [[_name(home, f), describe_file(f)["sha256"]] for f in files]


@dataclass
class UpdatePlan:
    """What the last publish left: per table, its files' digests (``None``: full publish)."""

    home: DataHome
    context: str
    tables: dict[str, dict] = field(default_factory=dict)  # the previous state's tables
    published: dict[str, dict] = field(default_factory=dict)  # this publish's, filled as it goes
    figures: dict[str, str] = field(default_factory=dict)  # table -> kept / updated (+n -m) / replaced
    rows_written: dict[str, int] = field(default_factory=dict)  # table -> rows inserted (kept tables: 0)
    full_size: int = 0  # size of the file the last full publish wrote (0: this publish is full)


def load_plan(home: DataHome, sql_digests: dict[str, str]) -> tuple[UpdatePlan, str]:
    """The plan for updating the published warehouse in place, and "" or why a full publish
    is needed (then the plan only collects the new state)."""
    plan = UpdatePlan(home, context(sql_digests))
    if not reuse_enabled():
        return plan, "row reuse switched off"
    try:
        state = json.loads(state_path(home).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return plan, "no previous publish state"
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        return plan, "no previous publish state"
    if state.get("context") != plan.context:
        return plan, "SQL, code or library versions changed"
    if file_identity(home.warehouse) != state.get("warehouse"):
        return plan, "the published warehouse is not the one last published here"
    full_size = state.get("full_size") or 0
    if state["warehouse"]["size"] > GROWTH_LIMIT * full_size + GROWTH_SLACK:
        # rows changed in place leave free blocks that DuckDB reuses only in part: compact
        return plan, f"the file grew past {GROWTH_LIMIT:g}x its size at the last full publish"
    plan.tables = state.get("tables", {})
    plan.full_size = full_size
    return plan, ""


def _describe(con: duckdb.DuckDBPyConnection, relation: str, params=None) -> list:
    return con.execute(f"DESCRIBE {relation}", params or []).fetchall()


def apply_table(plan: UpdatePlan, con: duckdb.DuckDBPyConnection, table: str, files: list[Path], *,
                incremental: bool) -> bool:
    """Bring ``table`` of the copied warehouse up to date in place; False when it must be created
    from scratch instead (the caller does). Records the table's new state in the plan."""
    digests = file_digests(plan.home, files)
    entry: dict = {"files": digests}
    plan.published[table] = entry
    previous = plan.tables.get(table) if incremental else None
    if previous is not None and previous.get("files") == digests:
        if previous.get("rows"):
            entry["rows"], entry["_rows_kept"] = True, True
        plan.figures[table] = "kept"
        plan.rows_written[table] = 0
        return True
    key = TABLE_KEYS.get(table)
    new_rows = row_keys = None
    if key and files:
        frame = _read(files)
        if frame is not None and set(key) <= set(frame.columns):
            new_rows, row_keys = _key_digests(frame, list(key))
            entry["rows"], entry["_rows_frame"] = True, new_rows
    plan.figures[table] = "created" if previous is None else "replaced"
    if previous is None or new_rows is None or not previous.get("rows") or not rows_path(plan.home, table).exists():
        return False
    source = "read_parquet(?, union_by_name = true)"
    paths = [[str(f) for f in files]]
    if _describe(con, f'"{table}"') != _describe(con, f"SELECT * FROM {source}", paths):
        return False
    try:
        old_rows = pl.read_parquet(rows_path(plan.home, table), columns=[*key, *DIGEST_COLUMNS]).cast(
            {k: new_rows.schema[k] for k in (*key, *DIGEST_COLUMNS)})
    except (OSError, pl.exceptions.PolarsError):
        return False
    gone = old_rows.filter(~_published_in(old_rows, new_rows)).select(key)
    fresh_mask = ~_published_in(new_rows, old_rows)
    on = " AND ".join(f't."{k}" IS NOT DISTINCT FROM c."{k}"' for k in key)
    deleted = inserted = 0
    if gone.height:
        con.register("_gone_keys", gone.to_arrow())
        deleted = con.execute(f'DELETE FROM "{table}" t USING _gone_keys c WHERE {on}').fetchone()[0]
        con.unregister("_gone_keys")
    if fresh_mask.any():
        # the rows of new and changed keys from the frame read above (the same files), not a second scan
        if row_keys is not None:
            changed = frame.filter(pl.Series(fresh_mask.to_numpy()[row_keys]))
        else:
            changed = frame.join(new_rows.filter(fresh_mask).select(key), on=key, how="semi", nulls_equal=True)
        con.register("_new_rows", changed.to_arrow())
        inserted = con.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM _new_rows').fetchone()[0]
        con.unregister("_new_rows")
    plan.figures[table] = f"updated: {deleted} rows out, {inserted} in"
    plan.rows_written[table] = inserted
    return True


def _published_in(rows: pl.DataFrame, other: pl.DataFrame) -> pl.Series:
    """Per key of ``rows``: True when ``other`` has its digest. Each 64-bit half is looked up on its
    own (two hash sets of numbers, not a join): a changed key passes only if its first half equals
    one key's of ``other`` and its second half one key's, chance about (keys / 2**64) ** 2."""
    return rows.select(
        pl.col(DIGEST_COLUMNS[0]).is_in(other[DIGEST_COLUMNS[0]].implode())
        & pl.col(DIGEST_COLUMNS[1]).is_in(other[DIGEST_COLUMNS[1]].implode())
    ).to_series()


def group_digests(frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """Per distinct ``key``: the key and a 128-bit digest of all its rows (keys included, whatever
    their order), so equal digests mean equal rows."""
    return _key_digests(frame, key)[0]


def _key_digests(frame: pl.DataFrame, key: list[str]) -> tuple[pl.DataFrame, np.ndarray | None]:
    """``group_digests``, and for each row of ``frame`` the index of its key's row in it (None when
    the rows of a key are not next to each other in ``frame``).

    Several rows per key (tags, options of a question): one digest per key, the sum modulo 2**64 of
    its rows' digests: the same whatever the rows' order, each row counted as often as it occurs (a
    key with one row keeps that row's digest, as in a table where keys are unique). When each key's
    rows are one run (lake tables sorted by their key, and tables of distinct keys in any order such
    as quarantine's) the sums are differences of running sums, in the order keys first occur as
    grouping gives them; other tables are grouped."""
    digests = row_digests(frame, key, frame.columns)
    if frame.height == 0:
        return digests, np.zeros(0, dtype=np.int64)
    last_of_run = frame.select(
        pl.any_horizontal(pl.col(k).ne_missing(pl.col(k).shift(-1)) for k in key)
    ).to_series().to_numpy(writable=True)
    last_of_run[-1] = True
    run_ends = np.flatnonzero(last_of_run)
    ends = digests if len(run_ends) == frame.height else digests.filter(pl.Series(last_of_run))
    if _one_run_per_key(ends.select(key)):
        if len(run_ends) < frame.height:
            ends = ends.with_columns(pl.Series(c, _run_sums(digests[c].to_numpy(), run_ends)) for c in DIGEST_COLUMNS)
        lengths = np.diff(run_ends, prepend=-1)
        return ends, np.repeat(np.arange(len(run_ends)), lengths)
    # in the order keys first occur: the state file's bytes are the same on every run
    return digests.group_by(key, maintain_order=True).agg(pl.col(c).sum() for c in DIGEST_COLUMNS), None


def _one_run_per_key(keys_of_runs: pl.DataFrame) -> bool:
    """Whether no key has a second run: the keys of the runs are in order (cheap), or distinct (a
    hash of the keys; not tried with null keys, which stay grouped)."""
    if _strictly_increasing(keys_of_runs):
        return True
    if any(keys_of_runs[k].null_count() for k in keys_of_runs.columns):
        return False
    try:
        return keys_of_runs.n_unique() == keys_of_runs.height
    except pl.exceptions.PolarsError:  # a key type without a hash
        return False


def _strictly_increasing(keys: pl.DataFrame) -> bool:
    """Whether each row's key comes after the previous row's (columns compared in turn; a null
    key is never in order)."""
    if keys.height < 2:
        return True
    after = None
    for k in reversed(keys.columns):
        greater = pl.col(k) > pl.col(k).shift(1)
        after = greater if after is None else greater | ((pl.col(k) == pl.col(k).shift(1)) & after)
    try:
        return bool(keys.select(after.slice(1).fill_null(False).all()).item())
    except pl.exceptions.PolarsError:  # a key type without an order
        return False


def _run_sums(values: np.ndarray, run_ends: np.ndarray) -> np.ndarray:
    """The sum modulo 2**64 of each run of ``values`` (runs ending at ``run_ends``)."""
    totals = np.cumsum(values, dtype=np.uint64)[run_ends]  # unsigned: wraps modulo 2**64
    totals[1:] -= totals[:-1].copy()
    return totals


def _read(files: list[Path]) -> pl.DataFrame | None:
    try:
        return pl.concat([pl.read_parquet(f) for f in files], how="vertical")
    except pl.exceptions.PolarsError:  # different schemas: the table is replaced whole
        return None


def save_state(plan: UpdatePlan, written: Path | None = None) -> None:
    """Record the published warehouse (after it is renamed into place, or staged at ``written``:
    moving it in keeps the size and mtime recorded here)."""
    written = plan.home.warehouse if written is None else written
    tables = {}
    for table, entry in plan.published.items():
        frame = entry.pop("_rows_frame", None)
        kept = entry.pop("_rows_kept", False)
        if frame is not None:
            write_table(frame, rows_path(plan.home, table), dictionary=False, compression="lz4")
        elif not kept:
            entry.pop("rows", None)
            rows_path(plan.home, table).unlink(missing_ok=True)
        tables[table] = entry
    state = {
        "format": STATE_FORMAT,
        "context": plan.context,
        "warehouse": file_identity(written),
        "full_size": plan.full_size or file_identity(written)["size"],
        "tables": tables,
    }
    atomic_write_text(state_path(plan.home), json.dumps(state, sort_keys=True, indent=1))


def forget_state(home: DataHome) -> None:
    state_path(home).unlink(missing_ok=True)
