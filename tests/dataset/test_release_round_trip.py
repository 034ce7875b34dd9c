"""A STEM release built here, re-imported with ``stem-parquet:``, keeps its train/valid/test,
its option order and its test answers; the release's own preds.txt (one line per test row)
imports (issue 28, item 5)."""

from __future__ import annotations

import json

import pytest

from pipelines.evaluation.stage import import_predictions_file, scored_frame
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.builds import home_instance


@pytest.mark.slow
def test_a_release_round_trip(tmp_path):
    first = DataHome(tmp_path / "release-home")
    with home_instance(first):
        built = run_build(BuildSettings(home=str(first.root), demo_questions=120, models=("random",)), progress=False)
    assert built.success, built.summary
    release = first.export.parent
    splits = dict(run_query(first, "SELECT split, count(*) FROM questions GROUP BY 1").rows)

    second = DataHome(tmp_path / "reimport")
    with home_instance(second):
        again = run_build(BuildSettings(home=str(second.root), sources=(f"stem-parquet:{release}",), models=("random",)),
                          progress=False)
        assert again.success, again.summary
        assert "failed" not in again.summary
        moved = run_query(second, "SELECT count(*) FROM questions WHERE split <> source_split").rows[0][0]
        assert moved == 0  # every question keeps the release's split
        reshuffled = run_query(second, "SELECT count(*) FROM questions WHERE shuffle <> 'kept-order:release'").rows[0][0]
        assert reshuffled == 0
        got = dict(run_query(second, "SELECT split, count(*) FROM questions GROUP BY 1").rows)
        assert all(got[s] <= splits[s] for s in splits)  # dedup may merge rows, never move them
        unkeyed = run_query(second, "SELECT count(*) FROM questions WHERE answer_idx < 0").rows[0][0]
        assert unkeyed == 0  # the test answers come from the release's test_answer_key.jsonl

        key = [json.loads(line) for line in (release / "test_answer_key.jsonl").read_text().splitlines()]
        assert len(key) == splits["test"]
        preds = tmp_path / "preds.txt"
        preds.write_text("".join(f"{r['answer_idx']}\n" for r in key))  # the release's answers, as a model
        figures = import_predictions_file(second, preds, "oracle")
        assert figures["rows"] == got["test"]
        scored = scored_frame(second).filter((scored_frame(second)["model"] == "oracle"))
        assert scored.height == got["test"] and bool(scored["correct"].all())
