"""A rebuild after the site changed writes what a build from scratch writes, and reuses rows.

One data home is built at demo revision 0, then rebuilt at ``--revision 1`` and ``--revision 2``
(the real command). After each rebuild, every lake file, every export file (bytes) and every
warehouse table (contents) is compared with a fresh build of the same revision in another home.
The split ledger is the dataset's memory, not a cache: the fresh build starts from the ledger
the rebuild started from (without it, a fresh build deals every family anew, by design).

Settings and code changes: the stages are rerun in process on the rebuilt lake with another
seed, or with a code digest patched to differ, and must refuse reuse and still write the
bytes a run without any reuse state writes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipelines.clean import stage as clean_stage
from pipelines.dataset import stage as dataset_stage
from pipelines.profiles.stage import tag_stage
from pipelines.settings import BuildSettings
from pipelines.store import row_reuse
from pipelines.store.home import DataHome
from pipelines.store.memo import forget

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 150
REUSING_STAGES = ("latex", "shuffle", "tags")
# the built-in baselines: predictions and metrics are rebuilt and compared like every stage; the
# embedding model (11 s to load, in each of the five builds) is built by test_end_to_end
MODEL_ARGS = ("--model", "random", "--model", "most-frequent-position", "--model", "longest-option")
# lake/state holds caches and run records (mtimes and digests of this home's files), not outputs;
# the split ledger there is the dataset's memory: compared
STATE = "lake/state/"
LEDGER = "lake/state/split_ledger.parquet"


def cli_build(home: Path, revision: int) -> None:
    command = [sys.executable, "-m", "pipelines.orchestration.cli", "build", "--home", str(home),
               "--questions", str(QUESTIONS), "--revision", str(revision), "--quiet", *MODEL_ARGS]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def output_digests(home: Path) -> dict[str, str]:
    """sha256 of every file of the lake (caches left out) and of the export."""
    found = {}
    for top in ("lake", "export"):
        for path in sorted((home / top).rglob("*")):
            rel = path.relative_to(home).as_posix()
            hidden = any(part.startswith(".") for part in path.relative_to(home).parts)  # e.g. the previous export
            if path.is_file() and not hidden and (not rel.startswith(STATE) or rel.startswith(LEDGER)):
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def warehouse_contents(home: Path) -> dict[str, object]:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' ORDER BY 1").fetchall()]
        views = con.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()
        contents: dict[str, object] = {"views": views}
        for table in tables:
            columns = con.execute(f'DESCRIBE "{table}"').fetchall()
            rows = con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()
            contents[table] = (columns, rows)
        return contents
    finally:
        con.close()


def stage_figures(home: Path, stage: str) -> dict:
    return json.loads((home / "lake" / "state" / "fingerprints" / f"{stage}.json").read_text())["figures"]


def copy_ledger(source: Path, target: Path) -> None:
    state = target / "lake" / "state"
    state.mkdir(parents=True, exist_ok=True)
    for path in (source / "lake" / "state").glob("split_ledger.parquet*"):
        shutil.copy2(path, state / path.name)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The home rebuilt at revisions 0, 1, 2: per revision, its outputs, warehouse, stage figures
    and the ledger it started from (a copy in a folder of its own)."""
    base = tmp_path_factory.mktemp("incremental")
    home = base / "home"
    snapshots = {}
    for revision in (0, 1, 2):
        ledger = base / f"ledger-before-{revision}"
        if revision:
            copy_ledger(home, ledger)
        cli_build(home, revision)
        snapshots[revision] = {
            "outputs": output_digests(home),
            "warehouse": warehouse_contents(home),
            "figures": {s: stage_figures(home, s) for s in (*REUSING_STAGES, "split", "warehouse")},
            "ledger": ledger,
        }
    return home, snapshots


@pytest.mark.parametrize("revision", [1, 2])
def test_rebuild_writes_what_a_fresh_build_writes(rebuilt, tmp_path, revision):
    _, snapshots = rebuilt
    fresh = tmp_path / "fresh"
    copy_ledger(snapshots[revision]["ledger"], fresh)
    cli_build(fresh, revision)
    got = snapshots[revision]
    expected = output_digests(fresh)
    assert sorted(got["outputs"]) == sorted(expected)
    differing = [name for name in expected if got["outputs"][name] != expected[name]]
    assert differing == []
    assert got["warehouse"] == warehouse_contents(fresh)


