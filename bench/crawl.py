"""Crawl throughput: stemforge's crawler vs Scrapy on the same loopback site, politeness off.

    .venv/bin/python bench/crawl.py [--questions 2000] [--concurrency 8] [--repeat 1] [--site demo|simple]

The site runs in its own process (so it does not share a GIL with either crawler) and
is restarted for every run so neither crawler profits from the other's warm caches. Each
crawler runs in its own process too. Both start from the base URL and /sitemap.xml, follow
``<a href>``, ``<link rel=next>`` and ``<img src>`` on the site's host, download images,
retry 5xx, ignore robots.txt, no delay, no autothrottle, no HTTP cache, the same number
of concurrent requests. Ours also writes every body to its content-addressed raw store
and the SQLite index; the Scrapy spider keeps nothing.

pages/s = responses received per second of crawl time (Scrapy: ``response_received_count
/ elapsed_time_seconds``; ours: URLs finished / elapsed, robots.txt not counted).
``--site simple`` uses a plain generated site defined here instead of the demo quiz site.
Environment knobs for investigating Scrapy: ``SCRAPY_LOG=INFO`` shows its log,
``SCRAPY_REACTOR=twisted.internet.epollreactor.EPollReactor`` replaces its default
asyncio reactor (no consistent difference on this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_CANONICAL = "http://demo.localhost/"


# --- the sites -----------------------------------------------------------------------------------
def serve_simple(pages: int) -> None:
    """A generated site: ``pages`` pages in listings of 20, each page with links and an image."""
    import hashlib
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )

    def body_for(path: str) -> tuple[int, bytes, str]:
        if path in ("/", "/index.html"):
            links = "".join(f'<a href="/list/{i}">listing {i}</a>' for i in range(0, (pages + 19) // 20))
            return 200, f"<!doctype html><html><body><h1>Home</h1>{links}</body></html>".encode(), "text/html; charset=utf-8"
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{DEMO_CANONICAL}q/{i}</loc><lastmod>2026-01-05</lastmod></url>" for i in range(pages))
            return 200, f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode(), "application/xml"
        if path.startswith("/list/"):
            n = int(path.rsplit("/", 1)[1])
            items = "".join(f'<li><a href="/q/{i}">Question {i}</a></li>' for i in range(n * 20, min(pages, n * 20 + 20)))
            nxt = f'<link rel="next" href="/list/{n + 1}">' if (n + 1) * 20 < pages else ""
            return 200, f"<!doctype html><html><head>{nxt}</head><body><ul>{items}</ul><a href='/'>home</a></body></html>".encode(), "text/html; charset=utf-8"
        if path.startswith("/q/"):
            n = int(path.rsplit("/", 1)[1])
            filler = hashlib.sha256(str(n).encode()).hexdigest() * 40
            opts = "".join(f"<li><label><input type=radio name=a value={k}> option {k} of {n}</label></li>" for k in range(4))
            html = (
                f"<!doctype html><html><head><title>Question {n}</title></head><body><nav><a href='/'>home</a>"
                f"<a href='/list/{n // 20}'>listing</a></nav><main><p>What is shown? {filler}</p>"
                f"<img src='/img/{n % 50}.png'><ol>{opts}</ol><a href='/q/{(n + 1) % pages}'>next</a></main></body></html>"
            )
            return 200, html.encode(), "text/html; charset=utf-8"
        if path.startswith("/img/"):
            return 200, png, "image/png"
        return 404, b"not found", "text/plain"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        wbufsize = 64 * 1024

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            code, body, content_type = body_for(self.path)
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()


def serve_demo(questions: int) -> None:
    from pipelines.ingest.demo_site.generator import SiteConfig
    from pipelines.ingest.demo_site.server import start_site

    with start_site(SiteConfig(seed=0, questions=questions, faults=False), port=0) as site:
        print(site.base_url, flush=True)
        while True:
            time.sleep(3600)


def start_server(kind: str, size: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--questions", str(size)],
        stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"the {kind} site did not start")
    return proc, base_url


# --- the crawlers -------------------------------------------------------------------------------
def run_ours(base_url: str, concurrency: int) -> dict:
    from pipelines.ingest.crawl import CrawlConfig, crawl

    with tempfile.TemporaryDirectory() as store_dir:
        config = CrawlConfig(base_url=base_url, canonical_base=DEMO_CANONICAL, polite=False, concurrency=concurrency,
                             timeout=30.0)
        report = crawl(config, Path(store_dir) / "raw")
    return {"pages": report.finished, "seconds": report.elapsed, "failed": report.failed_total,
            "requests": report.requested}


def run_scrapy(base_url: str, concurrency: int) -> dict:
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse

    host = base_url.split("//", 1)[1].split("/", 1)[0].split(":")[0]

    class BenchSpider(scrapy.Spider):
        name = "bench"
        allowed_domains = [host]

        async def start(self):
            for url in (base_url, base_url + "sitemap.xml"):
                yield scrapy.Request(url, callback=self.parse)

        def parse(self, response):
            if not isinstance(response, TextResponse):
                return
            content_type = response.headers.get(b"Content-Type", b"").lower()
            if b"html" in content_type:
                for href in response.css("a::attr(href), link[rel~=next]::attr(href), img::attr(src)").getall():
                    yield response.follow(href, callback=self.parse)
            elif b"xml" in content_type:
                for loc in response.xpath("//*[local-name()='loc']/text()").getall():
                    loc = loc.strip()
                    if loc.startswith(DEMO_CANONICAL):  # the site records canonical URLs; request the real port
                        loc = base_url + loc[len(DEMO_CANONICAL):]
                    yield scrapy.Request(loc, callback=self.parse)

    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "DOWNLOAD_DELAY": 0,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": os.environ.get("SCRAPY_LOG", "ERROR"),
        "DOWNLOAD_TIMEOUT": 30,
        **({"TWISTED_REACTOR": os.environ["SCRAPY_REACTOR"]} if os.environ.get("SCRAPY_REACTOR") else {}),
    })
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    return {"pages": stats.get("response_received_count", 0), "seconds": stats["elapsed_time_seconds"],
            "failed": stats.get("log_count/ERROR", 0), "requests": stats.get("downloader/request_count", 0)}


def run_in_subprocess(which: str, base_url: str, concurrency: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--run", which, "--base", base_url, "--concurrency", str(concurrency)],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{which} crawl failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=2000, help="site size (demo questions or simple pages)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1, help="runs per crawler (alternating order); the median is reported")
    parser.add_argument("--site", choices=("demo", "simple"), default="demo")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        (serve_demo if args.serve == "demo" else serve_simple)(args.questions)
        return 0
    if args.run:
        result = (run_ours if args.run == "ours" else run_scrapy)(args.base, args.concurrency)
        print(json.dumps(result))
        return 0

    site = args.site
    results: dict[str, list[dict]] = {"stemforge": [], "scrapy": []}
    for round_ in range(args.repeat):
        order = ["stemforge", "scrapy"] if round_ % 2 == 0 else ["scrapy", "stemforge"]
        for name in order:
            proc, base_url = start_server(site, args.questions)
            try:
                result = run_in_subprocess("ours" if name == "stemforge" else "scrapy", base_url, args.concurrency)
            finally:
                proc.kill()
                proc.wait()
            result["rate"] = result["pages"] / result["seconds"]
            results[name].append(result)
            print(f"  {name:9s} run {round_ + 1}: {result['pages']} pages in {result['seconds']:.2f} s "
                  f"= {result['rate']:.0f} pages/s ({result['requests']} requests, {result['failed']} failed)", file=sys.stderr)
    ours = statistics.median(r["rate"] for r in results["stemforge"])
    theirs = statistics.median(r["rate"] for r in results["scrapy"])
    print(f"crawl bench: site={site} size={args.questions} concurrency={args.concurrency} repeat={args.repeat}")
    print(f"  stemforge {ours:8.0f} pages/s   (pages {results['stemforge'][0]['pages']})")
    print(f"  scrapy    {theirs:8.0f} pages/s   (pages {results['scrapy'][0]['pages']})")
    print(f"  ratio stemforge/scrapy = {ours / theirs:.2f}x (goal >= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
