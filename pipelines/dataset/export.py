"""Export in the public STEM release's layout (REFERENCE.md section 1).

``export/stem/data/{split}-NNNNN-of-MMMMM.parquet`` with exactly the release's fields and
types; images as PNG bytes; the public test shards carry ``answer_idx = -1`` and the test
answer key is written beside ``data/`` (``test_answer_key.jsonl``), with ``index.parquet``
mapping every exported row to its ``question_id``. Rows within a split are ordered by
``question_id``; that order is the order of a leaderboard ``preds.txt``.
"""

from __future__ import annotations

import ctypes
import errno
import io
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from pipelines.store.images import ImageStore
from pipelines.store.atomic import describe_os_error, fsync_directory, remove_stale_temporaries, temporary_path
from pipelines.parallel import forked_pool, shared, sharing, worker_count
from pipelines.dataset.split import SPLITS

STEM_SCHEMA = pa.schema(
    [
        ("subject", pa.string()),
        ("grade", pa.string()),
        ("skill", pa.string()),
        ("pic_choice", pa.bool_()),
        ("pic_prob", pa.bool_()),
        ("problem", pa.string()),
        ("problem_pic", pa.binary()),
        ("choices", pa.list_(pa.string())),
        ("choices_pic", pa.list_(pa.binary())),
        ("answer_idx", pa.int64()),
    ]
)
DEFAULT_ROWS_PER_SHARD = 5000
# The export replaced by a publish is kept for readers that were inside it. It is deleted
# before staging the next export (so the disk holds at most two exports) unless it was
# replaced less than this long ago; then it is deleted only just before the next swap.
PREVIOUS_EXPORT_GRACE_SECONDS = 10.0


def png_bytes(store: ImageStore, image_hash: str) -> bytes:
    """The stored image as PNG bytes (converted deterministically when stored otherwise)."""
    data, ext = store.read(image_hash)
    if ext == "png":
        return data
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        if im.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
            im = im.convert("RGBA" if "A" in im.getbands() else "RGB")
        out = io.BytesIO()
        im.save(out, format="PNG", optimize=False, compress_level=6)
        return out.getvalue()


def export_order(questions: pl.DataFrame) -> pl.DataFrame:
    """Questions sorted into export order, with ``export_position`` within their split."""
    return questions.sort("split", "question_id").with_columns(
        pl.int_range(pl.len()).over("split").cast(pl.Int64).alias("export_position")
    )


@dataclass(frozen=True)
class ExportResult:
    data_dir: Path
    files: list[Path]
    rows: dict[str, int]


# the questions columns a shard is made of
SHARD_INPUT_COLUMNS = ("subject", "grade", "skill", "problem", "problem_image", "choices", "choice_images", "answer_idx")


def _split_table(rows: pa.Table, store: ImageStore, public_test: bool) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in STEM_SCHEMA.names}
    pngs: dict[str, bytes] = {}  # one shard's images; a picture shared by questions is read once

    def png(image_hash: str) -> bytes:
        data = pngs.get(image_hash)
        if data is None:
            data = pngs[image_hash] = png_bytes(store, image_hash)
        return data

    for r in rows.to_pylist():
        pic_choice = r["choice_images"] is not None
        columns["subject"].append(r["subject"])
        columns["grade"].append(r["grade"])
        columns["skill"].append(r["skill"])
        columns["pic_choice"].append(pic_choice)
        columns["pic_prob"].append(r["problem_image"] is not None)
        columns["problem"].append(r["problem"])
        columns["problem_pic"].append(png(r["problem_image"]) if r["problem_image"] else None)
        columns["choices"].append(None if pic_choice else list(r["choices"]))
        columns["choices_pic"].append([png(h) for h in r["choice_images"]] if pic_choice else None)
        columns["answer_idx"].append(-1 if public_test else int(r["answer_idx"]))
    return pa.Table.from_pydict(columns, schema=STEM_SCHEMA)


# Below this many rows per worker, forking workers costs more than it saves.
MIN_ROWS_PER_WORKER = 10_000


def _write_shard(split: str, start: int, length: int, store_root: Path, public_test: bool, path: Path) -> None:
    rows = shared(f"export-rows:{split}").slice(start, length)
    table = _split_table(rows, ImageStore(store_root), public_test)
    pq.write_table(table, path, compression="zstd", row_group_size=1000)


def _write_shards(tables: dict[str, pa.Table], jobs: list[tuple], workers: int | None) -> None:
    workers = min(worker_count(sum(t.num_rows for t in tables.values()), MIN_ROWS_PER_WORKER, workers), len(jobs))
    with sharing({f"export-rows:{split}": table for split, table in tables.items()}):
        if workers <= 1:
            for job in jobs:
                _write_shard(*job)
            return
        with forked_pool(workers) as pool:
            for future in [pool.submit(_write_shard, *job) for job in jobs]:
                future.result()


