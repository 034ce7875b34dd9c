"""Incremental rebuilds: stage memoization, per-source ingest, lastmod crawls, demo revisions."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from support.builds import home_instance
from pipelines.evaluation import stage as evaluation
from pipelines.store import memo as incremental
from pipelines.profiles import stage as profiling
from pipelines.clean import stage as clean_stage
from pipelines.dataset import stage as dataset_stage
from pipelines.ingest.crawl import CrawlConfig, RawStore, crawl
from pipelines.ingest.crawl.config import CrawlConfigError
from pipelines.ingest.demo_site.generator import SiteConfig
from pipelines.ingest.demo_site.server import start_site
from pipelines.ingest.demo_site.truth import revision_changes
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.ingest.stage import crawl_web_source, land_source, raw_store_dir
from pipelines.store.lake import read_lake, read_raw_questions, write_table
from pipelines.settings import BuildSettings
from pipelines.ingest.spec import parse_source_spec

CANONICAL = "http://demo.localhost/"
QUESTIONS = 200


# ---- the memo itself -----------------------------------------------------------------

def _home(tmp_path: Path) -> DataHome:
    home = DataHome(tmp_path / "home")
    home.lake.mkdir(parents=True)
    return home


def _counting_stage(home: DataHome, calls: list, settings: dict | None = None, version: str = "1"):
    source, target = home.lake / "in.parquet", home.lake / "out.parquet"

    def compute():
        calls.append(1)
        frame = pl.read_parquet(source).with_columns((pl.col("x") * 2).alias("y"))
        write_table(frame, target)
        return {"rows": frame.height}

    return incremental.memoized(home, "double", compute, inputs=[source], outputs=[target],
                                settings=settings, version=version)


def test_memo_skips_unchanged_and_redoes_on_content_settings_code_and_outputs(tmp_path):
    home = _home(tmp_path)
    write_table(pl.DataFrame({"x": [1, 2, 3]}), home.lake / "in.parquet")
    calls: list = []
    first = _counting_stage(home, calls)
    assert (first["skipped"], first["rows"], len(calls)) == (False, 3, 1)
    out = home.lake / "out.parquet"
    stamp = out.stat().st_mtime_ns
    again = _counting_stage(home, calls)
    assert (again["skipped"], again["rows"], len(calls)) == (True, 3, 1)
    assert out.stat().st_mtime_ns == stamp  # a skipped stage writes nothing

    # the same bytes written again (new inode and mtime): hashed, found equal, still skipped
    write_table(pl.DataFrame({"x": [1, 2, 3]}), home.lake / "in.parquet")
    assert _counting_stage(home, calls)["skipped"] and len(calls) == 1
    # other content
    write_table(pl.DataFrame({"x": [1, 2]}), home.lake / "in.parquet")
    changed = _counting_stage(home, calls)
    assert (changed["skipped"], changed["rows"], len(calls)) == (False, 2, 2)
    assert "input changed" in changed["rebuilt_because"]
    # settings, code version
    assert not _counting_stage(home, calls, settings={"k": 1})["skipped"]
    assert _counting_stage(home, calls, settings={"k": 1})["skipped"]
    assert not _counting_stage(home, calls, settings={"k": 1}, version="2")["skipped"]
    # an output removed or rewritten behind the stage's back
    out.unlink()
    assert not _counting_stage(home, calls, settings={"k": 1}, version="2")["skipped"]
    write_table(pl.DataFrame({"x": [0]}), out)
    assert not _counting_stage(home, calls, settings={"k": 1}, version="2")["skipped"]
    assert pl.read_parquet(out)["y"].to_list() == [2, 4]
    assert len(calls) == 6


def test_memo_failure_keeps_no_record(tmp_path):
    home = _home(tmp_path)
    write_table(pl.DataFrame({"x": [1]}), home.lake / "in.parquet")

    def boom():
        raise RuntimeError("stage failed")

    with pytest.raises(RuntimeError):
        incremental.memoized(home, "boom", boom, inputs=[home.lake / "in.parquet"])
    assert incremental.load_record(home, "boom") is None


# ---- crawling with revalidate='lastmod' against the demo site's revisions --------------

def _crawl(store_dir: Path, revision: int, mode: str = "lastmod"):
    config = SiteConfig(seed=0, questions=QUESTIONS, revision=revision)
    with start_site(config) as site:
        report = crawl(
            CrawlConfig(base_url=site.base_url, canonical_base=CANONICAL, rate_per_host=2000, revalidate=mode),
            store_dir,
        )
        return report, site.requests()


def _question_paths(requests) -> set[str]:
    from pipelines.ingest.demo_site.server import RE_IXL_Q, RE_PP_Q, RE_TP_Q

    return {url for _, url, _ in requests if any(r.match(url) for r in (RE_IXL_Q, RE_PP_Q, RE_TP_Q))}


def _image_question(path: str) -> int | None:
    from pipelines.ingest.demo_site.server import RE_IMG

    match = RE_IMG.match(path)
    return None if match is None else int(next(g for g in match.groups() if g is not None))


def test_revalidate_mode_is_validated():
    with pytest.raises(CrawlConfigError, match="revalidate"):
        CrawlConfig(base_url="http://127.0.0.1:1/", revalidate="sometimes")


@pytest.fixture(scope="module")
def crawled_twice(tmp_path_factory):
    store_dir = tmp_path_factory.mktemp("lastmod") / "raw"
    first, _ = _crawl(store_dir, 0)
    with RawStore(store_dir) as store:
        digest = store.content_digest()
        pages = {r.url: r.sha256 for r in store.records() if r.state == "stored" and not r.is_sitemap}
    again, requests = _crawl(store_dir, 0)
    return store_dir, first, again, requests, digest, pages


def test_no_change_pass_requests_only_robots_and_sitemaps(crawled_twice):
    store_dir, first, again, requests, digest, pages = crawled_twice
    assert first.complete and first.downloaded > 300
    assert again.complete and again.unchanged >= len(pages) - 5
    paths = [url for _, url, _ in requests]
    assert len(paths) <= 5, paths
    assert all(p == "/robots.txt" or "sitemap" in p for p in paths)
    with RawStore(store_dir) as store:
        assert store.content_digest() == digest
        # page bodies kept (sitemaps name the port the site was served on, so they differ)
        assert {r.url: r.sha256 for r in store.records() if r.state == "stored" and not r.is_sitemap} == pages


def test_revision_fetches_only_changed_question_pages(tmp_path, crawled_twice):
    import shutil

    store_dir = tmp_path / "raw"
    shutil.copytree(crawled_twice[0], store_dir)
    report, requests = _crawl(store_dir, 1)
    changes = revision_changes(SiteConfig(seed=0, questions=QUESTIONS, revision=1))
    changed = set(changes["added"]) | set(changes["edited"]) | set(changes["removed"])
    assert changed and changes["removed"] and changes["edited"]
    assert _question_paths(requests) == changed
    # no image of an unchanged question was requested again
    changed_indices = {int(p.rstrip("/").rsplit("/", 1)[1].removeprefix("question-").removesuffix(".html"))
                       for p in changed}
    requested_images = {_image_question(url) for _, url, _ in requests} - {None}
    assert requested_images and requested_images <= changed_indices
    with RawStore(store_dir) as store:
        states = store.url_states()
    for path in changes["removed"]:
        assert states[CANONICAL + path[1:]] == "gone"
    for path in changes["added"] + changes["edited"]:
        assert states[CANONICAL + path[1:]] == "stored"
    # the same revision again: nothing to fetch
    _, quiet = _crawl(store_dir, 1)
    assert len(quiet) <= 5


def test_revalidate_all_still_asks_for_every_page(tmp_path, crawled_twice):
    import shutil

    store_dir = tmp_path / "raw"
    shutil.copytree(crawled_twice[0], store_dir)
    report, requests = _crawl(store_dir, 0, mode="all")
    assert report.unchanged == 0 and report.not_modified > 300 and report.downloaded <= 5


# ---- the offline stages on a demo home -------------------------------------------------

def _settings(home: Path, **changes) -> BuildSettings:
    return BuildSettings(home=str(home), demo_questions=QUESTIONS, models=("random",), **changes)


def _offline(settings: BuildSettings) -> dict:
    """Every stage after ingest, in graph order (what the assets call)."""
    home = settings.data_home
    figures = {
        "filter": clean_stage.filter_stage(home),
        "image_index": clean_stage.image_index_stage(home),
        "dedup": clean_stage.dedup_stage(home, settings),
        "latex": clean_stage.latex_stage(home),
        "shuffle": dataset_stage.shuffle_stage(home, settings),
        "split": dataset_stage.split_stage(home, settings),
        "statistics": dataset_stage.statistics_figures(home),
        "export": dataset_stage.export_stage(home, settings),
        "predict": evaluation.predict_stage(home, settings, log=lambda _: None),
        "metrics": evaluation.metrics_stage(home, settings)[1],
        "tags": profiling.tag_stage(home, settings)[1],
        "profiles": profiling.profile_stage(home)[1],
        "report": profiling.report_figures(home, settings),
    }
    return figures


def _ingest(settings: BuildSettings) -> tuple[dict, bool]:
    home = settings.data_home
    spec = parse_source_spec("demo")
    crawl_report = crawl_web_source(spec, settings, home, progress=False)
    outcome = land_source(spec, home, ImageStore(home.images))
    return crawl_report, outcome.skipped


def _lake_stamps(home: DataHome) -> dict[str, int]:
    return {str(p.relative_to(home.root)): p.stat().st_mtime_ns
            for p in [*home.lake.rglob("*.parquet"), *home.export.parent.rglob("*")] if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A demo home built by the stage functions, then rebuilt through Dagster (``run_build``,
    as ``stemforge build`` does): the assets call the same memoized stages."""
    from pipelines.orchestration.run import run_build
    from pipelines.store.warehouse import publish_warehouse

    root = tmp_path_factory.mktemp("stages") / "home"
    settings = _settings(root)
    _, first_ingest_skipped = _ingest(settings)
    first = _offline(settings)
    assert not first_ingest_skipped and not any(f["skipped"] for f in first.values())
    publish_warehouse(settings.data_home)
    stamps = _lake_stamps(settings.data_home)
    with home_instance(settings.data_home):
        again = run_build(settings, progress=False)
        assert again.success, again.summary
        second = _materializations()
    return settings, first, second, stamps, again.summary


