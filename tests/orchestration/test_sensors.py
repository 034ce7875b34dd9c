"""The source-change sensor: cursor handling, web sources by sitemap, file sources by content."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image

from pipelines.ingest.crawl import CrawlConfig, RawStore
from pipelines.ingest.crawl.probe import probe_site
from pipelines.ingest.demo_site.generator import SiteConfig
from pipelines.ingest.demo_site.server import start_site
from pipelines.store.images import ImageStore
from pipelines.ingest.changes import detect_source_changes
from pipelines.ingest.stage import crawl_web_source, land_source, raw_store_dir
from pipelines.orchestration.sensors import BUILD_JOB_NAME, build_source_change_sensor
from pipelines.settings import BuildSettings
from pipelines.ingest.spec import parse_source_spec

QUESTIONS = 200
CANONICAL = "http://demo.localhost/"


def _demo_settings(home: Path, revision: int = 0) -> BuildSettings:
    return BuildSettings(home=str(home), demo_questions=QUESTIONS, demo_revision=revision, models=("random",))


def _evaluate(sensor: dg.SensorDefinition, cursor: str | None = None, instance=None):
    context = dg.build_sensor_context(cursor=cursor, instance=instance)
    result = sensor.evaluate_tick(context)
    return result, context.cursor


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    """A home whose demo source was crawled (lastmod mode) and landed at revision 0."""
    home = tmp_path_factory.mktemp("sensor") / "home"
    settings = _demo_settings(home)
    spec = parse_source_spec("demo")
    crawl_web_source(spec, settings, settings.data_home, progress=False)
    land_source(spec, settings.data_home, ImageStore(settings.data_home.images))
    return home


def test_never_crawled_demo_requests_a_run(tmp_path):
    sensor = build_source_change_sensor(settings_factory=lambda: _demo_settings(tmp_path / "empty"))
    result, cursor = _evaluate(sensor)
    (request,) = result.run_requests
    assert request.run_key.startswith("sources-") and json.loads(cursor)["changed"] == ["demo"]
    assert request.tags["stemforge/changed_sources"] == "demo"
    assert request.run_config == {"execution": {"config": {"in_process": {}}}}  # one process holds the home lock


def test_unchanged_demo_gives_no_run_and_a_revision_gives_one(demo_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(demo_home, home)
    unchanged = build_source_change_sensor(settings_factory=lambda: _demo_settings(home))
    result, cursor = _evaluate(unchanged)
    assert result.run_requests == [] and "no source changed" in result.skip_message
    assert cursor is None

    revised = build_source_change_sensor(settings_factory=lambda: _demo_settings(home, revision=1))
    result, cursor = _evaluate(revised, cursor=None)
    (request,) = result.run_requests
    assert json.loads(cursor)["digest"].startswith(request.run_key.removeprefix("sources-"))
    # the same change seen again: no second run; the cursor stays
    again, cursor_after = _evaluate(revised, cursor=cursor)
    assert again.run_requests == [] and "already requested" in again.skip_message
    assert cursor_after == cursor
    # another change (revision 2) while the first is unbuilt: a new run, the cursor advances
    newer = build_source_change_sensor(settings_factory=lambda: _demo_settings(home, revision=2))
    result, advanced = _evaluate(newer, cursor=cursor)
    (request2,) = result.run_requests
    assert request2.run_key != request.run_key and advanced != cursor

    # crawled but not yet parsed into raw questions: still a change; once landed, quiet again
    settings = _demo_settings(home, revision=1)
    spec = parse_source_spec("demo")
    crawl_web_source(spec, settings, settings.data_home, progress=False)
    result, _ = _evaluate(revised)
    assert len(result.run_requests) == 1
    land_source(spec, settings.data_home, ImageStore(settings.data_home.images))
    result, _ = _evaluate(revised, cursor=cursor)
    assert result.run_requests == [] and "no source changed" in result.skip_message


def test_probe_downloads_no_page_bodies(demo_home, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(demo_home, home)
    store_dir = raw_store_dir(_demo_settings(home).data_home, parse_source_spec("demo"))
    with RawStore(store_dir) as store:
        index_before = store.digest()
    for revision, expect_change in ((0, False), (1, True)):
        with start_site(SiteConfig(seed=0, questions=QUESTIONS, revision=revision)) as site:
            probe = probe_site(CrawlConfig(base_url=site.base_url, canonical_base=CANONICAL), store_dir)
            paths = [url for _, url, _ in site.requests()]
        assert probe.changed is expect_change, probe.reasons
        assert paths and all(p == "/robots.txt" or p.startswith(("/sitemap.xml", "/sitemaps/")) for p in paths)
        assert probe.requests >= len(paths)  # the server logs a request just after answering it
    with RawStore(store_dir) as store:
        assert store.digest() == index_before  # the probe writes nothing


def test_demo_sources_can_be_left_out(demo_home):
    report = detect_source_changes(_demo_settings(demo_home, revision=1), include_demo=False)
    (source,) = report.sources
    assert source.changed is None and report.changed == []


def _png(color: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (20, 12), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_file_source_by_content_and_the_job_target(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "a.png").write_bytes(_png("red"))
    line = {"question": "Which color?", "options": ["red", "blue"], "answer": 0, "image": "img/a.png",
            "subject": "science", "grade": "grade 2", "skill": "colors"}
    data = folder / "q.jsonl"
    data.write_text(json.dumps(line) + "\n")
    home = tmp_path / "home"
    settings = BuildSettings(home=str(home), sources=(f"jsonl:{data}",))
    sensor = build_source_change_sensor(settings_factory=lambda: settings)
    assert sensor.job_name == BUILD_JOB_NAME

    first, cursor = _evaluate(sensor)
    assert len(first.run_requests) == 1  # never imported
    land_source(parse_source_spec(settings.sources[0]), settings.data_home, ImageStore(settings.data_home.images))
    quiet, _ = _evaluate(sensor, cursor=cursor)
    assert quiet.run_requests == []
    os.utime(data, ns=(5, 5))  # touched, same content
    assert _evaluate(sensor, cursor=cursor)[0].run_requests == []
    data.write_text(json.dumps(line) + "\n" + json.dumps({**line, "question": "And this one?"}) + "\n")
    changed, cursor2 = _evaluate(sensor, cursor=cursor)
    (request,) = changed.run_requests
    assert cursor2 != cursor and request.tags["stemforge/changed_sources"] == settings.sources[0]


def test_run_request_selects_every_source_partition(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    sensor = build_source_change_sensor(settings_factory=lambda: _demo_settings(tmp_path / "none"))
    result, _ = _evaluate(sensor, instance=instance)
    (request,) = result.run_requests
    assert request.tags["dagster/asset_partition_range_start"] == request.tags["dagster/asset_partition_range_end"]
    assert instance.get_dynamic_partitions("sources")


def test_sensor_registers_beside_the_build_job():
    from pipelines.orchestration.definitions import build_job

    sensor = build_source_change_sensor(build_job, name="watch_sources")
    defs = dg.Definitions(jobs=[build_job], sensors=[sensor])
    assert defs.get_sensor_def("watch_sources").job_name == BUILD_JOB_NAME
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
