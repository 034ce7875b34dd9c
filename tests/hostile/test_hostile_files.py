"""Malformed and truncated HTML, JSON and Parquet; path traversal in image names; pages built
to make parsers slow. Every bad page raises PageParseError (never anything else); every bad
record or file is quarantined with its reason by ``land_source`` while the rest of the
import goes on; every path that leaves the source's folder is refused with a reason.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig
from pipelines.ingest.demo_site.layouts import question_page
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.ingest.stage import land_source
from pipelines.ingest.importers import ImportSourceError, iter_import_records
from pipelines.ingest.importers.jsonl import MAX_LINE_BYTES
from pipelines.ingest.spec import parse_source_spec
from pipelines.ingest.web_parsers import MAX_DEPTH, PageParseError, parse_page
from support.images import real_png


@pytest.fixture(scope="module")
def demo_pages() -> dict[str, str]:
    """One real page of each layout, from the demo site's renderer."""
    site = DemoSite(SiteConfig(seed=3, questions=300))
    pages: dict[str, str] = {}
    for i in site.indices():
        q = site.question(i)
        if q.layout not in pages and q.choices is not None:
            pages[q.layout] = question_page(site, q)
        if len(pages) == 3:
            return pages
    raise AssertionError("the demo site lacks a layout")


def land(tmp_path: Path, spec_text: str):
    home = DataHome(tmp_path / "home")
    outcome = land_source(parse_source_spec(spec_text), home, ImageStore(home.images))
    return pl.read_parquet(outcome.question_file), pl.read_parquet(outcome.quarantine_file)


def reasons(quarantine: pl.DataFrame) -> dict[str, str]:
    assert quarantine["reason"].str.contains("\n").sum() == 0
    return dict(zip(quarantine["source_key"], quarantine["reason"]))


# ---------------------------------------------------------------- HTML