def _materializations() -> dict[str, dict]:
    """asset -> metadata values of the latest run's materializations."""
    import dagster as dg

    instance = dg.DagsterInstance.get()
    run = instance.get_runs(limit=1)[0]
    found = {}
    for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = entry.dagster_event.event_specific_data.materialization
        found[materialization.asset_key.to_user_string()] = {
            k: getattr(v, "value", getattr(v, "data", v)) for k, v in materialization.metadata.items()
        }
    return found


# the assets whose stage is memoized and reports ``skipped`` in its metadata
MEMOIZED_ASSETS = (
    "multimodal_questions", "image_index", "deduplicated_questions", "latex_questions", "shuffled_questions",
    "questions", "stem_export", "model_predictions", "evaluation_metrics", "question_tags", "cogme_profiles",
)


def test_no_change_rebuild_through_dagster_skips_every_stage(built):
    settings, first, second, stamps, summary = built
    assert {name for name in MEMOIZED_ASSETS if second[name].get("skipped") is not True} == set()
    assert second["warehouse"]["skipped_unchanged"] is True
    crawls = second["crawled_pages"]["crawls"]
    (crawl_report,) = crawls.values()
    assert crawl_report["requested"] <= 5 and crawl_report["downloaded"] <= 4  # robots.txt and sitemaps only
    assert _lake_stamps(settings.data_home) == stamps  # nothing in the lake or the export was rewritten
    assert second["report"]["skipped"] is True and second["dataset_statistics"]["skipped"] is True
    assert second["raw_questions"]["skipped"] is True
    # the summary says what was reused instead of repeating the full build summary
    assert summary.splitlines()[0].endswith(f"nothing changed, {len(second)} stages reused")
    assert "raw questions per source" not in summary


