"""Row-level reuse inside a stage that has to run: recompute only new and changed rows.

``pipelines.store.memo`` skips a stage whose inputs, settings and code are all unchanged. When
one input row changed, the stage's fingerprint changes and the stage runs; this module lets it
take every other row's result from its previous output instead of computing it again.

How a stage uses it::

    reuse = RowReuse(home, "latex", key="question_id", columns=["problem", "choices"],
                     outputs=[lake(home, "latex"), lake(home, "latex_failures")],
                     settings={...}, code=_latex)
    plan = reuse.plan(questions)              # questions: the stage's input rows, one per key
    old = plan.previous(pl.read_parquet(lake(home, "latex")))  # previous output, reusable keys only
    new = compute(plan.todo)                  # the stage's own work, on new and changed rows only
    out = canonical(pl.concat([old, new]), "question_id")       # the order a full build writes
    write_table(out, ...)                     # every output of the stage first,
    reuse.save(plan)                          # then the reuse state
    figures.update(plan.figures())            # rows_reused / rows_computed (/ reuse_refused)

What "unchanged" means. For every input row the plan computes a content digest of ``key`` and
``columns`` (the input columns the stage reads): two 64-bit Polars row hashes
(``DataFrame.hash_rows``) with fixed seeds, 128 bits. A row is reused when its key was in the
previous input with the same digest and the previous run's *context* is the same: the stage
name and ``version``, ``key``,
``columns`` with their dtypes, ``settings`` (JSON), the code digest of ``code``
(``pipelines.store.code_deps.code_digest_of``) and the Polars version (its hash is only stable
within one version). Any difference refuses reuse as a whole (``plan.refused`` says why) and
every row is computed, as in a build from scratch. Reuse is refused too when an output
recorded with the state is missing or not the file the state was saved with (size and
mtime_ns: a crash between the outputs and the state, or an edit by hand), and when
``STEMFORGE_ROW_REUSE=0`` is set in the environment (a switch for comparisons and debugging).

Finding rows without joins on the key: the previous state's rows are in the previous input's
order, so ``plan`` matches digests (numbers) and ``plan.previous`` takes an output of one row per
key in that order (as the stages write it) by row number; ``plan.previous_of_earlier_keys`` drops
the few keys not reused from an output of several rows per key; ``in_order_of`` puts a stage's
results in its input's order by a sort where a join is not needed.

Rows whose key is gone from the input are not in ``plan.reused``: ``plan.previous`` drops
their output rows, so deletions drop rows. A stage whose row results depend on other rows
("affected rows": a family, a group) widens ``plan.todo`` itself with ``plan.recompute(keys)``
before computing.

Byte-identical outputs. The guarantee (a rebuild after any change writes the bytes a build
from scratch writes) holds when the stage's result for a row depends only on that row's
``columns`` (plus settings and code), and the stage assembles the output in a canonical order
and layout: ``canonical`` sorts and rechunks, so the Parquet writer sees the same table either
way. Stages should write through ``canonical`` in the full path too.

State: ``lake/state/rows/<stage>.parquet`` (key columns, ``digest_a``, ``digest_b``; ~20 bytes
a row plus the key) and ``lake/state/rows/<stage>.json`` (the context's digest, the outputs'
identities, the row file's identity). Both are written after the stage's outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import polars as pl

from pipelines.store.atomic import atomic_write_text
from pipelines.store.code_deps import code_digest_of
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.memo import file_identity

STATE_FORMAT = 3  # 3: the digest covers the key too
DIGEST_COLUMNS = ("digest_a", "digest_b")
# fixed seeds: the digest of a row must be the same in every process
_SEEDS = (0x5EED_0001, 0x5EED_0002)
DISABLE_VARIABLE = "STEMFORGE_ROW_REUSE"


def state_dir(home: DataHome) -> Path:
    return home.lake / "state" / "rows"


def row_digests(frame: pl.DataFrame, key: Sequence[str], columns: Sequence[str]) -> pl.DataFrame:
    """``key`` columns plus ``digest_a`` / ``digest_b``: a 128-bit content digest of ``columns``."""
    content = frame.select(columns)
    return pl.DataFrame([
        *(frame[k] for k in key),
        content.hash_rows(_SEEDS[0]).alias(DIGEST_COLUMNS[0]),
        content.hash_rows(_SEEDS[1]).alias(DIGEST_COLUMNS[1]),
    ])


def canonical(frame: pl.DataFrame, by: str | Sequence[str]) -> pl.DataFrame:
    """``frame`` in a stage's canonical order, one chunk per column (same Parquet bytes however
    the rows were put together)."""
    by = [by] if isinstance(by, str) else list(by)
    return frame.sort(by, maintain_order=True).rechunk()


def in_order_of(frame: pl.DataFrame, rows: pl.DataFrame, key: str | Sequence[str]) -> pl.DataFrame:
    """``rows`` (one per key of ``frame``, in any order, key columns included) in the row order of
    ``frame``, keys left out of ``rows`` null. A stage's input is sorted by its key, so sorting
    ``rows`` by it and checking the keys line up usually does it (a join costs five times as much)."""
    key = [key] if isinstance(key, str) else list(key)
    if rows.height == frame.height:
        ordered = rows.sort(key, maintain_order=True)
        if all(ordered[k].equals(frame[k], check_dtypes=True, null_equal=False) for k in key):
            return ordered
    return frame.select(key).join(rows, on=key, how="left", maintain_order="left")


def reuse_enabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass
class ReusePlan:
    """What a stage reuses and what it computes for one input frame (from ``RowReuse.plan``)."""

    key: list[str]
    todo: pl.DataFrame  # input rows to compute: new, changed or affected
    reused: pl.DataFrame  # key columns of the rows whose previous output is kept
    digests: pl.DataFrame  # key + digest of every current input row (saved by ``RowReuse.save``)
    refused: str = ""  # why nothing is reused ("" when reuse was possible)
    _input: pl.DataFrame | None = field(default=None, repr=False)
    # per row of ``reused``: its row in the previous state, whose key columns are ``_previous_keys``
    _previous_rows: pl.Series | None = field(default=None, repr=False)
    _previous_keys: pl.DataFrame | None = field(default=None, repr=False)

    def previous(self, output: pl.DataFrame, on: str | Sequence[str] | None = None) -> pl.DataFrame:
        """The rows of a previous ``output`` whose key is reused (several rows per key allowed);
        ``on`` names the output's key columns when they differ from the input's. An output of one
        row per key in the previous input's order (what stages write) is taken by row number, in
        the order of ``reused``; any other by a join, in its own order."""
        on = self.key if on is None else ([on] if isinstance(on, str) else list(on))
        if self.reused.height == 0:
            return output.clear()
        if self._previous_rows is not None and self._previous_keys is not None \
                and output.height == self._previous_keys.height \
                and all(output[o].equals(self._previous_keys[k], check_dtypes=True, null_equal=False)
                        for o, k in zip(on, self.key)):
            return output[self._previous_rows]
        keys = self.reused.rename(dict(zip(self.key, on)))
        return output.join(keys, on=on, how="semi", maintain_order="left")

    def previous_of_earlier_keys(self, output: pl.DataFrame, on: str | Sequence[str] | None = None) -> pl.DataFrame:
        """``previous`` for an output whose every key was a key of the previous input (a stage's
        own previous output is): its rows minus those of the keys not reused (changed, gone or
        recomputed), found with a join on those few keys instead of the many reused ones. Keeps
        the output's order."""
        on = self.key if on is None else ([on] if isinstance(on, str) else list(on))
        if self._previous_rows is None or self._previous_keys is None:
            return self.previous(output, on)
        if self.reused.height == 0:
            return output.clear()
        not_reused = np.ones(self._previous_keys.height, dtype=bool)
        not_reused[self._previous_rows.to_numpy()] = False
        dropped = self._previous_keys.filter(pl.Series(not_reused)).rename(dict(zip(self.key, on)))
        return output.join(dropped, on=on, how="anti", maintain_order="left")

    def recompute(self, keys: pl.DataFrame) -> None:
        """Compute these keys too (rows affected by a change elsewhere), even if unchanged."""
        keys = keys.select(self.key).unique()
        moving = self.reused.join(keys, on=self.key, how="semi")
        if moving.height == 0:
            return
        staying = self.reused.with_row_index("_row").join(moving, on=self.key, how="anti", maintain_order="left")["_row"]
        self.reused = self.reused[staying]
        if self._previous_rows is not None:
            self._previous_rows = self._previous_rows.gather(staying)
        assert self._input is not None
        self.todo = self._input.join(self.reused, on=self.key, how="anti", maintain_order="left")

    def figures(self) -> dict:
        out = {"rows_reused": self.reused.height, "rows_computed": self.todo.height}
        if self.refused:
            out["reuse_refused"] = self.refused
        return out


