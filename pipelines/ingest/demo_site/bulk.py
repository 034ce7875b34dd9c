"""Write the demo site's raw store directly, without HTTP, for paper-scale benchmarks.

The normal ingest path crawls the demo site over HTTP and parses each page. At paper scale
(1,073,146 questions) the benchmark needs the same *result* without the crawl:
``lake/raw_questions/demo.parquet`` (``RAW_QUESTION_SCHEMA``, source ``demo``, source_key
``http://demo.localhost`` + path, sorted by source_key like ingest) and the images in the
content-addressed store ``images/<h[:2]>/<h>.<ext>``.

Image budget. The real site draws ~1.35 million distinct pictures at paper scale (~8 ms each).
With ``image_pool=N`` every drawing kind (clock, bars, shape, ...) gets at most N
representative drawings, taken from a strided sample of the site's own specs; a question's
image is the representative chosen by a hash of the spec's ``content_key``, drawn with the
spec's encoding variant. What this changes compared with the real site:

- many more questions share images (at most N distinct drawings per kind, times the variants);
- a picture no longer matches its question's answer (irrelevant to the offline stages);
- near-duplicate pictures stay near-duplicates (same content_key, same representative, the
  jpeg/resize variant re-encoded), exact copies stay exact;
- by chance, two questions with the same text and options can now share the same pictures and
  become duplicates (rare at N >= 1000 for the multi-image skills);
- the image stage hashes far fewer distinct files than a real crawl would.

``image_pool=0`` renders every image as the site does (exact, slow).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.store.images import sha256_hex
from pipelines.store.atomic import atomic_write_bytes
from pipelines.store.lake import write_table
from pipelines.store.records import RAW_QUESTION_SCHEMA, RawQuestion
from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig, render_image
from pipelines.ingest.demo_site.imagespec import ImageSpec

CANONICAL_BASE = "http://demo.localhost"
SAMPLE_QUESTIONS = 60_000


@dataclass(frozen=True)
class BulkResult:
    questions: int
    images_written: int
    pool_drawings: int
    raw_path: Path


def default_image_pool(questions: int) -> int:
    """Representatives per drawing kind: ~1 per 1,000 questions, between 50 and 1,000."""
    return max(50, min(1000, questions // 1000))


def _slot(content_key: str, size: int) -> int:
    return int.from_bytes(hashlib.blake2b(content_key.encode(), digest_size=8).digest(), "big") % size


def sample_pool(site: DemoSite, per_kind: int) -> dict[str, tuple[ImageSpec, ...]]:
    """Up to ``per_kind`` distinct plain drawings per kind from a strided sample of the site."""
    n = site.config.questions
    stride = max(1, n // SAMPLE_QUESTIONS)
    pool: dict[str, dict[str, ImageSpec]] = {}
    for i in range(0, n, stride):
        for spec in site.question(i).images:
            plain = spec.with_variant("") if spec.variant else spec
            bucket = pool.setdefault(plain.kind, {})
            if len(bucket) < per_kind:
                bucket.setdefault(plain.content_key, plain)
    return {kind: tuple(bucket[k] for k in sorted(bucket)) for kind, bucket in sorted(pool.items())}


class ImageWriter:
    """Renders (or picks from the pool) and stores images, memoizing their hashes."""

    def __init__(self, images_root: Path, pool: dict[str, tuple[ImageSpec, ...]] | None,
                 known: dict[tuple, str] | None = None):
        self.root = Path(images_root)
        self.pool = pool
        self.hash_of: dict[tuple, str] = dict(known or {})
        self.written = 0

    def representative(self, spec: ImageSpec) -> ImageSpec:
        if not self.pool:
            return spec
        reps = self.pool.get(spec.kind)
        if not reps:
            return spec
        rep = reps[_slot(spec.content_key, len(reps))]
        return rep.with_variant(spec.variant) if spec.variant else rep

    def store(self, spec: ImageSpec) -> str:
        target = self.representative(spec)
        memo = (target.kind, target.params, target.variant)
        cached = self.hash_of.get(memo)
        if cached is not None:
            return cached
        data = render_image(target)
        image_hash = sha256_hex(data)
        path = self.root / image_hash[:2] / f"{image_hash}.{target.extension}"
        if not path.exists():
            atomic_write_bytes(path, data, sweep=False, checksum=False)
            self.written += 1
        self.hash_of[memo] = image_hash
        return image_hash


def question_row(q, hash_image) -> dict:
    extra: dict = {"layout": q.layout}
    if q.problem_image is not None or q.choice_images is not None:
        alts = list(q.image_alts)
        problem_alt = alts.pop(0) if q.problem_image is not None else None
        extra["image_alts"] = {"problem": problem_alt, "choices": alts if q.choice_images is not None else None}
    return RawQuestion(
        source="demo",
        source_key=CANONICAL_BASE + q.path,
        subject=q.subject,
        grade=q.grade,
        skill=q.skill,
        problem=q.problem,
        problem_image=hash_image(q.problem_image) if q.problem_image is not None else None,
        choices=tuple(q.choices) if q.choices is not None else None,
        choice_images=tuple(hash_image(s) for s in q.choice_images) if q.choice_images is not None else None,
        answer_idx=int(q.answer_idx),
        extra=extra,
    ).to_row()


def _render_pool_chunk(args) -> tuple[dict[tuple, str], int]:
    images_root, specs = args
    writer = ImageWriter(images_root, None)
    for spec in specs:
        writer.store(spec)
    return writer.hash_of, writer.written


def _write_part(args) -> tuple[str, int]:
    config, start, stop, images_root, pool, known, part_path = args
    site = DemoSite(config)
    writer = ImageWriter(images_root, pool, known)
    rows = [question_row(site.question(i), writer.store) for i in range(start, stop) if site.is_present(i)]
    pq.write_table(pa.Table.from_pylist(rows, schema=RAW_QUESTION_SCHEMA), part_path, compression="zstd")
    return part_path, writer.written


def write_raw_store(
    root: Path | str,
    questions: int,
    *,
    seed: int = 0,
    image_pool: int | None = None,
    workers: int | None = None,
    chunk: int = 20_000,
) -> BulkResult:
    """Write ``root/lake/raw_questions/demo.parquet`` and ``root/images`` for a demo site of ``questions``.

    Same arguments give the same bytes, whatever ``workers`` is.
    """
    root = Path(root)
    if questions < 4:
        raise ValueError(f"the demo site needs at least 4 questions, got {questions}")
    config = SiteConfig(seed=seed, questions=questions)
    site = DemoSite(config)
    per_kind = default_image_pool(questions) if image_pool is None else image_pool
    workers = workers or os.cpu_count() or 1
    images_root = root / "images"
    pool = sample_pool(site, per_kind) if per_kind > 0 else None
    written = 0
    drawings = 0
    known: dict[tuple, str] = {}
    if pool:
        reps = [spec for kind in pool for spec in pool[kind]]
        drawings = len(reps)
        parts = [(images_root, reps[j::workers * 4]) for j in range(workers * 4)]
        with ProcessPoolExecutor(workers) as ex:
            for hashes, count in ex.map(_render_pool_chunk, parts):
                known.update(hashes)
                written += count
    tmp_dir = root / "lake" / "raw_questions" / ".bulk-parts"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    jobs = [
        (config, start, min(start + chunk, site.num_indices), images_root, pool, known, str(tmp_dir / f"part-{k:05d}.parquet"))
        for k, start in enumerate(range(0, site.num_indices, chunk))
    ]
    with ProcessPoolExecutor(workers) as ex:
        part_paths = []
        for path, count in ex.map(_write_part, jobs):
            part_paths.append(path)
            written += count
    table = pa.concat_tables([pq.read_table(p) for p in part_paths])
    table = table.take(pc.sort_indices(table, sort_keys=[("source_key", "ascending")]))
    raw_path = write_table(table, root / "lake" / "raw_questions" / "demo.parquet")
    for p in part_paths:
        os.unlink(p)
    tmp_dir.rmdir()
    return BulkResult(table.num_rows, written, drawings, raw_path)
