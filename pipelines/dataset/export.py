"""Export in the public STEM release's layout (REFERENCE.md section 1).

``export/stem/data/{split}-NNNNN-of-MMMMM.parquet`` with exactly the release's fields and
types; images as PNG bytes; the public test shards carry ``answer_idx = -1`` and the test
answer key is written beside ``data/`` (``test_answer_key.jsonl``), with ``index.parquet``
mapping every exported row to its ``question_id``. Rows within a split are ordered by
``question_id``; that order is the order of a leaderboard ``preds.txt``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from pipelines.store.code_deps import code_digest_of
from pipelines.store.id_hash import question_id_hashes
from pipelines.store.images import ImageStore
from pipelines.store.memo import file_identity
from pipelines.store.row_reuse import row_digests
from pipelines.store.atomic import atomic_write_bytes, describe_os_error, fsync_directory, remove_stale_temporaries, temporary_path
from pipelines.store.atomic import publish_folder as publish_folder_atomically, rename_exchange
from pipelines.store.publish import previous_export
from pipelines.store.checksums import MANIFEST_NAME, checksum_lines, sha256_file
from pipelines.parallel import forked_pool, shared, sharing, worker_count
from pipelines.dataset.split import SPLITS
from pipelines.dataset.dataset_card import CARD_NAME, BuildFacts, write_dataset_card

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
# zlib level of the pictures converted to PNG: on the 764 real JPEGs of ../shared/corpora,
# 0.61x the time and 0.974x the bytes of Pillow's default level 6 (bench/export_png.py)
PNG_COMPRESS_LEVEL = 3


def png_bytes(store: ImageStore, image_hash: str, converted: Path | None = None) -> bytes:
    """The stored image as PNG bytes (converted deterministically when stored otherwise).

    ``converted``: a folder keeping conversions (``<image_hash>.png``) for the next call."""
    try:  # most pictures: one open and no Path objects (a million pictures at paper scale)
        with open(f"{store.root}/{store.relative_path(image_hash, 'png')}", "rb", buffering=0) as f:
            return f.readall()
    except FileNotFoundError:
        pass
    data, ext = store.read(image_hash)
    if ext == "png":
        return data
    if converted is not None:
        try:
            return (converted / f"{image_hash}.png").read_bytes()
        except FileNotFoundError:
            pass
        png = _converted_png(data)
        try:
            atomic_write_bytes(converted / f"{image_hash}.png", png, sweep=False, checksum=False)
        except OSError:
            pass  # only a cache
        return png
    return _converted_png(data)


def conversion_cache(folder: Path) -> Path:
    """The folder of ``png_bytes``'s conversions made by this code and Pillow version, under
    ``folder`` (those of other versions are removed)."""
    import PIL

    context = hashlib.sha256(f"{code_digest_of(png_bytes)} {PIL.__version__}".encode()).hexdigest()[:16]
    current = Path(folder) / context
    if Path(folder).is_dir():
        for entry in Path(folder).iterdir():
            if entry.name != context:
                shutil.rmtree(entry, ignore_errors=True)
    current.mkdir(parents=True, exist_ok=True)
    return current


def _converted_png(data: bytes, compress_level: int = PNG_COMPRESS_LEVEL) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        if im.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
            im = im.convert("RGBA" if "A" in im.getbands() else "RGB")
        out = io.BytesIO()
        im.save(out, format="PNG", optimize=False, compress_level=compress_level)
        return out.getvalue()


def export_order(questions: pl.DataFrame) -> pl.DataFrame:
    """Questions sorted into export order, with ``export_position`` within their split."""
    return questions.sort("split", "question_id").with_columns(
        pl.int_range(pl.len()).over("split").cast(pl.Int64).alias("export_position")
    )


def shard_bounds(question_ids: pl.Series, rows_per_shard: int) -> list[tuple[int, int]]:
    """(first row, rows) of each shard of one split in export order, cut by content, not position.

    A row whose question id hashes to a cut (one row in about ``rows_per_shard / 2``) starts a shard
    when at least ``rows_per_shard // 2`` rows lie between it and the previous such row (or the
    split's start); a shard of more than ``2 * rows_per_shard`` rows is cut into equal parts, and
    a short last shard joins the one before. So whether a row starts a shard depends on its own id
    and the previous cut's, nothing else: a question added or removed changes the shard it falls in
    (and, when its id is a cut, the next one), where cutting by position would move every later row
    to another shard and rewrite them all. Shards hold half to twice ``rows_per_shard`` rows, about
    1.2 times on average. An empty split is one empty shard."""
    n = len(question_ids)
    if n == 0:
        return [(0, 0)]
    shortest, longest = max(1, rows_per_shard // 2), 2 * rows_per_shard
    hashes = question_id_hashes(question_ids, 0, "shard")
    natural = np.flatnonzero(hashes % np.uint64(max(1, (rows_per_shard + 1) // 2)) == 0)
    natural = natural[natural > 0]
    gaps = natural - np.r_[0, natural[:-1]]
    cuts = np.r_[0, natural[gaps >= shortest], n]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] < shortest:
        cuts = np.delete(cuts, -2)
    bounds = []
    for start, end in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        parts = -(-(end - start) // longest)
        edges = [start + (end - start) * k // parts for k in range(parts + 1)]
        bounds.extend((a, b - a) for a, b in zip(edges[:-1], edges[1:]))
    return bounds


@dataclass(frozen=True)
class ExportResult:
    data_dir: Path
    files: list[Path]
    rows: dict[str, int]
    # content digest of each shard -> its name, identity and sha256: ``previous_shards`` of the next export
    shards: dict = field(default_factory=dict)
    shards_written: int = 0
    shards_kept: int = 0


# the questions columns a shard is made of
SHARD_INPUT_COLUMNS = ("subject", "grade", "skill", "problem", "problem_image", "choices", "choice_images", "answer_idx")


_BINARY_LIMIT = 2**31 - 1  # a binary array's 32-bit offsets address this many bytes


def binary_array(values: list[bytes | None]) -> pa.Array:
    """``pa.array(values, type=pa.binary())``, built from one joined buffer: ~10x faster for
    pictures (Arrow's builder copies and grows per value)."""
    n = len(values)
    present = np.fromiter((v is not None for v in values), dtype=bool, count=n)
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=n)
    if int(lengths.sum()) > _BINARY_LIMIT:
        return pa.array(values, type=pa.binary())  # Arrow says what does not fit
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(v for v in values if v is not None)
    nulls = n - int(present.sum())
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _split_table(rows: pa.Table, store: ImageStore, public_test: bool, *, converted: Path | None = None) -> pa.Table:
    """One shard's table in the release schema; each picture of the shard is read once and
    copied once, straight into the column that holds it."""
    rows = rows.combine_chunks()
    problem_image = rows.column("problem_image").combine_chunks().cast(pa.string())
    choice_images = rows.column("choice_images").combine_chunks().cast(pa.list_(pa.string()))
    problem_hashes = problem_image.to_pylist()
    option_hashes = choice_images.flatten().to_pylist()
    pictures: dict[str, bytes] = {}
    for image_hash in problem_hashes + option_hashes:
        if image_hash is not None and image_hash not in pictures:
            pictures[image_hash] = png_bytes(store, image_hash, converted)

    def embedded(hashes: list[str | None]) -> pa.Array:
        return binary_array([pictures.get(h) for h in hashes])

    pic_choice = pc.is_valid(choice_images)
    choices_pic = pa.ListArray.from_arrays(
        choice_images.offsets, embedded(option_hashes), mask=pc.invert(pic_choice)
    ) if len(choice_images) else pa.array([], type=pa.list_(pa.binary()))
    choices = rows.column("choices").combine_chunks().cast(pa.list_(pa.string()))
    answers = rows.column("answer_idx").combine_chunks().cast(pa.int64())
    columns = {
        "subject": rows.column("subject").combine_chunks().cast(pa.string()),
        "grade": rows.column("grade").combine_chunks().cast(pa.string()),
        "skill": rows.column("skill").combine_chunks().cast(pa.string()),
        "pic_choice": pic_choice,
        "pic_prob": pc.is_valid(problem_image),
        "problem": rows.column("problem").combine_chunks().cast(pa.string()),
        "problem_pic": embedded(problem_hashes),
        "choices": pc.if_else(pic_choice, pa.nulls(len(choices), pa.list_(pa.string())), choices),
        "choices_pic": choices_pic.cast(pa.list_(pa.binary())),
        "answer_idx": pa.array([-1] * len(answers), pa.int64()) if public_test else answers,
    }
    return pa.Table.from_arrays([columns[name] for name in STEM_SCHEMA.names], schema=STEM_SCHEMA)


