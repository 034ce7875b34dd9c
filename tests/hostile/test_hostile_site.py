"""A hostile quiz site on loopback, crawled by the real crawler and landed by ``land_source``.

Every hostile question page must end quarantined with a reason (stage ``crawl`` when the
crawler refused the URL, ``parse`` when the page or one of its images was unusable,
``ingest`` when the parsed question is structurally impossible), never stored and never
fatal; the one good page and the page with markup in its text land as questions, the
latter verbatim. A second loopback host that is not on the allow-list must never be
contacted.
"""

from __future__ import annotations

import threading
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import polars as pl
import pytest

from pipelines.ingest.crawl import CrawlConfig, RawStore, crawl
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.ingest.stage import land_source, raw_store_dir
from pipelines.ingest.spec import parse_source_spec
from support.images import bomb_images, real_png

MAX_BODY = 1024 * 1024
HOSTILE_TEXT = "<script>alert(1)</script><img src=x onerror=alert(2)>"
CONTROL_TEXT = "Bell\x07 esc\x1b del\x7f next-line\x85 kept\ttab?"
CONTROL_OPTIONS = ("ye\x08s", "no\x9b")


class Site:
    """A threaded HTTP server on 127.0.0.1; routes map a path to (status, headers, body)."""

    def __init__(self, routes: dict, host: str = "127.0.0.1"):
        self.routes = routes
        self.hits: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                site.hits.append(self.path)
                status, headers, body = site.routes.get(self.path, (404, {"Content-Type": "text/plain"}, b"no"))
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    if callable(body):  # streamed without Content-Length
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for block in body():
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # the crawler hangs up on refused bodies
        self.port = self.server.server_address[1]
        self.base_url = f"http://{host}:{self.port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "Site":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def html(body: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>t</title></head><body>{body}</body></html>".encode()


def ixl_page(problem: str, image: str | None, options=("yes", "no"), answer: int = 0, skill: str = "hostile") -> bytes:
    picture = f'<div class="question-image"><img src="{escape(image)}" alt="figure"></div>' if image else ""
    tiles = "".join(f'<div class="choice-tile" data-index="{i}">{escape(o)}</div>' for i, o in enumerate(options))
    return html(
        f'<main id="practice" data-subject="math" data-grade="grade-3" data-skill="{skill}">'
        f'<div class="question-area"><div class="question-text"><p>{escape(problem)}</p></div>{picture}'
        f'<div class="answer-choices">{tiles}</div></div>'
        f'<div class="correct-answer" data-answer-index="{answer}"></div></main>'
    )


PNG = {"Content-Type": "image/png"}
HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """Crawl the hostile site into a data home and land it; (site, outsider, outcome, questions, quarantine)."""
    outsider_routes = {"/": (200, HTML, html("outsider")), "/steal.png": (200, PNG, real_png(9))}
    with Site(outsider_routes, host="127.0.0.2") as outsider, Site({}) as site:
        base = site.base_url
        # page path -> (expected stage, a fragment of the expected reason); None: lands as a question
        expected: dict[str, tuple[str, str] | None] = {}
        routes = {}

        def question(path, page, outcome, status=200, headers=HTML):
            routes[path] = (status, headers, page)
            expected[path] = outcome

        question("/q/good", ixl_page("Which shape is red?", "/img/good.png"), None)
        routes["/img/good.png"] = (200, PNG, real_png(10))
        question("/q/markup", ixl_page(HOSTILE_TEXT, "/img/markup.png"), None)
        routes["/img/markup.png"] = (200, PNG, real_png(11))
        for name, (data, word) in bomb_images().items():
            routes[f"/img/{name}"] = (200, {"Content-Type": "application/octet-stream"}, data)
            question(f"/q/bomb-{name}", ixl_page(f"Bomb {name}?", f"/img/{name}"), ("parse", word))
        big_image = b"\x89PNG\r\n\x1a\n" + b"\x00" * (MAX_BODY + 10)
        routes["/img/huge.png"] = (200, PNG, big_image)
        question("/q/huge-image", ixl_page("Huge image?", "/img/huge.png"), ("parse", "body exceeds 1 MB"))
        routes["/img/streamed-huge.png"] = (200, PNG, lambda: (b"\x00" * 65536 for _ in range(40)))
        question("/q/streamed-huge-image", ixl_page("Streamed?", "/img/streamed-huge.png"), ("parse", "exceeds 1 MB"))
        question("/q/off-site-image", ixl_page("Off?", f"{outsider.base_url}steal.png"), ("parse", "not in the raw store"))
        question("/q/file-image", ixl_page("File?", "file:///etc/passwd"), ("parse", "not in the raw store"))
        # a picture written in the page is read from it, never fetched: these bytes are none
        question("/q/data-image", ixl_page("Data?", "data:image/png;base64,AAAA"), ("parse", "corrupt image"))
        routes["/img/redirected.png"] = (302, {"Location": f"{outsider.base_url}steal.png"}, b"")
        question("/q/redirected-image", ixl_page("Moved?", "/img/redirected.png"), ("parse", "not on allow-list"))
        question("/q/huge-page", ixl_page("x" * (MAX_BODY + 1), "/img/good.png"), ("crawl", "body exceeds 1 MB"))
        question("/q/streamed-huge-page", lambda: (b"<p>" + b"y" * 65533 for _ in range(40)), ("crawl", "exceeds 1 MB"))
        question("/q/redirect-other-host", b"", ("crawl", "not on allow-list: 127.0.0.2"),
                 status=302, headers={"Location": f"{outsider.base_url}"})
        question("/q/redirect-localhost", b"", ("crawl", "not on allow-list: localhost"),
                 status=301, headers={"Location": f"http://localhost:{site.port}/q/good"})
        question("/q/redirect-loop", b"", ("crawl", "redirect loop"), status=302, headers={"Location": "/q/redirect-loop2"})
        routes["/q/redirect-loop2"] = (302, {"Location": "/q/redirect-loop"}, b"")
        good = ixl_page("Cut?", "/img/good.png").decode()
        question("/q/truncated", good[: good.index("</main>")].encode(), ("parse", "truncated"))
        question("/q/no-answer", good.replace('data-answer-index="0"', "").encode(), ("parse", "correct-answer"))
        question("/q/one-option", ixl_page("One?", "/img/good.png", options=("only",)), ("parse", "1 option"))
        question("/q/answer-out-of-range", ixl_page("Range?", "/img/good.png", answer=7), ("parse", "out of range"))
        question("/q/bad-bytes", b"<!DOCTYPE html><html>\xff\xfe\x00<div class='question-area'>", ("parse", "ixl page"))
        question("/q/many-options", ixl_page("Many?", "/img/good.png", options=[f"o{i}" for i in range(10_000)]),
                 ("ingest", "10000 options"))
        question("/q/control-chars", ixl_page(CONTROL_TEXT, "/img/good.png", options=CONTROL_OPTIONS), None)
        question("/q/nul-text", ixl_page("Nul\x00?", "/img/good.png"), ("ingest", "NUL character in the question text"))
        question("/q/nul-option", ixl_page("Nul?", "/img/good.png", options=("yes", "n\x00o")),
                 ("ingest", "NUL character in option 1"))
        links = "".join(f'<a href="{path}">{i}</a>' for i, path in enumerate(sorted(expected)))
        routes["/"] = (200, HTML, html(links))
        site.routes = routes

        home = DataHome(tmp_path_factory.mktemp("hostile-home"))
        spec = parse_source_spec(base)
        config = CrawlConfig(base_url=base, max_body_bytes=MAX_BODY, max_retries=0, timeout=5, rate_per_host=1000,
                             burst=50, concurrency=4)
        report = crawl(config, raw_store_dir(home, spec))
        outcome = land_source(spec, home, ImageStore(home.images))
        questions = pl.read_parquet(outcome.question_file)
        quarantine = pl.read_parquet(outcome.quarantine_file)
        yield {"site": site, "outsider": outsider, "report": report, "expected": expected, "spec": spec, "home": home,
               "questions": questions, "quarantine": quarantine, "base": base}


