"""Publishing only what changed (pipelines/store/warehouse_update.py): the warehouse after an
in-place publish holds what a publish from scratch holds, and refuses to reuse what it cannot
trust."""

from __future__ import annotations

import shutil

import duckdb
import polars as pl
import pytest

from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.warehouse import publish_warehouse
from pipelines.store import warehouse_update


def questions(n: int, edited: set[int] = frozenset(), gone: set[int] = frozenset(), added: int = 0) -> pl.DataFrame:
    ids = [i for i in range(n + added) if i not in gone]
    return pl.DataFrame({
        "question_id": [f"q{i:05d}" for i in ids], "source": ["s"] * len(ids),
        "source_key": [f"k{i}" for i in ids], "subject": ["math"] * len(ids), "grade": [None] * len(ids),
        "skill": ["x"] * len(ids), "problem": [f"p{i}{' edited' if i in edited else ''}" for i in ids],
        "pic_prob": [True] * len(ids), "pic_choice": [False] * len(ids), "num_choices": [2] * len(ids),
        "answer_idx": [i % 2 for i in ids], "split": ["train"] * len(ids), "duplicate_group": ["g"] * len(ids),
        "choices": [[f"a{i}", "b"] for i in ids],
    }, schema_overrides={"grade": pl.String})


def write_lake(home: DataHome, frame: pl.DataFrame, statistics: int = 1) -> None:
    write_table(frame, home.lake_path("questions"))
    write_table(pl.DataFrame({"subject": ["math"], "questions": [statistics]}), home.lake_path("dataset_statistics"))


def contents(home: DataHome) -> dict:
    con = duckdb.connect(str(home.warehouse), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        return {t: (con.execute(f'DESCRIBE "{t}"').fetchall(), con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall())
                for t in tables}
    finally:
        con.close()


def fresh_contents(tmp_path, frame: pl.DataFrame, statistics: int = 1) -> dict:
    other = DataHome(tmp_path / "fresh")
    shutil.rmtree(other.root, ignore_errors=True)
    write_lake(other, frame, statistics)
    publish_warehouse(other)
    return contents(other)


@pytest.fixture
def home(tmp_path) -> DataHome:
    home = DataHome(tmp_path / "home")
    write_lake(home, questions(3000))
    first = publish_warehouse(home)
    assert first.figures["reuse_refused"] == "no previous publish state"
    return home


def test_changed_rows_are_updated_in_place_and_equal_a_fresh_publish(home, tmp_path):
    changed = questions(3000, edited={5, 70, 2999}, gone={10, 11}, added=4)
    write_lake(home, changed)
    result = publish_warehouse(home)
    assert "reuse_refused" not in result.figures
    assert result.figures["tables_updated"]["questions"] == "updated: 5 rows out, 7 in"
    assert result.figures["tables_updated"]["dataset_statistics"] == "kept"
    assert result.figures["rows_computed"] == 7
    assert result.tables["questions"] == 3002
    assert contents(home) == fresh_contents(tmp_path, changed)


def test_a_table_without_key_is_replaced(home, tmp_path):
    write_lake(home, questions(3000), statistics=2)
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["dataset_statistics"] == "replaced"
    assert result.figures["tables_updated"]["questions"] == "kept"
    assert contents(home) == fresh_contents(tmp_path, questions(3000), statistics=2)


def test_a_schema_change_replaces_the_table(home, tmp_path):
    wider = questions(3000).with_columns(pl.lit("x").alias("note"))
    write_lake(home, wider)
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["questions"] == "replaced"
    assert contents(home) == fresh_contents(tmp_path, wider)


def test_a_warehouse_replaced_behind_its_back_is_published_from_scratch(home, tmp_path):
    other = DataHome(tmp_path / "other")
    write_lake(other, questions(10))
    publish_warehouse(other)
    shutil.copyfile(other.warehouse, home.warehouse)
    changed = questions(3000, edited={1})
    write_lake(home, changed)
    result = publish_warehouse(home)
    assert result.figures["reuse_refused"] == "the published warehouse is not the one last published here"
    assert contents(home) == fresh_contents(tmp_path, changed)


def test_code_change_publishes_from_scratch(home, tmp_path, monkeypatch):
    original = warehouse_update.code_digest_of
    monkeypatch.setattr(warehouse_update, "code_digest_of", lambda fn: "edited " + original(fn))
    changed = questions(3000, edited={1})
    write_lake(home, changed)
    result = publish_warehouse(home)
    assert result.figures["reuse_refused"] == "SQL, code or library versions changed"
    assert contents(home) == fresh_contents(tmp_path, changed)


def test_rows_sharing_a_key_change_together(home, tmp_path):
    doubled = pl.concat([questions(3000), questions(3000).head(1)])  # q00000 twice, the same row
    write_lake(home, doubled)
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["questions"] == "updated: 1 rows out, 2 in"  # the rows of a key change together
    assert result.tables["questions"] == 3001
    assert contents(home) == fresh_contents(tmp_path, doubled)
    back = questions(3000, edited={3})
    write_lake(home, back)
    again = publish_warehouse(home)
    assert again.figures["tables_updated"]["questions"] == "updated: 3 rows out, 2 in"
    assert contents(home) == fresh_contents(tmp_path, back)


def test_a_file_grown_by_updates_is_compacted_by_a_full_publish(home, tmp_path, monkeypatch):
    monkeypatch.setattr(warehouse_update, "GROWTH_LIMIT", 0.5)
    monkeypatch.setattr(warehouse_update, "GROWTH_SLACK", 0)
    changed = questions(3000, edited={1})
    write_lake(home, changed)
    result = publish_warehouse(home)
    assert result.figures["reuse_refused"].startswith("the file grew past 0.5x")
    assert contents(home) == fresh_contents(tmp_path, changed)


def test_a_keys_digest_covers_its_rows_in_any_order_and_each_copy():
    rows = pl.DataFrame({"question_id": ["a", "a", "b", "c", "c"], "position": [0, 1, 0, 0, 0],
                         "text": ["x", "y", "z", "w", "w"]})

    def digest(frame: pl.DataFrame) -> dict:
        out = warehouse_update.group_digests(frame, ["question_id"])
        return {r[0]: r[1:] for r in out.select("question_id", "digest_a", "digest_b").iter_rows()}

    base = digest(rows)
    assert digest(rows.reverse()) == base  # any order
    single = warehouse_update.row_digests(rows, ["question_id"], rows.columns).filter(pl.col("question_id") == "b")
    assert base["b"] == single.row(0)[1:]  # a key with one row keeps that row's digest
    assert digest(rows.head(4))["c"] != base["c"]  # one copy of a row repeated within a key gone
    edited = rows.with_columns(pl.when(pl.col("position") == 1).then(pl.lit("v")).otherwise("text").alias("text"))
    assert digest(edited)["a"] != base["a"] and digest(edited)["b"] == base["b"]


def test_a_key_that_lost_one_of_two_equal_rows_is_updated(home, tmp_path):
    doubled = pl.concat([questions(3000), questions(3000).head(1), questions(3000).head(1)])
    write_lake(home, doubled)
    publish_warehouse(home)
    once = pl.concat([questions(3000), questions(3000).head(1)])
    write_lake(home, once)
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["questions"] == "updated: 3 rows out, 2 in"
    assert contents(home) == fresh_contents(tmp_path, once)
