"""Picture verdicts kept on disk as they are computed: a killed dedup resumes from them, a change
to anything but the verdict's code keeps them, a damaged part costs only its own pairs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import polars as pl
import pytest

from pipelines.clean.dedup.image_match import VERDICT_SCHEMA
from pipelines.clean.dedup.verdict_store import VerdictStore, verdict_generation

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import hard_cases as hc  # noqa: E402


def _verdicts(*pairs: tuple[str, str, bool]) -> pl.DataFrame:
    return pl.DataFrame([(a, b, same, "copy" if same else "added-ink", "{}") for a, b, same in pairs],
                        schema=VERDICT_SCHEMA, orient="row")


# ---- the store -----------------------------------------------------------------------------------

def test_parts_add_up_and_compact_to_one(tmp_path):
    store = VerdictStore(tmp_path / "verdicts", generation="g1")
    assert store.load() == (None, "")
    store.append(_verdicts(("a", "b", True)))
    store.append(_verdicts(("a", "c", False), ("a", "b", True)))
    store.append(_verdicts())  # nothing new: no part
    found, why = store.load()
    assert why == "" and sorted(found.rows()) == sorted(_verdicts(("a", "b", True), ("a", "c", False)).rows())
    assert len(list((tmp_path / "verdicts").glob("*.parquet"))) == 2
    store.compact(_verdicts(("a", "c", False)))
    assert [p.name for p in (tmp_path / "verdicts").glob("*.parquet")] == ["g1-000000.parquet"]
    assert store.load()[0].rows() == _verdicts(("a", "c", False)).rows()
    store.append(_verdicts(("b", "c", True)))  # numbered after the compacted part
    assert store.load()[0].height == 2


def test_another_generation_is_never_read_and_is_removed_at_the_end(tmp_path):
    old = VerdictStore(tmp_path, generation="old")
    old.append(_verdicts(("a", "b", True)))
    new = VerdictStore(tmp_path, generation="new")
    assert new.load() == (None, "")
    new.compact(_verdicts(("a", "b", False)))
    assert [p.name for p in tmp_path.glob("*.parquet")] == ["new-000000.parquet"]
    assert not list(tmp_path.glob("old-*"))  # its checksum too


def test_an_unreadable_part_is_skipped_and_named(tmp_path):
    store = VerdictStore(tmp_path, generation="g")
    store.append(_verdicts(("a", "b", True)))
    store.append(_verdicts(("c", "d", True)))
    (tmp_path / "g-000002.parquet").write_bytes(b"PAR1 damaged")
    found, why = store.load()
    assert found.rows() == _verdicts(("a", "b", True)).rows()
    assert why == "unreadable verdict part(s) skipped: g-000002.parquet"


def test_the_generation_names_the_verdicts_code():
    assert verdict_generation() == verdict_generation() and len(verdict_generation()) == 16


# ---- the dedup stage -----------------------------------------------------------------------------

def _landed(root: Path):
    """A data home with real figures' re-scans and labelled copies under one text each, through
    the image index (``hard_cases``' real stages)."""
    from pipelines.clean.stage import filter_stage, image_index_stage
    from pipelines.ingest.spec import parse_source_spec
    from pipelines.ingest.stage import land_source
    from pipelines.settings import BuildSettings
    from pipelines.store.home import DataHome
    from pipelines.store.images import ImageStore

    module = hc._canonical()
    spec = parse_source_spec(f"python:{module.__name__}:records?kinds=rescan,added_label&n=3&seed=0&block=1")
    home = DataHome(root.resolve())
    saved = os.environ.get(hc.PYTHON_SOURCES_ENV)
    os.environ[hc.PYTHON_SOURCES_ENV] = module.__name__
    try:
        land_source(spec, home, ImageStore(home.images))
    finally:
        if saved is None:
            os.environ.pop(hc.PYTHON_SOURCES_ENV, None)
        else:
            os.environ[hc.PYTHON_SOURCES_ENV] = saved
    filter_stage(home)
    image_index_stage(home)
    return home, BuildSettings(home=str(home.root), sources=(spec.text,), seed=0)


def _outputs(home) -> dict[str, bytes]:
    from pipelines.store.lake import lake

    return {name: lake(home, name).read_bytes() for name in ("deduplicated", "duplicates")}


def test_a_killed_dedup_resumes_from_the_verdicts_it_kept(tmp_path, monkeypatch):
    from pipelines.clean import stage
    from pipelines.clean.dedup import dedup, image_match

    monkeypatch.setattr(image_match, "worker_count", lambda *a, **k: 1)  # verdicts in this process
    monkeypatch.setattr(dedup, "CONFIRM_PART", 1)  # judged in many parts, each kept as it ends
    whole, settings = _landed(tmp_path / "whole")
    figures = stage.dedup_stage(whole, settings)
    total = figures["picture_verdicts_computed"]
    assert total >= 6 and figures["picture_verdicts"] == total

    killed, settings = _landed(tmp_path / "killed")
    plain = image_match.ImageMatcher._compute_verdict
    calls = []

    def dies_after_four(self, a, b):
        if len(calls) == 4:
            raise KeyboardInterrupt  # the operator's ^C
        calls.append((a, b))
        return plain(self, a, b)

    monkeypatch.setattr(image_match.ImageMatcher, "_compute_verdict", dies_after_four)
    with pytest.raises(KeyboardInterrupt):
        stage.dedup_stage(killed, settings)
    kept, _ = VerdictStore(killed.lake / "state" / "verdicts").load()
    assert 1 <= kept.height <= 4  # the parts that ended before the kill

    monkeypatch.setattr(image_match.ImageMatcher, "_compute_verdict", plain)
    resumed = stage.dedup_stage(killed, settings)
    assert resumed["picture_verdicts_computed"] == total - kept.height
    assert _outputs(killed) == _outputs(whole)


def test_verdicts_outlive_a_change_of_dedup_settings_and_state(tmp_path, monkeypatch):
    from dataclasses import replace

    from pipelines.clean import stage

    home, settings = _landed(tmp_path / "home")
    first = stage.dedup_stage(home, settings)
    assert first["picture_verdicts_computed"] >= 6
    # the dedup state is for other settings now: groups are computed again, verdicts are not
    again = stage.dedup_stage(home, replace(settings, cap_per_skill=1000))
    assert again["reuse_refused"] and again["picture_verdicts_computed"] == 0
    assert again["picture_verdicts"] == first["picture_verdicts"]


def test_another_library_version_is_another_generation(monkeypatch):
    from pipelines.clean.dedup import verdict_store

    before = verdict_generation()
    monkeypatch.setattr(verdict_store, "_version", lambda name: "9.9" if name == "opencv-python-headless" else "")
    assert verdict_generation() != before
