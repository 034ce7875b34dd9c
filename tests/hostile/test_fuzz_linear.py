"""Issue 30's fuzz suite: hostile texts, pages, layout files and spreadsheets must each cost
seconds, never minutes (every parser is linear in its input, or caps it with a reason).

Texts: 80 KB built to make option reading (``options_in_text=1``) quadratic, and TeX nested a
thousand braces deep for dedup's ``canonical_text`` (a RecursionError failed the whole build)."""

from __future__ import annotations

import random
import time

import pytest

from pipelines.clean.dedup.normalize import canonical_text, question_identity
from pipelines.ingest.importers.text_options import read_options, split_options

SIZE = 80_000


def _hostile_texts() -> dict[str, str]:
    rng = random.Random(30)
    texts = {
        "A. repeated": "A. " * SIZE,
        "(A) repeated": "(A) " * SIZE,
        "A) B) C) D) on lines": "\n".join(f"{'ABCD'[i % 4]}) x" for i in range(SIZE)),
        "A. to Z. on lines": "\n".join(f"{chr(65 + i % 26)}. y" for i in range(SIZE)),
        "labels in dollars": "$A. $" * SIZE,
        "full-width labels": "Ａ．" * SIZE,
        "random label soup": "".join(rng.choice("AB. ()$\n\\x{}|;") for _ in range(SIZE)),
        "open math": "\\(" * SIZE + "A. x B. y",
        "bars": "A. " + "|" * SIZE + " B. " + "|" * SIZE,
        "separators": "A. x" + "; " * SIZE + "B. y" + ";" * SIZE,
        "glued labels": "word(A)word(B)" * SIZE,
        "lower-case lines": "\n".join(f"{'abcd'[i % 4]}. z" for i in range(SIZE)),
    }
    return {name: text[:SIZE] for name, text in texts.items()}


@pytest.mark.timeout(120)
def test_options_in_text_is_linear():
    started = time.perf_counter()
    for name, text in _hostile_texts().items():
        one = time.perf_counter()
        read_options(text)  # split_options is read_options' (stem, options)
        assert time.perf_counter() - one < 8, name  # about 1 s on a shared core; quadratic was 130 s
    assert time.perf_counter() - started < 40
    assert split_options("Which? A. 1 B. 2 C. 3") == ("Which?", ["1", "2", "3"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", [
    "\\(\\frac" + "{" * 1000 + "x" + "}" * 1000 + "\\)",
    "$" + "{" * 5000 + "$",
    "\\(" + "\\sqrt[" * 2000 + "x\\)",
    "\\(x^" + "{" * 1500 + "2" + "}" * 1500 + "\\)",
])
def test_deeply_nested_tex_does_not_fail_dedup(text):
    started = time.perf_counter()
    assert canonical_text(text)
    assert canonical_text(text, option=True)
    assert question_identity(text, None, ["a", text], None)
    assert time.perf_counter() - started < 5


def test_nested_tex_within_the_limit_is_still_read_as_tex():
    assert canonical_text("\\(\\frac{1}{2}\\)") == canonical_text("$\\frac12$")
    deep = "\\(" + "{" * 50 + "\\left( x \\right)" + "}" * 50 + "\\)"
    assert canonical_text(deep) == "{" * 50 + "(x)" + "}" * 50  # parsed: \left and \right are invisible


# ---------------------------------------------------------------- pages (a loopback server)


class _LoopbackServer:
    """A threaded HTTP server on a free loopback port for a request handler class (``base_url``)."""

    def _serve(self, handler) -> None:
        import socketserver
        import threading

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Dripping(_LoopbackServer):
    """A loopback server whose ``/slow.html`` sends its headers at once, then one byte of its
    body every ``interval`` seconds (slow-loris); ``/`` links to it; everything else is 404."""

    def __init__(self, interval: float = 0.05, size: int = 4000):
        import threading
        from http.server import BaseHTTPRequestHandler

        body = b"<html><body>" + b"x" * size + b"</body></html>"
        stop = self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/":
                    page = b'<!doctype html><html><body><a href="/slow.html">slow</a></body></html>'
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if self.path != "/slow.html":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.flush()
                try:
                    for i in range(len(body)):
                        if stop.wait(interval):
                            return
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                except OSError:
                    pass

        self._serve(Handler)

    def close(self) -> None:
        self.stop.set()
        super().close()


