"""The image index and dedup say their progress (issue 28, item 6): pictures indexed of all, and
dedup's phases (exact groups, candidate pairs judged of all, groups, families); the percent only
moves forward and ends at 100%, the counts at their totals."""

from __future__ import annotations

import io
import re

import polars as pl
from PIL import Image, ImageDraw

from pipelines.clean import stage as clean_stage
from pipelines.clean.dedup import dedup as dedup_module
from pipelines import progress as progress_module
from pipelines.progress import ForwardProgress
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.lake import lake, write_table
from pipelines.store.records import RAW_QUESTION_SCHEMA

LINE = re.compile(r"^(\w+): (\d+)%(?: \((.*)\))?$")


def _picture(seed: int, fmt: str = "PNG", **options) -> bytes:
    image = Image.new("RGB", (96, 72), "white")
    draw = ImageDraw.Draw(image)
    for k in range(4):
        x, y = (seed * 37 + k * 23) % 80, (seed * 53 + k * 29) % 56
        draw.rectangle([x, y, x + 10 + k * 3, y + 8 + k * 2], outline="black", width=2)
    draw.line([0, seed % 72, 95, (seed * 7) % 72], fill="black", width=2)
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def _home(tmp_path, pictures: int, copies: int) -> DataHome:
    """A lake of ``pictures`` questions with a picture each (one text and option set: one block),
    the first ``copies`` repeated with their picture re-encoded (near duplicates)."""
    home = DataHome(tmp_path / "home")
    home.lake.mkdir(parents=True)
    store = ImageStore(home.images)
    rows = []
    for i in range(pictures + copies):
        data = _picture(i) if i < pictures else _picture(i - pictures, compress_level=1)
        name = store.put(data).image_hash
        rows.append({"source": "site", "source_key": f"q{i:04d}", "subject": "math", "grade": "grade-3",
                     "skill": f"s{i % 40}", "problem": "Which shape is drawn?",
                     "problem_image": name, "choices": ["a square", "a circle"], "choice_images": None,
                     "answer_idx": 0, "source_split": None, "extra": "{}"})
    write_table(pl.DataFrame(rows, schema=pl.Schema(RAW_QUESTION_SCHEMA)), lake(home, "multimodal"))
    return home


def _said(lines: list[str], desc: str) -> list[tuple[int, str]]:
    out = []
    for line in lines:
        found = LINE.match(line)
        assert found and found.group(1) == desc, line
        out.append((int(found.group(2)), found.group(3) or ""))
    return out


def _forward(said: list[tuple[int, str]]) -> None:
    percents = [p for p, _ in said]
    assert percents == sorted(set(percents)) and percents[-1] == 100, said  # forward only, to 100%
    assert all(p < 100 for p in percents[:-1])


def test_the_image_index_says_pictures_indexed_of_all(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "EVERY_SECONDS", 0.0)  # every percent moved is said
    home = _home(tmp_path, pictures=600, copies=0)
    lines: list[str] = []
    clean_stage._image_index(home, lines.append)
    said = _said(lines, "image_index")
    _forward(said)
    done = [int(re.fullmatch(r"pictures indexed (\d+)/600", d).group(1)) for _, d in said]
    assert done == sorted(done) and len(done) >= 3  # batches of 256
    assert said[-1][1] == "pictures indexed 600/600"
    # a rebuild with every picture known: straight to 100%
    lines.clear()
    clean_stage._image_index(home, lines.append)
    assert lines == ["image_index: 100% (pictures indexed 600/600)"]


def test_dedup_says_its_phases_and_the_pairs_judged(tmp_path, monkeypatch):
    monkeypatch.setattr(dedup_module, "CONFIRM_PART", 2)
    monkeypatch.setattr(progress_module, "EVERY_SECONDS", 0.0)
    home = _home(tmp_path, pictures=30, copies=8)
    clean_stage._image_index(home)
    lines: list[str] = []
    figures = clean_stage._dedup(home, BuildSettings(), lines.append)
    assert figures["duplicates"] == 8
    said = _said(lines, "dedup")
    _forward(said)
    details = [d for _, d in said]
    assert details[0].startswith("exact groups 38 of 38 records")
    judged = [tuple(int(x.replace(",", "")) for x in m.groups())
              for m in (re.search(r"candidate pairs judged ([\d,]+)/([\d,]+)", d) for d in details) if m]
    assert len(judged) >= 3 and [d for d, _ in judged] == sorted(d for d, _ in judged)
    assert judged[-1][0] == judged[-1][1] > 0  # every candidate pair judged
    assert any(d.startswith("families ") for d in details)
    assert details[-1] == "30 kept of 38"


def test_the_percent_never_goes_back_and_waits_for_the_end(monkeypatch):
    lines: list[str] = []
    progress = ForwardProgress("work", log=lines.append, every=0.0)
    for share in (0.1, 0.3, 0.2, 0.999, 1.0, 0.5):
        progress.advance(share)
    assert [int(LINE.match(line).group(2)) for line in lines] == [10, 30, 99]  # 100% only when complete
    progress.count(7, 7, "things")
    assert lines[-1] == "work: 100% (things 7/7)"
    quiet = ForwardProgress("work", log=lines.append, every=3600.0)
    quiet.advance(0.1)
    quiet.advance(0.5)
    quiet.close(complete=True)
    assert lines[-2:] == ["work: 10%", "work: 100%"]  # at most one line per ``every``, and the end