class RowReuse:
    """The row-reuse state of one stage (see the module doc)."""

    def __init__(
        self,
        home: DataHome,
        stage: str,
        *,
        key: str | Sequence[str],
        columns: Sequence[str],
        outputs: Sequence[Path],
        settings: dict | None = None,
        code: Callable | None = None,
        version: str = "1",
    ):
        self.home = home
        self.stage = stage
        self.key = [key] if isinstance(key, str) else list(key)
        self.columns = list(columns)
        self.outputs = [Path(p) for p in outputs]
        self.settings = settings or {}
        self.code = code
        self.version = version

    @property
    def rows_path(self) -> Path:
        return state_dir(self.home) / f"{self.stage}.parquet"

    @property
    def record_path(self) -> Path:
        return state_dir(self.home) / f"{self.stage}.json"

    def context(self, frame: pl.DataFrame) -> str:
        description = {
            "format": STATE_FORMAT,
            "stage": self.stage,
            "version": self.version,
            "key": self.key,
            "columns": [[c, str(frame.schema[c])] for c in self.key + self.columns],
            "settings": self.settings,
            "code": code_digest_of(self.code) if self.code is not None else "",
            "polars": pl.__version__,
        }
        return hashlib.sha256(json.dumps(description, sort_keys=True, default=str).encode()).hexdigest()

    def _refusal(self, context: str) -> tuple[str, pl.DataFrame | None]:
        if not reuse_enabled():
            return f"{DISABLE_VARIABLE} is off", None
        try:
            record = json.loads(self.record_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return "no previous run", None
        if not isinstance(record, dict) or record.get("format") != STATE_FORMAT:
            return "no previous run", None
        if record.get("context") != context:
            return "settings, code or input columns changed", None
        recorded = record.get("outputs", {})
        for path in self.outputs:
            if file_identity(path) != recorded.get(self._name(path)):
                return f"previous output changed or missing: {path.name}", None
        if file_identity(self.rows_path) != record.get("rows"):
            return "row state changed or missing", None
        return "", pl.read_parquet(self.rows_path)

    def _name(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.home.root))
        except ValueError:
            return str(path.resolve())

    def plan(self, frame: pl.DataFrame) -> ReusePlan:
        """Compare ``frame`` (the stage's input, one row per key) with the previous run's state."""
        digests = row_digests(frame, self.key, list(dict.fromkeys([*self.key, *self.columns])))
        refused, previous = self._refusal(self.context(frame))
        if previous is None:
            return ReusePlan(self.key, frame, digests.select(self.key).clear(), digests, refused, frame)
        try:
            previous = previous.cast(digests.schema)
        except pl.exceptions.PolarsError:
            return ReusePlan(self.key, frame, digests.select(self.key).clear(), digests,
                             "row state unreadable", frame)
        # the digests cover the key: a join on them alone (numbers) finds each row's previous row,
        # whose key is then compared, so a digest shared by chance reuses nothing
        matched = digests.select(DIGEST_COLUMNS).join(
            previous.select(DIGEST_COLUMNS).with_row_index("_previous_row"), on=list(DIGEST_COLUMNS), how="left",
            maintain_order="left",
        )["_previous_row"]
        if matched.len() != frame.height:  # a previous state with a row twice: by key
            reused = digests.join(previous, on=[*self.key, *DIGEST_COLUMNS], how="semi", maintain_order="left").select(self.key)
            todo = frame.join(reused, on=self.key, how="anti", maintain_order="left")
            return ReusePlan(self.key, todo, reused, digests, "", frame)
        previous_keys = previous.select(self.key)
        same = matched.is_not_null()
        if same.any():
            at = matched.fill_null(0)
            for k in self.key:
                same = same & (previous_keys[k].gather(at) == digests[k]).fill_null(False)
        reused = digests.select(self.key).filter(same)
        todo = frame.filter(~same)
        return ReusePlan(self.key, todo, reused, digests, "", frame, matched.filter(same), previous_keys)

    def save(self, plan: ReusePlan, frame: pl.DataFrame | None = None) -> None:
        """Record the state after every output of the stage is written (``frame``: the input
        given to ``plan``, for its dtypes; default the plan's own)."""
        frame = plan._input if frame is None else frame
        write_table(plan.digests, self.rows_path, dictionary=False)
        record = {
            "format": STATE_FORMAT,
            "stage": self.stage,
            "context": self.context(frame),
            "outputs": {self._name(p): file_identity(p) for p in self.outputs},
            "rows": file_identity(self.rows_path),
        }
        atomic_write_text(self.record_path, json.dumps(record, sort_keys=True, indent=1))

    def forget(self) -> None:
        self.record_path.unlink(missing_ok=True)
        self.rows_path.unlink(missing_ok=True)
