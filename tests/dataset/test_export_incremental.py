"""Incremental export and dedup on a demo home: shards whose content did not change are kept
(the same file), and a rebuild after a site revision writes the bytes a fresh build writes."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from pipelines.clean import stage as clean_stage
from pipelines.dataset import stage as dataset_stage
from pipelines.dataset.export import ExportRefused, check_release_invariants, shard_bounds, write_stem_export
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import crawl_web_source, land_source
from pipelines.settings import BuildSettings
from pipelines.store.images import ImageStore
from pipelines.store.lake import read_lake


def _png(rng) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def _questions(store: ImageStore, n: int, edited: tuple[int, ...] = ()) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for i in range(n):
        image = store.put(_png(rng)).image_hash
        text = f"Question {i}: what is shown?" + (" (edited)" if i in edited else "")
        rows.append({
            "question_id": hashlib.sha256(text.encode()).hexdigest()[:16], "source": "demo",
            "source_key": f"http://demo.localhost/q/{i}", "subject": "math",
            "grade": "grade-3", "skill": "shapes", "problem": text, "problem_image": image,
            "choices": ["a", "b", "c"], "choice_images": None, "answer_idx": i % 3,
            "split": ("train", "train", "valid", "test")[i % 4],
        })
    return pl.DataFrame(rows)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_unchanged_shards_are_kept_and_the_export_equals_a_fresh_one(tmp_path):
    store = ImageStore(tmp_path / "images")
    root = tmp_path / "export" / "stem"
    first = write_stem_export(_questions(store, 120), store, root, rows_per_shard=4)
    assert first.shards_kept == 0 and first.shards_written == len(first.files)
    inode = {p.name: p.stat().st_ino for p in first.files}
    edited = _questions(store, 120, edited=(7,))
    second = write_stem_export(edited, store, root, rows_per_shard=4, previous_shards=first.shards,
                               validate=check_release_invariants)
    assert second.shards_kept > 0 and second.shards_written >= 1
    fresh = write_stem_export(edited, store, tmp_path / "fresh" / "stem", rows_per_shard=4)
    assert _files(root) == _files(tmp_path / "fresh" / "stem")
    same_file = [p.name for p in second.files if inode.get(p.name) == p.stat().st_ino]
    assert len(same_file) == second.shards_kept
    def names(shards):
        return {k: (v["name"], v["sha256"]) for k, v in shards.items()}

    assert names(fresh.shards) == names(second.shards)


def test_a_question_added_or_removed_rewrites_only_the_shard_it_falls_in(tmp_path):
    store = ImageStore(tmp_path / "images")
    root = tmp_path / "export" / "stem"
    every = _questions(store, 401)
    base = every.head(400)
    first = write_stem_export(base, store, root, rows_per_shard=8)
    assert len(first.files) > 40
    for changed in (every, base.filter(pl.col("question_id") != base["question_id"][123])):
        again = write_stem_export(changed, store, root, rows_per_shard=8, previous_shards=first.shards)
        # cut by position, every shard after the change would hold other rows and be written again
        assert 1 <= again.shards_written <= 2 and again.shards_kept == len(again.files) - again.shards_written
        fresh = tmp_path / "fresh" / "stem"
        write_stem_export(changed, store, fresh, rows_per_shard=8)
        assert _files(root) == _files(fresh)
        shutil.rmtree(fresh)
        first = write_stem_export(base, store, root, rows_per_shard=8, previous_shards=again.shards)


def test_shards_are_cut_by_content_within_half_and_twice_the_size_asked():
    ids = pl.Series(sorted(hashlib.sha256(str(i).encode()).hexdigest()[:16] for i in range(20_000)))
    bounds = shard_bounds(ids, 100)
    assert [start for start, _ in bounds] == [0] + list(np.cumsum([n for _, n in bounds])[:-1])
    assert sum(n for _, n in bounds) == 20_000
    assert all(50 <= n <= 200 for _, n in bounds)
    assert 100 <= 20_000 / len(bounds) <= 140
    assert shard_bounds(ids.head(30), 100) == [(0, 30)]
    assert shard_bounds(ids.clear(), 100) == [(0, 0)]
    # the cuts are where the ids say: the shards of a split without its first thousand questions
    # start where those of the whole split start, but for the first two or so
    starts = {ids[start] for start, _ in bounds}
    later = [ids[1000 + start] for start, _ in shard_bounds(ids.gather(np.arange(1000, 20_000)), 100)]
    assert len(set(later) - starts) <= 3


def test_a_published_shard_changed_by_hand_is_written_again(tmp_path):
    store = ImageStore(tmp_path / "images")
    root = tmp_path / "export" / "stem"
    first = write_stem_export(_questions(store, 40), store, root, rows_per_shard=5)
    victim = first.files[0]
    victim.write_bytes(victim.read_bytes() + b"x")
    again = write_stem_export(_questions(store, 40), store, root, rows_per_shard=5, previous_shards=first.shards)
    assert again.shards_written == 1 and again.shards_kept == len(first.files) - 1
    fresh = write_stem_export(_questions(store, 40), store, tmp_path / "fresh" / "stem", rows_per_shard=5)
    assert _files(root / "data") == _files(tmp_path / "fresh" / "stem" / "data")


def test_pictures_converted_once_are_kept_and_give_the_same_bytes(tmp_path):
    store = ImageStore(tmp_path / "images")
    rng = np.random.default_rng(9)
    jpeg = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(jpeg, format="JPEG")
    frame = _questions(store, 12).with_columns(pl.lit(store.put(jpeg.getvalue()).image_hash).alias("problem_image"))
    plain = write_stem_export(frame, store, tmp_path / "plain" / "stem", rows_per_shard=5)
    cache = tmp_path / "conversions"
    for attempt in range(2):
        cached = write_stem_export(frame, store, tmp_path / f"cached{attempt}" / "stem", rows_per_shard=5,
                                   conversions=cache)
        assert [p.read_bytes() for p in cached.files] == [p.read_bytes() for p in plain.files]
    assert len(list(cache.rglob("*.png"))) == 1


def test_a_shard_breaking_the_invariants_is_read_back_and_named(tmp_path):
    store = ImageStore(tmp_path / "images")
    frame = _questions(store, 12).with_columns(
        pl.when(pl.col("problem").str.starts_with("Question 4:")).then(7).otherwise(pl.col("answer_idx"))
        .alias("answer_idx"))
    with pytest.raises(ExportRefused, match=r"1 problem\(s\), first: train-00000-of-00001.parquet row 0: answer_idx 7 out of range"):
        write_stem_export(frame, store, tmp_path / "export" / "stem", rows_per_shard=5,
                          validate=check_release_invariants)
    assert not (tmp_path / "export" / "stem").exists()


# ---- a demo home: revision 0, then revision 1, against a fresh build of revision 1 ---------

QUESTIONS = 150
ROWS_PER_SHARD = 8
DEDUP_TABLES = ("deduplicated.parquet", "duplicates.parquet", "quarantine/dedup.parquet", "quarantine/cap.parquet")


def _build(settings: BuildSettings) -> dict:
    home = settings.data_home
    spec = parse_source_spec("demo")
    crawl_web_source(spec, settings, home, progress=False)
    land_source(spec, home, ImageStore(home.images))
    return {
        "filter": clean_stage.filter_stage(home),
        "image_index": clean_stage.image_index_stage(home),
        "dedup": clean_stage.dedup_stage(home, settings),
        "latex": clean_stage.latex_stage(home),
        "shuffle": dataset_stage.shuffle_stage(home, settings),
        "split": dataset_stage.split_stage(home, settings),
        "export": dataset_stage.export_stage(home, settings),
    }


@pytest.fixture(scope="module")
def revised(tmp_path_factory):
    base = tmp_path_factory.mktemp("incremental")
    settings = BuildSettings(home=str(base / "home"), demo_questions=QUESTIONS, models=("random",),
                             rows_per_shard=ROWS_PER_SHARD)
    _build(settings)
    again = _build(settings.with_(demo_revision=1))
    fresh = BuildSettings(home=str(base / "fresh"), demo_questions=QUESTIONS, models=("random",), demo_revision=1)
    _build(fresh)
    return settings.with_(demo_revision=1), again, fresh


def test_revision_rebuild_reuses_and_equals_a_fresh_build(revised, tmp_path):
    settings, figures, fresh = revised
    dedup = figures["dedup"]
    assert not dedup["skipped"] and "reuse_refused" not in dedup
    assert dedup["groups_computed"] < dedup["input"]
    for name in DEDUP_TABLES:
        assert (settings.data_home.lake / name).read_bytes() == (fresh.data_home.lake / name).read_bytes(), name
    # the split ledger keeps a revised home's splits (unlike a fresh build's), so the export is
    # compared with a fresh export of the same questions
    questions = read_lake(settings.data_home, "questions")
    theirs = tmp_path / "fresh" / "stem"
    write_stem_export(questions, ImageStore(settings.data_home.images), theirs, rows_per_shard=ROWS_PER_SHARD)
    ours = settings.data_home.export.parent
    assert figures["export"]["shards_written"] + figures["export"]["shards_kept"] == len(list((theirs / "data").glob("*.parquet")))
    assert figures["export"]["shards_kept"] > 0
    for path in sorted(theirs.rglob("*")):
        if path.is_file() and path.name not in ("README.md", "checksums.sha256"):  # the card: no build facts here
            assert (ours / path.relative_to(theirs)).read_bytes() == path.read_bytes(), path.name

    def without_card(manifest: Path) -> list[str]:
        return [line for line in manifest.read_text().splitlines() if not line.endswith("README.md")]

    assert without_card(ours / "checksums.sha256") == without_card(theirs / "checksums.sha256")


def test_changed_dedup_settings_recompute_from_scratch(revised, tmp_path):
    settings, *_ = revised
    root = tmp_path / "home"
    shutil.copytree(settings.data_home.root, root, symlinks=True)
    capped = settings.with_(home=str(root), cap_per_skill=3)
    figures = clean_stage.dedup_stage(capped.data_home, capped)
    assert not figures["skipped"] and figures["reuse_refused"] == "settings, code or library versions changed"
    assert figures["groups_computed"] > 0
    again = clean_stage.dedup_stage(capped.data_home, capped)
    assert again["skipped"]
