"""Crawler tests against real HTTP servers on 127.0.0.1 (written here, no mocks)."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.ingest.crawl import (
    CrawlConfig,
    CrawlConfigError,
    CrawlReport,
    RawStore,
    RawStoreError,
    crawl,
    parse_retry_after,
)
from pipelines.ingest.crawl.links import UrlMapper, extract_links, maybe_gunzip, normalize_url, parse_sitemap
from pipelines.ingest.crawl.ratelimit import HostRateLimiter
from pipelines.ingest.crawl.robots import RobotsRules

REPO = Path(__file__).resolve().parents[2]

from support.loopback_site import Reply, Route, Site, html, page, redirect, sequence, status  # noqa: E402


def chain_site(pages: int) -> dict[str, Route]:
    """``pages`` pages (no port in any body, so copies on other ports are identical)."""
    routes: dict[str, Route] = {
        "/": page(html("home", [f"/p/{i}" for i in range(0, pages, 10)])),
        "/robots.txt": page("User-agent: *\nDisallow: /hidden/\n", "text/plain"),
    }
    for i in range(pages):
        links = [f"/p/{j}" for j in (i + 1, i + 2, (i * 7) % pages) if j < pages] + [f"/hidden/{i}"]
        routes[f"/p/{i}"] = page(html(f"page {i}", links, [f"/img/{i % 5}.png"]))
    for k in range(5):
        routes[f"/img/{k}.png"] = page(b"\x89PNG\r\n\x1a\n" + bytes([k]) * 64, "image/png", etag=False)
    return routes


# --- one crawl of a site with every kind of trouble ---------------------------------------------
CANON = "http://quiz.test/"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40


def trouble_routes(base: str) -> dict[str, Route]:
    return {
        "/": page(html(
            "home",
            ["/p/1", "/p/1#top", "/p/2", "/private/secret", "/private/", "http://other.example/x", "mailto:a@b.c",
             "javascript:void(0)", "/flaky", "/always500", "/limited", "/loop/a", "/evil", "/moved", "/huge",
             "/huge-chunked", "/to-private", CANON + "canon-link", base + "absolute", "#top"],
            ["/img/a.png"],
            extra='<link rel="next" href="/list?page=2"><link rel="stylesheet" href="/style.css">'
                  '<!-- <a href="/commented-out">x</a> --><script>var s = "<a href=/in-script>";</script>',
        )),
        "/robots.txt": page(
            "User-agent: *\nDisallow: /private/\n\n"
            "User-agent: stemforge-crawler\nUser-agent: otherbot\nDisallow: /private/\nDisallow: /*.pdf$\n\n"
            f"Sitemap: {base}sitemap.xml\n",
            "text/plain",
        ),
        "/sitemap.xml": page(
            '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{base}sitemap-pages.xml</loc><lastmod>2024-03-01</lastmod></sitemap></sitemapindex>",
            "application/xml",
        ),
        "/sitemap-pages.xml": page(
            '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{base}from-sitemap/1</loc><lastmod>2024-02-03</lastmod></url>"
            f"<url><loc>{base}p/2</loc><lastmod>2024-01-01T10:00:00+00:00</lastmod></url></urlset>",
            "application/xml",
        ),
        "/p/1": page(html("one", ["/", "/p/2", "/doc.pdf"])),
        "/p/2": page(html("two", ["/p/1"])),
        "/list?page=2": page(html("list 2", ["/p/1"])),
        "/from-sitemap/1": page(html("from the sitemap")),
        "/canon-link": page(html("canonical link")),
        "/absolute": page(html("absolute link")),
        "/img/a.png": page(PNG, "image/png", etag=False),
        "/flaky": sequence(status(503), status(502), page(html("flaky"))),
        "/always500": status(500),
        "/limited": sequence(status(429, **{"Retry-After": "1"}), page(html("limited"))),
        "/loop/a": redirect("/loop/b"),
        "/loop/b": redirect("/loop/a"),
        "/evil": redirect("http://evil.example/steal"),
        "/moved": redirect(base + "p/2", 301),
        "/huge": lambda site, request: Reply(200, b"x" * (300 * 1024), {"Content-Type": "text/html"}),
        "/huge-chunked": lambda site, request: Reply(200, headers={"Content-Type": "text/html"}, chunked_size=1024 * 1024),
        "/to-private": redirect("/private/x"),
    }


def trouble_config(site: Site, **overrides) -> CrawlConfig:
    settings = dict(
        base_url=site.base_url, canonical_base=CANON, rate_per_host=500.0, concurrency=4, timeout=5.0,
        max_retries=3, backoff_base=0.01, backoff_cap=0.05, max_body_bytes=256 * 1024,
    )
    settings.update(overrides)
    return CrawlConfig(**settings)


@dataclass
class TroubleCrawl:
    site: Site
    store_dir: Path
    first: CrawlReport
    first_log_size: int
    second: CrawlReport
    states_after_first: dict[str, str]


@pytest.fixture(scope="module")
def trouble(tmp_path_factory) -> TroubleCrawl:
    store_dir = tmp_path_factory.mktemp("trouble") / "raw"
    with Site({}) as site:
        site.routes.update(trouble_routes(site.base_url))
        first = crawl(trouble_config(site), store_dir)
        with RawStore(store_dir) as store:
            states = store.url_states()
        first_log_size = len(site.log)
        second = crawl(trouble_config(site), store_dir)
        yield TroubleCrawl(site, store_dir, first, first_log_size, second, states)


EXPECTED_STATES = {
    CANON: "stored",
    CANON + "p/1": "stored",
    CANON + "p/2": "stored",
    CANON + "list?page=2": "stored",
    CANON + "from-sitemap/1": "stored",
    CANON + "canon-link": "stored",
    CANON + "absolute": "stored",
    CANON + "img/a.png": "stored",
    CANON + "flaky": "stored",
    CANON + "limited": "stored",
    CANON + "moved": "stored",
    CANON + "sitemap.xml": "stored",
    CANON + "sitemap-pages.xml": "stored",
    CANON + "always500": "failed",
    CANON + "loop/a": "failed",
    CANON + "evil": "failed",
    CANON + "huge": "failed",
    CANON + "huge-chunked": "failed",
    CANON + "to-private": "failed",
    CANON + "private/secret": "skipped_robots",
    CANON + "private/": "skipped_robots",
    CANON + "doc.pdf": "skipped_robots",
}


def test_every_url_ends_stored_failed_or_skipped(trouble):
    assert trouble.states_after_first == EXPECTED_STATES
    assert trouble.first.complete and not trouble.first.resumed
    assert trouble.first.stored == 13 and trouble.first.failed_total == 6 and trouble.first.skipped_robots == 3


def test_failures_carry_their_reason(trouble):
    with RawStore(trouble.store_dir) as store:
        assert dict(store.failures()) == {
            CANON + "always500": "HTTP 500 after 4 attempts",
            CANON + "loop/a": "redirect loop",
            CANON + "evil": "redirect to host not on allow-list: evil.example",
            CANON + "huge": "body exceeds 256 KB",
            CANON + "huge-chunked": "body exceeds 256 KB",
            CANON + "to-private": "redirect to a URL disallowed by robots.txt: http://quiz.test/private/x",
        }
        assert store.record(CANON + "always500").attempts == 4
    assert len(trouble.site.requested("/always500")) >= 4
    assert "/steal" not in trouble.site.paths()


def test_robots_disallowed_urls_are_never_requested(trouble):
    requested = trouble.site.paths()
    assert not any(path.startswith("/private") or path.endswith(".pdf") for path in requested)
    with RawStore(trouble.store_dir) as store:
        assert {url for url, _ in store.skipped()} == {CANON + "private/secret", CANON + "private/", CANON + "doc.pdf"}
        assert all(reason == "disallowed by robots.txt" for _, reason in store.skipped())


def test_link_extraction_is_limited_to_allowed_hosts_and_real_links(trouble):
    requested = trouble.site.paths()
    for path in ("/commented-out", "/in-script", "/style.css"):
        assert path not in requested
    assert not any("other.example" in url or "mailto" in url for url in trouble.states_after_first)
    assert all(url.startswith(CANON) for url in trouble.states_after_first)


def test_transient_errors_are_retried(trouble):
    assert [entry.status for entry in trouble.site.requested("/flaky")[:3]] == [503, 502, 200]
    with RawStore(trouble.store_dir) as store:
        assert store.get_body(CANON + "flaky").startswith(b"<!doctype html>")


def test_429_waits_for_retry_after(trouble):
    first, second = trouble.site.requested("/limited")[:2]
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 0.95


def test_redirects_are_followed_and_recorded_canonically(trouble):
    with RawStore(trouble.store_dir) as store:
        moved = store.record(CANON + "moved")
        assert moved.final_url == CANON + "p/2"
        assert moved.sha256 == store.record(CANON + "p/2").sha256


def test_sitemap_index_and_lastmod(trouble):
    with RawStore(trouble.store_dir) as store:
        assert store.sitemap_lastmods() == {
            CANON + "sitemap-pages.xml": "2024-03-01",
            CANON + "from-sitemap/1": "2024-02-03",
            CANON + "p/2": "2024-01-01T10:00:00+00:00",
        }


def test_raw_store_read_api(trouble):
    with RawStore(trouble.store_dir) as store:
        pages = dict(store.iter_pages())
        assert CANON + "img/a.png" not in pages and CANON + "sitemap.xml" not in pages
        assert pages[CANON + "p/1"].startswith(b"<!doctype html><html><head><title>one")
        assert dict(store.iter_pages("image/")) == {CANON + "img/a.png": PNG}
        assert store.get_body(CANON + "private/secret") is None
        assert store.get_body(CANON + "nowhere") is None
        for record in store.records():
            if record.sha256:
                path = store.body_path(record.sha256)
                assert path.parent.name == record.sha256[:2]
                assert hashlib.sha256(path.read_bytes()).hexdigest() == record.sha256
        assert not list(store.bodies.rglob("*.tmp"))


def test_second_crawl_downloads_no_bodies(trouble):
    second = trouble.second
    assert second.pass_number == 2 and second.complete
    assert second.downloaded == 0 and second.not_modified == 13
    sent_again = [e.path for e in trouble.site.log[trouble.first_log_size:] if e.status == 200 and e.body_sent]
    assert set(sent_again) <= {"/huge", "/huge-chunked"}  # refused bodies, still refused
    conditional = [e for e in trouble.site.log[trouble.first_log_size:] if e.path == "/img/a.png"]
    assert conditional and conditional[0].headers.get("if-modified-since") and conditional[0].status == 304
    with RawStore(trouble.store_dir) as store:
        assert store.url_states() == EXPECTED_STATES


# --- smaller scenarios ------------------------------------------------------------------------------
def test_pages_that_disappear_are_marked_gone_and_new_ones_found(tmp_path, capsys):
    store_dir = tmp_path / "raw"
    with Site({}) as site:
        site.routes.update({"/": page(html("home", ["/a", "/b"])), "/a": page(html("a")), "/b": page(html("b"))})
        config = CrawlConfig(base_url=site.base_url, rate_per_host=1000.0, progress=True)
        first = crawl(config, store_dir)
        assert "crawl: 100%" in capsys.readouterr().err  # the progress bar
        assert first.stored == 3 and first.failed == {"HTTP 404": 1}  # /sitemap.xml
        del site.routes["/b"]
        site.routes["/"] = page(html("home", ["/a", "/b", "/c"]))
        site.routes["/c"] = page(html("c"))
        second = crawl(config, store_dir)
    base = site.base_url
    assert second.gone == 1 and second.downloaded == 2 and second.not_modified == 1 and second.discovered == 1
    with RawStore(store_dir) as store:
        assert store.gone() == [base + "b"]
        assert store.record(base + "b").reason == "HTTP 404"
        assert store.get_body(base + "b").startswith(b"<!doctype html>")  # the last good body is kept
        assert sorted(dict(store.iter_pages())) == [base, base + "a", base + "c"]
        assert dict(store.failures()) == {base + "sitemap.xml": "HTTP 404"}


def test_connections_are_kept_alive_except_after_undrained_error_pages(tmp_path):
    big_error = lambda site, request: Reply(404, b"e" * (300 * 1024), {"Content-Type": "text/html"})  # noqa: E731
    links = [f"/missing/{i}" if i % 2 else f"/ok/{i}" for i in range(10)]
    routes = {"/": page(html("home", links)), **{f"/missing/{i}": big_error for i in range(1, 10, 2)},
              **{f"/ok/{i}": page(html(f"ok {i}")) for i in range(0, 10, 2)}}
    with Site(routes) as site:
        report = crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000.0, concurrency=1), tmp_path / "raw")
    assert report.stored == 6 and report.failed == {"HTTP 404": 6}  # 5 missing pages and /sitemap.xml
    # robots.txt on the calling thread's connection; the worker's connection is reused except
    # after the four big error pages that are followed by another request
    assert len({entry.client_port for entry in site.log}) == 1 + 1 + 4
    with RawStore(tmp_path / "raw") as store:
        for i in range(0, 10, 2):
            assert store.get_body(f"{site.base_url}ok/{i}") == html(f"ok {i}").encode()


def test_a_server_that_does_not_answer_in_time_is_a_timeout(tmp_path):
    def stall(site, request):
        time.sleep(0.8)
        return Reply(200, b"too late", {"Content-Type": "text/html"})

    with Site({"/": page(html("home", ["/stall"])), "/stall": stall}) as site:
        config = CrawlConfig(base_url=site.base_url, rate_per_host=1000.0, timeout=0.25, max_retries=1, backoff_base=0.01)
        crawl(config, tmp_path / "raw")
        assert site.hits("/stall") == 2
    with RawStore(tmp_path / "raw") as store:
        assert dict(store.failures())[site.base_url + "stall"] == "timeout after 2 attempts"


def test_a_body_cut_short_is_retried_then_failed(tmp_path):
    cut = lambda site, request: Reply(200, b"<html>cut", {"Content-Type": "text/html"}, content_length=5000)  # noqa: E731
    with Site({"/": page(html("home", ["/cut"])), "/cut": cut}) as site:
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000.0, max_retries=1, backoff_base=0.01), tmp_path / "raw")
        assert site.hits("/cut") == 2
    with RawStore(tmp_path / "raw") as store:
        assert dict(store.failures())[site.base_url + "cut"] == "truncated response after 2 attempts"
        assert store.get_body(site.base_url + "cut") is None


def test_unreachable_robots_txt_blocks_the_crawl_with_a_reason(tmp_path):
    with Site({"/robots.txt": status(503), "/": page(html("home", ["/a"]))}) as site:
        report = crawl(CrawlConfig(base_url=site.base_url, max_retries=1, backoff_base=0.01), tmp_path / "raw")
        assert site.paths() == {"/robots.txt"}
    assert report.stored == 0
    with RawStore(tmp_path / "raw") as store:
        assert set(dict(store.failures()).values()) == {"robots.txt unreachable: HTTP 503 after 2 attempts"}


def test_polite_off_ignores_robots(tmp_path):
    with Site({"/robots.txt": page("User-agent: *\nDisallow: /\n", "text/plain"), "/": page(html("home", ["/a"])),
               "/a": page(html("a"))}) as site:
        crawl(CrawlConfig(base_url=site.base_url, polite=False), tmp_path / "off")
        assert {"/", "/a"} <= site.paths()
        crawl(CrawlConfig(base_url=site.base_url, polite=True), tmp_path / "on")
        assert len(site.requested("/a")) == 1
    with RawStore(tmp_path / "on") as store:
        assert store.url_states()[site.base_url] == "skipped_robots"


def test_rate_limit_spaces_requests_per_host(tmp_path):
    pages = {f"/p{i}": page(html(f"p{i}")) for i in range(8)}
    with Site({"/": page(html("home", list(pages))), **pages, "/robots.txt": status(404)}) as site:
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=20.0, concurrency=8), tmp_path / "raw")
        times = sorted(entry.at for entry in site.log)
    assert len(times) == 11  # robots, home, sitemap, 8 pages
    assert times[-1] - times[0] >= 0.04 * (len(times) - 1)


def test_max_pages_stops_and_the_next_call_resumes(tmp_path):
    routes = chain_site(30)
    calls: list[int] = []
    with Site(routes) as site:
        config = CrawlConfig(base_url=site.base_url, canonical_base="http://chain.test/", rate_per_host=1000.0, max_pages=5)
        first = crawl(config, tmp_path / "raw")
        assert not first.complete and first.finished == 5
        rest = crawl(CrawlConfig(base_url=site.base_url, canonical_base="http://chain.test/", rate_per_host=1000.0,
                                 progress=lambda report: calls.append(report.finished)), tmp_path / "raw")
    assert rest.resumed and rest.complete and rest.pass_number == 1
    assert calls and calls[-1] == rest.finished



def test_a_store_cannot_be_reused_for_another_canonical_base(tmp_path):
    with Site({"/": page(html("home"))}) as site:
        crawl(CrawlConfig(base_url=site.base_url, canonical_base="http://one.test/"), tmp_path / "raw")
        with pytest.raises(RawStoreError, match="holds http://one.test/"):
            crawl(CrawlConfig(base_url=site.base_url, canonical_base="http://two.test/"), tmp_path / "raw")


def test_one_crawl_per_store_and_stale_temp_files_are_removed(tmp_path):
    with Site({"/": page(html("home"))}) as site:
        config = CrawlConfig(base_url=site.base_url, rate_per_host=1000.0)
        crawl(config, tmp_path / "raw")
        stale = tmp_path / "raw" / "bodies" / "ab" / ".abc.123.456.1.tmp"
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_bytes(b"half a body")
        with RawStore(tmp_path / "raw") as holder, holder.exclusive():
            with pytest.raises(RawStoreError, match="another crawl is writing"):
                crawl(config, tmp_path / "raw")
        assert crawl(config, tmp_path / "raw").complete
        assert not stale.exists()


def test_opening_a_missing_store_is_a_one_line_error(tmp_path):
    with pytest.raises(RawStoreError, match="no raw store at"):
        RawStore(tmp_path / "nothing")


# --- kill and resume ----------------------------------------------------------------------------------
CHILD = """
import sys
from pipelines.ingest.crawl import CrawlConfig, crawl
crawl(CrawlConfig(base_url=sys.argv[1], canonical_base="http://chain.test/", rate_per_host=150.0, concurrency=4), sys.argv[2])
"""


def _snapshot(store_dir: Path) -> tuple[dict, set[str], str]:
    with RawStore(store_dir) as store:
        records = {r.url: (r.state, r.sha256, r.reason, r.status, r.content_type) for r in store.records()}
        bodies = {p.name for p in store.bodies.rglob("*") if p.is_file()}
        return records, bodies, store.digest()


def test_a_killed_crawl_resumes_to_the_same_raw_store(tmp_path):
    pages = 200
    with Site(chain_site(pages)) as site:
        child = subprocess.Popen([sys.executable, "-c", CHILD, site.base_url, str(tmp_path / "killed")], cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
        index = tmp_path / "killed" / "index.sqlite"
        deadline = time.monotonic() + 30
        while child.poll() is None and time.monotonic() < deadline:  # kill once some results are committed
            if index.exists():
                try:
                    with sqlite3.connect(index, timeout=0.1) as conn:
                        if conn.execute("SELECT count(*) FROM urls WHERE state = 'stored'").fetchone()[0] >= 20:
                            break
                except sqlite3.OperationalError:
                    pass
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        with RawStore(tmp_path / "killed") as store:
            assert store.pass_info() == (1, False)
            stored_at_kill = sum(state == "stored" for state in store.url_states().values())
        assert 0 < stored_at_kill < pages
        resumed = crawl(CrawlConfig(base_url=site.base_url, canonical_base="http://chain.test/", rate_per_host=1000.0), tmp_path / "killed")
        assert resumed.resumed and resumed.complete
        assert resumed.downloaded < pages
    with Site(chain_site(pages)) as other_port:  # same site on another port: keys must not change
        whole = crawl(CrawlConfig(base_url=other_port.base_url, canonical_base="http://chain.test/", rate_per_host=1000.0), tmp_path / "whole")
        assert whole.complete and not whole.resumed
    killed_records, killed_bodies, killed_digest = _snapshot(tmp_path / "killed")
    whole_records, whole_bodies, whole_digest = _snapshot(tmp_path / "whole")
    assert killed_records == whole_records
    assert killed_bodies == whole_bodies
    assert killed_digest == whole_digest
    assert sum(state == "stored" for state, *_ in whole_records.values()) == pages + 1 + 5
    assert sum(state == "skipped_robots" for state, *_ in whole_records.values()) == pages


# --- units ----------------------------------------------------------------------------------------------
def test_robots_rules_longest_match_wildcards_and_groups():
    text = """
