"""Site layout files and schema.org markup: real HTML nobody here wrote (OpenDSA's exercise pages,
../shared/corpora/opendsa-html) crawled from loopback with a shipped layout, schema.org Quiz
pages crawled with no layout, and layouts whose selectors miss."""

from __future__ import annotations

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import polars as pl
import pytest

from pipelines.ingest.crawl import CrawlConfig, crawl
from pipelines.ingest.site_layout import LayoutError, layout_from_text, shipped_layout, shipped_layout_names
from pipelines.ingest.spec import SourceSpecError, parse_source_spec
from pipelines.ingest.stage import land_source, raw_store_dir
from pipelines.ingest.web_parsers import PageParseError, parse_page
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from support.corpora import CORPORA
from support.images import real_png
from support.loopback_site import Site, page

OPENDSA = CORPORA / "opendsa-html"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _serve_folder(folder):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def _crawl_and_land(base: str, spec_text: str, home: DataHome, **config):
    spec = parse_source_spec(spec_text)
    crawl(CrawlConfig(base_url=base, rate_per_host=1000, burst=50, concurrency=4, timeout=10, **config),
          raw_store_dir(home, spec))
    outcome = land_source(spec, home, ImageStore(home.images))
    quarantine = pl.read_parquet(outcome.quarantine_file)
    assert quarantine.filter(pl.col("stage") == "crawl")["source_key"].to_list() == [base + "sitemap.xml"]
    return spec, pl.read_parquet(outcome.question_file), quarantine.filter(pl.col("stage") != "crawl")


@pytest.fixture(scope="module")
def opendsa(tmp_path_factory):
    server = _serve_folder(OPENDSA)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        home = DataHome(tmp_path_factory.mktemp("opendsa-home"))
        yield (base, *_crawl_and_land(base, base + "?layout=opendsa", home))
    finally:
        server.shutdown()
        server.server_close()


def test_every_opendsa_page_is_accounted_for(opendsa):
    base, spec, questions, quarantine = opendsa
    pages = [base + line for line in (OPENDSA / "pages.txt").read_text().split()]
    assert len(pages) == 75
    landed = set(questions["source_key"])
    parked = set(quarantine["source_key"])
    assert landed | parked >= set(pages), sorted(set(pages) - landed - parked)[:5]
    assert not landed & parked
    assert questions.height == 75 and quarantine.height == 0, quarantine.rows()[:5]
    assert set(questions["layout"] if "layout" in questions.columns else ["opendsa"]) == {"opendsa"}
    assert (questions["subject"] == "technology").all()


def test_opendsa_questions_have_their_options_answer_and_images(opendsa):
    base, _, questions, _ = opendsa
    rows = {r["source_key"][len(base):]: r for r in questions.iter_rows(named=True)}
    aggr = rows["Exercises/CMP/CMdatatypeMCQaggr.html"]
    assert aggr["skill"] == "CMdatatypeMCQaggr"
    assert sorted(aggr["choices"]) == sorted(["Data type", "Abstract data type", "Interface", "Aggregate type"])
    assert aggr["choices"][aggr["answer_idx"]] == "Aggregate type"
    assert aggr["problem_image"] is not None and aggr["problem"].endswith('The term "composite type" is a synonym of _____')
    tf = rows["Exercises/CMP/CMdatatypeTFstru.html"]  # data-category: the listed order, the answer among them
    assert tf["choices"] == ["True", "False"] and tf["answer_idx"] == 1
    bst = rows["Exercises/SWDesignAndDataStructs/BSTCheckpoint3Q1.html"]  # letters naming pictures
    assert bst["choices"] is None and len(bst["choice_images"]) == 4 and bst["answer_idx"] == 0
    assert bst["problem_image"] is not None and bst["problem"].endswith("insert(55, topNode)")  # no "Choices are:"
    design = rows["Exercises/MengBridgeCourse/DesignCheckpoint2Q3.html"]
    assert design["problem_image"] is None and len(design["choice_images"]) == 3 and design["answer_idx"] == 1
    with_pictures = sum(r["problem_image"] is not None or r["choice_images"] is not None for r in rows.values())
    assert with_pictures == 75
    # the labels "A) <img><br>B) <img>…" named the pictures that became the options: not left in the text
    bags = rows["Exercises/MengBridgeCourse/BagsCheckpoint4Q1.html"]
    assert len(bags["choice_images"]) == 4 and bags["problem"].endswith('array after a\ncall to remove("twix")?')
    labelled = [key for key, r in rows.items() if r["choice_images"] is not None
                and re.fullmatch(r"(?:[(\[]?[A-E][)\].:]?\s*)+", r["problem"].split("\n")[-1])]
    assert labelled == []