def test_every_hostile_page_is_quarantined_with_its_reason(crawled):
    base, expected = crawled["base"], crawled["expected"]
    quarantine = crawled["quarantine"]
    by_key = {}
    for row in quarantine.iter_rows(named=True):
        by_key.setdefault(row["source_key"], []).append(row)
    for path, outcome in expected.items():
        url = base + path[1:]
        if outcome is None:
            assert url not in by_key, (path, by_key.get(url))
            continue
        stage, fragment = outcome
        rows = by_key.get(url)
        assert rows, f"{path} was neither landed nor quarantined"
        assert [r["stage"] for r in rows] == [stage], (path, rows)
        said = f"{rows[0]['reason']}: {rows[0]['detail'] or ''}"
        assert fragment.lower() in said.lower(), (path, said)
        assert "\n" not in rows[0]["reason"]
    assert set(crawled["questions"]["source_key"]) == {base + "q/good", base + "q/markup", base + "q/control-chars"}


def test_quarantine_reasons_are_stable_categories_with_specifics_in_detail(crawled):
    quarantine = crawled["quarantine"]
    assert not quarantine.filter(pl.col("reason").str.contains("http|127\\.0\\.0|localhost")).height
    redirects = quarantine.filter((pl.col("stage") == "crawl") & pl.col("reason").str.contains("not on allow-list"))
    # URLs redirected to two different hosts: one reason, the hosts in detail
    assert redirects["reason"].unique().to_list() == ["redirect to host not on allow-list"]
    assert set(redirects["detail"]) == {"127.0.0.2", "localhost"}
    missing = quarantine.filter(pl.col("reason") == "image unavailable (not in the raw store)")
    assert missing.height == 2 and all(d.startswith(("http", "file:")) for d in missing["detail"])


def test_nothing_refused_reaches_the_image_store(crawled):
    stored = sorted(p.read_bytes() for p in crawled["home"].images.rglob("*") if p.is_file())
    assert stored == sorted([real_png(10), real_png(11)])


def test_hosts_off_the_allow_list_are_never_contacted(crawled):
    assert crawled["outsider"].hits == []
    assert not any(h.startswith("/steal") for h in crawled["site"].hits)


def test_markup_in_question_text_is_kept_verbatim(crawled):
    row = crawled["questions"].filter(pl.col("source_key").str.ends_with("q/markup")).row(0, named=True)
    assert row["problem"] == HOSTILE_TEXT


def test_control_characters_in_a_page_are_stripped_and_a_nul_quarantines(crawled):
    row = crawled["questions"].filter(pl.col("source_key").str.ends_with("q/control-chars")).row(0, named=True)
    assert row["problem"] == "Bell esc del next-line kept\ttab?"
    assert row["choices"] == ["yes", "no"]
    assert not crawled["questions"].filter(pl.col("problem").str.contains("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")).height


def test_crawler_refuses_huge_bodies_without_storing_them(crawled):
    store = RawStore(raw_store_dir(crawled["home"], crawled["spec"]))
    try:
        for path in ("q/huge-page", "q/streamed-huge-page", "img/huge.png", "img/streamed-huge.png"):
            record = store.record(crawled["base"] + path)
            assert record.state == "failed" and "exceeds 1 MB" in record.reason, (path, record)
            assert record.sha256 is None
        assert max(r.size or 0 for r in store.records()) <= MAX_BODY
    finally:
        store.close()
