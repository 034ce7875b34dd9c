"""Checksums recorded beside every file a data home writes, and the checks that use them
(issue 12, item 5). Builds of real homes are in tests/hostile/test_home_safety.py."""

from __future__ import annotations

import hashlib
import os
import subprocess

import polars as pl
import pyarrow as pa
import pytest

from pipelines.store import atomic, memo
from pipelines.store.atomic import StorageError, atomic_write_text, record_checksum
from pipelines.store.checksums import checksum_path, parse_checksums, recorded_checksum
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.integrity import DAMAGED, MISSING, UNRECORDED, check_before_build, verify_home
from pipelines.store.lake import BatchWriter, write_table
from support.images import real_png


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def flip_byte_keeping_mtime(path, offset: int | None = None) -> None:
    stat = path.stat()
    data = bytearray(path.read_bytes())
    offset = len(data) // 2 if offset is None else offset
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_every_write_records_a_checksum_sha256sum_can_check(tmp_path):
    table = tmp_path / "lake" / "t.parquet"
    write_table(pl.DataFrame({"x": [1, 2, 3]}), table)
    with BatchWriter(tmp_path / "lake" / "b.parquet", pa.schema([("x", pa.int64())])) as writer:
        writer.add({"x": 1})
    atomic_write_text(tmp_path / "lake" / "state" / "r.json", "{}")
    for path in (table, tmp_path / "lake" / "b.parquet", tmp_path / "lake" / "state" / "r.json"):
        assert checksum_path(path).read_text() == f"{sha256(path)}  {path.name}\n"
        assert recorded_checksum(path) == sha256(path)
        checked = subprocess.run(["sha256sum", "-c", checksum_path(path).name], cwd=path.parent, capture_output=True, text=True)
        assert checked.returncode == 0 and checked.stdout.strip() == f"{path.name}: OK"
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["b.parquet", "b.parquet.sha256", "state", "t.parquet", "t.parquet.sha256"]


def test_images_are_named_by_their_hash_and_get_no_sidecar(tmp_path):
    info = ImageStore(tmp_path / "images").put(real_png(3))
    stored = [p for p in (tmp_path / "images").rglob("*") if p.is_file()]
    assert [p.name for p in stored] == [f"{info.image_hash}.png"]


def test_a_full_disk_while_recording_keeps_the_file_and_its_checksum(tmp_path, monkeypatch):
    target = tmp_path / "t.parquet"
    write_table(pl.DataFrame({"x": [1]}), target)
    before = (target.read_bytes(), checksum_path(target).read_text())

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "checksum_lines", full)
    with pytest.raises(StorageError) as caught:
        write_table(pl.DataFrame({"x": [2]}), target)
    assert "No space left on device" in str(caught.value) and str(target) in str(caught.value)
    assert (target.read_bytes(), checksum_path(target).read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet", "t.parquet.sha256"]


@pytest.mark.parametrize("sidecar", ["", "not a checksum\n", "0" * 63 + "  t.parquet\n", "\xff garbage"])
def test_a_damaged_checksum_record_is_unknown_never_trusted(tmp_path, sidecar):
    target = tmp_path / "t.parquet"
    write_table(pl.DataFrame({"x": [1]}), target)
    checksum_path(target).write_text(sidecar, encoding="latin-1")
    assert recorded_checksum(target) is None
    assert memo.describe_file(target)["sha256"] == sha256(target)  # hashed again


def test_memo_reuses_the_recorded_checksum_of_a_file_it_did_not_hash(tmp_path, monkeypatch):
    target = tmp_path / "t.parquet"
    write_table(pl.DataFrame({"x": [1, 2]}), target)
    monkeypatch.setattr(memo, "sha256_file", lambda path: pytest.fail("hashed a file whose checksum is recorded"))
    assert memo.describe_file(target)["sha256"] == sha256(target)


def test_memo_hashes_a_file_rewritten_after_its_checksum(tmp_path):
    target = tmp_path / "t.parquet"
    write_table(pl.DataFrame({"x": [1, 2]}), target)
    stale = os.stat(checksum_path(target)).st_mtime_ns
    pl.DataFrame({"x": [3]}).write_parquet(target)  # past the atomic writer: the sidecar is stale
    os.utime(target, ns=(stale + 10**9, stale + 10**9))
    assert recorded_checksum(target, fresh=True) is None
    assert memo.describe_file(target)["sha256"] == sha256(target)


def small_home(tmp_path) -> DataHome:
    home = DataHome(tmp_path / "home")

    def split() -> dict:
        write_table(pl.DataFrame({"x": [1, 2, 3]}), home.lake_path("questions"))
        return {}

    memo.memoized(home, "split", split, outputs=[home.lake_path("questions")])
    write_table(pl.DataFrame({"x": [4]}), home.lake / "predictions" / "import-mine-0123abcd.parquet")
    ImageStore(home.images).put(real_png(5))
    return home


def test_verify_names_damaged_files_and_files_without_checksum(tmp_path):
    home = small_home(tmp_path)
    assert verify_home(home).clean and not verify_home(home).findings
    flip_byte_keeping_mtime(home.lake_path("questions"))
    image = next(p for p in home.images.rglob("*.png"))
    flip_byte_keeping_mtime(image, offset=40)
    old = home.lake / "old.parquet"
    pl.DataFrame({"x": [0]}).write_parquet(old)
    report = verify_home(home)
    assert not report.clean
    assert [(f.path, f.problem) for f in report.findings] == sorted(
        [(home.lake_path("questions"), DAMAGED), (old, UNRECORDED), (image, DAMAGED)], key=lambda f: str(f[0].relative_to(home.root)))


def test_the_build_check_removes_rebuildable_damage_moves_imports_aside_and_records_old_files(tmp_path):
    home = small_home(tmp_path)
    imported = home.lake / "predictions" / "import-mine-0123abcd.parquet"
    flip_byte_keeping_mtime(home.lake_path("questions"))
    flip_byte_keeping_mtime(imported)
    old = home.lake / "old.parquet"
    pl.DataFrame({"x": [0]}).write_parquet(old)
    checksum_path(home.lake / "gone.parquet").write_text("0" * 64 + "  gone.parquet\n")  # its file was deleted
    lines: list[str] = []
    check_before_build(home, lines.append)
    assert lines[0].startswith("recorded the checksums of 1 lake file(s) written before checksums existed")
    assert lines[1:] == [
        f"damaged: lake/predictions/import-mine-0123abcd.parquet ({'its bytes do not match the checksum recorded when it was written'}); "
        "moved to damaged/lake/predictions/import-mine-0123abcd.parquet: no stage writes it (import it again if it was imported)",
        "damaged: lake/questions.parquet (its bytes do not match the checksum recorded when it was written); "
        "removed; the build rebuilds it from its inputs (stage split)",
    ]
    assert not home.lake_path("questions").exists() and not checksum_path(home.lake_path("questions")).exists()
    assert (home.root / "damaged" / "lake" / "predictions" / imported.name).exists() and not imported.exists()
    assert recorded_checksum(old) == sha256(old)
    assert not checksum_path(home.lake / "gone.parquet").exists()
    assert [(f.path, f.problem) for f in verify_home(home).findings] == [(home.lake_path("questions"), MISSING)]


def test_record_checksum_of_an_existing_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    identity = memo.file_identity(path)
    assert record_checksum(path) == hashlib.sha256(b"abc").hexdigest()
    assert memo.file_identity(path) == identity  # the file itself is left alone
    assert parse_checksums(checksum_path(path).read_text()) == {"f.bin": hashlib.sha256(b"abc").hexdigest()}
