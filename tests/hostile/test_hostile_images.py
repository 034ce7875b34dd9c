"""Hostile images: decompression bombs and oversized files are refused by the ImageStore with a
reason, and quarantined (never stored, never fatal) by every importer.

The bombs are real files: PNGs whose header declares far more pixels than the few bytes on
disk, a PNG whose zlib stream really inflates to 49 megapixels (147 MB), a GIF declaring a 65535 x
65535 screen, PNGs with a zTXt or iCCP chunk inflating to 100 MB, and files over the byte
limit. The same builders serve the crawled-site tests in ``test_hostile_site.py``.
"""

from __future__ import annotations

import json
import time

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.store.home import DataHome
from pipelines.store.images import (
    MAX_PIXELS,
    ImageRejected,
    ImageStore,
    inspect_image,
)
from pipelines.ingest.stage import land_source
from pipelines.ingest.spec import parse_source_spec
from support.images import bomb_images, oversized_png, real_png


# ---------------------------------------------------------------- the ImageStore


def test_image_store_refuses_every_bomb_with_a_one_line_reason(tmp_path):
    store = ImageStore(tmp_path / "images")
    for name, (data, word) in bomb_images().items():
        started = time.monotonic()
        with pytest.raises(ImageRejected) as caught:
            store.put(data)
        reason = str(caught.value)
        assert word in reason.lower(), (name, reason)
        assert "\n" not in reason and len(reason) < 400, name
        assert time.monotonic() - started < 5, f"{name} took too long to refuse"
    assert not any(p.is_file() for p in (tmp_path / "images").rglob("*")), "nothing refused may be stored"
    assert 7000 * 7000 > MAX_PIXELS  # the 49-megapixel bomb is refused by our limit, not only by Pillow's


def test_oversized_image_is_refused_before_decoding(tmp_path):
    store = ImageStore(tmp_path / "images")
    with pytest.raises(ImageRejected, match="exceeds"):
        store.put(oversized_png())
    # just under the pixel limit still passes: the limits are limits, not a ban on large images
    ok = inspect_image(real_png(4, 64))
    assert (ok.width, ok.height, ok.format) == (64, 64, "png")


# ---------------------------------------------------------------- the importers


def _quarantine(home: DataHome, spec) -> pl.DataFrame:
    outcome = land_source(spec, home, ImageStore(home.images))
    return outcome, pl.read_parquet(outcome.quarantine_file), pl.read_parquet(outcome.question_file)


def test_jsonl_importer_quarantines_bombs_and_keeps_the_rest(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    bombs = bomb_images()
    lines = []
    for i, (name, (data, _)) in enumerate(bombs.items()):
        (folder / f"{name}.img").write_bytes(data)
        lines.append({"question": f"Bomb {i}?", "options": ["a", "b"], "answer": 0, "subject": "math",
                      "skill": "bombs", "image": f"{name}.img"})
    (folder / "big.png").write_bytes(oversized_png())
    lines.append({"question": "Big?", "options": ["a", "b"], "answer": 1, "subject": "math", "skill": "bombs",
                  "image": "big.png"})
    (folder / "good.png").write_bytes(real_png(5))
    lines.append({"question": "Good?", "options": ["a", "b"], "answer": 1, "subject": "math", "skill": "bombs",
                  "image": "good.png"})
    path = folder / "q.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    home = DataHome(tmp_path / "home")
    outcome, quarantine, questions = _quarantine(home, parse_source_spec(f"jsonl:{path}"))
    assert questions["source_key"].to_list() == [f"q.jsonl#{len(lines) - 1}"]
    reasons = dict(zip(quarantine["source_key"], quarantine["reason"]))
    assert len(reasons) == len(bombs) + 1 and set(quarantine["stage"]) == {"import"}
    for i, (name, (_, word)) in enumerate(bombs.items()):
        assert word in reasons[f"q.jsonl#{i}"].lower(), (name, reasons[f"q.jsonl#{i}"])
    assert "larger than" in reasons[f"q.jsonl#{len(bombs)}"]
    stored = [p for p in home.images.rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in stored] == [real_png(5)]


def test_stem_parquet_importer_quarantines_bomb_rows(tmp_path):
    schema = pa.schema([("subject", pa.string()), ("grade", pa.string()), ("skill", pa.string()),
                        ("pic_choice", pa.bool_()), ("pic_prob", pa.bool_()), ("problem", pa.string()),
                        ("problem_pic", pa.binary()), ("choices", pa.list_(pa.string())),
                        ("choices_pic", pa.list_(pa.binary())), ("answer_idx", pa.int64())])

    def row(problem_pic=None, choices_pic=None):
        return {"subject": "science", "grade": "grade-3", "skill": "magnets", "pic_choice": choices_pic is not None,
                "pic_prob": problem_pic is not None, "problem": "Which?", "problem_pic": problem_pic,
                "choices": None if choices_pic is not None else ["x", "y"], "choices_pic": choices_pic,
                "answer_idx": 0}

    bombs = [data for data, _ in bomb_images().values()]
    rows = [row(problem_pic=b) for b in bombs] + [row(choices_pic=[real_png(6), bombs[0]]), row(problem_pic=real_png(7))]
    shard = tmp_path / "STEM" / "data" / "train-00000-of-00001.parquet"
    shard.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), shard)
    home = DataHome(tmp_path / "home")
    outcome, quarantine, questions = _quarantine(home, parse_source_spec(f"stem-parquet:{tmp_path / 'STEM'}"))
    assert questions["source_key"].to_list() == [f"train-00000-of-00001.parquet#{len(rows) - 1}"]
    assert quarantine.height == len(rows) - 1
    assert all("rejected" in r for r in quarantine["reason"])
    assert any("image of option 1 rejected" in r for r in quarantine["reason"])


def test_scienceqa_importer_quarantines_bomb_images(tmp_path):
    folder = tmp_path / "sqa"
    problems = {}
    for i, (data, _) in enumerate([*bomb_images().values(), (real_png(8), "")]):
        qid = str(1000 + i)
        (folder / "images" / "train" / qid).mkdir(parents=True)
        (folder / "images" / "train" / qid / "image.png").write_bytes(data)
        problems[qid] = {"question": f"Q{i}?", "choices": ["a", "b"], "answer": 1, "subject": "natural science",
                         "grade": "grade3", "category": "Magnets", "split": "train", "image": "image.png"}
    (folder / "problems.json").write_text(json.dumps(problems))
    home = DataHome(tmp_path / "home")
    outcome, quarantine, questions = _quarantine(home, parse_source_spec(f"scienceqa:{folder}"))
    n = len(problems)
    assert questions["source_key"].to_list() == [f"problems.json#{n - 1}"]
    assert quarantine.height == n - 1 and all("question image rejected" in r for r in quarantine["reason"])
