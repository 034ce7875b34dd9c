"""bench/paper_scale.py's check that a rebuilt home holds what a build from scratch writes, and its
row in bench/run_all.py's goals table: on two small planted homes."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


paper_scale = _load("paper_scale")
run_all = _load("run_all")


def _warehouse(path: Path, rows: list[tuple[int, str]]) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE questions (id INTEGER, split VARCHAR, options VARCHAR[])")
    con.executemany("INSERT INTO questions VALUES (?, ?, [?, 'b'])", [(i, s, s) for i, s in rows])
    con.execute("CREATE VIEW train AS SELECT * FROM questions WHERE split = 'train'")
    con.close()


def _home(root: Path, rows: list[tuple[int, str]]) -> Path:
    (root / "lake" / "state" / "fingerprints").mkdir(parents=True)
    (root / "lake" / "raw_questions").mkdir()
    (root / "export" / "stem" / "data").mkdir(parents=True)
    (root / "export" / ".stem-previous").mkdir()
    pl.DataFrame({"id": sorted(i for i, _ in rows)}).write_parquet(root / "lake" / "questions.parquet")
    pl.DataFrame({"id": [1], "split": ["train"]}).write_parquet(root / "lake" / "state" / "split_ledger.parquet")
    (root / "lake" / "state" / "fingerprints" / "split.json").write_text('{"mtime": 1}')
    (root / "lake" / "raw_questions" / "demo.parquet").write_bytes(b"raw")
    (root / "export" / "stem" / "data" / "train-00000-of-00001.parquet").write_bytes(b"shard bytes")
    (root / "export" / ".stem-previous" / "README.md").write_text("previous release")
    _warehouse(root / "warehouse.duckdb", rows)
    return root


ROWS = [(1, "train"), (2, "test"), (2, "test")]


@pytest.fixture
def homes(tmp_path):
    return _home(tmp_path / "rebuilt", ROWS), _home(tmp_path / "scratch", list(reversed(ROWS)))


def test_same_outputs_are_identical_whatever_the_bookkeeping(homes):
    rebuilt, scratch = homes
    (scratch / "lake" / "state" / "fingerprints" / "split.json").write_text('{"mtime": 2}')
    (scratch / "lake" / "state" / "rows").mkdir()
    (scratch / "export" / ".stem-previous" / "README.md").write_text("another previous release")
    result = paper_scale.compare_homes(rebuilt, scratch)
    # rows inserted in another order: another warehouse file, the same table
    assert result == {"identical": True, "files": 3, "tables": 1, "differing_files": [], "differing_tables": []}
    assert paper_scale.scratch_verdict(result) == "rebuild vs scratch: identical (3 files, 1 tables)"


@pytest.mark.parametrize("change, differing_files, differing_tables", [
    ("export byte", ["export/stem/data/train-00000-of-00001.parquet"], []),
    ("ledger", ["lake/state/split_ledger.parquet"], []),
    ("extra lake file", ["lake/quarantine.parquet (in one home only)"], []),
    ("warehouse row", [], ["main.questions"]),
    ("warehouse duplicate row", [], ["main.questions"]),
    ("warehouse view", [], ["(views)"]),
])
def test_any_output_difference_is_found(homes, change, differing_files, differing_tables):
    rebuilt, scratch = homes
    if change == "export byte":
        (scratch / "export" / "stem" / "data" / "train-00000-of-00001.parquet").write_bytes(b"shard bytez")
    elif change == "ledger":
        pl.DataFrame({"id": [1], "split": ["test"]}).write_parquet(scratch / "lake" / "state" / "split_ledger.parquet")
    elif change == "extra lake file":
        pl.DataFrame({"id": [1]}).write_parquet(scratch / "lake" / "quarantine.parquet")
    else:
        con = duckdb.connect(str(scratch / "warehouse.duckdb"))
        if change == "warehouse row":
            con.execute("UPDATE questions SET split = 'valid' WHERE id = 1")
        elif change == "warehouse duplicate row":  # same distinct rows, another count of each
            con.execute("DELETE FROM questions WHERE id = 2")
            con.execute("INSERT INTO questions VALUES (2, 'test', ['test', 'b']), (1, 'train', ['train', 'b'])")
        else:
            con.execute("CREATE OR REPLACE VIEW train AS SELECT id FROM questions WHERE split = 'train'")
        con.close()
    result = paper_scale.compare_homes(rebuilt, scratch)
    assert not result["identical"]
    assert (result["differing_files"], result["differing_tables"]) == (differing_files, differing_tables)
    assert paper_scale.scratch_verdict(result).startswith("rebuild vs scratch: DIFFERENT")


def test_scratch_home_starts_from_the_ledger_only(homes):
    rebuilt, _ = homes
    home = paper_scale.DataHome(rebuilt)
    scratch = paper_scale.start_scratch_home(home)
    assert scratch.root == rebuilt.parent / "rebuilt-scratch"
    found = sorted(p.relative_to(scratch.root).as_posix() for p in scratch.root.rglob("*") if p.is_file())
    assert found == ["lake/state/split_ledger.parquet"]
    shutil.rmtree(scratch.root)


def test_goals_table_row():
    name = "rebuild after 1% changes, 20 new questions, then 0.1% changes, outputs vs a build from scratch (bench scale)"
    same = {"identical": True, "files": 39, "tables": 12, "differing_files": [], "differing_tables": []}
    assert run_all.scratch_row(same)[0] == name
    assert run_all.scratch_row(same)[1:: 2] == ("identical (39 files, 12 tables)", "PASS")
    differ = {**same, "identical": False, "differing_files": ["lake/questions.parquet"]}
    assert run_all.scratch_row(differ)[1:: 2] == (
        "1 of 39 files and 0 of 12 tables differ: lake/questions.parquet", "MISS")
    unfinished = {"identical": None, "error": "the build from scratch or the comparison did not finish"}
    assert run_all.scratch_row(unfinished)[3] == "MISS"


def test_rewritten_files_are_the_new_and_replaced_outputs(homes):
    rebuilt, _ = homes
    before = paper_scale.file_identities(rebuilt)
    assert sorted(before) == ["export/stem/data/train-00000-of-00001.parquet", "lake/questions.parquet",
                              "lake/state/split_ledger.parquet"]
    shard = rebuilt / "export" / "stem" / "data" / "train-00000-of-00001.parquet"
    replacement = shard.with_name("new.tmp")
    replacement.write_bytes(b"shard bytes")  # same bytes, another file: a rewrite all the same
    replacement.replace(shard)
    pl.DataFrame({"id": [3]}).write_parquet(rebuilt / "lake" / "duplicates.parquet")
    (rebuilt / "lake" / "state" / "fingerprints" / "split.json").write_text('{"mtime": 3}')  # bookkeeping
    after = paper_scale.file_identities(rebuilt)
    assert paper_scale.rewritten_files(before, after) == [
        "export/stem/data/train-00000-of-00001.parquet", "lake/duplicates.parquet"]
    assert paper_scale.rewritten_files(after, after) == []


def test_rewrite_floor_writes_lake_tables_again_and_copies_the_rest(homes):
    rebuilt, _ = homes
    names = ["export/stem/data/train-00000-of-00001.parquet", "lake/questions.parquet"]
    before = {name: (rebuilt / name).read_bytes() for name in names}
    scratch = rebuilt / "floor-scratch"
    floor = paper_scale.rewrite_floor(rebuilt, names, scratch)
    assert floor["files"] == 2
    assert floor["lake_bytes"] == (rebuilt / "lake" / "questions.parquet").stat().st_size
    assert floor["copy_bytes"] == len(b"shard bytes")
    assert floor["seconds"] == floor["lake_seconds"] + floor["copy_seconds"] > 0
    assert not scratch.exists()
    assert {name: (rebuilt / name).read_bytes() for name in names} == before
    row = run_all.rewrite_floor_row({**floor, "lake_seconds": 4.0, "copy_seconds": 18.0, "seconds": 22.0,
                                     "lake_bytes": 230 * 2**20, "copy_bytes": 7 * 2**30}, 88.0)
    assert row[0].startswith("floor of the 0.1%-changed rebuild: its 2 rewritten output files")
    assert row[1:] == ("4.0 s + 18.0 s / 88 s = 25.0% (lake tables alone 4.5%)", "(no goal)", "n/a")
    with_rebuild = run_all.rewrite_floor_row({**floor, "lake_seconds": 4.0, "copy_seconds": 18.0, "seconds": 22.0,
                                              "lake_bytes": 0, "copy_bytes": 0}, 88.0, 44.0)
    assert with_rebuild[1].endswith("; the 0.1% rebuild took 2.0x its floor")


def test_rewrite_floor_leaves_no_scratch_when_a_file_is_gone(homes):
    rebuilt, _ = homes
    scratch = rebuilt / "floor-scratch"
    with pytest.raises(FileNotFoundError):
        paper_scale.rewrite_floor(rebuilt, ["lake/gone.parquet"], scratch)
    assert not scratch.exists()


def test_added_rows_grow_the_raw_store_only(tmp_path):
    home = paper_scale.DataHome(tmp_path / "home")
    (home.lake / "raw_questions").mkdir(parents=True)
    raw = pl.DataFrame({"source": "demo", "source_key": [f"http://demo.localhost/q/{i}" for i in range(50)],
                        "skill": ["a", "b"] * 25, "problem": [f"What is {i} + 1?" for i in range(50)]})
    raw.write_parquet(home.lake / "raw_questions" / "demo.parquet")
    assert paper_scale.add_rows(home, 5, seed=3) == {"rows": 50, "edited": 0, "removed": 0, "added": 5, "changed": 5}
    grown = pl.read_parquet(home.lake / "raw_questions" / "demo.parquet")
    assert grown.height == 55 and grown.join(raw, on=list(raw.columns), how="anti").height == 5
    assert grown["source_key"].is_sorted() and grown["source_key"].n_unique() == 55
    row = run_all.added_row({"changes": {"added": 100}, "seconds": 6.5, "stages": [
        {"stage": "export", "seconds": 2.0, "shards_kept_written": (95, 3)}]}, 65.0)
    assert row[:2] == ("rebuild after 100 new questions, nothing else changed / full build",
                       "6.5 s / 65 s = 10.0% (export shards kept 95, written 3: 2.0 s)")