# Pictures are PNG bytes, compressed already: zstd over them costs a third of a shard's
# writing CPU and saves under 0.5% of its size, so only the other columns are compressed.
PICTURE_COLUMNS = ("problem_pic", "choices_pic.list.element")
SHARD_COMPRESSION = {
    column: "none" if column in PICTURE_COLUMNS else "zstd"
    for column in (f"{f.name}.list.element" if pa.types.is_list(f.type) else f.name for f in STEM_SCHEMA)
}


# Below this many rows per worker, forking workers costs more than it saves.
MIN_ROWS_PER_WORKER = 10_000


def _write_shard(split: str, start: int, length: int, store_root: Path, public_test: bool, converted: Path | None,
                 path: Path) -> tuple[str, bool]:
    """Write one shard; returns its sha256 (hashed by the worker, while the bytes are in the page
    cache: cheaper than writing through an in-memory buffer or a hashing file object, measured)
    and whether the table written met the release invariants (``_shard_is_valid``)."""
    rows = shared(f"export-rows:{split}").slice(start, length)
    keep = {"converted": converted} if converted is not None else {}
    table = _split_table(rows, ImageStore(store_root), public_test, **keep)
    pq.write_table(table, path, compression=SHARD_COMPRESSION, row_group_size=1000)
    return sha256_file(path), _shard_is_valid(table, split)


