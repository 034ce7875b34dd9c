"""Page parsers of the three quiz layouts, against the demo site served on loopback."""

from __future__ import annotations

import random
from html.parser import HTMLParser
from html import escape

import pytest
import requests

from pipelines.ingest.demo_site.generator import SiteConfig
from pipelines.ingest.demo_site.server import start_site
from pipelines.ingest.demo_site.truth import read_truth, write_truth
from pipelines.ingest.web_parsers import PageParseError, ParsedQuestion, detect_layout, build_dom, parse_page

CONFIG = SiteConfig(seed=11, questions=3000)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(running site, truth questions, {url: page bytes}) for every technology question, ~300 others
    and a fifth of those with special characters (so the sample always has them)."""
    path = write_truth(CONFIG, tmp_path_factory.mktemp("t") / "truth.jsonl")
    _, questions = read_truth(path)
    special = [q for q in questions if any(ch in q["problem"] + "".join(q["choices"] or []) for ch in "<\u2212\u00a0\u200b")]
    chosen = [q for q in questions if q["subject"] == "technology"] + questions[::10] + special[::5]
    with start_site(CONFIG) as running:
        s = requests.Session()
        pages = {}
        for q in chosen:
            r = s.get(running.base_url + q["url"][1:])
            assert r.status_code == 200
            pages[r.url] = (q, r.content)
        yield running, pages


def _expected_image_url(base: str, url: str | None, spec: dict | None) -> None:
    assert (url is None) == (spec is None)
    if spec is not None:
        assert url.startswith(base) and url.endswith(f"{spec['key']}.{spec['format']}")


def test_every_field_of_every_question(served):
    running, pages = served
    layouts = set()
    for url, (q, body) in pages.items():
        [p] = parse_page(url, body)
        assert isinstance(p, ParsedQuestion)
        layouts.add(p.layout)
        assert (p.layout, p.subject, p.grade, p.skill) == (q["layout"], q["subject"], q["grade"], q["skill"])
        assert p.problem == q["problem"]
        assert p.answer_idx == q["answer_idx"]
        assert p.choices == (tuple(q["choices"]) if q["choices"] is not None else None)
        _expected_image_url(running.base_url, p.problem_image_url, q["problem_image"])
        if q["choice_images"] is None:
            assert p.choice_image_urls is None
        else:
            assert len(p.choice_image_urls) == len(q["choice_images"])
            for u, spec in zip(p.choice_image_urls, q["choice_images"]):
                _expected_image_url(running.base_url, u, spec)
        assert list(p.image_alts) == q["image_alts"]
    assert layouts == {"ixl", "proprofs", "triviaplaza"}


def test_special_text_survives(served):
    _, pages = served
    seen = set()
    for url, (q, body) in pages.items():
        [p] = parse_page(url, body)
        for ch, name in (("\u00a0", "nbsp"), ("\u200b", "zero-width"), ("\n", "newline"), ("<", "lt"), ("\u2212", "minus")):
            if ch in q["problem"] or any(ch in c for c in q["choices"] or []):
                seen.add(name)
                assert p.problem == q["problem"]
    assert {"lt", "minus"} <= seen


def test_non_question_pages_give_nothing(served):
    running, _ = served
    s = requests.Session()
    for path in ("", "math/", "quiz-school/topic/technology/", "en/trivia/category/technology/", "robots.txt", "sitemap.xml"):
        r = s.get(running.base_url + path)
        assert parse_page(r.url, r.content) == []
    sk = next(k for k in running.site.skills() if k.count)
    from pipelines.ingest.demo_site.layouts import skill_path

    r = s.get(running.base_url + skill_path(sk)[1:])
    assert parse_page(r.url, r.text) == []


def test_truncated_pages_raise(served):
    _, pages = served
    rng = random.Random(5)
    per_layout = {}
    for url, (q, body) in pages.items():
        per_layout.setdefault(q["layout"], []).append((url, body))
    for layout, items in per_layout.items():
        for url, body in items[:15]:
            for frac in (0.2, 0.45, 0.55, 0.7, 0.9, 0.98):
                with pytest.raises(PageParseError) as err:
                    parse_page(url, body[: int(len(body) * frac)])
                assert "\n" not in str(err.value)
            cut = rng.randrange(len(body) // 4, len(body) - 10)
            with pytest.raises(PageParseError):
                parse_page(url, body[:cut])


class _Reformat(HTMLParser):
    """Re-serialize a page with reversed attribute order, single quotes, upper-case tags
    and extra white space between tags (not inside texts)."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.out = []

    def _attrs(self, attrs):
        return "".join(f" {k.upper() if k == 'class' else k}='{escape(v or '', quote=True)}'" if v is not None else f" {k}"
                       for k, v in reversed(attrs))

    def handle_starttag(self, tag, attrs):
        self.out.append(f"<{tag.upper()}{self._attrs(attrs)}  >\n  ")

    def handle_startendtag(self, tag, attrs):
        self.out.append(f"<{tag}{self._attrs(attrs)} />\n")

    def handle_endtag(self, tag):
        self.out.append(f"\n </{tag.upper()} >\n")

    def handle_data(self, data):
        self.out.append(data)

    def handle_entityref(self, name):
        self.out.append(f"&{name};")

    def handle_charref(self, name):
        self.out.append(f"&#{name};")

    def handle_decl(self, decl):
        self.out.append(f"<!{decl}>")


