"""The warehouse: atomic publish, read-only queries, concurrent readers see one version."""

import multiprocessing as mp
import time

import polars as pl
import pytest

from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.warehouse import WarehouseError, connect_readonly, publish_warehouse, run_query


def write_version(home: DataHome, version: int, n: int = 2000) -> None:
    qids = [f"{i:016x}" for i in range(n)]
    questions = pl.DataFrame(
        {
            "question_id": qids, "source": ["s"] * n, "source_key": [f"k{i}" for i in range(n)],
            "subject": ["math"] * n, "grade": ["grade-1"] * n, "skill": ["x"] * n, "problem": [f"v{version}"] * n,
            "pic_prob": [True] * n, "pic_choice": [False] * n, "num_choices": [2] * n, "answer_idx": [0] * n,
            "split": ["train"] * n, "duplicate_group": qids, "version": [version] * n,
        }
    )
    choices = pl.DataFrame(
        {"question_id": qids, "position": [0] * n, "text": ["a"] * n, "image_hash": [None] * n,
         "original_position": [0] * n, "version": [version] * n},
        schema_overrides={"image_hash": pl.String},
    )
    write_table(questions, home.lake_path("questions"))
    write_table(choices, home.lake_path("choices"))


def test_publish_creates_every_documented_table(tmp_path):
    home = DataHome(tmp_path)
    write_version(home, 1)
    result = publish_warehouse(home)
    assert result.tables["questions"] == 2000 and result.tables["predictions"] == 0
    for table in ("raw_questions", "questions", "choices", "images", "duplicates", "quarantine", "predictions", "metrics", "profiles"):
        run_query(home, f"SELECT * FROM {table} LIMIT 1")
    again = publish_warehouse(home)
    assert again.skipped


def test_queries_are_read_only_and_cannot_touch_files(tmp_path):
    home = DataHome(tmp_path)
    write_version(home, 1)
    publish_warehouse(home)
    with pytest.raises(WarehouseError, match="query failed"):
        run_query(home, "DROP TABLE questions")
    with pytest.raises(WarehouseError):
        run_query(home, f"COPY questions TO '{tmp_path / 'leak.csv'}'")
    with pytest.raises(WarehouseError):
        run_query(home, "SELECT * FROM read_csv('/etc/passwd')")
    with pytest.raises(WarehouseError):
        run_query(home, "SET enable_external_access = true")
    assert not (tmp_path / "leak.csv").exists()
    assert run_query(home, "SELECT count(*) FROM questions WHERE subject = ?", ["math"]).rows == [(2000,)]


def test_missing_warehouse_is_a_one_line_error(tmp_path):
    with pytest.raises(WarehouseError, match="run `stemforge build` first"):
        connect_readonly(DataHome(tmp_path))


def _reader(root: str, stop_at: float, out) -> None:
    home = DataHome(__import__("pathlib").Path(root))
    seen, mixed, errors = set(), 0, 0
    while time.time() < stop_at:
        try:
            rows = run_query(
                home,
                "SELECT (SELECT min(version) FROM questions), (SELECT max(version) FROM questions), "
                "(SELECT min(version) FROM choices), (SELECT max(version) FROM choices)",
            ).rows[0]
        except WarehouseError:
            errors += 1
            continue
        if len(set(rows)) != 1:
            mixed += 1
        seen.add(rows[0])
    out.put((sorted(seen), mixed, errors))


def test_concurrent_reader_sees_previous_or_new_version_never_a_mix(tmp_path):
    home = DataHome(tmp_path)
    write_version(home, 0)
    publish_warehouse(home)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(tmp_path), time.time() + 6, out))
    reader.start()
    time.sleep(1.0)
    for version in range(1, 8):
        write_version(home, version)
        publish_warehouse(home)
    reader.join(30)
    seen, mixed, errors = out.get(timeout=5)
    assert mixed == 0
    assert errors == 0
    assert len(seen) >= 2  # the reader really ran across publishes


def test_failed_publish_keeps_the_previous_warehouse(tmp_path):
    home = DataHome(tmp_path)
    write_version(home, 1)
    publish_warehouse(home)
    # a lake table that lacks required columns makes the publish fail as a whole
    write_table(pl.DataFrame({"nonsense": [1]}), home.lake_path("questions"))
    with pytest.raises(WarehouseError, match="lacks required columns"):
        publish_warehouse(home)
    assert run_query(home, "SELECT count(*) FROM questions").rows == [(2000,)]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