# comment
User-agent: *
Disallow: /

User-agent: stemforge-crawler
Allow: /private/open
Disallow: /private/
Disallow: /*.pdf$
Disallow: /tmp*/x
Allow: /same
Disallow: /same
Crawl-delay: 2
Sitemap: http://example.test/sitemap.xml
"""
    rules = RobotsRules.parse(text, "stemforge-crawler")
    assert rules.allowed("http://h/") and rules.allowed("http://h/page")
    assert not rules.allowed("http://h/private/a") and rules.allowed("http://h/private/open/a")
    assert not rules.allowed("http://h/a/b.pdf") and rules.allowed("http://h/a/b.pdf?x=1")
    assert not rules.allowed("http://h/tmp123/x") and rules.allowed("http://h/tmp123/y")
    assert rules.allowed("http://h/same")
    assert rules.crawl_delay == 2.0 and rules.sitemaps == ["http://example.test/sitemap.xml"]
    other = RobotsRules.parse(text, "otherbot")
    assert not other.allowed("http://h/page") and other.allowed("http://h/robots.txt")
    assert RobotsRules.parse("", "x").allowed("http://h/anything")
    assert not RobotsRules.unreachable("down").allowed("http://h/")


def test_normalize_url_and_mapping():
    assert normalize_url("HTTP://Example.COM:80/a b?q=1#frag") == "http://example.com/a%20b?q=1"
    assert normalize_url("https://example.com") == "https://example.com/"
    assert normalize_url("https://example.com:8443/x/%7Euser") == "https://example.com:8443/x/%7Euser"
    assert normalize_url("ftp://example.com/") is None
    assert normalize_url("http://[::1]:99/") == "http://[::1]:99/"
    assert normalize_url("http://bad:port/") is None
    mapper = UrlMapper("http://127.0.0.1:5000/", "http://demo.localhost/", ("127.0.0.1", "demo.localhost"))
    assert mapper.to_canonical("http://127.0.0.1:5000/q/1") == "http://demo.localhost/q/1"
    assert mapper.to_request("http://demo.localhost/q/1") == "http://127.0.0.1:5000/q/1"
    assert mapper.accept("../b#x", "http://127.0.0.1:5000/a/c/d") == "http://demo.localhost/a/b"
    assert mapper.accept("http://demo.localhost/z", "http://127.0.0.1:5000/") == "http://demo.localhost/z"
    assert mapper.accept("http://elsewhere.test/", "http://127.0.0.1:5000/") is None
    assert mapper.accept("data:image/png;base64,AAAA", "http://127.0.0.1:5000/") is None


def test_extract_links_tolerates_broken_markup():
    body = (b'<base href="http://h/sub/"><a href=rel>x</a><A HREF=\'/abs\'><img src="i.png" ><a name=x>'
            b'<link rel="prev next" href="n"><a href="#only-fragment"><a href="q?a=1&amp;b=2"><a href="unclosed')
    assert extract_links(body, "http://h/page") == [
        "http://h/sub/rel", "http://h/abs", "http://h/sub/i.png", "http://h/sub/n", "http://h/sub/q?a=1&b=2"]
    assert extract_links(b"\xff\xfe<a href='\xff'>", "http://h/") == ["http://h/\ufffd"]
    assert normalize_url("http://h/\ufffd") == "http://h/%EF%BF%BD"
    hidden = b'<a href="/x"><!-- <a href="/c"> --><scRipt>"<a href=/s>"</script ><a href="/y"><!-- unclosed <a href="/z">'
    assert extract_links(hidden, "http://h/") == ["http://h/x", "http://h/y"]
    assert extract_links(b"no markup", "http://h/") == []


def test_parse_sitemap_variants():
    plain = parse_sitemap(b'<urlset><url><loc> http://h/a?x=1&amp;y=2 </loc></url><url><loc><![CDATA[http://h/b]]></loc>'
                          b'<lastmod>2024-01-01</lastmod></url></urlset>')
    assert plain.pages == [("http://h/a?x=1&y=2", None), ("http://h/b", "2024-01-01")] and plain.sitemaps == []
    index = parse_sitemap(b'<?xml version="1.0"?><sm:sitemapindex xmlns:sm="x"><sm:sitemap><sm:loc>http://h/s1.xml</sm:loc>'
                          b"</sm:sitemap></sm:sitemapindex>")
    assert index.sitemaps == [("http://h/s1.xml", None)]
    assert parse_sitemap(b"<html><body>not a sitemap</body></html>") is None


def test_gzip_sitemaps_are_inflated_within_the_size_limit():
    import gzip

    small = gzip.compress(b"<urlset><url><loc>http://h/a</loc></url></urlset>")
    assert parse_sitemap(maybe_gunzip(small, 1 << 20)).pages == [("http://h/a", None)]
    bomb = gzip.compress(b"\0" * (8 << 20))
    assert len(bomb) < 100_000 and maybe_gunzip(bomb, 1 << 20) is None
    assert maybe_gunzip(b"\x1f\x8bnot really gzip", 1 << 20) is None


def test_hostile_markup_and_patterns_stay_linear():
    started = time.monotonic()
    assert extract_links(b"<a " * 300_000, "http://h/") == []
    assert extract_links(b"<!--" * 300_000 + b'<a href="/x">', "http://h/") == []
    assert parse_sitemap(b"<urlset>" + b"<url><loc>" * 200_000).pages == []
    rules = RobotsRules.parse("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b$\n", "bot")
    assert rules.allowed("http://h/" + "a" * 5000)
    assert time.monotonic() - started < 60.0  # catastrophic backtracking would take hours, not seconds


def test_parse_retry_after():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480 - 30) == pytest.approx(30.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_rate_limiter_reserves_slots():
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    limiter = HostRateLimiter(rate=10.0, burst=2, clock=lambda: clock[0], sleep=sleep)
    for _ in range(4):
        limiter.acquire("h")
    assert slept == [0.1, 0.2]
    limiter.pause("h", 5.0)
    limiter.acquire("other")
    assert slept == [0.1, 0.2]
    limiter.acquire("h")
    assert slept[-1] == 5.0


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(base_url="ftp://x/"), "absolute http"),
        (dict(base_url="http://x/", canonical_base="nope"), "canonical_base"),
        (dict(base_url="http://x/", rate_per_host=0), "rate_per_host"),
        (dict(base_url="http://x/", concurrency=0), "concurrency"),
        (dict(base_url="http://x/", max_pages=0), "max_pages"),
        (dict(base_url="http://x/?q=1"), "query"),
    ],
)
def test_bad_config_is_a_one_line_error(settings, message):
    with pytest.raises(CrawlConfigError, match=message):
        CrawlConfig(**settings)


def test_config_defaults():
    config = CrawlConfig(base_url="http://127.0.0.1:8123", canonical_base="http://demo.localhost")
    assert config.base_url == "http://127.0.0.1:8123/" and config.canonical_base == "http://demo.localhost/"
    assert config.allowed_hosts == ("127.0.0.1", "demo.localhost")
    assert config.robots_agent == "stemforge-crawler"
