"""The export's shard files: every picture embedded byte for byte (read once per shard, also
when several rows or options share it), picture columns stored without compression (PNG and
JPEG are compressed already) and the rest with zstd, a manifest that is the sha256 of the
files on disk, and shards that ``datasets`` reads."""

from __future__ import annotations

import hashlib
import json
import io
import subprocess

import datasets
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from pipelines.dataset import export
from pipelines.dataset.export import (
    EXPORT_MANIFEST,
    PICTURE_COLUMNS,
    SHARD_COMPRESSION,
    STEM_SCHEMA,
    answer_key_text,
    export_order,
    png_bytes,
    shard_bounds,
    write_stem_export,
)
from pipelines.store.checksums import read_checksums
from pipelines.store.images import ImageStore

ROWS_PER_SHARD = 7


def _picture(rng, fmt: str) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (10, 14, 3), dtype=np.uint8)).save(out, format=fmt)
    return out.getvalue()


def _questions(store: ImageStore, n: int) -> pl.DataFrame:
    """Questions with problem pictures, picture options, both or neither; a few pictures are
    shared by several rows and options, and some are JPEG (exported converted to PNG)."""
    rng = np.random.default_rng(3)
    pool = [store.put(_picture(rng, "JPEG" if k % 4 == 0 else "PNG")).image_hash for k in range(9)]
    rows = []
    for i in range(n):
        picture_options = i % 3 == 1
        k = 2 + i % 4
        rows.append({
            "question_id": hashlib.sha256(f"q{i}".encode()).hexdigest()[:16],
            "source": "demo",
            "subject": ("math", "physics", "chemistry", "biology")[i % 4],
            "grade": None if i % 5 == 0 else f"grade-{1 + i % 6}",
            "skill": f"skill-{i % 3}",
            "problem": f"Question {i}: which picture?",
            "problem_image": None if i % 3 == 2 else pool[(i * 5) % len(pool)],
            "choices": [f"option {j}" for j in range(k)],
            "choice_images": [pool[(i + j) % len(pool)] for j in range(k)] if picture_options else None,
            "answer_idx": i % k,
            "split": ("train", "train", "valid", "test")[i % 4],
        })
    return pl.DataFrame(rows, schema_overrides={"choice_images": pl.List(pl.String), "grade": pl.String})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    store = ImageStore(root / "images")
    frame = _questions(store, 60)
    write_stem_export(frame, store, root / "export" / "stem", rows_per_shard=ROWS_PER_SHARD)
    return frame, store, root / "export" / "stem"


def _expected_rows(frame: pl.DataFrame, store: ImageStore, split: str) -> list[dict]:
    rows = []
    for r in export_order(frame).filter(pl.col("split") == split).iter_rows(named=True):
        pictures = r["choice_images"]
        rows.append({
            "problem_pic": png_bytes(store, r["problem_image"]) if r["problem_image"] else None,
            "choices_pic": [png_bytes(store, h) for h in pictures] if pictures is not None else None,
            "choices": None if pictures is not None else r["choices"],
        })
    return rows


def test_every_picture_is_embedded_byte_for_byte(exported):
    frame, store, root = exported
    for split in ("train", "valid", "test"):
        shards = sorted((root / "data").glob(f"{split}-*.parquet"))
        table = pa.concat_tables(pq.read_table(p) for p in shards)
        assert table.schema == STEM_SCHEMA
        got = table.select(["problem_pic", "choices_pic", "choices"]).to_pylist()
        assert got == _expected_rows(frame, store, split)
    pictures = [p for p in got if p["problem_pic"] is not None]
    assert pictures and all(p["problem_pic"].startswith(b"\x89PNG") for p in pictures)


def test_a_shard_sliced_from_the_middle_of_its_split_matches_one_built_alone(exported):
    """Slices start at non-zero offsets (a worker's shard); the list columns must not shift."""
    frame, store, _ = exported
    rows = export_order(frame).filter(pl.col("split") == "train").select(export.SHARD_INPUT_COLUMNS).to_arrow()
    middle = export._split_table(rows.slice(5, 9), store, False)
    alone = export._split_table(pa.Table.from_pylist(rows.slice(5, 9).to_pylist(), schema=rows.schema), store, False)
    assert middle.equals(alone) and middle.num_rows == 9
    assert middle.column("choices_pic").null_count < 9  # picture options are in the slice


