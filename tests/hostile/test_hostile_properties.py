"""Property-based tests (hypothesis): the page parsers, the importers and the LaTeX converter
never crash on hostile input.

These extend the properties elsewhere (``test_latex.py``: ``convert_text`` on any short text;
``test_importers.py``: the jsonl importer on arbitrary lines; ``test_web_parsers.py``: a seeded
random-bytes loop) with: generated HTML in the layouts' own vocabulary, byte-level mutations
of real demo pages of every layout, arbitrary URLs, arbitrary ``problems.json`` documents and
Parquet shards with arbitrary values and bytes, and LaTeX-laden and markup-laden text for the
converter and the LaTeX validator. Each property runs derandomized and in a few seconds.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig
from pipelines.ingest.demo_site.layouts import question_page
from pipelines.store.images import ImageStore
from pipelines.clean.latex.convert import convert_line, convert_text, invalid_formulas
from pipelines.store.records import QuarantineEntry, RawQuestion, validate_raw_question
from pipelines.ingest.importers import iter_import_records
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.web_parsers import PageParseError, parse_page
from support.images import bomb_images, real_png

QUICK = settings(max_examples=150, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _demo_pages() -> list[bytes]:
    site = DemoSite(SiteConfig(seed=5, questions=300))
    pages: dict[tuple[str, bool], bytes] = {}
    for i in site.indices():
        q = site.question(i)
        pages.setdefault((q.layout, q.choices is None), question_page(site, q).encode())
        if len(pages) == 6:
            break
    return [pages[k] for k in sorted(pages)]


DEMO_PAGES = _demo_pages()


def _parse_or_refuse(url: str, body) -> list:
    """parse_page's contract: questions (each structurally sound) or PageParseError, nothing else."""
    try:
        questions = parse_page(url, body)
    except PageParseError as exc:
        assert str(exc) and "\n" not in str(exc)
        return []
    for q in questions:
        assert 2 <= q.num_choices and 0 <= q.answer_idx < q.num_choices
        assert (q.choices is None) != (q.choice_image_urls is None)
    return questions


# ---------------------------------------------------------------- page parsers

_TAGS = ["div", "p", "span", "a", "img", "table", "tr", "td", "ol", "ul", "li", "button", "main", "nav", "article",
         "figure", "script", "b", "body"]
_CLASSES = ["question-area", "question-text", "question-image", "answer-choices", "choice-tile", "correct-answer",
            "breadcrumbs", "question_table", "question_text", "question_pic", "options_table", "option_row", "opt_text",
            "opt_pic", "opt_letter", "answer_box", "correct_opt", "bread_crumb", "crumbs", "trivia-question",
            "trivia-question__text", "trivia-question__media", "trivia-answers", "trivia-answer"]
_ATTRS = st.one_of(
    st.builds(lambda c: f' class="{c}"', st.sampled_from(_CLASSES)),
    st.builds(lambda v: f' data-index="{v}"', st.sampled_from(["0", "1", "-1", "99999999999999999999", "x", ""])),
    st.builds(lambda v: f' data-answer-index="{v}"', st.sampled_from(["0", "1", "-3", "٣", " 2 ", "1e3"])),
    st.builds(lambda v: f' src="{v}"', st.sampled_from(["/i.png", "", "http://[::1", "javascript:x", "//h/x.png"])),
    st.builds(lambda v: f' href="{v}"', st.sampled_from(["/math/", "/math/grade-1/", "/s/skill/", "", "http://[x"])),
    st.sampled_from([' id="practice"', ' id="quiz_container"', ' data-subject="math"', ' data-skill="s"',
                     ' type="application/ld+json"', " alt", ' onerror="alert(1)"']),
)
_TEXT = st.sampled_from(["", "x", "Which?", "&amp;", "&#0;", "&#x110000;", "<", ">", "A.", "B.", "\u0000", "é",
                         '{"hasPart":[{"acceptedAnswer":{"position":1}}]}', "{", "[" * 50, "\n"])


# (tag, attributes) pairs the layouts look for, so generated pages reach the layout parsers
_LAYOUT_ELEMENTS = [
    ("main", ' id="practice" data-subject="math" data-grade="grade-2" data-skill="s"'), ("div", ' class="question-area"'),
    ("div", ' class="question-text"'), ("div", ' class="question-image"'), ("div", ' class="answer-choices"'),
    ("div", ' class="choice-tile" data-index="1"'), ("div", ' class="correct-answer" data-answer-index="1"'),
    ("nav", ' class="breadcrumbs"'), ("div", ' class="bread_crumb"'), ("table", ' class="question_table"'),
    ("td", ' class="question_text"'), ("td", ' class="question_pic"'), ("table", ' class="options_table"'),
    ("tr", ' class="option_row"'), ("td", ' class="opt_letter"'), ("td", ' class="opt_text"'), ("td", ' class="opt_pic"'),
    ("div", ' class="answer_box"'), ("span", ' class="correct_opt"'), ("ul", ' class="crumbs"'),
    ("article", ' class="trivia-question"'), ("p", ' class="trivia-question__text"'),
    ("figure", ' class="trivia-question__media"'), ("ol", ' class="trivia-answers"'), ("li", ' class="trivia-answer"'),
    ("script", ' type="application/ld+json"'), ("a", ' href="/math/"'), ("a", ' href="/math/grade-2/"'),
    ("a", ' href="/s/skill/"'), ("img", ' src="/i.png" alt="a"'), ("button", ""),
]


