"""The tag stage's row reuse (pipelines/profiles/stage.py): a rebuild writes the bytes a fresh
build writes, with and without manual tags (the rows of one question come from both)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipelines.profiles.cogme import tagger
from pipelines.profiles.cogme.taxonomy import load_taxonomy
from pipelines.profiles.stage import TAG_ORDER, tag_stage
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table

PROBLEMS = ["How many apples are on the table?", "Which shape is a circle?", "What happens when ice melts?",
            "Which animal lives in water?", "What time does the clock show?", "Compute 3 \\times 4."]


def questions(n: int, edited: frozenset = frozenset(), gone: frozenset = frozenset()) -> pl.DataFrame:
    rows = [{
        "question_id": f"q{i:04d}", "subject": ["math", "science"][i % 2], "grade": "grade-2", "skill": f"skill-{i % 3}",
        "problem": PROBLEMS[i % len(PROBLEMS)] + (" Look again." if i in edited else ""),
        "pic_prob": True, "pic_choice": i % 4 == 0, "num_choices": 3, "choices": ["one", "two", f"three {i % 5}"],
    } for i in range(n) if i not in gone]
    return pl.DataFrame(rows, schema={
        "question_id": pl.String, "subject": pl.String, "grade": pl.String, "skill": pl.String, "problem": pl.String,
        "pic_prob": pl.Boolean, "pic_choice": pl.Boolean, "num_choices": pl.Int64, "choices": pl.List(pl.String)})


def build(root: Path, frame: pl.DataFrame, manual: str = "") -> tuple[bytes, dict]:
    home = DataHome(root)
    home.lake.mkdir(parents=True, exist_ok=True)
    write_table(frame, home.lake_path("questions"))
    _, figures = tag_stage(home, BuildSettings(home=str(root), manual_tags=manual))
    return home.lake_path("question_tags").read_bytes(), figures


@pytest.mark.parametrize("with_manual", [False, True])
def test_rebuild_writes_what_a_fresh_build_writes(tmp_path, with_manual):
    manual = ""
    if with_manual:
        path = tmp_path / "manual.csv"
        path.write_text("question_id,target,content,thinking\nq0003,Object;Time,Identity,Grasping\n"
                        "q0010,Number/Quantity,Quantity,Reasoning\nq0020,Shape/Figure,Feature,Grasping\n")
        manual = str(path)
    build(tmp_path / "home", questions(60), manual)
    changed = questions(60, edited=frozenset({3, 7, 41}), gone=frozenset({10, 11}))
    rebuilt, figures = build(tmp_path / "home", changed, manual)
    assert (figures["rows_reused"], figures["rows_computed"]) == (55, 3)
    fresh, _ = build(tmp_path / "fresh", changed, manual)
    assert rebuilt == fresh
    tags = pl.read_parquet(tmp_path / "home" / "lake" / "question_tags.parquet")
    assert tags.equals(tags.sort(TAG_ORDER))


def test_tagging_in_batches_gives_the_same_tags(monkeypatch):
    stem = load_taxonomy("stem")
    frame = questions(25)
    whole = tagger.tag_questions(frame, stem, workers=1)
    monkeypatch.setattr(tagger, "TAG_BATCH_ROWS", 4)
    assert tagger.tag_questions(frame, stem, workers=1).equals(whole)