@pytest.mark.timeout(120)
def test_a_drip_fed_body_costs_the_response_deadline(tmp_path):
    from pipelines.ingest.crawl import CrawlConfig, RawStore, crawl

    site = _Dripping()
    try:
        started = time.perf_counter()
        report = crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, concurrency=2, timeout=1.0,
                                   max_retries=1, backoff_base=0, backoff_cap=0), tmp_path / "raw")
        elapsed = time.perf_counter() - started
    finally:
        site.close()
    assert report.failed.get("timeout after 2 attempts") == 1, report
    assert elapsed < 8, elapsed  # two attempts of a 1 s deadline, not 4,000 bytes x 50 ms each
    with RawStore(tmp_path / "raw") as store:
        assert dict(store.failures())[site.base_url + "slow.html"].startswith("timeout")


# ---------------------------------------------------------------- spreadsheets (eval import)


def _workbook(sheet_xml=None, extra_rows: bytes = b"") -> bytes:
    import io
    import re
    import zipfile

    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.append(["index", "question", "A", "B", "prediction", "question_id"])
    sheet.append([0, "q", "yes", "no", "A", "q1"])
    plain = io.BytesIO()
    book.save(plain)
    source, out = zipfile.ZipFile(io.BytesIO(plain.getvalue())), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for info in source.infolist():
            content = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                content = re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD1048576"/>', content)
                content = content.replace(b"</sheetData>", extra_rows + b"</sheetData>")
            archive.writestr(info.filename, content)
    return out.getvalue()


def _questions(n: int = 1):
    import polars as pl

    return pl.DataFrame({"question_id": [f"q{i + 1}" for i in range(n)], "problem_image": ["h"] * n,
                         "choices": [["yes", "no"]] * n, "choice_images": [None] * n},
                        schema={"question_id": pl.Utf8, "problem_image": pl.Utf8, "choices": pl.List(pl.Utf8),
                                "choice_images": pl.List(pl.Utf8)})


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bomb", ["dimension", "wide and far", "expanded", "too many rows"])
def test_xlsx_bombs_cost_seconds(tmp_path, bomb):
    from pipelines.evaluation.harness_import import read_vlmevalkit
    from pipelines.evaluation.prediction_errors import PredictionsImportError

    extra = {
        "dimension": b'<row r="1048576"><c r="F1048576" t="inlineStr"><is><t>q1</t></is></c></row>',
        "wide and far": b'<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>',
        "expanded": b"<row><c><v>1</v></c></row>" * 3_000_000,  # ~80 MB of XML in well under 1 MB
        "too many rows": b"".join(b'<row r="%d"><c r="A%d"><v>1</v></c></row>' % (i, i) for i in range(3, 1100)),
    }[bomb]
    path = tmp_path / f"m_stemforge_test.xlsx"
    path.write_bytes(_workbook(extra_rows=extra))
    assert path.stat().st_size < 1_000_000
    started = time.perf_counter()
    try:
        rows = list(read_vlmevalkit(path, _questions()))
    except PredictionsImportError as exc:
        assert str(exc).startswith(path.name), exc
        assert bomb in ("expanded", "too many rows"), exc
    else:
        assert bomb in ("dimension", "wide and far")
        assert rows[0] == (2, {"question_id": "q1", "prediction": 0})
    assert time.perf_counter() - started < 10


# ---------------------------------------------------------------- layout files

_LAYOUT = "name: hostile\nmatch: div.q\ntext: p\noptions: li\nanswer: {css: b, is: text}\n"
_LAUGHS = "".join(f"  - &a{i} [" + ",".join([f"*a{i - 1}" if i else "lol"] * 9) + "]\n" for i in range(10))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["skill: {css: p, pattern: *a9}", "skill: {value: *a9}", "grade: {css: p, exclude: *a9}",
                                 "subject: *a9", "text: *a9"])
