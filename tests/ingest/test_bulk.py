"""The bulk raw-store writer used by the paper-scale benchmark."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipelines.ingest.demo_site.bulk import CANONICAL_BASE, ImageWriter, sample_pool, write_raw_store
from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig
from pipelines.store.images import inspect_image
from pipelines.store.records import RAW_QUESTION_SCHEMA

N = 300


@pytest.fixture(scope="module")
def pooled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bulk-pooled")
    write_raw_store(root, N, image_pool=5, workers=2, chunk=120)
    return root


def _digest(root: Path) -> str:
    h = hashlib.sha256((root / "lake" / "raw_questions" / "demo.parquet").read_bytes())
    for p in sorted((root / "images").rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_schema_and_rows_match_the_site(pooled):
    path = pooled / "lake" / "raw_questions" / "demo.parquet"
    assert pq.read_schema(path).remove_metadata() == RAW_QUESTION_SCHEMA
    raw = pl.read_parquet(path)
    assert raw.height == N
    assert raw["source_key"].to_list() == sorted(raw["source_key"].to_list())
    assert raw["source_key"].is_unique().all()
    site = DemoSite(SiteConfig(0, questions=N))
    by_key = {CANONICAL_BASE + site.question(i).path: site.question(i) for i in range(N)}
    for row in raw.iter_rows(named=True):
        q = by_key[row["source_key"]]
        assert row["source"] == "demo"
        assert (row["subject"], row["grade"], row["skill"], row["problem"], row["answer_idx"]) == (
            q.subject, q.grade, q.skill, q.problem, q.answer_idx)
        assert row["choices"] == (list(q.choices) if q.choices is not None else None)
        assert (row["choice_images"] is None) == (q.choice_images is None)
        assert (row["problem_image"] is None) == (q.problem_image is None)
        extra = json.loads(row["extra"])
        assert extra["layout"] == q.layout
    # text-only questions are in the raw store (the filter stage drops them, not the writer)
    assert raw.filter(pl.col("problem_image").is_null() & pl.col("choice_images").is_null()).height >= 1


def test_every_referenced_image_is_a_valid_stored_image(pooled):
    raw = pl.read_parquet(pooled / "lake" / "raw_questions" / "demo.parquet")
    refs = set(raw["problem_image"].drop_nulls().to_list()) | set(raw["choice_images"].explode().drop_nulls().to_list())
    assert refs
    for h in refs:
        files = list((pooled / "images" / h[:2]).glob(f"{h}.*"))
        assert len(files) == 1, h
        info = inspect_image(files[0].read_bytes())
        assert info.image_hash == h and files[0].suffix == f".{info.format}"


def test_same_arguments_give_the_same_bytes_whatever_the_workers(pooled, tmp_path):
    write_raw_store(tmp_path, N, image_pool=5, workers=1, chunk=1000)
    assert _digest(tmp_path) == _digest(pooled)


def test_pool_keeps_exact_and_near_copies_of_pictures_related():
    site = DemoSite(SiteConfig(0, questions=2000))
    pool = sample_pool(site, 3)
    assert pool and all(1 <= len(v) <= 3 for v in pool.values())
    writer = ImageWriter(Path("/nonexistent"), pool)
    copies = [q for q in (site.question(i) for i in range(2000)) if q.role in ("exact", "near") and q.images]
    assert copies
    for q in copies:
        original = site.question(q.dup_of)
        for a, b in zip(q.images, original.images):
            ra, rb = writer.representative(a), writer.representative(b)
            if a.content_key == b.content_key:
                assert (ra.kind, ra.params) == (rb.kind, rb.params)  # same drawing
                assert ra.variant == a.variant  # the copy keeps its re-encoding


def test_rejects_too_small_sites(tmp_path):
    with pytest.raises(ValueError, match="at least 4"):
        write_raw_store(tmp_path, 3)