def test_no_change_stage_calls_skip_and_write_nothing(built):
    settings, *_ = built
    home = settings.data_home
    stamps = _lake_stamps(home)
    crawl_report, ingest_skipped = _ingest(settings)
    assert ingest_skipped and crawl_report["downloaded"] <= 4 and crawl_report["requested"] <= 5
    again = _offline(settings)
    assert {name for name, f in again.items() if not f["skipped"]} == set()
    assert _lake_stamps(home) == stamps


def test_changed_settings_recompute_that_stage_and_what_depends_on_it(built):
    settings, *_ = built
    home = settings.data_home
    fewer = settings.with_(rows_per_shard=40)
    export = dataset_stage.export_stage(home, fewer)
    assert not export["skipped"] and len(export["files"]) > 3
    assert dataset_stage.export_stage(home, fewer)["skipped"]
    assert clean_stage.dedup_stage(home, fewer)["skipped"]  # rows_per_shard does not concern dedup
    capped = settings.with_(cap_per_skill=1)
    dedup = clean_stage.dedup_stage(home, capped)
    assert not dedup["skipped"] and dedup["over_cap"] > 0
    assert not clean_stage.latex_stage(home)["skipped"]  # its input changed
    # back to the original settings: dedup and latex recompute the same bytes as before the
    # cap, so shuffle (never run on the capped questions) finds its input unchanged and stops there
    before = read_lake(home, "questions")
    assert not clean_stage.dedup_stage(home, settings)["skipped"]
    assert not clean_stage.latex_stage(home)["skipped"]
    assert dataset_stage.shuffle_stage(home, settings)["skipped"]
    assert dataset_stage.split_stage(home, settings)["skipped"]
    assert read_lake(home, "questions").equals(before)
    dataset_stage.export_stage(home, settings)


