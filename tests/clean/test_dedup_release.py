"""A released benchmark is deduplicated by its maker (issue 28, item 5): dedup never merges two
rows of one such source (``distinct_sources``), nor quarantines them as each other's conflicting
duplicates, and still merges a release row with a copy from another source."""

from __future__ import annotations

import polars as pl

from pipelines.clean.dedup import deduplicate
from pipelines.ingest.sources import deduplicated_sources
from pipelines.store.records import RAW_QUESTION_SCHEMA

from test_dedup import H, _by_key, _flip, _q

RELEASE = "stem-parquet:/releases/stem"
IMAGES = {**H, "star_png": _flip(H["star"], 5), "star_gif": _flip(H["star"], 9, 41)}


def _frame(rows):
    return pl.DataFrame(rows, schema=pl.Schema(RAW_QUESTION_SCHEMA))


def _release_rows():
    return [
        _q("r#0", "How many stars are there?", "star", ["3", "4", "5"], answer=1, source=RELEASE),
        _q("r#1", "How many  STARS are there?", "star", ["5", "3", "4"], answer=2, source=RELEASE),  # same identity
        _q("r#2", "How many stars are there?", "star_jpeg", ["3", "4", "5"], answer=1, source=RELEASE),  # near
        _q("r#3", "How many stars are there?", "star", ["3", "4", "5"], answer=0, source=RELEASE),  # other answer
        _q("r#4", "How many stars are there?", "star_png", ["3", "4", "5"], answer=2, source=RELEASE),  # near, other
        _q("r#5", "Which shows a magnet?", None, None, ["b1", "b2"], answer=0, source=RELEASE),
        _q("r#6", "Which shows a magnet?", None, None, ["b2_jpeg", "b1_jpeg"], answer=1, source=RELEASE),
    ]


def test_without_the_flag_a_release_s_rows_are_merged_and_quarantined():
    kept, dups, quarantine = _by_key(deduplicate(_frame(_release_rows()), IMAGES))
    assert len(kept) < 7 and (dups or quarantine)


def test_every_row_of_a_deduplicated_source_is_kept():
    rows = _release_rows()
    result = deduplicate(_frame(rows), IMAGES, distinct_sources=[RELEASE])
    kept, dups, quarantine = _by_key(result)
    assert set(kept) == {r["source_key"] for r in rows} and not dups and not quarantine
    assert result.kept["question_id"].n_unique() == len(rows)  # same identity, ids of their own
    again = deduplicate(_frame(rows[::-1]), IMAGES, distinct_sources=[RELEASE])
    assert sorted(again.kept["question_id"].to_list()) == sorted(result.kept["question_id"].to_list())


def test_a_release_row_still_merges_with_a_copy_from_another_source():
    rows = _release_rows() + [
        _q("z#0", "How many stars are there?", "star_gif", ["3", "4", "5"], answer=1, source="zz-site"),  # near r#0
        _q("z#1", "Which shows a magnet?", None, None, ["b1", "b2"], answer=0, source="zz-site"),  # exact r#5
        _q("a#0", "How many stars are there?", "star", ["3", "4", "5"], answer=1, source="a-site"),  # exact r#0
    ]
    result = deduplicate(_frame(rows), IMAGES, distinct_sources=[RELEASE])
    kept, dups, quarantine = _by_key(result)
    assert not quarantine
    assert dups["z#1"]["kind"] == "exact" and dups["z#1"]["kept_question_id"] == kept["r#5"]["question_id"]
    # a-site ranks first: it keeps the release's row r#0 as its exact duplicate, and so its group
    # (which holds a release row) takes no other release row; z#0 joins one group, never two
    assert "a#0" in kept and dups["r#0"]["kept_question_id"] == kept["a#0"]["question_id"]
    assert set(kept) == {"a#0", "r#1", "r#2", "r#3", "r#4", "r#5", "r#6"}
    assert dups["z#0"]["kind"] == "near"
    # no group holds two rows of the release
    group = {**{k: r["question_id"] for k, r in kept.items()}, **{k: r["kept_question_id"] for k, r in dups.items()}}
    release_groups = [group[k] for k in group if k.startswith("r#")]
    assert len(release_groups) == len(set(release_groups)) == 7


def test_a_group_led_by_another_source_takes_one_row_of_a_release():
    rows = [
        _q("a#0", "How many stars are there?", "star", ["3", "4", "5"], answer=1, source="a-site"),
        _q("r#0", "How many stars are there?", "star_jpeg", ["3", "4", "5"], answer=1, source=RELEASE),
        _q("r#1", "How many stars are there?", "star_png", ["3", "4", "5"], answer=1, source=RELEASE),
    ]
    kept, dups, quarantine = _by_key(deduplicate(_frame(rows), IMAGES, distinct_sources=[RELEASE]))
    assert set(kept) == {"a#0", "r#1"} and set(dups) == {"r#0"} and not quarantine


def test_the_release_importer_declares_its_sources_deduplicated():
    specs = ["stem-parquet:/data/stem", "jsonl:/data/q.jsonl", "demo", "http://127.0.0.1:8000/", "scienceqa:/x"]
    assert deduplicated_sources(specs) == ["stem-parquet:/data/stem"]