def _opendsa_page(name: str) -> bytes:
    return (OPENDSA / "Exercises" / "CMP" / name).read_bytes()


def test_a_selector_that_misses_quarantines_the_page_naming_the_field():
    layout = shipped_layout("opendsa")
    body = _opendsa_page("CMdatatypeMCQaggr.html").replace(b'class="solution"', b'class="explanation"')
    with pytest.raises(PageParseError, match="opendsa page without answer: 'div.solution' found nothing"):
        parse_page("http://h/x.html", body, (layout,))
    other = layout_from_text("name: other\nmatch: div.problems\ntext: p.nothing\noptions: li\nanswer: div.solution\n", "t")
    with pytest.raises(PageParseError, match="other page without question text: 'p.nothing'"):
        parse_page("http://h/x.html", _opendsa_page("CMdatatypeMCQaggr.html"), (other,))


def test_a_layout_miss_on_a_crawl_lands_in_quarantine_with_the_field(tmp_path):
    layout_file = tmp_path / "mysite.yaml"
    layout_file.write_text("name: mysite\nmatch: div.exercise\nquestion: div.problems > div\ntext: p.question\n"
                           "options: ul.choices > li\nanswer: {css: div.answer, is: text, joins_options: true}\n"
                           "subject: {value: technology}\nskill: {value: quiz}\n")
    routes = {"/": page('<!doctype html><html><body><a href="/a.html">a</a></body></html>'),
              "/a.html": page(_opendsa_page("CMoopMCQobj.html")),
              "/OOPCM.png": page(real_png(3), "image/png")}
    with Site(routes) as site:
        home = DataHome(tmp_path / "home")
        _, questions, quarantine = _crawl_and_land(site.base_url, f"{site.base_url}?layout={layout_file}", home)
    assert questions.height == 0
    [row] = quarantine.rows(named=True)
    assert row["stage"] == "parse" and row["reason"] == "mysite page without answer"
    assert "'div.answer' found nothing" in row["detail"]


QUIZ_LD = {
    "@context": "https://schema.org/", "@type": "Quiz", "name": "Fractions practice",
    "about": {"@type": "Thing", "name": "Adding fractions"},
    "educationalAlignment": [{"@type": "AlignmentObject", "alignmentType": "educationalSubject", "targetName": "Mathematics"},
                             {"@type": "AlignmentObject", "alignmentType": "educationalLevel", "targetName": "Grade 5"}],
    "hasPart": [{
        "@type": "Question", "eduQuestionType": "Multiple choice", "learningResourceType": "Practice problem",
        "text": "What fraction of the circle is shaded?", "image": "/img/circle.png",
        "suggestedAnswer": [{"@type": "Answer", "position": 0, "text": "1/2"},
                            {"@type": "Answer", "position": 2, "text": "1/3"}],
        "acceptedAnswer": {"@type": "Answer", "position": 1, "text": "3/4"},
    }],
}
QUIZ_MICRODATA = """<!DOCTYPE html><html><head><title>Quiz</title></head><body>
<div itemscope itemtype="https://schema.org/Quiz"><meta itemprop="name" content="Forces">
 <div itemprop="about" itemscope itemtype="https://schema.org/Thing"><meta itemprop="name" content="Newton's laws"></div>
 <div itemprop="educationalAlignment" itemscope itemtype="https://schema.org/AlignmentObject">
  <meta itemprop="alignmentType" content="educationalSubject"><meta itemprop="targetName" content="Physics"></div>
 <div itemprop="hasPart" itemscope itemtype="https://schema.org/Question">
  <meta itemprop="eduQuestionType" content="Multiple choice">
  <p itemprop="text">Which arrow shows the net force?</p>
  <img itemprop="image" src="/img/forces.png" alt="forces">
  <ul><li itemprop="suggestedAnswer" itemscope itemtype="https://schema.org/Answer"><meta itemprop="position" content="1"><span itemprop="text">Left</span></li>
  <li itemprop="acceptedAnswer" itemscope itemtype="https://schema.org/Answer"><meta itemprop="position" content="2"><span itemprop="text">Right</span></li>
  <li itemprop="suggestedAnswer" itemscope itemtype="https://schema.org/Answer"><meta itemprop="position" content="3"><span itemprop="text">Up</span></li></ul>
 </div></div></body></html>"""


