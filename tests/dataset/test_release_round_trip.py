"""A STEM release built here, re-imported with ``stem-parquet:``, keeps its train/valid/test,
its option order, its test answers and every row, even rows our dedup would call duplicates (a
release is deduplicated by its maker); the release's own preds.txt (one line per test row)
imports every line (issue 28, item 5)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from pipelines.evaluation.stage import import_predictions_file, scored_frame
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.builds import home_instance


def _reencoded(png: bytes) -> bytes:
    """The same pixels in other PNG bytes: a near duplicate (re-encoded) for dedup."""
    out = io.BytesIO()
    Image.open(io.BytesIO(png)).save(out, format="PNG", compress_level=1)
    assert out.getvalue() != png
    return out.getvalue()


def plant_duplicates(release: Path, copy: Path) -> dict[str, int]:
    """``release`` copied to ``copy`` with two of each split's picture rows repeated at the end of
    its last shard: one as is (an exact duplicate), one with its picture re-encoded (a near one);
    the test answer key extended to match. Returns the rows per split."""
    shutil.copytree(release, copy)
    rows = {}
    key_path = copy / "test_answer_key.jsonl"
    key = [json.loads(line) for line in key_path.read_text().splitlines()]
    for split in ("train", "valid", "test"):
        shard = sorted((copy / "data").glob(f"{split}-*.parquet"))[-1]
        table = pq.read_table(shard)
        pictured = [i for i, p in enumerate(table["pic_prob"].to_pylist()) if p][:2]
        exact, near = table.take([pictured[0]]), table.take([pictured[1]]).to_pylist()
        near[0]["problem_pic"] = _reencoded(near[0]["problem_pic"])
        table = pa.concat_tables([table, exact, pa.Table.from_pylist(near, schema=table.schema)])
        pq.write_table(table, shard)
        rows[split] = sum(pq.ParquetFile(p).metadata.num_rows for p in (copy / "data").glob(f"{split}-*.parquet"))
        if split == "test":
            answers = {r["index"]: r["answer_idx"] for r in key}
            for planted in (pictured[0], pictured[1]):  # single test shard: its row index is the key's index
                key.append({"index": len(key), "question_id": f"planted-{planted}", "answer_idx": answers[planted]})
    key_path.write_text("".join(json.dumps(r) + "\n" for r in key))
    (copy / "checksums.sha256").unlink(missing_ok=True)
    return rows


@pytest.mark.slow
def test_a_release_round_trip(tmp_path):
    first = DataHome(tmp_path / "release-home")
    with home_instance(first):
        built = run_build(BuildSettings(home=str(first.root), demo_questions=120, models=("random",)), progress=False)
    assert built.success, built.summary
    splits = dict(run_query(first, "SELECT split, count(*) FROM questions GROUP BY 1").rows)
    assert len(list(first.export.glob("test-*.parquet"))) == 1
    release = tmp_path / "a-release"  # sorts before the other source: its rows rank first
    rows = plant_duplicates(first.export.parent, release)
    assert rows == {s: n + 2 for s, n in splits.items()}
    # another source holding a copy of one release row: that copy is merged into the release's row
    other = tmp_path / "b-other"
    other.mkdir()
    pq.write_table(pq.read_table(release / "data" / "train-00000-of-00001.parquet").slice(splits["train"] - 1, 1),
                   other / "train-00000-of-00001.parquet")

    second = DataHome(tmp_path / "reimport")
    with home_instance(second):
        again = run_build(BuildSettings(home=str(second.root), sources=(f"stem-parquet:{release}", f"stem-parquet:{other}"),
                                        models=("random",)), progress=False)
        assert again.success, again.summary
        assert "failed" not in again.summary
        moved = run_query(second, "SELECT count(*) FROM questions WHERE split <> source_split").rows[0][0]
        assert moved == 0  # every question keeps the release's split
        reshuffled = run_query(second, "SELECT count(*) FROM questions WHERE shuffle <> 'kept-order:release'").rows[0][0]
        assert reshuffled == 0
        got = dict(run_query(second, f"SELECT split, count(*) FROM questions WHERE source = 'stem-parquet:{release}' "
                                     "GROUP BY 1").rows)
        assert got == rows  # every row of the release kept, planted duplicates included
        merged = run_query(second, "SELECT d.source, q.source FROM duplicates d JOIN questions q "
                                   "ON d.kept_question_id = q.question_id").rows
        assert merged == [(f"stem-parquet:{other}", f"stem-parquet:{release}")]
        assert run_query(second, "SELECT count(*) FROM quarantine WHERE stage = 'dedup'").rows[0][0] == 0
        unkeyed = run_query(second, "SELECT count(*) FROM questions WHERE answer_idx < 0").rows[0][0]
        assert unkeyed == 0  # the test answers come from the release's test_answer_key.jsonl

        key = [json.loads(line) for line in (release / "test_answer_key.jsonl").read_text().splitlines()]
        assert len(key) == rows["test"]
        preds = tmp_path / "preds.txt"
        preds.write_text("".join(f"{r['answer_idx']}\n" for r in key))  # the release's answers, as a model
        figures = import_predictions_file(second, preds, "oracle")
        assert figures["rows"] == got["test"] == len(key)  # every line of a full-length preds.txt
        scored = scored_frame(second).filter((scored_frame(second)["model"] == "oracle"))
        assert scored.height == got["test"] and bool(scored["correct"].all())