def _element(children):
    layout = st.sampled_from(_LAYOUT_ELEMENTS).flatmap(
        lambda pair: st.tuples(st.just(pair[0]), st.lists(_ATTRS, max_size=1).map(lambda a: pair[1] + "".join(a))))
    other = st.tuples(st.sampled_from(_TAGS), st.lists(_ATTRS, max_size=3).map("".join))
    return st.builds(lambda tag_attrs, kids, close: f"<{tag_attrs[0]}{tag_attrs[1]}>{''.join(kids)}"
                     + (f"</{tag_attrs[0]}>" if close else ""),
                     layout | other, st.lists(children, max_size=5), st.integers(0, 4).map(lambda n: n > 0))


_HTML_FRAGMENT = st.recursive(_TEXT, _element, max_leaves=40)
_DOCUMENT = st.builds(lambda body, end: "<!DOCTYPE html><html><body>" + body + ("</body></html>" if end else ""),
                      st.lists(_HTML_FRAGMENT, max_size=6).map("".join), st.integers(0, 9).map(lambda n: n > 0))


@QUICK
@given(url=st.text(max_size=40) | st.sampled_from(["http://h/q", "http://[::1", "", "javascript:alert(1)"]),
       body=st.binary(max_size=600) | st.text(max_size=600))
def test_parse_page_on_arbitrary_bytes_text_and_urls(url, body):
    _parse_or_refuse(url, body)


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCUMENT)
def test_parse_page_on_generated_layout_markup(document):
    _parse_or_refuse("http://h/q", document)


_MUTATION = st.tuples(st.integers(0, 10**6), st.sampled_from(["flip", "drop", "dup", "insert", "cut"]),
                      st.integers(1, 64), st.binary(min_size=1, max_size=16)
                      | st.sampled_from([b"<", b">", b"</div>", b"<div>", b'"', b"<!--", b"\xff", b"<li>", b"</tr>"]))


def _mutate(page: bytes, mutations) -> bytes:
    data = bytearray(page)
    for position, op, length, payload in mutations:
        if not data:
            break
        at = position % len(data)
        if op == "flip":
            data[at] ^= payload[0] or 1
        elif op == "drop":
            del data[at: at + length]
        elif op == "dup":
            data[at:at] = data[at: at + length]
        elif op == "insert":
            data[at:at] = payload
        else:
            del data[at:]
    return bytes(data)


@QUICK
@given(page=st.sampled_from(range(len(DEMO_PAGES))), mutations=st.lists(_MUTATION, min_size=1, max_size=8))
def test_parse_page_on_mutated_real_demo_pages(page, mutations):
    original = DEMO_PAGES[page]
    [expected] = parse_page("http://demo.localhost/q", original)
    for q in _parse_or_refuse("http://demo.localhost/q", _mutate(original, mutations)):
        assert q.layout == expected.layout


# ---------------------------------------------------------------- importers

_JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) \
    | st.sampled_from(["natural science", "A", "image.png", "../image.png", "/etc/passwd", "train", "grade3", "1"])
_JSON = st.recursive(_JSON_LEAF, lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)
_ITEM = st.fixed_dictionaries(
    {},
    optional={"question": _JSON, "choices": st.lists(st.text(max_size=6), max_size=6) | _JSON,
              "answer": st.integers(-2, 6) | _JSON, "subject": st.sampled_from(["natural science", "social science"]) | _JSON,
              "grade": _JSON, "category": _JSON, "split": st.sampled_from(["train", "val", "test", ".."]) | _JSON,
              "image": st.sampled_from(["image.png", "bomb.png", "../../image.png", "missing.png", ""]) | _JSON},
)


@QUICK
@given(problems=st.dictionaries(st.sampled_from(["1", "2", "3", "..", "a/b", ""]) | st.text(max_size=5),
                                _ITEM | _JSON, max_size=5) | _JSON,
       cut=st.none() | st.integers(0, 400))
def test_scienceqa_importer_never_raises_past_its_start_up_errors(problems, cut):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sqa"
        for qid in ("1", "2", "3"):
            (folder / "images" / "train" / qid).mkdir(parents=True)
            (folder / "images" / "train" / qid / "image.png").write_bytes(real_png(int(qid)))
            (folder / "images" / "train" / qid / "bomb.png").write_bytes(bomb_images()["png-declares-50000x50000"][0])
        text = json.dumps(problems, allow_nan=True).encode()
        (folder / "problems.json").write_bytes(text if cut is None else text[:cut])
        records = list(iter_import_records(parse_source_spec(f"scienceqa:{folder}"), ImageStore(Path(tmp) / "store")))
        _check_records(records, "problems.json")