def test_schema_org_quiz_pages_crawl_with_no_layout_file(tmp_path):
    ld_page = ("<!DOCTYPE html><html><head><title>Quiz</title><script type=\"application/ld+json\">"
               + json.dumps(QUIZ_LD) + "</script></head><body><h1>Fractions</h1></body></html>")
    routes = {"/": page('<!doctype html><html><body><a href="/ld.html">a</a><a href="/md.html">b</a></body></html>'),
              "/ld.html": page(ld_page), "/md.html": page(QUIZ_MICRODATA),
              "/img/circle.png": page(real_png(4), "image/png"), "/img/forces.png": page(real_png(5), "image/png")}
    with Site(routes) as site:
        home = DataHome(tmp_path / "home")
        _, questions, quarantine = _crawl_and_land(site.base_url, site.base_url, home)
    assert quarantine.height == 0, quarantine.rows()
    rows = {r["source_key"][len(site.base_url):]: r for r in questions.iter_rows(named=True)}
    ld, md = rows["ld.html"], rows["md.html"]
    assert (ld["subject"], ld["grade"], ld["skill"]) == ("math", "Grade 5", "adding-fractions")
    assert ld["choices"] == ["1/2", "3/4", "1/3"] and ld["answer_idx"] == 1 and ld["problem_image"] is not None
    assert ld["problem"] == "What fraction of the circle is shaded?"
    assert (md["subject"], md["skill"]) == ("science", "newton-s-laws")
    assert md["choices"] == ["Left", "Right", "Up"] and md["answer_idx"] == 1 and md["problem_image"] is not None


def test_schema_org_questions_that_are_not_usable_are_refused():
    checkbox = json.loads(json.dumps(QUIZ_LD))
    checkbox["hasPart"][0]["eduQuestionType"] = "Checkbox"
    no_answer = json.loads(json.dumps(QUIZ_LD))
    del no_answer["hasPart"][0]["acceptedAnswer"]
    for data, reason in ((checkbox, "not multiple choice"), (no_answer, "exactly one accepted answer")):
        body = f'<html><head><script type="application/ld+json">{json.dumps(data)}</script></head></html>'
        with pytest.raises(PageParseError, match=reason):
            parse_page("http://h/q", body)


def test_schema_org_texts_written_in_html_read_as_shown():
    data = json.loads(json.dumps(QUIZ_LD))
    question = data["hasPart"][0]
    question["text"] = "<p>What is 3<sup>2</sup> &minus; 1?</p>"
    question["acceptedAnswer"]["text"] = "<b>8</b>"
    body = f'<html><head><script type="application/ld+json">{json.dumps(data)}</script></head></html>'
    [parsed] = parse_page("http://h/q", body)
    assert parsed.problem == "What is 3² − 1?" and parsed.choices == ("1/2", "8", "1/3")
    question["text"] = '<p>Which is <img src="/f.png"> equal to?</p>'
    body = f'<html><head><script type="application/ld+json">{json.dumps(data)}</script></head></html>'
    with pytest.raises(PageParseError, match="holds a picture in its HTML"):
        parse_page("http://h/q", body)


