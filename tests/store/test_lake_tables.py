"""Lake tables (pipelines/store/lake.py): raw questions come back in (source, source_key) order
whether or not the store was written sorted; state tables written without dictionary encoding
read back the same."""

from __future__ import annotations

import polars as pl
import pytest

from pipelines.store.home import DataHome
from pipelines.store.lake import read_raw_questions, write_table


def raw(keys: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame({
        "source": [s for s, _ in keys], "source_key": [k for _, k in keys], "subject": "math", "grade": None,
        "skill": "s", "problem": [f"p{i}" for i in range(len(keys))], "problem_image": None, "choices": None,
        "choice_images": None, "answer_idx": 0, "source_split": None, "extra": "{}",
    }, schema_overrides={"grade": pl.String, "problem_image": pl.String, "choices": pl.List(pl.String),
                         "choice_images": pl.List(pl.String), "source_split": pl.String})


@pytest.mark.parametrize("files", [
    [[("a", "1"), ("a", "2"), ("b", "0")]],  # sorted: read as it is
    [[("b", "0"), ("a", "2"), ("a", "1")]],  # not sorted
    [[("a", "10"), ("a", "9"), ("ab", "0"), ("b", "")]],  # byte order of strings
    [[("b", "1"), ("b", "2")], [("a", "1")]],  # two files, each sorted, not together
    [[("a", "1")], [("b", "1"), ("b", "2")]],  # two files, sorted together
])
def test_raw_questions_come_back_in_source_order(tmp_path, files):
    home = DataHome(tmp_path / "home")
    (home.lake / "raw_questions").mkdir(parents=True)
    for i, keys in enumerate(files):
        write_table(raw(keys), home.lake / "raw_questions" / f"s{i}.parquet")
    got = read_raw_questions(home)
    keys = got.select("source", "source_key").rows()
    assert keys == sorted(keys)
    assert got.height == sum(len(k) for k in files)


def test_a_key_twice_is_still_sorted(tmp_path):
    home = DataHome(tmp_path / "home")
    (home.lake / "raw_questions").mkdir(parents=True)
    write_table(raw([("a", "1"), ("a", "1"), ("a", "0")]), home.lake / "raw_questions" / "s.parquet")
    assert read_raw_questions(home)["source_key"].to_list() == ["0", "1", "1"]


def test_a_table_written_without_dictionary_reads_back_the_same(tmp_path):
    frame = pl.DataFrame({"question_id": [f"q{i}" for i in range(1000)],
                          "digest_a": pl.Series(range(1000), dtype=pl.UInt64)})
    write_table(frame, tmp_path / "a.parquet", dictionary=False)
    write_table(frame, tmp_path / "b.parquet", dictionary=False)
    assert pl.read_parquet(tmp_path / "a.parquet").equals(frame)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