def test_yaml_anchor_bombs_are_refused_at_once(tmp_path, key):
    from pipelines.ingest.site_layout import LayoutError, layout_from_text, load_layout

    text = _LAYOUT.replace("text: p\n", "") + "follow:\n" + _LAUGHS + key + "\n"
    assert len(text) < 2000
    started = time.perf_counter()
    with pytest.raises(LayoutError, match=r"YAML aliases \(\*a0\) are not allowed"):
        layout_from_text(text, "layout file bomb.yaml")
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    with pytest.raises(LayoutError, match="aliases"):
        load_layout(str(path))
    assert time.perf_counter() - started < 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^(\w+\s?)*$", r"(x|xy)*z", r"^(([a-z])+.)+[A-Z]([a-z])+$", r"(.*a){20}"])
def test_catastrophic_layout_patterns_are_refused(pattern):
    from pipelines.ingest.site_layout import LayoutError, layout_from_text

    started = time.perf_counter()
    with pytest.raises(LayoutError, match="exponential time"):
        layout_from_text(_LAYOUT + f"skill: {{url: true, pattern: '{pattern}'}}\n", "layout file slow.yaml")
    assert time.perf_counter() - started < 2


def test_ordinary_layout_patterns_still_work():
    from pipelines.ingest.site_layout import layout_from_text, shipped_layout, shipped_layout_names

    assert all(shipped_layout(name) for name in shipped_layout_names())
    for pattern in (r"/q/(\d+)", r"grade-(\d+)", r"([^/]+?)(?:\.html?)?$", r"(?:a|b)+", r"(\w+)\.html$"):
        layout_from_text(_LAYOUT + f"skill: {{url: true, pattern: '{pattern}'}}\n", "layout file ok.yaml")
    with pytest.raises(Exception, match="at most"):
        layout_from_text(_LAYOUT + "#" * 300_000, "layout file big.yaml")


@pytest.mark.timeout(60)
def test_a_slow_polynomial_layout_pattern_is_cut_off_with_a_reason():
    """Issue 30, point 14: nested-free patterns can still be polynomial; ``(.*)/(.*)/(.*)/q=(\\d+)`` took
    about 100 s on a 1,000-character URL with ``re``. Every match now has a time limit and the page is
    refused with a one-line reason (the stage quarantines it)."""
    from pipelines.ingest.site_layout import PATTERN_SECONDS, layout_from_text
    from pipelines.ingest.web_parsers import PageParseError, parse_page

    layout = layout_from_text(_LAYOUT + "subject: {value: math}\nskill: {url: true, pattern: '(.*)/(.*)/(.*)/q=(\\d+)'}\n",
                              "layout file poly.yaml")
    page = "<!doctype html><html><body><div class=q><p>Which?</p><li>1</li><li>2</li><b>2</b></div></body></html>"
    # an ordinary URL still matches (the first group is the skill)
    assert parse_page("http://site.test/a/b/c/q=7", page, [layout])[0].skill == "http://site.test/a"
    url = "http://site.test/" + "a/" * 5000
    started = time.perf_counter()
    with pytest.raises(PageParseError, match=r"hostile layout pattern took over 0.5 s \(page skipped\): "
                                             r"'.*' on a 10,017-character value") as caught:
        parse_page(url, page, [layout])
    assert time.perf_counter() - started < 2
    assert PATTERN_SECONDS <= 1 and "\n" not in str(caught.value) and len(str(caught.value)) < 300
    from pipelines.ingest.stage import quarantine_reason  # how the parse stage files the skipped page

    assert quarantine_reason(str(caught.value))[0] == "hostile layout pattern took over 0.5 s (page skipped)"