def hostile_variants(page: str) -> dict[str, str | bytes]:
    end = page.rindex("</html>")
    return {
        "cut-before-end": page[:end],
        "cut-at-half": page[: len(page) // 2],
        "cut-at-first-tag": page[:20],
        "cut-inside-attribute": page[: page.index('class="') + 9],
        "cut-inside-comment": page[:end] + "<!-- never closed",
        "every-tag-unclosed": page.replace("</div>", "").replace("</li>", "").replace("</td>", "").replace("</tr>", ""),
        "end-tags-only": "".join(part for part in page.split("<") if part.startswith("/")),
        "nested-too-deep": page.replace("<body", "<div>" * (MAX_DEPTH + 10) + "<body", 1),
        "nul-and-invalid-utf8": page.encode()[:300] + b"\x00\xff\xfe\xc3" + page.encode()[300:],
        "utf-16-bytes": page.encode("utf-16"),
        "charset-lies": page.replace("utf-8", "x-no-such-charset").encode(),
        "script-inside-question": page.replace("<p", "<script>alert(1)</script><p", 1),
        "classes-without-content": '<html><div class="question-area"></div><table class="question_table"></table></html>',
        "json-ld-broken": page.replace('<script type="application/ld+json">{', '<script type="application/ld+json">{{', 1),
        "json-ld-deep": page.replace('<script type="application/ld+json">', '<script type="application/ld+json">' + "[" * 100_000, 1),
        "json-ld-huge-number": page.replace('"position": ', '"position": 1' + "0" * 5000, 1),
        "answer-index-huge": page.replace('data-answer-index="', 'data-answer-index="9' * 3, 1),
        "entity-soup": page.replace("</title>", "&#x110000;&#0;&#xD800;&bogus;&#99999999999;</title>", 1),
    }


def _shown(q):
    return (q.layout, q.subject, q.skill, q.problem, q.choices, q.choice_image_urls, q.answer_idx)


def test_malformed_and_truncated_pages_only_ever_raise_page_parse_error(demo_pages):
    """Each variant raises PageParseError, is no question page, or still gives exactly the
    original question: never a question with wrong fields."""
    outcomes = {"refused": 0, "no question": 0, "same question": 0}
    for layout, page in demo_pages.items():
        [original] = parse_page("http://demo.localhost/q", page)
        for name, variant in hostile_variants(page).items():
            try:
                questions = parse_page("http://demo.localhost/q", variant)
            except PageParseError as exc:
                outcomes["refused"] += 1
                assert "\n" not in str(exc) and str(exc), (layout, name)
                continue
            assert [_shown(q) for q in questions] in ([], [_shown(original)]), (layout, name)
            outcomes["same question" if questions else "no question"] += 1
    assert sum(outcomes.values()) == 3 * 18 and outcomes["refused"] >= 3 * 8, outcomes


def test_truncated_and_too_deep_pages_are_refused_with_the_reason(demo_pages):
    for layout, page in demo_pages.items():
        variants = hostile_variants(page)
        with pytest.raises(PageParseError, match="truncated"):
            parse_page("http://h/", variants["cut-before-end"])
        with pytest.raises(PageParseError, match=f"more than {MAX_DEPTH} deep"):
            parse_page("http://h/", variants["nested-too-deep"])


def test_markup_that_would_give_wrong_fields_is_refused_and_boms_are_honoured(demo_pages):
    """Each of these once parsed to a question with wrong fields or to nothing at all."""
    variants = {layout: hostile_variants(page) for layout, page in demo_pages.items()}
    with pytest.raises(PageParseError, match="options nested inside each other"):
        parse_page("http://h/", variants["ixl"]["every-tag-unclosed"])  # options held the rest of the page
    with pytest.raises(PageParseError, match="breadcrumbs that are not closed"):
        parse_page("http://h/", variants["proprofs"]["every-tag-unclosed"])  # the skill came from a later link
    with pytest.raises(PageParseError, match="malformed JSON-LD"):
        parse_page("http://h/", variants["triviaplaza"]["json-ld-deep"])
    for layout, page in demo_pages.items():
        [original] = parse_page("http://h/", page)
        [utf16] = parse_page("http://h/", variants[layout]["utf-16-bytes"])  # once: no question at all
        assert _shown(utf16) == _shown(original)


def _cpu_time(page: str) -> float:
    started = time.process_time()
    try:
        parse_page("http://h/", page)
    except PageParseError:
        pass
    return time.process_time() - started


def _ixl(tiles: str) -> str:
    return ('<!DOCTYPE html><html><body><main id="practice" data-subject="math" data-grade="grade-1" data-skill="s">'
            '<div class="question-area"><div class="question-text"><p>Q</p></div><div class="answer-choices">'
            f'{tiles}</div></div><div class="correct-answer" data-answer-index="0"></div></main></body></html>')


def _proprofs(rows: str) -> str:
    return ('<!DOCTYPE html><html><body><div class="bread_crumb"><a href="/">h</a><a href="/t/math/">Math</a>'
            '<a href="/q/skill/">S</a></div><table class="question_table"><tr><td class="question_text">Q</td></tr>'
            f'</table><table class="options_table">{rows}</table><div class="answer_box">'
            '<span class="correct_opt">A0.</span></div></body></html>')


PATHOLOGICAL = {
    "ixl-options": lambda n: _ixl("".join(f'<div class="choice-tile" data-index="{i}">o{i}</div>' for i in range(n))),
    "ixl-options-unclosed": lambda n: _ixl("".join(f'<div class="choice-tile"><span>o{i}' for i in range(n))),
    "proprofs-rows-unclosed": lambda n: _proprofs("".join(
        f'<tr class="option_row"><td class="opt_letter">A{i}.<td class="opt_text">o{i}' for i in range(n))),
    "links": lambda n: "<!DOCTYPE html><html><body>" + "".join(f'<a href="/p{i}">{i}</a>' for i in range(n)) + "</body></html>",
    "open-divs-then-stray-end-tags": lambda n: "<html><body>" + "<div>" * n + "</span>" * n + "</body></html>",
    "unclosed-list-items": lambda n: "<html><body><ul>" + "<li><b>x" * n + "</ul></body></html>",
    "lt-signs": lambda n: "<html><body>" + "<a " * n + "</body></html>",
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_parsers_stay_linear_on_100k_options_and_links(name):
    make = PATHOLOGICAL[name]
    n = 100_000 if name in ("ixl-options", "links") else 30_000  # the others are the same work in other shapes
    small_page, large_page = make(n // 20), make(n)
    small = min(_cpu_time(small_page) for _ in range(3))
    large = min(_cpu_time(large_page) for _ in range(2))
    assert large < 15.0, f"{name}: {n} elements took {large:.1f} s of CPU"
    # linear: about 20x (allocation adds some); quadratic would be about 400x. CPU time, not
    # wall time, so other work on the machine does not decide the verdict.
    assert large < 100 * max(small, 0.02), f"{name}: 20x the input took {large / max(small, 1e-9):.0f}x the time"


def test_unclosed_options_parse_like_closed_ones():
    closed = _proprofs("".join(f'<tr class="option_row"><td class="opt_letter">A{i}.</td><td class="opt_text">o{i}</td></tr>'
                               for i in range(4)))
    unclosed = _proprofs("".join(f'<tr class="option_row"><td class="opt_letter">A{i}.<td class="opt_text">o{i}'
                                 for i in range(4)))
    [a], [b] = parse_page("http://h/", closed), parse_page("http://h/", unclosed)
    assert a.choices == b.choices == ("o0", "o1", "o2", "o3") and a.answer_idx == b.answer_idx == 0


# ---------------------------------------------------------------- JSON (ScienceQA)


def _sqa_item(i: int, **changes):
    item = {"question": f"Question {i}?", "choices": ["a", "b", "c"], "answer": 1, "subject": "natural science",
            "grade": "grade4", "category": "Magnets", "split": "train", "image": None}
    item.update(changes)
    return item


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("truncated", lambda full: full[: len(full) // 2], "unreadable problems.json"),
        ("zero-bytes", lambda full: b"", "unreadable problems.json"),
        ("invalid-utf8", lambda full: full[:40] + b"\xff\xfe" + full[40:], "unreadable problems.json"),
        ("deeply-nested", lambda full: b"[" * 200_000, "unreadable problems.json"),
        ("a-list", lambda full: b"[1, 2, 3]", "is a JSON list"),
        ("a-string", lambda full: b'"problems"', "is a JSON str"),
        ("huge-integer", lambda full: b'{"1": {"answer": ' + b"9" * 10_000 + b"}}", "unreadable problems.json"),
    ],
)
def test_broken_problems_json_is_one_quarantine_entry(tmp_path, name, content, fragment):
    folder = tmp_path / "sqa"
    folder.mkdir()
    full = json.dumps({str(i): _sqa_item(i) for i in range(5)}).encode()
    (folder / "problems.json").write_bytes(content(full))
    questions, quarantine = land(tmp_path, f"scienceqa:{folder}")
    assert questions.height == 0
    [(key, reason)] = reasons(quarantine).items()
    assert key == "problems.json" and fragment in reason, reason


def test_bad_problems_json_items_are_quarantined_and_the_rest_lands(tmp_path):
    folder = tmp_path / "sqa"
    folder.mkdir()
    items = {
        "1": _sqa_item(1),
        "2": "not an object",
        "3": _sqa_item(3, answer=float("nan")),
        "4": _sqa_item(4, answer=10**30),
        "5": _sqa_item(5, choices="abc"),
        "6": _sqa_item(6, choices=[["nested"], "b"]),
        "7": _sqa_item(7, subject={"$gt": ""}),
        "8": _sqa_item(8, question=["<script>"]),
        "9": _sqa_item(9, grade=float("inf")),
        "10": _sqa_item(10, category=None, topic=None, skill=None),
        "11": _sqa_item(11),
    }
    text = json.dumps(items, allow_nan=True)  # NaN and Infinity: Python's json accepts them
    (folder / "problems.json").write_text(text)
    questions, quarantine = land(tmp_path, f"scienceqa:{folder}")
    assert questions["source_key"].to_list() == ["problems.json#0", "problems.json#10"]
    got = reasons(quarantine)
    assert len(got) == 9 and set(quarantine["stage"]) == {"import"}
    assert "expected an object" in got["problems.json#1"]
    assert "whole-number" in got["problems.json#2"]
    assert "out of range" in got["problems.json#3"]
    assert "list of texts" in got["problems.json#4"] and "list of texts" in got["problems.json#5"]
    assert "not text" in got["problems.json#6"] and "not text" in got["problems.json#7"]
    assert "school grade" in got["problems.json#8"] and "missing skill" in got["problems.json#9"]


# ---------------------------------------------------------------- JSON Lines


def test_cut_and_broken_jsonl_lines_are_quarantined_and_the_rest_lands(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "ok.png").write_bytes(real_png(20))

    def good(i: int) -> bytes:
        return json.dumps({"question": f"Good {i} ü?", "options": ["x", "y"], "answer": "B", "subject": "math",
                           "skill": "s", "image": "ok.png"}, ensure_ascii=False).encode()

    full = good(0)
    cut_in_char = full[: full.index("ü".encode()) + 1]  # ends inside a two-byte character
    lines = [
        good(0),
        full[: len(full) // 2],  # cut mid-object
        cut_in_char,
        b"\x00\x00\x00",
        b"[" * 100_000,
        b'{"question": "Q", "options": ["a", "b"], "answer": 1e999999, "subject": "math", "skill": "s"}',
        b'{"question": "Q", "options": "ab", "answer": 0, "subject": "math", "skill": "s"}',
        b'{"question": "Q", "options": ["a", "b"], "answer": 0, "subject": "math", "skill": "s", "image": {"x": 1}}',
        b'"just a string"',
        b"\xef\xbb\xbf" + good(9),  # a BOM is only allowed on the first line
        good(10) + b"\r",  # CRLF line ending: fine
        b"x" * (MAX_LINE_BYTES + 10),  # never held whole
        good(12),
        full[:-1],  # the last line, cut and without a newline
    ]
    path = folder / "q.jsonl"
    path.write_bytes(b"\n".join(lines))
    questions, quarantine = land(tmp_path, f"jsonl:{path}")
    assert questions["source_key"].to_list() == ["q.jsonl#0", "q.jsonl#10", "q.jsonl#12"]
    got = reasons(quarantine)
    assert sorted(got, key=lambda k: int(k.split("#")[1])) == [f"q.jsonl#{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13)]
    details = dict(zip(quarantine["source_key"], quarantine["detail"]))
    for i in (1, 4, 9, 13):  # one stable reason; the line is in the detail
        assert got[f"q.jsonl#{i}"] == "malformed JSON" and details[f"q.jsonl#{i}"].startswith(f"line {i + 1}: ")
    assert "not UTF-8" in got["q.jsonl#2"]
    # a text in options is read as options written in a text (issue 29.3): "ab" holds no labels
    assert "whole-number index" in got["q.jsonl#5"] and got["q.jsonl#6"] == "no labelled options in the options text"
    assert "not text" in got["q.jsonl#7"] and "not an object" in got["q.jsonl#8"]
    assert got["q.jsonl#11"] == f"line longer than {MAX_LINE_BYTES} bytes" and details["q.jsonl#11"] == "line 12"


# ---------------------------------------------------------------- Parquet

STEM_SCHEMA = pa.schema([("subject", pa.string()), ("grade", pa.string()), ("skill", pa.string()),
                         ("pic_choice", pa.bool_()), ("pic_prob", pa.bool_()), ("problem", pa.string()),
                         ("problem_pic", pa.binary()), ("choices", pa.list_(pa.string())),
                         ("choices_pic", pa.list_(pa.binary())), ("answer_idx", pa.int64())])


def stem_rows(n: int, seed: int = 0) -> list[dict]:
    return [{"subject": "science", "grade": "grade-3", "skill": "magnets", "pic_choice": False, "pic_prob": True,
             "problem": f"Which magnet {seed}-{i}?", "problem_pic": real_png(100 * seed + i), "choices": ["left", "right"],
             "choices_pic": None, "answer_idx": i % 2} for i in range(n)]


def test_broken_parquet_shards_are_quarantined_and_the_good_shard_lands(tmp_path):
    data = tmp_path / "STEM" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(stem_rows(3), schema=STEM_SCHEMA), data / "train-00000-of-00009.parquet")
    truncated = data / "train-00001-of-00009.parquet"
    pq.write_table(pa.Table.from_pylist(stem_rows(3, 1), schema=STEM_SCHEMA), truncated)
    truncated.write_bytes(truncated.read_bytes()[:-100])
    (data / "train-00002-of-00009.parquet").write_bytes(b"")
    (data / "train-00003-of-00009.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")  # magic, no footer
    wrong = pa.schema([("question", pa.string()), ("answer", pa.int64())])
    pq.write_table(pa.Table.from_pylist([{"question": "q", "answer": 1}], schema=wrong), data / "train-00004-of-00009.parquet")
    # the right names with the wrong types: text where lists belong, text where the answer index belongs
    mistyped = pa.schema([(f.name, pa.string() if f.name in ("choices", "choices_pic", "answer_idx") else f.type)
                          for f in STEM_SCHEMA])
    rows = [{**r, "choices": "left,right", "answer_idx": "1", "problem_pic": real_png(7)} for r in stem_rows(1)]
    rows.append({**rows[0], "answer_idx": None, "choices": None, "choices_pic": "not a list", "pic_choice": True})
    pq.write_table(pa.Table.from_pylist(rows, schema=mistyped), data / "train-00005-of-00009.parquet")
    os.symlink(tmp_path / "nowhere.parquet", data / "train-00006-of-00009.parquet")
    if hasattr(os, "mkfifo"):
        os.mkfifo(data / "train-00007-of-00009.parquet")  # opening it would block the import forever
    (data / "train-00008-of-00009.parquet").mkdir()  # a folder is not a shard

    questions, quarantine = land(tmp_path, f"stem-parquet:{tmp_path / 'STEM'}")
    assert questions["source_key"].to_list() == [f"train-00000-of-00009.parquet#{i}" for i in range(3)]
    got = reasons(quarantine)
    assert got["train-00001-of-00009.parquet"].startswith("unreadable Parquet shard")
    assert got["train-00002-of-00009.parquet"].startswith("unreadable Parquet shard")
    assert got["train-00003-of-00009.parquet"].startswith("unreadable Parquet shard")
    assert got["train-00004-of-00009.parquet"].startswith("shard is missing columns: subject")
    assert got["train-00005-of-00009.parquet#0"] == "choices is str, expected a list"
    assert got["train-00005-of-00009.parquet#1"] == "choices_pic is str, expected a list"
    assert got["train-00006-of-00009.parquet"] == "unreadable Parquet shard: a dangling link"
    if hasattr(os, "mkfifo"):
        assert got["train-00007-of-00009.parquet"] == "unreadable Parquet shard: not a regular file"
    assert not any(k.startswith("train-00008") for k in got)
    assert set(quarantine["stage"]) == {"import"}


# ---------------------------------------------------------------- path traversal


@pytest.fixture
def outside(tmp_path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "picture.png").write_bytes(real_png(30))  # a real image: only the path makes it wrong
    return secret


TRAVERSALS = {
    "../../etc/passwd": "escapes the folder",
    "../secret/picture.png": "escapes the folder",
    "/etc/passwd": "escapes the folder",
    "{outside}/picture.png": "escapes the folder",
    "sub/../../secret/picture.png": "escapes the folder",
    "link-out.png": "escapes the folder",
    "linked-dir/picture.png": "escapes the folder",
    "file:///etc/passwd": "is a URL",
    "http://127.0.0.1:9/x.png": "is a URL",
    "ok.png\u0000.txt": "NUL byte",
    "/dev/zero": "escapes the folder",
    "..\\..\\secret\\picture.png": "not found",  # a backslash is a plain character on POSIX
    ".": "not a regular file",
    "sub": "not a regular file",
}


def test_jsonl_image_paths_that_leave_the_folder_are_refused(tmp_path, outside):
    folder = tmp_path / "src"
    (folder / "sub").mkdir(parents=True)
    (folder / "ok.png").write_bytes(real_png(31))
    (folder / "link-out.png").symlink_to(outside / "picture.png")
    (folder / "linked-dir").symlink_to(outside)
    base = {"options": ["x", "y"], "answer": 0, "subject": "science", "skill": "s"}
    names = [n.format(outside=outside) for n in TRAVERSALS]
    lines = [{**base, "question": f"P{i}", "image": n} for i, n in enumerate(names)]
    lines += [{**base, "question": f"C{i}", "options": None, "choice_images": ["ok.png", n]} for i, n in enumerate(names)]
    lines.append({**base, "question": "fine", "image": str(folder / "ok.png")})  # absolute but inside: allowed
    path = folder / "q.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    questions, quarantine = land(tmp_path, f"jsonl:{path}")
    assert questions["source_key"].to_list() == [f"q.jsonl#{2 * len(names)}"]
    got = reasons(quarantine)
    for i, fragment in enumerate(TRAVERSALS.values()):
        for key in (f"q.jsonl#{i}", f"q.jsonl#{len(names) + i}"):
            assert fragment in got[key], (names[i], got[key])
    stored = [p.read_bytes() for p in (tmp_path / "home" / "images").rglob("*") if p.is_file()]
    assert stored == [real_png(31)], "no image from outside the folder may be stored"


def test_scienceqa_image_names_that_leave_the_folder_are_refused(tmp_path, outside):
    folder = tmp_path / "sqa"
    (folder / "images" / "train" / "1").mkdir(parents=True)
    (folder / "images" / "train" / "1" / "image.png").write_bytes(real_png(32))
    (folder / "images" / "train" / "2").symlink_to(outside)
    (folder / "images" / "train" / "3").mkdir()
    (folder / "images" / "train" / "3" / "image.png").symlink_to(outside / "picture.png")
    cases = {
        "1": ({"image": "image.png"}, None),
        "2": ({"image": "picture.png"}, "escapes the folder"),
        "3": ({"image": "image.png"}, "escapes the folder"),
        "4": ({"image": "../../../secret/picture.png"}, "not a plain file name"),
        "5": ({"image": "/etc/passwd"}, "not a plain file name"),
        "6": ({"image": ".."}, "not a plain file name"),
        "7": ({"image": "image.png", "split": "../../.."}, "cannot locate the image folder"),
        "8": ({"image": "image.png", "split": None}, "cannot locate the image folder"),
        "../../secret": ({"image": "picture.png"}, "cannot locate the image folder"),
        "9": ({"image": ["image.png"]}, "not a plain file name"),
    }
    problems = {qid: _sqa_item(i, **changes) for i, (qid, (changes, _)) in enumerate(cases.items())}
    (folder / "problems.json").write_text(json.dumps(problems))
    questions, quarantine = land(tmp_path, f"scienceqa:{folder}")
    assert questions["source_key"].to_list() == ["problems.json#0"]
    got = reasons(quarantine)
    for position, (qid, (_, fragment)) in enumerate(cases.items()):
        if fragment is not None:
            assert fragment in got[f"problems.json#{position}"], (qid, got[f"problems.json#{position}"])


def test_stem_parquet_image_structs_never_follow_their_path(tmp_path):
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = STEM_SCHEMA.set(STEM_SCHEMA.get_field_index("problem_pic"), pa.field("problem_pic", struct))
    row = {**stem_rows(1)[0], "problem_pic": {"bytes": None, "path": "/etc/passwd"}}
    shard = tmp_path / "valid-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=schema), shard)
    questions, quarantine = land(tmp_path, f"stem-parquet:{shard}")
    assert questions.height == 0
    assert reasons(quarantine) == {"valid-00000-of-00001.parquet#0": "question image is missing"}


def _land_releasing_a_blocked_fifo(tmp_path: Path, spec_text: str, fifo: Path, seconds: float = 5.0):
    """Land in a thread; if it is still running after ``seconds`` (blocked opening the FIFO),
    open the FIFO's write end and close it so the reader sees end of file. (blocked, result)."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = land(tmp_path, spec_text)
        except BaseException as exc:  # reported by the test
            result["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    blocked = worker.is_alive()
    if blocked:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(30)
    return blocked, result


def test_a_fifo_beside_a_jsonl_file_neither_blocks_nor_is_read(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    os.mkfifo(folder / "pipe.png")
    (folder / "ok.png").write_bytes(real_png(33))
    base = {"options": ["x", "y"], "answer": 0, "subject": "science", "skill": "s"}
    path = folder / "q.jsonl"
    path.write_text(json.dumps({**base, "question": "pipe", "image": "pipe.png"}) + "\n"
                    + json.dumps({**base, "question": "ok", "image": "ok.png"}) + "\n")
    blocked, result = _land_releasing_a_blocked_fifo(tmp_path, f"jsonl:{path}", folder / "pipe.png")
    assert not blocked, "landing the source blocked on a FIFO in its folder"
    questions, quarantine = result["value"]
    assert questions["source_key"].to_list() == ["q.jsonl#1"]
    assert "not a regular file" in reasons(quarantine)["q.jsonl#0"]


def test_unreadable_source_paths_are_one_line_start_up_errors(tmp_path):
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.jsonl")
        with pytest.raises(ImportSourceError, match="is not a file"):
            iter_import_records(parse_source_spec(f"jsonl:{tmp_path / 'fifo.jsonl'}"), ImageStore(tmp_path / "i"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportSourceError, match="no .parquet shards"):
        iter_import_records(parse_source_spec(f"stem-parquet:{tmp_path / 'empty'}"), ImageStore(tmp_path / "i"))