def _write_shards(tables: dict[str, pa.Table], jobs: list[tuple], workers: int | None) -> list[tuple[str, bool]]:
    """Write the shards of ``jobs``; returns (sha256, valid) in the order of ``jobs``."""
    workers = min(worker_count(sum(t.num_rows for t in tables.values()), MIN_ROWS_PER_WORKER, workers), len(jobs))
    with sharing({f"export-rows:{split}": table for split, table in tables.items()}):
        if workers <= 1:
            return [_write_shard(*job) for job in jobs]
        with forked_pool(workers) as pool:
            return [future.result() for future in [pool.submit(_write_shard, *job) for job in jobs]]


class ExportError(RuntimeError):
    """The export could not be published (full disk, permissions, ...); the message is one
    line and the previous export is unchanged."""


class ExportRefused(ExportError):
    """The staged export failed the release invariants; the previous export is unchanged."""


# the checksum of every file the export writes, one ``sha256sum`` line each (``pipelines.store.checksums``)
EXPORT_MANIFEST = MANIFEST_NAME
EXPORT_FILES = ("data", "index.parquet", "test_answer_key.jsonl", CARD_NAME, EXPORT_MANIFEST)


def write_stem_export(
    questions: pl.DataFrame,
    store: ImageStore,
    export_root: Path,
    *,
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
    hide_test_answers: bool = True,
    workers: int | None = None,
    validate: Callable[..., list[str]] | None = None,
    card: BuildFacts | None = None,
    previous_shards: dict | None = None,
    conversions: Path | None = None,
    staged_at: Path | None = None,
) -> ExportResult:
    """Write the release layout under ``export_root`` (``.../export/stem``) atomically.

    The whole new ``export_root`` (``data/``, ``index.parquet``, ``test_answer_key.jsonl``, ``README.md``)
    is assembled in a staging folder beside it and exchanged with the published one in a
    single rename, so a reader always finds ``data/`` with a complete set of shards of one
    version, and the index and answer key that belong to them. The replaced export stays at
    ``previous_export(export_root)`` until the next publish, so a reader that was inside it
    during the swap can finish. On any failure the staging folder is removed and the
    published export is untouched (``ExportError``, one line).

    Shards are written by ``workers`` processes (default: one per CPU once there are at least
    ``MIN_ROWS_PER_WORKER`` rows each); the files are the same bytes whatever the count.

    ``validate`` (given the staged ``data/`` folder and the shards to read, returning
    problems) runs before the swap: with any problem nothing is published and
    ``ExportRefused`` names the first. Every shard written is checked in memory against the
    same invariants; ``validate`` reads back only those that failed (none, usually) to name
    the problems. Kept shards passed before, byte for byte.

    ``previous_shards`` (the ``shards`` of the previous result for this ``export_root``): a
    shard whose content (its rows' input columns, digested, and whether it hides answers) is
    that of a published shard is not written again: the published file is linked under its
    new name (same bytes, same file). Everything else is written as in a first export.
    ``conversions``: a folder where pictures converted to PNG are kept between exports.

    ``staged_at``: the complete export is not swapped in but left at this folder (beside
    ``export_root``, replacing what was staged there), for ``pipelines.store.publish.commit`` to
    publish together with the warehouse; the result's files are the staged ones.
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
        converted = conversion_cache(conversions) if conversions is not None else None
    except OSError:
        converted = None
    try:
        data_dir = staging / "data"
        data_dir.mkdir()
        tables, jobs, contents, digests, kept = {}, [], [], {}, {}
        context = _shard_context()
        for split in SPLITS:
            part = ordered.filter(pl.col("split") == split)
            rows[split] = part.height
            tables[split] = part.select(SHARD_INPUT_COLUMNS).to_arrow()  # workers get Arrow, not Polars
            bounds = shard_bounds(part["question_id"], rows_per_shard)
            public_test = split == "test" and hide_test_answers
            row_hashes = row_digests(part, ["question_id"], SHARD_INPUT_COLUMNS)
            for i, (start, length) in enumerate(bounds):
                path = data_dir / f"{split}-{i:05d}-of-{len(bounds):05d}.parquet"
                content = _shard_content(context, row_hashes.slice(start, length), public_test)
                if _link_published(export_root, (previous_shards or {}).get(content), path):
                    kept[content] = {**previous_shards[content], "name": path.name}
                    digests[f"data/{path.name}"] = previous_shards[content]["sha256"]
                    continue
                contents.append(content)
                jobs.append((split, start, length, store.root, public_test, converted, path))
        written = _write_shards(tables, jobs, workers)
        shard_record = dict(kept)
        for job, content, (digest, _) in zip(jobs, contents, written):
            digests[f"data/{job[-1].name}"] = digest
            shard_record[content] = {"name": job[-1].name, "sha256": digest}
        index = ordered.select("split", "export_position", "question_id")
        pq.write_table(index.to_arrow(), staging / "index.parquet", compression="zstd")
        (staging / "test_answer_key.jsonl").write_text(
            answer_key_text(ordered.filter(pl.col("split") == "test")), encoding="utf-8"
        )
        write_dataset_card(staging, ordered, card, hide_test_answers)  # the Hugging Face dataset card
        for name in ("index.parquet", "test_answer_key.jsonl", CARD_NAME):
            digests[name] = sha256_file(staging / name)
        (staging / EXPORT_MANIFEST).write_text(checksum_lines(digests), encoding="utf-8")
        # the shards kept passed before; those written were checked in memory: ``validate``
        # reads back only the ones that failed, to name their problems
        suspects = [job[-1] for job, (_, valid) in zip(jobs, written) if not valid]
        problems = validate(data_dir, suspects) if validate is not None else []
        if problems:
            raise ExportRefused(
                f"{len(problems)} problem(s), first: {problems[0]}; the previous export is kept"
            )
        _carry_over_other_entries(export_root, staging)
        if staged_at is not None:
            shutil.rmtree(staged_at, ignore_errors=True)
            os.rename(staging, staged_at)
            fsync_directory(Path(staged_at).parent)
        else:
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
    final_dir = (Path(staged_at) if staged_at is not None else export_root) / "data"
    for entry in shard_record.values():
        entry.update(file_identity(final_dir / entry["name"]) or {})
    return ExportResult(final_dir, sorted(final_dir.glob("*.parquet")), rows, shard_record,
                        shards_written=len(jobs), shards_kept=len(kept))


# a question id JSON writes as it is: printable ASCII without quote or backslash
_PLAIN_JSON_STRING = r'^[ !#-\[\]-~]*$'


def answer_key_text(test: pl.DataFrame) -> str:
    """``test_answer_key.jsonl`` for the test rows in export order: per row the line
    ``json.dumps({"index": ..., "question_id": ..., "answer_idx": ...})``."""
    keys = test.select("export_position", "question_id", "answer_idx")
    plain = (
        keys.schema["question_id"] == pl.String
        and keys.null_count().sum_horizontal().item() == 0
        and bool(keys["question_id"].str.contains(_PLAIN_JSON_STRING).all())
    )
    if not plain:  # ids JSON must escape, or nulls: the general encoder
        return "".join(json.dumps({"index": i, "question_id": q, "answer_idx": a}) + "\n" for i, q, a in keys.rows())
    lines = keys.select(pl.concat_str(
        pl.lit('{"index": '), pl.col("export_position").cast(pl.String), pl.lit(', "question_id": "'),
        pl.col("question_id"), pl.lit('", "answer_idx": '), pl.col("answer_idx").cast(pl.String), pl.lit("}\n"),
    )).to_series()
    return "".join(lines.to_list())


def _shard_context() -> str:
    """What a shard's bytes depend on besides its rows: this code and the libraries'."""
    import PIL

    return hashlib.sha256(json.dumps([
        code_digest_of(write_stem_export), pa.__version__, pl.__version__, PIL.__version__,
    ]).encode()).hexdigest()


def _shard_content(context: str, row_hashes: pl.DataFrame, public_test: bool) -> str:
    hasher = hashlib.sha256(f"{context} {public_test} {row_hashes.height}\n".encode())
    for name in ("digest_a", "digest_b"):
        hasher.update(row_hashes[name].to_numpy().tobytes())
    return hasher.hexdigest()


def _link_published(export_root: Path, entry: dict | None, path: Path) -> bool:
    """Link the published shard ``entry`` describes to ``path``, when it is still that file."""
    if not entry:
        return False
    published = export_root / "data" / entry["name"]
    identity = file_identity(published)
    if identity is None or any(entry.get(k) != v for k, v in identity.items()):
        return False
    try:
        os.link(published, path)
    except OSError:
        return False
    return True


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


def _rename_exchange(a: Path, b: Path) -> None:
    """Swap two existing paths atomically (``pipelines.store.atomic.rename_exchange``)."""
    rename_exchange(a, b)


def publish_folder(new: Path, final: Path) -> None:
    """``pipelines.store.atomic.publish_folder`` (with this module's ``_rename_exchange``)."""
    publish_folder_atomically(new, final, exchange=_rename_exchange)


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


def check_release_invariants(data_dir: Path, files: list[Path] | None = None) -> list[str]:
    """Problems with an export folder against the public release's invariants (empty = fine);
    ``files``: check only these shards of it."""
    problems: list[str] = []
    if files is not None:
        return _shard_problems(sorted(files), problems)
    files = sorted(Path(data_dir).glob("*.parquet"))
    if not files:
        return [f"no Parquet shards in {data_dir}"]
    return _shard_problems(files, problems)


def _shard_is_valid(table: pa.Table, split: str) -> bool:
    """The invariants of ``_shard_problems`` on whole columns (no Python object per picture)."""
    choices, pictures = table.column("choices"), table.column("choices_pic")
    has_pictures = pc.is_valid(pictures)
    k = pc.coalesce(pc.list_value_length(choices), pc.list_value_length(pictures))
    answer = table.column("answer_idx")
    checks = [
        pc.xor(pc.is_valid(choices), has_pictures),
        pc.equal(table.column("pic_choice"), has_pictures),
        pc.equal(table.column("pic_prob"), pc.is_valid(table.column("problem_pic"))),
        pc.and_(pc.greater_equal(k, 2), pc.less_equal(k, 5)),
        pc.equal(answer, -1) if split == "test" else pc.and_(pc.greater_equal(answer, 0), pc.less(answer, k)),
    ]
    return all(pc.all(pc.fill_null(check, False)).as_py() is not False for check in checks)


def _shard_problems(files: list[Path], problems: list[str]) -> list[str]:
    for path in files:
        split = path.name.split("-", 1)[0]
        table = pq.read_table(path)
        if table.schema != STEM_SCHEMA:
            problems.append(f"{path.name}: schema differs from the release")
            continue
        if _shard_is_valid(table, split):
            continue
        rows = table.to_pylist()  # name every problem of this shard
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