def test_picture_columns_are_stored_uncompressed_and_the_rest_with_zstd(exported):
    _, _, root = exported
    assert set(PICTURE_COLUMNS) == {"problem_pic", "choices_pic.list.element"}
    for path in sorted((root / "data").glob("*.parquet")):
        metadata = pq.read_metadata(path)
        assert metadata.num_row_groups >= 1
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            codecs = {group.column(c).path_in_schema: group.column(c).compression for c in range(group.num_columns)}
            assert codecs == {name: "UNCOMPRESSED" if name in PICTURE_COLUMNS else "ZSTD" for name in codecs}
            assert set(codecs) == set(SHARD_COMPRESSION)


def test_the_manifest_is_the_sha256_of_the_files_on_disk(exported):
    _, _, root = exported
    recorded = read_checksums(root / EXPORT_MANIFEST)
    on_disk = {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in root.rglob("*") if p.is_file() and p.name != EXPORT_MANIFEST}
    assert recorded == on_disk and any(name.startswith("data/") for name in recorded)
    check = subprocess.run(["sha256sum", "-c", "--quiet", EXPORT_MANIFEST], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_datasets_reads_the_pictures_of_a_shard(exported, tmp_path):
    frame, store, root = exported
    shard = sorted((root / "data").glob("train-*.parquet"))[0]
    loaded = datasets.load_dataset("parquet", data_files={"train": str(shard)}, cache_dir=str(tmp_path))["train"]
    expected = _expected_rows(frame, store, "train")[: loaded.num_rows]
    train_ids = frame.filter(pl.col("split") == "train").sort("question_id")["question_id"]
    assert loaded.num_rows == shard_bounds(train_ids, ROWS_PER_SHARD)[0][1] > 1
    assert [{k: r[k] for k in ("problem_pic", "choices_pic", "choices")} for r in loaded] == expected
    assert any(r["choices_pic"] for r in expected) and any(r["problem_pic"] for r in expected)


def test_a_second_export_writes_the_same_bytes(exported, tmp_path):
    frame, store, root = exported
    again = tmp_path / "again" / "stem"
    write_stem_export(frame, store, again, rows_per_shard=ROWS_PER_SHARD, workers=2)
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((root / f).read_bytes() == (again / f).read_bytes() for f in files)


@pytest.mark.parametrize("ids", [
    ["0a1b2c3d4e5f6789", "id with spaces", "x-y_z:1/2~#[]"],
    ['quote"inside', "back\\slash", "tab\there", "caf\u00e9", "\u4e2d\u6587", "del\x7f", ""],
])
def test_the_answer_key_lines_are_json_dumps_of_each_test_row(ids):
    test = pl.DataFrame({"export_position": list(range(len(ids))), "question_id": ids,
                         "answer_idx": [i % 3 for i in range(len(ids))]})
    expected = "".join(json.dumps({"index": i, "question_id": q, "answer_idx": a}) + "\n" for i, q, a in test.rows())
    assert answer_key_text(test) == expected
    with_null = test.with_columns(pl.when(pl.col("export_position") == 1).then(None).otherwise(pl.col("answer_idx"))
                                  .alias("answer_idx"))
    assert answer_key_text(with_null) == "".join(
        json.dumps({"index": i, "question_id": q, "answer_idx": a}) + "\n" for i, q, a in with_null.rows())
    assert answer_key_text(test.clear()) == ""


@pytest.mark.parametrize("values", [
    [b"\x89PNG a", None, b"", b"xyz" * 1000, None],
    [None, None],
    [],
    [b"only"],
])
def test_binary_array_is_arrows_own(values):
    from pipelines.dataset.export import binary_array

    built = binary_array(values)
    assert built.equals(pa.array(values, type=pa.binary()))
    assert built.to_pylist() == values
    assert built.null_count == sum(v is None for v in values)


def test_binary_array_past_32_bit_offsets_is_left_to_arrow(monkeypatch):
    from pipelines.dataset import export as module

    monkeypatch.setattr(module, "_BINARY_LIMIT", 4)  # as if the values held more than 2 GiB
    built = module.binary_array([b"abc", None, b"de"])
    assert built.to_pylist() == [b"abc", None, b"de"]