def test_models_are_memoized_one_by_one(built):
    settings, *_ = built
    home = settings.data_home
    two = settings.with_(models=("random", "longest-option"))
    figures = evaluation.predict_stage(home, two, log=lambda _: None)
    assert figures["skipped_models"] == ["random"] and not figures["skipped"]
    assert set(figures["models"]) == {"random", "longest-option"}
    metrics = evaluation.metrics_stage(home, two)[1]
    assert not metrics["skipped"] and metrics["models"] == ["longest-option", "random"]
    assert evaluation.metrics_stage(home, two)[1]["skipped"]
    # back to one model: its file stays, the other's goes, metrics follow
    figures = evaluation.predict_stage(home, settings, log=lambda _: None)
    assert figures["skipped"] and len(list((home.lake / "predictions").glob("run-*.parquet"))) == 1
    metrics = evaluation.metrics_stage(home, settings)[1]
    assert not metrics["skipped"] and metrics["models"] == ["random"]


def test_revision_reflects_additions_edits_removals_and_keeps_splits(built, tmp_path):
    import shutil

    settings, *_ = built
    root = tmp_path / "home"
    shutil.copytree(settings.data_home.root, root, symlinks=True)
    base = _settings(root)
    home = base.data_home
    before_raw = read_raw_questions(home)
    before_q = read_lake(home, "questions").select("question_id", "split")
    revised = base.with_(demo_revision=1)
    crawl_report, ingest_skipped = _ingest(revised)
    assert not ingest_skipped
    figures = _offline(revised)
    assert not figures["filter"]["skipped"]
    changes = revision_changes(SiteConfig(seed=0, questions=QUESTIONS, revision=1))
    raw = read_raw_questions(home)
    keys = set(raw["source_key"].to_list())
    assert {CANONICAL + p[1:] for p in changes["added"]} <= keys
    assert not ({CANONICAL + p[1:] for p in changes["removed"]} & keys)
    problem_before = dict(zip(before_raw["source_key"].to_list(), before_raw["problem"].to_list()))
    problem_after = dict(zip(raw["source_key"].to_list(), raw["problem"].to_list()))
    edited = [CANONICAL + p[1:] for p in changes["edited"]]
    assert any(problem_before[k] != problem_after[k] for k in edited)
    unchanged = keys - {CANONICAL + p[1:] for p in changes["added"] + changes["edited"]}
    assert all(problem_before[k] == problem_after[k] for k in unchanged)
    after_q = read_lake(home, "questions").select("question_id", "split")
    moved = before_q.join(after_q, on="question_id", suffix="_after").filter(pl.col("split") != pl.col("split_after"))
    assert moved.height == 0
    assert after_q.height != before_q.height or not after_q.equals(before_q)


# ---- per-source ingest for file sources ------------------------------------------------

