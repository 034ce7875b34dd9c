"""Issue 30, point 18 (second half): a damaged checksum sidecar moved an intact imported model to
``damaged/``. The file is checked against its content first: a record one or two hex digits off
the file's sha256, or an unreadable record beside a Parquet file that decodes whole, is the
record's damage, and the file stays (its checksum recorded again). A damaged file still goes."""

from __future__ import annotations

import polars as pl

from pipelines.evaluation.stage import import_path
from pipelines.store.atomic import atomic_path
from pipelines.store.checksums import checksum_path, sha256_file
from pipelines.store.home import DataHome
from pipelines.store.integrity import check_before_build, repair, verify_home


def _imported(home: DataHome):
    path = import_path(home, "my-model")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pl.DataFrame({"question_id": [f"q{i}" for i in range(200)], "prediction": [i % 4 for i in range(200)]}).write_parquet(tmp)
    return path


def _flip_hex(sidecar):
    text = sidecar.read_text()
    sidecar.write_text(("0" if text[5] != "0" else "1").join([text[:5], text[6:]]))


def test_a_flipped_digit_in_the_record_keeps_the_file(tmp_path):
    home = DataHome(tmp_path / "home")
    path = _imported(home)
    digest = sha256_file(path)
    _flip_hex(checksum_path(path))
    lines = []
    check_before_build(home, lines.append)
    assert path.exists() and sha256_file(path) == digest
    assert "kept" in " ".join(lines)
    assert not [f for f in verify_home(home).findings if f.path == path]


def test_an_unreadable_record_beside_a_whole_parquet_file_keeps_it(tmp_path):
    home = DataHome(tmp_path / "home")
    path = _imported(home)
    checksum_path(path).write_bytes(b"\x00garbage\xff")
    report = verify_home(home)
    repair(home, report.findings, lambda line: None)
    assert path.exists()
    assert not [f for f in verify_home(home).findings if f.path == path]


def test_a_damaged_file_is_still_moved_aside(tmp_path):
    home = DataHome(tmp_path / "home")
    path = _imported(home)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    check_before_build(home, lambda line: None)
    assert not path.exists() and (home.root / "damaged" / path.relative_to(home.root)).exists()
