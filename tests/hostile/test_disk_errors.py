"""A full disk or a permission error while publishing: one clear line, the previous warehouse,
export and lake files intact, no temporaries left; and readers during an export swap.

The faults are real: a small tmpfs filled to the brim (ENOSPC), and `chattr +i` (EPERM even
for root). Both need root; the tests are skipped where the machine does not allow them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from PIL import Image

from pipelines.dataset import export as export_module
from pipelines.dataset.export import ExportError, check_release_invariants, previous_export, write_stem_export
from pipelines.store.atomic import StorageError
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import BatchWriter, write_table
from pipelines.store.warehouse import WarehouseError, publish_warehouse, run_query

SUBJECTS = ("science", "technology", "engineering", "math")


# ---- real faults ---------------------------------------------------------------------

def _root_tool_works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextmanager
def small_disk(folder: Path, size: str):
    """A tmpfs of ``size`` mounted at ``folder`` (skips the test where mounting is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not _root_tool_works(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)]):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-R", "-i", str(folder)], capture_output=True)
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextmanager
def immutable(path: Path):
    """``chattr +i``: no entry of a folder (or the file itself) can be created, renamed or removed."""
    if not _root_tool_works(["chattr", "+i", str(path)]):
        pytest.skip("chattr +i is not available here (needs root and a file system with attributes)")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def fill_disk(folder: Path, leave_bytes: int) -> Path:
    """Fill the file system of ``folder`` until writes fail, then free ``leave_bytes``."""
    filler = folder / "filler.bin"
    chunk = b"\0" * (256 * 1024)
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as exc:
            assert exc.errno == 28, exc
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave_bytes))
    return filler


# ---- small real data -----------------------------------------------------------------

def png(rng: np.random.Generator, side: int = 48) -> bytes:
    pixels = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)  # noise: does not compress
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG")
    return out.getvalue()


