"""Publishing only what changed (pipelines/store/warehouse_update.py): the warehouse after an
in-place publish holds what a publish from scratch holds, and refuses to reuse what it cannot
trust."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def fresh_contents(tmp_path, frame: pl.DataFrame, statistics: int = 1, tables: dict | None = None) -> dict:
    """What a first publish of ``frame`` (and of the other lake ``tables``, name -> frame) holds."""
    other = DataHome(tmp_path / "fresh")
    shutil.rmtree(other.root, ignore_errors=True)
    write_lake(other, frame, statistics)
    for name, table in (tables or {}).items():
        write_table(table, other.lake_path(name))
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


def options(ids: list[int], edited: set[int] = frozenset()) -> pl.DataFrame:
    """Three options per question, sorted by question as the lake writes them."""
    return pl.DataFrame({
        "question_id": [f"q{i:05d}" for i in ids for _ in range(3)],
        "position": [p for _ in ids for p in range(3)],
        "text": [f"o{i}.{p}{' edited' if i in edited and p == 1 else ''}" for i in ids for p in range(3)],
        "image_hash": [None] * (3 * len(ids)), "original_position": [2 - p for _ in ids for p in range(3)],
    }, schema_overrides={"image_hash": pl.String})


def test_options_of_changed_questions_are_updated_and_equal_a_fresh_publish(home, tmp_path):
    write_table(options(list(range(3000))), home.lake_path("choices"))
    publish_warehouse(home)
    changed = options([i for i in range(3004) if i not in (10, 11)], edited={5, 2999})
    write_table(changed, home.lake_path("choices"))
    result = publish_warehouse(home)
    assert "reuse_refused" not in result.figures
    # questions 5 and 2999 edited, 10 and 11 gone, 3000..3003 new: whole questions go out and come in
    assert result.figures["tables_updated"]["choices"] == "updated: 12 rows out, 18 in"
    assert contents(home) == fresh_contents(tmp_path, questions(3000), tables={"choices": changed})


def test_sorted_and_unsorted_rows_give_the_same_key_digests():
    rows = pl.concat([options(list(range(50)), edited={7}), options([50]).head(2)])
    sorted_digests, row_keys = warehouse_update._key_digests(rows, ["question_id"])
    assert row_keys is not None  # sorted by key: sums over runs
    assert sorted_digests["question_id"].to_list()[row_keys[150]] == "q00050"
    shuffled = rows.sample(fraction=1.0, shuffle=True, seed=3)
    grouped, none = warehouse_update._key_digests(shuffled, ["question_id"])
    assert none is None  # a key's rows apart: grouped
    assert sorted_digests.sort("question_id").equals(grouped.sort("question_id"))
    many = options(list(range(40000))).sample(fraction=1.0, shuffle=True, seed=4)
    assert warehouse_update.group_digests(many, ["question_id"]).equals(
        warehouse_update.group_digests(many, ["question_id"]))  # the same rows in the same order each time


def test_distinct_keys_in_any_order_are_summed_over_runs_like_grouping():
    def grouped(frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
        digests = warehouse_update.row_digests(frame, key, frame.columns)
        return digests.group_by(key, maintain_order=True).agg(pl.col("digest_a").sum(), pl.col("digest_b").sum())

    blocks = options(list(range(60)), edited={7})
    by_question = {q: blocks.filter(pl.col("question_id") == q) for q in blocks["question_id"].unique()}
    unsorted = pl.concat([by_question[f"q{i:05d}"] for i in [*range(30, 60), *reversed(range(30))]])
    unique_rows = options(list(range(500))).filter(pl.col("position") == 0).sample(fraction=1.0, shuffle=True, seed=5)
    for frame, key in ((unsorted, ["question_id"]), (unique_rows, ["question_id"]),
                       (unique_rows.with_columns(pl.col("text").alias("source")), ["source", "question_id"])):
        digests, row_keys = warehouse_update._key_digests(frame, key)
        assert row_keys is not None  # one run per key: no grouping
        assert digests.equals(grouped(frame, key))  # the same sums in the same order as grouping
        assert digests[key[-1]].gather(row_keys).equals(frame[key[-1]])
    twice = pl.concat([unsorted.head(3), unsorted.slice(3, 3), unsorted.head(3)])  # a key in two runs
    assert warehouse_update._key_digests(twice, ["question_id"])[1] is None


def test_keys_of_several_columns_with_nulls_are_digested_and_updated(tmp_path):
    def quarantine(reasons: dict) -> pl.DataFrame:
        keys = [("s", f"k{i}") for i in range(400)] + [("s", None), (None, "k1")]
        return pl.DataFrame({"source": [k[0] for k in keys], "source_key": [k[1] for k in keys],
                             "stage": ["filter"] * len(keys),
                             "reason": [reasons.get(k, "empty") for k in keys]})

    home = DataHome(tmp_path / "home")
    write_lake(home, questions(10))
    write_table(quarantine({}), home.lake_path("quarantine/filter"))
    publish_warehouse(home)
    changed = quarantine({("s", None): "too long", ("s", "k7"): "too long"})
    assert warehouse_update._key_digests(changed, ["source", "source_key"])[1] is None  # nulls: grouped
    write_table(changed, home.lake_path("quarantine/filter"))
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["quarantine"] == "updated: 2 rows out, 2 in"
    assert contents(home) == fresh_contents(tmp_path, questions(10), tables={"quarantine/filter": changed})


def test_quarantine_files_of_distinct_keys_out_of_order_are_updated_in_place(tmp_path):
    def quarantine(stage: str, ids: list[int], reasons: dict) -> pl.DataFrame:
        return pl.DataFrame({"source": ["s"] * len(ids), "source_key": [f"k{i}" for i in ids],
                             "stage": [stage] * len(ids), "reason": [reasons.get(i, "empty") for i in ids]})

    home = DataHome(tmp_path / "home")
    write_lake(home, questions(10))
    write_table(quarantine("filter", list(range(300, 0, -1)), {}), home.lake_path("quarantine/filter"))
    write_table(quarantine("latex", list(range(301, 400)), {}), home.lake_path("quarantine/latex"))
    publish_warehouse(home)
    edited = quarantine("filter", [*range(300, 10, -1), 999], {42: "too long"})  # k1..k10 gone, k999 new
    write_table(edited, home.lake_path("quarantine/filter"))
    result = publish_warehouse(home)
    assert result.figures["tables_updated"]["quarantine"] == "updated: 11 rows out, 2 in"
    assert contents(home) == fresh_contents(tmp_path, questions(10), tables={
        "quarantine/filter": edited, "quarantine/latex": quarantine("latex", list(range(301, 400)), {})})


def _publish_and_die_at(root: str, step: str) -> None:
    """Publish in a child process that is killed (no clean-up runs) at ``step``."""
    import os
    from pipelines.store import warehouse

    def die(*args, **kwargs):
        os._exit(9)

    if step == "rename":  # the new file complete, not yet renamed into place
        warehouse.replace_recording_checksum = die
    else:  # renamed into place, its state not yet saved
        warehouse.save_update_state = die
    publish_warehouse(DataHome(Path(root)))


@pytest.mark.parametrize("step", ["rename", "state"])
def test_a_publish_killed_midway_leaves_a_warehouse_readers_can_trust(home, tmp_path, step):
    import multiprocessing as mp

    from pipelines.store.checksums import recorded_checksum, sha256_file

    before = contents(home)
    changed = questions(3000, edited={5, 6}, gone={9})
    write_lake(home, changed)
    child = mp.get_context("spawn").Process(target=_publish_and_die_at, args=(str(home.root), step))
    child.start()
    child.join(120)
    assert child.exitcode == 9
    assert recorded_checksum(home.warehouse) == sha256_file(home.warehouse)  # the sidecar matches the file
    if step == "rename":
        assert contents(home) == before  # the previous warehouse, whole
    else:
        assert contents(home) == fresh_contents(tmp_path, changed)  # the new one, whole
    result = publish_warehouse(home)
    if step == "rename":
        assert "reuse_refused" not in result.figures  # the published file is still the one the state names
    else:
        assert result.figures["reuse_refused"] == "the published warehouse is not the one last published here"
    assert contents(home) == fresh_contents(tmp_path, changed)
    assert recorded_checksum(home.warehouse) == sha256_file(home.warehouse)
    assert not [p for p in home.root.iterdir() if p.name.endswith(".tmp")]
