"""The one atomic-write helper of the data home (pipelines/store/atomic.py): one temporary name, one cleanup."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines.store.atomic import (
    StorageError,
    atomic_path,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    remove_stale_temporaries,
    temporary_path,
)


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_writes_appear_whole_and_leave_no_temporary(tmp_path):
    target = tmp_path / "a" / "b.json"
    atomic_write_text(target, "one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    with atomic_write(target, "w") as handle:
        handle.write("three")
        assert target.read_text() == "two"  # not yet replaced
    assert target.read_text() == "three"
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.json", "b.json.sha256"]  # with its checksum


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "b.json"
    target.write_text("before")
    with pytest.raises(RuntimeError):
        with atomic_write(target, "w") as handle:
            handle.write("half")
            raise RuntimeError("stop")
    assert target.read_text() == "before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_an_os_error_is_one_storage_error_line_naming_the_target(tmp_path):
    target = tmp_path / "b.json"
    with pytest.raises(StorageError) as caught:
        with atomic_path(target):
            raise OSError(28, "No space left on device")
    assert not list(tmp_path.iterdir())
    assert str(caught.value) == f"could not write {target}: No space left on device; the file there, if any, is unchanged"


def test_one_temporary_scheme_for_files_folders_and_names(tmp_path):
    target = tmp_path / "warehouse.duckdb"
    made = [temporary_path(target), temporary_path(target, kind="folder"), temporary_path(target, kind="name")]
    for path in made:
        prefix, pid, _token, suffix = path.name.rsplit(".", 3)
        assert (prefix, pid, suffix) == (".warehouse.duckdb", str(os.getpid()), "tmp")
    assert made[0].is_file() and made[1].is_dir() and not made[2].exists()
    assert len({p.name for p in made}) == 3


def test_stale_temporaries_of_dead_processes_go_live_ones_stay(tmp_path):
    gone = dead_pid()
    stale = [tmp_path / f".q.parquet.{gone}.ab12.tmp", tmp_path / "sub" / f".x.png.{gone}.ff.tmp",
             tmp_path / f".warehouse.duckdb.{gone}.1.tmp.wal"]
    live = [tmp_path / f".q.parquet.{os.getpid()}.cd34.tmp"]
    other = [tmp_path / "q.parquet", tmp_path / ".hidden", tmp_path / f".stem.{gone}-previous"]
    for path in stale + live + other:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    folder = tmp_path / f".stem.{gone}.77.tmp"
    folder.mkdir()
    (folder / "data").mkdir()
    assert remove_stale_temporaries(tmp_path, "q.parquet") == 1
    assert remove_stale_temporaries(tmp_path) == 2  # a DuckDB companion and a staging folder
    assert remove_stale_temporaries(tmp_path, recursive=True) == 1
    assert [p.exists() for p in stale + live + other] == [False] * 3 + [True] * 4
    assert not folder.exists()


def test_first_writes_racing_into_a_new_folder_all_succeed(tmp_path, monkeypatch):
    """Another process makes the folder between this write's failed open and its look at the folder
    (demo bulk writers share image folders): the write is tried again, not failed."""
    target = tmp_path / "images" / "19" / "x.png"
    real_open = os.open
    raced = []

    def open_while_another_process_makes_the_folder(path, *args, **kwargs):
        if not raced:
            raced.append(path)
            target.parent.mkdir(parents=True)  # the other process's mkdir wins the race
            raise FileNotFoundError(2, "No such file or directory")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_while_another_process_makes_the_folder)
    atomic_write_bytes(target, b"png", sweep=False, checksum=False)
    assert raced and target.read_bytes() == b"png"


def test_a_write_under_a_folder_that_cannot_be_made_is_one_storage_error(tmp_path):
    blocker = tmp_path / "images"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(StorageError, match="could not write"):
        atomic_write_bytes(blocker / "19" / "x.png", b"png", sweep=False, checksum=False)