def _png(color: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_removed_source_is_not_left_in_the_stages(tmp_path):
    from pipelines.ingest.stage import remove_stale_sources

    home = DataHome(tmp_path / "home")
    images = ImageStore(home.images)
    specs = []
    for name, color in (("a", "red"), ("b", "blue")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "i.png").write_bytes(_png(color))
        (folder / "q.jsonl").write_text(json.dumps(
            {"question": f"Color {name}?", "options": ["x", "y"], "answer": 1, "image": "i.png",
             "subject": "science", "grade": "grade 1", "skill": "colors"}) + "\n")
        specs.append(parse_source_spec(f"jsonl:{folder / 'q.jsonl'}"))
        land_source(specs[-1], home, images)
    assert clean_stage.filter_stage(home)["kept"] == 2
    assert clean_stage.filter_stage(home)["skipped"]
    remove_stale_sources(home, specs[:1])
    assert not incremental.record_path(home, f"ingest-{specs[1].slug}").exists()
    figures = clean_stage.filter_stage(home)
    assert not figures["skipped"] and figures["kept"] == 1


def test_file_source_reimported_only_when_a_file_changes(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "a.png").write_bytes(_png("red"))
    line = {"question": "Which color?", "options": ["red", "blue"], "answer": 0, "image": "img/a.png",
            "subject": "science", "grade": "grade 2", "skill": "colors"}
    data = folder / "q.jsonl"
    data.write_text(json.dumps(line) + "\n")
    home = DataHome(tmp_path / "home")
    spec = parse_source_spec(f"jsonl:{data}")
    images = ImageStore(home.images)
    assert not land_source(spec, home, images).skipped
    assert land_source(spec, home, images).skipped
    os.utime(data, ns=(1, 1))  # touched, same bytes: hashed and found equal
    assert land_source(spec, home, images).skipped
    (folder / "img" / "a.png").write_bytes(_png("green"))  # an image the source reads changed
    outcome = land_source(spec, home, images)
    assert not outcome.skipped
    data.write_text(json.dumps(line) + "\n" + json.dumps({**line, "question": "Which other color?"}) + "\n")
    assert land_source(spec, home, images).questions == 2
    raw_store = raw_store_dir(home, spec)
    assert not raw_store.exists()


# ---- lastmod rules on a small site whose answers the test controls ----------------------

def _sitemap(entries: dict[str, str]) -> str:
    items = "".join(f"<url><loc>/{path}</loc><lastmod>{day}</lastmod></url>" for path, day in entries.items())
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{items}</urlset>'


def _small_site(with_sitemap: bool = True):
    from support.loopback_site import html, page

    routes = {
        "/robots.txt": page("User-agent: *\nDisallow: /private/\n", "text/plain"),
        "/": page(html("home", ["/p/1", "/p/2", "/list"])),
        "/list": page(html("list", ["/p/1", "/p/2"])),
        "/p/1": page(html("one", images=["/img/a.png"])),
        "/p/2": page(html("two")),
        "/img/a.png": page(b"\x89PNG\r\n\x1a\n" + b"a" * 32, "image/png"),
    }
    if with_sitemap:
        routes["/sitemap.xml"] = page(_sitemap({"p/1": "2024-01-01", "p/2": "2024-01-01"}), "application/xml")
    return routes


def _pass(site, store_dir):
    site.log.clear()
    report = crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, revalidate="lastmod"), store_dir)
    return report, sorted(entry.path for entry in site.log)


def test_lastmod_rules_for_dropped_pages_listings_and_images(tmp_path):
    from support.loopback_site import Site, html, page, status

    store_dir = tmp_path / "raw"
    with Site(_small_site()) as site:
        _pass(site, store_dir)
        report, paths = _pass(site, store_dir)
        assert paths == ["/robots.txt", "/sitemap.xml"] and report.unchanged == 5
        # /p/1 edited (new lastmod), /p/2 dropped from the sitemap and gone
        site.routes["/sitemap.xml"] = page(_sitemap({"p/1": "2024-02-01"}), "application/xml")
        site.routes["/p/1"] = page(html("one, edited", images=["/img/a.png"]))
        site.routes["/p/2"] = status(404)
        report, paths = _pass(site, store_dir)
        # pages the sitemap does not list (home, listing) are revalidated because it changed;
        # the image is immutable content and is not asked for again
        assert paths == ["/", "/list", "/p/1", "/p/2", "/robots.txt", "/sitemap.xml"]
        with RawStore(store_dir) as store:
            states = store.url_states()
            assert b"one, edited" in store.get_body(site.base_url + "p/1")
        assert states[site.base_url + "p/2"] == "gone" and report.gone == 1
        # a robots.txt with other rules: everything is revalidated
        site.routes["/robots.txt"] = page("User-agent: *\nDisallow: /other/\n", "text/plain")
        report, paths = _pass(site, store_dir)
        assert report.unchanged == 0 and "/img/a.png" in paths and "/p/1" in paths


def test_lastmod_without_a_sitemap_revalidates_everything(tmp_path):
    from support.loopback_site import Site

    store_dir = tmp_path / "raw"
    with Site(_small_site(with_sitemap=False)) as site:
        _pass(site, store_dir)
        report, paths = _pass(site, store_dir)
    assert report.unchanged == 0 and {"/", "/list", "/p/1", "/p/2", "/img/a.png"} <= set(paths)
    assert report.not_modified >= 5