def _check_records(records, file_name: str) -> None:
    keys = [r.source_key for r in records]
    assert len(keys) == len(set(keys))
    for record in records:
        assert isinstance(record, (RawQuestion, QuarantineEntry))
        name = record.source_key.split("#")[0]
        assert name == file_name if file_name else name.endswith(".parquet")
        if isinstance(record, RawQuestion):
            assert validate_raw_question(record) is None
        else:
            assert record.reason and "\n" not in record.reason


_BYTES = st.binary(max_size=40) | st.sampled_from([real_png(40), bomb_images()["png-declares-50000x50000"][0], b""])
_STEM_TYPES = {
    "subject": (pa.string(), st.none() | st.sampled_from(["math", "science", "art", ""]) | st.text(max_size=6)),
    "grade": (pa.string(), st.none() | st.text(max_size=8)),
    "skill": (pa.string(), st.none() | st.text(max_size=8)),
    "pic_choice": (pa.bool_(), st.none() | st.booleans()),
    "pic_prob": (pa.bool_(), st.none() | st.booleans()),
    "problem": (pa.string(), st.none() | st.text(max_size=20)),
    "problem_pic": (pa.binary(), st.none() | _BYTES),
    "choices": (pa.list_(pa.string()), st.none() | st.lists(st.none() | st.text(max_size=5), max_size=6)),
    "choices_pic": (pa.list_(pa.binary()), st.none() | st.lists(st.none() | _BYTES, max_size=6)),
    "answer_idx": (pa.int64(), st.none() | st.integers(-(2**63), 2**63 - 1)),
}
_STEM_ROW = st.fixed_dictionaries({name: values for name, (_, values) in _STEM_TYPES.items()})


@QUICK
@given(rows=st.lists(_STEM_ROW, max_size=5), drop=st.none() | st.sampled_from(sorted(_STEM_TYPES)),
       cut=st.none() | st.integers(0, 5000), garbage=st.none() | st.binary(max_size=200))
def test_stem_parquet_importer_never_raises_past_its_start_up_errors(rows, drop, cut, garbage):
    schema = pa.schema([(name, kind) for name, (kind, _) in _STEM_TYPES.items() if name != drop])
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "STEM" / "data"
        data.mkdir(parents=True)
        shard = data / "train-00000-of-00002.parquet"
        table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != drop} for r in rows], schema=schema)
        buffer = io.BytesIO()
        pq.write_table(table, buffer, row_group_size=2)
        body = buffer.getvalue()
        shard.write_bytes(body if cut is None else body[:cut])
        if garbage is not None:
            (data / "test-00001-of-00002.parquet").write_bytes(garbage)
        records = list(iter_import_records(parse_source_spec(f"stem-parquet:{Path(tmp) / 'STEM'}"),
                                           ImageStore(Path(tmp) / "store")))
        _check_records(records, "")
        if cut is None and drop is None:  # a readable shard: every row is accounted for
            assert sum(r.source_key.startswith(shard.name + "#") for r in records) == len(rows)


# ---------------------------------------------------------------- the LaTeX converter

_HOSTILE_MATH = st.lists(
    st.sampled_from(
        list("0123456789+-−×÷·=<>≤≥/^_()[]{}√²³₁½π°∠△ xyab.,:;!?%&$#@\\'\"`~|\t\n\u00a0\u200b\u0000")
        + [r"\(", r"\)", r"\[", r"\]", r"\frac{", r"\sqrt", "}{", "$$", "<script>", "</script>", "<img src=x onerror=alert(2)>",
           "&lt;", "&#x3c;", "javascript:", "𝑥", "ﬁ", "Å", "e\u0301", "\U0001F600", "3/4/2020", "3:45", "1e309", "NaN"]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_HOSTILE_MATH)
def test_convert_text_never_raises_on_markup_and_latex_laden_text(text):
    result = convert_text(text)
    assert isinstance(result.text, str)
    assert result.error is None or "\n" not in result.error
    assert convert_text(result.text).text == result.text  # idempotent even on hostile text
    line = convert_line(text.replace("\n", " "))
    assert "\n" not in line


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_HOSTILE_MATH)
def test_invalid_formulas_never_raises_on_imported_latex(text):
    for formula, reason in invalid_formulas(text):
        assert isinstance(formula, str) and reason and "\n" not in reason


@pytest.mark.parametrize("text", [
    "(" * 5000 + "x" + ")" * 5000,
    "√" * 5000 + "2",
    "²" * 20000,
    "1" * 100_000 + "/2",
    "x=" * 20000 + "1",
    r"\( " * 5000,
    r"\frac{" * 3000 + "1",
    "<script>" * 10000,
])
def test_convert_text_survives_huge_pathological_lines(text):
    result = convert_text(text)
    assert isinstance(result.text, str) and (result.error is None or "\n" not in result.error)
    invalid_formulas(text)
