"""Issue 30, point 3: a page's charset declared only in the HTTP ``Content-Type`` header is
honoured (a Latin-1 page was stored as ``caf\\ufffd``); a byte order mark still wins, and a page
without any declaration is UTF-8."""

from __future__ import annotations

import json

import polars as pl

from pipelines.ingest.crawl import CrawlConfig, crawl
from pipelines.ingest.html_dom import decode_page, header_charset
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import land_source, raw_store_dir
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from support.loopback_site import Site, page


def _quiz(text: str) -> str:
    ld = {"@context": "https://schema.org/", "@type": "Quiz", "name": "Q", "about": {"@type": "Thing", "name": "Prices"},
          "educationalAlignment": [{"@type": "AlignmentObject", "alignmentType": "educationalSubject", "targetName": "Mathematics"}],
          "hasPart": [{"@type": "Question", "eduQuestionType": "Multiple choice", "text": text,
                       "suggestedAnswer": [{"@type": "Answer", "text": "2 francs"}],
                       "acceptedAnswer": {"@type": "Answer", "text": "3 francs"}}]}
    return ('<!DOCTYPE html><html><head><title>Q</title><script type="application/ld+json">'
            + json.dumps(ld, ensure_ascii=False) + "</script></head><body></body></html>")


def test_the_header_charset_is_honoured(tmp_path):
    latin = _quiz("Combien coûte le café à Noël?").encode("latin-1")
    routes = {"/": page('<!doctype html><html><body><a href="/latin.html">a</a></body></html>'),
              "/latin.html": page(latin, content_type="text/html; charset=ISO-8859-1")}
    home = DataHome(tmp_path / "home")
    with Site(routes) as site:
        spec = parse_source_spec(site.base_url)
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, concurrency=2, timeout=10),
              raw_store_dir(home, spec))
        outcome = land_source(spec, home, ImageStore(home.images))
    questions = pl.read_parquet(outcome.question_file)
    assert questions["problem"].to_list() == ["Combien coûte le café à Noël?"]


def test_charset_precedence():
    assert header_charset("text/html; charset=ISO-8859-1") == "iso-8859-1"
    assert header_charset('text/html;charset="windows-1252"') == "windows-1252"
    assert header_charset("text/html") is None
    body = "café".encode("latin-1")
    assert decode_page(body, "iso-8859-1") == "café"
    assert decode_page(b"<meta charset=iso-8859-1>" + body).endswith("café")
    assert decode_page(b"\xef\xbb\xbf" + "café".encode(), "iso-8859-1") == "café"  # the BOM wins
    assert decode_page("café".encode(), "no-such-charset") == "café"  # unknown: the page's own, else UTF-8
