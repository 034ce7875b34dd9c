"""A STEM-release import keeps the release's train/valid/test, test answers included when the
release folder has its key (issue 28, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.dataset.checks import no_split_leakage, split_proportions
from pipelines.dataset.split import assign_splits
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome


def release_questions() -> pl.DataFrame:
    """Six families of two: the build joins a train (or valid) question with a test one."""
    rows = []
    for i in range(6):
        other = "train" if i % 2 else "valid"
        for k, split in enumerate((other, "test")):
            rows.append({"question_id": f"q{i}{k}", "duplicate_group": f"g{i}", "subject": "math", "skill": "s",
                         "source_split": split})
    return pl.DataFrame(rows)


def test_each_release_question_keeps_its_own_split():
    questions = release_questions()
    out, ledger = assign_splits(questions, None)
    assert out["split"].to_list() == questions["source_split"].to_list()  # was: the family's smallest, test
    assert dict(zip(ledger["question_id"], ledger["split"])) == dict(zip(questions["question_id"], questions["source_split"]))


def test_dealt_questions_still_go_by_family():
    questions = release_questions().with_columns(pl.lit(None, dtype=pl.String).alias("source_split"))
    out, _ = assign_splits(questions, None)
    assert out.group_by("duplicate_group").agg(pl.col("split").n_unique())["split"].max() == 1


def test_the_checks_leave_a_release_s_own_splits_to_it(tmp_path):
    home = DataHome(tmp_path / "home")
    home.lake.mkdir(parents=True)
    out, _ = assign_splits(release_questions(), None)
    out.write_parquet(home.lake_path("questions"))
    settings = BuildSettings(home=str(home.root))
    leak = no_split_leakage(home, settings)
    assert leak.passed, leak.description
    assert "6 more that their source's own splits put in two splits" in leak.description
    proportions = split_proportions(home, settings)
    assert proportions.passed and "12 questions keep their source's split" in proportions.description


def test_a_release_s_test_answer_key_is_read(tmp_path):
    from pipelines.ingest.importers.stem_parquet import iter_stem_parquet_records
    from pipelines.ingest.spec import parse_source_spec
    from pipelines.store.images import ImageStore

    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    columns = {"subject": "math", "grade": "grade 1", "skill": "adding", "pic_choice": False, "pic_prob": False,
               "problem_pic": None, "choices_pic": None}

    def shard(name: str, answers: list[int]) -> None:
        rows = [{**columns, "problem": f"{name} {i}: what is {i} + 1?", "choices": [str(i + 1), str(i + 2), str(i)],
                 "answer_idx": a} for i, a in enumerate(answers)]
        pq.write_table(pa.Table.from_pylist(rows), release / "data" / name)

    shard("train-00000-of-00001.parquet", [0, 1])
    shard("test-00000-of-00002.parquet", [-1, -1])
    shard("test-00001-of-00002.parquet", [-1])
    (release / "test_answer_key.jsonl").write_text(
        "".join(json.dumps({"index": i, "question_id": f"x{i}", "answer_idx": a}) + "\n" for i, a in enumerate([2, 0, 1])))
    spec = parse_source_spec(f"stem-parquet:{release}")
    records = list(iter_stem_parquet_records(spec, ImageStore(tmp_path / "images")))
    got = {r.source_key: (r.source_split, r.answer_idx) for r in records}
    assert got == {
        "train-00000-of-00001.parquet#0": ("train", 0), "train-00000-of-00001.parquet#1": ("train", 1),
        "test-00000-of-00002.parquet#0": ("test", 2), "test-00000-of-00002.parquet#1": ("test", 0),
        "test-00001-of-00002.parquet#0": ("test", 1),
    }
    (release / "test_answer_key.jsonl").unlink()  # an upload copy: the answers stay hidden
    records = list(iter_stem_parquet_records(spec, ImageStore(tmp_path / "images")))
    assert [r.answer_idx for r in records if r.source_split == "test"] == [-1, -1, -1]
