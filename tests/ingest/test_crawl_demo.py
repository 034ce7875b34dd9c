"""The crawler against the real demo quiz site on loopback, with its faults on."""

from __future__ import annotations

import pytest

from pipelines.ingest.crawl import CrawlConfig, RawStore, crawl
from pipelines.ingest.demo_site.generator import SiteConfig
from pipelines.ingest.demo_site.server import start_site
from pipelines.ingest.demo_site.truth import CANONICAL_BASE, iter_truth

SITE = SiteConfig(seed=0, questions=150, faults=True)


@pytest.fixture(scope="module")
def demo_crawl(tmp_path_factory):
    store_dir = tmp_path_factory.mktemp("demo") / "raw"
    with start_site(SITE, port=0) as site:
        config = CrawlConfig(base_url=site.base_url, canonical_base=CANONICAL_BASE, rate_per_host=1000.0,
                             concurrency=8, timeout=5.0, backoff_base=0.05)
        first = crawl(config, store_dir)
        served_first = len(site.requests())
        second = crawl(config, store_dir)
        yield {
            "store_dir": store_dir,
            "first": first,
            "second": second,
            "second_requests": site.requests()[served_first:],
            "disallowed": site.disallowed_requests(),
        }


def truth():
    records = list(iter_truth(SITE))
    return records[0], records[1:]


def test_faulty_crawl_loses_no_question(demo_crawl):
    site, questions = truth()
    urls = {CANONICAL_BASE + q["url"].lstrip("/") for q in questions}
    with RawStore(demo_crawl["store_dir"]) as store:
        states = store.url_states()
        failures = dict(store.failures())
    assert {states.get(url) for url in urls} <= {"stored", "failed"}
    looping = {CANONICAL_BASE + path.lstrip("/") for path in site["permanent_faults"]["redirect_loop"]}
    assert looping and all(failures[url] == "redirect loop" for url in looping)
    assert {url for url in urls if states[url] == "failed"} == looping
    assert demo_crawl["first"].complete and demo_crawl["first"].stored > len(urls)  # pages, listings and images


def test_disallowed_pages_are_never_requested(demo_crawl):
    assert demo_crawl["disallowed"] == []
    assert demo_crawl["first"].skipped_robots > 0


def test_all_keys_are_canonical(demo_crawl):
    with RawStore(demo_crawl["store_dir"]) as store:
        assert all(url.startswith(CANONICAL_BASE) for url in store.url_states())
        assert any("/q/" in url for url, _ in store.iter_pages())
        assert store.sitemap_lastmods()


def test_second_crawl_downloads_no_page_bodies(demo_crawl):
    second = demo_crawl["second"]
    assert second.complete and second.downloaded == 0
    assert second.not_modified == demo_crawl["first"].stored
    assert not [r for r in demo_crawl["second_requests"] if r[2] == 200]