def test_layout_sources_and_files(tmp_path, monkeypatch):
    assert {"ixl", "proprofs", "triviaplaza", "opendsa"} <= set(shipped_layout_names())
    spec = parse_source_spec("http://example.test/?layout=opendsa")
    assert spec.location == "http://example.test/" and spec.options == {"layout": "opendsa"}
    (tmp_path / "mine.yaml").write_text("name: mine\nmatch: div\ntext: p\noptions: li\nanswer: {css: b, is: letter}\n")
    monkeypatch.chdir(tmp_path)
    spec = parse_source_spec("http://example.test/?layout=mine.yaml")
    assert spec.options == {"layout": str(tmp_path / "mine.yaml")}
    with pytest.raises(SourceSpecError, match="neither a file nor a shipped layout"):
        parse_source_spec("http://example.test/?layout=nosuch.yaml")
    for text, fragment in (("name: x\nmatch: div\n", "options is required"),
                           ("name: x\nmatch: 'div[['\ntext: p\noptions: li\nanswer: b\n", "invalid CSS selector"),
                           ("name: x\nmatch: div\ntext: p\noptions: li\nanswer: {css: b, is: guess}\n", "answer.is"),
                           ("name: x\nmatch: div\ntext: p\noptions: li\nanswer: b\ncolour: red\n", "unknown keys: colour"),
                           ("- a list\n", "mapping")):
        with pytest.raises(LayoutError, match=fragment):
            layout_from_text(text, "t")


def test_layout_links_restrict_what_the_crawler_follows(tmp_path):
    listing = ('<!doctype html><html><body><ul class="questions"><li><a href="/q1">1</a></li></ul>'
               '<a href="/about">about</a><a rel="next" href="/?page=2">next</a></body></html>')
    routes = {"/": page(listing), "/?page=2": page("<!doctype html><html><body></body></html>"),
              "/q1": page("<!doctype html><html><body></body></html>"), "/about": page("<html></html>")}
    with Site(routes) as site:
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, follow=("ul.questions a", "a[rel=next]")),
              tmp_path / "raw")
        assert "/about" not in site.paths() and {"/q1", "/?page=2"} <= site.paths()


def test_lazy_loaded_and_inline_pictures_are_the_pictures_a_reader_sees(tmp_path):
    """A lazy-loading page keeps the picture's address in data-src (src a placeholder); a page
    may write its picture in itself as a data: URI; srcset alone names one too."""
    import base64

    layout_file = tmp_path / "lazy.yaml"
    layout_file.write_text("name: lazy\nmatch: div.quiz\ntext: p.question\nimage: img\noptions: ul.choices > li\n"
                           "answer: {css: div.answer, is: text}\nsubject: {value: math}\nskill: {value: shapes}\n")
    placeholder = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
    inline = "data:image/png;base64," + base64.b64encode(real_png(5)).decode()

    def quiz(img: str) -> str:
        return (f'<!doctype html><html><body><div class="quiz"><p class="question">Which shape is shown?</p>{img}'
                '<ul class="choices"><li>circle</li><li>square</li></ul><div class="answer">square</div></div></body></html>')

    routes = {"/": page('<!doctype html><html><body><a href="/a.html">a</a> <a href="/b.html">b</a> '
                        '<a href="/c.html">c</a></body></html>'),
              "/a.html": page(quiz(f'<img class="lazyload" src="{placeholder}" data-src="/img/a.png" alt="a">')),
              "/b.html": page(quiz(f'<img src="{inline}" alt="b">')),
              "/c.html": page(quiz('<img srcset="/img/c.png 1x, /img/c2.png 2x" alt="c">')),
              "/img/a.png": page(real_png(3), "image/png"), "/img/c.png": page(real_png(4), "image/png")}
    with Site(routes) as site:
        home = DataHome(tmp_path / "home")
        _, questions, quarantine = _crawl_and_land(site.base_url, f"{site.base_url}?layout={layout_file}", home)
    assert quarantine.height == 0, quarantine.rows()
    store = ImageStore(home.images)
    pictures = {row["source_key"].rsplit("/", 1)[1]: store.read(row["problem_image"])[0]
                for row in questions.rows(named=True)}
    assert pictures == {"a.html": real_png(3), "b.html": real_png(5), "c.html": real_png(4)}