def test_markup_variations_parse_the_same(served):
    _, pages = served
    n = 0
    for url, (q, body) in list(pages.items())[::5]:
        f = _Reformat()
        f.feed(body.decode())
        f.close()
        variant = "".join(f.out)
        assert variant != body.decode()
        assert parse_page(url, variant) == parse_page(url, body)
        n += 1
    assert n > 20


def test_relative_image_urls_become_absolute():
    page = ("<html><body><main id='practice' data-skill='s' data-subject='math' data-grade='grade-1'>"
            "<div class='question-area'><div class='question-text'><p>How many?</p></div>"
            "<div class='question-image'><img alt='x' src='../pics/a.png'></div>"
            "<div class='answer-choices'><div class='choice-tile' data-index='0'>1</div>"
            "<div class='choice-tile' data-index='1'>2</div></div></div>"
            "<section class='explanation'><div class='correct-answer' data-answer-index='1'></div></section>"
            "</main></body></html>")
    [p] = parse_page("http://example.test/a/b/c", page)
    assert p.problem_image_url == "http://example.test/a/pics/a.png"
    assert p.choices == ("1", "2") and p.answer_idx == 1 and p.grade == "grade-1"


def test_malformed_question_pages_raise_one_line_errors():
    base = ("<html><body><main id='practice' data-skill='s' data-subject='math' data-grade='grade-1'>"
            "<div class='question-area'><div class='question-text'><p>Q</p></div>"
            "<div class='answer-choices'>{choices}</div></div>"
            "<section class='explanation'><div class='correct-answer' data-answer-index='{ans}'></div></section>"
            "</main></body></html>")
    two = "<div class='choice-tile'>a</div><div class='choice-tile'>b</div>"
    assert parse_page("http://h/", base.format(choices=two, ans=0))
    for choices, ans in ((two, 5), (two, "x"), ("<div class='choice-tile'>a</div>", 0),
                         ("<div class='choice-tile'>a</div><div class='choice-tile'><img src='i.png'></div>", 0)):
        with pytest.raises(PageParseError) as err:
            parse_page("http://h/", base.format(choices=choices, ans=ans))
        assert "\n" not in str(err.value)
    bad_ld = ("<html><head><script type='application/ld+json'>{not json</script></head><body>"
              "<ul class='crumbs'><li><a href='/'>T</a></li><li><a href='/c/technology/'>T</a></li><li><a href='/q/x/'>X</a></li></ul>"
              "<article class='trivia-question'><p class='trivia-question__text'>Q</p><ol class='trivia-answers'>"
              "<li class='trivia-answer'><button>a</button></li><li class='trivia-answer'><button>b</button></li></ol>"
              "</article></body></html>")
    with pytest.raises(PageParseError, match="JSON-LD"):
        parse_page("http://h/", bad_ld)


def test_arbitrary_bytes_never_crash(served):
    _, pages = served
    rng = random.Random(1)
    bodies = [b for _, b in pages.values()][:20]
    samples = [b"", b"\x00\xff\xfe", bytes(range(256)) * 3, b"<html", b"<<<>>>&&&#;;", b"<div class='question-area'>",
               "<table class='question_table'><tr><td>\u00e9".encode("latin-1"), b"<?xml version='1.0'?><x/>"]
    for _ in range(300):
        n = rng.randrange(0, 400)
        samples.append(bytes(rng.randrange(256) for _ in range(n)))
    for body in bodies:
        for _ in range(10):  # mutate real pages: flip, drop and duplicate bytes
            b = bytearray(body)
            for _ in range(rng.randrange(1, 30)):
                j = rng.randrange(len(b))
                op = rng.randrange(3)
                if op == 0:
                    b[j] = rng.randrange(256)
                elif op == 1:
                    del b[j: j + rng.randrange(1, 40)]
                else:
                    b[j:j] = b[j: j + rng.randrange(1, 40)]
            samples.append(bytes(b))
    outcomes = {"ok": 0, "error": 0}
    for body in samples:
        try:
            parse_page("http://127.0.0.1/x", body)
            outcomes["ok"] += 1
        except PageParseError as exc:
            assert "\n" not in str(exc)
            outcomes["error"] += 1
    assert outcomes["ok"] and outcomes["error"]


def test_layout_detection_does_not_depend_on_urls(served):
    _, pages = served
    for url, (q, body) in list(pages.items())[:40]:
        dom, closed = build_dom(body.decode())
        assert closed and detect_layout(dom) == q["layout"]
        [p] = parse_page("http://elsewhere.test/some/page.html", body)
        assert (p.subject, p.skill, p.answer_idx) == (q["subject"], q["skill"], q["answer_idx"])