class ExportError(RuntimeError):
    """The export could not be published (full disk, permissions, ...); the message is one
    line and the previous export is unchanged."""


class ExportRefused(ExportError):
    """The staged export failed the release invariants; the previous export is unchanged."""


EXPORT_FILES = ("data", "index.parquet", "test_answer_key.jsonl")


def write_stem_export(
    questions: pl.DataFrame,
    store: ImageStore,
    export_root: Path,
    *,
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
    hide_test_answers: bool = True,
    workers: int | None = None,
    validate: Callable[[Path], list[str]] | None = None,
) -> ExportResult:
    """Write the release layout under ``export_root`` (``.../export/stem``) atomically.

    The whole new ``export_root`` (``data/``, ``index.parquet``, ``test_answer_key.jsonl``)
    is assembled in a staging folder beside it and exchanged with the published one in a
    single rename, so a reader always finds ``data/`` with a complete set of shards of one
    version, and the index and answer key that belong to them. The replaced export stays at
    ``previous_export(export_root)`` until the next publish, so a reader that was inside it
    during the swap can finish. On any failure the staging folder is removed and the
    published export is untouched (``ExportError``, one line).

    Shards are written by ``workers`` processes (default: one per CPU once there are at least
    ``MIN_ROWS_PER_WORKER`` rows each); the files are the same bytes whatever the count.

    ``validate`` (given the staged ``data/`` folder, returning problems) runs before the
    swap: with any problem nothing is published and ``ExportRefused`` names the first.
    """
    if rows_per_shard <= 0:
        raise ValueError(f"rows_per_shard must be positive, got {rows_per_shard}")
    export_root = Path(export_root)
    previous = previous_export(export_root)
    try:
        export_root.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(export_root.parent, export_root.name)
        if _retired_seconds_ago(previous) > PREVIOUS_EXPORT_GRACE_SECONDS:
            shutil.rmtree(previous, ignore_errors=True)  # room for the new one first
        staging = temporary_path(export_root, kind="folder", sweep=False)
    except OSError as exc:
        raise _publish_error(export_root, exc) from None
    ordered = export_order(questions)
    rows: dict[str, int] = {}
    try:
        data_dir = staging / "data"
        data_dir.mkdir()
        tables, jobs = {}, []
        for split in SPLITS:
            part = ordered.filter(pl.col("split") == split)
            rows[split] = part.height
            tables[split] = part.select(SHARD_INPUT_COLUMNS).to_arrow()  # workers get Arrow, not Polars
            shards = max(1, -(-part.height // rows_per_shard))
            public_test = split == "test" and hide_test_answers
            for i in range(shards):
                path = data_dir / f"{split}-{i:05d}-of-{shards:05d}.parquet"
                jobs.append((split, i * rows_per_shard, rows_per_shard, store.root, public_test, path))
        _write_shards(tables, jobs, workers)
        index = ordered.select("split", "export_position", "question_id")
        pq.write_table(index.to_arrow(), staging / "index.parquet", compression="zstd")
        with open(staging / "test_answer_key.jsonl", "w", encoding="utf-8") as f:
            for r in ordered.filter(pl.col("split") == "test").iter_rows(named=True):
                f.write(json.dumps({"index": r["export_position"], "question_id": r["question_id"],
                                    "answer_idx": r["answer_idx"]}) + "\n")
        problems = validate(data_dir) if validate is not None else []
        if problems:
            raise ExportRefused(
                f"{len(problems)} problem(s), first: {problems[0]}; the previous export is kept"
            )
        _carry_over_other_entries(export_root, staging)
        shutil.rmtree(previous, ignore_errors=True)  # retired only moments ago: kept this long
        publish_folder(staging, export_root)
        fsync_directory(export_root.parent)
        # the staging name now holds the replaced export: keep it (until the next publish)
        # for readers that were inside it during the swap
        if staging.exists():
            try:
                os.rename(staging, previous)
            except OSError:
                pass
    except OSError as exc:
        raise _publish_error(export_root, exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    final_dir = export_root / "data"
    return ExportResult(final_dir, sorted(final_dir.glob("*.parquet")), rows)


def previous_export(export_root: Path) -> Path:
    """Where the export replaced by the last publish is kept until the next one."""
    return Path(export_root).parent / f".{Path(export_root).name}-previous"


def _retired_seconds_ago(folder: Path) -> float:
    try:
        return time.time() - folder.stat().st_ctime  # a rename sets the folder's ctime
    except FileNotFoundError:
        return float("inf")


def _publish_error(export_root: Path, exc: BaseException) -> ExportError:
    cause = describe_os_error(exc, temporary_marker=f".{export_root.name}.")
    return ExportError(f"could not publish the export at {export_root}: {cause}; the previous export is unchanged")


def _carry_over_other_entries(published: Path, staging: Path) -> None:
    """Keep files a user put beside the export (anything not written here) across the swap."""
    if not published.is_dir():
        return
    for entry in published.iterdir():
        if entry.name in EXPORT_FILES:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, staging / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, staging / entry.name)


def _link_or_copy(source, destination) -> None:
    try:
        os.link(source, destination, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, destination, follow_symlinks=False)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}


def _rename_exchange(a: Path, b: Path) -> None:
    """Swap two existing paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError, TypeError):
        raise OSError(errno.ENOSYS, "renameat2 is not available") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


def publish_folder(new: Path, final: Path) -> None:
    """Put the complete folder ``new`` at ``final`` in one step; afterwards ``new`` holds
    the previous content of ``final`` (or no longer exists), for the caller to remove.

    Where the file system cannot exchange two paths atomically, two renames are used and a
    reader can miss ``final`` for the instant between them.
    """
    if not os.path.lexists(final):
        os.rename(new, final)
        return
    try:
        _rename_exchange(new, final)
        return
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
    previous = temporary_path(final, kind="name", sweep=False)
    os.rename(final, previous)
    try:
        os.rename(new, final)
    except OSError:
        os.rename(previous, final)
        raise
    os.rename(previous, new)


def dataset_statistics(questions: pl.DataFrame) -> pl.DataFrame:
    """The paper's Table 1: per subject #skills, #questions, avg #answers, #train/#valid/#test."""
    from pipelines.store.records import SUBJECTS

    def stats(frame: pl.DataFrame, label: str) -> dict:
        return {
            "subject": label,
            "skills": frame.select(pl.struct("subject", "skill").n_unique()).item() if frame.height else 0,
            "questions": frame.height,
            "avg_answers": round(float(frame["num_choices"].mean()), 2) if frame.height else 0.0,
            "train": int((frame["split"] == "train").sum()),
            "valid": int((frame["split"] == "valid").sum()),
            "test": int((frame["split"] == "test").sum()),
        }

    rows = [stats(questions.filter(pl.col("subject") == s), s.capitalize()) for s in SUBJECTS]
    rows.append(stats(questions, "Total"))
    return pl.DataFrame(rows)


def statistics_markdown(stats: pl.DataFrame) -> str:
    header = "| Subject | #Skills | #Questions | Avg #A | #Train | #Valid | #Test |\n|---|---|---|---|---|---|---|\n"
    lines = [
        f"| {r['subject']} | {r['skills']:,} | {r['questions']:,} | {r['avg_answers']:.1f} | "
        f"{r['train']:,} | {r['valid']:,} | {r['test']:,} |"
        for r in stats.iter_rows(named=True)
    ]
    return header + "\n".join(lines)


def check_release_invariants(data_dir: Path) -> list[str]:
    """Problems with an export folder against the public release's invariants (empty = fine)."""
    problems: list[str] = []
    files = sorted(Path(data_dir).glob("*.parquet"))
    if not files:
        return [f"no Parquet shards in {data_dir}"]
    for path in files:
        split = path.name.split("-", 1)[0]
        table = pq.read_table(path)
        if table.schema != STEM_SCHEMA:
            problems.append(f"{path.name}: schema differs from the release")
            continue
        rows = table.to_pylist()
        for i, r in enumerate(rows):
            where = f"{path.name} row {i}"
            if (r["choices"] is None) == (r["choices_pic"] is None):
                problems.append(f"{where}: exactly one of choices/choices_pic must be set")
                continue
            if r["pic_choice"] != (r["choices_pic"] is not None):
                problems.append(f"{where}: pic_choice does not match choices_pic")
            if r["pic_prob"] != (r["problem_pic"] is not None):
                problems.append(f"{where}: pic_prob does not match problem_pic")
            k = len(r["choices"] if r["choices"] is not None else r["choices_pic"])
            if not 2 <= k <= 5:
                problems.append(f"{where}: {k} options")
            if split == "test" and r["answer_idx"] != -1:
                problems.append(f"{where}: public test must carry answer_idx -1")
            if split != "test" and not 0 <= r["answer_idx"] < k:
                problems.append(f"{where}: answer_idx {r['answer_idx']} out of range")
    return problems