def questions_frame(store: ImageStore, n: int, seed: int) -> pl.DataFrame:
    """``n`` questions in the lake's ``questions`` layout, every third with a problem image."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        subject = SUBJECTS[i % 4]
        image = store.put(png(rng)).image_hash if i % 3 == 0 else None
        choices = [f"option {j} of {seed}-{i}" for j in range(2 + i % 3)]
        rows.append({
            "question_id": hashlib.sha256(f"{seed}-{i}".encode()).hexdigest()[:16],
            "source": "demo",
            "source_key": f"http://demo.localhost/q/{seed}/{i}",
            "subject": subject,
            "grade": None if subject == "technology" else f"grade-{1 + i % 5}",
            "skill": f"skill-{i % 6}",
            "problem": f"Question {i} of version {seed}: what is \\( {i} \\times 2 \\)?",
            "problem_original": f"Question {i}",
            "problem_image": image,
            "pic_prob": image is not None,
            "pic_choice": False,
            "num_choices": len(choices),
            "choices": choices,
            "choice_images": None,
            "answer_idx": i % len(choices),
            "split": ("train", "train", "train", "valid", "test")[i % 5],
            "duplicate_group": None,
        })
    schema = {"choice_images": pl.List(pl.String), "problem_image": pl.String, "grade": pl.String,
              "duplicate_group": pl.String}
    return pl.DataFrame(rows, schema_overrides=schema)


def write_lake(home: DataHome, n: int, seed: int) -> pl.DataFrame:
    questions = questions_frame(ImageStore(home.images), n, seed)
    write_table(questions, home.lake_path("questions"))
    write_table(questions.select("source", "source_key", "subject", "grade", "skill", "problem"),
                home.lake / "raw_questions" / "demo.parquet")
    return questions


def digest_tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def hidden_leftovers(folder: Path) -> list[str]:
    """Temporaries and staging folders anywhere under ``folder`` (the export replaced by the
    last publish, kept on purpose for readers, aside)."""
    kept = previous_export(Path("export/stem")).name
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob(".*")
        if kept not in p.relative_to(folder).parts
    )


def assert_one_line(error: BaseException, *fragments: str) -> None:
    message = str(error)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# ---- full disk -----------------------------------------------------------------------

def test_full_disk_keeps_the_previous_warehouse(tmp_path):
    with small_disk(tmp_path / "disk", "24m") as disk:
        home = DataHome(disk / "home")
        write_lake(home, 30, seed=1)
        assert publish_warehouse(home).tables["questions"] == 30
        before = hashlib.sha256(home.warehouse.read_bytes()).hexdigest()

        write_lake(home, 60, seed=2)
        filler = fill_disk(disk, leave_bytes=300_000)  # the new file fails part-way through
        with pytest.raises(WarehouseError) as failure:
            publish_warehouse(home)
        assert_one_line(failure.value, f"could not publish the warehouse at {home.warehouse}",
                        "No space left on device", "the previous warehouse is unchanged")
        assert hashlib.sha256(home.warehouse.read_bytes()).hexdigest() == before
        assert run_query(home, "SELECT count(*) FROM questions").rows == [(30,)]
        assert hidden_leftovers(home.root) == []

        filler.unlink()  # space again: the next publish goes through
        assert publish_warehouse(home).tables["questions"] == 60
        assert run_query(home, "SELECT count(*) FROM questions").rows == [(60,)]
        assert hidden_leftovers(home.root) == []


def test_full_disk_keeps_the_previous_export(tmp_path):
    with small_disk(tmp_path / "disk", "8m") as disk:
        home = DataHome(disk / "home")
        store = ImageStore(home.images)
        root = home.export.parent
        write_stem_export(questions_frame(store, 30, seed=1), store, root, rows_per_shard=4)
        before = digest_tree(root)
        assert len([n for n in before if n.startswith("data/")]) > 3

        newer = questions_frame(store, 90, seed=2)
        filler = fill_disk(disk, leave_bytes=200_000)
        with pytest.raises(ExportError) as failure:
            write_stem_export(newer, store, root, rows_per_shard=4)
        assert_one_line(failure.value, f"could not publish the export at {root}",
                        "No space left on device", "the previous export is unchanged")
        assert digest_tree(root) == before
        assert check_release_invariants(home.export) == []
        assert hidden_leftovers(root.parent) == []

        filler.unlink()
        result = write_stem_export(newer, store, root, rows_per_shard=4)
        assert sum(result.rows.values()) == 90 and check_release_invariants(home.export) == []
        assert hidden_leftovers(root.parent) == []


def test_export_is_the_same_bytes_written_by_worker_processes(tmp_path):
    store = ImageStore(tmp_path / "images")
    frame = questions_frame(store, 60, seed=4)
    one = write_stem_export(frame, store, tmp_path / "one" / "stem", rows_per_shard=7, workers=1)
    two = write_stem_export(frame, store, tmp_path / "two" / "stem", rows_per_shard=7, workers=2)
    assert len(one.files) > 4 and one.rows == two.rows
    assert digest_tree(tmp_path / "one" / "stem") == digest_tree(tmp_path / "two" / "stem")


def test_a_shard_failing_in_a_worker_fails_the_export_and_keeps_the_previous(tmp_path, monkeypatch):
    store = ImageStore(tmp_path / "images")
    root = tmp_path / "export" / "stem"
    write_stem_export(questions_frame(store, 30, seed=1), store, root, rows_per_shard=4, workers=2)
    before = digest_tree(root)
    real = export_module._split_table

    def failing(rows, store, public_test):
        if public_test:  # the test split's shards, in the workers
            raise OSError(28, "No space left on device")
        return real(rows, store, public_test)

    monkeypatch.setattr(export_module, "_split_table", failing)
    with pytest.raises(ExportError) as failure:
        write_stem_export(questions_frame(store, 40, seed=2), store, root, rows_per_shard=4, workers=2)
    assert_one_line(failure.value, f"could not publish the export at {root}", "No space left on device")
    assert digest_tree(root) == before
    assert hidden_leftovers(root.parent) == []


def test_full_disk_never_leaves_a_partial_lake_file(tmp_path):
    with small_disk(tmp_path / "disk", "2m") as disk:
        path = disk / "lake" / "questions.parquet"
        small = pa.table({"x": np.arange(10)})
        write_table(small, path)
        big = pa.table({"x": np.random.default_rng(0).random(1_000_000)})  # ~8 MB, incompressible
        with pytest.raises(StorageError) as failure:
            write_table(big, path)
        assert_one_line(failure.value, f"could not write {path}", "No space left on device")
        assert failure.value.errno == 28 and isinstance(failure.value, OSError)
        assert pl.read_parquet(path)["x"].to_list() == list(range(10))

        streamed = disk / "lake" / "streamed.parquet"
        with pytest.raises(StorageError) as failure:
            with BatchWriter(streamed, pa.schema([("x", pa.float64())]), batch_rows=100_000) as writer:
                writer.extend({"x": float(v)} for v in np.random.default_rng(1).random(1_000_000))
        assert_one_line(failure.value, f"could not write {streamed}", "No space left on device")
        assert not streamed.exists()
        assert hidden_leftovers(disk / "lake") == []

        images = ImageStore(disk / "images")
        with pytest.raises(StorageError, match="No space left on device"):
            images.put(png(np.random.default_rng(2), side=1200))  # ~4 MB
        assert [p for p in (disk / "images").rglob("*") if p.is_file()] == []


# ---- permission errors ---------------------------------------------------------------

def test_permission_error_keeps_the_previous_warehouse(tmp_path):
    home = DataHome(tmp_path / "home")
    write_lake(home, 20, seed=1)
    publish_warehouse(home)
    before = home.warehouse.read_bytes()
    write_lake(home, 25, seed=2)

    with immutable(home.root):  # no new file can be created beside the warehouse
        with pytest.raises(WarehouseError) as failure:
            publish_warehouse(home)
    assert_one_line(failure.value, f"could not publish the warehouse at {home.warehouse}",
                    "Operation not permitted", "the previous warehouse is unchanged")
    assert home.warehouse.read_bytes() == before

    with immutable(home.warehouse):  # the new file is complete, but cannot replace the old one
        with pytest.raises(WarehouseError, match="Operation not permitted"):
            publish_warehouse(home)
    assert home.warehouse.read_bytes() == before
    assert hidden_leftovers(home.root) == []
    assert run_query(home, "SELECT count(*) FROM questions").rows == [(20,)]
    assert publish_warehouse(home).tables["questions"] == 25


def test_permission_error_keeps_the_previous_export(tmp_path):
    home = DataHome(tmp_path / "home")
    store = ImageStore(home.images)
    root = home.export.parent
    write_stem_export(questions_frame(store, 20, seed=1), store, root, rows_per_shard=6)
    before = digest_tree(root)
    newer = questions_frame(store, 33, seed=2)

    with immutable(root.parent):  # nowhere to stage the new export
        with pytest.raises(ExportError) as failure:
            write_stem_export(newer, store, root, rows_per_shard=6)
    assert_one_line(failure.value, f"could not publish the export at {root}",
                    "Operation not permitted", "the previous export is unchanged")
    assert digest_tree(root) == before

    with immutable(root):  # staged completely, but the published folder cannot be swapped out
        with pytest.raises(ExportError, match="Operation not permitted"):
            write_stem_export(newer, store, root, rows_per_shard=6)
    assert digest_tree(root) == before
    assert hidden_leftovers(root.parent) == []
    assert check_release_invariants(home.export) == []


def test_permission_error_in_the_lake_names_the_file(tmp_path):
    path = tmp_path / "lake" / "questions.parquet"
    write_table(pa.table({"x": [1, 2, 3]}), path)
    with immutable(path.parent):
        with pytest.raises(StorageError) as failure:
            write_table(pa.table({"x": [4, 5]}), path)
    assert_one_line(failure.value, f"could not write {path}", "Operation not permitted")
    assert pl.read_parquet(path)["x"].to_list() == [1, 2, 3]
    assert hidden_leftovers(path.parent) == []


# ---- readers during an export swap ---------------------------------------------------

READER = r"""
import json, os, sys
data, versions, stop = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
known = [set(v) for v in versions]
seen = {"listings": 0, "missing": 0, "stale": 0, "incomplete": [], "by_version": [0] * len(known)}
print("ready", flush=True)
while not os.path.exists(stop):
    try:
        fd = os.open(data, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        seen["missing"] += 1
        continue
    try:
        names = set(os.listdir(fd))
        listed = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    seen["listings"] += 1
    if names in known:
        seen["by_version"][known.index(names)] += 1
        continue
    try:
        current = os.stat(data).st_ino
    except FileNotFoundError:
        current = None
    if listed != current:
        # this reader sat inside a version that was replaced and then deleted (a stall of
        # the whole grace period); the published folder itself was never partial
        seen["stale"] += 1
    elif len(seen["incomplete"]) < 5:
        seen["incomplete"].append(sorted(names))
print(json.dumps(seen), flush=True)
"""


def export_names(result) -> list[str]:
    return sorted(p.name for p in result.files)


@pytest.mark.parametrize("exchange", ["atomic", "fallback"])
def test_readers_during_export_swaps_always_find_a_complete_set(tmp_path, monkeypatch, exchange):
    home = DataHome(tmp_path / "home")
    store = ImageStore(home.images)
    root = home.export.parent
    # two versions with different shard counts, so a partial or mixed listing is detectable
    version_a, version_b = questions_frame(store, 24, seed=1), questions_frame(store, 40, seed=2)
    names_b = export_names(write_stem_export(version_b, store, root, rows_per_shard=3))
    names_a = export_names(write_stem_export(version_a, store, root, rows_per_shard=5))
    assert names_a != names_b
    if exchange == "fallback":  # a file system without renameat2(RENAME_EXCHANGE)
        def unsupported(a, b):
            raise OSError(22, "Invalid argument")

        monkeypatch.setattr(export_module, "_rename_exchange", unsupported)

    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(home.export), json.dumps([names_a, names_b]), str(stop)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "ready"
        swaps = 0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline or swaps < 10:
            for frame, shard in ((version_b, 3), (version_a, 5)):
                write_stem_export(frame, store, root, rows_per_shard=shard)
                swaps += 1
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=30)
    seen = json.loads(out.strip().splitlines()[-1])
    print(f"{swaps} swaps ({exchange}), reader: {seen}")
    assert seen["listings"] > 100 and all(seen["by_version"]), seen
    assert seen["stale"] <= seen["listings"] // 1000, seen
    if exchange == "atomic":
        assert seen["missing"] == 0 and seen["incomplete"] == [], seen
    else:  # two renames: the folder can be absent for an instant, but is never partial
        assert seen["incomplete"] == [], seen
    assert hidden_leftovers(root.parent) == []
    assert check_release_invariants(home.export) == []
    assert export_names(write_stem_export(version_a, store, root, rows_per_shard=5)) == names_a


def test_export_swap_keeps_user_files_and_the_replaced_version_for_readers(tmp_path):
    home = DataHome(tmp_path / "home")
    store = ImageStore(home.images)
    root = home.export.parent
    first = write_stem_export(questions_frame(store, 20, seed=1), store, root, rows_per_shard=6)
    (root / "NOTES.md").write_text("notes a user keeps beside the export\n")
    first_digests = digest_tree(root)

    # a reader that opened the published folder before the swap keeps a complete version
    held = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_stem_export(questions_frame(store, 33, seed=2), store, root, rows_per_shard=6)
        assert sorted(os.listdir(f"/proc/self/fd/{held}/data")) == sorted(p.name for p in first.files)
        assert digest_tree(previous_export(root)) == first_digests
    finally:
        os.close(held)
    assert (root / "NOTES.md").read_text() == "notes a user keeps beside the export\n"
    assert check_release_invariants(home.export) == []
    third = write_stem_export(questions_frame(store, 12, seed=3), store, root, rows_per_shard=6)
    assert sum(third.rows.values()) == 12
    # only the version replaced last is kept
    assert sorted(p.name for p in root.parent.iterdir()) == sorted([root.name, previous_export(root).name])