class _Endless(_LoopbackServer):
    """A loopback site whose every ``/page/N`` links to ``/page/N+1`` and two fresh ids (pagination
    and a calendar with no end)."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                n = int(self.path.rsplit("/", 1)[1] or 0) if self.path.startswith("/page/") else 0
                if self.path not in ("/",) and not self.path.startswith("/page/"):
                    body, status = b"no", 404
                else:
                    links = "".join(f'<a href="/page/{m}">{m}</a>' for m in (n + 1, 10 * n + 7, 10 * n + 8))
                    body, status = f"<!doctype html><html><body>{links}</body></html>".encode(), 200
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)



@pytest.mark.timeout(120)
def test_endless_pagination_stops_at_the_crawl_budget(tmp_path):
    from pipelines.ingest.crawl import CrawlConfig, RawStore, crawl

    site = _Endless()
    try:
        started = time.perf_counter()
        config = CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=100, concurrency=4, timeout=5, max_urls=120)
        report = crawl(config, tmp_path / "raw")
        assert time.perf_counter() - started < 30
        again = crawl(config, tmp_path / "raw")  # the next build: the budget holds across passes
    finally:
        site.close()
    assert report.complete and report.over_budget > 0, report
    with RawStore(tmp_path / "raw") as store:
        assert store.conn.execute("SELECT count(*) FROM urls").fetchone()[0] <= 120
    assert again.complete and again.discovered == 0
    assert CrawlConfig(base_url="http://x.test/").max_urls == 100_000  # builds have a budget by default


@pytest.mark.timeout(120)
def test_the_crawl_budget_is_a_build_setting_and_a_source_option(tmp_path):
    """Issue 30, point 15: ``CrawlConfig.max_urls`` is set by ``BuildSettings.crawl_max_urls``
    (``stemforge build --crawl-max-urls N``, the resource's ``crawl_max_urls``) and, per source, by
    ``http://HOST/?max_urls=N``, which wins."""
    from assets.resources import StemforgeSettings
    from pipelines.ingest.crawl import RawStore
    from pipelines.ingest.spec import SourceSpecError, parse_source_spec
    from pipelines.ingest.stage import crawl_web_source, raw_store_dir
    from pipelines.orchestration.cli import build_parser
    from pipelines.settings import BuildSettings

    assert BuildSettings().crawl_max_urls == 100_000 and "crawl_max_urls" in StemforgeSettings.model_fields
    assert build_parser().parse_args(["build", "--crawl-max-urls", "40"]).crawl_max_urls == 40
    for bad in ("0", "-3", "many", ""):
        with pytest.raises(SourceSpecError, match="max_urls must be a whole number"):
            parse_source_spec(f"http://site.test/?max_urls={bad}")
    assert parse_source_spec("http://site.test/?layout=opendsa&max_urls=7").options == {"layout": "opendsa",
                                                                                          "max_urls": "7"}
    site = _Endless()
    try:
        settings = BuildSettings(home=str(tmp_path / "home"), crawl_rate_per_host=1000, crawl_timeout=5,
                                 crawl_max_urls=25)
        counts = {}
        for text in (site.base_url, site.base_url + "?max_urls=60"):
            spec = parse_source_spec(text)
            report = crawl_web_source(spec, settings, settings.data_home, progress=False)
            assert report["complete"] and report["over_budget"] > 0, report
            with RawStore(raw_store_dir(settings.data_home, spec)) as store:
                counts[text] = store.conn.execute("SELECT count(*) FROM urls").fetchone()[0]
    finally:
        site.close()
    assert 20 <= counts[site.base_url] <= 25 and 50 <= counts[site.base_url + "?max_urls=60"] <= 60, counts


@pytest.mark.timeout(120)
def test_the_api_clients_session_bounds_a_drip_fed_body():
    """Issue 30, point 11: ``pipelines.http``'s sessions (the API clients, the site probe) read a
    body within the response deadline, with the crawler's reader (``read_body``): a server that
    sends a byte every 50 ms (each receive within the read timeout) took 4,000 x 50 ms = 200 s."""
    import requests

    from pipelines.http import BodyTooLarge, ResponseDeadline, RetryPolicy, read_body

    site = _Dripping()
    try:
        session = RetryPolicy(retries=0, timeout=1.0).session()
        started = time.perf_counter()
        with pytest.raises(requests.Timeout) as caught:  # what the clients already catch and retry
            session.get(site.base_url + "slow.html")
        assert isinstance(caught.value, ResponseDeadline) and time.perf_counter() - started < 3
        started = time.perf_counter()
        response = session.get(site.base_url + "slow.html", stream=True)  # a streamed body: the caller's reader
        with pytest.raises(ResponseDeadline):
            read_body(response, time.monotonic() + 1.0, 1 << 20)
        response.close()
        assert time.perf_counter() - started < 3
        assert session.get(site.base_url).content.startswith(b"<!doctype html>")  # a prompt answer reads whole
        with pytest.raises(BodyTooLarge):
            RetryPolicy(retries=0, timeout=1.0).session(max_body=10).get(site.base_url)
        session.close()
    finally:
        site.close()