def test_rebuilds_reuse_rows_and_say_so(rebuilt):
    _, snapshots = rebuilt
    for stage in REUSING_STAGES:
        first = snapshots[0]["figures"][stage]
        assert first["rows_reused"] == 0 and first["reuse_refused"] == "no previous run"
        for revision in (1, 2):
            figures = snapshots[revision]["figures"][stage]
            assert "reuse_refused" not in figures, (stage, figures)
            # the demo changes ~2% a revision: most rows are reused, the changed ones computed
            assert figures["rows_reused"] > 0.8 * (figures["rows_reused"] + figures["rows_computed"]), (stage, figures)
            assert figures["rows_computed"] > 0, (stage, figures)
    split = snapshots[2]["figures"]["split"]
    assert split["rows_reused"] > 0 and split["rows_computed"] > 0


def _run_reusing_stages(home: DataHome, settings: BuildSettings) -> dict:
    for stage in (*REUSING_STAGES, "split"):
        forget(home, stage)  # the stage memo would skip: these tests are about the rows
    return {
        "latex": clean_stage.latex_stage(home),
        "shuffle": dataset_stage.shuffle_stage(home, settings),
        "split": dataset_stage.split_stage(home, settings),
        "tags": tag_stage(home, settings)[1],
    }


def _stage_outputs(home: DataHome) -> dict[str, str]:
    names = ("latex", "latex_failures", "shuffled", "questions", "choices", "question_tags")
    return {n: hashlib.sha256(home.lake_path(n).read_bytes()).hexdigest() for n in names}


def _copy_home(source: Path, target: Path) -> DataHome:
    shutil.copytree(source / "lake", target / "lake")
    return DataHome(target)


def test_settings_change_refuses_reuse(rebuilt, tmp_path):
    home, _ = rebuilt
    reused = _copy_home(home, tmp_path / "reused")
    scratch = _copy_home(home, tmp_path / "scratch")
    shutil.rmtree(scratch.lake / "state" / "rows")
    settings = BuildSettings(home=str(reused.root), seed=7)
    figures = _run_reusing_stages(reused, settings)
    assert figures["shuffle"]["reuse_refused"] == "settings, code or input columns changed"
    assert figures["shuffle"]["rows_reused"] == 0
    # LaTeX does not depend on the seed: it still reuses every row; the tagger reads the options
    # in their shuffled order, so it recomputes the questions whose order changed, and only those
    assert figures["latex"]["rows_computed"] == 0
    assert "reuse_refused" not in figures["tags"] and 0 < figures["tags"]["rows_computed"] < figures["tags"]["rows_reused"] + figures["tags"]["rows_computed"]
    _run_reusing_stages(scratch, BuildSettings(home=str(scratch.root), seed=7))
    assert _stage_outputs(reused) == _stage_outputs(scratch)


def test_code_change_refuses_reuse(rebuilt, tmp_path, monkeypatch):
    home, _ = rebuilt
    reused = _copy_home(home, tmp_path / "reused")
    settings = BuildSettings(home=str(reused.root))
    before = _stage_outputs(reused)
    unchanged = _run_reusing_stages(reused, settings)
    assert all(unchanged[s]["rows_computed"] == 0 for s in REUSING_STAGES)
    original = row_reuse.code_digest_of
    monkeypatch.setattr(row_reuse, "code_digest_of", lambda fn: "edited " + original(fn))
    figures = _run_reusing_stages(reused, settings)
    for stage in REUSING_STAGES:
        assert figures[stage]["reuse_refused"] == "settings, code or input columns changed"
        assert figures[stage]["rows_reused"] == 0
    assert _stage_outputs(reused) == before


def test_deleted_rows_are_dropped(rebuilt, tmp_path):
    home, _ = rebuilt
    reused = _copy_home(home, tmp_path / "reused")
    deduplicated = pl.read_parquet(reused.lake_path("deduplicated"))
    gone = deduplicated["question_id"][::10].to_list()
    from pipelines.store.lake import write_table

    write_table(deduplicated.filter(~pl.col("question_id").is_in(gone)), reused.lake_path("deduplicated"))
    scratch = _copy_home(reused.root, tmp_path / "scratch")
    shutil.rmtree(scratch.lake / "state" / "rows")
    figures = _run_reusing_stages(reused, BuildSettings(home=str(reused.root)))
    assert figures["latex"]["rows_computed"] == 0
    _run_reusing_stages(scratch, BuildSettings(home=str(scratch.root)))
    assert _stage_outputs(reused) == _stage_outputs(scratch)
    assert not pl.read_parquet(reused.lake_path("question_tags"))["question_id"].is_in(gone).any()
