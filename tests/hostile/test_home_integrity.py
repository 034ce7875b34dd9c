"""Nothing a user does breaks a data home, part 2 (issue 12): bit rot in the lake, the warehouse,
the export and the images is named by ``stemforge verify`` and repaired by the next build.

The homes and helpers of ``test_home_safety.py`` (a module of its own so that the two halves
run side by side under ``pytest -n``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from test_home_safety import base, build, cli, home, published  # noqa: F401  (base and home: fixtures)


# ---- 5. integrity ------------------------------------------------------------------------

def flip_keeping_mtime(path: Path, offset: int, mask: int = 0xFF) -> None:
    """Bit rot: bytes change in place, the file's size and mtime do not."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def verify(home_: DataHome, *extra: str) -> subprocess.CompletedProcess:
    return cli(home_, "verify", *extra)


def warehouse_questions(home_: DataHome) -> list:
    return run_query(home_, "SELECT question_id, source_key, problem, answer_idx FROM questions ORDER BY 1").rows


def test_a_byte_flip_in_the_lake_is_named_and_rebuilt(home):
    home_, source = home
    lake_file = home_.lake_path("questions")
    clean, before = lake_file.read_bytes(), published(home_)
    flip_keeping_mtime(lake_file, len(clean) // 2)
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    named = [line for line in result.stderr.splitlines() if "lake/questions.parquet" in line]
    assert named == ["warning: damaged: lake/questions.parquet (its bytes do not match the checksum recorded when it "
                     "was written); removed; the build rebuilds it from its inputs (stage split)"]
    assert lake_file.read_bytes() == clean and published(home_) == before


def decoding_bit_flip(path: Path, column: str) -> int:
    """An offset in ``column``'s pages where flipping one bit still decodes, to other values."""
    data = path.read_bytes()
    clean = pq.read_table(pa.BufferReader(data))
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(clean.column_names.index(column))
    for offset in range(chunk.data_page_offset, chunk.data_page_offset + chunk.total_compressed_size):
        flipped = bytearray(data)
        flipped[offset] ^= 0x01
        try:
            table = pq.read_table(pa.BufferReader(bytes(flipped)))
        except Exception:  # most flips break the page: that is the easy case
            continue
        if table.schema == clean.schema and not table.column(column).equals(clean.column(column)):
            return offset
    raise AssertionError(f"no decoding bit flip in {column}")


def test_a_bit_flip_that_still_decodes_never_reaches_the_warehouse(home):
    home_, source = home
    lake_file = home_.lake_path("questions")
    clean, rows = lake_file.read_bytes(), warehouse_questions(home_)
    flip_keeping_mtime(lake_file, decoding_bit_flip(lake_file, "source_key"), 0x01)
    assert pl.read_parquet(lake_file)["source_key"].to_list() != [r[1] for r in sorted(rows, key=lambda r: r[0])]
    (home_.lake / "state" / "fingerprints" / "warehouse.json").unlink()  # this build republishes the warehouse
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "damaged: lake/questions.parquet" in result.stderr
    assert lake_file.read_bytes() == clean and warehouse_questions(home_) == rows


def test_a_corrupt_warehouse_is_republished(home):
    home_, source = home
    rows = warehouse_questions(home_)
    size = home_.warehouse.stat().st_size
    for offset in range(size // 4, size - 4096, 4096):  # every block after the header
        flip_keeping_mtime(home_.warehouse, offset)
    with pytest.raises(Exception, match="checksum"):
        warehouse_questions(home_)
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "warning: damaged: warehouse.duckdb" in result.stderr
    assert warehouse_questions(home_) == rows


def test_verify_names_damaged_export_shards_and_images_and_repair_lets_the_build_rebuild_them(home):
    home_, source = home
    shard = sorted(home_.export.glob("train-*.parquet"))[0]
    image = sorted(home_.images.rglob("*.png"))[3]
    clean = {shard: shard.read_bytes(), image: image.read_bytes()}
    flip_keeping_mtime(shard, shard.stat().st_size // 2)
    flip_keeping_mtime(image, image.stat().st_size // 2)
    found = verify(home_)
    assert found.returncode == 1
    lines = found.stdout.splitlines()
    assert lines[:2] == [
        f"damaged: {shard.relative_to(home_.root)} (its bytes do not match the checksum recorded when it was written)",
        f"damaged: {image.relative_to(home_.root)} (its bytes do not match the hash it is named by)",
    ]
    assert "damage found (2 damaged, 0 missing, 0 no checksum recorded)" in lines[2]
    repaired = verify(home_, "--repair")
    assert repaired.returncode == 1 and "removed; the build rebuilds it" in repaired.stdout
    assert (home_.root / "damaged" / image.relative_to(home_.root)).exists()
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert {p: p.read_bytes() for p in clean} == clean
    assert verify(home_).returncode == 0


def test_verify_a_clean_home_and_one_from_before_checksums(home):
    home_, source = home
    clean = verify(home_)
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout.splitlines()[-1].endswith(": clean (0 damaged, 0 missing, 0 no checksum recorded)")
    for record in [*home_.root.rglob("*.sha256")]:
        record.unlink()
    old = verify(home_)
    assert old.returncode == 0
    assert "no checksum recorded: lake/questions.parquet" in old.stdout.splitlines()
    assert "no checksum recorded: export/stem/index.parquet" in old.stdout.splitlines()
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "recorded the checksums of" in result.stderr
    assert verify(home_).stdout.splitlines()[-1].endswith(": clean (0 damaged, 0 missing, 0 no checksum recorded)")


def test_a_damaged_checksum_record_is_treated_as_unknown_and_rebuilt(home):
    home_, source = home
    (home_.lake / "questions.parquet.sha256").write_bytes(b"\x00garbage")
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "damaged: lake/questions.parquet (its checksum record is unreadable)" in result.stderr
    assert verify(home_).returncode == 0


def test_a_damaged_export_checksum_list_is_named_and_rebuilt(home):
    """``export/stem/checksums.sha256`` is the export's own list: bit rot in it (here a listed
    name garbled) is damage that ``verify`` names; ``verify --repair`` removes the list and the
    next build writes the export anew, after which ``verify`` is clean (it kept exiting 1)."""
    home_, source = home
    listing = home_.root / "export" / "stem" / "checksums.sha256"
    clean = listing.read_bytes()
    flip_keeping_mtime(listing, clean.index(b".parquet") + 5, mask=0x01)
    found = verify(home_)
    assert found.returncode == 1 and "listed in checksums.sha256" in found.stdout, found.stdout + found.stderr
    repaired = verify(home_, "--repair")
    assert "export/stem/checksums.sha256" in repaired.stdout + repaired.stderr, repaired.stdout + repaired.stderr
    result = build(home_, source)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    after = verify(home_)
    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    assert listing.read_bytes() == clean
