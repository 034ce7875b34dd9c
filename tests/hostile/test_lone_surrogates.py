"""Issue 30, point 9: a lone surrogate (a JSON ``\\ud800`` escape) cannot be stored as UTF-8. From a
jsonl line, a ``python:`` row or a crawled page's JSON-LD it must quarantine the record naming
it, never fail the whole source (``UnicodeEncodeError`` naming no record)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipelines.ingest.crawl import CrawlConfig, crawl
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.stage import land_source, raw_store_dir
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from support.images import real_png
from support.loopback_site import Site, page

SURROGATE = "\\ud800"  # as the file has it: a JSON escape


def _line(i: int, question: str, option: str = "b") -> str:
    return (json.dumps({"question": question, "options": ["a", option], "answer": 0, "subject": "math",
                        "skill": "s", "image": f"img/{i}.png"}).replace("\\\\u", "\\u"))


def _land(text: str, home: DataHome):
    outcome = land_source(parse_source_spec(text), home, ImageStore(home.images))
    return pl.read_parquet(outcome.question_file), pl.read_parquet(outcome.quarantine_file)


def test_jsonl_lone_surrogates_quarantine_the_record(tmp_path):
    (tmp_path / "img").mkdir()
    for i in range(4):
        (tmp_path / "img" / f"{i}.png").write_bytes(real_png(30 + i, size=48))
    lines = [_line(0, "fine?"), _line(1, f"bad {SURROGATE} text?"), _line(2, "fine too?", f"b {SURROGATE}"),
             _line(3, "\\udfff\\ud800 reversed?")]
    assert "\\ud800" in lines[1]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    questions, quarantine = _land(f"jsonl:{tmp_path / 'q.jsonl'}", DataHome(tmp_path / "home"))
    assert questions["source_key"].to_list() == ["q.jsonl#0"]
    assert sorted(zip(quarantine["source_key"], quarantine["reason"])) == [
        ("q.jsonl#1", "lone surrogate (not valid Unicode) in problem"),
        ("q.jsonl#2", "lone surrogate (not valid Unicode) in choices"),
        ("q.jsonl#3", "lone surrogate (not valid Unicode) in problem"),
    ]


def test_python_rows_with_lone_surrogates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "surrogate_rows.py").write_text(
        "def rows():\n"
        "    yield {'question': 'ok?', 'options': ['a', 'b'], 'answer': 0, 'subject': 'math', 'skill': 's'}\n"
        "    yield {'question': 'x\\ud800?', 'options': ['a', 'b'], 'answer': 0, 'subject': 'math', 'skill': 's'}\n"
        "    yield {'question': 'y?', 'options': ['a', 'b\\udc80'], 'answer': 0, 'subject': 'math', 'skill': 's'}\n")
    questions, quarantine = _land("python:surrogate_rows:rows", DataHome(tmp_path / "home"))
    assert questions["source_key"].to_list() == ["rows#0"]
    assert sorted(zip(quarantine["source_key"], quarantine["reason"])) == [
        ("rows#1", "lone surrogate (not valid Unicode) in problem"),
        ("rows#2", "lone surrogate (not valid Unicode) in choices"),
    ]


@pytest.mark.parametrize("where", ["text", "about", "option", "name"])
def test_crawled_json_ld_with_a_lone_surrogate(tmp_path, where):
    def quiz(text: str, bad: bool = False) -> str:
        ld = json.dumps({"@context": "https://schema.org/", "@type": "Quiz", "name": "Q",
                         "educationalAlignment": [{"@type": "AlignmentObject", "alignmentType": "educationalSubject",
                                                   "targetName": "Mathematics"}],
                         "about": {"@type": "Thing", "name": "Adding"},
                         "hasPart": [{"@type": "Question", "eduQuestionType": "Multiple choice", "text": text,
                                      "suggestedAnswer": [{"@type": "Answer", "text": "1"}],
                                      "acceptedAnswer": {"@type": "Answer", "text": "2"}}]})
        if bad and where != "text":
            ld = ld.replace({"about": '"Adding"', "option": '"1"', "name": '"Q"'}[where], f'"x {SURROGATE}"', 1)
        return ('<!DOCTYPE html><html><head><title>Q</title><script type="application/ld+json">'
                + ld.replace("\\\\u", "\\u") + "</script></head><body></body></html>")

    routes = {"/": page('<!doctype html><html><body><a href="/good.html">a</a><a href="/bad.html">b</a></body></html>'),
              "/good.html": page(quiz("What is 1 + 1?")), "/bad.html": page(quiz(f"What is {SURROGATE} + 1?" if where == "text" else "What is 3 + 1?", bad=True))}
    home = DataHome(tmp_path / "home")
    with Site(routes) as site:
        spec = parse_source_spec(site.base_url)
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, concurrency=2, timeout=10),
              raw_store_dir(home, spec))
        questions, quarantine = _land(site.base_url, home)
    landed = [k.rsplit("/", 1)[1] for k in questions["source_key"]]
    if where in ("about", "name"):  # the surrogate goes into a slug (skill) or nowhere: the page lands
        assert landed == ["bad.html", "good.html"]
        return
    assert landed == ["good.html"]
    bad = quarantine.filter(pl.col("source_key").str.ends_with("bad.html"))
    assert bad.height == 1, bad.rows()  # quarantined, naming the page; the source still lands
    assert bad["reason"][0].startswith("lone surrogate") or "\\ud800" in bad["detail"][0], bad.rows()
